//! A small Redfish stand-in for the layout sushy-tools does not have: **Dell iDRAC 9**, whose
//! virtual media sits under the manager (`/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD`,
//! next to a `RemovableDisk` slot that takes no CD), whose system links no `VirtualMedia`, which
//! logs in through the SessionService (`X-Auth-Token`) and answers the insert with 202 and a task.
//! PATCHes must carry the system's ETag in `If-Match` (428 without, 412 when stale), as on Lenovo
//! XCC and iDRAC10. It downloads the inserted image, as a BMC does, so the test can check the bytes.
//! Plain HTTP on 127.0.0.1, one thread per connection, `Connection: close`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

pub const USER: &str = "root";
pub const PASSWORD: &str = "calvin-standin";
const TOKEN: &str = "standin-session-token-0123456789";
const SYSTEM: &str = "/redfish/v1/Systems/System.Embedded.1";
const MANAGER: &str = "/redfish/v1/Managers/iDRAC.Embedded.1";
const CD: &str = "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/CD";
const DISK: &str = "/redfish/v1/Managers/iDRAC.Embedded.1/VirtualMedia/RemovableDisk";
const TASK: &str = "/redfish/v1/TaskService/Tasks/JID_001";

/// What the stand-in saw and holds.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub power: String,
    pub boot: Value,
    pub image: Option<String>,
    pub inserted: bool,
    /// sha256 of the bytes it downloaded on insert.
    pub downloaded_sha256: Option<String>,
    pub etag_generation: u32,
    pub patches_without_if_match: u32,
    pub sessions_deleted: u32,
    pub basic_auth_used: bool,
    pub calls: Vec<String>,
}

pub struct StandIn {
    pub url: String,
    pub state: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StandIn {
    pub fn start() -> StandIn {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the stand-in");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        listener.set_nonblocking(true).expect("nonblocking");
        let state = Arc::new(Mutex::new(Seen {
            power: "On".into(),
            boot: json!({"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
                         "BootSourceOverrideMode": "UEFI",
                         "BootSourceOverrideTarget@Redfish.AllowableValues": ["None", "Pxe", "Cd", "Hdd"]}),
            ..Seen::default()
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        let thread = std::thread::spawn(move || accept_loop(listener, st, sp));
        StandIn {
            url,
            state,
            stop,
            thread: Some(thread),
        }
    }

    pub fn seen(&self) -> Seen {
        self.state.lock().expect("state").clone()
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, state: Arc<Mutex<Seen>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((s, _)) => {
                let st = state.clone();
                std::thread::spawn(move || {
                    let _ = serve_one(s, &st);
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

struct Req {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: Value,
}

fn read_request(s: &TcpStream) -> std::io::Result<Req> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h)?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    Ok(Req {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    })
}

fn serve_one(mut s: TcpStream, state: &Mutex<Seen>) -> std::io::Result<()> {
    let req = read_request(&s)?;
    let (status, headers, body) = route(&req, state);
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let mut out = format!(
        "HTTP/1.1 {status} X\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        text.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&text);
    s.write_all(out.as_bytes())
}

type Answer = (u16, Vec<(&'static str, String)>, Value);

fn route(req: &Req, state: &Mutex<Seen>) -> Answer {
    let mut st = state.lock().expect("state");
    st.calls.push(format!("{} {}", req.method, req.path));
    if req.headers.contains_key("authorization") {
        st.basic_auth_used = true;
    }
    let open = (req.method.as_str(), req.path.as_str());
    match open {
        ("GET", "/redfish/v1/") | ("GET", "/redfish/v1") => {
            return ok(json!({
            "@odata.id": "/redfish/v1/", "Systems": {"@odata.id": "/redfish/v1/Systems"},
            "Managers": {"@odata.id": "/redfish/v1/Managers"},
            "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}}));
        }
        ("POST", "/redfish/v1/SessionService/Sessions") => {
            return if req.body["UserName"] == USER && req.body["Password"] == PASSWORD {
                (
                    201,
                    vec![
                        ("X-Auth-Token", TOKEN.into()),
                        ("Location", "/redfish/v1/SessionService/Sessions/1".into()),
                    ],
                    json!({}),
                )
            } else {
                (
                    401,
                    vec![],
                    json!({"error": {"message": "bad credentials"}}),
                )
            };
        }
        _ => {}
    }
    if req.headers.get("x-auth-token").map(String::as_str) != Some(TOKEN) {
        return (401, vec![], json!({"error": {"message": "no session"}}));
    }
    authenticated(req, &mut st)
}

fn ok(v: Value) -> Answer {
    (200, vec![], v)
}

fn system_etag(st: &Seen) -> String {
    format!("W/\"sys-{}\"", st.etag_generation)
}

fn authenticated(req: &Req, st: &mut Seen) -> Answer {
    match (req.method.as_str(), req.path.as_str()) {
        ("DELETE", "/redfish/v1/SessionService/Sessions/1") => {
            st.sessions_deleted += 1;
            (204, vec![], Value::Null)
        }
        ("GET", "/redfish/v1/Systems") => ok(json!({"Members": [{"@odata.id": SYSTEM}]})),
        ("GET", SYSTEM) => (
            200,
            vec![("ETag", system_etag(st))],
            json!({
            "@odata.id": SYSTEM, "@odata.type": "#ComputerSystem.v1_12_0.ComputerSystem", "Id": "System.Embedded.1",
            "PowerState": st.power, "Boot": st.boot,
            "Links": {"ManagedBy": [{"@odata.id": MANAGER}]},
            "Actions": {"#ComputerSystem.Reset": {"target": format!("{SYSTEM}/Actions/ComputerSystem.Reset"),
                "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "GracefulShutdown", "ForceRestart"]}}}),
        ),
        ("PATCH", SYSTEM) => patch_system(req, st),
        ("POST", p) if p == format!("{SYSTEM}/Actions/ComputerSystem.Reset") => {
            st.power = if req.body["ResetType"] == "On" {
                "On"
            } else {
                "Off"
            }
            .into();
            (204, vec![], Value::Null)
        }
        ("GET", MANAGER) => ok(
            json!({"@odata.id": MANAGER, "VirtualMedia": {"@odata.id": format!("{MANAGER}/VirtualMedia")}}),
        ),
        ("GET", p) if p == format!("{MANAGER}/VirtualMedia") => {
            ok(json!({"Members": [{"@odata.id": DISK}, {"@odata.id": CD}]}))
        }
        ("GET", DISK) => ok(
            json!({"@odata.id": DISK, "Id": "RemovableDisk", "MediaTypes": ["USBStick"], "Inserted": false}),
        ),
        ("GET", CD) => ok(
            json!({"@odata.id": CD, "Id": "CD", "MediaTypes": ["CD", "DVD"], "Inserted": st.inserted, "Image": st.image,
            "Actions": {"#VirtualMedia.InsertMedia": {"target": format!("{CD}/Actions/VirtualMedia.InsertMedia")},
                        "#VirtualMedia.EjectMedia": {"target": format!("{CD}/Actions/VirtualMedia.EjectMedia")}}}),
        ),
        ("POST", p) if p == format!("{CD}/Actions/VirtualMedia.EjectMedia") => {
            st.image = None;
            st.inserted = false;
            (204, vec![], Value::Null)
        }
        ("POST", p) if p == format!("{CD}/Actions/VirtualMedia.InsertMedia") => insert(req, st),
        ("GET", TASK) => ok(json!({"@odata.id": TASK, "TaskState": "Completed", "Messages": []})),
        _ => (
            404,
            vec![],
            json!({"error": {"message": format!("no {}", req.path)}}),
        ),
    }
}

fn patch_system(req: &Req, st: &mut Seen) -> Answer {
    let Some(if_match) = req.headers.get("if-match") else {
        st.patches_without_if_match += 1;
        return (
            428,
            vec![],
            json!({"error": {"message": "If-Match required"}}),
        );
    };
    if *if_match != system_etag(st) && *if_match != system_etag(st).trim_start_matches("W/") {
        return (412, vec![], json!({"error": {"message": "stale ETag"}}));
    }
    if let Some(b) = req.body["Boot"].as_object() {
        for (k, v) in b {
            st.boot[k] = v.clone();
        }
    }
    st.etag_generation += 1;
    (204, vec![], Value::Null)
}

fn insert(req: &Req, st: &mut Seen) -> Answer {
    let Some(url) = req.body["Image"].as_str() else {
        return (400, vec![], json!({"error": {"message": "Image missing"}}));
    };
    // Fetched as a BMC would, without checking the server's certificate.
    let client = reqwest::blocking::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client");
    match client
        .get(url)
        .send()
        .and_then(|r| r.error_for_status())
        .and_then(|r| r.bytes())
    {
        Ok(bytes) => {
            st.downloaded_sha256 = Some(super::sha256(&bytes));
            st.image = Some(url.to_string());
            st.inserted = true;
            (202, vec![("Location", TASK.to_string())], json!({}))
        }
        Err(e) => (
            500,
            vec![],
            json!({"error": {"message": format!("cannot fetch the image: {e}")}}),
        ),
    }
}
