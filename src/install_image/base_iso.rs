//! Obtaining the base CoreOS live ISO for `ibi create image`. The source is `--base-iso PATH|URL`, else the
//! installer's `OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE`, else the live ISO named for `architecture` in CoreOS
//! stream metadata given with `--coreos-stream FILE|URL`, else that of the seed's release payload
//! (`release`: the installer embeds the metadata of its version; the payload carries the same).
//! Local paths and `file://` URLs are used in place; `http(s)://` URLs are downloaded once into the user
//! cache, resumably, sha256-verified and serialized by a lock file (see `cache` and `download`).

mod cache;
mod download;
mod live_os;
pub mod release;
mod source;
mod stream;
pub use live_os::{rhel_of_release, rhel_of_volume_id};
pub use stream::parse_coreos_stream;

pub use source::{
    BaseIsoOptions, BaseIsoSource, OS_IMAGE_OVERRIDE_ENV, THREE_WAYS, check_options, fetch,
    has_source, resolve_source,
};
