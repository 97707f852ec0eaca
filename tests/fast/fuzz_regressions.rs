//! Regression tests for the fuzz targets (fuzz/, docs/fuzzing.md). Every input a target found to
//! crash, hang or allocate without bound is kept under `tests/fuzz-regressions/<target>/` and
//! replayed here through the very harness code the fuzzer runs (included by path), so a normal
//! `cargo test` proves each stays fixed: no panic, done within a time bound, and no single
//! allocation larger than a fixed bound. Hand-made malformed ISOs (truncated, a directory
//! pointing at itself, an extent past the end, absurd sizes) are built below from a valid image
//! and must end in an error just as promptly.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

#[allow(dead_code)] // the harness also serves fuzz targets this test does not name
#[path = "../../fuzz/src/lib.rs"]
mod harness;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Cursor;
use std::path::Path;
use std::time::{Duration, Instant};

use ibi::iso9660::{IsoBuilder, IsoReader, WriteOptions};

/// Far above what any of these small inputs needs, far below what an untrusted 32-bit size
/// field could ask for: an allocation over this is the bug the fuzzer's malloc limit looks for.
const MAX_ALLOCATION: usize = 64 << 20;
/// Generous for an unoptimized build on a loaded machine; a loop or a bomb takes far longer.
const MAX_TIME: Duration = Duration::from_secs(20);

/// The system allocator, noting the largest single request made on the current thread (tests run
/// on parallel threads, so a global figure would mix them up).
struct Tracking;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: every call is forwarded unchanged to `System`; `note` only touches a const-initialized
// thread-local and never allocates.
#[allow(unsafe_code)] // a test's allocator that measures; ibi's own code has none
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Tracking = Tracking;

type Target = fn(&[u8]) -> Result<(), String>;

/// Runs `target` on `input` and checks the bounds; returns what the target returned.
fn run_bounded(name: &str, target: Target, input: &[u8]) -> Result<(), String> {
    LARGEST.with(|l| l.set(0));
    let start = Instant::now();
    let result = target(input);
    let (elapsed, largest) = (start.elapsed(), LARGEST.with(Cell::get));
    assert!(
        elapsed < MAX_TIME,
        "{name}: took {elapsed:?} (limit {MAX_TIME:?})"
    );
    assert!(
        largest <= MAX_ALLOCATION,
        "{name}: allocated {largest} bytes at once (limit {MAX_ALLOCATION})"
    );
    result
}

/// The target behind each directory of `tests/fuzz-regressions/`.
fn target(name: &str) -> Option<Target> {
    Some(match name {
        "iso9660_reader" => harness::iso9660_reader,
        "live_iso_embed" => harness::live_iso_embed,
        "kargs_json" => harness::kargs_json,
        "cpio_reader" => harness::cpio_reader,
        "config_decoders" => harness::config_decoders,
        "seed_manifest" => harness::seed_manifest,
        #[cfg(feature = "agent")]
        "agent_config" => harness::agent_config,
        _ => return None,
    })
}

// ---- hand-made malformed ISOs ----

fn sample_iso() -> Vec<u8> {
    let mut b = IsoBuilder::new();
    b.add_file("a/b/file.txt", b"hello".to_vec(), 0o644)
        .unwrap();
    b.add_file("top.bin", vec![7; 5000], 0o644).unwrap();
    let opts = WriteOptions {
        volume_id: "malformed".to_string(),
        timestamp: 1_700_000_000,
    };
    let mut out = Vec::new();
    b.write(&opts, &mut out).unwrap();
    out
}

/// Offset of the directory record whose ISO 9660 identifier is `id`: the identifier at byte 33,
/// its length at 32, and an extent whose both-endian halves agree (no path table entry has that).
fn record(img: &[u8], id: &[u8]) -> usize {
    let both_endian = |f: &[u8]| f[..4].iter().eq(f[4..8].iter().rev());
    (0..img.len() - 33 - id.len())
        .find(|&i| {
            img[i + 32] as usize == id.len()
                && &img[i + 33..i + 33 + id.len()] == id
                && img[i] as usize >= 33 + id.len()
                && both_endian(&img[i + 2..i + 10])
        })
        .unwrap_or_else(|| panic!("no record {:?}", String::from_utf8_lossy(id)))
}

/// Sets a both-endian u32 field (extent at 2, size at 10) of the record at `at`.
fn set_both(img: &mut [u8], at: usize, v: u32) {
    img[at..at + 4].copy_from_slice(&v.to_le_bytes());
    img[at + 4..at + 8].copy_from_slice(&v.to_be_bytes());
}

fn extent_of(img: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(img[at + 2..at + 6].try_into().unwrap())
}

/// The hand-made case must fail in every way the reader is used, within the bounds.
fn assert_rejected(name: &str, img: &[u8], want: &str) {
    let err = run_bounded(name, harness::iso9660_reader, img).unwrap_err();
    assert!(err.contains(want), "{name}: {err}");
}

#[test]
fn every_found_input_stays_fixed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .expect("reading tests/fuzz-regressions")
        .map(|e| e.expect("listing tests/fuzz-regressions").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let mut replayed = 0;
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Some(run) = target(&name) else {
            assert!(
                name == "agent_config",
                "no fuzz target named {name:?} for {}",
                dir.display()
            );
            eprintln!("skipping {name}: built without the agent feature");
            continue;
        };
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_none_or(|x| x != "md"))
            .collect();
        files.sort();
        for file in files {
            let input = std::fs::read(&file).unwrap();
            let label = format!("{name}/{}", file.file_name().unwrap().to_string_lossy());
            let result = run_bounded(&label, run, &input);
            eprintln!("{label}: {result:?}");
            replayed += 1;
        }
    }
    assert!(
        replayed > 0,
        "no regression inputs under {}",
        root.display()
    );
}

#[test]
fn sample_iso_reads_cleanly() {
    assert_eq!(
        run_bounded("sample", harness::iso9660_reader, &sample_iso()),
        Ok(())
    );
}

#[test]
fn truncated_images_are_errors() {
    let img = sample_iso();
    let file_at = extent_of(&img, record(&img, b"TOP.BIN;1")) as usize * 2048;
    let cases = [
        (0, "no primary volume descriptor"),
        (16 * 2048 + 100, "no primary volume descriptor"),
        (17 * 2048, "reach past the end"),
        (file_at + 100, "reach past the end"),
    ];
    for (len, want) in cases {
        assert_rejected(&format!("truncated to {len}"), &img[..len], want);
    }
}

#[test]
fn directory_pointing_to_itself_is_an_error() {
    let mut img = sample_iso();
    let at = record(&img, b"A");
    let a = extent_of(&img, at);
    // B, inside A, points back at A; A's own "." already does, harmlessly.
    let b = record(&img, b"B");
    set_both(&mut img, b + 2, a);
    assert_rejected("b -> a", &img, "directory loop");
    // A pointing at the root it sits in.
    let mut img = sample_iso();
    let root = extent_of(&img, 156 + 16 * 2048);
    set_both(&mut img, at + 2, root);
    assert_rejected("a -> root", &img, "directory loop");
}

#[test]
fn extents_past_the_end_are_errors() {
    for (id, extent) in [(&b"TOP.BIN;1"[..], 0x00ff_ffff), (b"A", u32::MAX)] {
        let mut img = sample_iso();
        let at = record(&img, id);
        set_both(&mut img, at + 2, extent);
        assert_rejected(
            &format!("{} at {extent}", String::from_utf8_lossy(id)),
            &img,
            "reach past the end",
        );
    }
}

#[test]
fn absurd_sizes_are_errors_without_huge_allocations() {
    for id in [&b"TOP.BIN;1"[..], b"A"] {
        let mut img = sample_iso();
        let at = record(&img, id);
        set_both(&mut img, at + 10, u32::MAX);
        assert_rejected(
            &format!("{} of 4 GiB", String::from_utf8_lossy(id)),
            &img,
            "reach past the end",
        );
    }
    // The root directory's own size, in the Primary Volume Descriptor.
    let mut img = sample_iso();
    set_both(&mut img, 16 * 2048 + 156 + 10, u32::MAX);
    assert_rejected("root of 4 GiB", &img, "reach past the end");
}

#[test]
fn ignition_area_past_the_end_is_an_error_without_allocating_it() {
    // igninfo.json names a file whose directory record claims 60 MiB in a tiny image.
    let mut b = IsoBuilder::new();
    b.add_file(
        "coreos/igninfo.json",
        br#"{"file":"images/ignition.img"}"#.to_vec(),
        0o644,
    )
    .unwrap();
    b.add_file("images/ignition.img", vec![0; 4096], 0o644)
        .unwrap();
    let opts = WriteOptions {
        volume_id: "x".to_string(),
        timestamp: 0,
    };
    let mut img = Vec::new();
    b.write(&opts, &mut img).unwrap();
    let at = record(&img, b"IGNITION.IMG;1");
    set_both(&mut img, at + 10, 60 << 20);
    let mut iso = IsoReader::open(Cursor::new(&img[..])).unwrap();
    LARGEST.with(|l| l.set(0));
    let err = ibi::live_iso::find_ignition_area(&mut iso)
        .unwrap_err()
        .to_string();
    assert!(err.contains("past the end of the image"), "{err}");
    let mut with_mode = vec![0u8];
    with_mode.extend_from_slice(&img);
    let err = run_bounded("ignition past end", harness::live_iso_embed, &with_mode).unwrap_err();
    assert!(err.contains("past the end of the image"), "{err}");
}

#[test]
fn harness_parts_split_as_documented() {
    let sep = String::from_utf8_lossy(harness::PART_SEPARATOR);
    let data = format!("a{sep}b{sep}c{sep}d");
    assert_eq!(
        harness::split_parts(data.as_bytes(), 3),
        [&b"a"[..], b"b", format!("c{sep}d").as_bytes()]
    );
    assert_eq!(harness::split_parts(b"x", 2), [&b"x"[..], b""]);
    assert!(harness::build_live_iso(b"").is_ok());
    assert_eq!(harness::LIVE_ISO_FILES.len(), 6);
}
