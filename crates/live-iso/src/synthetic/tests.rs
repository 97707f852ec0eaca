//! End-to-end tests of `live_iso` on synthetic images, in memory: locating the areas of every
//! layout, embedding and changing kargs without touching other bytes, and the descriptor errors.

use super::*;
use crate::{
    EmbedArea, Patch, decode_ignition, encode_ignition, encode_kargs, find_ignition_area,
    find_kargs, is_customized, read_kargs,
};
use iso9660::IsoReader;
use std::io::Cursor;

fn apply(image: &mut [u8], patches: &[Patch]) {
    for p in patches {
        let at = p.offset as usize;
        image[at..at + p.data.len()].copy_from_slice(&p.data);
    }
}

fn locate(image: &[u8]) -> (EmbedArea, Option<crate::KargsAreas>) {
    let mut iso = IsoReader::open(Cursor::new(image)).unwrap();
    (
        find_ignition_area(&mut iso).unwrap(),
        find_kargs(&mut iso).unwrap(),
    )
}

#[test]
fn every_layout_has_a_pristine_area_and_default_kargs() {
    for s in SyntheticIso::all() {
        let image = s.to_vec().unwrap();
        let (area, kargs) = locate(&image);
        let bytes = &image[area.offset as usize..area.end() as usize];
        assert_eq!(area.length, IGNITION_AREA_LEN, "{}", s.name());
        assert!(bytes.iter().all(|&b| b == 0), "{}", s.name());
        assert!(!is_customized(&mut Cursor::new(&image), &area).unwrap());
        if s.layout == IgnitionLayout::InsideFile {
            assert_ne!(
                image[area.offset as usize - 1],
                0,
                "file data before the area"
            );
            assert_ne!(image[area.end() as usize], 0, "file data after the area");
        }
        assert_eq!(kargs.is_some(), s.kargs, "{}", s.name());
        let Some(kargs) = kargs else { continue };
        let current = read_kargs(&mut Cursor::new(&image), &kargs).unwrap();
        assert_eq!(
            (current.as_str(), kargs.default.as_str()),
            (DEFAULT_KARGS, DEFAULT_KARGS)
        );
        let want_slots = if s.layout == IgnitionLayout::InsideFile {
            1
        } else {
            2
        };
        assert_eq!(kargs.slots.len(), want_slots, "{}", s.name());
        for slot in kargs
            .slots
            .iter()
            .filter(|_| s.layout != IgnitionLayout::InsideFile)
        {
            let after = slot.offset as usize + kargs.size;
            assert_eq!(
                &image[after..after + KARG_MARKER.len()],
                KARG_MARKER.as_bytes()
            );
        }
    }
}

#[test]
fn embedding_and_kargs_touch_only_their_ranges() {
    let config = br#"{"ignition":{"version":"3.2.0"},"storage":{"files":[]}}"#;
    for s in SyntheticIso::all() {
        let before = s.to_vec().unwrap();
        let (area, kargs) = locate(&before);
        let mut after = before.clone();
        let mut patches = vec![Patch {
            offset: area.offset,
            data: encode_ignition(config, area.length).unwrap(),
        }];
        if let Some(k) = &kargs {
            patches.extend(encode_kargs(k, "console=ttyS0 ip=dhcp").unwrap());
        }
        apply(&mut after, &patches);
        let area_bytes = &after[area.offset as usize..area.end() as usize];
        assert_eq!(
            decode_ignition(area_bytes).unwrap().unwrap(),
            config,
            "{}",
            s.name()
        );
        assert!(is_customized(&mut Cursor::new(&after), &area).unwrap());
        if let Some(k) = &kargs {
            assert_eq!(
                read_kargs(&mut Cursor::new(&after), k).unwrap(),
                "console=ttyS0 ip=dhcp"
            );
        }
        let (area2, kargs2) = locate(&after);
        assert_eq!((area2, kargs2), (area, kargs), "descriptors unchanged");
        let inside = |i: usize| {
            patches
                .iter()
                .any(|p| (p.offset as usize..p.offset as usize + p.data.len()).contains(&i))
        };
        let stray = (0..before.len()).find(|&i| before[i] != after[i] && !inside(i));
        assert_eq!(stray, None, "{}", s.name());
    }
}

#[test]
fn plain_iso_is_not_coreos() {
    let mut b = iso9660::IsoBuilder::new();
    b.add_file("images/pxeboot/vmlinuz", b"k".to_vec(), 0o644)
        .unwrap();
    let mut image = Vec::new();
    let opts = iso9660::WriteOptions {
        volume_id: "x".into(),
        timestamp: 0,
    };
    b.write(&opts, &mut image).unwrap();
    let mut iso = IsoReader::open(Cursor::new(&image)).unwrap();
    let err = find_ignition_area(&mut iso).unwrap_err().to_string();
    assert_eq!(err, "Unrecognized CoreOS ISO image.");
    assert!(find_kargs(&mut iso).unwrap().is_none());
}

/// An image with `igninfo.json` set to `info` beside a 1000-byte `images/x.img`.
fn with_igninfo(info: &str) -> Result<EmbedArea, LiveIsoError> {
    let mut b = iso9660::IsoBuilder::new();
    b.add_file("coreos/igninfo.json", info.as_bytes().to_vec(), 0o644)
        .unwrap();
    b.add_file("images/x.img", vec![1; 1000], 0o644).unwrap();
    let mut image = Vec::new();
    let opts = iso9660::WriteOptions {
        volume_id: "x".into(),
        timestamp: 0,
    };
    b.write(&opts, &mut image).unwrap();
    find_ignition_area(&mut IsoReader::open(Cursor::new(&image)).unwrap())
}

#[test]
fn igninfo_ranges_are_checked_against_the_file() {
    let ok = with_igninfo(r#"{"file": "images/x.img", "offset": 200}"#).unwrap();
    assert_eq!(ok.length, 800, "length defaults to the rest of the file");
    let cases = [
        (
            r#"{"file": "images/missing.img"}"#,
            "names \"images/missing.img\", which is not in the image",
        ),
        (
            r#"{"file": "images/x.img", "offset": 900, "length": 101}"#,
            "101 bytes at offset 900 reach past the end",
        ),
        (
            r#"{"file": "images/x.img", "offset": 1000}"#,
            "an Ignition area of 0 bytes",
        ),
        (
            r#"{"file": "images/x.img", "offset": 2000}"#,
            "reach past the end",
        ),
        (r#"{"file": "images"}"#, "is a directory"),
        ("not json", "invalid /coreos/igninfo.json"),
    ];
    for (info, want) in cases {
        let err = with_igninfo(info).unwrap_err().to_string();
        assert!(err.contains(want), "{info}: {err}");
    }
}

#[test]
fn padding_streams_zeros_past_the_volume() {
    let mut s = SyntheticIso::new(IgnitionLayout::WholeFile, true);
    let plain = s.to_vec().unwrap();
    s.pad_to = Some(plain.len() as u64 + 3 * PAD_CHUNK as u64 + 5);
    let padded = s.to_vec().unwrap();
    assert_eq!(padded.len() as u64, s.pad_to.unwrap());
    assert_eq!(&padded[..plain.len()], plain.as_slice());
    assert!(padded[plain.len()..].iter().all(|&b| b == 0));
    assert_eq!(locate(&padded), locate(&plain));
    s.pad_to = Some(10);
    assert_eq!(
        s.to_vec().unwrap(),
        plain,
        "a smaller target changes nothing"
    );
    assert_eq!(
        SyntheticIso::new(IgnitionLayout::WholeFile, true)
            .to_vec()
            .unwrap(),
        plain
    );
}

#[test]
fn legacy_corekarg_header_is_read_when_kargs_json_is_absent() {
    let mut image = SyntheticIso::new(IgnitionLayout::Legacy, true)
        .to_vec()
        .unwrap();
    let (_, kargs) = locate(&image);
    let kargs = kargs.unwrap();
    // Hide kargs.json from ISO 9660 look-ups, then describe the same slots the 2021 way, with the
    // default-kargs copy in the first slot.
    let at = image.windows(11).position(|w| w == b"KARGS.JSO;1").unwrap();
    image[at..at + 5].copy_from_slice(b"KARGX");
    let mut header = b"coreKarg".to_vec();
    header.extend((kargs.size as u64).to_le_bytes());
    header.extend(kargs.slots[0].offset.to_le_bytes());
    for slot in &kargs.slots {
        header.extend(slot.offset.to_le_bytes());
    }
    image[32_672..32_672 + header.len()].copy_from_slice(&header);
    assert_eq!(
        locate(&image).1,
        Some(kargs),
        "same slots, default read from the copy"
    );
    image[32_672 + 8..32_672 + 16].copy_from_slice(&5000u64.to_le_bytes());
    let mut iso = IsoReader::open(Cursor::new(&image)).unwrap();
    let err = find_kargs(&mut iso).unwrap_err().to_string();
    assert!(
        err.contains("invalid coreKarg header: slot size 5000"),
        "{err}"
    );
}

#[test]
fn an_rhcos_shaped_image_carries_its_release_in_the_volume_id_and_kargs() {
    let s = SyntheticIso::rhcos(IgnitionLayout::WholeFile, true, "10.2.20260715-0");
    let image = s.to_vec().unwrap();
    let iso = IsoReader::open(Cursor::new(&image)).unwrap();
    assert_eq!(iso.volume_id(), "rhcos-10.2.20260715-0");
    let (_, kargs) = locate(&image);
    let kargs = kargs.unwrap();
    let current = read_kargs(&mut Cursor::new(&image), &kargs).unwrap();
    assert!(
        current.contains(" coreos.liveiso=rhcos-10.2.20260715-0 "),
        "{current}"
    );
    assert_eq!(current, kargs.default);
    assert_eq!(s.default_kargs(), current);
}
