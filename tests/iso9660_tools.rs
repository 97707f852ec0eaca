//! The ISO 9660 writer checked by the tools that consume its images in real life: `blkid` (the
//! label the installer looks for), `xorriso` and `bsdtar` (Rock Ridge names, modes, times and
//! contents), `isoinfo` (Rock Ridge signatures and plain 8.3 identifiers). Every image is also read
//! back with our own `IsoReader`, and the reader is pointed at images the tools wrote. A missing
//! tool skips its test loudly, and fails it when `CI` is set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

mod common;

use ibi::iso9660::{IsoBuilder, IsoReader, WriteOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

const TIMESTAMP: i64 = 1_700_000_000;
const LABEL: &str = "cluster-config";

/// One node of an expected tree: permission bits and, for files, contents.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Want {
    Dir(u32),
    File(u32, Vec<u8>),
}

type TreeMap = BTreeMap<String, Want>;

/// Runs a tool and returns (stdout, stderr), failing the test on a non-zero exit.
fn run(name: &str, args: &[&str]) -> (String, String) {
    let exe = common::tool_path(name).unwrap_or_else(|| PathBuf::from(name));
    let out = Command::new(&exe)
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{name} {args:?} failed: {stderr}");
    (stdout.into_owned(), stderr.into_owned())
}

fn opts() -> WriteOptions {
    WriteOptions {
        volume_id: LABEL.to_string(),
        timestamp: TIMESTAMP,
    }
}

fn long_name(len: usize) -> String {
    let stem = "n".repeat(len - 5);
    format!("{stem}.yaml")
}

/// The tree most tests use: long names, empty file and directory, multi-block files, deep nesting,
/// mangling collisions and assorted modes.
fn sample_tree() -> Vec<(String, Want)> {
    vec![
        (
            "hello.txt".to_string(),
            Want::File(0o644, b"hello\n".to_vec()),
        ),
        (
            "exec.sh".to_string(),
            Want::File(0o755, b"#!/bin/sh\n".to_vec()),
        ),
        (
            "with space.txt".to_string(),
            Want::File(0o600, b"space".to_vec()),
        ),
        (
            format!("long/{}", long_name(100)),
            Want::File(0o600, b"one hundred".to_vec()),
        ),
        (
            format!("long/{}", long_name(255)),
            Want::File(0o640, b"two fifty five".to_vec()),
        ),
        (
            format!("long/{}", long_name(254)),
            Want::File(0o640, b"collides".to_vec()),
        ),
        (
            "long/longname-1.yaml".to_string(),
            Want::File(0o644, b"1".to_vec()),
        ),
        (
            "long/longname-2.yaml".to_string(),
            Want::File(0o644, b"2".to_vec()),
        ),
        ("empty/file".to_string(), Want::File(0o644, Vec::new())),
        ("empty/dir".to_string(), Want::Dir(0o700)),
        (
            "data/three-blocks.bin".to_string(),
            Want::File(0o644, pattern(3 * 2048)),
        ),
        (
            "data/just-over-two.bin".to_string(),
            Want::File(0o644, pattern(2 * 2048 + 1)),
        ),
        (
            "a/b/c/d/e/f/g/h/i/j/deep.txt".to_string(),
            Want::File(0o644, b"deep".to_vec()),
        ),
        ("a/b/c/d/e/f/g/h/i/j/k".to_string(), Want::Dir(0o750)),
        ("a".to_string(), Want::Dir(0o711)),
    ]
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

fn many_files(count: usize) -> Vec<(String, Want)> {
    let file = |i: usize| Want::File(0o644, format!("file {i}\n").into_bytes());
    (0..count)
        .map(|i| (format!("manifests/manifest-{i:04}.yaml"), file(i)))
        .collect()
}

fn builder(items: &[(String, Want)]) -> IsoBuilder {
    let mut b = IsoBuilder::new();
    for (path, want) in items {
        match want {
            Want::Dir(mode) => b.add_dir(path, *mode).unwrap(),
            Want::File(mode, data) => b.add_file(path, data.clone(), *mode).unwrap(),
        }
    }
    b
}

/// The tree a reader should see: the items plus parents created implicitly with 0o755.
fn expected(items: &[(String, Want)]) -> TreeMap {
    let mut out = TreeMap::new();
    for (path, want) in items {
        let parts: Vec<&str> = path.split('/').collect();
        for i in 1..parts.len() {
            out.entry(parts[..i].join("/")).or_insert(Want::Dir(0o755));
        }
        out.insert(path.clone(), want.clone());
    }
    out
}

fn write_image(dir: &Path, name: &str, b: &IsoBuilder, opts: &WriteOptions) -> PathBuf {
    let path = dir.join(name);
    b.write(opts, fs::File::create(&path).unwrap()).unwrap();
    path
}

/// Reads an extracted directory tree from disk, checking every mtime is the image timestamp.
fn disk_tree(root: &Path) -> TreeMap {
    let mut out = TreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            assert_eq!(meta.mtime(), TIMESTAMP, "mtime of {rel}");
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                stack.push(path.clone());
                out.insert(rel, Want::Dir(mode));
            } else {
                out.insert(rel, Want::File(mode, fs::read(&path).unwrap()));
            }
        }
    }
    out
}

/// The tree as our own reader sees it; every image in these tests carries LABEL and Rock Ridge.
fn own_tree(image: &Path) -> TreeMap {
    let mut r = IsoReader::open(fs::File::open(image).unwrap()).unwrap();
    assert_eq!(r.volume_id(), LABEL);
    assert!(r.has_rock_ridge());
    let mut out = TreeMap::new();
    for e in r.walk().unwrap() {
        let mode = e.mode.unwrap() & 0o7777;
        let want = if e.is_dir {
            Want::Dir(mode)
        } else {
            Want::File(mode, r.read_entry(&e).unwrap())
        };
        out.insert(e.path, want);
    }
    out
}

fn assert_same_tree(got: &TreeMap, want: &TreeMap, who: &str) {
    let got_paths: BTreeSet<&String> = got.keys().collect();
    let want_paths: BTreeSet<&String> = want.keys().collect();
    assert_eq!(got_paths, want_paths, "{who}: paths");
    for (path, w) in want {
        assert!(
            got[path] == *w,
            "{who}: {path} differs: got {:?}, want {:?}",
            short(&got[path]),
            short(w)
        );
    }
}

/// Keeps assertion messages readable when file contents are large.
fn short(w: &Want) -> String {
    match w {
        Want::Dir(m) => format!("dir {m:o}"),
        Want::File(m, d) => format!("file {m:o} ({} bytes)", d.len()),
    }
}

#[test]
fn blkid_reports_exact_label_and_type() {
    if !common::tool("blkid", "blkid_reports_exact_label_and_type") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let labels = [LABEL, "MixedCase_Label-2", "with space", &"x".repeat(32)];
    for (i, label) in labels.iter().enumerate() {
        let o = WriteOptions {
            volume_id: label.to_string(),
            timestamp: TIMESTAMP,
        };
        let img = write_image(
            tmp.path(),
            &format!("{i}.iso"),
            &builder(&sample_tree()),
            &o,
        );
        let img = img.to_str().unwrap();
        let (got, _) = run("blkid", &["-p", "-o", "value", "-s", "LABEL", img]);
        assert_eq!(got.trim_end_matches('\n'), *label, "LABEL");
        let (got, _) = run("blkid", &["-p", "-o", "value", "-s", "TYPE", img]);
        assert_eq!(got.trim(), "iso9660", "TYPE of {label}");
    }
}

#[test]
fn isoinfo_sees_rock_ridge_names_and_8_3_identifiers() {
    if !common::tool(
        "isoinfo",
        "isoinfo_sees_rock_ridge_names_and_8_3_identifiers",
    ) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let items = sample_tree();
    let img = write_image(tmp.path(), "t.iso", &builder(&items), &opts());
    let img = img.to_str().unwrap();
    let (info, _) = run("isoinfo", &["-d", "-i", img]);
    assert!(info.contains(&format!("Volume id: {LABEL}\n")), "{info}");
    assert!(
        info.contains("Rock Ridge signatures version 1 found"),
        "{info}"
    );
    assert!(info.contains("NO Joliet present"), "{info}");
    let (rr, _) = run("isoinfo", &["-R", "-f", "-i", img]);
    let rr_paths: BTreeSet<String> = rr
        .lines()
        .map(|l| l.trim_start_matches('/').to_string())
        .collect();
    assert_eq!(
        rr_paths,
        expected(&items).into_keys().collect(),
        "isoinfo -R -f"
    );
    for name in [long_name(100), long_name(255)] {
        let (data, _) = run(
            "isoinfo",
            &["-R", "-x", &format!("/long/{name}"), "-i", img],
        );
        assert!(
            data == "one hundred" || data == "two fifty five",
            "{name}: {data:?}"
        );
    }
    let (plain, _) = run("isoinfo", &["-f", "-i", img]);
    for line in plain.lines() {
        let last = line.rsplit('/').next().unwrap();
        let (stem, ext) = last
            .trim_end_matches(";1")
            .split_once('.')
            .unwrap_or((last, ""));
        let d_chars = |s: &str| {
            s.bytes()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
        };
        assert!(
            stem.len() <= 8 && ext.len() <= 3 && d_chars(stem) && d_chars(ext),
            "{line}"
        );
    }
    for id in [
        "/LONG/LONGNAME.YAM;1",
        "/LONG/LONGNA00.YAM;1",
        "/LONG/NNNNNNNN.YAM;1",
        "/LONG/NNNNNN00.YAM;1",
    ] {
        assert!(plain.lines().any(|l| l == id), "{id} in\n{plain}");
    }
}

#[test]
fn xorriso_lists_and_extracts_identical_tree() {
    if !common::tool("xorriso", "xorriso_lists_and_extracts_identical_tree") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let items = sample_tree();
    let want = expected(&items);
    let img = write_image(tmp.path(), "t.iso", &builder(&items), &opts());
    let img = img.to_str().unwrap();
    let (listing, stderr) = run(
        "xorriso",
        &[
            "-report_about",
            "WARNING",
            "-indev",
            img,
            "-find",
            "/",
            "-exec",
            "lsdl",
        ],
    );
    assert_no_complaints(&stderr);
    let listed: BTreeMap<String, String> = listing.lines().filter_map(parse_lsdl).collect();
    let mut want_listed: BTreeMap<String, String> = want
        .iter()
        .map(|(p, w)| (p.clone(), mode_string(w)))
        .collect();
    want_listed.insert(String::new(), "drwxr-xr-x".to_string());
    assert_eq!(listed, want_listed, "xorriso -find / -exec lsdl");
    let out = tmp.path().join("x");
    let (_, stderr) = run(
        "xorriso",
        &[
            "-report_about",
            "WARNING",
            "-osirrox",
            "on",
            "-indev",
            img,
            "-extract",
            "/",
            out.to_str().unwrap(),
        ],
    );
    assert_no_complaints(&stderr);
    assert_same_tree(&disk_tree(&out), &want, "xorriso -extract");
}

fn assert_no_complaints(stderr: &str) {
    for word in ["WARNING", "SORRY", "FAILURE", "FATAL"] {
        assert!(!stderr.contains(word), "xorriso complained:\n{stderr}");
    }
}

/// `-rw-r--r--    1 0 0   6 Nov 14  2023 '/hello.txt'` → ("hello.txt", "-rw-r--r--").
fn parse_lsdl(line: &str) -> Option<(String, String)> {
    let (mode, _) = line.split_once(' ')?;
    let quoted = line.split_once('\'')?.1.strip_suffix('\'')?;
    Some((quoted.trim_start_matches('/').to_string(), mode.to_string()))
}

fn mode_string(w: &Want) -> String {
    let (kind, mode) = match w {
        Want::Dir(m) => ('d', *m),
        Want::File(m, _) => ('-', *m),
    };
    let bits = "rwxrwxrwx".chars().enumerate();
    let perms: String = bits
        .map(|(i, c)| if mode & (0o400 >> i) != 0 { c } else { '-' })
        .collect();
    format!("{kind}{perms}")
}

#[test]
fn bsdtar_lists_and_extracts_identical_tree() {
    if !common::tool("bsdtar", "bsdtar_lists_and_extracts_identical_tree") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let items = sample_tree();
    let want = expected(&items);
    let img = write_image(tmp.path(), "t.iso", &builder(&items), &opts());
    let img = img.to_str().unwrap();
    let (listing, _) = run("bsdtar", &["-tf", img]);
    let names: BTreeSet<String> = listing
        .lines()
        .map(|l| l.trim_start_matches("./").trim_end_matches('/').to_string())
        .filter(|l| l != "." && !l.is_empty())
        .collect();
    assert_eq!(names, want.keys().cloned().collect(), "bsdtar -tf");
    let out = tmp.path().join("x");
    fs::create_dir(&out).unwrap();
    run("bsdtar", &["-xpf", img, "-C", out.to_str().unwrap()]);
    assert_same_tree(&disk_tree(&out), &want, "bsdtar -xpf");
}

#[test]
fn directory_of_500_files_spans_sectors() {
    let test = "directory_of_500_files_spans_sectors";
    let tmp = tempfile::tempdir().unwrap();
    let items = many_files(500);
    let want = expected(&items);
    let img = write_image(tmp.path(), "many.iso", &builder(&items), &opts());
    let mut r = IsoReader::open(fs::File::open(&img).unwrap()).unwrap();
    assert!(
        r.find("manifests").unwrap().size > 10 * 2048,
        "directory spans many sectors"
    );
    assert_same_tree(&own_tree(&img), &want, "IsoReader");
    let img = img.to_str().unwrap();
    if common::tool("xorriso", test) {
        let args = [
            "-report_about",
            "WARNING",
            "-indev",
            img,
            "-find",
            "/manifests",
            "-type",
            "f",
        ];
        let (listing, stderr) = run("xorriso", &args);
        assert_no_complaints(&stderr);
        assert_eq!(listing.lines().count(), 500, "xorriso -find");
    }
    if common::tool("bsdtar", test) {
        let out = tmp.path().join("x");
        fs::create_dir(&out).unwrap();
        run("bsdtar", &["-xpf", img, "-C", out.to_str().unwrap()]);
        assert_same_tree(&disk_tree(&out), &want, "bsdtar -xpf");
    }
}

/// Our reader on our images needs no tool, so it runs everywhere.
#[test]
fn own_reader_reads_back_sample_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let items = sample_tree();
    let img = write_image(tmp.path(), "t.iso", &builder(&items), &opts());
    assert_same_tree(&own_tree(&img), &expected(&items), "IsoReader");
    let mut r = IsoReader::open(fs::File::open(&img).unwrap()).unwrap();
    // 100-, 254- and 255-character names share NNNNNNNN.YAM; in name order the last is 01.
    let collided = r.find_iso("long/nnnnnn01.yam").unwrap();
    assert_eq!(collided.path, format!("long/{}", long_name(255)));
    assert_eq!(r.read_file(&collided.path).unwrap(), b"two fifty five");
}

#[test]
fn identical_content_gives_identical_bytes() {
    let items = sample_tree()
        .into_iter()
        .chain(many_files(50))
        .collect::<Vec<_>>();
    let mut reversed = items.clone();
    reversed.reverse();
    let image = |items: &[(String, Want)], o: &WriteOptions| {
        let mut out = Vec::new();
        builder(items).write(o, &mut out).unwrap();
        out
    };
    let forward = image(&items, &opts());
    assert!(
        forward == image(&reversed, &opts()),
        "insertion order must not change the bytes"
    );
    let later = WriteOptions {
        timestamp: TIMESTAMP + 1,
        ..opts()
    };
    assert!(
        forward != image(&items, &later),
        "the timestamp is recorded"
    );
    let relabeled = WriteOptions {
        volume_id: "other".to_string(),
        ..opts()
    };
    assert!(
        forward != image(&items, &relabeled),
        "the label is recorded"
    );
    assert_eq!(forward.len() % 2048, 0, "whole blocks");
}

/// Our reader on images the tools wrote: Joliet, libisofs Rock Ridge, and genisoimage's
/// relocation of directories deeper than 8 levels (RRIP CL/RE).
#[test]
fn reader_reads_images_written_by_tools() {
    let test = "reader_reads_images_written_by_tools";
    if !common::tool("xorriso", test) || !common::tool("genisoimage", test) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let items = sample_tree();
    let want = expected(&items);
    let src = tmp.path().join("src");
    materialize(&src, &want);
    let src = src.to_str().unwrap();
    let by_xorriso = tmp.path().join("xorriso.iso");
    let args = [
        "-as",
        "mkisofs",
        "-quiet",
        "-R",
        "-J",
        "-V",
        LABEL,
        "-o",
        by_xorriso.to_str().unwrap(),
        src,
    ];
    run("xorriso", &args);
    let by_genisoimage = tmp.path().join("genisoimage.iso");
    run(
        "genisoimage",
        &[
            "-quiet",
            "-R",
            "-V",
            LABEL,
            "-o",
            by_genisoimage.to_str().unwrap(),
            src,
        ],
    );
    for (img, who) in [
        (by_xorriso, "xorriso -as mkisofs"),
        (by_genisoimage, "genisoimage"),
    ] {
        let mut got = own_tree(&img);
        got.remove("rr_moved"); // genisoimage's relocation directory, empty once CL/RE are resolved
        assert_same_tree(&got, &want, who);
    }
}

/// Writes a tree to disk with the modes and mtimes it should have.
fn materialize(root: &Path, tree: &TreeMap) {
    fs::create_dir_all(root).unwrap();
    for (path, w) in tree {
        let p = root.join(path);
        match w {
            Want::Dir(_) => fs::create_dir_all(&p).unwrap(),
            Want::File(_, data) => {
                fs::create_dir_all(p.parent().unwrap()).unwrap();
                fs::write(&p, data).unwrap();
            }
        }
    }
    for (path, w) in tree.iter().rev() {
        let mode = match w {
            Want::Dir(m) | Want::File(m, _) => *m,
        };
        fs::set_permissions(root.join(path), fs::Permissions::from_mode(mode)).unwrap();
    }
}
