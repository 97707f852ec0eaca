//! Streaming the seed image (issue 4 item 1): open it through `skopeo experimental-image-proxy`
//! (containers-image-proxy), read its manifest, and walk each layer's tar while the blob is still
//! arriving, handing every root file (lifecycle-agent reference §1.3) to a handler as a reader.
//!
//! No step holds a whole archive in memory and none is written to disk to be read back: a fetch thread
//! runs a current-thread tokio runtime and pushes the blob in bounded chunks ([`CHUNK_SIZE`] ×
//! [`CHANNEL_CHUNKS`]) to the calling thread, which gunzips and untars synchronously and so can
//! pipe `var.tgz` straight into `restore_files`. skopeo checks every blob's digest; a corrupt or cut
//! blob ends the walk with an error, never a short stream. Call from synchronous code, not from inside a
//! tokio runtime.

mod fetcher;
mod files;
mod layer;
mod source;
mod walk;
pub use files::{
    CONTAINERS_LIST, ETC_DELETIONS, ETC_TGZ, LCA_CLI, MANIFEST_JSON, MCO_CURRENTCONFIG_JSON,
    ORIGIN_PATTERN, OSTREE_TGZ, Presence, RPM_OSTREE_JSON, SMALL_FILE_MAX, SeedFiles, VAR_TGZ,
};
pub(crate) use files::{RECERT_CONFIG_JSON, collect_small};
pub use source::SeedSource;

pub use walk::{SeedWalkReport, walk_seed, walk_seed_files};
