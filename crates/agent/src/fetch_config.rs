//! `ibi agent fetch-config`, the installed host's side of the configuration ISO: wait for a block
//! device labelled `cluster-config` (or the legacy `relocation-config`), whole disk or partition;
//! read it (ISO 9660 in userspace, ext4/XFS through a read-only mount); check the manifest
//! post-pivot will read; and copy the tree atomically to `/opt/openshift`, where lifecycle-agent's
//! `installation-configuration.service` (`lca-cli post-pivot`) finds it and stops waiting.

mod label;
mod run;
mod scan;
mod source;
mod stage;
pub(crate) use label::FsKind;

pub(crate) use run::{DirOutcome, install_tree_from_dir, install_tree_from_iso};
pub use run::{FetchConfigOptions, Outcome, fetch_config};
