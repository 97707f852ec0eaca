//! Precaching the seed cluster's images (reference `lifecycle-agent.md` §4.6): which images to pull (the
//! seed's `containers.list`, with lca-cli's `releaseRegistry` rewrite), and pulling them into the target's
//! container storage with bounded parallelism and retries ([`precache`]).
//!
//! The decisions are pure functions of text so they are tested without a host: the mirror sources of
//! `registries.conf`, the override rule, the rewritten image list and the pool size. `precacheDisabled` is
//! the caller's business: when it is set the install skips the whole step and none of this runs.
//! `precacheBestEffort` is [`PrecacheOptions::best_effort`].
//!
//! Unlike lca-cli, ibi writes no `precache_status.json`: the counts go to the install's status file through
//! [`Progress`](crate::state::Progress), and the failed images to the returned report and the error.
//! Nor does it recheck failed images with `podman image exists` afterwards: an image counts as pulled when
//! its copy into the storage succeeded, and only then.

mod images;
mod pool;
mod skopeo;
pub use pool::{PrecacheOptions, precache};
pub use skopeo::{SkopeoPuller, Storage};

pub(crate) use images::{DEFAULT_ATTEMPTS, REGISTRIES_CONF, load_registries_conf, registry_host};
pub use images::{
    image_list, insecure_hosts_from_registries_conf, parallelism,
    registry_sources_from_registries_conf, should_override,
};
