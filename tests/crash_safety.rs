//! Crash safety of the outputs (issue 5 item 4): `ibi create config-image` and `ibi create image` are
//! killed with SIGKILL at random moments, at least 20 times each. After every kill each final output
//! path holds nothing or a complete, valid result (byte for byte the result of an uninterrupted run:
//! both commands are deterministic for fixed inputs, identity and SOURCE_DATE_EPOCH), never a partial
//! file; the temp files a kill leaves are removed by the next run. A full filesystem (a small ext4 on a
//! loop device) gives a clear error and no output. SIGINT and SIGTERM remove the temp output at once,
//! print one line ("interrupted; nothing was written", or a batch's summary so far) and exit 130/143.
//!
//! The delays come from a fixed-seed generator spread over the measured length of one run, so a
//! failure can be reproduced. The disk-full cases need root (mount); elsewhere they print SKIP, and
//! under `CI` (which runs as root) they must run.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use ibi::iso9660::IsoReader;
use ibi::live_iso::synthetic::{IgnitionLayout, SyntheticIso};

const KILLS: usize = 20;
const EPOCH: &str = "1700000000";
const CONFIG_OUTPUTS: [&str; 3] = [
    "imagebasedconfig.iso",
    "auth/kubeconfig",
    "auth/kubeadmin-password",
];
const INSTALL_CONFIG: &str = "image-based-installation-config.yaml";
/// Big enough that copying and syncing the installation ISO takes a while to kill into.
const BASE_ISO_SIZE: u64 = 96 << 20;

/// A small deterministic generator (xorshift64*): the kill moments of a run can be replayed.
struct Delays(u64);

impl Delays {
    fn next_below(&mut self, bound: Duration) -> Duration {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let nanos = bound.as_nanos().max(1) as u64;
        Duration::from_nanos(r % nanos)
    }
}

fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibi"));
    cmd.args(args)
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

fn run_ok(args: &[&str]) -> Duration {
    let started = Instant::now();
    let out = command(args).output().expect("running ibi");
    assert_ok(&out);
    started.elapsed()
}

/// Starts `ibi ARGS` and kills it after `delay` (if it is still running). True when it was killed.
fn kill_after(args: &[&str], delay: Duration) -> bool {
    let mut child = command(args)
        .stderr(Stdio::null())
        .spawn()
        .expect("starting ibi");
    std::thread::sleep(delay);
    let killed = matches!(child.try_wait(), Ok(None));
    if killed {
        child.kill().expect("SIGKILL");
    }
    child.wait().expect("reaping ibi");
    killed
}

/// Temp files (`.<name>.<pid>.<random>.tmp`) anywhere under `dir`.
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else if e.file_name().to_string_lossy().ends_with(".tmp") {
                found.push(p);
            }
        }
    }
    found
}

/// Each output is absent or byte-identical to the reference run's.
fn assert_absent_or_reference(dir: &Path, reference: &Path, outputs: &[&str], when: &str) {
    for out in outputs {
        let (got, want) = (dir.join(out), reference.join(out));
        if got.exists() {
            assert!(
                fs::read(&got).unwrap() == fs::read(&want).unwrap(),
                "{out} is neither absent nor the complete result ({when})"
            );
        }
    }
}

/// The configuration ISO of `dir` reads back with its manifest.
fn assert_config_iso_valid(dir: &Path) {
    let iso = dir.join("imagebasedconfig.iso");
    let mut reader = IsoReader::open(fs::File::open(&iso).unwrap()).expect("a readable ISO");
    let manifest = reader
        .read_file("cluster-configuration/manifest.json")
        .expect("manifest.json");
    serde_json::from_slice::<serde_json::Value>(&manifest).expect("manifest.json parses");
}

#[test]
fn config_image_killed_at_random_moments_never_leaves_a_partial_output() {
    let reference = copy_example();
    let dir = copy_example();
    // The identity must be the same for both runs to agree byte for byte: share it.
    let d = dir.path().to_str().unwrap().to_string();
    run_ok(&["create", "config-image", "--dir", &d]);
    // Later runs reuse the identity (no key generation): time one of those.
    let length = run_ok(&["create", "config-image", "--dir", &d]);
    for f in CONFIG_OUTPUTS {
        let to = reference.path().join(f);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(dir.path().join(f), to).unwrap();
    }
    assert_config_iso_valid(dir.path());

    let mut delays = Delays(0x1b1_c0ff_ee00_0001);
    let mut killed = 0;
    let mut attempts = 0;
    while killed < KILLS {
        attempts += 1;
        assert!(attempts < KILLS * 10, "runs end before the kill too often");
        if kill_after(
            &["create", "config-image", "--dir", &d],
            delays.next_below(length),
        ) {
            killed += 1;
        }
        assert_absent_or_reference(
            dir.path(),
            reference.path(),
            &CONFIG_OUTPUTS,
            &format!("after kill {killed}"),
        );
    }
    run_ok(&["create", "config-image", "--dir", &d]);
    assert_absent_or_reference(
        dir.path(),
        reference.path(),
        &CONFIG_OUTPUTS,
        "after a clean run",
    );
    assert!(
        temp_files(dir.path()).is_empty(),
        "a clean run leaves no temp file: {:?}",
        temp_files(dir.path())
    );
}

#[test]
fn config_image_killed_on_a_fresh_site_leaves_nothing_or_valid_files() {
    let mut delays = Delays(0x5eed_0000_0002);
    let probe = copy_example();
    let length = run_ok(&[
        "create",
        "config-image",
        "--dir",
        probe.path().to_str().unwrap(),
    ]);
    let mut killed = 0;
    while killed < 5 {
        let dir = copy_example();
        let d = dir.path().to_str().unwrap();
        if !kill_after(
            &["create", "config-image", "--dir", d],
            delays.next_below(length),
        ) {
            continue;
        }
        killed += 1;
        if dir.path().join("imagebasedconfig.iso").exists() {
            assert_config_iso_valid(dir.path());
        }
        // The next run finishes the job and sweeps what the killed one left.
        run_ok(&["create", "config-image", "--dir", d]);
        assert_config_iso_valid(dir.path());
        assert!(
            temp_files(dir.path()).is_empty(),
            "{:?}",
            temp_files(dir.path())
        );
    }
}

/// A site for `create image` with the bundled example config and a big synthetic base ISO.
fn image_site(base_dir: &Path) -> (tempfile::TempDir, PathBuf) {
    let site = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = fs::read_to_string(
        root.join("seed-fixtures/example-install")
            .join(INSTALL_CONFIG),
    )
    .unwrap()
    .replace(
        "oci:seed-fixtures/seed:4.16.0",
        &format!("oci:{}:4.16.0", root.join("seed-fixtures/seed").display()),
    );
    fs::write(site.path().join(INSTALL_CONFIG), text).unwrap();
    let base = base_dir.join("base.iso");
    if !base.exists() {
        let iso = SyntheticIso {
            pad_to: Some(BASE_ISO_SIZE),
            ..SyntheticIso::new(IgnitionLayout::WholeFile, true)
        };
        iso.write(fs::File::create(&base).unwrap()).unwrap();
    }
    (site, base)
}

fn create_image_args<'a>(site: &'a str, base: &'a str) -> [&'a str; 6] {
    ["create", "image", "--dir", site, "--base-iso", base]
}

#[test]
fn create_image_killed_at_random_moments_never_leaves_a_partial_output() {
    let bases = tempfile::tempdir().unwrap();
    let (reference, base) = image_site(bases.path());
    let (site, _) = image_site(bases.path());
    let b = base.to_str().unwrap();
    let r = reference.path().to_str().unwrap();
    let s = site.path().to_str().unwrap();
    let length = run_ok(&create_image_args(r, b));

    let mut delays = Delays(0x150_0000_0003);
    let mut killed = 0;
    let mut attempts = 0;
    let mut mid_write = 0;
    while killed < KILLS {
        attempts += 1;
        assert!(attempts < KILLS * 10, "runs end before the kill too often");
        if kill_after(&create_image_args(s, b), delays.next_below(length)) {
            killed += 1;
            // A kill while the ISO was being written leaves its temp file behind.
            mid_write += usize::from(!temp_files(site.path()).is_empty());
        }
        assert_absent_or_reference(
            site.path(),
            reference.path(),
            &["rhcos-ibi.iso"],
            &format!("after kill {killed}"),
        );
    }
    assert!(
        mid_write >= KILLS / 4,
        "only {mid_write} of {KILLS} kills hit the write of the ISO"
    );
    run_ok(&create_image_args(s, b));
    assert_absent_or_reference(
        site.path(),
        reference.path(),
        &["rhcos-ibi.iso"],
        "clean run",
    );
    assert!(site.path().join("rhcos-ibi.iso").exists());
    assert!(
        temp_files(site.path()).is_empty(),
        "stale temp files after a clean run: {:?}",
        temp_files(site.path())
    );
}

/// A small ext4 filesystem on a loop device, unmounted when dropped.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    /// `size` bytes of ext4, mounted.
    fn new(size: u64) -> Option<SmallFs> {
        if !common::require_root("disk-full test") {
            return None;
        }
        if !tool("mkfs.ext4", "disk-full test") {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("fs.img");
        fs::File::create(&img).unwrap().set_len(size).unwrap();
        run_tool("mkfs.ext4", &["-q", "-F", "-m", "0", img.to_str().unwrap()]);
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).unwrap();
        run_tool(
            "mount",
            &["-o", "loop", img.to_str().unwrap(), mnt.to_str().unwrap()],
        );
        Some(SmallFs { dir })
    }

    /// Takes all but about `free` bytes with a filler file.
    fn fill(&self, free: u64) {
        let avail = self.available();
        if avail > free {
            let filler = self.mnt().join("filler");
            let f = fs::File::create(&filler).unwrap();
            // Real blocks, not a sparse file: the space must be used.
            let mut left = avail - free;
            let block = vec![0u8; 1 << 20];
            use std::io::Write;
            let mut w = std::io::BufWriter::new(f);
            while left > 0 {
                let n = left.min(block.len() as u64) as usize;
                w.write_all(&block[..n]).unwrap();
                left -= n as u64;
            }
            w.into_inner().unwrap().sync_all().unwrap();
        }
    }

    fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    fn available(&self) -> u64 {
        let out = run_tool(
            "df",
            &["--output=avail", "-B1", self.mnt().to_str().unwrap()],
        );
        out.lines().nth(1).unwrap().trim().parse().unwrap()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.mnt()).status();
    }
}

fn assert_disk_full(out: &Output, dir: &Path, outputs: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    for o in outputs {
        assert!(!dir.join(o).exists(), "{o} written on a full disk");
    }
    assert!(temp_files(dir).is_empty(), "{:?}", temp_files(dir));
}

#[test]
fn config_image_on_a_full_disk_fails_cleanly() {
    let Some(small) = SmallFs::new(16 << 20) else {
        return;
    };
    let inputs = copy_example();
    let site = small.mnt().join("site");
    copy_tree(inputs.path(), &site);
    small.fill(48 << 10);
    let out = command(&["create", "config-image", "--dir", site.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("imagebasedconfig.iso")
            || stderr.contains("identity.json")
            || stderr.contains("kubeconfig"),
        "the error names the file: {stderr}"
    );
    assert_disk_full(&out, &site, &CONFIG_OUTPUTS);
}

#[test]
fn create_image_on_a_full_disk_fails_cleanly() {
    let Some(small) = SmallFs::new(16 << 20) else {
        return;
    };
    small.fill(1 << 20);
    let bases = tempfile::tempdir().unwrap();
    let (template, base) = image_site(bases.path());
    let site = small.mnt().join("site");
    fs::create_dir(&site).unwrap();
    fs::copy(
        template.path().join(INSTALL_CONFIG),
        site.join(INSTALL_CONFIG),
    )
    .unwrap();
    let out = command(&[
        "create",
        "image",
        "--dir",
        site.to_str().unwrap(),
        "--base-iso",
        base.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("rhcos-ibi.iso"),
        "the error names the file: {stderr}"
    );
    assert_disk_full(&out, &site, &["rhcos-ibi.iso"]);
}

/// Starts `ibi ARGS`, waits (bounded) until a temp output appears under `dir`, then sends `sig`.
/// `None` when the run ended before a temp file was seen.
fn signal_mid_write(args: &[&str], dir: &Path, sig: rustix::process::Signal) -> Option<Output> {
    let mut child = command(args).spawn().expect("starting ibi");
    let deadline = Instant::now() + Duration::from_secs(120);
    while temp_files(dir).is_empty() {
        if !matches!(child.try_wait(), Ok(None)) || Instant::now() > deadline {
            child.kill().ok();
            child.wait_with_output().expect("reaping ibi");
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, sig).expect("signalling ibi");
    Some(child.wait_with_output().expect("reaping ibi"))
}

#[test]
fn create_image_on_sigint_or_sigterm_removes_its_temp_file_says_so_and_exits_130_or_143() {
    use rustix::process::Signal;
    let bases = tempfile::tempdir().unwrap();
    for (sig, code) in [(Signal::INT, 130), (Signal::TERM, 143)] {
        let (site, base) = image_site(bases.path());
        let args = create_image_args(site.path().to_str().unwrap(), base.to_str().unwrap());
        let out = (0..5)
            .find_map(|_| signal_mid_write(&args, site.path(), sig))
            .expect("the ISO's temp file was never seen");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if site.path().join("rhcos-ibi.iso").exists() {
            // The signal came just after the rename: the output is complete and the line says so.
            assert!(stderr.contains("written completely"), "{stderr}");
            fs::remove_file(site.path().join("rhcos-ibi.iso")).unwrap();
        } else {
            let last = stderr.lines().last().unwrap_or_default();
            assert_eq!(last, "interrupted; nothing was written", "{stderr}");
        }
        assert_eq!(out.status.code(), Some(code), "{sig:?}: {stderr}");
        assert!(
            temp_files(site.path()).is_empty(),
            "{sig:?} left {:?}",
            temp_files(site.path())
        );
    }
}

#[test]
fn an_interrupted_batch_prints_its_summary_so_far_and_leaves_no_temp_files() {
    let fleet = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("seed-fixtures/example-fleet");
    for f in [
        "install-config.yaml",
        "image-based-config.yaml",
        "sites.yaml",
    ] {
        fs::copy(src.join(f), fleet.path().join(f)).unwrap();
    }
    copy_tree(
        &src.join("extra-manifests"),
        &fleet.path().join("extra-manifests"),
    );
    let dir = fleet.path().to_str().unwrap();
    let inventory = fleet.path().join("sites.yaml");
    let inventory = inventory.to_str().unwrap();
    let args = ["create", "config-image", "--dir", dir, "--sites", inventory];
    let out = (0..5)
        .find_map(|_| signal_mid_write(&args, fleet.path(), rustix::process::Signal::INT))
        .expect("no temp file was ever seen");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let line = stderr.lines().last().unwrap_or_default();
    assert!(
        line.starts_with("interrupted; ") && line.contains(" of 3 sites done: "),
        "{stderr}"
    );
    let left = temp_files(fleet.path());
    assert!(left.is_empty(), "left {left:?}: {stderr}");
}
