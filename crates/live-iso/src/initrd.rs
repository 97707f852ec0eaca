//! What goes in the Ignition embed area: one newc ("070701") cpio archive holding `config.ign` at
//! the initramfs root, xz-compressed with a CRC32 check, zero-filled to the area length. The
//! bootloader loads the area as an extra initrd; the kernel unpacks it over the live initramfs,
//! where Ignition's `ignition-setup-user` picks up `/config.ign`. A pristine area is all zeros,
//! and writing the full length every time means removing a config restores the original bytes.

use super::LiveIsoError;
use cpio::newc;
use liblzma::stream::{CONCATENATED, Check, Filters, LzmaOptions, Stream};
use std::io::{self, Read, Write};

/// The member Ignition's live-ISO dracut hook looks for, relative to the initramfs root.
const CONFIG_NAME: &str = "config.ign";
/// Regular file, read-write for root only: the config can carry secrets.
const CONFIG_MODE: u32 = 0o100_600;
const S_IFMT: u32 = 0o170_000;
const S_IFREG: u32 = 0o100_000;
/// coreos-installer's choice, kept so an area we write compresses like one it writes.
const XZ_PRESET: u32 = 9;
/// The kernel's initramfs xz decoder verifies CRC32 or nothing; it rejects CRC64 and SHA-256.
const XZ_CHECK: Check = Check::Crc32;
const XZ_MAGIC: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0];
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const ZSTD_MAGIC: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
const NEWC_MAGIC: &[u8] = b"070701";
/// liblzma's smallest dictionary.
const MIN_DICT: u64 = 4096;
/// Enough for preset 9's 64 MiB dictionary; a header asking for more is not ours to honour.
const XZ_MEMLIMIT: u64 = 128 << 20;
/// An area of at most a few MiB that inflates past this is a bomb, not a config.
const MAX_DECOMPRESSED: u64 = 64 << 20;
/// Decompressed bytes read per call; a power of two, so capacities stay powers of two.
const DECOMPRESS_CHUNK: usize = 64 << 10;

/// True when every byte is zero: nothing was ever embedded, or it was removed.
pub fn is_pristine(area: &[u8]) -> bool {
    area.iter().all(|&b| b == 0)
}

/// The bytes to write over an Ignition area of `area_len` bytes so it carries `config` (stored
/// verbatim, not validated). Fails with `TooLarge` when the compressed archive does not fit.
pub fn encode_ignition(config: &[u8], area_len: u64) -> Result<Vec<u8>, LiveIsoError> {
    fill_area(xz_compress(&cpio_archive(config)?)?, area_len)
}

/// As [`encode_ignition`], with the xz dictionary cut to the archive's size: the same compression
/// for a config of some KiB (a dictionary larger than the input finds nothing more), without preset
/// 9's 64 MiB dictionary and its ~670 MiB of match-finder memory. For areas made many times in one
/// process (a host's own variant of an installation ISO); any xz decoder reads either.
pub fn encode_ignition_compact(config: &[u8], area_len: u64) -> Result<Vec<u8>, LiveIsoError> {
    let archive = cpio_archive(config)?;
    let dict = (archive.len() as u64)
        .next_power_of_two()
        .clamp(MIN_DICT, u64::from(u32::MAX >> 1)) as u32;
    let mut options = LzmaOptions::new_preset(XZ_PRESET).map_err(io::Error::from)?;
    options.dict_size(dict);
    let mut filters = Filters::new();
    filters.lzma2(&options);
    let stream = Stream::new_stream_encoder(&filters, XZ_CHECK).map_err(io::Error::from)?;
    let mut enc = liblzma::write::XzEncoder::new_stream(Vec::new(), stream);
    enc.write_all(&archive)?;
    fill_area(enc.finish()?, area_len)
}

/// The compressed archive zero-filled to the area's length, or `TooLarge`.
fn fill_area(mut data: Vec<u8>, area_len: u64) -> Result<Vec<u8>, LiveIsoError> {
    let compressed = data.len() as u64;
    let fill = usize::try_from(area_len)
        .ok()
        .filter(|_| compressed <= area_len);
    let Some(fill) = fill else {
        return Err(LiveIsoError::TooLarge {
            compressed,
            area: area_len,
        });
    };
    data.resize(fill, 0);
    Ok(data)
}

/// The `config.ign` an Ignition area carries: `None` for a pristine area or an archive without
/// one (network keyfiles only). Accepts what coreos-installer writes (xz, possibly several
/// concatenated streams and archives; the last copy of the file wins, as in the kernel), what
/// openshift-install writes (gzip) and uncompressed cpio; anything else is an error rather than
/// a guess.
pub fn decode_ignition(area: &[u8]) -> Result<Option<Vec<u8>>, LiveIsoError> {
    let Some(start) = area.iter().position(|&b| b != 0) else {
        return Ok(None);
    };
    let data = &area[start..];
    if data.starts_with(XZ_MAGIC) {
        find_config(&xz_decompress(data)?)
    } else if data.starts_with(GZIP_MAGIC) {
        find_config(&gzip_decompress(data)?)
    } else if data.starts_with(NEWC_MAGIC) {
        find_config(data)
    } else {
        Err(LiveIsoError::BadArea(unknown_format(data)))
    }
}

fn unknown_format(data: &[u8]) -> String {
    if data.starts_with(ZSTD_MAGIC) {
        "the area is zstd-compressed; only xz, gzip and uncompressed cpio are supported".to_string()
    } else {
        let head: Vec<String> = data.iter().take(8).map(|b| format!("{b:02x}")).collect();
        format!(
            "neither an xz stream nor a newc cpio archive (starts with {})",
            head.join(" ")
        )
    }
}

/// A newc archive with `config.ign` and the trailer; every field but the mode, size and name is
/// the cpio crate's default (inode 0, uid/gid/mtime 0, one link), as coreos-installer writes it.
fn cpio_archive(config: &[u8]) -> io::Result<Vec<u8>> {
    let size = u32::try_from(config.len()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("an Ignition config of {} bytes", config.len()),
        )
    })?;
    let mut member = newc::Builder::new(CONFIG_NAME)
        .mode(CONFIG_MODE)
        .write(Vec::new(), size);
    member.write_all(config)?;
    newc::trailer(member.finish()?)
}

fn xz_compress(data: &[u8]) -> io::Result<Vec<u8>> {
    let stream = Stream::new_easy_encoder(XZ_PRESET, XZ_CHECK)?;
    let mut enc = liblzma::write::XzEncoder::new_stream(Vec::new(), stream);
    enc.write_all(data)?;
    enc.finish()
}

/// Decompresses every xz stream in `data`; the zero fill after the last one is dropped first
/// (a stream always ends in its non-zero footer magic), so any area length works.
fn xz_decompress(data: &[u8]) -> Result<Vec<u8>, LiveIsoError> {
    let end = data.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let stream = Stream::new_stream_decoder(XZ_MEMLIMIT, CONCATENATED).map_err(io::Error::from)?;
    let dec = liblzma::read::XzDecoder::new_stream(&data[..end], stream);
    let mut out = Vec::new();
    read_capped(dec, &mut out, MAX_DECOMPRESSED, "xz")?;
    Ok(out)
}

/// Decompresses gzip members separated by zero padding (openshift-install pads its one member
/// to a multiple of 4 bytes, then zero-fills the area). Zeros cannot be trimmed up front as for
/// xz: a member's size trailer may end in them.
fn gzip_decompress(mut data: &[u8]) -> Result<Vec<u8>, LiveIsoError> {
    let mut out = Vec::new();
    while !data.is_empty() {
        if !data.starts_with(GZIP_MAGIC) {
            return Err(LiveIsoError::BadArea(
                "non-zero bytes after a gzip stream".to_string(),
            ));
        }
        let mut member = flate2::bufread::GzDecoder::new(data);
        read_capped(&mut member, &mut out, MAX_DECOMPRESSED, "gzip")?;
        data = member.into_inner();
        data = &data[data.iter().position(|&b| b != 0).unwrap_or(data.len())..];
    }
    Ok(out)
}

/// Appends what `r` yields to `out`, failing before `out` would pass `limit`. `read_to_end` on a
/// `take(limit + 1)` also stops, but only after doubling its buffer on the way past the limit: a
/// bomb cost a 512 MiB allocation to learn that 256 MiB was exceeded. Growing by at most one chunk
/// at a time keeps the capacity within the next power of two of `limit`.
fn read_capped(
    mut r: impl Read,
    out: &mut Vec<u8>,
    limit: u64,
    what: &str,
) -> Result<(), LiveIsoError> {
    let mut chunk = vec![0u8; DECOMPRESS_CHUNK];
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(LiveIsoError::BadArea(format!("{what}: {e}"))),
        };
        if (out.len() + n) as u64 > limit {
            return Err(LiveIsoError::BadArea(format!(
                "it decompresses to more than {limit} bytes"
            )));
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

/// Walks one or more newc archives (zero padding between them is skipped) and returns the last
/// regular file named `config.ign`.
fn find_config(mut data: &[u8]) -> Result<Option<Vec<u8>>, LiveIsoError> {
    let mut found = None;
    while let Some(start) = data.iter().position(|&b| b != 0) {
        data = read_archive(&data[start..], &mut found)
            .map_err(|e| LiveIsoError::BadArea(format!("cpio: {e}")))?;
    }
    Ok(found)
}

/// Reads one archive up to its trailer, updating `found`; returns what follows the trailer.
fn read_archive<'a>(mut data: &'a [u8], found: &mut Option<Vec<u8>>) -> io::Result<&'a [u8]> {
    loop {
        let mut member = newc::Reader::new(data)?;
        let entry = member.entry();
        if entry.is_trailer() {
            return member.finish();
        }
        let name = entry
            .name()
            .trim_start_matches("./")
            .trim_start_matches('/');
        if name != CONFIG_NAME || entry.mode() & S_IFMT != S_IFREG {
            data = member.finish()?;
            continue;
        }
        let size = u64::from(entry.file_size());
        let mut contents = Vec::new();
        member.by_ref().take(size).read_to_end(&mut contents)?;
        if contents.len() as u64 != size {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("{CONFIG_NAME} is cut short"),
            ));
        }
        *found = Some(contents);
        data = member.finish()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Incompressible bytes without a dependency: xorshift64.
    fn noise(len: usize) -> Vec<u8> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn field(header: &[u8], index: usize) -> u32 {
        let at = 6 + 8 * index;
        let hex = std::str::from_utf8(&header[at..at + 8]).unwrap();
        u32::from_str_radix(hex, 16).unwrap()
    }

    #[test]
    fn cpio_archive_has_newc_headers_trailer_and_alignment() {
        let config = br#"{"ignition":{"version":"3.2.0"}}"#; // 32 bytes
        let a = cpio_archive(config).unwrap();
        assert_eq!(&a[..6], b"070701");
        // ino, mode, uid, gid, nlink, mtime, filesize, devmajor, devminor, rdevmajor, rdevminor,
        // namesize, check
        let want = [0, 0o100_600, 0, 0, 1, 0, 32, 0, 0, 0, 0, 11, 0];
        let got: Vec<u32> = (0..13).map(|i| field(&a, i)).collect();
        assert_eq!(got, want);
        assert_eq!(&a[110..121], b"config.ign\0");
        assert_eq!(&a[121..124], [0, 0, 0], "name padded to a multiple of 4");
        assert_eq!(&a[124..156], config);
        let trailer = &a[156..];
        assert_eq!(&trailer[..6], b"070701");
        assert_eq!(field(trailer, 6), 0, "trailer has no data");
        assert_eq!(&trailer[110..121], b"TRAILER!!!\0");
        assert_eq!(a.len() % 4, 0);
        assert_eq!(a.len(), 156 + 124);
    }

    #[test]
    fn odd_sizes_are_padded_to_four_bytes() {
        for len in 0..8 {
            let a = cpio_archive(&vec![b'x'; len]).unwrap();
            assert_eq!(a.len() % 4, 0, "config of {len} bytes");
            assert_eq!(&a[a.len() - 124..a.len() - 118], b"070701", "trailer");
        }
    }

    #[test]
    fn xz_stream_uses_crc32_check() {
        let area = encode_ignition(b"{}", 4096).unwrap();
        assert_eq!(&area[..6], XZ_MAGIC);
        assert_eq!(
            &area[6..8],
            [0x00, 0x01],
            "stream flags: check type 1 = CRC32"
        );
        let end = area.iter().rposition(|&b| b != 0).unwrap() + 1;
        assert_eq!(&area[end - 2..end], b"YZ", "footer magic");
        assert_eq!(
            &area[end - 4..end - 2],
            [0x00, 0x01],
            "footer repeats the flags"
        );
        assert_eq!(
            end % 4,
            0,
            "stream is 4-byte aligned, so the zero fill is valid padding"
        );
    }

    #[test]
    fn area_is_zero_filled_to_its_length_and_round_trips() {
        let config = br#"{"ignition":{"version":"3.2.0"},"passwd":{}}"#;
        let area = encode_ignition(config, 262_144).unwrap();
        assert_eq!(area.len(), 262_144);
        let compressed = xz_compress(&cpio_archive(config).unwrap()).unwrap();
        assert_eq!(&area[..compressed.len()], compressed.as_slice());
        assert!(is_pristine(&area[compressed.len()..]));
        assert_eq!(decode_ignition(&area).unwrap().unwrap(), config);
    }

    #[test]
    fn the_compact_encoding_round_trips_with_crc32_and_compresses_as_well() {
        let config: Vec<u8> = (0..40_000u32)
            .flat_map(|i| format!("line {} of a config\n", i % 977).into_bytes())
            .collect();
        let compact = encode_ignition_compact(&config, 1 << 20).unwrap();
        assert_eq!(&compact[6..8], [0x00, 0x01], "CRC32, as the kernel needs");
        assert_eq!(decode_ignition(&compact).unwrap().unwrap(), config);
        let used = |a: &[u8]| a.iter().rposition(|&b| b != 0).unwrap() + 1;
        let full = encode_ignition(&config, 1 << 20).unwrap();
        assert!(
            used(&compact) <= used(&full) + 64,
            "{} vs {}",
            used(&compact),
            used(&full)
        );
        assert_eq!(
            decode_ignition(&encode_ignition_compact(b"{}", 4096).unwrap())
                .unwrap()
                .unwrap(),
            b"{}"
        );
    }

    #[test]
    fn too_large_names_both_sizes() {
        let err = encode_ignition(&noise(10_000), 4096).unwrap_err();
        let LiveIsoError::TooLarge { compressed, area } = err else {
            panic!("{err}");
        };
        assert!(compressed > 10_000 && area == 4096);
        let msg = err_text(compressed, area);
        assert!(
            msg.contains(&compressed.to_string()) && msg.contains("4096"),
            "{msg}"
        );
        let fits = encode_ignition(&noise(10_000), compressed).unwrap();
        assert_eq!(fits.len() as u64, compressed, "exactly full is fine");
    }

    fn err_text(compressed: u64, area: u64) -> String {
        LiveIsoError::TooLarge { compressed, area }.to_string()
    }

    #[test]
    fn pristine_area_decodes_to_none() {
        assert!(decode_ignition(&[0u8; 262_144]).unwrap().is_none());
        assert!(decode_ignition(&[]).unwrap().is_none());
        assert!(is_pristine(&[0; 16]) && !is_pristine(&[0, 0, 1]));
    }

    #[test]
    fn uncompressed_and_concatenated_archives_decode_last_wins() {
        let mut raw = cpio_archive(b"first").unwrap();
        raw.extend_from_slice(&[0; 512]);
        assert_eq!(decode_ignition(&raw).unwrap().unwrap(), b"first");
        let mut area = xz_compress(&cpio_archive(b"first").unwrap()).unwrap();
        area.extend_from_slice(&[0; 64]);
        area.extend(xz_compress(&cpio_archive(b"second").unwrap()).unwrap());
        area.extend_from_slice(&[0; 1000]);
        assert_eq!(decode_ignition(&area).unwrap().unwrap(), b"second");
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn gzip_areas_as_openshift_install_writes_them_decode() {
        // 264 bytes of config make a 512-byte archive, whose gzip size trailer ends in zeros.
        let config = vec![b'x'; 264];
        let archive = cpio_archive(&config).unwrap();
        assert_eq!(archive.len(), 512);
        let mut area = gzip(&archive);
        assert_eq!(
            &area[area.len() - 2..],
            [0, 0],
            "ISIZE 512 ends in zero bytes"
        );
        area.resize(area.len().next_multiple_of(4) + 4096, 0);
        assert_eq!(decode_ignition(&area).unwrap().unwrap(), config);
        area.extend(gzip(&cpio_archive(b"second").unwrap()));
        area.extend_from_slice(&[0; 64]);
        assert_eq!(decode_ignition(&area).unwrap().unwrap(), b"second");
        area.extend_from_slice(b"junk");
        let err = decode_ignition(&area).unwrap_err().to_string();
        assert!(err.contains("non-zero bytes after a gzip stream"), "{err}");
    }

    #[test]
    fn archive_without_config_decodes_to_none() {
        let mut member = newc::Builder::new("etc/coreos-firstboot-network/a.nmconnection")
            .mode(0o100_600)
            .write(Vec::new(), 3);
        member.write_all(b"abc").unwrap();
        let archive = newc::trailer(member.finish().unwrap()).unwrap();
        let area = xz_compress(&archive).unwrap();
        assert!(decode_ignition(&area).unwrap().is_none());
    }

    #[test]
    fn decompression_stops_at_the_limit_without_overshooting() {
        let limit = 1 << 20;
        let mut out = Vec::new();
        read_capped(&[7u8; 1 << 20][..], &mut out, limit, "x").unwrap();
        assert_eq!(out.len(), 1 << 20);
        assert!(out.capacity() <= limit as usize, "{}", out.capacity());
        let mut out = Vec::new();
        let err = read_capped(io::repeat(0), &mut out, limit, "x").unwrap_err();
        assert!(err.to_string().contains("more than 1048576 bytes"), "{err}");
        assert!(out.capacity() <= limit as usize, "{}", out.capacity());
    }

    #[test]
    fn foreign_or_damaged_areas_are_errors() {
        let good = encode_ignition(b"{}", 4096).unwrap();
        let end = good.iter().rposition(|&b| b != 0).unwrap() + 1;
        let mut garbage_after = good.clone();
        garbage_after[end + 8] = 0x55;
        let mut flipped = good.clone();
        flipped[end / 2] ^= 0x40;
        let truncated_cpio = cpio_archive(b"{}").unwrap()[..100].to_vec();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![0x1f, 0x8b, 8, 0], "gzip:"),
            (vec![0x28, 0xb5, 0x2f, 0xfd], "zstd-compressed"),
            (b"hello world".to_vec(), "starts with 68 65 6c"),
            (garbage_after, "xz:"),
            (flipped, "xz:"),
            (truncated_cpio, "cpio:"),
        ];
        for (area, want) in cases {
            let err = decode_ignition(&area).unwrap_err().to_string();
            assert!(
                err.starts_with("decoding the Ignition embed area: ") && err.contains(want),
                "{err}"
            );
        }
    }
}
