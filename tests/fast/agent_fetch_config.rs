//! `ibi agent fetch-config` against real block devices: a labelled ext4 image and ISO images
//! attached as (read-only) loop devices, found through the machine's real `/sys/class/block`.
//! Each test restricts the scan to its own loop device, so the host's disks are never opened and
//! parallel tests never see each other's devices. The device tests (tests/root) need root and loop
//! devices, and fail without them.
#![cfg(feature = "agent")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;

use ibi::agent::fetch_config::{Outcome, fetch_config};

use crate::common::agent_fetch_config::*;

#[test]
fn already_present_is_a_no_op() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("opt/openshift");
    fs::create_dir_all(target.join("cluster-configuration")).unwrap();
    fs::write(target.join(MANIFEST), b"{}").unwrap();
    // No device may be probed: the scan is limited to a name that does not exist.
    let got = fetch_config(&options(&target, "no-such-device")).unwrap();
    assert_eq!(got, Outcome::AlreadyPresent);
    assert_eq!(fs::read(target.join(MANIFEST)).unwrap(), b"{}");
}
