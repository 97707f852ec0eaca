//! `ibi deploy --phase factory` for a fleet from one workstation: one sushy-tools emulator process
//! serving one fake System per site (`SUSHY_EMULATOR_FAKE_SYSTEMS`, fake driver, Basic auth, TLS;
//! it stands for one BMC per host, all behind one address, as a lab's emulator is), every site's
//! inventory entry naming its System. The hosts are played by the test: once a site waits for its
//! report, its host downloads the image its BMC holds (the `Image` URL of its virtual CD, from
//! deploy's server), reads its Ignition config with coreos-installer and reports through it, as the
//! booted live ISO would.
//!
//! The test runs 20 sites with `--parallel 4` and holds deploy's threads to `--parallel` plus a
//! constant, sampled from `/proc` while it runs (a thread per site, as deploy once had, fails it).
//! The ignored `deploy_scale_benchmark` runs 20, 100 and 200 sites at `--parallel 20`
//! (`IBI_SCALE_SIZES`, `IBI_SCALE_PARALLEL`) and prints peak RSS, peak threads and wall time per
//! site; `benches/deploy-scale.sh` runs it on a release build. The ignored `dashboard_cost_benchmark`
//! runs 200 sites with and without the status page and three viewers of it
//! (`benches/dashboard-cost.sh`). deploy_dashboard.rs drives the same fleet with the page open in a
//! browser.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::collections::HashSet;
use std::path::Path;
use std::process::Child;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::deliver::emulator::{Emulator, sushy_emulator};
#[cfg(not(feature = "agent"))]
use common::deliver::fleet::lca_fails;
use common::deliver::fleet::{DeployRun, wait_exit_within};
use common::deliver::fleet::{FactoryBase, factory_base, inventory_entry, spawn_deploy};
#[cfg(not(feature = "agent"))]
use common::deliver::host::ok;
use common::deliver::host::{Host, iso_ignition};
use serde_json::Value;

const TEST: &str = "deploy_scale";
/// Threads deploy may have beyond `--parallel`: main, the server's runtime (a worker per core and
/// up to four blocking threads) and its thread, the signal handlers, the host reporters' pool.
const THREADS_BEYOND_PARALLEL: usize = 16;
/// The whole run's bound (the test's own, not a performance assertion).
const RUN_WAIT: Duration = Duration::from_secs(1800);
/// Threads playing the hosts.
const PLAYERS: usize = 4;

struct Measure {
    sites: usize,
    wall: Duration,
    /// Status pages the viewers fetched.
    pages: usize,
    peak_rss_kib: u64,
    peak_threads: usize,
}

pub(crate) fn uuid(i: usize) -> String {
    format!("5ca1e000-0000-4000-8000-{i:012x}")
}

pub(crate) fn site(i: usize) -> String {
    format!("s{i:03}")
}

fn status_field(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A [`factory_base`] for `n` sites, one emulator serving a System per site, the inventory naming
/// them.
pub(crate) struct ScaleFleet {
    pub(crate) fb: FactoryBase,
    pub(crate) uuids: Vec<String>,
    pub(crate) emu: Emulator,
    pub(crate) inventory: std::path::PathBuf,
}

impl ScaleFleet {
    pub(crate) fn new(bin: &Path, n: usize) -> ScaleFleet {
        let fb = factory_base();
        let uuids: Vec<String> = (0..n).map(uuid).collect();
        let emu = Emulator::start_many(bin, &uuids);
        let mut inv = String::from("sites:\n");
        for (i, u) in uuids.iter().enumerate() {
            inv.push_str(&inventory_entry(&site(i), &emu, Some(u)));
        }
        let inventory = fb.work.path().join("sites.yaml");
        std::fs::write(&inventory, inv).unwrap();
        ScaleFleet {
            fb,
            uuids,
            emu,
            inventory,
        }
    }

    /// `ibi deploy --phase factory` (run `run`) polling every second, with `extra`.
    pub(crate) fn spawn(&self, parallel: usize, extra: &[&str]) -> Child {
        let parallel = parallel.to_string();
        let mut args = vec![
            "--poll",
            "1",
            "--parallel",
            &parallel,
            "--report-timeout",
            "900",
            "--bmc-timeout",
            "300",
        ];
        args.extend_from_slice(extra);
        spawn_deploy(
            &DeployRun {
                base: self.fb.base.path(),
                inventory: &self.inventory,
                phase: "factory",
                port: self.fb.port,
                tls: &self.fb.tls,
                out: self.fb.work.path(),
            },
            "run",
            &args,
        )
    }
}

/// The factory phase for `n` sites of one emulator; what it cost.
/// With `viewers` > 0, deploy serves its status page (`--dashboard`) and that many viewers fetch it
/// every [`VIEW_EVERY`], as the page's script does in a browser.
fn run(bin: &Path, n: usize, parallel: usize, viewers: usize) -> Measure {
    let fleet = ScaleFleet::new(bin, n);
    let ScaleFleet {
        fb: FactoryBase {
            base, work, tls, ..
        },
        uuids,
        emu,
        ..
    } = &fleet;
    let started = Instant::now();
    let extra: &[&str] = if viewers > 0 { &["--dashboard"] } else { &[] };
    let mut deploy: Child = fleet.spawn(parallel, extra);
    let pid = deploy.id();
    let done = AtomicBool::new(false);
    let (peak_threads, peak_rss) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let played: Mutex<HashSet<usize>> = Mutex::default();
    let ca = std::fs::read(&tls.0).unwrap();
    let pages = AtomicUsize::new(0);
    let status = std::thread::scope(|s| {
        for _ in 0..viewers {
            s.spawn(|| view(work.path(), &ca, &pages, &done));
        }
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                if let Some(t) = status_field(pid, "Threads:") {
                    peak_threads.fetch_max(t as usize, Ordering::SeqCst);
                }
                if let Some(r) = status_field(pid, "VmHWM:") {
                    peak_rss.fetch_max(r as usize, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        for _ in 0..PLAYERS {
            s.spawn(|| {
                play_hosts(base.path(), emu, uuids, &ca, &played, &done, &|_| {
                    Play::Done
                })
            });
        }
        let status = wait_exit_within(&mut deploy, RUN_WAIT);
        done.store(true, Ordering::SeqCst);
        status
    });
    let wall = started.elapsed();
    let read =
        |f: &str| std::fs::read_to_string(work.path().join(format!("run.{f}"))).unwrap_or_default();
    let (stdout, stderr) = (read("stdout"), read("stderr"));
    assert_eq!(
        status.code(),
        Some(0),
        "deploy of {n} sites:\n{stdout}\n{}",
        stderr.lines().rev().take(40).collect::<Vec<_>>().join("\n")
    );
    let done_rows = stdout.lines().filter(|l| l.contains("  done  ")).count();
    assert_eq!(done_rows, n, "{stdout}");
    for (i, u) in uuids.iter().enumerate() {
        let cd = emu.cd_of(u).unwrap();
        assert_eq!(cd["Inserted"], false, "site {} not ejected", site(i));
        let rec: Value = serde_json::from_slice(
            &std::fs::read(base.path().join(format!(".ibi/deploy/{}.json", site(i)))).unwrap(),
        )
        .unwrap();
        assert_eq!(rec["phases"]["factory"]["state"], "done", "{rec}");
        assert_eq!(rec["bmc"]["uuid"], u.as_str(), "{rec}");
    }
    let pages = pages.load(Ordering::SeqCst);
    assert!(
        viewers == 0 || pages >= viewers,
        "the viewers fetched {pages} pages"
    );
    Measure {
        sites: n,
        wall,
        pages,
        peak_rss_kib: peak_rss.load(Ordering::SeqCst) as u64,
        peak_threads: peak_threads.load(Ordering::SeqCst),
    }
}

/// How often a viewer fetches the status page: as often as its script in a browser does.
const VIEW_EVERY: Duration = Duration::from_secs(2);

/// The status page's URL, once deploy (run `run`, its output in `work`) has printed it.
pub(crate) fn printed_dashboard_url(work: &Path) -> Option<String> {
    let err = std::fs::read_to_string(work.join("run.stderr")).unwrap_or_default();
    let urls: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("status page: "))
        .collect();
    assert!(urls.len() <= 1, "the URL is printed once:\n{err}");
    Some(urls.first()?.split_whitespace().next()?.to_string())
}

/// A viewer with the page open: it fetches the page every [`VIEW_EVERY`] until `done`.
fn view(work: &Path, ca: &[u8], pages: &AtomicUsize, done: &AtomicBool) {
    let client = reqwest::blocking::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca).unwrap()])
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut url = None;
    while !done.load(Ordering::SeqCst) {
        match &url {
            None => url = printed_dashboard_url(work),
            Some(u) => {
                // The server stops with deploy: a failed fetch at the end is no error.
                if let Ok(r) = client.get(u).send()
                    && r.status() == 200
                    && r.bytes().is_ok()
                {
                    pages.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        let wait = if url.is_some() {
            VIEW_EVERY
        } else {
            Duration::from_millis(100)
        };
        std::thread::sleep(wait);
    }
}

/// What the test's host of site `i` does once its site waits for its report.
pub(crate) enum Play {
    /// Installs: reports its steps and the end.
    Done,
    /// Fails with this error, these journal lines sent with its last report.
    Fail(String, Vec<String>),
    /// Not yet: asked again on the next round.
    Wait,
}

/// Plays every host whose site waits for its report, once, as `how` says: the image its BMC holds,
/// read as the live ISO boots it, and the reports its agent sends.
pub(crate) fn play_hosts(
    base: &Path,
    emu: &Emulator,
    uuids: &[String],
    ca: &[u8],
    played: &Mutex<HashSet<usize>>,
    done: &AtomicBool,
    how: &(dyn Fn(usize) -> Play + Sync),
) {
    let client = reqwest::blocking::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca).unwrap()])
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    while !done.load(Ordering::SeqCst) {
        let mut idle = true;
        for (i, u) in uuids.iter().enumerate() {
            if !waiting(base, &site(i)) {
                continue;
            }
            let play = how(i);
            if matches!(play, Play::Wait) || !played.lock().unwrap().insert(i) {
                continue;
            }
            idle = false;
            let image = emu.cd_of(u).unwrap()["Image"].as_str().unwrap().to_string();
            let bytes = client.get(&image).send().unwrap().bytes().unwrap();
            let iso = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(iso.path(), &bytes).unwrap();
            let journal = match &play {
                Play::Fail(_, lines) => lines.join("\n") + "\n",
                _ => String::new(),
            };
            let host = Host::new(
                &iso_ignition(iso.path()),
                u,
                &format!("sno-{}", site(i)),
                &journal,
            );
            match play {
                Play::Fail(error, lines) => report_failed(&host, &error, lines),
                _ => report_done(&host),
            }
        }
        if idle {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn waiting(base: &Path, site: &str) -> bool {
    std::fs::read(base.join(format!(".ibi/deploy/{site}.json")))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .is_some_and(|r| {
            let p = &r["phases"]["factory"];
            p["state"] == "running" && p["step"] == "wait-report"
        })
}

#[cfg(feature = "agent")]
fn report_done(h: &Host) {
    assert_eq!(
        h.agent_reports_three_steps(),
        ibi::agent::report::Delivery::Delivered
    );
}

#[cfg(not(feature = "agent"))]
fn report_done(h: &Host) {
    ok(&h.lca_report("running", &[]), "ibi-report.sh running");
    ok(&h.lca_report("done", &[]), "ibi-report.sh done");
}

#[cfg(feature = "agent")]
fn report_failed(h: &Host, error: &str, logs: Vec<String>) {
    assert_eq!(
        h.agent_reports_failure(error, logs),
        ibi::agent::report::Delivery::Delivered
    );
}

/// lca's failure unit: its error is systemd's, its journal the stand-in's lines.
#[cfg(not(feature = "agent"))]
fn report_failed(h: &Host, _error: &str, _logs: Vec<String>) {
    lca_fails(h);
}

#[test]
fn twenty_sites_of_one_emulator_finish_with_threads_bounded_by_parallel() {
    if !common::require_tools(TEST, &["coreos-installer"]) {
        return;
    }
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let parallel = 4;
    let m = run(&bin, 20, parallel, 0);
    eprintln!(
        "{} sites: {:.1} s wall, peak RSS {} KiB, peak threads {}",
        m.sites,
        m.wall.as_secs_f64(),
        m.peak_rss_kib,
        m.peak_threads
    );
    assert!(
        m.peak_threads <= parallel + THREADS_BEYOND_PARALLEL,
        "{} threads for --parallel {parallel}",
        m.peak_threads
    );
}

/// The benchmark (`benches/deploy-scale.sh`): sizes from `IBI_SCALE_SIZES` (default 20,100,200)
/// at `IBI_SCALE_PARALLEL` (default 20); a table on stderr, no assertion on time.
#[test]
#[ignore = "a benchmark: benches/deploy-scale.sh runs it"]
fn deploy_scale_benchmark() {
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let sizes: Vec<usize> = std::env::var("IBI_SCALE_SIZES")
        .unwrap_or_else(|_| "20,100,200".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let parallel: usize = std::env::var("IBI_SCALE_PARALLEL")
        .ok()
        .map_or(20, |p| p.parse().unwrap());
    let rows: Vec<Measure> = sizes.iter().map(|n| run(&bin, *n, parallel, 0)).collect();
    // Ratios to the first size, the reference run of this invocation.
    let (rss0, threads0) = (rows[0].peak_rss_kib as f64, rows[0].peak_threads as f64);
    eprintln!(
        "SITES  PARALLEL  WALL(s)  PER SITE(s)  PEAK RSS(KiB)  RSS RATIO  PEAK THREADS  THREADS RATIO"
    );
    for m in &rows {
        eprintln!(
            "{:>5}  {:>8}  {:>7.1}  {:>11.2}  {:>13}  {:>9.2}  {:>12}  {:>13.2}",
            m.sites,
            parallel,
            m.wall.as_secs_f64(),
            m.wall.as_secs_f64() / m.sites as f64,
            m.peak_rss_kib,
            m.peak_rss_kib as f64 / rss0,
            m.peak_threads,
            m.peak_threads as f64 / threads0
        );
    }
}

/// The status page's cost (`benches/dashboard-cost.sh`): `IBI_DASHBOARD_SITES` sites (default 200) at
/// `--parallel 20`, `IBI_DASHBOARD_ROUNDS` rounds (default 3), each a deploy without the page and
/// one with it and three viewers fetching it every two seconds; a table on stderr and the ratio of
/// the medians, no assertion on time.
#[test]
#[ignore = "a benchmark: benches/dashboard-cost.sh runs it"]
fn dashboard_cost_benchmark() {
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let env = |k: &str, d: usize| std::env::var(k).ok().map_or(d, |v| v.parse().unwrap());
    let (n, rounds) = (
        env("IBI_DASHBOARD_SITES", 200),
        env("IBI_DASHBOARD_ROUNDS", 3),
    );
    let mut walls: [Vec<f64>; 2] = Default::default();
    eprintln!("ROUND  VIEWERS  SITES  WALL(s)  PAGES  PEAK RSS(KiB)");
    for round in 1..=rounds {
        for (k, viewers) in [0, 3].into_iter().enumerate() {
            let m = run(&bin, n, 20, viewers);
            eprintln!(
                "{round:>5}  {viewers:>7}  {:>5}  {:>7.1}  {:>5}  {:>13}",
                m.sites,
                m.wall.as_secs_f64(),
                m.pages,
                m.peak_rss_kib
            );
            walls[k].push(m.wall.as_secs_f64());
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (without, with) = (median(&mut walls[0]), median(&mut walls[1]));
    eprintln!(
        "median wall: {without:.1} s without the page, {with:.1} s with three viewers: ratio {:.3}",
        with / without
    );
}
