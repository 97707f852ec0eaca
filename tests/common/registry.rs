//! A throwaway CNCF `docker-registry` on 127.0.0.1 for the seed tests: its own config, storage and free
//! port, optional htpasswd auth, images pushed with `skopeo copy`, stopped by PID (SIGTERM) when dropped.
//!
//! Tools missing: the test fails, naming them.
#![allow(dead_code)]

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The checked-in synthetic seed (OCI layout, tag `4.16.0`).
pub fn fixture_seed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/seed")
}

/// The fixture's generator script.
pub fn make_seed_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/make-seed.sh")
}

/// Generates a seed variant with `make-seed.sh` (env overrides such as `SEED_FORMAT_VERSION=3`).
pub fn make_seed(vars: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("seed");
    let mut cmd = Command::new("bash");
    cmd.arg(make_seed_script()).arg(&out);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let res = cmd.output().expect("running make-seed.sh");
    assert!(
        res.status.success(),
        "make-seed.sh failed: {}",
        String::from_utf8_lossy(&res.stderr)
    );
    dir
}

/// The first lifecycle-agent release whose seed_cluster_info carries the node_ips and machine_networks
/// lists; older ones write one node_ip string (lifecycle-agent-versions.md).
pub const LISTS_SINCE_MINOR: u32 = 20;

/// A seed of OpenShift `version` (tag = version) whose seed_cluster_info has the shape that version's
/// lifecycle-agent writes, plus `vars` (SEED_HAS_PROXY, SEED_NODE_IPS, …); the layout is `dir/seed`.
/// 5.x seeds have the 4.20 shape: lifecycle-agent's `main` (5.0) writes what release-4.22 writes.
pub fn versioned_seed(version: &str, vars: &[(&str, &str)]) -> tempfile::TempDir {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    let (major, minor) = match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor),
        _ => panic!("version {version} is not N.N.x"),
    };
    let shape = if (major, minor) < (4, LISTS_SINCE_MINOR) {
        "4.16"
    } else {
        "4.20"
    };
    let mut all = vec![("SEED_OCP_VERSION", version), ("SEED_INFO_SHAPE", shape)];
    all.extend_from_slice(vars);
    make_seed(&all)
}

/// Writes `dir` as an OCI layout holding one linux/amd64 image tagged `tag` whose one layer is
/// `layer_tar` (an uncompressed tar), gzip-compressed.
pub fn one_layer_layout(dir: &Path, tag: &str, layer_tar: &[u8]) {
    let blob = |bytes: &[u8]| -> String {
        let hex = super::deliver::sha256(bytes);
        fs::write(dir.join("blobs/sha256").join(&hex), bytes).expect("write blob");
        format!("sha256:{hex}")
    };
    fs::create_dir_all(dir.join("blobs/sha256")).expect("layout dir");
    fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).expect("oci-layout");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(layer_tar).expect("gzip");
    let layer = gz.finish().expect("gzip");
    let layer_digest = blob(&layer);
    let config = format!(
        r#"{{"architecture":"amd64","os":"linux","config":{{}},"rootfs":{{"type":"layers","diff_ids":["sha256:{}"]}}}}"#,
        super::deliver::sha256(layer_tar)
    );
    let config_digest = blob(config.as_bytes());
    let manifest = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config_digest}","size":{}}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{layer_digest}","size":{}}}]}}"#,
        config.len(),
        layer.len()
    );
    let manifest_digest = blob(manifest.as_bytes());
    let index = format!(
        r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{manifest_digest}","size":{},"annotations":{{"org.opencontainers.image.ref.name":"{tag}"}}}}]}}"#,
        manifest.len()
    );
    fs::write(dir.join("index.json"), index).expect("index.json");
}

/// A running registry; dropped, it is stopped and its storage removed.
pub struct TestRegistry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    creds: Option<(String, String)>,
    dir: tempfile::TempDir,
}

impl TestRegistry {
    /// An anonymous registry; the test fails when the tools are missing.
    pub fn start(test: &str) -> Option<TestRegistry> {
        Self::start_with(test, None, None)
    }

    /// An anonymous registry at `addr` (HOST:PORT), where a reference must name the same registry
    /// here and inside a VM (the lab's `localhost:5000`); panics if it cannot listen there.
    pub fn start_at(test: &str, addr: &str) -> Option<TestRegistry> {
        // A registry already there (one a killed run left) would answer for this one.
        if let Err(e) = std::net::TcpListener::bind(addr) {
            panic!("{addr} is taken ({e}): is a registry of a killed run still listening there?");
        }
        Self::start_on(test, None, None, Some(addr))
    }

    /// A registry that requires HTTP basic auth with `user`/`password` (bcrypt htpasswd).
    pub fn start_with_auth(test: &str, user: &str, password: &str) -> Option<TestRegistry> {
        Self::start_with(test, Some((user, password)), None)
    }

    /// A registry served over HTTPS with a certificate for 127.0.0.1; returns it with the PEM of the CA
    /// that signed the certificate.
    pub fn start_with_tls(test: &str) -> Option<(TestRegistry, String)> {
        let (ca, cert, key) = tls_certificates();
        Self::start_with(test, None, Some((&cert, &key))).map(|r| (r, ca))
    }

    fn start_with(
        test: &str,
        creds: Option<(&str, &str)>,
        tls: Option<(&str, &str)>,
    ) -> Option<TestRegistry> {
        Self::start_on(test, creds, tls, None)
    }

    fn start_on(
        test: &str,
        creds: Option<(&str, &str)>,
        tls: Option<(&str, &str)>,
        at: Option<&str>,
    ) -> Option<TestRegistry> {
        if !super::require_tools(test, &["docker-registry", "skopeo"]) {
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let addr = at.map_or_else(|| format!("127.0.0.1:{}", free_port()), str::to_string);
        let config = dir.path().join("config.yml");
        let mut text = registry_config(dir.path(), &addr, creds);
        if let Some((cert, key)) = tls {
            let (c, k) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
            fs::write(&c, cert).expect("write cert");
            fs::write(&k, key).expect("write key");
            text.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                c.display(),
                k.display()
            ));
        }
        fs::write(&config, text).expect("write config");
        let log = fs::File::create(dir.path().join("registry.log")).expect("log file");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log fd"))
            .stderr(log)
            .spawn()
            .expect("starting docker-registry");
        let creds = creds.map(|(u, p)| (u.to_string(), p.to_string()));
        let mut reg = TestRegistry {
            child,
            addr,
            creds,
            dir,
        };
        reg.wait_ready();
        Some(reg)
    }

    /// Waits until `GET /v2/` gets an HTTP answer (200; 401 with auth; 400 from a TLS listener).
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                panic!("docker-registry exited ({status}): {}", self.log());
            }
            if http_get(&self.addr, "/v2/").is_some_and(|a| a.starts_with("HTTP/1.")) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "docker-registry on {} did not answer: {}",
            self.addr,
            self.log()
        );
    }

    /// The registry's storage (`storage.filesystem.rootdirectory`): what another registry can serve.
    pub fn storage(&self) -> PathBuf {
        self.dir.path().join("storage")
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Pushes the OCI layout `layout:tag` to `REPO:tag` and returns `ADDR/REPO:tag`.
    pub fn push(&self, layout: &Path, tag: &str, repo: &str) -> String {
        let dest = format!("{}/{repo}:{tag}", self.addr);
        let mut cmd = Command::new("skopeo");
        // `--all` keeps an image index (and so its digest) instead of picking the host platform.
        cmd.args(["copy", "--quiet", "--all", "--dest-tls-verify=false"]);
        if let Some((u, p)) = &self.creds {
            cmd.arg(format!("--dest-creds={u}:{p}"));
        }
        cmd.arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{dest}"));
        let out = cmd.output().expect("running skopeo");
        assert!(
            out.status.success(),
            "skopeo copy to {dest} failed: {}\nregistry log: {}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        dest
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The registry config: loopback only, its own storage, htpasswd when `creds` are given.
fn registry_config(dir: &Path, addr: &str, creds: Option<(&str, &str)>) -> String {
    let storage = dir.join("storage");
    // `http` comes last so a `tls` block can be appended to it.
    let mut text = format!(
        "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n",
        storage.display()
    );
    if let Some((user, password)) = creds {
        let hash = bcrypt::hash_with_result(password, 4)
            .expect("bcrypt")
            .format_for_version(bcrypt::Version::TwoY);
        let htpasswd = dir.join("htpasswd");
        fs::write(&htpasswd, format!("{user}:{hash}\n")).expect("write htpasswd");
        text.push_str(&format!(
            "auth:\n  htpasswd:\n    realm: ibi-test\n    path: {}\n",
            htpasswd.display()
        ));
    }
    text.push_str(&format!(
        "http:\n  addr: {addr}\n  secret: ibi-test-secret\n"
    ));
    text
}

/// A CA (PEM) and a server certificate and key it signed for IP 127.0.0.1 (EC P-256, one day).
fn tls_certificates() -> (String, String, String) {
    use openssl::asn1::Asn1Time;
    use openssl::ec::{EcGroup, EcKey};
    use openssl::hash::MessageDigest;
    use openssl::nid::Nid;
    use openssl::pkey::{PKey, Private};
    use openssl::x509::extension::{BasicConstraints, SubjectAlternativeName};
    use openssl::x509::{X509, X509Builder, X509NameBuilder};

    let key = || -> PKey<Private> {
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).expect("curve");
        PKey::from_ec_key(EcKey::generate(&group).expect("ec key")).expect("pkey")
    };
    let builder = |cn: &str, serial: u32, pubkey: &PKey<Private>| -> X509Builder {
        let mut name = X509NameBuilder::new().expect("name");
        name.append_entry_by_text("CN", cn).expect("cn");
        let name = name.build();
        let mut b = X509::builder().expect("builder");
        b.set_version(2).expect("version");
        let serial = openssl::bn::BigNum::from_u32(serial)
            .expect("bn")
            .to_asn1_integer()
            .expect("serial");
        b.set_serial_number(&serial).expect("serial");
        b.set_subject_name(&name).expect("subject");
        b.set_pubkey(pubkey).expect("pubkey");
        b.set_not_before(&Asn1Time::days_from_now(0).expect("time"))
            .expect("nb");
        b.set_not_after(&Asn1Time::days_from_now(1).expect("time"))
            .expect("na");
        b
    };
    let (ca_key, server_key) = (key(), key());
    let mut ca = builder("ibi test CA", 1, &ca_key);
    let ca_name = X509NameBuilder::new()
        .map(|mut n| {
            n.append_entry_by_text("CN", "ibi test CA").expect("cn");
            n.build()
        })
        .expect("ca name");
    ca.set_issuer_name(&ca_name).expect("issuer");
    ca.append_extension(BasicConstraints::new().critical().ca().build().expect("bc"))
        .expect("ext");
    ca.sign(&ca_key, MessageDigest::sha256()).expect("sign ca");
    let ca = ca.build();
    let mut server = builder("127.0.0.1", 2, &server_key);
    server.set_issuer_name(ca.subject_name()).expect("issuer");
    let san = SubjectAlternativeName::new()
        .ip("127.0.0.1")
        .build(&server.x509v3_context(Some(&ca), None))
        .expect("san");
    server.append_extension(san).expect("ext");
    server
        .sign(&ca_key, MessageDigest::sha256())
        .expect("sign server");
    let pem = |x: &X509| String::from_utf8(x.to_pem().expect("pem")).expect("utf-8");
    let key_pem =
        String::from_utf8(server_key.private_key_to_pem_pkcs8().expect("key")).expect("utf-8");
    (pem(&ca), pem(&server.build()), key_pem)
}

/// A port that was free a moment ago (the registry binds it right after).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// The status line and headers of `GET path`, or `None` when nothing answers.
fn http_get(addr: &str, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    Some(buf)
}

/// The files of a one-layer seed image in the OCI layout `layout`, extracted into `dir` with tar
/// (the layer must be the gzip tar podman builds; anything else fails the test).
pub fn extract_layer(layout: &Path, dir: &Path) {
    let json = |p: PathBuf| -> serde_json::Value {
        serde_json::from_slice(&fs::read(&p).expect("read")).expect("JSON")
    };
    let blob = |digest: &str| layout.join("blobs/sha256").join(&digest["sha256:".len()..]);
    let index = json(layout.join("index.json"));
    let manifest = json(blob(
        index["manifests"][0]["digest"].as_str().expect("digest"),
    ));
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(
        layers[0]["mediaType"],
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );
    fs::create_dir_all(dir).expect("mkdir");
    let layer = blob(layers[0]["digest"].as_str().expect("digest"));
    let out = Command::new("tar")
        .arg("-xzf")
        .arg(&layer)
        .arg("-C")
        .arg(dir)
        .output()
        .expect("running tar");
    assert!(
        out.status.success(),
        "tar -xzf {}: {}",
        layer.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
