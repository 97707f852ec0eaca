//! Building an image: `IsoBuilder` collects a tree of directories and in-memory files, `write`
//! plans it (see `layout`) and streams it to any `Write` in ascending block order, so the output
//! can be a pipe. Everything is ordered by `BTreeMap`s and the caller's timestamp, which makes the
//! bytes a pure function of the tree and the options.

use super::format::{
    self, DateTime, FIRST_VD_SECTOR, PVD_BLOCK_SIZE, PVD_ROOT_RECORD, PVD_VOLUME_ID, RecordOut,
    STANDARD_ID, VD_PRIMARY, VD_TERMINATOR, pack_records, put_u16_both, put_u32_both,
};
use super::layout::{self, DirPlan, Plan, RecordPlan, Target};
use super::names::split_path;
use super::tree::{DirNode, FileNode, Node};
use super::{BLOCK_SIZE, IsoError};
use std::collections::btree_map::Entry as MapEntry;
use std::io::Write;

/// The volume identifier field is 32 bytes (ECMA-119 8.4.6).
const MAX_VOLUME_ID: usize = 32;
/// Permission bits callers may set; file type bits come from the node kind.
const PERMISSION_BITS: u32 = 0o7777;

/// Options that apply to the whole image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOptions {
    /// Written verbatim, space-padded to 32 bytes; `blkid` reports it as LABEL.
    pub volume_id: String,
    /// Unix seconds (UTC) used for every date in the image, so builds are reproducible.
    pub timestamp: i64,
}

/// A tree of directories and files to write as an ISO 9660 image with Rock Ridge.
#[derive(Debug, Default, Clone)]
pub struct IsoBuilder {
    root: DirNode,
}

impl IsoBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds directory `path` ("a/b", relative) with permission bits `mode`; missing parents are
    /// created with 0o755. A directory that so far existed only as a parent takes `mode`, so the
    /// result does not depend on the order of calls.
    pub fn add_dir(&mut self, path: &str, mode: u32) -> Result<(), IsoError> {
        let (parent, name) = self.parent_of(path)?;
        match parent.children.entry(name.to_string()) {
            MapEntry::Vacant(slot) => {
                slot.insert(Node::Dir(DirNode {
                    mode: mode & PERMISSION_BITS,
                    explicit: true,
                    ..DirNode::default()
                }));
            }
            MapEntry::Occupied(mut slot) => match slot.get_mut() {
                Node::Dir(d) if !d.explicit => {
                    d.mode = mode & PERMISSION_BITS;
                    d.explicit = true;
                }
                _ => {
                    return Err(IsoError::Duplicate {
                        path: path.to_string(),
                    });
                }
            },
        }
        Ok(())
    }

    /// Adds file `path` with contents `data` and permission bits `mode`.
    pub fn add_file(&mut self, path: &str, data: Vec<u8>, mode: u32) -> Result<(), IsoError> {
        let (parent, name) = self.parent_of(path)?;
        match parent.children.entry(name.to_string()) {
            MapEntry::Vacant(slot) => {
                slot.insert(Node::File(FileNode {
                    mode: mode & PERMISSION_BITS,
                    data,
                }));
                Ok(())
            }
            MapEntry::Occupied(_) => Err(IsoError::Duplicate {
                path: path.to_string(),
            }),
        }
    }

    /// Validates `path` and returns its parent directory (created as needed) and last component.
    fn parent_of<'p>(&mut self, path: &'p str) -> Result<(&mut DirNode, &'p str), IsoError> {
        let parts = split_path(path)?;
        let (name, dirs) = parts.split_last().ok_or_else(|| IsoError::InvalidName {
            path: path.to_string(),
            reason: "empty path".to_string(),
        })?;
        let mut dir = &mut self.root;
        for (depth, part) in dirs.iter().enumerate() {
            let node = dir
                .children
                .entry((*part).to_string())
                .or_insert_with(|| Node::Dir(DirNode::default()));
            dir = match node {
                Node::Dir(d) => d,
                Node::File(_) => {
                    let prefix = parts[..=depth].join("/");
                    return Err(IsoError::NotADirectory { path: prefix });
                }
            };
        }
        Ok((dir, name))
    }

    /// Writes the image to `out` in ascending block order; `out` needs no `Seek`.
    pub fn write<W: Write>(&self, opts: &WriteOptions, mut out: W) -> Result<(), IsoError> {
        validate_volume_id(&opts.volume_id)?;
        let date = DateTime::from_unix(opts.timestamp)?;
        let plan = layout::plan(&self.root, date)?;
        let mut em = Emitter {
            out: &mut out,
            block: 0,
        };
        em.put(&vec![0u8; FIRST_VD_SECTOR as usize * BLOCK_SIZE])?;
        em.put(&primary_descriptor(&plan, opts, date))?;
        em.put(&terminator())?;
        em.put_at(
            plan.l_path_table,
            &path_table(&plan, u32::to_le_bytes, u16::to_le_bytes),
        )?;
        em.put_at(
            plan.m_path_table,
            &path_table(&plan, u32::to_be_bytes, u16::to_be_bytes),
        )?;
        let rec_date = date.to_record_bytes();
        for dir in &plan.dirs {
            em.put_at(dir.lba, &directory_bytes(&plan, dir, rec_date)?)?;
        }
        em.put_at(plan.ca_lba, &continuation_blocks(&plan))?;
        for file in &plan.files {
            if !file.data.is_empty() {
                em.put_at(file.lba, file.data)?;
            }
        }
        em.finish(plan.total_blocks)?;
        out.flush()?;
        Ok(())
    }
}

/// Rejects volume identifiers that would not survive the 32-byte field or confuse `blkid`.
fn validate_volume_id(id: &str) -> Result<(), IsoError> {
    let reason = if id.len() > MAX_VOLUME_ID {
        format!("{} bytes, more than {MAX_VOLUME_ID}", id.len())
    } else if id.chars().any(char::is_control) {
        "contains control characters".to_string()
    } else {
        return Ok(());
    };
    Err(IsoError::InvalidVolumeId {
        id: id.to_string(),
        reason,
    })
}

/// Tracks the block being written so the plan and the stream cannot silently drift apart.
struct Emitter<W> {
    out: W,
    block: u64,
}

impl<W: Write> Emitter<W> {
    /// Writes `bytes` padded with zeros to a whole number of blocks.
    fn put(&mut self, bytes: &[u8]) -> Result<(), IsoError> {
        self.out.write_all(bytes)?;
        let padded = bytes.len().next_multiple_of(BLOCK_SIZE);
        self.out.write_all(&vec![0u8; padded - bytes.len()])?;
        self.block += layout::blocks_for(bytes.len() as u64);
        Ok(())
    }

    /// Like `put`, after checking the stream is at the block the plan chose.
    fn put_at(&mut self, lba: u32, bytes: &[u8]) -> Result<(), IsoError> {
        self.check_at(u64::from(lba))?;
        self.put(bytes)
    }

    fn finish(&mut self, total_blocks: u32) -> Result<(), IsoError> {
        self.check_at(u64::from(total_blocks))
    }

    fn check_at(&self, block: u64) -> Result<(), IsoError> {
        if self.block == block {
            return Ok(());
        }
        Err(IsoError::Malformed(format!(
            "internal layout error: at block {} but the plan expects {block}",
            self.block
        )))
    }
}

/// The Primary Volume Descriptor (ECMA-119 8.4).
fn primary_descriptor(plan: &Plan<'_>, opts: &WriteOptions, date: DateTime) -> Vec<u8> {
    let mut vd = vec![0u8; BLOCK_SIZE];
    vd[0] = VD_PRIMARY;
    vd[1..6].copy_from_slice(STANDARD_ID);
    vd[6] = 1; // descriptor version
    vd[8..72].fill(b' '); // system and volume identifiers are space padded
    let id = opts.volume_id.as_bytes();
    vd[PVD_VOLUME_ID..PVD_VOLUME_ID + id.len()].copy_from_slice(id);
    put_u32_both(&mut vd[80..88], plan.total_blocks);
    put_u16_both(&mut vd[120..124], 1); // volume set size
    put_u16_both(&mut vd[124..128], 1); // volume sequence number
    put_u16_both(
        &mut vd[PVD_BLOCK_SIZE..PVD_BLOCK_SIZE + 4],
        BLOCK_SIZE as u16,
    );
    put_u32_both(&mut vd[132..140], plan.path_table_size);
    vd[140..144].copy_from_slice(&plan.l_path_table.to_le_bytes());
    vd[148..152].copy_from_slice(&plan.m_path_table.to_be_bytes());
    let root = &plan.dirs[0];
    let mut rec = Vec::with_capacity(34);
    let root_rec = RecordOut {
        extent: root.lba,
        size: root.size,
        date: date.to_record_bytes(),
        is_dir: true,
        id: &[0],
        su: &[],
    };
    // A 34-byte record with no system use area always encodes.
    if root_rec.encode(&mut rec).is_ok() {
        vd[PVD_ROOT_RECORD..PVD_ROOT_RECORD + rec.len()].copy_from_slice(&rec);
    }
    vd[190..813].fill(b' '); // volume set, publisher, preparer, application and file identifiers
    let created = date.to_descriptor_bytes();
    vd[813..830].copy_from_slice(&created);
    vd[830..847].copy_from_slice(&created);
    vd[847..864].copy_from_slice(&format::unspecified_descriptor_date()); // never expires
    vd[864..881].copy_from_slice(&created); // effective immediately
    vd[881] = 1; // file structure version
    vd
}

/// The Volume Descriptor Set Terminator (ECMA-119 8.3).
fn terminator() -> Vec<u8> {
    let mut vd = vec![0u8; BLOCK_SIZE];
    vd[0] = VD_TERMINATOR;
    vd[1..6].copy_from_slice(STANDARD_ID);
    vd[6] = 1;
    vd
}

/// A path table in the byte order given by `u32_bytes`/`u16_bytes` (ECMA-119 9.4). Directory
/// numbers are 1-based positions in `plan.dirs`, which is already in path table order.
fn path_table(
    plan: &Plan<'_>,
    u32_bytes: fn(u32) -> [u8; 4],
    u16_bytes: fn(u16) -> [u8; 2],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(plan.path_table_size as usize);
    for dir in &plan.dirs {
        out.push(dir.id.len() as u8);
        out.push(0); // no extended attribute record
        out.extend_from_slice(&u32_bytes(dir.lba));
        // The planner caps directories at u16::MAX, so parent + 1 fits.
        out.extend_from_slice(&u16_bytes((dir.parent + 1) as u16));
        out.extend_from_slice(&dir.id);
        out.resize(out.len() + dir.id.len() % 2, 0);
    }
    out
}

/// One directory's extent: its records packed so none straddles a sector.
fn directory_bytes(plan: &Plan<'_>, dir: &DirPlan, date: [u8; 7]) -> Result<Vec<u8>, IsoError> {
    let (offsets, size) = pack_records(dir.records.iter().map(layout::record_len));
    let mut out = Vec::with_capacity(size);
    for (rec, offset) in dir.records.iter().zip(offsets) {
        out.resize(offset, 0);
        encode_record(plan, rec, date, &mut out)?;
    }
    out.resize(size, 0);
    Ok(out)
}

fn encode_record(
    plan: &Plan<'_>,
    rec: &RecordPlan,
    date: [u8; 7],
    out: &mut Vec<u8>,
) -> Result<(), IsoError> {
    let (extent, size, is_dir) = match rec.target {
        Target::Dir(i) => (plan.dirs[i].lba, plan.dirs[i].size, true),
        Target::File(i) => (plan.files[i].lba, plan.files[i].data.len() as u32, false),
    };
    let su = rec.su.inline_bytes(&rec.ca);
    RecordOut {
        extent,
        size,
        date,
        is_dir,
        id: &rec.id,
        su: &su,
    }
    .encode(out)
}

/// All continuation areas, at the offsets the planner gave them.
fn continuation_blocks(plan: &Plan<'_>) -> Vec<u8> {
    let mut out = vec![0u8; plan.ca_blocks as usize * BLOCK_SIZE];
    let base = plan.ca_lba as usize;
    for rec in plan.dirs.iter().flat_map(|d| d.records.iter()) {
        for (i, loc) in rec.ca.iter().enumerate() {
            let start = (loc.block as usize - base) * BLOCK_SIZE + loc.offset as usize;
            let bytes = rec.su.piece_bytes(i, &rec.ca);
            out[start..start + bytes.len()].copy_from_slice(&bytes);
        }
    }
    out
}

/// A small image labelled `label` holding the directories `dirs` (0755) and the files `files`
/// (path, contents, mode), for tests that need an image on disk or in a fake device (feature
/// `test-support`, for the tests of the crates above).
#[cfg(any(test, feature = "test-support"))]
#[allow(clippy::unwrap_used)] // test support: a fixture that cannot be built is the test's failure
pub fn test_image(label: &str, dirs: &[&str], files: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let mut b = IsoBuilder::new();
    for d in dirs {
        b.add_dir(d, 0o755).unwrap();
    }
    for (path, data, mode) in files {
        b.add_file(path, data.to_vec(), *mode).unwrap();
    }
    let opts = WriteOptions {
        volume_id: label.to_string(),
        timestamp: 0,
    };
    let mut iso = Vec::new();
    b.write(&opts, &mut iso).unwrap();
    iso
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> WriteOptions {
        WriteOptions {
            volume_id: "cluster-config".into(),
            timestamp: 1_700_000_000,
        }
    }

    fn image(b: &IsoBuilder) -> Vec<u8> {
        let mut out = Vec::new();
        b.write(&opts(), &mut out).unwrap();
        out
    }

    #[test]
    fn builder_rejects_bad_input() {
        let mut b = IsoBuilder::new();
        b.add_file("a/f", vec![1], 0o644).unwrap();
        b.add_dir("d", 0o700).unwrap();
        let cases: Vec<(Result<(), IsoError>, &str)> = vec![
            (
                b.clone().add_file("a/f", vec![], 0o644),
                "\"a/f\" already exists",
            ),
            (b.clone().add_dir("a/f", 0o755), "\"a/f\" already exists"),
            (
                b.clone().add_file("a", vec![], 0o644),
                "\"a\" already exists",
            ),
            (b.clone().add_dir("d", 0o755), "\"d\" already exists"),
            (
                b.clone().add_file("a/f/g", vec![], 0o644),
                "\"a/f\" is not a directory",
            ),
            (b.clone().add_dir("", 0o755), "invalid name \"\""),
            (
                b.clone().add_file("x/../y", vec![], 0o644),
                "invalid name \"x/../y\"",
            ),
        ];
        for (got, want) in cases {
            let err = got.unwrap_err().to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn debug_output_hides_file_contents() {
        let mut b = IsoBuilder::new();
        b.add_file("secret", b"hunter2".to_vec(), 0o600).unwrap();
        let shown = format!("{b:?}");
        assert!(
            !shown.contains("104, 117") && !shown.contains("hunter2"),
            "{shown}"
        );
        assert!(
            shown.contains("len: 7") && shown.contains("mode: 600"),
            "{shown}"
        );
    }

    #[test]
    fn implicit_parent_takes_later_mode() {
        let mut a = IsoBuilder::new();
        a.add_file("d/f", vec![], 0o600).unwrap();
        a.add_dir("d", 0o700).unwrap();
        let mut b = IsoBuilder::new();
        b.add_dir("d", 0o700).unwrap();
        b.add_file("d/f", vec![], 0o600).unwrap();
        assert_eq!(image(&a), image(&b));
    }

    #[test]
    fn volume_ids_are_validated() {
        let ok = ["", "cluster-config", "UPPER_lower 09", &"x".repeat(32)];
        for id in ok {
            assert!(validate_volume_id(id).is_ok(), "{id:?}");
        }
        let bad = [
            ("x".repeat(33), "33 bytes"),
            ("a\nb".into(), "control"),
            ("a\u{7f}".into(), "control"),
        ];
        for (id, want) in bad {
            let err = validate_volume_id(&id).unwrap_err().to_string();
            assert!(
                err.contains(want) && err.contains("volume identifier"),
                "{err}"
            );
        }
    }

    #[test]
    fn descriptors_are_at_fixed_offsets() {
        let img = image(&IsoBuilder::new());
        assert!(
            img[..16 * BLOCK_SIZE].iter().all(|&b| b == 0),
            "system area is zero"
        );
        let pvd = &img[16 * BLOCK_SIZE..17 * BLOCK_SIZE];
        assert_eq!(&pvd[..7], b"\x01CD001\x01");
        assert_eq!(&pvd[40..72], b"cluster-config                  ");
        let blocks = format::get_u32_le(pvd, 80).unwrap() as usize;
        assert_eq!(
            blocks * BLOCK_SIZE,
            img.len(),
            "volume space size matches the stream"
        );
        assert_eq!(&pvd[813..829], b"2023111422132000");
        assert_eq!(&img[17 * BLOCK_SIZE..17 * BLOCK_SIZE + 7], b"\xffCD001\x01");
    }

    #[test]
    fn path_tables_agree_in_both_byte_orders() {
        let mut b = IsoBuilder::new();
        b.add_dir("b/c", 0o755).unwrap();
        b.add_dir("a", 0o755).unwrap();
        let img = image(&b);
        let pvd = &img[16 * BLOCK_SIZE..];
        let size = format::get_u32_le(pvd, 132).unwrap() as usize;
        assert_eq!(
            size,
            10 + 10 + 10 + 10,
            "root plus A, B, C, each padded to 10 bytes"
        );
        let l = format::get_u32_le(pvd, 140).unwrap() as usize * BLOCK_SIZE;
        let m = u32::from_be_bytes([pvd[148], pvd[149], pvd[150], pvd[151]]) as usize * BLOCK_SIZE;
        let (l, m) = (&img[l..l + size], &img[m..m + size]);
        let ids: Vec<&[u8]> = (0..4).map(|i| &l[i * 10 + 8..i * 10 + 9]).collect();
        assert_eq!(
            ids,
            [b"\0", b"A", b"B", b"C"],
            "level order, then identifier"
        );
        for i in 0..4 {
            let r = i * 10;
            assert_eq!(
                l[r + 2..r + 6].iter().rev().collect::<Vec<_>>(),
                m[r + 2..r + 6].iter().collect::<Vec<_>>()
            );
            assert_eq!(l[r + 6], m[r + 7], "parent number of record {i}");
        }
        assert_eq!(l[36], 3, "C's parent is directory 3 (B)");
    }
}
