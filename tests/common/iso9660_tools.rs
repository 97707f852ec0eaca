//! What the tests of tests/fast/iso9660_tools.rs and tests/tools/iso9660_tools.rs share: one file
//! of tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common;
use ibi::iso9660::{IsoBuilder, IsoReader, WriteOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) const TIMESTAMP: i64 = 1_700_000_000;
pub(crate) const LABEL: &str = "cluster-config";

/// One node of an expected tree: permission bits and, for files, contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Want {
    Dir(u32),
    File(u32, Vec<u8>),
}

pub(crate) type TreeMap = BTreeMap<String, Want>;

/// Runs a tool and returns (stdout, stderr), failing the test on a non-zero exit.
pub(crate) fn run(name: &str, args: &[&str]) -> (String, String) {
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

pub(crate) fn opts() -> WriteOptions {
    WriteOptions {
        volume_id: LABEL.to_string(),
        timestamp: TIMESTAMP,
    }
}

pub(crate) fn long_name(len: usize) -> String {
    let stem = "n".repeat(len - 5);
    format!("{stem}.yaml")
}

/// The tree most tests use: long names, empty file and directory, multi-block files, deep nesting,
/// mangling collisions and assorted modes.
pub(crate) fn sample_tree() -> Vec<(String, Want)> {
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

pub(crate) fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 251) as u8).collect()
}

pub(crate) fn many_files(count: usize) -> Vec<(String, Want)> {
    let file = |i: usize| Want::File(0o644, format!("file {i}\n").into_bytes());
    (0..count)
        .map(|i| (format!("manifests/manifest-{i:04}.yaml"), file(i)))
        .collect()
}

pub(crate) fn builder(items: &[(String, Want)]) -> IsoBuilder {
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
pub(crate) fn expected(items: &[(String, Want)]) -> TreeMap {
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

pub(crate) fn write_image(dir: &Path, name: &str, b: &IsoBuilder, opts: &WriteOptions) -> PathBuf {
    let path = dir.join(name);
    b.write(opts, fs::File::create(&path).unwrap()).unwrap();
    path
}

/// Reads an extracted directory tree from disk, checking every mtime is the image timestamp.
pub(crate) fn disk_tree(root: &Path) -> TreeMap {
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
pub(crate) fn own_tree(image: &Path) -> TreeMap {
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

pub(crate) fn assert_same_tree(got: &TreeMap, want: &TreeMap, who: &str) {
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
pub(crate) fn short(w: &Want) -> String {
    match w {
        Want::Dir(m) => format!("dir {m:o}"),
        Want::File(m, d) => format!("file {m:o} ({} bytes)", d.len()),
    }
}

pub(crate) fn assert_no_complaints(stderr: &str) {
    for word in ["WARNING", "SORRY", "FAILURE", "FATAL"] {
        assert!(!stderr.contains(word), "xorriso complained:\n{stderr}");
    }
}

/// `-rw-r--r--    1 0 0   6 Nov 14  2023 '/hello.txt'` → ("hello.txt", "-rw-r--r--").
pub(crate) fn parse_lsdl(line: &str) -> Option<(String, String)> {
    let (mode, _) = line.split_once(' ')?;
    let quoted = line.split_once('\'')?.1.strip_suffix('\'')?;
    Some((quoted.trim_start_matches('/').to_string(), mode.to_string()))
}

pub(crate) fn mode_string(w: &Want) -> String {
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

/// Writes a tree to disk with the modes and mtimes it should have.
pub(crate) fn materialize(root: &Path, tree: &TreeMap) {
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
