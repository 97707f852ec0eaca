//! Benchmark: one `ibi create config-image` run (the release binary, fresh site, so all crypto is
//! generated) against the serial crypto floor measured in the same invocation: five RSA-2048 key
//! generations plus one bcrypt at cost 10, one after another on one core. Runs alternate so machine
//! noise hits both sides alike. Target: median ratio ≤ 1.0, which only parallel key generation
//! and no wasted work reach. Results go to docs/performance.md by hand.
//!
//! Run: `cargo bench --bench config_image` (ITERATIONS env var, default 15).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark: a panic is how it fails

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn main() {
    let iterations: usize = std::env::var("ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/example-site");
    let mut floors = Vec::with_capacity(iterations);
    let mut runs = Vec::with_capacity(iterations);
    // One warm-up of each side (page cache, lazy OpenSSL init) that is not counted.
    serial_floor();
    one_run(&example);
    for _ in 0..iterations {
        floors.push(serial_floor());
        runs.push(one_run(&example));
    }
    let (f, r) = (median(&mut floors), median(&mut runs));
    let ratios: Vec<f64> = runs
        .iter()
        .zip(&floors)
        .map(|(r, f)| r.as_secs_f64() / f.as_secs_f64())
        .collect();
    println!("iterations: {iterations}");
    println!(
        "serial crypto floor (5x RSA-2048 + bcrypt 10): median {:.1} ms",
        ms(f)
    );
    println!(
        "config-image run (fresh site, release binary):  median {:.1} ms",
        ms(r)
    );
    println!(
        "ratio of medians: {:.2}x",
        r.as_secs_f64() / f.as_secs_f64()
    );
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, 0f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
    println!("per-iteration ratio range: {lo:.2}x .. {hi:.2}x");
}

fn serial_floor() -> Duration {
    let start = Instant::now();
    for _ in 0..5 {
        let key = openssl::rsa::Rsa::generate(2048).expect("RSA keygen");
        std::hint::black_box(key);
    }
    let hash = bcrypt::hash("benchmark-password-12345", 10).expect("bcrypt");
    std::hint::black_box(hash);
    start.elapsed()
}

fn one_run(example: &Path) -> Duration {
    let site = tempfile::tempdir().expect("tempdir");
    copy_inputs(example, site.path());
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_ibi"))
        .args(["create", "config-image", "--dir"])
        .arg(site.path())
        .output()
        .expect("running ibi");
    let elapsed = start.elapsed();
    assert!(
        out.status.success(),
        "ibi failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    elapsed
}

fn copy_inputs(from: &Path, to: &Path) {
    for f in ["install-config.yaml", "image-based-config.yaml"] {
        std::fs::copy(from.join(f), to.join(f)).expect("copy input");
    }
    let em = to.join("extra-manifests");
    std::fs::create_dir(&em).expect("mkdir");
    for e in std::fs::read_dir(from.join("extra-manifests")).expect("read_dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), em.join(e.file_name())).expect("copy manifest");
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
