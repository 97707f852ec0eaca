//! The ISO 9660 writer checked by the tools that consume its images in real life: `blkid` (the
//! label the installer looks for), `xorriso` and `bsdtar` (Rock Ridge names, modes, times and
//! contents), `isoinfo` (Rock Ridge signatures and plain 8.3 identifiers). Every image is also read
//! back with our own `IsoReader`, and the reader is pointed at images the tools wrote. A missing
//! tool skips its test loudly, and fails it when `CI` is set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use ibi::iso9660::{IsoReader, WriteOptions};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;

use crate::common::iso9660_tools::*;

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
