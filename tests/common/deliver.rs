//! Helpers for the `serve` and `boot` tests: a running `ibi serve` that stops itself, file hashes,
//! curl, and process control by PID with bounded waits.
#![allow(dead_code)]

pub mod emulator;
pub mod fleet;
pub mod host;
pub mod standin;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long `ibi serve` may take to hash its images and say it listens.
const SERVE_START: Duration = Duration::from_secs(120);
/// How long a stopped process may take to exit before it is killed.
const STOP_WAIT: Duration = Duration::from_secs(15);

/// A running `ibi serve`; stopped with SIGTERM (then SIGKILL) when dropped.
pub struct Served {
    child: Option<Child>,
    pub dir: PathBuf,
    pub address: String,
    pub stdout: String,
    stderr: PathBuf,
    _logs: tempfile::TempDir,
}

impl Served {
    /// Starts `ibi serve --dir DIR --listen 127.0.0.1:0 EXTRA…` and waits for "listening on".
    pub fn start(dir: &Path, extra: &[&str]) -> Served {
        Served::start_on(dir, "127.0.0.1:0", extra)
    }

    /// As [`Served::start`], listening on `listen` (a port fixed before the server starts, as a
    /// `statusURL` baked into an ISO needs).
    pub fn start_on(dir: &Path, listen: &str, extra: &[&str]) -> Served {
        let logs = tempfile::tempdir().expect("tempdir");
        let stderr = logs.path().join("stderr");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibi"));
        cmd.args([
            "serve",
            "--dir",
            dir.to_str().expect("utf-8"),
            "--listen",
            listen,
        ])
        .args(extra)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        let mut child = cmd.spawn().expect("starting ibi serve");
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut served = Served {
            child: Some(child),
            dir: dir.to_path_buf(),
            address: String::new(),
            stdout: String::new(),
            stderr,
            _logs: logs,
        };
        let deadline = Instant::now() + SERVE_START;
        while served.address.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some(a) = line.strip_prefix("listening on ") {
                        served.address = a.trim().to_string();
                    }
                    served.stdout.push_str(&line);
                    served.stdout.push('\n');
                }
                Err(_) => panic!(
                    "ibi serve did not start: stdout {:?} stderr {}",
                    served.stdout,
                    served.stderr()
                ),
            }
        }
        served
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// served.json's entry for `name`.
    pub fn entry(&self, name: &str) -> Value {
        let map: Value = serde_json::from_slice(
            &std::fs::read(self.dir.join(".ibi/served.json")).expect("served.json"),
        )
        .expect("json");
        map["images"]
            .as_array()
            .expect("images")
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in served.json: {map}"))
    }

    pub fn url(&self, name: &str) -> String {
        self.entry(name)["url"].as_str().expect("url").to_string()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Sends SIGTERM and returns the exit status (waiting at most STOP_WAIT, then SIGKILL).
    pub fn stop(&mut self) -> Option<std::process::ExitStatus> {
        self.child.take().map(|mut c| stop_child(&mut c))
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A port free on 127.0.0.1 right now (bound, then released), for a server that must be named before
/// it starts.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    l.local_addr().expect("local address").port()
}

/// SIGTERM, a bounded wait, then SIGKILL.
pub fn stop_child(c: &mut Child) -> std::process::ExitStatus {
    use rustix::process::{Pid, Signal, kill_process};
    let _ = kill_process(Pid::from_child(c), Signal::TERM);
    let deadline = Instant::now() + STOP_WAIT;
    loop {
        if let Ok(Some(status)) = c.try_wait() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = c.kill();
            return c.wait().expect("waiting for a killed child");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `ibi ARGS` with extra environment, bounded by the command's own --timeout.
pub fn ibi_env(args: &[&str], envs: &[(&str, &str)]) -> Output {
    // `IBI_TEST_BINARY` runs another build (to show a test failing on an older one).
    let bin =
        std::env::var_os("IBI_TEST_BINARY").unwrap_or_else(|| env!("CARGO_BIN_EXE_ibi").into());
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env_remove("RUST_LOG")
        .env_remove("IBI_BMC_PASSWORD")
        .env_remove("IBI_ISO_URL");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("running ibi")
}

pub fn sha256_file(p: &Path) -> String {
    let bytes = std::fs::read(p).expect("reading a file to hash");
    sha256(&bytes)
}

pub fn sha256(bytes: &[u8]) -> String {
    openssl::sha::sha256(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A file of `len` pseudo-random bytes (seeded, so two calls with one seed agree).
pub fn write_random(p: &Path, len: usize, seed: u64) {
    let mut x = seed | 1;
    let mut data = Vec::with_capacity(len);
    while data.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(len);
    std::fs::write(p, data).expect("writing a test file");
}

/// Replaces `p` the way ibi's writers do: a temp file beside it, renamed over it.
pub fn replace_atomically(p: &Path, len: usize, seed: u64) {
    let tmp = p.with_extension("rebuild.tmp");
    write_random(&tmp, len, seed);
    std::fs::rename(&tmp, p).expect("renaming the rebuild into place");
}

/// curl with a 120 s bound; returns (exit code, stdout).
pub fn curl(args: &[&str]) -> (i32, Vec<u8>) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "120"])
        .args(args)
        .output()
        .expect("running curl");
    (out.status.code().unwrap_or(-1), out.stdout)
}

/// Peak resident memory of a process, in KiB (VmHWM).
pub fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// The bundled example installation config with its seed path made absolute.
pub fn example_install(dir: &Path) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cfg = "image-based-installation-config.yaml";
    let text = std::fs::read_to_string(root.join("seed-fixtures/example-install").join(cfg))
        .expect("example config");
    let seed = root.join("seed-fixtures/seed");
    let text = text.replace(
        "oci:seed-fixtures/seed:4.16.0",
        &format!("oci:{}:4.16.0", seed.display()),
    );
    std::fs::write(dir.join(cfg), text).expect("writing the config");
}

pub fn synthetic_base() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/coreos-live-synthetic.iso")
}
