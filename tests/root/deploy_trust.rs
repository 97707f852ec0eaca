//! `ibi deploy --phase factory` where it must be trusted with real machines: a re-run never boots a
//! host twice for one phase, one deploy at a time holds BASE, Ctrl-C leaves a table and a
//! resumable fleet, and a report speaks only for the host whose own token it carries. The BMCs are
//! sushy-tools emulators (fake driver, Basic auth, TLS, one System each, standing for each host's
//! BMC); the hosts are played by the test from the ISO their BMC downloaded, as the booted live ISO
//! would run its report script (`tests/common/deliver/fleet.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::time::Duration;

use crate::common::deliver::emulator::sushy_emulator;
use crate::common::deliver::fleet::{fleet, report_failed_lca, state_is};

use crate::common::deploy_trust::*;

/// A failure deploy cannot save (the records' directory made immutable while the host installs,
/// standing for a full or read-only disk) is said on stderr with what `ibi status` still shows, and
/// the run exits 1; status indeed shows the old state.
#[test]
fn a_failure_that_cannot_be_recorded_is_said_and_fails_the_run() {
    const NAME: &str = "a_failure_that_cannot_be_recorded_is_said_and_fails_the_run";
    if !common::require_root(NAME) || !common::tool("chattr", NAME) {
        return;
    }
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let f = fleet(
        &bin,
        &[("a", "a1a1a1a1-0000-4000-8000-00000000000a")],
        &TIMEOUTS,
    );
    let mut run = f.spawn("run");
    wait_step(&f, &mut run, "run", "a", "wait-report");
    let frozen = Immutable::set(&f.base().join(".ibi/deploy")).expect("chattr +i (ext4 or xfs)");
    report_failed_lca(&f, 0);
    let status = wait_exit_within(&mut run, Duration::from_secs(120));
    drop(frozen);
    let err = f.output("run", "stderr");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("error: site a: the host reported a failure")
            && err.contains("; and this failure could not be recorded (")
            && err.contains("`ibi status` still shows the site as it was before"),
        "{err}"
    );
    assert!(
        state_is(&f, "a", "running", "wait-report"),
        "{:?}",
        f.phase("a")
    );
}
