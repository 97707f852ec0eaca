//! The embed areas of a CoreOS live ISO as ibi reads and patches them: where each area is, what is wrong with an image, and the patches that rewrite them.

use super::error::LiveIsoError;
use super::initrd::is_pristine;
use iso9660::{BLOCK_SIZE, Entry, IsoError, IsoReader};
use std::io::{Read, Seek, SeekFrom};

/// The Ignition area of every known CoreOS image: cosa's `initrd_ignition_padding`.
pub const IGNITION_AREA_LEN: u64 = 256 * 1024;

/// The most `read_area` reserves before any byte has arrived; real areas are 256 KiB.
const READ_AREA_CHUNK: usize = 1 << 20;

/// An absolute byte range in the ISO file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EmbedArea {
    pub offset: u64,
    pub length: u64,
}

impl EmbedArea {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.length
    }
}

/// Reads the bytes of `area` (an Ignition area or a karg slot) from the ISO file.
pub fn read_area<F: Read + Seek>(file: &mut F, area: &EmbedArea) -> std::io::Result<Vec<u8>> {
    let len = usize::try_from(area.length)
        .map_err(|_| std::io::Error::other(format!("area of {} bytes", area.length)))?;
    file.seek(SeekFrom::Start(area.offset))?;
    // Grow as bytes arrive rather than allocating the whole claimed length up front: a short
    // file then costs what it holds, not what a corrupt descriptor said.
    let mut buf = Vec::with_capacity(len.min(READ_AREA_CHUNK));
    file.take(area.length).read_to_end(&mut buf)?;
    if buf.len() != len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "{} bytes at offset {} reach past the end of the ISO",
                area.length, area.offset
            ),
        ));
    }
    Ok(buf)
}

/// Whether the ISO's Ignition area already holds something (a config, network keyfiles, or
/// anything else): `create image` refuses such an ISO unless forced.
pub fn is_customized<F: Read + Seek>(file: &mut F, area: &EmbedArea) -> std::io::Result<bool> {
    Ok(!is_pristine(&read_area(file, area)?))
}

/// Upper-cases a lower-case descriptor path for look-up by ISO 9660 identifier, as
/// coreos-installer does: the 8.3 names are what every CoreOS image carries.
fn iso_name(path: &str) -> String {
    path.trim_start_matches('/').to_ascii_uppercase()
}

/// Looks `iso_path` up by ISO 9660 name; a missing path is `None`, other errors stay errors.
pub(super) fn find_optional<R: Read + Seek>(
    iso: &mut IsoReader<R>,
    iso_path: &str,
) -> Result<Option<Entry>, LiveIsoError> {
    match iso.find_iso(iso_path) {
        Ok(entry) if entry.is_dir => Err(LiveIsoError::Iso(IsoError::IsADirectory {
            path: iso_path.to_string(),
        })),
        Ok(entry) => Ok(Some(entry)),
        Err(IsoError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Finds the file a descriptor names (lower case) and checks `offset..offset+len` lies inside it;
/// `len` defaults to the rest of the file. Returns the range as absolute bytes.
pub(super) fn locate_in_file<R: Read + Seek>(
    iso: &mut IsoReader<R>,
    descriptor: &str,
    file: &str,
    offset: u64,
    len: Option<u64>,
) -> Result<EmbedArea, LiveIsoError> {
    let bad = |reason: String| LiveIsoError::BadDescriptor {
        path: descriptor.to_string(),
        reason,
    };
    let entry = find_optional(iso, &iso_name(file))?
        .ok_or_else(|| bad(format!("it names {file:?}, which is not in the image")))?;
    let length = len.unwrap_or(entry.size.saturating_sub(offset));
    if offset
        .checked_add(length)
        .is_none_or(|end| end > entry.size)
    {
        return Err(bad(format!(
            "{length} bytes at offset {offset} reach past the end of {file:?} ({} bytes)",
            entry.size
        )));
    }
    let area = EmbedArea {
        offset: u64::from(entry.extent) * BLOCK_SIZE as u64 + offset,
        length,
    };
    check_in_image(iso, area, descriptor)
}

/// A directory record may claim more bytes than the image holds, so a range computed from one is
/// checked against the image before anyone allocates or patches its length: without this, a
/// 40 KiB image could name a 60 MiB Ignition area and `read_area` would allocate all of it.
pub(super) fn check_in_image<R: Read + Seek>(
    iso: &IsoReader<R>,
    area: EmbedArea,
    source: &str,
) -> Result<EmbedArea, LiveIsoError> {
    let image_len = iso.image_len();
    if area
        .offset
        .checked_add(area.length)
        .is_none_or(|end| end > image_len)
    {
        return Err(LiveIsoError::BadDescriptor {
            path: source.to_string(),
            reason: format!(
                "{} bytes at offset {} reach past the end of the image ({image_len} bytes)",
                area.length, area.offset
            ),
        });
    }
    Ok(area)
}

/// Reads `len` bytes at absolute `offset` through the reader's bounds-checked block reads; used
/// for structures that are not files (the legacy system-area header).
pub(super) fn read_raw<R: Read + Seek>(
    iso: &mut IsoReader<R>,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>, LiveIsoError> {
    let block = BLOCK_SIZE as u64;
    let first = offset / block;
    let skip = (offset % block) as usize;
    let blocks = (offset % block + len).div_ceil(block);
    let extent = u32::try_from(first)
        .map_err(|_| LiveIsoError::BadArea(format!("offset {offset} is out of range")))?;
    let span = Entry {
        path: String::new(),
        iso_path: String::new(),
        is_dir: false,
        mode: None,
        size: blocks * block,
        extent,
    };
    let bytes = iso.read_entry(&span)?;
    Ok(bytes[skip..skip + len as usize].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_names_are_upper_case_without_leading_slash() {
        assert_eq!(iso_name("images/ignition.img"), "IMAGES/IGNITION.IMG");
        assert_eq!(iso_name("/EFI/fedora/grub.cfg"), "EFI/FEDORA/GRUB.CFG");
    }

    #[test]
    fn error_messages_carry_their_details() {
        let cases = [
            (LiveIsoError::NotCoreOs, "Unrecognized CoreOS ISO image."),
            (
                LiveIsoError::TooLarge {
                    compressed: 300_000,
                    area: 262_144,
                },
                "300000 bytes, larger than the 262144-byte",
            ),
            (
                LiveIsoError::KargsTooLarge {
                    len: 2000,
                    max: 1138,
                },
                "2000 bytes; the embed area holds at most 1138",
            ),
        ];
        for (err, want) in cases {
            assert!(err.to_string().contains(want), "{err}");
        }
    }
}
