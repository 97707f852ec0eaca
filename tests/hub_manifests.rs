//! `ibi create hub-manifests` on the bundled example fleet: the layout, the secrets' modes, no secret
//! in the output (at trace level), the ClusterInstance's fields, the identity Secrets of sites
//! `create config-image --sites` built (byte for byte the kubeconfig, password and manifest.json the
//! site was given; manifest.json as xorriso extracts it from the site's ISO), the mirrors as an
//! extra manifest, every object taken by Debian's kubectl (`kubectl apply --dry-run=client`, against
//! a stand-in for a hub's API discovery), Secret templates without data, and the findings of an
//! inventory without what the hub needs or with what a hub refuses (all at once, nothing written).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use serde_json::{Value, json};

const SITES: [&str; 3] = ["a17", "a18", "a19"];
const BMC_PASSWORD: &str = "hub-bmc-S3cret";
/// The example pull secret's `auth` (base64 of `example:not-a-real-password`).
const PULL_AUTH: &str = "ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk";
const RELEASE: &str = "quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64";

/// BASE with the example fleet's shared inputs, and its `sites.yaml` as read (a YAML value).
fn example_base() -> (tempfile::TempDir, Value) {
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
fn hub_inventory(base: &Path, mut inv: Value) -> PathBuf {
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

fn hub(base: &Path, inventory: &Path, extra: &[&str]) -> Output {
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
fn build_sites(base: &Path, inventory: &Path) {
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
fn xorriso_extract(iso: &Path, path: &str) -> Option<Vec<u8>> {
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
fn walk(dir: &Path, out: &mut std::collections::BTreeMap<PathBuf, String>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.insert(p.clone(), fs::read_to_string(&p).unwrap());
        }
    }
}

fn secret_data(p: &Path, key: &str) -> Vec<u8> {
    openssl::base64::decode_block(yaml(p)["data"][key].as_str().unwrap()).unwrap()
}

/// The run failed with exit code 1, named every one of `wants` on stderr, and wrote nothing.
fn assert_refused(out: &Output, base: &Path, wants: &[&str]) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for want in wants {
        assert!(stderr.contains(want), "no {want:?} in:\n{stderr}");
    }
    assert!(!base.join("hub").exists());
    stderr
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn yaml(p: &Path) -> Value {
    serde_yaml_ng::from_slice(&fs::read(p).unwrap()).unwrap()
}

#[test]
fn example_fleet_renders_for_a_hub() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    build_sites(base.path(), &inventory);
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!stderr.contains("not built"), "{stderr}");
    // Issue 34 item 2: what the hub path drops is said, per site.
    for site in SITES {
        assert!(
            stderr.contains(&format!("site {site}: its node labels (node-role.kubernetes.io/edge=, site.example.com/id={site}) are not carried over by the hub")),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!("site {site}: releaseRegistry registry.edge.example.com:5000 is not carried over: the hub's image-based-install-operator takes the registry of --release-image, quay.io;")),
            "{stderr}"
        );
    }
    let hub_dir = base.path().join("hub");
    // Nothing secret on the terminal: not the BMC password, not the pull secret, not the kubeadmin
    // password, not their base64.
    let b64 = |s: &str| openssl::base64::encode_block(s.as_bytes());
    let kubeadmin =
        fs::read_to_string(base.path().join("sites/a17/auth/kubeadmin-password")).unwrap();
    for secret in [
        BMC_PASSWORD,
        PULL_AUTH,
        &b64(BMC_PASSWORD),
        &kubeadmin,
        &b64(&kubeadmin),
    ] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} shown"
        );
    }
    // Nor in any file outside secrets/ (the harness of tests/secrets.rs runs single sites).
    for dir in ["shared", "sites"] {
        let mut files = std::collections::BTreeMap::new();
        walk(&hub_dir.join(dir), &mut files);
        for (path, body) in files {
            for secret in [
                BMC_PASSWORD,
                PULL_AUTH,
                &b64(BMC_PASSWORD),
                &kubeadmin,
                &b64(&kubeadmin),
                "PRIVATE KEY",
            ] {
                assert!(!body.contains(secret), "{} holds a secret", path.display());
            }
        }
    }
    let mut want = vec![hub_dir.join("shared/cluster-image-set.yaml")];
    for site in SITES {
        for f in [
            "namespace.yaml",
            "extra-manifests.yaml",
            "cluster-instance.yaml",
        ] {
            want.push(hub_dir.join("sites").join(site).join(f));
        }
        for f in IDENTITY_AND_OTHER_SECRETS {
            want.push(hub_dir.join("secrets").join(site).join(f));
        }
    }
    let listed: Vec<PathBuf> = stdout.lines().map(PathBuf::from).collect();
    let (kustomizations, objects): (Vec<PathBuf>, Vec<PathBuf>) = listed
        .into_iter()
        .partition(|p| p.ends_with("kustomization.yaml"));
    assert_eq!(objects, want);
    kustomize_applies_in_one_step(&hub_dir, &kustomizations, want.len());
    assert_eq!(mode(&hub_dir.join("secrets")), 0o700);
    for site in SITES {
        let dir = hub_dir.join("secrets").join(site);
        assert_eq!(mode(&dir), 0o700);
        for f in IDENTITY_AND_OTHER_SECRETS {
            assert_eq!(mode(&dir.join(f)), 0o600, "{site}/{f}");
        }
        identity_is_the_sites(base.path(), &dir, site);
        assert_eq!(
            mode(
                &hub_dir
                    .join("sites")
                    .join(site)
                    .join("cluster-instance.yaml")
            ),
            0o644
        );
    }

    let cis = yaml(&hub_dir.join("shared/cluster-image-set.yaml"));
    assert_eq!(cis["kind"], "ClusterImageSet");
    let image_set = cis["metadata"]["name"].as_str().unwrap().to_string();
    assert!(image_set.starts_with("ibi-4.18.0-x86-64-"), "{image_set}");
    assert_eq!(cis["spec"]["releaseImage"], RELEASE);

    let ci = yaml(&hub_dir.join("sites/a17/cluster-instance.yaml"));
    assert_eq!(
        ci["apiVersion"],
        "siteconfig.open-cluster-management.io/v1alpha1"
    );
    assert_eq!(
        ci["metadata"],
        json!({"name": "sno-a17", "namespace": "sno-a17",
            "annotations": {"argocd.argoproj.io/sync-wave": "2"}})
    );
    let s = &ci["spec"];
    assert_eq!(s["clusterName"], "sno-a17");
    assert_eq!(s["baseDomain"], "edge.example.com");
    assert_eq!(s["clusterType"], "SNO");
    assert_eq!(s["clusterImageSetNameRef"], image_set.as_str());
    assert_eq!(s["pullSecretRef"]["name"], "pull-secret");
    assert_eq!(
        s["templateRefs"],
        json!([{"name": "ibi-cluster-templates-v1", "namespace": "open-cluster-management"}])
    );
    assert_eq!(s["machineNetwork"], json!([{"cidr": "192.168.122.0/23"}]));
    assert_eq!(s["additionalNTPSources"], json!(["0.rhel.pool.ntp.org"]));
    assert_eq!(
        s["extraManifestsRefs"],
        json!([{"name": "extra-manifests"}])
    );
    assert!(
        s["sshPublicKey"]
            .as_str()
            .unwrap()
            .starts_with("ssh-ed25519 ")
    );
    let node = &s["nodes"][0];
    assert_eq!(node["hostName"], "sno-a17");
    assert_eq!(node["role"], "master");
    assert_eq!(
        node["bmcAddress"],
        "redfish-virtualmedia+https://10.0.0.9:8000/redfish/v1/Systems/host-0"
    );
    assert_eq!(node["bmcCredentialsName"]["name"], "sno-a17-bmc-secret");
    assert_eq!(node["bootMACAddress"], "52:54:00:aa:17:01");
    assert_eq!(node["bootMode"], "UEFISecureBoot");
    assert_eq!(
        node["rootDeviceHints"],
        json!({"deviceName": "/dev/sda", "minSizeGigabytes": 100})
    );
    assert_eq!(
        node["nodeNetwork"]["interfaces"],
        json!([{"name": "eth0", "macAddress": "52:54:00:aa:17:01"}])
    );
    assert!(node["nodeNetwork"]["config"]["interfaces"].is_array());

    // a18 overrides the domain and network; a19's whole nmstate (a VLAN) is the node's network.
    let s18 = &yaml(&hub_dir.join("sites/a18/cluster-instance.yaml"))["spec"];
    assert_eq!(s18["baseDomain"], "edge2.example.com");
    assert_eq!(s18["machineNetwork"], json!([{"cidr": "10.18.0.0/24"}]));
    assert!(s18["nodes"][0].get("bootMode").is_none());
    let n19 = &yaml(&hub_dir.join("sites/a19/cluster-instance.yaml"))["spec"]["nodes"][0];
    assert_eq!(
        n19["nodeNetwork"]["config"]["interfaces"][1]["name"],
        "eth0.19"
    );
    assert_eq!(
        n19["nodeNetwork"]["interfaces"],
        json!([{"name": "eth0", "macAddress": "52:54:00:aa:19:01"}])
    );

    let bmc = yaml(&hub_dir.join("secrets/a17/bmc-credentials.yaml"));
    assert_eq!(
        bmc["metadata"],
        json!({"name": "sno-a17-bmc-secret", "namespace": "sno-a17",
        "labels": {"cluster.open-cluster-management.io/backup": "true"},
        "annotations": {"argocd.argoproj.io/sync-wave": "1"}})
    );
    assert_eq!(bmc["data"]["username"], b64("admin"));
    assert_eq!(bmc["data"]["password"], b64(BMC_PASSWORD));
    let ps = yaml(&hub_dir.join("secrets/a17/pull-secret.yaml"));
    assert_eq!(ps["type"], "kubernetes.io/dockerconfigjson");
    let dockerconfig =
        openssl::base64::decode_block(ps["data"][".dockerconfigjson"].as_str().unwrap()).unwrap();
    let dockerconfig: Value = serde_json::from_slice(&dockerconfig).unwrap();
    assert_eq!(
        dockerconfig["auths"]["registry.edge.example.com:5000"]["auth"],
        PULL_AUTH
    );
    let em = yaml(&hub_dir.join("sites/a17/extra-manifests.yaml"));
    assert!(
        em["data"]["50-fleet-configmap.yaml"]
            .as_str()
            .unwrap()
            .contains("kind: ConfigMap")
    );
    // The mirrors of install-config's imageDigestSources, as the extra manifest IBIO takes them.
    let idms: Value =
        serde_json::from_str(em["data"]["image-digest-mirror-set.json"].as_str().unwrap()).unwrap();
    assert_eq!(idms["kind"], "ImageDigestMirrorSet");
    assert_eq!(
        idms["spec"]["imageDigestMirrors"][0]["mirrors"][0],
        "registry.edge.example.com:5000/openshift-release-dev/ocp-release"
    );

    kubectl_takes_every_object(&hub_dir, &want);
}

const IDENTITY_AND_OTHER_SECRETS: [&str; 5] = [
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
fn kustomize_applies_in_one_step(hub_dir: &Path, kustomizations: &[PathBuf], objects: usize) {
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
fn identity_is_the_sites(base: &Path, secrets: &Path, site: &str) {
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
fn kubectl_takes_every_object(hub_dir: &Path, files: &[PathBuf]) {
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
struct Discovery {
    addr: std::net::SocketAddr,
}

impl Discovery {
    fn start() -> Discovery {
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

fn answer(mut stream: TcpStream) {
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

#[test]
fn missing_hub_keys_are_all_reported_and_nothing_is_written() {
    let (base, _) = example_base();
    let inventory =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/example-fleet/sites.yaml");
    let out = hub(base.path(), &inventory, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: command line: --release-image: required"),
        "{stderr}"
    );
    for (i, site) in SITES.iter().enumerate() {
        for key in ["bootMACAddress", "bmc"] {
            let field = format!("sites[{i}].{key} (site {site}): required by the hub");
            assert!(stderr.contains(&field), "no {field:?} in:\n{stderr}");
        }
    }
    assert!(!base.path().join("hub").exists());
    assert!(text(&out.stdout).is_empty());
}

#[test]
fn a_bmc_without_a_system_or_password_and_a_bad_boot_mode_are_findings() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    let mut inv: Value = serde_yaml_ng::from_slice(&fs::read(&inventory).unwrap()).unwrap();
    inv["sites"][1]["bmc"]["address"] = json!("https://10.0.0.10:8000");
    inv["sites"][2]["bmc"]["passwordFile"] = json!("no-such-file");
    inv["sites"][0]["bootMode"] = json!("BIOS");
    fs::write(&inventory, serde_yaml_ng::to_string(&inv).unwrap()).unwrap();
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    assert_refused(
        &out,
        base.path(),
        &[
            "sites[0].bootMode (site a17): invalid value \"BIOS\"",
            "sites[1].bmc.address (site a18): the hub's BareMetalHost needs one System",
            "sites[2].bmc (site a19): ",
            "no-such-file",
        ],
    );
}

#[test]
fn only_writes_the_named_sites_and_refuses_unknown_ones() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    let out_dir = base.path().join("gitops");
    let o = out_dir.to_str().unwrap();
    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--only", "a18", "--out", o],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out_dir.join("sites/a18/cluster-instance.yaml").is_file());
    assert!(!out_dir.join("sites/a17").exists());
    assert!(!base.path().join("hub").exists());
    // A site gone from the inventory keeps its folders; the next full run names them.
    fs::create_dir_all(out_dir.join("sites/a99")).unwrap();
    let full = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--out", o],
    );
    let stderr = text(&full.stderr);
    assert!(full.status.success(), "{stderr}");
    assert!(
        stderr.contains("gitops/sites/a99: not a site of this run's inventory"),
        "{stderr}"
    );
    assert!(out_dir.join("sites/a99").is_dir());
    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--only", "a99"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--only: no site named \"a99\""), "{stderr}");
}

#[test]
fn a_site_not_built_gets_no_identity_and_is_named() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--only", "a17"],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("site a17: not built by `ibi create config-image --sites`"),
        "{stderr}"
    );
    let secrets = base.path().join("hub/secrets/a17");
    assert!(secrets.join("pull-secret.yaml").is_file());
    assert!(!secrets.join("admin-kubeconfig.yaml").exists());
}

#[test]
fn an_identity_that_no_longer_fits_the_inventory_is_refused() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    build_sites(base.path(), &inventory);
    // a18 moves to another base domain after it was built; a19's password file is from another
    // build; a17 lost its kubeconfig.
    let mut inv: Value = serde_yaml_ng::from_slice(&fs::read(&inventory).unwrap()).unwrap();
    inv["sites"][1]["baseDomain"] = json!("edge3.example.com");
    fs::write(&inventory, serde_yaml_ng::to_string(&inv).unwrap()).unwrap();
    fs::write(
        base.path().join("sites/a19/auth/kubeadmin-password"),
        "abcde-fghij-kmnop-qrstu",
    )
    .unwrap();
    fs::remove_file(base.path().join("sites/a17/auth/kubeconfig")).unwrap();
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let stderr = assert_refused(
        &out,
        base.path(),
        &[
            "sites/a17/auth/kubeconfig: missing",
            "sites/a18/imagebasedconfig.iso: cluster-configuration/manifest.json: base_domain: the site was built for \"edge2.example.com\", the inventory now says \"edge3.example.com\"",
            "sites/a19/auth/kubeadmin-password: does not match the kubeadmin_password_hash",
        ],
    );
    assert!(!stderr.contains("abcde-fghij-kmnop-qrstu"));
}

#[test]
fn secret_templates_keep_the_keys_and_leave_the_data_out() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    build_sites(base.path(), &inventory);
    // No BMC password on this workstation: the secrets come from elsewhere.
    fs::remove_file(base.path().join("bmc-password")).unwrap();
    let out = hub(
        base.path(),
        &inventory,
        &[
            "--release-image",
            RELEASE,
            "--secret-templates",
            "--only",
            "a17",
        ],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("secret templates without data"), "{stderr}");
    let secrets = base.path().join("hub/secrets/a17");
    for f in IDENTITY_AND_OTHER_SECRETS {
        let p = secrets.join(f);
        assert_eq!(mode(&p), 0o600);
        let body = fs::read_to_string(&p).unwrap();
        assert!(body.starts_with("# A template"), "{f}:\n{body}");
        let doc = yaml(&p);
        assert_eq!(doc["kind"], "Secret");
        let data = doc["data"].as_object().unwrap();
        assert!(!data.is_empty());
        for (k, v) in data {
            assert_eq!(v, "", "{f}: {k} has data");
            assert!(
                body.contains(&format!("#   {k}: ")),
                "{f}: no fill comment for {k}"
            );
        }
    }
    let kc = fs::read_to_string(secrets.join("admin-kubeconfig.yaml")).unwrap();
    assert!(kc.contains("sites/a17/auth/kubeconfig"), "{kc}");
}

#[test]
fn what_a_hub_refuses_is_reported_before_anything_is_written() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    fs::write(
        base.path()
            .join("extra-manifests/99-a-name-far-too-long-for-a-hub.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n",
    )
    .unwrap();
    fs::write(
        base.path().join("extra-manifests/invoker-cm.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: y\n",
    )
    .unwrap();
    // A pull-secret entry without auth (a credsStore), which ibi accepts and IBIO does not.
    let ic = base.path().join("install-config.yaml");
    let text_ic = fs::read_to_string(&ic).unwrap().replace(
        r#"{"auths":{"registry.edge.example.com:5000":{"auth":"ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk"}}}"#,
        r#"{"auths":{"registry.edge.example.com:5000":{"auth":"ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk"},"quay.io":{"credsStore":"desktop"}}}"#,
    );
    fs::write(&ic, text_ic).unwrap();
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let stderr = assert_refused(
        &out,
        base.path(),
        &[
            "extra-manifests/99-a-name-far-too-long-for-a-hub.yaml: the name has 37 characters",
            "extra-manifests/invoker-cm.yaml: the name is one the hub writes itself",
            "install-config.yaml:28: pullSecret: the entry for \"quay.io\" has no auth",
        ],
    );
    // A value every site takes from the base is one finding, not one per site.
    assert_eq!(stderr.matches("has no auth").count(), 1, "{stderr}");
}

/// Issue 34 item 1: a site whose nmstate names no `mac-address` got `nodeNetwork.interfaces: []`,
/// which the ClusterInstance CRD refuses (`minItems: 1`, siteconfig ecff291f,
/// config/crd/bases/siteconfig.open-cluster-management.io_clusterinstances.yaml): the list is left
/// out, the nmstate config kept.
#[test]
fn a_network_that_names_no_mac_gets_no_interfaces_list() {
    let (base, mut inv) = example_base();
    let config = &mut inv["sites"][2]["networkConfig"]["interfaces"][0];
    config.as_object_mut().unwrap().remove("mac-address");
    let inventory = hub_inventory(base.path(), inv);
    let out = hub(
        base.path(),
        &inventory,
        &[
            "--release-image",
            "quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ci = yaml(&base.path().join("hub/sites/a19/cluster-instance.yaml"));
    let nn = &ci["spec"]["nodes"][0]["nodeNetwork"];
    assert!(nn.get("interfaces").is_none(), "{nn}");
    assert!(nn["config"]["interfaces"].is_array(), "{nn}");
}

/// Issue 34 item 8: an extra-manifests ConfigMap over 256 KiB (here a 300 KB manifest, within the
/// API server's 1 MiB) cannot be applied client-side (its last-applied annotation is bounded): the
/// run says to apply it server-side.
#[test]
fn a_config_map_too_big_for_client_side_apply_is_named() {
    let (base, inv) = example_base();
    let big = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  namespace: default\ndata:\n  blob: \"{}\"\n",
        "x".repeat(300 * 1024)
    );
    fs::write(base.path().join("extra-manifests/big.yaml"), big).unwrap();
    let inventory = hub_inventory(base.path(), inv);
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("a19/extra-manifests.yaml: ")
            && err.contains(
                "apply it with `kubectl apply --server-side` (Argo CD: ServerSideApply=true)"
            ),
        "{err}"
    );
}

/// Issue 34 item 3: through the hub a site's manifest.json carries only `machine_networks` (IBIO
/// bc1ddc61, its installer's clusterconfiguration.go), which a 4.16–4.19 seed does not read: a
/// proxied site of such a seed fails post-pivot. The seed from BASE's installation config (or
/// `--seed`, the bundled 4.16.0 OCI seed here) makes it a finding naming the site and the seed;
/// without one, every proxied site is a warning.
#[test]
fn a_proxied_site_of_a_pre_4_20_seed_is_refused_and_unknown_seeds_warn() {
    let (base, inv) = example_base();
    let ic = base.path().join("install-config.yaml");
    let base_ic = fs::read_to_string(&ic).unwrap();
    fs::write(
        &ic,
        format!(
            "{base_ic}proxy:\n  httpProxy: http://proxy.example.com:3128\n  noProxy: .cluster.local\n"
        ),
    )
    .unwrap();
    let inventory = hub_inventory(base.path(), inv);
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    for site in SITES {
        assert!(
            err.contains(&format!("site {site} has a proxy: through the hub its manifest.json carries only machine_networks, which a seed before 4.20 does not read")),
            "{err}"
        );
    }
    common::write_example_install(base.path());
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("sites[0].name (site a17): has a proxy, and its seed 4.16.0 (seedVersion in ")
            && err.contains("reads only machine_network, which the hub's image-based-install-operator does not write"),
        "{err}"
    );
    fs::remove_file(base.path().join("image-based-installation-config.yaml")).unwrap();
    let seed = format!(
        "oci:{}:4.16.0",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("seed-fixtures/seed")
            .display()
    );
    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--seed", &seed],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("its seed 4.16.0 (--seed {seed})")),
        "{err}"
    );
}

/// Issue 34 item 4: a site whose site phase deploy ran (its record written as deploy writes it) is
/// a running cluster: a ClusterInstance would make the hub attach media and reboot it. Refused by
/// default; `--adopt` imports it into ACM (ManagedCluster, its auto-import Secret holding the site's
/// kubeconfig, KlusterletAddonConfig, as SiteConfig's templates write them); `--reinstall` asks for
/// the ClusterInstance all the same.
#[test]
fn a_running_cluster_is_refused_adopted_or_reinstalled_as_asked() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    build_sites(base.path(), &inventory);
    let t = 1_790_000_000u64;
    let record = json!({"version": 1, "site": "a17", "phases": {
        "factory": {"state": "done", "step": "eject", "started": t, "updated": t + 900, "finished": t + 900, "booted": t + 10},
        "site": {"state": "done", "step": "eject", "started": t + 1000, "updated": t + 2000, "finished": t + 2000, "booted": t + 1010}}});
    fs::create_dir_all(base.path().join(".ibi/deploy")).unwrap();
    fs::write(base.path().join(".ibi/deploy/a17.json"), record.to_string()).unwrap();

    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("sites[0].name (site a17): its cluster runs already (deploy's site phase done): a ClusterInstance would make the hub attach media and reboot it"),
        "{err}"
    );
    assert!(!base.path().join("hub").exists(), "nothing written");

    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--adopt"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let a17 = base.path().join("hub/sites/a17");
    assert!(!a17.join("cluster-instance.yaml").exists());
    let mc = yaml(&a17.join("managed-cluster.yaml"));
    assert_eq!(
        (
            &mc["kind"],
            &mc["metadata"]["name"],
            &mc["spec"]["hubAcceptsClient"]
        ),
        (&json!("ManagedCluster"), &json!("sno-a17"), &json!(true))
    );
    let kac = yaml(&a17.join("klusterlet-addon-config.yaml"));
    assert_eq!(kac["spec"]["clusterNamespace"], "sno-a17");
    let import = base.path().join("hub/secrets/a17/auto-import-secret.yaml");
    assert_eq!(yaml(&import)["metadata"]["name"], "auto-import-secret");
    assert_eq!(
        secret_data(&import, "kubeconfig"),
        fs::read(base.path().join("sites/a17/auth/kubeconfig")).unwrap()
    );
    assert_eq!(mode(&import), 0o600);
    assert!(
        base.path()
            .join("hub/sites/a18/cluster-instance.yaml")
            .exists()
    );

    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--reinstall", "a17"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(a17.join("cluster-instance.yaml").exists());
}
