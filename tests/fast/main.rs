//! The fast tier: every integration test that needs only the built `ibi` binary (no root, no network,
//! no tool beyond the Rust toolchain). `tests/run fast` runs it with the library's unit tests and
//! `tests/module_graph.rs`; a test that needs more goes in `tests/tools/` or `tests/root/`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is how they fail

// Every tier builds with all of ibi's features (tests/run passes --all-features): without `agent`,
// `test-support` or `fault-injection` some tests would silently vanish, so refuse to build instead.
#[cfg(not(all(
    feature = "agent",
    feature = "test-support",
    feature = "fault-injection"
)))]
compile_error!("ibi's test tiers need every feature: run tests/run, or cargo test --all-features");

#[path = "../common/mod.rs"]
mod common;

mod agent_fetch_config;
mod agent_restore_files;
mod bad_inputs;
mod base_iso_download;
mod batch;
mod cli_usage;
mod config_image;
mod config_image_seed;
mod config_manifest;
mod crash_safety;
mod create_image;
mod deliver_boot;
mod deliver_serve;
mod deliver_watch;
mod deploy_fleet;
mod fuzz_regressions;
mod hub_manifests;
mod ignition_validate;
mod inspect;
mod iso9660_tools;
mod release_base_iso;
mod secret_findings;
mod secrets;
mod seed_registry;
mod status_fleet;
mod units_verify;
