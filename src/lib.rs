//! ibi: image-based installation of single-node OpenShift.
//!
//! The binary (`main.rs`) is a thin shell over this library, so tests and benchmarks reach every piece.
//! The modules are floors, and a module imports only from floors below its own (docs/architecture.md
//! draws it; `tests/module_graph.rs` checks it):
//!
//! - `commands` (one file per command: translate options, call, print) over `cli` (the clap types);
//! - `deliver`: getting what was built onto hosts (`ibi serve`, `ibi boot`);
//! - the products: `config_image` (the configuration ISO), `install_image` (the installation ISO) and
//!   `agent` (feature `agent`: the host side, `ibi agent …`, the crate `ibi-agent`);
//! - `seed` (the seed image and the registry client), over `config` (the input files, validated);
//! - `contract` (the crate `ibi-contract`): what the build side and the host side must agree on, in
//!   one place each;
//! - the formats and protocols, which know nothing of OpenShift: `live_iso` over `iso9660`,
//!   `redfish`, `kubeapi` (a small read-only Kubernetes API client), `ignition` and `image_ref`;
//! - `util`: atomic writes, secrets, digests, logging, progress.

#[cfg(feature = "agent")]
pub use agent;
pub mod cli;
pub mod commands;
pub mod config;
pub mod config_image;
pub use contract;
pub mod deliver;
pub mod hub;
pub use ignition;
pub use image_ref;
pub mod install_image;
pub use iso9660;
pub use kubeapi;
pub use live_iso;
pub use redfish;
pub mod seed;
pub use util;
