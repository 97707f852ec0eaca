//! The tree an image is built from: directories and files with their modes, as `IsoBuilder` collects
//! them and the layout plans them.

use std::collections::BTreeMap;

/// Mode of directories created implicitly as parents.
const IMPLICIT_DIR_MODE: u32 = 0o755;

#[derive(Debug, Clone)]
pub(crate) struct DirNode {
    pub mode: u32,
    /// Added by `add_dir` rather than created as a parent; only those count as duplicates.
    pub explicit: bool,
    pub children: BTreeMap<String, Node>,
}

impl Default for DirNode {
    fn default() -> Self {
        Self {
            mode: IMPLICIT_DIR_MODE,
            explicit: false,
            children: BTreeMap::new(),
        }
    }
}

#[derive(Clone)]
pub(crate) struct FileNode {
    pub mode: u32,
    pub data: Vec<u8>,
}

/// Shows the size, never the bytes: images carry secrets and a `{:?}` must not leak them.
impl std::fmt::Debug for FileNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileNode")
            .field("mode", &format_args!("{:o}", self.mode))
            .field("len", &self.data.len())
            .finish()
    }
}

#[derive(Debug, Clone)]
pub(crate) enum Node {
    Dir(DirNode),
    File(FileNode),
}
