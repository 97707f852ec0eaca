//! A stand-in for **kube-apiserver**, as a reconfigured single-node OpenShift cluster serves it to
//! `ibi watch` and to kubectl: HTTPS on 127.0.0.1 (a free port) with a serving certificate the test
//! signs with the site's load-balancer signer (as the cluster's `api.` certificate is), client
//! certificates **required** and checked against a CA the test names (the site's admin-kubeconfig
//! signer), and kube-apiserver's paths and JSON shapes: `/readyz` (`ok`, or 500 with `[-]` lines),
//! discovery (`/api`, `/apis`, `/api/v1`, `/apis/config.openshift.io/v1`, what kubectl reads before
//! `get` and `wait`), ClusterVersion `version`, the Node collection (with `fieldSelector=metadata.name=`
//! and `watch=true`, which `kubectl wait` uses) and the marker ConfigMap; anything else is a 404
//! `Status`. The test changes what the cluster says while it runs ([`StandIn::set`]) and reads which
//! paths were asked ([`StandIn::count`]). One thread per connection, `Connection: close`; stopped and
//! joined on drop.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ibi::iso9660::IsoReader;
use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::hash::MessageDigest;
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use openssl::ssl::{SslAcceptor, SslMethod, SslVerifyMode};
use openssl::x509::extension::{
    BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName,
};
use openssl::x509::{X509, X509NameBuilder};
use serde_json::{Value, json};

/// When post-pivot created the marker, on the cluster's clock (server data, not this machine's).
pub const MARKER_CREATED: &str = "2026-03-02T10:00:00Z";
/// A change of the reconfigured cluster, after the marker.
pub const FRESH: &str = "2026-03-02T10:05:00Z";
/// The seed's own: long before the marker less an hour.
pub const SEED_TIME: &str = "2025-12-01T00:00:00Z";
/// The longest a connection may sit idle, and the longest a watch is held open.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// What the cluster says; the test changes it while the stand-in runs.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    pub readyz_ok: bool,
    /// The ConfigMap `openshift-config/ibi-reconfiguration`, when post-pivot has applied it.
    pub marker: Option<Value>,
    pub cluster_version: Option<Value>,
    pub nodes: Vec<Value>,
}

/// The stand-in's TLS: its serving certificate and key, and the CA client certificates must chain to.
pub struct Tls {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    pub client_ca_pem: Vec<u8>,
}

pub struct StandIn {
    addr: SocketAddr,
    cluster: Arc<Mutex<Cluster>>,
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StandIn {
    pub fn start(tls: &Tls, cluster: Cluster) -> StandIn {
        let acceptor = Arc::new(acceptor(tls));
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let cluster = Arc::new(Mutex::new(cluster));
        let asked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Shared {
            addr,
            cluster: cluster.clone(),
            asked: asked.clone(),
            stop: stop.clone(),
        };
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if shared.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (acceptor, shared) = (acceptor.clone(), shared.clone());
                std::thread::spawn(move || serve(&acceptor, &shared, stream));
            }
        });
        StandIn {
            addr,
            cluster,
            asked,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Changes what the cluster says.
    pub fn set(&self, f: impl FnOnce(&mut Cluster)) {
        f(&mut self.cluster.lock().expect("lock"));
    }

    /// How many requests (after their TLS handshake) asked for `path` (query excluded).
    pub fn count(&self, path: &str) -> usize {
        let asked = self.asked.lock().expect("lock");
        asked.iter().filter(|p| p.as_str() == path).count()
    }

    /// Every entry of the log: request paths, and `handshake failed: …` lines.
    pub fn log(&self) -> Vec<String> {
        self.asked.lock().expect("lock").clone()
    }

    /// Waits (bounded) until `path` was asked `n` times in all.
    pub fn wait_for(&self, path: &str, n: usize, within: Duration) -> bool {
        let end = Instant::now() + within;
        while Instant::now() < end {
            if self.count(path) >= n {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[derive(Clone)]
struct Shared {
    addr: SocketAddr,
    cluster: Arc<Mutex<Cluster>>,
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

fn acceptor(tls: &Tls) -> SslAcceptor {
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls()).expect("acceptor");
    let cert = X509::from_pem(&tls.cert_pem).expect("serving cert");
    let key = PKey::private_key_from_pem(&tls.key_pem).expect("serving key");
    b.set_certificate(&cert).expect("set cert");
    b.set_private_key(&key).expect("set key");
    b.check_private_key().expect("key matches");
    for ca in X509::stack_from_pem(&tls.client_ca_pem).expect("client CA") {
        b.cert_store_mut().add_cert(ca).expect("add client CA");
    }
    // kube-apiserver's --client-ca-file; required here, so a refused client certificate fails
    // the handshake itself.
    b.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
    b.build()
}

fn serve(acceptor: &SslAcceptor, shared: &Shared, stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let mut tls = match acceptor.accept(stream) {
        Ok(s) => s,
        Err(e) => {
            if !shared.stop.load(Ordering::SeqCst) {
                let line = format!("handshake failed: {e}");
                shared.asked.lock().expect("lock").push(line);
            }
            return;
        }
    };
    let Some(target) = read_request_target(&mut tls) else {
        return;
    };
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    shared.asked.lock().expect("lock").push(path.to_string());
    let cluster = shared.cluster.lock().expect("lock").clone();
    if is_watch(query) {
        hold_watch(&mut tls);
        return;
    }
    let (code, content_type, body) = route(path, query, &cluster, shared.addr);
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reason(code),
        body.len()
    );
    let _ = tls.write_all(head.as_bytes());
    let _ = tls.write_all(body.as_bytes());
    let _ = tls.shutdown();
}

/// The request line's target of a GET, once the headers are in (no request here has a body).
fn read_request_target(s: &mut impl Read) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 || buf.len() > 64 * 1024 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&buf);
    let mut parts = text.lines().next()?.split(' ');
    (parts.next()? == "GET").then_some(())?;
    parts.next().map(str::to_string)
}

fn is_watch(query: &str) -> bool {
    query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1")
}

/// A watch that sends no event: open until the client leaves or the bound passes (kubectl wait
/// with `--timeout=0` opens one, then gives up).
fn hold_watch(s: &mut (impl Read + Write)) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if s.write_all(head.as_bytes()).is_err() || s.flush().is_err() {
        return;
    }
    let mut byte = [0u8; 1];
    // Returns on EOF, an error, or the stream's read timeout (IO_TIMEOUT).
    let _ = s.read(&mut byte);
    let _ = s.write_all(b"0\r\n\r\n");
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        404 => "Not Found",
        _ => "Internal Server Error",
    }
}

const JSON: &str = "application/json";

fn route(path: &str, query: &str, c: &Cluster, addr: SocketAddr) -> (u16, &'static str, String) {
    let name = field_selector_name(query);
    let ok = |v: Value| (200, JSON, v.to_string());
    match path {
        "/readyz" if c.readyz_ok => (200, "text/plain; charset=utf-8", "ok".into()),
        "/readyz" => (
            500,
            "text/plain; charset=utf-8",
            "[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\nreadyz check failed\n".into(),
        ),
        "/api" => ok(json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()}]})),
        "/apis" => ok(api_groups()),
        "/api/v1" => ok(resources(
            "v1",
            &[("nodes", "Node", false), ("configmaps", "ConfigMap", true)],
        )),
        "/apis/config.openshift.io/v1" => ok(resources(
            "config.openshift.io/v1",
            &[("clusterversions", "ClusterVersion", false)],
        )),
        "/apis/config.openshift.io/v1/clusterversions/version" => one(
            c.cluster_version.clone(),
            "clusterversions.config.openshift.io",
            "version",
        ),
        "/apis/config.openshift.io/v1/clusterversions" => ok(list(
            "ClusterVersionList",
            "config.openshift.io/v1",
            c.cluster_version.iter().cloned().collect(),
            name.as_deref(),
        )),
        "/api/v1/nodes" => ok(list("NodeList", "v1", c.nodes.clone(), name.as_deref())),
        "/api/v1/namespaces/openshift-config/configmaps/ibi-reconfiguration" => {
            one(c.marker.clone(), "configmaps", "ibi-reconfiguration")
        }
        p if p.starts_with("/api/v1/nodes/") => {
            let n = &p["/api/v1/nodes/".len()..];
            let found = c.nodes.iter().find(|v| v["metadata"]["name"] == n).cloned();
            one(found, "nodes", n)
        }
        _ => not_found("", ""),
    }
}

fn one(v: Option<Value>, resource: &str, name: &str) -> (u16, &'static str, String) {
    match v {
        Some(v) => (200, JSON, v.to_string()),
        None => not_found(resource, name),
    }
}

/// kube-apiserver's 404 `Status`.
fn not_found(resource: &str, name: &str) -> (u16, &'static str, String) {
    let message = if name.is_empty() {
        "the server could not find the requested resource".to_string()
    } else {
        format!("{resource} \"{name}\" not found")
    };
    let v = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": "NotFound",
        "details": {"name": name, "kind": resource}, "code": 404});
    (404, JSON, v.to_string())
}

fn list(kind: &str, api_version: &str, items: Vec<Value>, name: Option<&str>) -> Value {
    let items: Vec<Value> = items
        .into_iter()
        .filter(|v| name.is_none_or(|n| v["metadata"]["name"] == n))
        .collect();
    json!({"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": "1000"}, "items": items})
}

/// `fieldSelector=metadata.name=NAME` (URL-encoded), the one field selector kubectl wait sends.
fn field_selector_name(query: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|kv| kv.strip_prefix("fieldSelector="))
        .map(percent_decode)
        .find_map(|s| s.strip_prefix("metadata.name=").map(str::to_string))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (b[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn api_groups() -> Value {
    let gv = json!({"groupVersion": "config.openshift.io/v1", "version": "v1"});
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "config.openshift.io", "versions": [gv], "preferredVersion": gv}]})
}

fn resources(group_version: &str, rs: &[(&str, &str, bool)]) -> Value {
    let list: Vec<Value> = rs
        .iter()
        .map(|(name, kind, namespaced)| {
            json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
                "verbs": ["get", "list", "watch"]})
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list})
}

// ---- the objects, as kube-apiserver serves them ----

/// ClusterVersion `version` with `conditions` as (type, status, lastTransitionTime).
pub fn cluster_version(cluster_id: &str, conditions: &[(&str, &str, &str)]) -> Value {
    let conds: Vec<Value> = conditions
        .iter()
        .map(|(t, s, at)| {
            json!({"type": t, "status": s, "lastTransitionTime": at,
            "message": format!("{t} is {s}")})
        })
        .collect();
    json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version", "resourceVersion": "1000", "creationTimestamp": "2024-05-01T10:00:00Z"},
        "spec": {"clusterID": cluster_id, "channel": "stable-4.18"},
        "status": {"desired": {"version": "4.18.3", "image": "quay.io/openshift-release-dev/ocp-release@sha256:00"},
            "conditions": conds, "history": [], "observedGeneration": 2, "versionHash": "x"}})
}

/// A Node whose Ready condition is `ready` ("True"/"False") with its last heartbeat at `heartbeat`.
pub fn node(name: &str, ready: &str, heartbeat: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "1000", "labels": {"node-role.kubernetes.io/master": ""}},
        "status": {"conditions": [
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
             "lastHeartbeatTime": heartbeat, "lastTransitionTime": "2024-05-01T10:00:00Z"},
            {"type": "Ready", "status": ready,
             "reason": if ready == "True" { "KubeletReady" } else { "KubeletNotReady" },
             "message": if ready == "True" { "kubelet is posting ready status" } else { "container runtime network not ready" },
             "lastHeartbeatTime": heartbeat, "lastTransitionTime": heartbeat}]}})
}

/// The marker ConfigMap as post-pivot creates it from the ISO's extra manifest.
pub fn marker(built_at: &str, created: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "ibi-reconfiguration", "namespace": "openshift-config",
            "uid": "6f1c2a0e-0000-4000-8000-000000000001", "resourceVersion": "1001",
            "creationTimestamp": created},
        "data": {"builtAt": built_at}})
}

// ---- certificates ----

fn name(cn: &str) -> openssl::x509::X509Name {
    let mut n = X509NameBuilder::new().expect("name");
    n.append_entry_by_text("CN", cn).expect("cn");
    n.build()
}

fn serial() -> openssl::asn1::Asn1Integer {
    let mut bn = BigNum::new().expect("bn");
    bn.rand(63, MsbOption::MAYBE_ZERO, false).expect("rand");
    bn.to_asn1_integer().expect("serial")
}

fn rsa_key() -> PKey<Private> {
    PKey::from_rsa(Rsa::generate(2048).expect("rsa")).expect("pkey")
}

/// A fresh CA (cert PEM, key PEM): another cluster's signer, for the negative controls.
pub fn new_ca(cn: &str) -> (Vec<u8>, Vec<u8>) {
    let key = rsa_key();
    let mut b = X509::builder().expect("builder");
    b.set_version(2).expect("v3");
    b.set_serial_number(&serial()).expect("serial");
    b.set_subject_name(&name(cn)).expect("subject");
    b.set_issuer_name(&name(cn)).expect("issuer");
    b.set_pubkey(&key).expect("pubkey");
    b.set_not_before(&Asn1Time::days_from_now(0).expect("t"))
        .expect("nb");
    b.set_not_after(&Asn1Time::days_from_now(30).expect("t"))
        .expect("na");
    b.append_extension(BasicConstraints::new().critical().ca().build().expect("bc"))
        .expect("ext");
    b.append_extension(
        KeyUsage::new()
            .critical()
            .key_cert_sign()
            .crl_sign()
            .build()
            .expect("ku"),
    )
    .expect("ext");
    b.sign(&key, MessageDigest::sha256()).expect("sign");
    (
        b.build().to_pem().expect("pem"),
        key.private_key_to_pem_pkcs8().expect("key pem"),
    )
}

/// A serving certificate for `dns` and 127.0.0.1 signed by the CA (`ca_cert`, `ca_key`), as
/// kube-apiserver's certificate for the `api.` name is signed by the load-balancer signer.
pub fn serving_cert(ca_cert: &[u8], ca_key: &[u8], dns: &str) -> (Vec<u8>, Vec<u8>) {
    let ca = X509::from_pem(ca_cert).expect("ca cert");
    let ca_key = PKey::private_key_from_pem(ca_key).expect("ca key");
    let key = rsa_key();
    let mut b = X509::builder().expect("builder");
    b.set_version(2).expect("v3");
    b.set_serial_number(&serial()).expect("serial");
    b.set_subject_name(&name(dns)).expect("subject");
    b.set_issuer_name(ca.subject_name()).expect("issuer");
    b.set_pubkey(&key).expect("pubkey");
    b.set_not_before(&Asn1Time::days_from_now(0).expect("t"))
        .expect("nb");
    b.set_not_after(&Asn1Time::days_from_now(30).expect("t"))
        .expect("na");
    let ctx = b.x509v3_context(Some(&ca), None);
    let san = SubjectAlternativeName::new()
        .dns(dns)
        .ip("127.0.0.1")
        .build(&ctx)
        .expect("san");
    b.append_extension(san).expect("ext");
    b.append_extension(ExtendedKeyUsage::new().server_auth().build().expect("eku"))
        .expect("ext");
    b.append_extension(
        KeyUsage::new()
            .critical()
            .digital_signature()
            .key_encipherment()
            .build()
            .expect("ku"),
    )
    .expect("ext");
    b.sign(&ca_key, MessageDigest::sha256()).expect("sign");
    (
        b.build().to_pem().expect("pem"),
        key.private_key_to_pem_pkcs8().expect("key pem"),
    )
}

/// A site directory as `ibi create config-image` left it (alone or as a batch's `sites/<site>/`), and
/// what a stand-in for its cluster's API needs from it.
pub struct BuiltSite {
    pub dir: PathBuf,
    /// The marker ConfigMap's `builtAt`, from the ISO's extra manifests.
    pub built_at: String,
    pub cluster_id: String,
    /// The host of the kubeconfig's `server:`.
    pub api_name: String,
    /// manifest.json, as the ISO carries it to the host.
    pub manifest: Value,
    pub identity: Value,
}

impl BuiltSite {
    pub fn read(dir: &Path) -> BuiltSite {
        let mut iso =
            IsoReader::open(fs::File::open(dir.join("imagebasedconfig.iso")).unwrap()).unwrap();
        let marker: Value = serde_yaml_ng::from_slice(
            &iso.read_file("extra-manifests/ibi-reconfiguration.yaml")
                .unwrap(),
        )
        .unwrap();
        let manifest: Value = serde_json::from_slice(
            &iso.read_file("cluster-configuration/manifest.json")
                .unwrap(),
        )
        .unwrap();
        let kubeconfig = fs::read_to_string(dir.join("auth/kubeconfig")).unwrap();
        let server = kubeconfig
            .lines()
            .find_map(|l| l.trim().strip_prefix("server: "))
            .unwrap()
            .to_string();
        let api_name = server
            .trim_start_matches("https://")
            .split(':')
            .next()
            .unwrap()
            .to_string();
        let identity: Value =
            serde_json::from_slice(&fs::read(dir.join(".ibi/identity.json")).unwrap()).unwrap();
        BuiltSite {
            dir: dir.to_path_buf(),
            built_at: marker["data"]["builtAt"].as_str().unwrap().to_string(),
            cluster_id: manifest["cluster_id"].as_str().unwrap().to_string(),
            api_name,
            manifest,
            identity,
        }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.path().join("auth/kubeconfig")
    }

    /// A key pair of `.ibi/identity.json` (the leak check's secret).
    pub fn identity_pair(&self, name: &str) -> (Vec<u8>, Vec<u8>) {
        let s = &self.identity["crypto"][name];
        (
            s["cert_pem"].as_str().unwrap().as_bytes().to_vec(),
            s["key_pem"].as_str().unwrap().as_bytes().to_vec(),
        )
    }

    /// What manifest.json gives the cluster's kube-apiserver: `KubeAPICrypto`.
    pub fn api_crypto(&self) -> &Value {
        &self.manifest["KubeconfigCryptoRetention"]["KubeAPICrypto"]
    }

    /// The load-balancer signer as the reconfigured cluster holds it: manifest.json's key, and the
    /// certificate of the kubeconfig's CA bundle that belongs to that key.
    pub fn lb_signer(&self) -> (Vec<u8>, Vec<u8>) {
        let key_pem =
            self.api_crypto()["ServingCrypto"]["loadbalancer_external_signer_private_key"]
                .as_str()
                .unwrap();
        let key = openssl::pkey::PKey::private_key_from_pem(key_pem.as_bytes()).unwrap();
        let kubeconfig = fs::read_to_string(self.kubeconfig()).unwrap();
        let ca_b64 = kubeconfig
            .lines()
            .find_map(|l| l.trim().strip_prefix("certificate-authority-data: "))
            .unwrap();
        let bundle = openssl::base64::decode_block(ca_b64).unwrap();
        let cert = openssl::x509::X509::stack_from_pem(&bundle)
            .unwrap()
            .into_iter()
            .find(|c| c.public_key().unwrap().public_eq(&key))
            .expect("the kubeconfig's CA bundle holds the load-balancer signer");
        (cert.to_pem().unwrap(), key_pem.as_bytes().to_vec())
    }

    /// The CA kube-apiserver checks client certificates against: manifest.json's
    /// `admin_ca_certificate`.
    pub fn admin_ca(&self) -> Vec<u8> {
        self.api_crypto()["ClientAuthCrypto"]["admin_ca_certificate"]
            .as_str()
            .unwrap()
            .as_bytes()
            .to_vec()
    }

    /// The stand-in's TLS as the reconfigured cluster's: served under the load-balancer signer,
    /// client certificates checked against the admin CA.
    pub fn cluster_tls(&self) -> Tls {
        let (lb_cert, lb_key) = self.lb_signer();
        let (cert_pem, key_pem) = serving_cert(&lb_cert, &lb_key, &self.api_name);
        Tls {
            cert_pem,
            key_pem,
            client_ca_pem: self.admin_ca(),
        }
    }

    /// Points the kubeconfig's `server:` at `url`; nothing else in it changes.
    pub fn point_at(&self, url: &str) {
        let text = fs::read_to_string(self.kubeconfig()).unwrap();
        let text: Vec<String> = text
            .lines()
            .map(|l| match l.find("server: ") {
                Some(i) => format!("{}server: {url}", &l[..i]),
                None => l.to_string(),
            })
            .collect();
        fs::write(self.kubeconfig(), text.join("\n") + "\n").unwrap();
    }

    /// Points the kubeconfig at a port nothing listens on (bound, then closed); returns the port.
    pub fn point_at_silence(&self) -> u16 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        self.point_at(&format!("https://127.0.0.1:{port}"));
        port
    }

    /// The reconfigured cluster, all ready and fresh.
    pub fn ready(&self) -> Cluster {
        Cluster {
            readyz_ok: true,
            marker: Some(marker(&self.built_at, MARKER_CREATED)),
            cluster_version: Some(cluster_version(
                &self.cluster_id,
                &[
                    ("Available", "True", FRESH),
                    ("Failing", "False", FRESH),
                    ("Progressing", "False", FRESH),
                ],
            )),
            nodes: vec![node(&self.node_name(), "True", FRESH)],
        }
    }

    /// The host just booted into the seed's cluster: the API answers, not ready, nothing of this
    /// site's configuration there yet, and the seed's own status saying Available and Ready.
    pub fn seed_state(&self) -> Cluster {
        Cluster {
            readyz_ok: false,
            marker: None,
            cluster_version: Some(cluster_version(
                "seed-cluster-id",
                &[
                    ("Available", "True", SEED_TIME),
                    ("Progressing", "False", SEED_TIME),
                ],
            )),
            nodes: vec![node("seed", "True", SEED_TIME)],
        }
    }

    /// The node's name: the host name manifest.json gives the cluster.
    pub fn node_name(&self) -> String {
        self.manifest["hostname"]
            .as_str()
            .unwrap_or("sno")
            .to_string()
    }
}
