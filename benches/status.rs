//! Benchmark: `ibi status` on a generated BASE of SITES sites (default 500) with REPORTS reports each
//! (default 8), against two references run in the same invocation: `cat` of the same files (what
//! reading them costs) and `ibi status` on SMALL_SITES sites (default 20; how it scales). Target
//! (issue 21 item E): under one second on this machine for 500 sites.
//!
//! The BASE is laid out as `ibi serve` and `ibi deploy` leave it: one record per site (JSON, as
//! deploy writes it; a third in the site phase, a tenth failed), and the store (written with the
//! library's types, as the server writes it) with each site's reports in arrival order, interleaved
//! across sites, half with the site's own token and half with the ISO's shared one (tied by UUID);
//! a failed host's last report carries 100 journal lines of about 200 characters. Each command runs
//! RUNS times (default 7), alternating, after a warm-up; the medians are printed with the ratios,
//! and one `RESULT` line. Written under target/tmp, deleted after (KEEP=1 keeps it, to profile).
//! IBI_BIN times another binary (e.g. an older build) on the same BASE.
//!
//! Run: `cargo bench --bench status` (SITES, REPORTS, SMALL_SITES, RUNS env vars). Results go to
//! docs/performance.md by hand.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is how it fails

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ibi::contract::agent_status::{RunState, Status};
use ibi::contract::host_report::{HostIdentity, HostReport, REPORT_VERSION, ReportingAgent};
use ibi::deliver::report_store::StoredReport;
use serde_json::{Value, json};

const T0: u64 = 1_764_000_000;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn uuid(i: usize) -> String {
    format!("{i:08x}-0000-4000-8000-{i:012x}")
}

fn phase(state: &str, step: &str, started: u64, error: Option<&str>) -> Value {
    json!({"state": state, "step": step, "started": started, "updated": started + 300,
           "error": error, "bytesServed": 1_073_741_824u64})
}

/// Writes BASE with `sites` records and `reports` reports each; returns every file written.
fn fleet(base: &Path, sites: usize, reports: usize) -> Vec<PathBuf> {
    let dir = base.join(".ibi/deploy");
    fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for i in 0..sites {
        let name = format!("site-{i:04}");
        let failed = i % 10 == 3;
        let mut phases = json!({"factory": if failed {
            phase("failed", "wait-report", T0, Some("the host reported a failure: precache failed"))
        } else {
            phase("done", "eject", T0, None)
        }});
        if i % 3 == 0 && !failed {
            phases["site"] = phase("running", "watch", T0 + 4000, None);
        }
        let record = json!({"version": 1, "site": name,
            "bmc": {"address": format!("https://10.{}.{}.9", i / 250, i % 250),
                    "system": "/redfish/v1/Systems/1", "uuid": uuid(i)},
            "phases": phases});
        let path = dir.join(format!("{name}.json"));
        fs::write(&path, serde_json::to_vec_pretty(&record).unwrap()).unwrap();
        files.push(path);
    }
    let store = base.join(".ibi/reports.jsonl");
    let mut out = std::io::BufWriter::new(fs::File::create(&store).unwrap());
    let steps = [
        "write-rhcos",
        "fetch-seed",
        "deploy",
        "restore-etc",
        "precache",
        "install-host-unit",
    ];
    for n in 0..reports {
        for i in 0..sites {
            let last = n + 1 == reports;
            let failed = i % 10 == 3 && last;
            let step = if failed {
                "precache"
            } else {
                steps[n % steps.len()]
            };
            let state = match (failed, last) {
                (true, _) => RunState::Failed,
                (false, true) => RunState::Done,
                (false, false) => RunState::Running,
            };
            let logs: Vec<String> = if failed {
                (0..100)
                    .map(|l| {
                        format!(
                            "2026-11-24T10:00:{:02}+0000 sno lca-cli[1]: {}",
                            l % 60,
                            "x".repeat(160)
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let at = T0 + 10 + (n * 30) as u64;
            // The host's clock: two hours behind, as status must never read it.
            let mut status = Status::idle(at - 7200);
            status.step = step.into();
            status.state = state;
            status.error = failed.then(|| "precache failed".to_string());
            let line = StoredReport {
                received: at,
                client: "10.0.0.1:40000".into(),
                // Half the hosts report with their site's own token, half with the shared one.
                site: (i % 2 == 0).then(|| format!("site-{i:04}")),
                report: HostReport {
                    version: REPORT_VERSION,
                    agent: ReportingAgent::Ibi,
                    host: HostIdentity {
                        hostname: format!("sno-{i:04}"),
                        product_uuid: Some(uuid(i)),
                        boot_id: Some("b1".into()),
                    },
                    status,
                    finished: last,
                    logs,
                },
            };
            serde_json::to_writer(&mut out, &line).unwrap();
            out.write_all(b"\n").unwrap();
        }
    }
    out.flush().unwrap();
    files.push(store);
    files
}

/// One run of `program args`, stdout to /dev/null; its wall time. `ibi status` must say every site.
fn timed(program: &str, args: &[&str], sites: usize) -> Duration {
    let start = Instant::now();
    let out = Command::new(program)
        .args(args)
        .stdout(if sites > 0 {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .output()
        .expect("running the command");
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if sites > 0 {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(&format!("{sites} host(s)")), "{text}");
    }
    took
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let sites = env_usize("SITES", 500);
    let reports = env_usize("REPORTS", 8).max(1);
    let small = env_usize("SMALL_SITES", 20);
    let runs = env_usize("RUNS", 7).max(1);
    let ibi = std::env::var("IBI_BIN")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_ibi").to_string());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/tmp")
        .join(format!("bench-status-{}", std::process::id()));
    let (big, little) = (root.join("big"), root.join("small"));
    let files = fleet(&big, sites, reports);
    fleet(&little, small, reports);
    let bytes: u64 = files.iter().map(|f| fs::metadata(f).unwrap().len()).sum();
    let cat_args: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();
    let (b, s) = (big.to_str().unwrap(), little.to_str().unwrap());

    let commands: [(&str, &str, Vec<&str>, usize); 4] = [
        ("cat (same files)", "cat", cat_args.clone(), 0),
        (
            "status, SMALL_SITES",
            &ibi,
            vec!["status", "--dir", s],
            small,
        ),
        ("status, SITES", &ibi, vec!["status", "--dir", b], sites),
        (
            "status --json --logs, SITES",
            &ibi,
            vec!["status", "--dir", b, "--json", "--logs"],
            0,
        ),
    ];
    for (_, program, args, n) in &commands {
        timed(program, args, *n); // warm-up: page cache, the binary
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); commands.len()];
    for _ in 0..runs {
        for ((_, program, args, n), into) in commands.iter().zip(&mut samples) {
            into.push(timed(program, args, *n));
        }
    }
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    if std::env::var_os("KEEP").is_some() {
        println!("kept: {}", root.display());
    } else {
        fs::remove_dir_all(&root).expect("cleaning target/tmp");
    }

    let med: Vec<Duration> = samples.into_iter().map(median).collect();
    println!(
        "{sites} sites × {reports} reports ({} files, {:.1} MiB); {small} sites for the reference; {runs} runs; load {}",
        files.len(),
        bytes as f64 / 1048576.0,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    for ((name, ..), m) in commands.iter().zip(&med) {
        println!("  {name:<30} median {}", ms(*m));
    }
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    println!(
        "RESULT sites={sites} status={} json_logs={} cat={} small={} status/cat={:.1}x status/small={:.1}x (sites ratio {:.0}x) target<1s={}",
        ms(med[2]),
        ms(med[3]),
        ms(med[0]),
        ms(med[1]),
        ratio(med[2], med[0]),
        ratio(med[2], med[1]),
        sites as f64 / small.max(1) as f64,
        if med[2] < Duration::from_secs(1) {
            "met"
        } else {
            "MISSED"
        }
    );
}
