//! Unit tests of the reader: round trips through the writer, look-ups, and hostile input (truncated,
//! random, mutated, looping images) that must end in errors rather than panics or hangs.

use super::*;
use crate::{IsoBuilder, WriteOptions};
use std::io::Cursor;

const TS: i64 = 1_700_000_000;

fn build(files: &[(&str, &[u8])], dirs: &[&str]) -> Vec<u8> {
    let mut b = IsoBuilder::new();
    for d in dirs {
        b.add_dir(d, 0o750).unwrap();
    }
    for (path, data) in files {
        b.add_file(path, data.to_vec(), 0o640).unwrap();
    }
    let mut out = Vec::new();
    b.write(
        &WriteOptions {
            volume_id: "Test-Vol".into(),
            timestamp: TS,
        },
        &mut out,
    )
    .unwrap();
    out
}

fn sample() -> Vec<u8> {
    let long = format!("{}.yaml", "l".repeat(250));
    let files: Vec<(&str, &[u8])> = vec![
        ("README.md", b"hello"),
        ("etc/config.yaml", b"a: 1\n"),
        ("etc/empty", b""),
        ("etc/deep/er/still/file.bin", &[7u8; 5000]),
    ];
    let mut img_files = files;
    let long_path = format!("etc/{long}");
    img_files.push((&long_path, b"long"));
    build(&img_files, &["var/empty-dir"])
}

fn open(img: &[u8]) -> Result<IsoReader<Cursor<&[u8]>>, IsoError> {
    IsoReader::open(Cursor::new(img))
}

#[test]
fn round_trip_tree_and_contents() {
    let img = sample();
    let mut r = open(&img).unwrap();
    assert_eq!(r.volume_id(), "Test-Vol");
    assert!(r.has_rock_ridge());
    let entries = r.walk().unwrap();
    let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
    let long = format!("etc/{}.yaml", "l".repeat(250));
    let want = vec![
        "README.md",
        "etc",
        "etc/config.yaml",
        "etc/deep",
        "etc/deep/er",
        "etc/deep/er/still",
        "etc/deep/er/still/file.bin",
        "etc/empty",
        &long,
        "var",
        "var/empty-dir",
    ];
    assert_eq!(paths, want);
    for e in &entries {
        let want = match (e.is_dir, e.path.as_str()) {
            (true, "var/empty-dir") => 0o040_750,
            (true, _) => 0o040_755, // created implicitly as a parent
            (false, _) => 0o100_640,
        };
        assert_eq!(e.mode, Some(want), "{}", e.path);
    }
    assert_eq!(
        r.read_file("etc/deep/er/still/file.bin").unwrap(),
        vec![7u8; 5000]
    );
    assert_eq!(r.read_file(&long).unwrap(), b"long");
    assert_eq!(r.read_file("etc/empty").unwrap(), b"");
    assert_eq!(
        r.find("").unwrap().mode,
        Some(0o040_755),
        "root carries PX too"
    );
}

#[test]
fn find_iso_is_case_insensitive_and_version_optional() {
    let img = sample();
    let mut r = open(&img).unwrap();
    let cases = [
        ("ETC/CONFIG.YAM;1", "etc/config.yaml"),
        ("etc/config.yam", "etc/config.yaml"),
        ("/README.MD", "README.md"),
        ("ETC/EMPTY.", "etc/empty"),
        ("ETC/EMPTY", "etc/empty"),
        ("VAR/EMPTY_DI", "var/empty-dir"),
    ];
    for (iso, path) in cases {
        let e = r.find_iso(iso).unwrap();
        assert_eq!(e.path, path, "{iso}");
        assert_eq!(e, r.find(path).unwrap(), "{iso}");
    }
    assert_eq!(
        r.find_iso("ETC/CONFIG.YAM").unwrap().iso_path,
        "ETC/CONFIG.YAM;1"
    );
}

#[test]
fn lookup_errors_name_the_path() {
    let img = sample();
    let mut r = open(&img).unwrap();
    let cases: Vec<(Result<Vec<u8>, IsoError>, &str)> = vec![
        (r.read_file("etc/missing"), "\"etc/missing\" not found"),
        (r.read_file("README.md/x"), "\"README.md/x\" not found"),
        (
            r.read_file("ETC/CONFIG.YAML"),
            "\"ETC/CONFIG.YAML\" not found",
        ),
        (r.read_file("etc"), "\"etc\" is a directory"),
    ];
    for (got, want) in cases {
        let err = got.unwrap_err().to_string();
        assert!(err.contains(want), "{err} should contain {want}");
    }
}

/// Everything a consumer might do with an image; errors are fine, panics and hangs are not.
fn exercise(img: &[u8]) {
    let Ok(mut r) = open(img) else { return };
    let _ = r.volume_id();
    if let Ok(entries) = r.walk() {
        for e in entries.iter().filter(|e| !e.is_dir) {
            let _ = r.read_entry(e);
        }
    }
    let _ = r.find("etc/config.yaml");
    let _ = r.find_iso("ETC/DEEP/ER/STILL/FILE.BIN");
}

#[test]
fn truncated_images_fail_cleanly() {
    let img = sample();
    for len in (0..img.len())
        .step_by(509)
        .chain([0, 1, 16 * 2048, 17 * 2048 - 1, 17 * 2048])
    {
        exercise(&img[..len]);
    }
    let cases: &[(usize, &str)] = &[
        (0, "no primary volume descriptor"),
        (17 * 2048, "past the end"),
    ];
    for (len, want) in cases {
        let err = open(&img[..*len]).unwrap_err().to_string();
        assert!(err.contains(want), "length {len}: {err}");
    }
}

/// A fixed xorshift generator so the "random" inputs are the same on every run.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn random_garbage_fails_cleanly() {
    for seed in 0..64 {
        let mut img = noise(seed, 40 * 2048);
        exercise(&img);
        img[16 * 2048..16 * 2048 + 7].copy_from_slice(b"\x01CD001\x01"); // get past the magic
        img[16 * 2048 + 128..16 * 2048 + 132].copy_from_slice(&[0, 8, 8, 0]);
        exercise(&img);
    }
}

#[test]
fn mutated_metadata_fails_cleanly() {
    let img = sample();
    let r = open(&img).unwrap();
    let meta_end = r.walk_meta_end();
    for pos in 16 * 2048..meta_end {
        for value in [0xff, img[pos] ^ 0x01] {
            let mut m = img.clone();
            m[pos] = value;
            exercise(&m);
        }
    }
}

impl IsoReader<Cursor<&[u8]>> {
    /// End of the metadata (descriptors, path tables, directories, continuation areas): the first
    /// block of file data.
    fn walk_meta_end(mut self) -> usize {
        let entries = self.walk().unwrap();
        let first_data = entries
            .iter()
            .filter(|e| !e.is_dir && e.size > 0)
            .map(|e| e.extent)
            .min();
        first_data.unwrap() as usize * BLOCK_SIZE
    }
}

/// Byte offset of the record named `id` inside the directory at `dir_extent`.
fn record_offset(img: &[u8], dir_extent: u32, id: &[u8]) -> usize {
    let start = dir_extent as usize * BLOCK_SIZE;
    let mut pos = start;
    loop {
        let len = img[pos] as usize;
        if len == 0 {
            pos = (pos + 1).next_multiple_of(BLOCK_SIZE);
            continue;
        }
        if &img[pos + 33..pos + 33 + img[pos + 32] as usize] == id {
            return pos;
        }
        pos += len;
    }
}

#[test]
fn directory_loops_are_detected() {
    let mut img = build(&[("a/b/f", b"x")], &[]);
    let mut r = open(&img).unwrap();
    let (a, b) = (r.find("a").unwrap(), r.find("a/b").unwrap());
    // Point a/b back at a: without loop detection the walk would never end.
    let at = record_offset(&img, a.extent, b"B");
    img[at + 2..at + 10].copy_from_slice(&[a.extent as u8, 0, 0, 0, 0, 0, 0, a.extent as u8]);
    let err = open(&img).unwrap().walk().unwrap_err().to_string();
    assert!(err.contains("directory loop at \"a/b\""), "{err}");
    assert_eq!(b.extent, a.extent + 1);
}

#[test]
fn continuation_loops_are_cut_off() {
    let long = "n".repeat(200);
    let mut img = build(&[(&long, b"x")], &[]);
    let mut r = open(&img).unwrap();
    let root = r.find("").unwrap().extent;
    let at = record_offset(&img, root, b"NNNNNNNN.;1");
    let ce = (at..at + 255).find(|&p| &img[p..p + 2] == b"CE").unwrap();
    let block = u32::from_le_bytes(img[ce + 4..ce + 8].try_into().unwrap()) as usize;
    let offset = u32::from_le_bytes(img[ce + 12..ce + 16].try_into().unwrap()) as usize;
    // Make the continuation area end with a CE pointing at itself.
    let area = block * BLOCK_SIZE + offset;
    let ce_bytes = img[ce..ce + 28].to_vec();
    img[area..area + 28].copy_from_slice(&ce_bytes);
    let err = open(&img).unwrap().walk().unwrap_err().to_string();
    assert!(err.contains("continuation chain"), "{err}");
}

#[test]
fn images_without_rock_ridge_use_iso_names() {
    let mut img = build(&[("dir/config.yaml", b"x")], &[]);
    let root = open(&img).unwrap().find("").unwrap().extent as usize * BLOCK_SIZE;
    // The root "." record's system use area starts at byte 34; break its SP signature.
    assert_eq!(&img[root + 34..root + 36], b"SP");
    img[root + 34] = b'X';
    let mut r = open(&img).unwrap();
    assert!(!r.has_rock_ridge());
    let entries = r.walk().unwrap();
    let paths: Vec<(&str, &str, Option<u32>)> = entries
        .iter()
        .map(|e| (e.path.as_str(), e.iso_path.as_str(), e.mode))
        .collect();
    assert_eq!(
        paths,
        [
            ("DIR", "DIR", None),
            ("DIR/CONFIG.YAM", "DIR/CONFIG.YAM;1", None)
        ]
    );
    assert_eq!(r.read_file("DIR/CONFIG.YAM").unwrap(), b"x");
}

#[test]
fn multi_extent_sections_merge_when_contiguous() {
    let rec = |extent, size, flags| RecordIn {
        extent,
        size,
        flags,
        id: b"BIG.;1".to_vec(),
        su: vec![],
    };
    let merged = merge_multi_extent(vec![rec(10, 4096, 0x80), rec(12, 100, 0)]).unwrap();
    assert_eq!(merged.len(), 1);
    assert_eq!((merged[0].0.extent, merged[0].1), (10, 4196));
    let err = merge_multi_extent(vec![rec(10, 4096, 0x80), rec(20, 100, 0)]).unwrap_err();
    assert!(err.to_string().contains("stray section"), "{err}");
}

#[test]
fn overlapping_metadata_is_cut_off() {
    let img = sample();
    let mut r = open(&img).unwrap();
    assert!(r.walk().is_ok());
    assert!(r.meta_budget < r.meta_limit, "the walk was charged");
    // Simulate an image whose structures overlap: the walk needs more than it may read.
    r.meta_limit = 4 * 2048;
    let err = r.walk().unwrap_err().to_string();
    assert!(err.contains("structures overlap"), "{err}");
    assert!(
        r.find("etc/config.yaml").is_ok(),
        "a look-up reads only its own path"
    );
}
