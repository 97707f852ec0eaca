//! The tools tier: tests that hold ibi to real programs (the OCI registry and skopeo, xorriso, bsdtar,
//! blkid, coreos-installer, ignition-validate, systemd-analyze, openssl, curl, Debian's kubectl, the
//! sushy-tools BMC emulator), run without root. `tests/run tools` installs them (as root on Debian);
//! a missing one fails the test that needs it, naming what to install: nothing here is skipped.
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

mod agent_restore_files;
mod agent_seed_fetch;
mod batch;
mod config_image;
mod config_image_seed;
mod config_manifest;
mod create_image;
mod deliver_boot;
mod deliver_reports;
mod deliver_serve;
mod deliver_watch;
mod deploy_dashboard;
mod deploy_fleet;
mod deploy_scale;
mod deploy_trust;
mod hub_manifests;
mod ignition_validate;
mod iso9660_tools;
mod live_iso_coreos_installer;
mod pki_openssl;
mod release_base_iso;
mod secrets;
mod seed_fixture_generators;
mod seed_lines;
mod seed_registry;
mod status_fleet;
mod units_verify;
