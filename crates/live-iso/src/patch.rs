//! Writing a customized ISO: the image (about 1 GiB for RHCOS) is copied by the kernel and only
//! the embed areas are rewritten, so memory stays flat whatever the image size. `std::io::copy`
//! between two files uses `copy_file_range` on Linux (a reflink or a server-side copy where the
//! file system offers one) and itself falls back to `sendfile` and then a small buffered
//! read/write loop on EXDEV, ENOSYS, EINVAL and the like; the patches are then `pwrite`n.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};

/// Bytes per copy call: bounds the time between progress reports, not memory.
const COPY_CHUNK: u64 = 64 << 20;

/// New bytes for an absolute range of the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    pub offset: u64,
    pub data: Vec<u8>,
}

impl Patch {
    fn end(&self) -> u64 {
        self.offset + self.data.len() as u64
    }
}

/// Copies all of `src` to `dst` (truncated first), then writes `patches` over the copy.
/// `progress` receives the number of bytes copied so far after each chunk. Both files' positions
/// are moved. Patches must lie inside the image and not overlap, so the size never changes.
pub fn copy_with_patches(
    src: &File,
    dst: &File,
    patches: &[Patch],
    progress: &mut dyn FnMut(u64),
) -> io::Result<()> {
    let (meta, dst_meta) = (src.metadata()?, dst.metadata()?);
    if (meta.dev(), meta.ino()) == (dst_meta.dev(), dst_meta.ino()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the source and the destination are the same file; patch it in place instead",
        ));
    }
    let len = meta.len();
    check_patches(patches, len)?;
    dst.set_len(0)?;
    let (mut from, mut to) = (src, dst);
    from.seek(SeekFrom::Start(0))?;
    to.seek(SeekFrom::Start(0))?;
    let mut copied = 0u64;
    while copied < len {
        let n = io::copy(&mut from.take(COPY_CHUNK.min(len - copied)), &mut to)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the source ended after {copied} of {len} bytes"),
            ));
        }
        copied += n;
        progress(copied);
    }
    write_patches(dst, patches)
}

fn write_patches(file: &File, patches: &[Patch]) -> io::Result<()> {
    for p in patches {
        file.write_all_at(&p.data, p.offset)?;
    }
    Ok(())
}

/// Fills `buf` with the customized image's bytes at `offset`: the source's bytes with every patch
/// laid over them. `ibi serve` streams a variant ISO through this without writing it, and
/// [`copy_with_patches`] is its whole-file equivalent; a test holds the two to the same bytes.
pub fn read_patched_at(
    src: &File,
    patches: &[Patch],
    offset: u64,
    buf: &mut [u8],
) -> io::Result<()> {
    src.read_exact_at(buf, offset)?;
    overlay(patches, offset, buf);
    Ok(())
}

/// Copies into `buf` (which holds the image's bytes from `offset`) the parts of `patches` that
/// fall inside it.
pub fn overlay(patches: &[Patch], offset: u64, buf: &mut [u8]) {
    let end = offset.saturating_add(buf.len() as u64);
    for p in patches {
        let (from, to) = (p.offset.max(offset), p.end().min(end));
        if from >= to {
            continue;
        }
        let src = &p.data[(from - p.offset) as usize..(to - p.offset) as usize];
        buf[(from - offset) as usize..(to - offset) as usize].copy_from_slice(src);
    }
}

/// The customized image as a reader: `src`'s bytes with `patches` laid over them, for formats that
/// read through `Read + Seek` (the ISO 9660 reader, the embed areas) on a variant that was never
/// written out.
pub struct PatchedReader<'a> {
    src: &'a File,
    patches: &'a [Patch],
    pos: u64,
    len: u64,
}

impl<'a> PatchedReader<'a> {
    pub fn new(src: &'a File, patches: &'a [Patch]) -> io::Result<Self> {
        Ok(PatchedReader {
            src,
            patches,
            pos: 0,
            len: src.metadata()?.len(),
        })
    }
}

impl Read for PatchedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (self.len.saturating_sub(self.pos)).min(buf.len() as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        read_patched_at(self.src, self.patches, self.pos, &mut buf[..n])?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for PatchedReader<'_> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = target
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the start"))?;
        Ok(self.pos)
    }
}

/// Checks `patches` fit an image of `len` bytes without overlapping (see [`copy_with_patches`]).
pub fn validate_patches(patches: &[Patch], len: u64) -> io::Result<()> {
    check_patches(patches, len)
}

/// Refuses patches past the end (they would grow the image) or overlapping (one would silently
/// win): both mean the areas were located wrongly.
fn check_patches(patches: &[Patch], len: u64) -> io::Result<()> {
    let mut sorted: Vec<&Patch> = patches.iter().collect();
    sorted.sort_by_key(|p| p.offset);
    let invalid = |msg: String| Err(io::Error::new(io::ErrorKind::InvalidInput, msg));
    for pair in sorted.windows(2) {
        if pair[0].end() > pair[1].offset {
            return invalid(format!(
                "patches at offsets {} and {} overlap",
                pair[0].offset, pair[1].offset
            ));
        }
    }
    match sorted.last() {
        Some(p)
            if p.offset
                .checked_add(p.data.len() as u64)
                .is_none_or(|e| e > len) =>
        {
            invalid(format!(
                "a {}-byte patch at offset {} reaches past the end of the {len}-byte image",
                p.data.len(),
                p.offset
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    fn contents(mut f: &File) -> Vec<u8> {
        let mut out = Vec::new();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn the_patched_reader_reads_what_the_copy_holds() {
        let src_bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let src = file_with(&src_bytes);
        let patches = [Patch {
            offset: 4_000,
            data: vec![9; 100],
        }];
        let mut want = src_bytes.clone();
        want[4_000..4_100].fill(9);
        let mut r = PatchedReader::new(&src, &patches).unwrap();
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        assert_eq!(got, want);
        r.seek(SeekFrom::Start(3_990)).unwrap();
        let mut window = [0u8; 20];
        r.read_exact(&mut window).unwrap();
        assert_eq!(window[..], want[3_990..4_010]);
        assert_eq!(r.seek(SeekFrom::End(-1)).unwrap(), 9_999);
        assert!(r.seek(SeekFrom::Current(-10_000)).is_err());
    }

    #[test]
    fn copies_everything_then_patches() {
        let src_bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let src = file_with(&src_bytes);
        let dst = file_with(&[7u8; 300_000]); // longer: must be truncated
        let patches = [
            Patch {
                offset: 10,
                data: b"abc".to_vec(),
            },
            Patch {
                offset: 99_998,
                data: b"yz".to_vec(),
            },
        ];
        let mut seen = Vec::new();
        copy_with_patches(&src, &dst, &patches, &mut |n| seen.push(n)).unwrap();
        let mut want = src_bytes.clone();
        want[10..13].copy_from_slice(b"abc");
        want[99_998..].copy_from_slice(b"yz");
        assert_eq!(contents(&dst), want);
        assert_eq!(seen.last(), Some(&100_000));
        assert_eq!(contents(&src), src_bytes, "source untouched");
    }

    #[test]
    fn bad_patches_are_refused_before_anything_is_written() {
        let src = file_with(&[1u8; 100]);
        let cases = [
            (
                vec![Patch {
                    offset: 99,
                    data: vec![0, 0],
                }],
                "reaches past the end of the 100-byte",
            ),
            (
                vec![Patch {
                    offset: u64::MAX,
                    data: vec![0],
                }],
                "reaches past the end",
            ),
            (
                vec![
                    Patch {
                        offset: 50,
                        data: vec![0; 5],
                    },
                    Patch {
                        offset: 10,
                        data: vec![0; 41],
                    },
                ],
                "patches at offsets 10 and 50 overlap",
            ),
        ];
        for (patches, want) in cases {
            let dst = file_with(b"keep");
            let err = copy_with_patches(&src, &dst, &patches, &mut |_| {}).unwrap_err();
            assert!(err.to_string().contains(want), "{err}");
            assert_eq!(contents(&dst), b"keep");
        }
        assert_eq!(contents(&src), [1u8; 100]);
    }

    #[test]
    fn refuses_to_copy_a_file_onto_itself() {
        let f = file_with(b"precious");
        let again = f.try_clone().unwrap();
        let err = copy_with_patches(&f, &again, &[], &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("same file"), "{err}");
        assert_eq!(contents(&f), b"precious");
    }

    #[test]
    fn reading_patched_ranges_matches_the_patched_copy() {
        let src_bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 253) as u8).collect();
        let src = file_with(&src_bytes);
        let patches = [
            Patch {
                offset: 100,
                data: vec![0xAA; 300],
            },
            Patch {
                offset: 9_990,
                data: vec![0xBB; 10],
            },
        ];
        let dst = file_with(b"");
        copy_with_patches(&src, &dst, &patches, &mut |_| {}).unwrap();
        let whole = contents(&dst);
        // Windows that start before, inside and after each patch, and span both.
        for (off, len) in [
            (0, 10_000),
            (0, 100),
            (50, 100),
            (150, 10),
            (399, 2),
            (9_985, 15),
            (400, 9_600),
        ] {
            let mut buf = vec![0u8; len];
            read_patched_at(&src, &patches, off as u64, &mut buf).unwrap();
            assert_eq!(buf, whole[off..off + len], "window {off}+{len}");
        }
    }
}
