//! The root tier: tests that need root for loop devices, mounts, device nodes and file owners (the host
//! agent on loop disks, full-disk runs), and the tools of the tools tier. `tests/run root` runs it;
//! without root each test fails saying so: nothing here is skipped.
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

mod agent_disk_loop;
mod agent_fetch_config;
mod agent_install_e2e;
mod agent_install_kill_resume;
mod agent_ostree_restore;
mod agent_precache;
mod agent_restore_files;
mod crash_safety;
mod deploy_trust;
mod seed_fixture_generators;
