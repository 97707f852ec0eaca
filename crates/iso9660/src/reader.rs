//! Reading an image: locating the Primary Volume Descriptor, walking directories, resolving Rock
//! Ridge names and modes, and extracting file data. Every length, offset and chain in the image is
//! untrusted: reads are checked against the image size, CE chains and directory depth are capped,
//! and each directory is visited at most once, so a hostile image ends in an error, not a panic or
//! a loop.

use super::format::{
    FIRST_VD_SECTOR, FLAG_MULTI_EXTENT, PVD_BLOCK_SIZE, PVD_ROOT_RECORD, PVD_VOLUME_ID, RecordIn,
    STANDARD_ID, VD_PRIMARY, VD_TERMINATOR, get_u16_le,
};
use super::names::plain_identifier;
use super::rockridge::{self, CaLocation, RrInfo};
use super::{BLOCK_SIZE, IsoError};
use std::collections::BTreeSet;
use std::io::{Read, Seek, SeekFrom};

/// Volume descriptors we look through for the PVD; real images have three or four.
const MAX_DESCRIPTORS: u64 = 64;
/// Deepest directory nesting we follow; far beyond anything real, low enough to stop pathologies.
const MAX_DEPTH: usize = 128;
/// Slack on top of twice the image size for the metadata one walk or look-up may read.
const META_SLACK: u64 = 1 << 20;

/// One file or directory found in an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Rock Ridge name if present, else the ISO name without ";1" and trailing ".", '/'-joined.
    pub path: String,
    /// Raw ISO 9660 identifiers joined by '/', versions kept ("DIR/FILE.TXT;1").
    pub iso_path: String,
    pub is_dir: bool,
    /// The Rock Ridge PX mode, file type bits included (0o100644 for a plain file).
    pub mode: Option<u32>,
    pub size: u64,
    /// First logical block of the data.
    pub extent: u32,
}

/// A directory to read: its extent and length in bytes.
#[derive(Debug, Clone, Copy)]
struct DirRef {
    extent: u32,
    size: u64,
}

/// A child record with its names resolved.
#[derive(Debug)]
struct Child {
    name: String,
    iso_name: String,
    is_dir: bool,
    mode: Option<u32>,
    extent: u32,
    size: u64,
}

/// Reads an ISO 9660 image from any seekable byte source.
#[derive(Debug)]
pub struct IsoReader<R> {
    inner: R,
    image_len: u64,
    volume_id: String,
    root: DirRef,
    root_mode: Option<u32>,
    rock_ridge: bool,
    /// SUSP LEN_SKP: bytes to skip at the start of every system use area but the root's ".".
    susp_skip: usize,
    /// Directory and continuation bytes one walk or look-up may read. An honest image reads each
    /// structure once, so the total stays under its size; overlapping structures in a hostile
    /// image could otherwise multiply the work without ever looping.
    meta_limit: u64,
    meta_budget: u64,
}

impl<R: Read + Seek> IsoReader<R> {
    /// Parses the volume descriptors and probes the root directory for Rock Ridge.
    pub fn open(mut inner: R) -> Result<Self, IsoError> {
        let image_len = inner.seek(SeekFrom::End(0))?;
        let pvd = find_primary_descriptor(&mut inner, image_len)?;
        if get_u16_le(&pvd, PVD_BLOCK_SIZE) != Some(BLOCK_SIZE as u16) {
            return Err(IsoError::Malformed(
                "logical block size is not 2048".to_string(),
            ));
        }
        let root_len = usize::from(pvd[PVD_ROOT_RECORD]);
        let root_rec = RecordIn::parse(&pvd[PVD_ROOT_RECORD..PVD_ROOT_RECORD + root_len])?;
        let volume_id = String::from_utf8_lossy(&pvd[PVD_VOLUME_ID..PVD_VOLUME_ID + 32])
            .trim_end_matches([' ', '\0'])
            .to_string();
        let root = DirRef {
            extent: root_rec.extent,
            size: u64::from(root_rec.size),
        };
        let meta_limit = image_len.saturating_mul(2).saturating_add(META_SLACK);
        let mut reader = Self {
            inner,
            image_len,
            volume_id,
            root,
            root_mode: None,
            rock_ridge: false,
            susp_skip: 0,
            meta_limit,
            meta_budget: meta_limit,
        };
        reader.probe_rock_ridge()?;
        Ok(reader)
    }

    /// The volume identifier with trailing padding removed, case kept.
    pub fn volume_id(&self) -> &str {
        &self.volume_id
    }

    /// The size of the image in bytes. Directory records are untrusted, so callers that turn an
    /// entry into a byte range of their own check the range against this.
    pub fn image_len(&self) -> u64 {
        self.image_len
    }

    /// Whether the root announces SUSP (SP) and carries Rock Ridge (an RRIP ER or RRIP entries).
    pub fn has_rock_ridge(&self) -> bool {
        self.rock_ridge
    }

    /// Gives the byte source back, e.g. to patch an image after locating a file in it.
    pub fn into_inner(self) -> R {
        self.inner
    }

    /// SUSP 5.3: SP sits at offset 0 of the root "." record's system use area.
    fn probe_rock_ridge(&mut self) -> Result<(), IsoError> {
        let records = self.read_records(self.root)?;
        let Some(dot) = records.into_iter().find(|r| r.id == [0]) else {
            return Err(IsoError::Malformed(
                "root directory has no \".\" record".to_string(),
            ));
        };
        if !dot.su.starts_with(b"SP") {
            return Ok(());
        }
        let info = rockridge::collect(&dot.su, &mut |loc| self.read_continuation(loc))?;
        if let Some(skip) = info.sp_skip {
            self.rock_ridge = info.rrip_registered || info.has_rr_entries;
            self.susp_skip = usize::from(skip);
            self.root_mode = info.mode.filter(|_| self.rock_ridge);
        }
        Ok(())
    }

    /// Every file and directory below the root, depth-first, ordered by path components.
    pub fn walk(&mut self) -> Result<Vec<Entry>, IsoError> {
        self.meta_budget = self.meta_limit;
        let mut out = Vec::new();
        let mut visited = BTreeSet::from([self.root.extent]);
        let mut stack = vec![(self.root, String::new(), String::new(), 0usize)];
        while let Some((dir, path, iso_path, depth)) = stack.pop() {
            for child in self.read_children(dir)? {
                let entry = child_entry(&path, &iso_path, child);
                if entry.is_dir {
                    if depth + 1 >= MAX_DEPTH {
                        return Err(IsoError::Malformed(format!(
                            "{:?} is nested deeper than {MAX_DEPTH}",
                            entry.path
                        )));
                    }
                    if !visited.insert(entry.extent) {
                        return Err(IsoError::Malformed(format!(
                            "directory loop at {:?}",
                            entry.path
                        )));
                    }
                    let dir = DirRef {
                        extent: entry.extent,
                        size: entry.size,
                    };
                    stack.push((dir, entry.path.clone(), entry.iso_path.clone(), depth + 1));
                }
                out.push(entry);
            }
        }
        out.sort_by(|a, b| a.path.split('/').cmp(b.path.split('/')));
        Ok(out)
    }

    /// Looks `path` up by Rock Ridge (or plain) names, exact case. "" is the root.
    pub fn find(&mut self, path: &str) -> Result<Entry, IsoError> {
        self.lookup(path, |child, part| child.name == part)
    }

    /// Looks `iso_path` up by ISO 9660 identifiers, ignoring case, version and a trailing '.'.
    pub fn find_iso(&mut self, iso_path: &str) -> Result<Entry, IsoError> {
        self.lookup(iso_path, |child, part| {
            plain_identifier(&child.iso_name).eq_ignore_ascii_case(plain_identifier(part))
        })
    }

    /// The contents of the file at `path` (Rock Ridge names, as `find`).
    pub fn read_file(&mut self, path: &str) -> Result<Vec<u8>, IsoError> {
        let entry = self.find(path)?;
        if entry.is_dir {
            return Err(IsoError::IsADirectory {
                path: path.to_string(),
            });
        }
        self.read_entry(&entry)
    }

    /// The data an entry points at, e.g. one found with `find_iso`.
    pub fn read_entry(&mut self, entry: &Entry) -> Result<Vec<u8>, IsoError> {
        self.read_at(u64::from(entry.extent) * BLOCK_SIZE as u64, entry.size)
    }

    /// Walks down `path` one component at a time, reading only the directories on the way.
    fn lookup(&mut self, path: &str, matches: fn(&Child, &str) -> bool) -> Result<Entry, IsoError> {
        self.meta_budget = self.meta_limit;
        let not_found = || IsoError::NotFound {
            path: path.to_string(),
        };
        let mut entry = self.root_entry();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            if !entry.is_dir {
                return Err(not_found());
            }
            let dir = DirRef {
                extent: entry.extent,
                size: entry.size,
            };
            let child = self
                .read_children(dir)?
                .into_iter()
                .find(|c| matches(c, part))
                .ok_or_else(not_found)?;
            entry = child_entry(&entry.path, &entry.iso_path, child);
        }
        Ok(entry)
    }

    fn root_entry(&self) -> Entry {
        Entry {
            path: String::new(),
            iso_path: String::new(),
            is_dir: true,
            mode: self.root_mode,
            size: self.root.size,
            extent: self.root.extent,
        }
    }

    /// The children of `dir` with names resolved, "." and ".." and relocated directories left out.
    fn read_children(&mut self, dir: DirRef) -> Result<Vec<Child>, IsoError> {
        let records = merge_multi_extent(self.read_records(dir)?)?;
        let mut out = Vec::with_capacity(records.len());
        for (rec, size) in records {
            if rec.id == [0] || rec.id == [1] {
                continue;
            }
            let rr = self.rock_ridge_info(&rec)?;
            if rr.relocated {
                continue; // RRIP RE: shown where its CL placeholder is, not here
            }
            out.push(self.resolve_child(rec, size, rr)?);
        }
        Ok(out)
    }

    fn resolve_child(&mut self, rec: RecordIn, size: u64, rr: RrInfo) -> Result<Child, IsoError> {
        let iso_name = String::from_utf8_lossy(&rec.id).into_owned();
        let name = match &rr.name {
            Some(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            None => plain_identifier(&iso_name).to_string(),
        };
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
            return Err(IsoError::Malformed(format!(
                "unusable file name {name:?} (ISO identifier {iso_name:?})"
            )));
        }
        let (is_dir, extent, size) = match rr.child_link {
            Some(block) => (true, block, self.relocated_dir_size(block)?),
            None => (rec.is_dir(), rec.extent, size),
        };
        Ok(Child {
            name,
            iso_name,
            is_dir,
            mode: rr.mode,
            extent,
            size,
        })
    }

    /// A CL target's size comes from the "." record at the start of the relocated directory.
    fn relocated_dir_size(&mut self, block: u32) -> Result<u64, IsoError> {
        let sector = self.read_meta(u64::from(block) * BLOCK_SIZE as u64, BLOCK_SIZE as u64)?;
        let len = usize::from(sector[0]);
        let dot = RecordIn::parse(sector.get(..len).unwrap_or_default())?;
        Ok(u64::from(dot.size))
    }

    fn rock_ridge_info(&mut self, rec: &RecordIn) -> Result<RrInfo, IsoError> {
        if !self.rock_ridge {
            return Ok(RrInfo::default());
        }
        let area = rec.su.get(self.susp_skip..).unwrap_or_default();
        rockridge::collect(area, &mut |loc| self.read_continuation(loc))
    }

    /// SUSP 5.1 keeps a continuation area inside one block; larger claims are corrupt.
    fn read_continuation(&mut self, loc: CaLocation) -> Result<Vec<u8>, IsoError> {
        let (offset, len) = (loc.offset as usize, loc.len as usize);
        if offset + len > BLOCK_SIZE {
            return Err(IsoError::Malformed(format!(
                "continuation area at block {} offset {offset} length {len} crosses its block",
                loc.block
            )));
        }
        self.read_meta(
            u64::from(loc.block) * BLOCK_SIZE as u64 + offset as u64,
            len as u64,
        )
    }

    /// The raw records of a directory, skipping the zero padding at sector ends.
    fn read_records(&mut self, dir: DirRef) -> Result<Vec<RecordIn>, IsoError> {
        let buf = self.read_meta(u64::from(dir.extent) * BLOCK_SIZE as u64, dir.size)?;
        let mut out = Vec::new();
        let mut pos = 0usize;
        while pos < buf.len() {
            let len = usize::from(buf[pos]);
            if len == 0 {
                pos = (pos + 1).next_multiple_of(BLOCK_SIZE);
                continue;
            }
            let rec = buf.get(pos..pos + len).ok_or_else(|| {
                IsoError::Malformed(format!(
                    "directory at block {} has a record past its end",
                    dir.extent
                ))
            })?;
            out.push(RecordIn::parse(rec)?);
            pos += len;
        }
        Ok(out)
    }

    /// `read_at` for directories and continuation areas, charged against the metadata budget.
    fn read_meta(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, IsoError> {
        // One record claiming a size past the image is that, not overlapping structures.
        self.check_range(offset, len)?;
        self.meta_budget = self.meta_budget.checked_sub(len).ok_or_else(|| {
            IsoError::Malformed(format!(
                "directories and continuation areas add up to more than {} bytes; structures overlap",
                self.meta_limit
            ))
        })?;
        self.read_at(offset, len)
    }

    /// Reads `len` bytes at `offset`, refusing anything that reaches past the image.
    fn read_at(&mut self, offset: u64, len: u64) -> Result<Vec<u8>, IsoError> {
        let len = self.check_range(offset, len)?;
        self.inner.seek(SeekFrom::Start(offset))?;
        let mut buf = vec![0u8; len];
        self.inner.read_exact(&mut buf)?;
        Ok(buf)
    }

    /// `len` as a buffer size when `offset..offset+len` lies inside the image, checked before
    /// anything is allocated.
    fn check_range(&self, offset: u64, len: u64) -> Result<usize, IsoError> {
        let end = offset.checked_add(len).filter(|&end| end <= self.image_len);
        match (end, usize::try_from(len)) {
            (Some(_), Ok(len)) => Ok(len),
            _ => Err(IsoError::Malformed(format!(
                "{len} bytes at offset {offset} reach past the end of the {}-byte image",
                self.image_len
            ))),
        }
    }
}

/// Scans sectors 16 onwards for the Primary Volume Descriptor.
fn find_primary_descriptor<R: Read + Seek>(r: &mut R, image_len: u64) -> Result<Vec<u8>, IsoError> {
    for sector in FIRST_VD_SECTOR..FIRST_VD_SECTOR + MAX_DESCRIPTORS {
        let offset = sector * BLOCK_SIZE as u64;
        if offset + BLOCK_SIZE as u64 > image_len {
            break;
        }
        r.seek(SeekFrom::Start(offset))?;
        let mut vd = vec![0u8; BLOCK_SIZE];
        r.read_exact(&mut vd)?;
        if &vd[1..6] != STANDARD_ID {
            return Err(IsoError::Malformed(format!(
                "no ISO 9660 volume descriptor at sector {sector}"
            )));
        }
        match vd[0] {
            VD_PRIMARY => return Ok(vd),
            VD_TERMINATOR => break,
            _ => {}
        }
    }
    Err(IsoError::Malformed(
        "no primary volume descriptor".to_string(),
    ))
}

/// Joins multi-extent file sections (ECMA-119 6.5.1) into one (record, total size). Sections must
/// be contiguous, which is how every writer lays them out; anything else is reported, not guessed.
fn merge_multi_extent(records: Vec<RecordIn>) -> Result<Vec<(RecordIn, u64)>, IsoError> {
    let mut out: Vec<(RecordIn, u64)> = Vec::with_capacity(records.len());
    let mut open = false; // the last pushed record expects more sections
    for rec in records {
        let more = rec.flags & FLAG_MULTI_EXTENT != 0;
        if open {
            let Some((first, total)) = out.last_mut() else {
                break;
            };
            let expected = u64::from(first.extent) + total.div_ceil(BLOCK_SIZE as u64);
            if rec.id != first.id || u64::from(rec.extent) != expected {
                let name = String::from_utf8_lossy(&first.id).into_owned();
                return Err(IsoError::Malformed(format!(
                    "multi-extent file {name:?} has a stray section"
                )));
            }
            *total += u64::from(rec.size);
        } else {
            let size = u64::from(rec.size);
            out.push((rec, size));
        }
        open = more;
    }
    Ok(out)
}

fn child_entry(parent: &str, iso_parent: &str, child: Child) -> Entry {
    let join = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            format!("{a}/{b}")
        }
    };
    Entry {
        path: join(parent, &child.name),
        iso_path: join(iso_parent, &child.iso_name),
        is_dir: child.is_dir,
        mode: child.mode,
        size: child.size,
        extent: child.extent,
    }
}

#[cfg(test)]
mod tests;
