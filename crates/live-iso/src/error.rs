//! What can go wrong with a live ISO's embed areas.

use iso9660::IsoError;

/// What can go wrong locating, reading or writing the embed areas. Callers branch on the kind
/// (`NotCoreOs` versus a corrupt descriptor, `TooLarge` to tell the user what to trim).
#[derive(Debug, thiserror::Error)]
pub enum LiveIsoError {
    /// coreos-installer's wording, so users searching for it find the same cause.
    #[error("Unrecognized CoreOS ISO image.")]
    NotCoreOs,
    #[error("invalid {path}: {reason}")]
    BadDescriptor { path: String, reason: String },
    #[error(
        "the compressed Ignition config is {compressed} bytes, larger than the {area}-byte Ignition embed area of the ISO"
    )]
    TooLarge { compressed: u64, area: u64 },
    #[error("decoding the Ignition embed area: {0}")]
    BadArea(String),
    #[error("kernel arguments are {len} bytes; the embed area holds at most {max}")]
    KargsTooLarge { len: usize, max: usize },
    #[error("invalid kernel arguments {kargs:?}: {reason}")]
    BadKargs { kargs: String, reason: String },
    #[error(
        "kernel argument embed areas disagree: {first:?} at offset {first_offset}, {other:?} at offset {other_offset}"
    )]
    KargsMismatch {
        first: String,
        first_offset: u64,
        other: String,
        other_offset: u64,
    },
    #[error(transparent)]
    Iso(#[from] IsoError),
    #[error("reading or writing the ISO: {0}")]
    Io(#[from] std::io::Error),
}
