//! What the tests of tests/fast/crash_safety.rs and tests/root/crash_safety.rs share: one file of
//! tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common;
use crate::common::*;
use ibi::iso9660::IsoReader;
use ibi::live_iso::synthetic::{IgnitionLayout, SyntheticIso};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub(crate) const KILLS: usize = 20;
pub(crate) const EPOCH: &str = "1700000000";
pub(crate) const CONFIG_OUTPUTS: [&str; 3] = [
    "imagebasedconfig.iso",
    "auth/kubeconfig",
    "auth/kubeadmin-password",
];
pub(crate) const INSTALL_CONFIG: &str = "image-based-installation-config.yaml";
/// Big enough that copying and syncing the installation ISO takes a while to kill into.
pub(crate) const BASE_ISO_SIZE: u64 = 96 << 20;

/// A small deterministic generator (xorshift64*): the kill moments of a run can be replayed.
pub(crate) struct Delays(pub(crate) u64);

impl Delays {
    pub(crate) fn next_below(&mut self, bound: Duration) -> Duration {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let nanos = bound.as_nanos().max(1) as u64;
        Duration::from_nanos(r % nanos)
    }
}

pub(crate) fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibi"));
    cmd.args(args)
        .env("SOURCE_DATE_EPOCH", EPOCH)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

pub(crate) fn run_ok(args: &[&str]) -> Duration {
    let started = Instant::now();
    let out = command(args).output().expect("running ibi");
    assert_ok(&out);
    started.elapsed()
}

/// Starts `ibi ARGS` and kills it after `delay` (if it is still running). True when it was killed.
pub(crate) fn kill_after(args: &[&str], delay: Duration) -> bool {
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
pub(crate) fn temp_files(dir: &Path) -> Vec<PathBuf> {
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
pub(crate) fn assert_absent_or_reference(
    dir: &Path,
    reference: &Path,
    outputs: &[&str],
    when: &str,
) {
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
pub(crate) fn assert_config_iso_valid(dir: &Path) {
    let iso = dir.join("imagebasedconfig.iso");
    let mut reader = IsoReader::open(fs::File::open(&iso).unwrap()).expect("a readable ISO");
    let manifest = reader
        .read_file("cluster-configuration/manifest.json")
        .expect("manifest.json");
    serde_json::from_slice::<serde_json::Value>(&manifest).expect("manifest.json parses");
}

/// A site for `create image` with the bundled example config and a big synthetic base ISO.
pub(crate) fn image_site(base_dir: &Path) -> (tempfile::TempDir, PathBuf) {
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

pub(crate) fn create_image_args<'a>(site: &'a str, base: &'a str) -> [&'a str; 6] {
    ["create", "image", "--dir", site, "--base-iso", base]
}

/// A small ext4 filesystem on a loop device, unmounted when dropped.
pub(crate) struct SmallFs {
    pub(crate) dir: tempfile::TempDir,
}

impl SmallFs {
    /// `size` bytes of ext4, mounted.
    pub(crate) fn new(size: u64) -> Option<SmallFs> {
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
    pub(crate) fn fill(&self, free: u64) {
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

    pub(crate) fn mnt(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    pub(crate) fn available(&self) -> u64 {
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

pub(crate) fn assert_disk_full(out: &Output, dir: &Path, outputs: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    for o in outputs {
        assert!(!dir.join(o).exists(), "{o} written on a full disk");
    }
    assert!(temp_files(dir).is_empty(), "{:?}", temp_files(dir));
}

/// Starts `ibi ARGS`, waits (bounded) until a temp output appears under `dir`, then sends `sig`.
/// `None` when the run ended before a temp file was seen.
pub(crate) fn signal_mid_write(
    args: &[&str],
    dir: &Path,
    sig: rustix::process::Signal,
) -> Option<Output> {
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
