//! What the tests of tests/root/deploy_trust.rs and tests/tools/deploy_trust.rs share: one file of
//! tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common;
use crate::common::deliver::emulator::sushy_emulator;
use crate::common::deliver::fleet::{Fleet, fleet, play_until, state_is};
use std::time::{Duration, Instant};

pub(crate) const TEST: &str = "deploy_trust";
pub(crate) const TIMEOUTS: [&str; 4] = ["--report-timeout", "600", "--bmc-timeout", "60"];

/// Waits (bounded) until `site` is running at `step`.
pub(crate) fn wait_step(
    f: &Fleet,
    deploy: &mut std::process::Child,
    run: &str,
    site: &str,
    step: &str,
) {
    play_until(f, deploy, run, &[], |f| state_is(f, site, "running", step));
}

pub(crate) fn boots(log: &str) -> usize {
    log.matches("InsertMedia").count() + log.matches("ComputerSystem.Reset").count()
}

/// Sites a and b for a fault injected into b's BMC jobs, and b's BMC port (the fault's subject);
/// Fails the test without the `fault-injection` build or the emulator.
pub(crate) fn fault_fleet(name: &str) -> Option<(Fleet, String)> {
    if !cfg!(feature = "fault-injection") {
        common::missing(
            name,
            "needs the fault-injection feature (tests/run builds with it)",
        );
        return None;
    }
    let bin = sushy_emulator(TEST)?;
    let f = fleet(
        &bin,
        &[
            ("a", "a1a1a1a1-0000-4000-8000-00000000000a"),
            ("b", "b2b2b2b2-0000-4000-8000-00000000000b"),
        ],
        &TIMEOUTS,
    );
    let port = f.emulators[1].url.rsplit(':').next()?.to_string();
    Some((f, port))
}

/// Clears the immutable flag it set, whatever the test's outcome.
pub(crate) struct Immutable(pub(crate) std::path::PathBuf);

impl Immutable {
    pub(crate) fn set(path: &std::path::Path) -> Option<Immutable> {
        let ok = std::process::Command::new("chattr")
            .arg("+i")
            .arg(path)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Immutable(path.to_path_buf()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

/// Waits for `child` at most `bound`, then kills it (a hang is a failure, not a stuck test).
pub(crate) fn wait_exit_within(
    child: &mut std::process::Child,
    bound: Duration,
) -> std::process::ExitStatus {
    let end = Instant::now() + bound;
    while Instant::now() < end {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    common::deliver::stop_child(child)
}
