//! Benchmark: `ibi create image` on a padded synthetic CoreOS live ISO (1 GiB by default) against
//! `cp` of the same ISO and against `coreos-installer iso ignition embed -o` of the same Ignition
//! config, all measured in the same invocation. Runs alternate (the order rotates every
//! iteration) so machine noise and the page cache treat every side alike. Targets: median ibi /
//! median cp ≤ 1.1, median ibi / median coreos-installer ≤ 1.0, peak RSS of ibi < 64 MiB.
//! Results go to docs/performance.md by hand.
//!
//! Run: `cargo bench --bench create_image` (env: ITERATIONS, default 5; ISO_BYTES, default and
//! minimum 1 GiB; COREOS_INSTALLER, default `~/.cargo/bin/coreos-installer`, then PATH).
//!
//! Sides:
//! - `cp`: plain `cp SRC DST`, the reference the issue names. coreutils 9 copies with
//!   copy_file_range and defaults to `--reflink=auto`; on a filesystem with reflinks that would
//!   share extents instead of copying, so the bench says when the temp dir is not on ext4 (where
//!   nothing can be shared and plain `cp` copies every byte, as ibi does).
//! - `cp+fsync`: `cp SRC DST && sync DST`. ibi fsyncs its output (and the directory) before
//!   reporting success; `cp` and `coreos-installer -o` do not, so their files may still be only
//!   in the page cache when they exit. This side is the like-for-like durable reference.
//! - `ibi`: the release `ibi create image --dir SITE --base-iso BIG.iso` (seed checked through the
//!   bundled OCI layout, no network).
//! - `coreos-installer`: `coreos-installer iso ignition embed -i CONFIG -o OUT BIG.iso` with the
//!   config ibi embedded (read back once with `ibi inspect --ignition`).
//! - `coreos-installer+fsync`: the same followed by `sync OUT`.
//!
//! Every output is deleted right after its run and the filesystem is synced (`sync -f`, untimed)
//! before each timed run, so no run pays for writing back or discarding another's blocks. The page
//! cache is not dropped (that would disturb everything else on the machine); the base ISO stays
//! cached for every side alike. Peak RSS comes from GNU `/usr/bin/time -f %M` (wait4's
//! ru_maxrss) around each process; without it the bench still times and prints `n/a`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is how it fails

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ibi::live_iso::synthetic::{IgnitionLayout, SyntheticIso};

const GIB: u64 = 1 << 30;
const CONFIG: &str = "image-based-installation-config.yaml";
const GNU_TIME: &str = "/usr/bin/time";

/// One side of the comparison: a command line that writes `out`.
struct Side {
    name: &'static str,
    argv: Vec<String>,
    out: PathBuf,
    times: Vec<Duration>,
    rss_kib: Vec<u64>,
}

fn main() {
    let iterations: usize = env_parse("ITERATIONS").unwrap_or(5).max(1);
    let iso_bytes: u64 = env_parse("ISO_BYTES").unwrap_or(GIB).max(GIB);
    let work = tempfile::Builder::new()
        .prefix("ibi-bench-create-image-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
    let dir = work.path();
    let fs_type = filesystem_type(dir);
    println!("work dir: {} ({fs_type})", dir.display());
    if fs_type != "ext4" {
        println!("note: not ext4; plain cp may reflink instead of copying");
    }

    let base = dir.join("big.iso");
    let written = SyntheticIso {
        pad_to: Some(iso_bytes),
        ..SyntheticIso::new(IgnitionLayout::WholeFile, true)
    }
    .write(std::io::BufWriter::new(
        std::fs::File::create(&base).expect("create ISO"),
    ))
    .expect("write ISO");
    assert_dense(&base);
    println!(
        "base ISO: {written} bytes ({:.2} GiB)",
        written as f64 / GIB as f64
    );

    let site = dir.join("site");
    std::fs::create_dir(&site).expect("mkdir site");
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        std::fs::read_to_string(manifest.join("seed-fixtures/example-install").join(CONFIG))
            .expect("read example config")
            .replace(
                "oci:seed-fixtures/seed:4.16.0",
                &format!(
                    "oci:{}:4.16.0",
                    manifest.join("seed-fixtures/seed").display()
                ),
            );
    std::fs::write(site.join(CONFIG), config).expect("write config");

    // Warm-up run of ibi (uncounted), whose config coreos-installer then embeds.
    let ibi_out = site.join("rhcos-ibi.iso");
    let ibi_argv = vec![
        env!("CARGO_BIN_EXE_ibi").to_string(),
        "create".into(),
        "image".into(),
        "--dir".into(),
        path_str(&site),
        "--base-iso".into(),
        path_str(&base),
    ];
    run_checked(&ibi_argv);
    let ign = dir.join("config.ign");
    let shown = Command::new(env!("CARGO_BIN_EXE_ibi"))
        .args(["inspect", "--ignition"])
        .arg(&ibi_out)
        .output()
        .expect("running ibi inspect");
    assert!(
        shown.status.success(),
        "ibi inspect failed: {}",
        String::from_utf8_lossy(&shown.stderr)
    );
    std::fs::write(&ign, &shown.stdout).expect("write config.ign");
    remove(&ibi_out);

    let cp_out = dir.join("cp.iso");
    let cp_sync_out = dir.join("cp-fsync.iso");
    let mut sides = vec![
        side(
            "cp",
            vec!["cp".into(), path_str(&base), path_str(&cp_out)],
            &cp_out,
        ),
        side(
            "cp+fsync",
            then_sync(
                vec!["cp".into(), path_str(&base), path_str(&cp_sync_out)],
                &cp_sync_out,
            ),
            &cp_sync_out,
        ),
        side("ibi", ibi_argv, &ibi_out),
    ];
    match coreos_installer() {
        Some(ci) => {
            let embed = |out: &Path| {
                vec![
                    path_str(&ci),
                    "iso".into(),
                    "ignition".into(),
                    "embed".into(),
                    "-i".into(),
                    path_str(&ign),
                    "-o".into(),
                    path_str(out),
                    path_str(&base),
                ]
            };
            let ci_out = dir.join("coreos-installer.iso");
            let ci_sync_out = dir.join("coreos-installer-fsync.iso");
            sides.push(side("coreos-installer", embed(&ci_out), &ci_out));
            sides.push(side(
                "coreos-installer+fsync",
                then_sync(embed(&ci_sync_out), &ci_sync_out),
                &ci_sync_out,
            ));
        }
        None => println!("SKIP: coreos-installer not found (ibi/coreos-installer not measured)"),
    }

    let have_time = Path::new(GNU_TIME).exists();
    if !have_time {
        println!("note: {GNU_TIME} missing (apt-get install time); peak RSS not measured");
    }
    // One uncounted warm-up of every other side.
    for s in sides.iter().filter(|s| s.name != "ibi") {
        run_side(s, have_time, dir);
    }
    for i in 0..iterations {
        let n = sides.len();
        for k in 0..n {
            let s = &mut sides[(i + k) % n];
            let (t, rss) = run_side(s, have_time, dir);
            s.times.push(t);
            s.rss_kib.extend(rss);
        }
    }
    report(&mut sides, iterations);
}

fn side(name: &'static str, argv: Vec<String>, out: &Path) -> Side {
    Side {
        name,
        argv,
        out: out.to_path_buf(),
        times: Vec::new(),
        rss_kib: Vec::new(),
    }
}

/// `sh -c 'out=$1; shift; "$@" && sync "$out"' sh OUT ARGV...`: the command, then an fsync of
/// OUT (coreutils `sync FILE` fsyncs that file).
fn then_sync(mut argv: Vec<String>, out: &Path) -> Vec<String> {
    let mut line = vec![
        "sh".into(),
        "-c".into(),
        r#"out=$1; shift; "$@" && sync "$out""#.into(),
        "sh".into(),
        path_str(out),
    ];
    line.append(&mut argv);
    line
}

/// One timed run: settle, run under GNU time if present, check, delete the output.
fn run_side(s: &Side, have_time: bool, dir: &Path) -> (Duration, Option<u64>) {
    remove(&s.out);
    let settled = Command::new("sync")
        .arg("-f")
        .arg(dir)
        .status()
        .expect("sync");
    assert!(settled.success(), "sync -f failed");
    let rss_file = dir.join("rss");
    let mut cmd = if have_time {
        let mut c = Command::new(GNU_TIME);
        c.args(["-f", "%M", "-o"]).arg(&rss_file).arg("--");
        c.args(&s.argv);
        c
    } else {
        let mut c = Command::new(&s.argv[0]);
        c.args(&s.argv[1..]);
        c
    };
    let start = Instant::now();
    let out = cmd.output().expect("spawning");
    let elapsed = start.elapsed();
    assert!(
        out.status.success(),
        "{} failed: {}",
        s.name,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_dense(&s.out);
    remove(&s.out);
    let rss = have_time.then(|| {
        let text = std::fs::read_to_string(&rss_file).expect("read rss");
        text.trim()
            .lines()
            .last()
            .unwrap_or("")
            .parse()
            .expect("GNU time %M")
    });
    (elapsed, rss)
}

/// At least 1 GiB, every byte allocated: a sparse or shared copy would make its side look cheap.
fn assert_dense(p: &Path) {
    let meta = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert!(
        meta.len() >= GIB,
        "{}: only {} bytes",
        p.display(),
        meta.len()
    );
    assert!(
        meta.blocks() * 512 >= meta.len(),
        "{}: sparse ({} of {} bytes allocated)",
        p.display(),
        meta.blocks() * 512,
        meta.len()
    );
}

fn run_checked(argv: &[String]) {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .expect("spawning");
    assert!(
        out.status.success(),
        "{} failed: {}",
        argv[0],
        String::from_utf8_lossy(&out.stderr)
    );
}

fn report(sides: &mut [Side], iterations: usize) {
    println!("iterations: {iterations}");
    println!(
        "{:<24} {:>10} {:>20} {:>14}",
        "side", "median ms", "range ms", "peak RSS MiB"
    );
    for s in sides.iter_mut() {
        let (lo, hi) = (s.times.iter().min().unwrap(), s.times.iter().max().unwrap());
        let rss = s
            .rss_kib
            .iter()
            .max()
            .map_or("n/a".to_string(), |k| format!("{:.1}", *k as f64 / 1024.0));
        let mut sorted = s.times.clone();
        println!(
            "{:<24} {:>10.0} {:>20} {:>14}",
            s.name,
            ms(median(&mut sorted)),
            format!("{:.0}..{:.0}", ms(*lo), ms(*hi)),
            rss
        );
    }
    let find = |name: &str| sides.iter().find(|s| s.name == name);
    let ibi = find("ibi").expect("ibi side");
    for reference in [
        "cp",
        "cp+fsync",
        "coreos-installer",
        "coreos-installer+fsync",
    ] {
        let Some(r) = find(reference) else {
            println!("ibi / {reference}: SKIP");
            continue;
        };
        let (mut a, mut b) = (ibi.times.clone(), r.times.clone());
        let ratio = median(&mut a).as_secs_f64() / median(&mut b).as_secs_f64();
        let per: Vec<f64> = ibi
            .times
            .iter()
            .zip(&r.times)
            .map(|(x, y)| x.as_secs_f64() / y.as_secs_f64())
            .collect();
        let (lo, hi) = per
            .iter()
            .fold((f64::MAX, 0f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
        println!(
            "ibi / {reference}: ratio of medians {ratio:.2}x (per iteration {lo:.2}x .. {hi:.2}x)"
        );
    }
}

fn coreos_installer() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("COREOS_INSTALLER") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo/bin/coreos-installer"));
    if let Some(p) = home.filter(|p| p.exists()) {
        return Some(p);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("coreos-installer"))
            .find(|p| p.exists())
    })
}

fn filesystem_type(dir: &Path) -> String {
    Command::new("findmnt")
        .args(["-n", "-o", "FSTYPE", "-T"])
        .arg(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or("unknown filesystem".to_string(), |o| {
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        })
}

fn remove(p: &Path) {
    match std::fs::remove_file(p) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("removing {}: {e}", p.display()),
    }
}

fn env_parse<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn path_str(p: &Path) -> String {
    p.to_str().expect("UTF-8 path").to_string()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
