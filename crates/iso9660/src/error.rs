//! The error of building, writing or reading an image, and the block size every part shares.

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
