//! Where the Ignition embed area is: the range `/coreos/igninfo.json` names (images from about
//! 2023-03 on, the only way on s390x, where the area sits inside the El Torito image), else the
//! whole `/images/ignition.img` (older x86_64/aarch64/ppc64le images), else not a CoreOS ISO.

use super::embed::{EmbedArea, check_in_image, find_optional, locate_in_file};
use super::error::LiveIsoError;
use iso9660::IsoReader;
use serde::Deserialize;
use std::io::{Read, Seek};

/// ISO 9660 names coreos-installer looks up; level-1 naming cuts `.json` to `.JSO`.
const IGNINFO_ISO_PATH: &str = "COREOS/IGNINFO.JSO";
const IGNITION_IMG_ISO_PATH: &str = "IMAGES/IGNITION.IMG";
/// How the descriptor is named in messages.
const IGNINFO_NAME: &str = "/coreos/igninfo.json";
/// Far above the 256 KiB of every real image; stops a hostile descriptor from making us read or
/// allocate gigabytes.
const MAX_AREA_LEN: u64 = 64 << 20;

/// `/coreos/igninfo.json`. Unknown keys are ignored: newer images may add some.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IgnInfo {
    /// ISO path, lower case, without a leading '/' ("images/ignition.img").
    pub file: String,
    /// Offset of the area inside `file`.
    #[serde(default)]
    pub offset: u64,
    /// Length of the area; the rest of `file` after `offset` when absent.
    #[serde(default)]
    pub length: Option<u64>,
}

/// Parses the bytes of `/coreos/igninfo.json`.
pub fn parse_igninfo(bytes: &[u8]) -> Result<IgnInfo, LiveIsoError> {
    serde_json::from_slice(bytes).map_err(|e| LiveIsoError::BadDescriptor {
        path: IGNINFO_NAME.to_string(),
        reason: e.to_string(),
    })
}

/// Locates the Ignition embed area of a CoreOS live ISO.
pub fn find_ignition_area<R: Read + Seek>(
    iso: &mut IsoReader<R>,
) -> Result<EmbedArea, LiveIsoError> {
    if let Some(entry) = find_optional(iso, IGNINFO_ISO_PATH)? {
        let info = parse_igninfo(&iso.read_entry(&entry)?)?;
        return area_from_igninfo(iso, &info);
    }
    let entry = find_optional(iso, IGNITION_IMG_ISO_PATH)?.ok_or(LiveIsoError::NotCoreOs)?;
    let area = EmbedArea {
        offset: u64::from(entry.extent) * iso9660::BLOCK_SIZE as u64,
        length: entry.size,
    };
    check_in_image(
        iso,
        check_length(area, "/images/ignition.img")?,
        "/images/ignition.img",
    )
}

fn area_from_igninfo<R: Read + Seek>(
    iso: &mut IsoReader<R>,
    info: &IgnInfo,
) -> Result<EmbedArea, LiveIsoError> {
    let area = locate_in_file(iso, IGNINFO_NAME, &info.file, info.offset, info.length)?;
    tracing::debug!(target: "ibi::live_iso::ignition", ?info, ?area, "Ignition area from {IGNINFO_NAME}");
    check_length(area, IGNINFO_NAME)
}

/// An empty area can hold nothing and a huge one is not a CoreOS image; refuse both up front.
fn check_length(area: EmbedArea, source: &str) -> Result<EmbedArea, LiveIsoError> {
    if area.length == 0 || area.length > MAX_AREA_LEN {
        return Err(LiveIsoError::BadDescriptor {
            path: source.to_string(),
            reason: format!(
                "an Ignition area of {} bytes (expected 1 to {MAX_AREA_LEN})",
                area.length
            ),
        });
    }
    Ok(area)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn igninfo_fields_are_optional_except_file() {
        let cases: [(&[u8], IgnInfo); 3] = [
            (
                br#"{"file": "images/ignition.img"}"#,
                IgnInfo {
                    file: "images/ignition.img".into(),
                    offset: 0,
                    length: None,
                },
            ),
            (
                br#"{"file": "images/cdboot.img", "length": 262144, "offset": 132096}"#,
                IgnInfo {
                    file: "images/cdboot.img".into(),
                    offset: 132_096,
                    length: Some(262_144),
                },
            ),
            (
                br#"{"file": "x", "offset": 5, "future": true}"#,
                IgnInfo {
                    file: "x".into(),
                    offset: 5,
                    length: None,
                },
            ),
        ];
        for (json, want) in cases {
            assert_eq!(parse_igninfo(json).unwrap(), want);
        }
    }

    #[test]
    fn bad_igninfo_is_a_clear_error() {
        let cases: [(&[u8], &str); 4] = [
            (b"{", "EOF"),
            (br#"{"offset": 1}"#, "missing field `file`"),
            (br#"{"file": "a", "offset": -1}"#, "invalid value"),
            (br#""images/ignition.img""#, "invalid type"),
        ];
        for (json, want) in cases {
            let err = parse_igninfo(json).unwrap_err().to_string();
            assert!(
                err.starts_with("invalid /coreos/igninfo.json: ") && err.contains(want),
                "{err}"
            );
        }
    }

    #[test]
    fn area_lengths_are_bounded() {
        for length in [0, MAX_AREA_LEN + 1] {
            let err = check_length(EmbedArea { offset: 0, length }, "x")
                .unwrap_err()
                .to_string();
            assert!(err.contains(&format!("{length} bytes")), "{err}");
        }
        assert!(
            check_length(
                EmbedArea {
                    offset: 0,
                    length: 1
                },
                "x"
            )
            .is_ok()
        );
    }
}
