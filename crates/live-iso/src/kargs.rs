//! The kernel-argument embed areas: fixed-size slots inside the bootloader configs (GRUB,
//! isolinux, or the s390x parmfile inside `images/cdboot.img`), right after the default kargs on
//! the `linux`/`append` line. Each slot holds the kargs, one `end` byte, then `pad` bytes up to
//! the slot size; on x86 the slot is followed by `# COREOS_KARG_EMBED_AREA`, so the padding ends
//! up in a comment. The slots are described by `/coreos/kargs.json` or, on 2021-era images
//! without it, by the legacy `coreKarg` header in the system area.

use super::Patch;
use super::embed::{EmbedArea, find_optional, locate_in_file, read_area, read_raw};
use super::error::LiveIsoError;
use iso9660::IsoReader;
use serde::Deserialize;
use std::io::{Read, Seek};

const KARGS_ISO_PATH: &str = "COREOS/KARGS.JSO";
const KARGS_NAME: &str = "/coreos/kargs.json";
/// coreos-installer treats a larger slot as a corrupt descriptor.
const MAX_SLOT_SIZE: usize = 2048;
const DEFAULT_PAD: u8 = b'#';
const DEFAULT_END: u8 = b'\n';
/// The legacy header: the 72 bytes before the (also legacy) `coreiso+` header that ends the
/// 32 KiB system area: magic, slot length, offset of the default-kargs copy, up to 6 slot offsets.
const LEGACY_OFFSET: u64 = 32_672;
const LEGACY_LEN: u64 = 72;
const LEGACY_MAGIC: &[u8] = b"coreKarg";
const LEGACY_NAME: &str = "coreKarg header";

/// `/coreos/kargs.json` as cosa writes it. Unknown keys are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KargsJson {
    /// The pristine kargs, what `kargs reset` restores.
    pub default: String,
    pub files: Vec<KargsFile>,
    /// Slot length in bytes, the same for every slot.
    pub size: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KargsFile {
    /// ISO path, lower case ("EFI/fedora/grub.cfg" is looked up as "EFI/FEDORA/GRUB.CFG").
    pub path: String,
    /// Offset of the slot inside `path`.
    pub offset: u64,
    /// One character; '#' when absent.
    #[serde(default)]
    pub pad: Option<String>,
    /// One character; a newline when absent.
    #[serde(default)]
    pub end: Option<String>,
}

/// One slot: absolute offset in the ISO and its fill bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KargSlot {
    pub offset: u64,
    pub end: u8,
    pub pad: u8,
}

/// Every karg slot of an image, all `size` bytes long, in ascending offset order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KargsAreas {
    pub default: String,
    pub size: usize,
    pub slots: Vec<KargSlot>,
}

/// Parses and checks `/coreos/kargs.json`.
pub fn parse_kargs_json(bytes: &[u8]) -> Result<KargsJson, LiveIsoError> {
    let desc: KargsJson = serde_json::from_slice(bytes).map_err(|e| bad(KARGS_NAME, e))?;
    check_size(KARGS_NAME, desc.size, desc.default.len(), desc.files.len())?;
    for file in &desc.files {
        one_byte("pad", file.pad.as_deref(), DEFAULT_PAD)?;
        one_byte("end", file.end.as_deref(), DEFAULT_END)?;
    }
    Ok(desc)
}

fn bad(path: &str, reason: impl ToString) -> LiveIsoError {
    LiveIsoError::BadDescriptor {
        path: path.to_string(),
        reason: reason.to_string(),
    }
}

/// The limits coreos-installer enforces on a slot description.
fn check_size(source: &str, size: usize, default: usize, slots: usize) -> Result<(), LiveIsoError> {
    if size == 0 || size > MAX_SLOT_SIZE {
        return Err(bad(
            source,
            format!("slot size {size} (expected 1 to {MAX_SLOT_SIZE})"),
        ));
    }
    if default > size {
        return Err(bad(
            source,
            format!("default kargs of {default} bytes exceed the slot size {size}"),
        ));
    }
    if slots == 0 {
        return Err(bad(source, "no karg slots"));
    }
    Ok(())
}

/// A `pad`/`end` value: exactly one ASCII character, so slot lengths stay byte-exact.
fn one_byte(field: &str, value: Option<&str>, default: u8) -> Result<u8, LiveIsoError> {
    match value.map(str::as_bytes) {
        None => Ok(default),
        Some([b]) if b.is_ascii() => Ok(*b),
        Some(_) => Err(bad(
            KARGS_NAME,
            format!("{field} must be one ASCII character, not {value:?}"),
        )),
    }
}

/// The karg slots of an image, or `None` when it has none (s390x before 2023-07, images before
/// 2021): such an image boots with fixed kargs.
pub fn find_kargs<R: Read + Seek>(
    iso: &mut IsoReader<R>,
) -> Result<Option<KargsAreas>, LiveIsoError> {
    let Some(entry) = find_optional(iso, KARGS_ISO_PATH)? else {
        return find_legacy(iso);
    };
    let desc = parse_kargs_json(&iso.read_entry(&entry)?)?;
    let mut slots = Vec::with_capacity(desc.files.len());
    for file in &desc.files {
        let area = locate_in_file(
            iso,
            KARGS_NAME,
            &file.path,
            file.offset,
            Some(desc.size as u64),
        )?;
        slots.push(KargSlot {
            offset: area.offset,
            pad: one_byte("pad", file.pad.as_deref(), DEFAULT_PAD)?,
            end: one_byte("end", file.end.as_deref(), DEFAULT_END)?,
        });
    }
    slots.sort_by_key(|s| s.offset);
    tracing::debug!(target: "ibi::live_iso::kargs", ?slots, size = desc.size, "karg slots from {KARGS_NAME}");
    Ok(Some(KargsAreas {
        default: desc.default,
        size: desc.size,
        slots,
    }))
}

/// The 2021-era header; pad and end are always '#' and newline there.
fn find_legacy<R: Read + Seek>(iso: &mut IsoReader<R>) -> Result<Option<KargsAreas>, LiveIsoError> {
    let Some(header) = parse_legacy_header(&read_raw(iso, LEGACY_OFFSET, LEGACY_LEN)?) else {
        return Ok(None);
    };
    let size = usize::try_from(header.size).unwrap_or(usize::MAX);
    check_size(LEGACY_NAME, size, 0, header.slots.len())?;
    let slot = |offset| KargSlot {
        offset,
        end: DEFAULT_END,
        pad: DEFAULT_PAD,
    };
    for &offset in &header.slots {
        read_raw(iso, offset, header.size)?; // in the image, or an error now rather than later
    }
    let copy = read_raw(iso, header.default_offset, header.size)?;
    let default = decode_slot(&copy, &slot(header.default_offset))?;
    let mut slots: Vec<KargSlot> = header.slots.into_iter().map(slot).collect();
    slots.sort_by_key(|s| s.offset);
    Ok(Some(KargsAreas {
        default,
        size,
        slots,
    }))
}

/// The fields of a `coreKarg` header.
#[derive(Debug, PartialEq, Eq)]
struct LegacyHeader {
    size: u64,
    default_offset: u64,
    slots: Vec<u64>,
}

/// Parses the 72 header bytes; `None` without the magic. A zero slot offset ends the list.
fn parse_legacy_header(bytes: &[u8]) -> Option<LegacyHeader> {
    let fields = bytes.strip_prefix(LEGACY_MAGIC)?;
    let words: Vec<u64> = fields
        .chunks_exact(8)
        .filter_map(|c| c.try_into().ok().map(u64::from_le_bytes))
        .collect();
    let (&[size, default_offset], slots) = words.split_first_chunk::<2>()?;
    Some(LegacyHeader {
        size,
        default_offset,
        slots: slots.iter().copied().take_while(|&o| o != 0).collect(),
    })
}

/// The kargs a slot holds: UTF-8, with trailing pad bytes, then end bytes, then whitespace removed.
fn decode_slot(bytes: &[u8], slot: &KargSlot) -> Result<String, LiveIsoError> {
    let text = std::str::from_utf8(bytes).map_err(|e| LiveIsoError::BadKargs {
        kargs: String::from_utf8_lossy(bytes).into_owned(),
        reason: format!("the slot at offset {} is not UTF-8: {e}", slot.offset),
    })?;
    let kargs = text
        .trim_end_matches(char::from(slot.pad))
        .trim_end_matches(char::from(slot.end))
        .trim_end();
    Ok(kargs.to_string())
}

/// The current kargs; every slot must hold the same string.
pub fn read_kargs<F: Read + Seek>(
    file: &mut F,
    areas: &KargsAreas,
) -> Result<String, LiveIsoError> {
    let mut first: Option<(String, u64)> = None;
    for slot in &areas.slots {
        let area = EmbedArea {
            offset: slot.offset,
            length: areas.size as u64,
        };
        let kargs = decode_slot(&read_area(file, &area)?, slot)?;
        match &first {
            None => first = Some((kargs, slot.offset)),
            Some((want, want_offset)) if *want != kargs => {
                return Err(LiveIsoError::KargsMismatch {
                    first: want.clone(),
                    first_offset: *want_offset,
                    other: kargs,
                    other_offset: slot.offset,
                });
            }
            Some(_) => {}
        }
    }
    first
        .map(|(kargs, _)| kargs)
        .ok_or_else(|| bad(KARGS_NAME, "no karg slots"))
}

/// The writes that put `kargs` (trimmed) in every slot. It must leave room for the end byte, and
/// control characters are refused: a newline would end the bootloader line early and let the
/// rest be read as configuration.
pub fn encode_kargs(areas: &KargsAreas, kargs: &str) -> Result<Vec<Patch>, LiveIsoError> {
    let kargs = kargs.trim();
    if let Some(c) = kargs.chars().find(|c| c.is_control()) {
        return Err(LiveIsoError::BadKargs {
            kargs: kargs.to_string(),
            reason: format!("control character {c:?}"),
        });
    }
    let max = areas.size.saturating_sub(1);
    if kargs.len() > max {
        return Err(LiveIsoError::KargsTooLarge {
            len: kargs.len(),
            max,
        });
    }
    let patch = |slot: &KargSlot| {
        let mut data = Vec::with_capacity(areas.size);
        data.extend_from_slice(kargs.as_bytes());
        data.push(slot.end);
        data.resize(areas.size, slot.pad);
        Patch {
            offset: slot.offset,
            data,
        }
    };
    Ok(areas.slots.iter().map(patch).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    const X86_2023_07: &str = r##"{"default": "mitigations=auto,nosmt coreos.liveiso=x ignition.firstboot ignition.platform.id=metal", "files": [{"end": "\n", "offset": 970, "pad": "#", "path": "EFI/fedora/grub.cfg"}, {"end": "\n", "offset": 1869, "pad": "#", "path": "isolinux/isolinux.cfg"}], "size": 1139}"##;

    fn areas(size: usize, slots: &[(u64, u8, u8)]) -> KargsAreas {
        KargsAreas {
            default: "a=1".into(),
            size,
            slots: slots
                .iter()
                .map(|&(offset, end, pad)| KargSlot { offset, end, pad })
                .collect(),
        }
    }

    #[test]
    fn kargs_json_parses_with_and_without_pad_and_end() {
        let d = parse_kargs_json(X86_2023_07.as_bytes()).unwrap();
        assert_eq!((d.size, d.files.len()), (1139, 2));
        assert_eq!(d.files[1].path, "isolinux/isolinux.cfg");
        assert_eq!(d.files[1].pad.as_deref(), Some("#"));
        let d = parse_kargs_json(
            br#"{"default": "", "files": [{"path": "a", "offset": 3}], "size": 10, "new": 1}"#,
        )
        .unwrap();
        assert_eq!(
            (d.files[0].pad.clone(), d.files[0].end.clone()),
            (None, None)
        );
        assert_eq!(one_byte("pad", None, DEFAULT_PAD).unwrap(), b'#');
        assert_eq!(one_byte("end", Some("\0"), DEFAULT_END).unwrap(), 0);
    }

    #[test]
    fn kargs_json_limits_are_enforced() {
        let doc = |default: &str, files: &str, size: usize| {
            format!(r#"{{"default": "{default}", "files": [{files}], "size": {size}}}"#)
        };
        let slot = r#"{"path": "a", "offset": 0}"#;
        let cases = [
            (doc("", slot, 2049), "slot size 2049"),
            (doc("", slot, 0), "slot size 0"),
            (
                doc("abcd", slot, 3),
                "default kargs of 4 bytes exceed the slot size 3",
            ),
            (doc("", "", 10), "no karg slots"),
            (
                doc("", r###"{"path": "a", "offset": 0, "pad": "##"}"###, 10),
                "pad must be one ASCII",
            ),
            (
                doc("", r#"{"path": "a", "offset": 0, "end": ""}"#, 10),
                "end must be one ASCII",
            ),
            (
                doc("", r#"{"path": "a", "offset": 0, "pad": "é"}"#, 10),
                "pad must be one ASCII",
            ),
            ("{".to_string(), "EOF"),
            (
                r#"{"default": "", "files": []}"#.to_string(),
                "missing field `size`",
            ),
        ];
        for (json, want) in cases {
            let err = parse_kargs_json(json.as_bytes()).unwrap_err().to_string();
            assert!(
                err.starts_with("invalid /coreos/kargs.json: ") && err.contains(want),
                "{err}"
            );
        }
        assert!(parse_kargs_json(doc("abc", slot, 2048).as_bytes()).is_ok());
    }

    #[test]
    fn slots_decode_by_stripping_pad_end_and_whitespace() {
        let hash = KargSlot {
            offset: 0,
            end: b'\n',
            pad: b'#',
        };
        let nul = KargSlot {
            offset: 0,
            end: 0,
            pad: 0,
        };
        let bang = KargSlot {
            offset: 0,
            end: b'!',
            pad: b'#',
        };
        let cases: [(&[u8], KargSlot, &str); 6] = [
            (b"a=1 !!###", bang, "a=1"),
            (b"a=1 b\n#######", hash, "a=1 b"),
            (b"a=1 b  \n\n####", hash, "a=1 b"),
            (b"a#b\n###", hash, "a#b"),
            (b"a=1\0\0\0\0", nul, "a=1"),
            (b"\n#####", hash, ""),
        ];
        for (bytes, slot, want) in cases {
            assert_eq!(decode_slot(bytes, &slot).unwrap(), want, "{bytes:?}");
        }
        let err = decode_slot(b"a\xff\n#", &hash).unwrap_err().to_string();
        assert!(err.contains("not UTF-8"), "{err}");
    }

    #[test]
    fn legacy_header_fields_are_little_endian_and_zero_ends_the_slots() {
        let header = |words: &[u64]| {
            let mut h = LEGACY_MAGIC.to_vec();
            words.iter().for_each(|w| h.extend(w.to_le_bytes()));
            h.resize(LEGACY_LEN as usize, 0);
            h
        };
        let full = header(&[1131, 90_112, 1, 2, 3, 4, 5, 6]);
        let want = |slots: Vec<u64>| LegacyHeader {
            size: 1131,
            default_offset: 90_112,
            slots,
        };
        assert_eq!(
            parse_legacy_header(&full),
            Some(want(vec![1, 2, 3, 4, 5, 6]))
        );
        let short = header(&[1131, 90_112, 94_026, 0, 365_415]);
        assert_eq!(parse_legacy_header(&short), Some(want(vec![94_026])));
        assert_eq!(parse_legacy_header(&[0u8; 72]), None);
        assert_eq!(parse_legacy_header(b"coreKarg\x01"), None, "cut short");
    }

    #[test]
    fn encode_writes_kargs_end_and_pad_in_every_slot() {
        let a = areas(12, &[(3, b'\n', b'#'), (40, 0, 0)]);
        let patches = encode_kargs(&a, "  x=1 y \n").unwrap();
        assert_eq!(patches.len(), 2);
        assert_eq!(
            (patches[0].offset, patches[0].data.as_slice()),
            (3, &b"x=1 y\n######"[..])
        );
        assert_eq!(
            (patches[1].offset, patches[1].data.as_slice()),
            (40, &b"x=1 y\0\0\0\0\0\0\0"[..])
        );
    }

    #[test]
    fn encode_limits_length_and_characters() {
        let a = areas(8, &[(0, b'\n', b'#')]);
        assert_eq!(encode_kargs(&a, "1234567").unwrap()[0].data, b"1234567\n");
        let err = encode_kargs(&a, "12345678").unwrap_err();
        assert!(
            matches!(err, LiveIsoError::KargsTooLarge { len: 8, max: 7 }),
            "{err}"
        );
        for bad in ["a\nb", "a\0b", "a\tb", "a\rb"] {
            let err = encode_kargs(&a, bad).unwrap_err().to_string();
            assert!(err.contains("control character"), "{err}");
        }
    }

    #[test]
    fn read_kargs_round_trips_and_requires_agreement() {
        let a = areas(16, &[(4, b'\n', b'#'), (64, 0, 0)]);
        let mut image = Cursor::new(vec![0xAAu8; 128]);
        for p in encode_kargs(&a, "console=ttyS0").unwrap() {
            let at = p.offset as usize;
            image.get_mut()[at..at + p.data.len()].copy_from_slice(&p.data);
        }
        assert_eq!(read_kargs(&mut image, &a).unwrap(), "console=ttyS0");
        image.get_mut()[64] = b'X';
        let err = read_kargs(&mut image, &a).unwrap_err().to_string();
        assert!(
            err.contains(r#""console=ttyS0" at offset 4"#)
                && err.contains(r#""Xonsole=ttyS0" at offset 64"#),
            "{err}"
        );
    }
}
