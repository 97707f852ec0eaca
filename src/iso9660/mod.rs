//! ISO 9660 images with Rock Ridge, written and read in pure Rust. This module owns the on-disk
//! format only: the writer builds small deterministic images (Primary Volume Descriptor, L and M
//! path tables, 8.3 identifiers, SUSP/RRIP names, modes and times) that blkid, xorriso, bsdtar and
//! isoinfo accept; the reader walks and extracts from existing images, including large foreign ones,
//! and treats every byte as untrusted. It knows nothing about what the images are for.

mod format;
mod layout;
mod names;
mod reader;
mod rockridge;
mod tree;
mod writer;

pub use reader::{Entry, IsoReader};
pub use writer::{IsoBuilder, WriteOptions};

/// The only logical block size we write or read; ECMA-119 allows others but no consumer uses them.
pub const BLOCK_SIZE: usize = 2048;

/// Everything that can go wrong building, writing or reading an image. Callers branch on the
/// kind (a missing file versus a corrupt image), so this is a typed error rather than `anyhow`.
#[derive(Debug, thiserror::Error)]
pub enum IsoError {
    #[error("invalid name {path:?}: {reason}")]
    InvalidName { path: String, reason: String },
    #[error("invalid volume identifier {id:?}: {reason}")]
    InvalidVolumeId { id: String, reason: String },
    #[error("invalid timestamp {timestamp}: {reason}")]
    InvalidTimestamp { timestamp: i64, reason: String },
    #[error("{path:?} already exists in the image")]
    Duplicate { path: String },
    #[error("{path:?} is not a directory")]
    NotADirectory { path: String },
    #[error("{path:?} is a directory, not a file")]
    IsADirectory { path: String },
    #[error("{path:?} not found in the image")]
    NotFound { path: String },
    #[error("image too large: {0}")]
    TooLarge(String),
    #[error("malformed ISO 9660 image: {0}")]
    Malformed(String),
    #[error("ISO 9660 I/O: {0}")]
    Io(#[from] std::io::Error),
}
