//! ibi: image-based installation of single-node OpenShift.
//!
//! The binary (`main.rs`) is a thin shell over this library so integration tests, benchmarks and later the
//! host agent can reuse every piece. Arrows point down: `commands` compose `config`, `iso9660`, `pki`,
//! `reconfig` and `site`; the format modules know nothing of OpenShift.

#[cfg(feature = "agent")]
pub mod agent;
pub mod cli;
pub mod commands;
pub mod config;
pub mod config_image;
pub mod contract;
pub mod deliver;
pub mod ignition;
pub mod image_ref;
pub mod install_image;
pub mod iso9660;
pub mod live_iso;
pub mod redfish;
pub mod seed;
pub mod util;
