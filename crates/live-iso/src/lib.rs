//! The customization areas of a CoreOS live ISO, on top of `iso9660`: where the Ignition embed
//! area and the kernel-argument slots are (`/coreos/igninfo.json`, `/coreos/kargs.json` and their
//! fallbacks), how their contents are encoded (an xz newc cpio holding `config.ign`; kargs plus an
//! end byte plus padding) and how a customized copy of a multi-GiB ISO is written without reading
//! it into memory. It speaks the same on-disk contract as `coreos-installer iso ignition|kargs`,
//! so either tool reads what the other wrote. It knows nothing of OpenShift.

mod embed;
mod error;
mod ignition;
mod initrd;
mod kargs;
mod patch;
#[cfg(any(test, feature = "test-support"))]
pub mod synthetic;
pub use ignition::{IgnInfo, find_ignition_area, parse_igninfo};
pub use initrd::{decode_ignition, encode_ignition, encode_ignition_compact, is_pristine};
pub use kargs::{
    KargSlot, KargsAreas, KargsFile, KargsJson, encode_kargs, find_kargs, parse_kargs_json,
    read_kargs,
};
pub use patch::{
    Patch, PatchedReader, copy_with_patches, overlay, read_patched_at, validate_patches,
};

pub use embed::{EmbedArea, IGNITION_AREA_LEN, is_customized, read_area};
pub use error::LiveIsoError;
