//! The seed OCI image as `ibi create image` sees it at build time: its reference (a registry reference or
//! an `oci:` image layout), its lifecycle-agent labels and `SeedClusterInfo`, and the checks that catch on
//! the build machine what `lca-cli ibi` or the installed host would otherwise find on the factory floor.
//!
//! The checks return every finding at once and never decide severity: `--skip-seed-checks` makes the caller
//! print them as warnings instead of failing.

pub mod defects;
mod image;
mod lines;
pub mod preflight;
pub mod registry;

pub use lines::{
    CA_TRUST_RACE, DefectId, Exposure, MACHINE_NETWORKS_SINCE, NEGATIVE_START_FIXED,
    ONE_SHOT_SINCE, Pairing, PairingInputs, SEED_DEFECTS, SFDISK_SINCE, SeedDefect, SeedEvidence,
    coreos_stream, defect_warnings, exposure, host_rhel, live_iso_pairing,
};

pub use crate::contract::seed_image::{
    BadClusterInfo, SEED_CLUSTER_INFO_LABEL, SeedClusterInfo, SeedRefError, SeedReference,
    SeedTrustBundle, parse_seed_cluster_info, parse_seed_reference,
};
#[cfg(any(test, feature = "test-support"))]
pub use image::inspect_seed_text;
pub use image::{
    SEED_FORMAT_VERSION, SEED_FORMAT_VERSION_LABEL, SeedCheck, SeedExpectations, SeedFinding,
    SeedInfo, check_seed, inspect_seed, partition_label, registry_options, site_registry_options,
};
