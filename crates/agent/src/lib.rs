//! The host side of image-based installation (Linux only; ibi's feature `agent`): on the live ISO,
//! install RHCOS and restore the seed; on the installed host, fetch the configuration ISO.
//! Nothing here is needed to build ISOs on a workstation. What the build side must agree on with it
//! is `contract`'s; ibi re-exports this crate as `ibi::agent`, and its log events keep their
//! `ibi::agent::…` targets, so `RUST_LOG=ibi=debug` still shows them.

pub(crate) mod cmd;
pub mod disk;
pub mod fetch_config;
pub mod install;
pub mod ostree_restore;
pub mod precache;
pub mod prepare_config;
pub mod report;
pub mod restore_files;
pub mod seed_fetch;
pub mod state;
