//! The ISO 9660 writer checked by the tools that consume its images in real life: `blkid` (the
//! label the installer looks for), `xorriso` and `bsdtar` (Rock Ridge names, modes, times and
//! contents), `isoinfo` (Rock Ridge signatures and plain 8.3 identifiers). Every image is also read
//! back with our own `IsoReader`, and the reader is pointed at images the tools wrote. A missing
//! tool skips its test loudly, and fails it when `CI` is set.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use ibi::iso9660::{IsoReader, WriteOptions};
use std::fs;

use crate::common::iso9660_tools::*;

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
