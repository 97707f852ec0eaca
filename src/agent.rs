//! The host side of image-based installation (feature `agent`, Linux only): on the live ISO,
//! install RHCOS and restore the seed; on the installed host, fetch the configuration ISO.
//! Nothing here is needed to build ISOs on a workstation.

pub mod cmd;
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
