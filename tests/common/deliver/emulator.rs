//! A real Redfish BMC: sushy-tools' `sushy-emulator` with its fake driver, Basic auth (bcrypt
//! htpasswd) and a self-signed certificate, on 127.0.0.1 and a free port, with a fresh state dir
//! and TMPDIR per emulator, stopped by PID. The venv is made once under `~/.cache/ibi/test-venv`
//! (`python3 -m venv` + `pip install sushy-tools`, bounded) and reused.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ibi::deliver::serve::tls::{Host, generate};

/// The version whose behaviour `shared/reference/redfish-test-bmc.md` records.
const SUSHY_TOOLS: &str = "sushy-tools==2.2.0";
/// The WSGI server that keeps connections alive (`--no-control-socket` needs 24 or later).
const GUNICORN: &str = "gunicorn==27.0.1";
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

/// The venv's `sushy-emulator`, made if missing; the test fails when it cannot be made.
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
            crate::common::missing(test, &format!("no sushy-tools venv ({e})"));
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
    /// `--fake` on the command line (the fake driver); the libvirt driver's config has no flag.
    fake: bool,
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
        let system = format!(
            "{{'uuid': '{uuid}', 'name': 'fake', 'power_state': 'Off', \
             'nics': [{{'mac': '00:5c:52:31:3a:9c', 'ip': '172.22.0.100'}}]}}"
        );
        Emulator::start_systems(bin, uuid, &system)
    }

    /// One emulator process serving many fake systems (`SUSHY_EMULATOR_FAKE_SYSTEMS`), as a lab
    /// stands one BMC per host behind one address: `uuids` in order, named `host-N`. `uuid` (the
    /// struct's) is the first's.
    pub fn start_many(bin: &Path, uuids: &[String]) -> Emulator {
        let systems: Vec<String> = uuids
            .iter()
            .enumerate()
            .map(|(i, u)| {
                format!("{{'uuid': '{u}', 'name': 'host-{i}', 'power_state': 'Off', 'nics': []}}")
            })
            .collect();
        Emulator::start_systems(bin, &uuids[0], &systems.join(", "))
    }

    fn start_systems(bin: &Path, uuid: &str, systems: &str) -> Emulator {
        Emulator::start_config(
            bin,
            uuid,
            true,
            &format!(
                "SUSHY_EMULATOR_FAKE_DRIVER = True\nSUSHY_EMULATOR_FAKE_SYSTEMS = [{systems}]\n"
            ),
        )
    }

    /// The emulator with its libvirt driver (the lab's BMC, tests/common/lab.rs): `config` holds the
    /// driver's settings (URI, storage pool, allowed domain, boot-loader map); `uuid` is the domain's.
    pub fn start_libvirt(bin: &Path, uuid: &str, config: &str) -> Emulator {
        Emulator::start_config(bin, uuid, false, config)
    }

    fn start_config(bin: &Path, uuid: &str, fake: bool, driver: &str) -> Emulator {
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
                "SUSHY_EMULATOR_AUTH_FILE = '{}'\nSUSHY_EMULATOR_STATE_DIR = '{}'\n{driver}",
                d.join("htpasswd").display(),
                d.join("state").display()
            ),
        )
        .expect("config");
        let port = free_port();
        let mut emu = Emulator {
            child: None,
            bin: bin.to_path_buf(),
            fake,
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

    /// The same emulator served by gunicorn (`gunicorn`, from [`gunicorn`]), as sushy-tools'
    /// docs offer, instead of its built-in Werkzeug server, which closes every connection after
    /// one answer: gunicorn's threaded worker keeps connections alive (5 s idle, the Apache
    /// default), as a BMC's web server does.
    pub fn start_kept_alive(gunicorn: &Path) -> Emulator {
        Emulator::start_with_uuid(gunicorn, SYSTEM_UUID)
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
        let mut cmd = Command::new(&self.bin);
        if self.bin.ends_with("gunicorn") {
            cmd.args(["-b", &format!("127.0.0.1:{}", self.port)])
                .args(["-k", "gthread", "--threads", "4", "--keep-alive", "5"])
                .args(["--graceful-timeout", "1", "--no-control-socket"])
                .args(["--access-logfile", "-"])
                .arg("--certfile")
                .arg(d.join("cert.pem"))
                .arg("--keyfile")
                .arg(d.join("key.pem"))
                .arg("sushy_tools.emulator.main:app")
                .env("SUSHY_EMULATOR_CONFIG", d.join("emulator.conf"));
        } else {
            if self.fake {
                cmd.arg("--fake");
            }
            cmd.args(["-i", "127.0.0.1", "-p", &self.port.to_string()])
                .arg("--config")
                .arg(d.join("emulator.conf"))
                .arg("--ssl-certificate")
                .arg(d.join("cert.pem"))
                .arg("--ssl-key")
                .arg(d.join("key.pem"));
        }
        let child = cmd
            .env("TMPDIR", d.join("tmp"))
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
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
        self.send(reqwest::Method::POST, path, body)
    }

    /// PATCH a JSON body with the right credentials; whether the emulator accepted it.
    pub fn patch(&self, path: &str, body: &serde_json::Value) -> bool {
        self.send(reqwest::Method::PATCH, path, body)
    }

    fn send(&self, method: reqwest::Method, path: &str, body: &serde_json::Value) -> bool {
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
            .request(method, format!("{}{path}", self.url))
            .basic_auth(USER, Some(PASSWORD))
            .json(body)
            .send()
            .is_ok_and(|r| r.status().is_success())
    }

    /// `host:port`, for a proxy in front of it.
    pub fn address(&self) -> &str {
        self.url.trim_start_matches("https://")
    }

    /// The requests the emulator has answered so far, as `METHOD /path`, from its access log
    /// (Werkzeug's: `127.0.0.1 - - [date] "GET /redfish/v1/ HTTP/1.1" 200 -`).
    /// Gunicorn's go to its stdout, `… "GET /redfish/v1/ HTTP/1.1" 200 888 "-" "ibi/0.1.0"`;
    /// Werkzeug colours the request of an answer other than 200, which is taken off.
    pub fn requests(&self) -> Vec<String> {
        let stdout = std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default();
        format!("{}\n{stdout}", self.log())
            .lines()
            .filter_map(|l| {
                let quoted = strip_ansi(l.split('"').nth(1)?);
                let mut parts = quoted.split(' ');
                let (method, path) = (parts.next()?, parts.next()?);
                parts
                    .next()?
                    .starts_with("HTTP/")
                    .then(|| format!("{method} {path}"))
            })
            .collect()
    }

    pub fn system(&self) -> serde_json::Value {
        self.get(&format!("/redfish/v1/Systems/{}", self.uuid))
            .expect("reading the system")
    }

    pub fn cd(&self) -> serde_json::Value {
        self.cd_of(&self.uuid).expect("reading the CD")
    }

    /// The virtual CD of the system `uuid` (of an emulator with many).
    pub fn cd_of(&self, uuid: &str) -> Option<serde_json::Value> {
        self.get(&format!("/redfish/v1/Systems/{uuid}/VirtualMedia/Cd"))
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

/// `text` without its ANSI colour sequences (`ESC [ … m`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The venv's `gunicorn` (sushy-tools' documented WSGI server), installed into the emulator's
/// venv if missing; the test fails when it cannot be.
pub fn gunicorn(test: &str) -> Option<PathBuf> {
    sushy_emulator(test)?;
    let _once = VENV.lock().unwrap_or_else(|p| p.into_inner());
    let venv = venv_dir();
    let bin = venv.join("bin/gunicorn");
    if bin.is_file() {
        return Some(bin);
    }
    match run_bounded(Command::new(venv.join("bin/pip")).args([
        "install",
        "--quiet",
        "--disable-pip-version-check",
        GUNICORN,
    ])) {
        Ok(()) => Some(bin),
        Err(e) => {
            crate::common::missing(test, &format!("no gunicorn in the venv ({e})"));
            None
        }
    }
}

/// A port free now on 127.0.0.1 (the emulator binds it itself a moment later).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    l.local_addr().expect("address").port()
}

/// A TCP proxy in front of the emulator, counting the connections a client makes through it. With
/// `drop_idle`, it also plays a BMC whose keep-alive timeout fires just as a request arrives: the
/// first bytes a client sends on a connection quiet for that long are not forwarded, and the
/// connection is closed. Its threads stop when it is dropped (the accept loop) or when either side
/// closes (the pumps).
pub struct Proxy {
    pub url: String,
    accepted: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(target: &str, drop_idle: Option<Duration>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the proxy");
        let url = format!("https://{}", listener.local_addr().expect("address"));
        listener.set_nonblocking(true).expect("nonblocking");
        let (accepted, dropped, stop) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (a, d, st, target) = (
            accepted.clone(),
            dropped.clone(),
            stop.clone(),
            target.to_string(),
        );
        std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        a.fetch_add(1, Ordering::SeqCst);
                        let _ = client.set_nonblocking(false);
                        if let Ok(upstream) = TcpStream::connect(&target) {
                            relay(client, upstream, drop_idle, d.clone());
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Proxy {
            url,
            accepted,
            dropped,
            stop,
        }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections closed for having been idle when the client sent again.
    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Copies both ways on two threads, minding when either side last sent.
fn relay(
    client: TcpStream,
    upstream: TcpStream,
    drop_idle: Option<Duration>,
    dropped: Arc<AtomicUsize>,
) {
    let last = Arc::new(Mutex::new(Instant::now()));
    let (Ok(c2), Ok(u2)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let back_last = last.clone();
    std::thread::spawn(move || pump(u2, c2, &back_last, None, &AtomicUsize::new(0)));
    std::thread::spawn(move || pump(client, upstream, &last, drop_idle, &dropped));
}

fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    last: &Mutex<Instant>,
    drop_idle: Option<Duration>,
    dropped: &AtomicUsize,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut since = last.lock().unwrap_or_else(|p| p.into_inner());
        if drop_idle.is_some_and(|idle| since.elapsed() >= idle) {
            dropped.fetch_add(1, Ordering::SeqCst);
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
        *since = Instant::now();
        drop(since);
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
