//! Planning an image before a byte is written: directories in path-table order, each record's ISO
//! identifier and Rock Ridge entries, and the block of every directory, continuation area and file.
//! Sizes never depend on addresses, so one pass sizes everything and a second assigns blocks; the
//! writer then only has to emit what the plan says, in ascending block order.

use super::format::{DateTime, MAX_RECORD, pack_records, record_base_len};
use super::names::{assign_identifiers, cmp_identifiers};
use super::rockridge::{self, CaLocation, S_IFDIR, S_IFREG, SuPlan};
use super::tree::{DirNode, Node};
use super::{BLOCK_SIZE, IsoError};
use std::collections::VecDeque;

/// Blocks before the path tables: 16 system area sectors, the PVD and the terminator.
const FIRST_PATH_TABLE_BLOCK: u64 = 18;
/// Path table records store the parent's directory number in 16 bits (ECMA-119 9.4.4).
const MAX_DIRECTORIES: usize = u16::MAX as usize;

/// What a directory record points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Dir(usize),
    File(usize),
}

#[derive(Debug)]
pub(crate) struct RecordPlan {
    pub id: Vec<u8>,
    pub target: Target,
    pub su: SuPlan,
    /// Where this record's continuation areas were placed, one per `su.piece_lens()`.
    pub ca: Vec<CaLocation>,
}

#[derive(Debug)]
pub(crate) struct DirPlan {
    /// Index of the parent in `Plan::dirs` (the root is its own parent).
    pub parent: usize,
    /// Path table identifier: the record identifier, or 0x00 for the root.
    pub id: Vec<u8>,
    /// ".", ".." and then the children in ECMA-119 9.3 order.
    pub records: Vec<RecordPlan>,
    pub lba: u32,
    pub size: u32,
}

#[derive(Debug)]
pub(crate) struct FilePlan<'a> {
    pub data: &'a [u8],
    pub lba: u32,
}

/// The whole image, addresses resolved.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    pub dirs: Vec<DirPlan>,
    pub files: Vec<FilePlan<'a>>,
    pub path_table_size: u32,
    pub l_path_table: u32,
    pub m_path_table: u32,
    pub ca_lba: u32,
    pub ca_blocks: u32,
    pub total_blocks: u32,
}

/// Rock Ridge attributes of one node, kept so ".." records can repeat the parent's.
#[derive(Debug, Clone, Copy)]
struct Attrs {
    mode: u32,
    nlink: u32,
    ino: u32,
}

/// Builds the plan for `root`. `date` stamps every record and TF entry.
pub(crate) fn plan<'a>(root: &'a DirNode, date: DateTime) -> Result<Plan<'a>, IsoError> {
    let mut planner = Planner {
        date: date.to_record_bytes(),
        dirs: Vec::new(),
        files: Vec::new(),
        attrs: Vec::new(),
        next_ino: 1,
    };
    planner.build_tree(root)?;
    let mut plan = Plan {
        dirs: planner.dirs,
        files: planner.files,
        path_table_size: 0,
        l_path_table: 0,
        m_path_table: 0,
        ca_lba: 0,
        ca_blocks: 0,
        total_blocks: 0,
    };
    assign_blocks(&mut plan)?;
    Ok(plan)
}

struct Planner<'a> {
    date: [u8; 7],
    dirs: Vec<DirPlan>,
    files: Vec<FilePlan<'a>>,
    attrs: Vec<Attrs>,
    next_ino: u32,
}

impl<'a> Planner<'a> {
    /// Breadth-first, children in 9.3 order: the order directories get their numbers in the path
    /// table (ECMA-119 9.4: by level, then parent number, then identifier).
    fn build_tree(&mut self, root: &'a DirNode) -> Result<(), IsoError> {
        let root_attrs = self.new_attrs(S_IFDIR | root.mode, dir_nlink(root));
        self.push_dir(0, vec![0], root_attrs)?;
        let mut queue = VecDeque::from([(0usize, root)]);
        while let Some((index, node)) = queue.pop_front() {
            let records = self.plan_children(index, node, &mut queue)?;
            self.dirs[index].records.extend(records);
        }
        Ok(())
    }

    fn new_attrs(&mut self, mode: u32, nlink: u32) -> Attrs {
        let ino = self.next_ino;
        self.next_ino = self.next_ino.wrapping_add(1);
        Attrs { mode, nlink, ino }
    }

    /// Registers a directory and plans its "." and ".." records.
    fn push_dir(&mut self, parent: usize, id: Vec<u8>, attrs: Attrs) -> Result<usize, IsoError> {
        let index = self.dirs.len();
        if index >= MAX_DIRECTORIES {
            return Err(IsoError::TooLarge(format!(
                "more than {MAX_DIRECTORIES} directories"
            )));
        }
        self.attrs.push(attrs);
        let parent_attrs = if index == 0 {
            attrs
        } else {
            self.attrs[parent]
        };
        let mut dot_entries = if index == 0 {
            vec![rockridge::sp()]
        } else {
            Vec::new()
        };
        dot_entries.extend(self.attr_entries(attrs));
        if index == 0 {
            dot_entries.push(rockridge::er()); // SUSP 5.5: ER belongs to the root's "." record
        }
        let dot = record(vec![0], Target::Dir(index), dot_entries);
        let dotdot = record(
            vec![1],
            Target::Dir(parent),
            self.attr_entries(parent_attrs),
        );
        self.dirs.push(DirPlan {
            parent,
            id,
            records: vec![dot, dotdot],
            lba: 0,
            size: 0,
        });
        Ok(index)
    }

    fn attr_entries(&self, a: Attrs) -> Vec<Vec<u8>> {
        vec![
            rockridge::px(a.mode, a.nlink, a.ino),
            rockridge::tf(self.date),
        ]
    }

    /// Plans the child records of directory `index`, queueing subdirectories.
    fn plan_children(
        &mut self,
        index: usize,
        node: &'a DirNode,
        queue: &mut VecDeque<(usize, &'a DirNode)>,
    ) -> Result<Vec<RecordPlan>, IsoError> {
        let kids = node
            .children
            .iter()
            .map(|(name, n)| (name.as_str(), matches!(n, Node::Dir(_))));
        let ids = assign_identifiers(kids)?;
        let mut children: Vec<(Vec<u8>, &'a str, &'a Node)> = ids
            .into_iter()
            .zip(&node.children)
            .map(|(id, (name, n))| (id, name.as_str(), n))
            .collect();
        children.sort_by(|a, b| cmp_identifiers(&a.0, &b.0));
        let mut records = Vec::with_capacity(children.len());
        for (id, name, child) in children {
            let (target, attrs) = self.plan_child(index, &id, child, queue)?;
            let mut entries = self.attr_entries(attrs);
            entries.extend(rockridge::nm(name.as_bytes()));
            records.push(record(id, target, entries));
        }
        Ok(records)
    }

    /// Registers one child (queueing a directory for its own pass) and returns its attributes.
    fn plan_child(
        &mut self,
        parent: usize,
        id: &[u8],
        child: &'a Node,
        queue: &mut VecDeque<(usize, &'a DirNode)>,
    ) -> Result<(Target, Attrs), IsoError> {
        match child {
            Node::Dir(d) => {
                let attrs = self.new_attrs(S_IFDIR | d.mode, dir_nlink(d));
                let index = self.push_dir(parent, id.to_vec(), attrs)?;
                queue.push_back((index, d));
                Ok((Target::Dir(index), attrs))
            }
            Node::File(f) => {
                self.files.push(FilePlan {
                    data: &f.data,
                    lba: 0,
                });
                let attrs = self.new_attrs(S_IFREG | f.mode, 1);
                Ok((Target::File(self.files.len() - 1), attrs))
            }
        }
    }
}

/// A directory holds "." and "..", plus one link from each subdirectory's "..".
fn dir_nlink(d: &DirNode) -> u32 {
    let subdirs = d
        .children
        .values()
        .filter(|n| matches!(n, Node::Dir(_)))
        .count();
    u32::try_from(subdirs).unwrap_or(u32::MAX).saturating_add(2)
}

fn record(id: Vec<u8>, target: Target, entries: Vec<Vec<u8>>) -> RecordPlan {
    let cap = MAX_RECORD - record_base_len(id.len());
    RecordPlan {
        su: SuPlan::new(entries, cap),
        id,
        target,
        ca: Vec::new(),
    }
}

/// Encoded length of a record with its planned system use area.
pub(crate) fn record_len(r: &RecordPlan) -> usize {
    record_base_len(r.id.len()) + r.su.inline_len()
}

/// Path table record length: 8 bytes, identifier, pad to even (ECMA-119 9.4).
pub(crate) fn path_record_len(id_len: usize) -> usize {
    8 + id_len + id_len % 2
}

/// Lays the image out: path tables, directories, continuation areas, file data.
fn assign_blocks(plan: &mut Plan<'_>) -> Result<(), IsoError> {
    let pt_size: usize = plan.dirs.iter().map(|d| path_record_len(d.id.len())).sum();
    let pt_blocks = blocks_for(pt_size as u64);
    let mut next = FIRST_PATH_TABLE_BLOCK;
    plan.path_table_size = to_u32(pt_size as u64, "path table size")?;
    plan.l_path_table = to_u32(next, "path table location")?;
    plan.m_path_table = to_u32(next + pt_blocks, "path table location")?;
    next += 2 * pt_blocks;
    for dir in &mut plan.dirs {
        let (_, size) = pack_records(dir.records.iter().map(record_len));
        dir.lba = to_u32(next, "directory location")?;
        dir.size = to_u32(size as u64, "directory size")?;
        next += blocks_for(size as u64);
    }
    plan.ca_lba = to_u32(next, "continuation area location")?;
    plan.ca_blocks = place_continuation_areas(plan)?;
    next += u64::from(plan.ca_blocks);
    for file in &mut plan.files {
        let len = to_u32(file.data.len() as u64, "file size")?;
        // Empty files own no block; extent 0 with length 0 is what readers expect for them.
        file.lba = if len == 0 {
            0
        } else {
            to_u32(next, "file location")?
        };
        next += blocks_for(u64::from(len));
    }
    plan.total_blocks = to_u32(next, "volume size")?;
    Ok(())
}

/// Packs every continuation area after the directories, several per block but none crossing a
/// block boundary. Returns the number of blocks used.
fn place_continuation_areas(plan: &mut Plan<'_>) -> Result<u32, IsoError> {
    let base = plan.ca_lba;
    let mut pos = 0u64;
    for rec in plan.dirs.iter_mut().flat_map(|d| d.records.iter_mut()) {
        let lens = rec.su.piece_lens();
        rec.ca = Vec::with_capacity(lens.len());
        for len in lens {
            let len = len as u64;
            if pos % BLOCK_SIZE as u64 + len > BLOCK_SIZE as u64 {
                pos = pos.next_multiple_of(BLOCK_SIZE as u64);
            }
            rec.ca.push(CaLocation {
                block: to_u32(
                    u64::from(base) + pos / BLOCK_SIZE as u64,
                    "continuation area",
                )?,
                offset: (pos % BLOCK_SIZE as u64) as u32,
                len: len as u32,
            });
            pos += len;
        }
    }
    to_u32(blocks_for(pos), "continuation area blocks")
}

pub(crate) fn blocks_for(bytes: u64) -> u64 {
    bytes.div_ceil(BLOCK_SIZE as u64)
}

fn to_u32(v: u64, what: &str) -> Result<u32, IsoError> {
    u32::try_from(v)
        .map_err(|_| IsoError::TooLarge(format!("{what} {v} does not fit ISO 9660's 32 bits")))
}
