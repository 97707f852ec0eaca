#![cfg(feature = "agent")]
//! Kill-and-resume test of `ibi agent install` (issue 10): a host whose agent is killed again and again —
//! SIGKILL to its whole process group, as an OOM kill or `systemctl restart` does — and started again in
//! place each time, with the killed run's mounts and whatever it left as they are, must end with the same
//! disk as a host whose install was never interrupted.
//!
//! Two targets from one seed and registry (`common_agent`), with the container-storage driver the field
//! uses: `reference` installs once; `killed` is killed `IBI_KILLS` times (default 4, at least 3) at random
//! moments drawn from a seed (printed; `IBI_KILL_SEED=<n>` replays the same plan). The moments are spread
//! over the whole install: the steps (and the finishing work after the last one) are split into as many
//! consecutive groups as there are kills, one point is drawn in each group, and the kill lands at a random
//! fraction of that step's duration in the reference run after the step is seen starting (or at once when
//! the run is already past it). After the last kill the agent runs to its end. Then:
//! - `coreos-installer` (the stand-in) completed exactly once, or once more only where a kill landed
//!   between its end and the record of `write-rhcos`, and was never started once that record existed;
//! - nothing is mounted from the disk or below the target, no loop device is left over it, no state is
//!   left on it;
//! - the disk, read with tools other than ibi (`sfdisk`, `sgdisk --verify`, `blkid -p`, `xfs_info`,
//!   `ostree admin status`, the trees of `/etc` and `/var`, `skopeo inspect containers-storage:…` of every
//!   precached image) is the reference's;
//! - a further run does nothing.
//!
//! Needs root, loop devices and the tools of `common_agent`; without them the test fails, naming them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::common::agent::{
    Env, RUN_LIMIT, Target, check_nothing_left, check_target, field_driver, log_of, now_ns,
};
use ibi::agent::state::Step;

const TEST: &str = "agent_install_kill_resume";
/// Gives the post-script step a duration a kill can land in.
const POST_SH: &str = "sleep 1";
/// How long the finishing work (state back to the live system, targets unmounted) is given as a range
/// to draw a kill moment in.
const FINISHING: Duration = Duration::from_millis(300);

/// SplitMix64: a few lines, enough to draw reproducible kill moments from a printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Where a kill is aimed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Point {
    Step(Step),
    /// After the last step is done, while the install hands the state back and unmounts.
    Finishing,
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Point::Step(s) => write!(f, "{s}"),
            Point::Finishing => f.write_str("finishing"),
        }
    }
}

/// The install's steps (this configuration: no shutdown), then the finishing work.
fn points() -> Vec<Point> {
    Step::ALL
        .into_iter()
        .filter(|s| *s != Step::Shutdown)
        .map(Point::Step)
        .chain([Point::Finishing])
        .collect()
}

/// One point per consecutive group of `points()`, at a random fraction of its span.
fn kill_plan(rng: &mut Rng, kills: usize) -> Vec<(Point, f64)> {
    let all = points();
    let per = all.len().div_ceil(kills);
    all.chunks(per)
        .map(|group| (group[rng.below(group.len())], rng.unit()))
        .collect()
}

/// `<step>: done in <secs> s` lines of a run's log.
fn step_durations(log: &str) -> BTreeMap<String, Duration> {
    log.lines()
        .filter_map(|l| {
            let (head, rest) = l.split_once(": done in ")?;
            let step = head.rsplit(' ').next()?;
            let secs: f64 = rest.split(' ').next()?.parse().ok()?;
            Some((step.to_string(), Duration::from_secs_f64(secs)))
        })
        .collect()
}

/// What one killed run did.
#[derive(Debug)]
struct Kill {
    /// The status file's step and state when the kill was sent.
    landed: String,
    at_ns: u128,
}

fn step_index(name: &str) -> Option<usize> {
    Step::ALL.iter().position(|s| s.name() == name)
}

/// Runs the agent and kills it at `point` + `delay`; `None` when it ended first.
fn run_with_kill(t: &Target, point: Point, delay: Duration) -> Option<Kill> {
    let _ = fs::remove_file(t.path("status.json"));
    let log = t.path(&format!("killed-run-{}.log", now_ns()));
    let mut child = t.spawn(&[], &log);
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let text = fs::read_to_string(&log).unwrap_or_default();
            assert!(status.success(), "a resumed run failed ({status}): {text}");
            return None;
        }
        assert!(
            started.elapsed() < RUN_LIMIT,
            "no progress: {}",
            fs::read_to_string(&log).unwrap_or_default()
        );
        if reached(&t.status(), point) {
            wait_within(t, point, delay);
            return Some(kill(t, &mut child));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sleeps `delay`, but no longer than the run stays in step `point`: the delay comes from the
/// reference run's step time, and a run with warm caches may finish that step (and every later one)
/// sooner, so an unbounded sleep could land the kill after the install instead of in the step.
fn wait_within(t: &Target, point: Point, delay: Duration) {
    let end = Instant::now() + delay;
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        if let Point::Step(p) = point
            && past(&t.status(), p)
        {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(5)));
    }
}

/// Whether the run has finished step `p`.
fn past(status: &serde_json::Value, p: Step) -> bool {
    let now = status["step"].as_str().and_then(step_index).unwrap_or(0);
    now > p as usize || (now == p as usize && status["state"] != "running")
}

/// Whether the run is at `point` (or past it).
fn reached(status: &serde_json::Value, point: Point) -> bool {
    let (Some(step), Some(state)) = (status["step"].as_str(), status["state"].as_str()) else {
        return false;
    };
    let now = step_index(step).unwrap_or(0);
    match point {
        Point::Step(p) => now > p as usize || (now == p as usize && state == "running"),
        Point::Finishing => step == Step::InstallHostUnit.name() && state == "done",
    }
}

fn kill(t: &Target, child: &mut Child) -> Kill {
    let st = t.status();
    let at_ns = now_ns();
    t.kill_group(child);
    let _ = child.wait();
    Kill {
        landed: format!("{} ({})", st["step"], st["state"]),
        at_ns,
    }
}

/// The stand-in's calls: never started once `write-rhcos` was recorded; each completed call but the last
/// was followed by a kill before the next start (the record had not been made).
fn check_installer_calls(t: &Target, kills: &[Kill]) {
    let log = t.installer_log();
    assert!(
        !log.iter().any(|l| l == "restarted-after-done"),
        "coreos-installer started after write-rhcos was recorded done: {log:?}"
    );
    let time = |l: &str| -> u128 { l.split(' ').nth(1).unwrap().parse().unwrap() };
    let starts: Vec<u128> = log
        .iter()
        .filter(|l| l.starts_with("start "))
        .map(|l| time(l))
        .collect();
    let dones: Vec<u128> = log
        .iter()
        .filter(|l| l.starts_with("done "))
        .map(|l| time(l))
        .collect();
    assert!(!dones.is_empty(), "RHCOS never written: {log:?}");
    for done in &dones[..dones.len() - 1] {
        let next_start = starts
            .iter()
            .find(|s| *s > done)
            .copied()
            .unwrap_or(u128::MAX);
        assert!(
            kills
                .iter()
                .any(|k| k.at_ns > *done && k.at_ns < next_start),
            "coreos-installer completed again with no kill in between: {log:?}, kills {kills:?}"
        );
    }
    eprintln!(
        "coreos-installer: {} started, {} completed",
        starts.len(),
        dones.len()
    );
}

#[test]
fn agent_install_killed_repeatedly_ends_like_an_uninterrupted_one() {
    let Some(env) = Env::setup(TEST) else { return };
    let driver = field_driver(TEST);

    let reference = env.target("reference", driver, POST_SH);
    // A one-shot ISO's site tree on both: the write-site-config step is among the kill points, and
    // its result is part of the /var compared below.
    common::agent::place_site_tree(&reference);
    let out = reference.run_agent(&[]);
    let log = log_of(&out);
    assert!(out.status.success(), "reference run failed: {log}");
    let durations = step_durations(&log);
    check_nothing_left(&reference);
    let want = check_target(&env, &reference);

    let seed: u64 = match std::env::var("IBI_KILL_SEED") {
        Ok(v) => v.parse().expect("IBI_KILL_SEED: a number"),
        Err(_) => now_ns() as u64,
    };
    let kills_wanted: usize = std::env::var("IBI_KILLS")
        .map(|v| v.parse().expect("IBI_KILLS: a number"))
        .unwrap_or(4);
    assert!(kills_wanted >= 3, "IBI_KILLS: at least 3");
    let mut rng = Rng(seed);
    let plan = kill_plan(&mut rng, kills_wanted);
    eprintln!("{TEST}: kill seed {seed} (IBI_KILL_SEED={seed} replays it), driver {driver}");

    let t = env.target("killed", driver, POST_SH);
    common::agent::place_site_tree(&t);
    let mut kills = Vec::new();
    for (point, fraction) in plan {
        let span = match point {
            Point::Step(s) => durations.get(s.name()).copied().unwrap_or_default(),
            Point::Finishing => FINISHING,
        };
        let delay = span.mul_f64(fraction);
        match run_with_kill(&t, point, delay) {
            Some(k) => {
                eprintln!(
                    "kill {}: aimed at {point} + {delay:.2?}, landed in {}; left mounted: {:?}",
                    kills.len() + 1,
                    k.landed,
                    t.leftover_mounts()
                );
                kills.push(k);
            }
            None => eprintln!("aimed at {point}: the run ended first"),
        }
    }
    assert!(
        kills.len() >= 3,
        "only {} kills landed: {kills:?}",
        kills.len()
    );
    let _ = fs::remove_file(t.path("status.json"));
    let out = t.run_agent(&[]);
    assert!(
        out.status.success(),
        "the final run failed: {}",
        log_of(&out)
    );

    check_installer_calls(&t, &kills);
    check_nothing_left(&t);
    let got = check_target(&env, &t);
    assert_eq!(got.gpt, want.gpt, "partition table");
    assert_eq!(got.blkid, want.blkid, "filesystems");
    assert_eq!(got.xfs_info, want.xfs_info, "XFS geometry");
    assert_eq!(got.ostree_status, want.ostree_status, "deployment");
    assert_eq!(got.bls_options, want.bls_options, "boot entries");
    assert_eq!(got.etc, want.etc, "/etc");
    assert_eq!(got.var, want.var, "/var");
    assert_eq!(got.image_digests, want.image_digests, "precached images");

    let calls = t.installer_log();
    let out = t.run_agent(&[]);
    let log = log_of(&out);
    assert!(out.status.success(), "further run: {log}");
    assert!(
        log.contains("the install finished in an earlier run; nothing to do"),
        "{log}"
    );
    assert_eq!(t.installer_log(), calls, "a further run wrote nothing");
    check_nothing_left(&t);
}
