//! The installation ISO, the product of `ibi create image`: the base CoreOS live ISO (found, downloaded,
//! cached), the Ignition config embedded in it that installs the host (and one host's own variant of
//! it), and the size report.

pub mod base_iso;
pub mod build;
pub mod ignition;
pub mod one_shot_check;
pub mod per_host;
pub mod report;
pub mod site_tree;
pub mod status_token;
pub mod summary;
pub mod variant;
