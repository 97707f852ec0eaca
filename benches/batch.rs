//! Benchmark: `ibi create config-image --sites` on a generated fleet of SITES sites (default 1000)
//! against the bound SITES × serial crypto floor / cores, the floor measured in the same invocation
//! (five RSA-2048 key generations plus one bcrypt at cost 10, one after another on one core, as
//! benches/config_image.rs measures it). Target: wall time ≤ 1.1 × the bound. Also prints peak RSS
//! (wait4's ru_maxrss through GNU `/usr/bin/time -f %M`, i.e. the process's VmHWM) for a fleet of
//! SMALL_SITES (default 100) and of SITES, which should be flat, and the time of an unchanged re-run.
//!
//! Each site gets its own /24 and a one-NIC entry, from the shared base of seed-fixtures/example-fleet.
//! The fleets are written under target/tmp (the filesystem outputs really land on) and deleted after.
//! Floor samples (FLOOR_SAMPLES, default 10) are taken before and after the big run and pooled; the
//! serial cost of a site's own crypto (six keys and the hash: a site has one key more than the floor)
//! is sampled alongside, to explain the result. On a shared machine other processes' load inflates
//! wall times, so CPU time is reported too: each floor sample's thread CPU time (schedstat) against
//! the batch's user+sys time (GNU time), which shows the work done per site independent of load.
//! Results go to docs/performance.md by hand.
//!
//! Run: `cargo bench --bench batch` (SITES, SMALL_SITES, FLOOR_SAMPLES env vars).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is how it fails

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const GNU_TIME: &str = "/usr/bin/time";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let sites = env_usize("SITES", 1000);
    let small = env_usize("SMALL_SITES", 100);
    let samples = env_usize("FLOOR_SAMPLES", 10).max(1);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/tmp")
        .join(format!("bench-batch-{}", std::process::id()));
    fs::create_dir_all(&root).expect("mkdir target/tmp");

    // Warm-up, uncounted: page cache, lazy OpenSSL init, the binary.
    floor(5);
    let warm = fleet(&root.join("warm"), 2);
    run_batch(&warm);

    let (mut floors, mut site_crypto) = (Samples::default(), Samples::default());
    sample(samples, &mut floors, &mut site_crypto);
    let small_fleet = fleet(&root.join("small"), small);
    let small_run = run_batch(&small_fleet);
    let big_fleet = fleet(&root.join("big"), sites);
    let big_run = run_batch(&big_fleet);
    let rerun = run_batch(&big_fleet);
    sample(samples, &mut floors, &mut site_crypto);
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    fs::remove_dir_all(&root).expect("cleaning target/tmp");

    let floor_wall = median(&mut floors.wall);
    let floor_cpu = median(&mut floors.cpu);
    let site_wall = median(&mut site_crypto.wall);
    let site_cpu = median(&mut site_crypto.cpu);
    let per_core = |d: Duration, n: usize| d.mul_f64(n as f64 / cores as f64).as_secs_f64();
    let mut report = String::new();
    let _ = writeln!(
        report,
        "cores: {cores}; load average after: {}",
        load.trim()
    );
    for (what, w, c, samples) in [
        (
            "serial crypto floor (5x RSA-2048 + bcrypt 10)",
            floor_wall,
            floor_cpu,
            &floors,
        ),
        (
            "serial site crypto  (6x RSA-2048 + bcrypt 10)",
            site_wall,
            site_cpu,
            &site_crypto,
        ),
    ] {
        let _ = writeln!(
            report,
            "{what}: median {:.1} ms wall, {:.1} ms CPU, {} samples (wall range {:.0}..{:.0} ms)",
            ms(w),
            ms(c),
            samples.wall.len(),
            ms(samples.wall[0]),
            ms(samples.wall[samples.wall.len() - 1])
        );
    }
    for (n, run) in [(small, &small_run), (sites, &big_run)] {
        let bound = per_core(floor_wall, n);
        let _ = writeln!(
            report,
            "{n} sites: wall {:.1} s, bound {n} x floor / {cores} = {bound:.1} s, ratio {:.3}x \
             (vs {n} x site crypto / {cores}: {:.3}x); CPU {:.1} s = {:.3}x {n} x floor CPU; peak RSS {}",
            run.wall.as_secs_f64(),
            run.wall.as_secs_f64() / bound,
            run.wall.as_secs_f64() / per_core(site_wall, n),
            run.cpu.as_secs_f64(),
            run.cpu.as_secs_f64() / (floor_cpu.as_secs_f64() * n as f64),
            rss(run.max_rss_kib),
        );
    }
    let _ = writeln!(
        report,
        "{sites} sites re-run, all unchanged: wall {:.2} s, CPU {:.2} s, peak RSS {}",
        rerun.wall.as_secs_f64(),
        rerun.cpu.as_secs_f64(),
        rss(rerun.max_rss_kib),
    );
    print!("{report}");
}

/// Wall and CPU time of samples.
#[derive(Default)]
struct Samples {
    wall: Vec<Duration>,
    cpu: Vec<Duration>,
}

/// One floor and one site-crypto sample per round, alternating so machine noise hits both alike.
fn sample(rounds: usize, floors: &mut Samples, site_crypto: &mut Samples) {
    for _ in 0..rounds {
        for (keys, into) in [(5, &mut *floors), (6, &mut *site_crypto)] {
            let (wall, cpu) = floor(keys);
            into.wall.push(wall);
            into.cpu.push(cpu);
        }
    }
}

/// `keys` RSA-2048 key generations and one bcrypt at cost 10, serially on this thread: wall and
/// thread CPU time.
fn floor(keys: usize) -> (Duration, Duration) {
    let (start, cpu0) = (Instant::now(), thread_cpu());
    for _ in 0..keys {
        std::hint::black_box(openssl::rsa::Rsa::generate(2048).expect("RSA keygen"));
    }
    std::hint::black_box(bcrypt::hash("benchmark-password-12345", 10).expect("bcrypt"));
    (start.elapsed(), thread_cpu().saturating_sub(cpu0))
}

/// This thread's time on a CPU (first field of /proc/thread-self/schedstat, nanoseconds).
fn thread_cpu() -> Duration {
    let text = fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let ns = text
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .expect("schedstat format");
    Duration::from_nanos(ns)
}

struct Fleet {
    base: PathBuf,
    inventory: PathBuf,
    sites: usize,
}

/// A base dir with the example fleet's shared files and an inventory of `n` one-NIC sites.
fn fleet(base: &Path, n: usize) -> Fleet {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/example-fleet");
    fs::create_dir_all(base.join("extra-manifests")).expect("mkdir");
    for f in ["install-config.yaml", "image-based-config.yaml"] {
        fs::copy(example.join(f), base.join(f)).expect("copy base");
    }
    for e in fs::read_dir(example.join("extra-manifests")).expect("read_dir") {
        let e = e.expect("entry");
        fs::copy(e.path(), base.join("extra-manifests").join(e.file_name())).expect("copy");
    }
    let mut inv = String::from("sites:\n");
    for i in 0..n {
        let (hi, lo) = (i / 256, i % 256);
        let _ = write!(
            inv,
            "- name: s{i:05}\n  hostname: sno-s{i:05}\n  clusterName: sno-s{i:05}\n  \
             machineNetwork: [10.{hi}.{lo}.0/24]\n  nic:\n    interface: eth0\n    \
             macAddress: 52:54:00:{:02x}:{:02x}:01\n    address: 10.{hi}.{lo}.10/24\n    \
             gateway: 10.{hi}.{lo}.1\n    dns: [10.{hi}.{lo}.1]\n",
            hi % 256,
            lo
        );
    }
    let inventory = base.join("sites.yaml");
    fs::write(&inventory, inv).expect("write inventory");
    Fleet {
        base: base.to_path_buf(),
        inventory,
        sites: n,
    }
}

struct Run {
    wall: Duration,
    /// user + sys of the ibi process (zero without GNU time).
    cpu: Duration,
    max_rss_kib: Option<u64>,
}

fn rss(kib: Option<u64>) -> String {
    kib.map_or("n/a".to_string(), |k| {
        format!("{:.1} MiB", k as f64 / 1024.0)
    })
}

/// The release binary on the fleet, under GNU time when it is installed; checks every site is in
/// the summary.
fn run_batch(f: &Fleet) -> Run {
    let ibi = env!("CARGO_BIN_EXE_ibi");
    let rss_file = f.base.join("maxrss");
    let gnu_time = Path::new(GNU_TIME).exists();
    let mut cmd = if gnu_time {
        let mut c = Command::new(GNU_TIME);
        c.arg("-f")
            .arg("%M %U %S")
            .arg("-o")
            .arg(&rss_file)
            .arg(ibi);
        c
    } else {
        Command::new(ibi)
    };
    cmd.args(["create", "config-image", "--dir"])
        .arg(&f.base)
        .arg("--sites")
        .arg(&f.inventory)
        .env_remove("RUST_LOG");
    let start = Instant::now();
    let out = cmd.output().expect("running ibi");
    let wall = start.elapsed();
    assert!(
        out.status.success(),
        "ibi failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = String::from_utf8_lossy(&out.stdout);
    let want = format!("{} sites: ", f.sites);
    assert!(
        summary.lines().any(|l| l.starts_with(&want)),
        "unexpected summary: {}",
        summary.lines().last().unwrap_or_default()
    );
    // GNU time's last line: "%M %U %S" (KiB, seconds, seconds).
    let stats = gnu_time
        .then(|| fs::read_to_string(&rss_file).ok())
        .flatten()
        .unwrap_or_default();
    let fields: Vec<&str> = stats
        .lines()
        .last()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let secs = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Run {
        wall,
        cpu: Duration::from_secs_f64(secs(1) + secs(2)),
        max_rss_kib: fields.first().and_then(|v| v.parse().ok()),
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
