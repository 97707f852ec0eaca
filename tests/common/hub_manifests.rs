//! What the tests of tests/fast/hub_manifests.rs and tests/tools/hub_manifests.rs share: one file
//! of tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common::*;
use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) const SITES: [&str; 3] = ["a17", "a18", "a19"];
pub(crate) const BMC_PASSWORD: &str = "hub-bmc-S3cret";
/// The example pull secret's `auth` (base64 of `example:not-a-real-password`).
pub(crate) const PULL_AUTH: &str = "ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk";
pub(crate) const RELEASE: &str = "quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64";

/// BASE with the example fleet's shared inputs, and its `sites.yaml` as read (a YAML value).
pub(crate) fn example_base() -> (tempfile::TempDir, Value) {
    let base = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/example-fleet");
    for f in ["install-config.yaml", "image-based-config.yaml"] {
        fs::copy(src.join(f), base.path().join(f)).unwrap();
    }
    copy_tree(
        &src.join("extra-manifests"),
        &base.path().join("extra-manifests"),
    );
    let inv: Value = serde_yaml_ng::from_slice(&fs::read(src.join("sites.yaml")).unwrap()).unwrap();
    (base, inv)
}

/// The example inventory with what the hub needs: a boot MAC, a BMC naming one System with a user
/// and a password file, and for a17 a boot mode and root device hints.
pub(crate) fn hub_inventory(base: &Path, mut inv: Value) -> PathBuf {
    fs::write(base.join("bmc-password"), format!("{BMC_PASSWORD}\n")).unwrap();
    for (i, site) in inv["sites"].as_array_mut().unwrap().iter_mut().enumerate() {
        let mac = format!("52:54:00:aa:{}:01", 17 + i);
        site["bootMACAddress"] = json!(mac);
        site["bmc"] = json!({
            "address": format!("https://10.0.0.{}:8000/redfish/v1/Systems/host-{i}", 9 + i),
            "user": "admin",
            "passwordFile": "bmc-password",
        });
    }
    inv["sites"][0]["bootMode"] = json!("UEFISecureBoot");
    inv["sites"][0]["rootDeviceHints"] = json!({"deviceName": "/dev/sda", "minSizeGigabytes": 100});
    let path = base.join("hub-sites.yaml");
    fs::write(&path, serde_yaml_ng::to_string(&inv).unwrap()).unwrap();
    path
}

pub(crate) fn hub(base: &Path, inventory: &Path, extra: &[&str]) -> Output {
    // At trace level, so a secret that reached any log would show.
    let mut args = vec![
        "--log-level",
        "trace",
        "create",
        "hub-manifests",
        "--dir",
        base.to_str().unwrap(),
        "--sites",
        inventory.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ibi(&args, &[])
}

/// `create config-image --sites` for the inventory: the sites' identities a hub keeps.
pub(crate) fn build_sites(base: &Path, inventory: &Path) {
    let out = ibi(
        &[
            "create",
            "config-image",
            "--dir",
            base.to_str().unwrap(),
            "--sites",
            inventory.to_str().unwrap(),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// A file of the ISO as xorriso (not ibi) reads it.
pub(crate) fn xorriso_extract(iso: &Path, path: &str) -> Option<Vec<u8>> {
    if !tool("xorriso", "example_fleet_renders_for_a_hub") {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("f");
    let out = Command::new("xorriso")
        .args(["-osirrox", "on", "-indev"])
        .arg(iso)
        .arg("-extract")
        .arg(path)
        .arg(&dest)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    Some(fs::read(dest).unwrap())
}

/// Every file under `dir` with its text.
pub(crate) fn walk(dir: &Path, out: &mut std::collections::BTreeMap<PathBuf, String>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.insert(p.clone(), fs::read_to_string(&p).unwrap());
        }
    }
}

pub(crate) fn secret_data(p: &Path, key: &str) -> Vec<u8> {
    openssl::base64::decode_block(yaml(p)["data"][key].as_str().unwrap()).unwrap()
}

/// The run failed with exit code 1, named every one of `wants` on stderr, and wrote nothing.
pub(crate) fn assert_refused(out: &Output, base: &Path, wants: &[&str]) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for want in wants {
        assert!(stderr.contains(want), "no {want:?} in:\n{stderr}");
    }
    assert!(!base.join("hub").exists());
    stderr
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(crate) fn yaml(p: &Path) -> Value {
    serde_yaml_ng::from_slice(&fs::read(p).unwrap()).unwrap()
}

pub(crate) const IDENTITY_AND_OTHER_SECRETS: [&str; 5] = [
    "pull-secret.yaml",
    "bmc-credentials.yaml",
    "admin-kubeconfig.yaml",
    "admin-password.yaml",
    "seed-reconfiguration.yaml",
];

/// The three Secrets IBIO's reinstall reads hold what the site was given: its `auth/kubeconfig` and
/// Issue 34 item 5: one kustomization per folder and one at the top, so `kubectl apply -k OUT` (or
/// an Argo CD application of OUT) applies everything in one step: Debian's kubectl builds it (its
/// kustomize), every object once, the Namespaces first; each object carries its Argo CD sync wave
/// (namespaces 0, Secrets and ConfigMaps 1, the ClusterInstance 2).
pub(crate) fn kustomize_applies_in_one_step(
    hub_dir: &Path,
    kustomizations: &[PathBuf],
    objects: usize,
) {
    assert!(kustomizations.contains(&hub_dir.join("kustomization.yaml")));
    for site in SITES {
        for d in ["sites", "secrets"] {
            assert!(
                kustomizations.contains(&hub_dir.join(d).join(site).join("kustomization.yaml"))
            );
        }
    }
    let Some(kubectl) = debian_kubectl("example_fleet_renders_for_a_hub") else {
        return;
    };
    let out = std::process::Command::new(kubectl)
        .args(["kustomize"])
        .arg(hub_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_slice(&out.stdout)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert_eq!(docs.len(), objects, "every object once");
    let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    let last_ns = kinds.iter().rposition(|k| *k == "Namespace").unwrap();
    assert!(
        kinds[..=last_ns].iter().all(|k| *k == "Namespace"),
        "Namespaces first: {kinds:?}"
    );
    for d in &docs {
        let wave = &d["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"];
        let want = match d["kind"].as_str().unwrap() {
            "Namespace" | "ClusterImageSet" => "0",
            "Secret" | "ConfigMap" => "1",
            _ => "2",
        };
        assert_eq!(wave, want, "{}", d["kind"]);
    }
}

/// `auth/kubeadmin-password` byte for byte, and the manifest.json of its configuration ISO.
pub(crate) fn identity_is_the_sites(base: &Path, secrets: &Path, site: &str) {
    let built = base.join("sites").join(site);
    let cluster = format!("sno-{site}");
    let kc = secrets.join("admin-kubeconfig.yaml");
    assert_eq!(
        yaml(&kc)["metadata"]["name"],
        format!("{cluster}-admin-kubeconfig")
    );
    assert_eq!(yaml(&kc)["metadata"]["namespace"], cluster.as_str());
    assert_eq!(
        yaml(&kc)["metadata"]["labels"]["siteconfig.open-cluster-management.io/preserve"],
        "cluster-identity"
    );
    assert_eq!(
        secret_data(&kc, "kubeconfig"),
        fs::read(built.join("auth/kubeconfig")).unwrap()
    );
    let pw = secrets.join("admin-password.yaml");
    assert_eq!(
        yaml(&pw)["metadata"]["name"],
        format!("{cluster}-admin-password")
    );
    assert_eq!(secret_data(&pw, "username"), b"kubeadmin");
    assert_eq!(
        secret_data(&pw, "password"),
        fs::read(built.join("auth/kubeadmin-password")).unwrap()
    );
    let sr = secrets.join("seed-reconfiguration.yaml");
    assert_eq!(
        yaml(&sr)["metadata"]["name"],
        format!("{cluster}-seed-reconfiguration")
    );
    let manifest = secret_data(&sr, "manifest.json");
    let v: Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(v["cluster_name"], cluster.as_str());
    // Issue 34 item 7: the password ibi writes is the one the cluster keeps (its hash), whatever
    // IBIO later writes into this Secret (docs/hub.md).
    let password = String::from_utf8(secret_data(&pw, "password")).unwrap();
    let hash = v["kubeadmin_password_hash"].as_str().unwrap();
    assert!(
        bcrypt::verify(password.trim_end(), hash).unwrap(),
        "{site}: the Secret's password does not open the cluster"
    );
    if let Some(from_iso) = xorriso_extract(
        &built.join("imagebasedconfig.iso"),
        "/cluster-configuration/manifest.json",
    ) {
        assert_eq!(
            manifest, from_iso,
            "{site}: manifest.json differs from the ISO's"
        );
    }
}

/// Debian's kubectl applies every file (client-side dry run) against a stand-in for a hub's API
/// discovery, and reads each object as ibi wrote it (kubectl's YAML is 1.1).
pub(crate) fn kubectl_takes_every_object(hub_dir: &Path, files: &[PathBuf]) {
    let test = "example_fleet_renders_for_a_hub";
    let Some(kubectl) = debian_kubectl(test) else {
        return;
    };
    let api = Discovery::start();
    let work = tempfile::tempdir().unwrap();
    let kubeconfig = work.path().join("kubeconfig");
    fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hub\n  cluster:\n    server: http://{}\n\
             users:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context: {{cluster: hub, user: u}}\n\
             current-context: c\n",
            api.addr
        ),
    )
    .unwrap();
    let out = Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(work.path().join("cache"))
        .args([
            "apply",
            "--dry-run=client",
            "--validate=false",
            "-o",
            "json",
            // In one step, through the top kustomization (issue 34 item 5).
            "-k",
        ])
        .arg(hub_dir)
        .output()
        .expect("running kubectl");
    assert!(
        out.status.success(),
        "kubectl apply --dry-run=client failed:\n{}",
        text(&out.stderr)
    );
    // One object per file; each as kubectl read it equals what the file says to a YAML 1.2 reader.
    // kubectl prints one JSON document per object (or one List).
    let mut items = Vec::new();
    for doc in serde_json::Deserializer::from_slice(&out.stdout).into_iter::<Value>() {
        let doc = doc.unwrap();
        match doc["kind"].as_str() {
            Some("List") => items.extend(doc["items"].as_array().unwrap().iter().cloned()),
            _ => items.push(doc),
        }
    }
    assert_eq!(items.len(), files.len(), "{}", text(&out.stdout));
    for f in files {
        let mut mine = yaml(f);
        let theirs = items
            .iter()
            .find(|i| {
                i["kind"] == mine["kind"]
                    && i["metadata"]["name"] == mine["metadata"]["name"]
                    && i["metadata"]["namespace"] == mine["metadata"]["namespace"]
            })
            .unwrap_or_else(|| panic!("{} not applied", f.display()));
        let mut theirs = theirs.clone();
        // kubectl adds its last-applied annotation; everything else must be as written.
        if let Some(a) = theirs["metadata"].as_object_mut() {
            a.remove("annotations");
        }
        if let Some(a) = mine["metadata"].as_object_mut() {
            a.remove("annotations");
        }
        assert_eq!(theirs, mine, "{}", f.display());
    }
}

/// A stand-in for a hub's kube-apiserver as far as a client-side dry run reaches it: API discovery
/// with the core kinds and the CRDs a hub with SiteConfig and hive serves (ClusterInstance,
/// ClusterImageSet), and 404 `Status` for every object (none exists yet). Plain HTTP on 127.0.0.1;
/// one thread, stopped when the test process ends.
pub(crate) struct Discovery {
    pub(crate) addr: std::net::SocketAddr,
}

impl Discovery {
    pub(crate) fn start() -> Discovery {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                answer(stream);
            }
        });
        Discovery { addr }
    }
}

pub(crate) fn answer(mut stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).map_or(true, |n| n == 0) || h == "\r\n" {
            break;
        }
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/");
    let path = path.split('?').next().unwrap_or(path);
    let res = |name: &str, kind: &str, namespaced: bool| {
        json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
               "verbs": ["create", "get", "list", "patch", "update", "delete"]})
    };
    let list = |gv: &str, rs: Vec<Value>| json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": rs});
    let group = |name: &str, version: &str| {
        let gv = json!({"groupVersion": format!("{name}/{version}"), "version": version});
        json!({"name": name, "versions": [gv.clone()], "preferredVersion": gv})
    };
    let (code, body) = match path {
        "/api" => (
            200,
            json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        ),
        "/apis" => (
            200,
            json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                group("hive.openshift.io", "v1"),
                group("siteconfig.open-cluster-management.io", "v1alpha1"),
            ]}),
        ),
        "/api/v1" => (
            200,
            list(
                "v1",
                vec![
                    res("namespaces", "Namespace", false),
                    res("secrets", "Secret", true),
                    res("configmaps", "ConfigMap", true),
                ],
            ),
        ),
        "/apis/hive.openshift.io/v1" => (
            200,
            list(
                "hive.openshift.io/v1",
                vec![res("clusterimagesets", "ClusterImageSet", false)],
            ),
        ),
        "/apis/siteconfig.open-cluster-management.io/v1alpha1" => (
            200,
            list(
                "siteconfig.open-cluster-management.io/v1alpha1",
                vec![res("clusterinstances", "ClusterInstance", true)],
            ),
        ),
        _ => (
            404,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "not found", "reason": "NotFound", "code": 404}),
        ),
    };
    let body = body.to_string();
    let reason = if code == 200 { "OK" } else { "Not Found" };
    let _ = write!(
        stream,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}
