//! Which version of a file an open descriptor holds. A rebuild renames a new file over the old one,
//! so the inode changes; a writer in place changes the size or the modification time. Any of them
//! changing means "another version": a cached sha256 no longer applies, and a download under way
//! must not continue with the new bytes.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileVersion {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_sec: i64,
    pub mtime_nsec: i64,
}

impl FileVersion {
    pub fn of(meta: &Metadata) -> Self {
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime_sec: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        }
    }

    /// Same size and modification time: what a recorded version (one whose inode may have
    /// changed through a copy) is compared on.
    pub fn same_content_stamp(&self, other: &Self) -> bool {
        (self.size, self.mtime_sec, self.mtime_nsec)
            == (other.size, other.mtime_sec, other.mtime_nsec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_rewrite_is_another_version() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"one").unwrap();
        let v1 = FileVersion::of(&std::fs::metadata(&p).unwrap());
        assert_eq!(v1, FileVersion::of(&std::fs::metadata(&p).unwrap()));
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"+").unwrap();
        let v2 = FileVersion::of(&f.metadata().unwrap());
        assert_ne!(v1, v2);
        assert!(!v1.same_content_stamp(&v2));
    }
}
