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
//! [`Progress`](crate::agent::state::Progress), and the failed images to the returned report and the error.
//! Nor does it recheck failed images with `podman image exists` afterwards: an image counts as pulled when
//! its copy into the storage succeeded, and only then.

mod images;
mod pool;
mod skopeo;
pub use pool::{PrecacheOptions, PrecacheReport, Puller, precache};
pub use skopeo::{SkopeoPuller, Storage, skopeo_copy_argv};

pub use images::{
    DEFAULT_ATTEMPTS, DEFAULT_PARALLELISM, MAX_PULL_THREADS_ENV, REGISTRIES_CONF, image_list,
    insecure_hosts_from_registries_conf, load_registries_conf, parallelism, parallelism_from_env,
    registry_host, registry_sources_from_registries_conf, should_override,
};
