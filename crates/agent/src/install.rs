//! `ibi agent install`: the work of `lca-cli ibi` (lifecycle-agent reference §4), done natively,
//! resumable and observable. The steps run through [`Runner`] in two phases:
//!
//! 1. with the state file on the live system (`/var/tmp`, RAM): disk cleanup, `coreos-installer
//!    install`, the extra partition, mkfs, growing root, mounting the targets;
//! 2. with the state file moved onto the target's container storage (it survives a power loss):
//!    fetching the seed, deploying it, `/etc`, precache, the site's configuration (one-shot ISOs
//!    only), `post.sh`, removing the RHCOS deployment, placing ibi's host unit.
//!
//! At the end the state goes back to the live system and the targets are unmounted, then `shutdown`
//! runs if asked. A run that finds no state in `/var/tmp` looks for one on the disk; finding one of the
//! same configuration it resumes there, so a power cut after the seed is restored never wipes the disk.
//! A finished install leaves no state on the disk: booting the ISO again installs again, as lca-cli.

mod cleanup;
mod host_unit;
mod restore;
mod run;
mod site_config;
mod targets;

pub use run::{InstallOptions, install};
