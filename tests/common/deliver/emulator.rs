//! A real Redfish BMC: sushy-tools' `sushy-emulator` with its fake driver, Basic auth (bcrypt
//! htpasswd) and a self-signed certificate, on 127.0.0.1 and a free port, with a fresh state dir
//! and TMPDIR per emulator, stopped by PID. The venv is made once under `~/.cache/ibi/test-venv`
//! (`python3 -m venv` + `pip install sushy-tools`, bounded) and reused.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ibi::deliver::serve::tls::{Host, generate};

/// The version whose behaviour `shared/reference/redfish-test-bmc.md` records.
const SUSHY_TOOLS: &str = "sushy-tools==2.2.0";
const VENV_TIMEOUT: Duration = Duration::from_secs(600);
const START_TIMEOUT: Duration = Duration::from_secs(30);
pub const USER: &str = "admin";
pub const PASSWORD: &str = "emulator-pw-7f3a";
/// The fake driver's one system (reference: "Resources").
pub const SYSTEM_UUID: &str = "27946b59-9e44-4fa7-8e91-f3527a1ef094";

static VENV: Mutex<()> = Mutex::new(());

fn venv_dir() -> PathBuf {
    match std::env::var_os("IBI_TEST_VENV") {
        Some(p) => PathBuf::from(p),
        None => std::env::home_dir()
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
            .join(".cache/ibi/test-venv"),
    }
}

/// The venv's `sushy-emulator`, made if missing. `None` (with SKIP) outside CI when it cannot be
/// made; a failure in CI.
pub fn sushy_emulator(test: &str) -> Option<PathBuf> {
    let _once = VENV.lock().unwrap_or_else(|p| p.into_inner());
    let venv = venv_dir();
    let bin = venv.join("bin/sushy-emulator");
    if bin.is_file() {
        return Some(bin);
    }
    match make_venv(&venv) {
        Ok(()) => Some(bin),
        Err(e) => {
            crate::common::skip(test, &format!("no sushy-tools venv ({e})"));
            None
        }
    }
}

fn make_venv(venv: &Path) -> Result<(), String> {
    // A venv's scripts name their interpreter by absolute path, so it is made where it stays; a
    // half-made one (no sushy-emulator) is removed first.
    let _ = std::fs::remove_dir_all(venv);
    let made = run_bounded(Command::new("python3").args(["-m", "venv"]).arg(venv)).and_then(|()| {
        run_bounded(Command::new(venv.join("bin/pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            SUSHY_TOOLS,
        ]))
    });
    if made.is_err() {
        let _ = std::fs::remove_dir_all(venv);
    }
    made
}

fn run_bounded(cmd: &mut Command) -> Result<(), String> {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    let deadline = Instant::now() + VENV_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(s)) if s.success() => return Ok(()),
            Ok(Some(s)) => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut err);
                }
                return Err(format!("{cmd:?}: {s}: {err}"));
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{cmd:?}: no end within {VENV_TIMEOUT:?}"));
            }
        }
    }
}

/// A running emulator; stopped by PID when dropped.
pub struct Emulator {
    child: Option<Child>,
    bin: PathBuf,
    port: u16,
    pub url: String,
    pub cert: PathBuf,
    pub password_file: PathBuf,
    pub dir: tempfile::TempDir,
    /// Its one system's UUID.
    pub uuid: String,
}

impl Emulator {
    pub fn start(bin: &Path) -> Emulator {
        Emulator::start_with_uuid(bin, SYSTEM_UUID)
    }

    /// An emulator whose one fake system has `uuid`: a fleet test needs hosts told apart by it.
    pub fn start_with_uuid(bin: &Path, uuid: &str) -> Emulator {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        for sub in ["state", "tmp"] {
            std::fs::create_dir(d.join(sub)).expect("mkdir");
        }
        let hash = bcrypt::hash(PASSWORD, 4).expect("bcrypt");
        std::fs::write(d.join("htpasswd"), format!("{USER}:{hash}\n")).expect("htpasswd");
        std::fs::write(d.join("password"), format!("{PASSWORD}\n")).expect("password file");
        let (cert, key) = generate(&[Host::parse("127.0.0.1")]).expect("certificate");
        std::fs::write(d.join("cert.pem"), cert).expect("cert");
        std::fs::write(d.join("key.pem"), key).expect("key");
        std::fs::write(
            d.join("emulator.conf"),
            format!(
                "SUSHY_EMULATOR_AUTH_FILE = '{}'\nSUSHY_EMULATOR_STATE_DIR = '{}'\nSUSHY_EMULATOR_FAKE_DRIVER = True\n\
                 SUSHY_EMULATOR_FAKE_SYSTEMS = [{{'uuid': '{uuid}', 'name': 'fake', 'power_state': 'Off', \
                 'nics': [{{'mac': '00:5c:52:31:3a:9c', 'ip': '172.22.0.100'}}]}}]\n",
                d.join("htpasswd").display(),
                d.join("state").display()
            ),
        )
        .expect("config");
        let port = free_port();
        let mut emu = Emulator {
            child: None,
            bin: bin.to_path_buf(),
            port,
            url: format!("https://127.0.0.1:{port}"),
            cert: d.join("cert.pem"),
            password_file: d.join("password"),
            dir,
            uuid: uuid.to_string(),
        };
        emu.launch();
        emu
    }

    /// Starts the emulator process on its port and state (again, after [`Emulator::pause`]).
    fn launch(&mut self) {
        let d = self.dir.path();
        let log = |name: &str| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(d.join(name))
                .expect("log")
        };
        let child = Command::new(&self.bin)
            .args(["--fake", "-i", "127.0.0.1", "-p", &self.port.to_string()])
            .arg("--config")
            .arg(d.join("emulator.conf"))
            .arg("--ssl-certificate")
            .arg(d.join("cert.pem"))
            .arg("--ssl-key")
            .arg(d.join("key.pem"))
            .env("TMPDIR", d.join("tmp"))
            .stdout(Stdio::from(log("log")))
            .stderr(Stdio::from(log("log.err")))
            .spawn()
            .expect("starting sushy-emulator");
        self.child = Some(child);
        self.wait_ready();
    }

    /// The BMC goes away (its process stopped by PID); its state stays on disk for
    /// [`Emulator::resume`]: a BMC that is briefly down, as a real one is during a reset.
    pub fn pause(&mut self) {
        if let Some(mut c) = self.child.take() {
            super::stop_child(&mut c);
        }
    }

    /// The BMC back on the same address with the state it had.
    pub fn resume(&mut self) {
        if self.child.is_none() {
            self.launch();
        }
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if self.get("/redfish/v1/").is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "sushy-emulator did not answer within {START_TIMEOUT:?}: {}",
            self.log()
        );
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log.err")).unwrap_or_default()
    }

    /// GET with the right credentials, trusting the emulator's certificate.
    pub fn get(&self, path: &str) -> Option<serde_json::Value> {
        let pem = std::fs::read(&self.cert).ok()?;
        let client = reqwest::blocking::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(&pem).ok()?])
            .timeout(Duration::from_secs(10))
            .build()
            .ok()?;
        let r = client
            .get(format!("{}{path}", self.url))
            .basic_auth(USER, Some(PASSWORD))
            .send()
            .ok()?;
        if !r.status().is_success() {
            return None;
        }
        r.json().ok()
    }

    /// POST a JSON body with the right credentials; whether the emulator accepted it.
    pub fn post(&self, path: &str, body: &serde_json::Value) -> bool {
        let Ok(pem) = std::fs::read(&self.cert) else {
            return false;
        };
        let Some(client) = reqwest::Certificate::from_pem(&pem).ok().and_then(|c| {
            reqwest::blocking::Client::builder()
                .tls_certs_only([c])
                .timeout(Duration::from_secs(10))
                .build()
                .ok()
        }) else {
            return false;
        };
        client
            .post(format!("{}{path}", self.url))
            .basic_auth(USER, Some(PASSWORD))
            .json(body)
            .send()
            .is_ok_and(|r| r.status().is_success())
    }

    pub fn system(&self) -> serde_json::Value {
        self.get(&format!("/redfish/v1/Systems/{}", self.uuid))
            .expect("reading the system")
    }

    pub fn cd(&self) -> serde_json::Value {
        self.get(&format!(
            "/redfish/v1/Systems/{}/VirtualMedia/Cd",
            self.uuid
        ))
        .expect("reading the CD")
    }

    /// The copy of `name` the emulator downloaded during InsertMedia (it keeps it in TMPDIR).
    pub fn downloaded(&self, name: &str) -> Option<PathBuf> {
        let tmp = self.dir.path().join("tmp");
        let mut found: Vec<PathBuf> = std::fs::read_dir(&tmp)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join(name))
            .filter(|p| p.is_file())
            .collect();
        found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
        found.pop()
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            super::stop_child(&mut c);
        }
    }
}

/// A port free now on 127.0.0.1 (the emulator binds it itself a moment later).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    l.local_addr().expect("address").port()
}
