//! ISO 9660 images with Rock Ridge, written and read in pure Rust. This module owns the on-disk
//! format only: the writer builds small deterministic images (Primary Volume Descriptor, L and M
//! path tables, 8.3 identifiers, SUSP/RRIP names, modes and times) that blkid, xorriso, bsdtar and
//! isoinfo accept; the reader walks and extracts from existing images, including large foreign ones,
//! and treats every byte as untrusted. It knows nothing about what the images are for.

mod error;
mod format;
mod layout;
mod names;
mod reader;
mod rockridge;
mod tree;
mod writer;
pub use reader::{Entry, IsoReader};
#[cfg(any(test, feature = "test-support"))]
pub use writer::test_image;
pub use writer::{IsoBuilder, WriteOptions};

pub use error::{BLOCK_SIZE, IsoError};
