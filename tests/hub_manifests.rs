//! `ibi create hub-manifests` on the bundled example fleet: the layout, the secrets' modes, no secret
//! in the output (at trace level), the ClusterInstance's fields, every object taken by Debian's kubectl
//! (`kubectl apply --dry-run=client`, against a stand-in for a hub's API discovery), and the findings
//! of an inventory without what the hub needs (all at once, nothing written).
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
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let hub_dir = base.path().join("hub");
    // Nothing secret on the terminal: not the BMC password, not the pull secret, not their base64.
    let b64 = |s: &str| openssl::base64::encode_block(s.as_bytes());
    for secret in [BMC_PASSWORD, PULL_AUTH, &b64(BMC_PASSWORD)] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} shown"
        );
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
        for f in ["pull-secret.yaml", "bmc-credentials.yaml"] {
            want.push(hub_dir.join("secrets").join(site).join(f));
        }
    }
    let listed: Vec<PathBuf> = stdout.lines().map(PathBuf::from).collect();
    assert_eq!(listed, want);
    assert_eq!(mode(&hub_dir.join("secrets")), 0o700);
    for site in SITES {
        let dir = hub_dir.join("secrets").join(site);
        assert_eq!(mode(&dir), 0o700);
        for f in ["pull-secret.yaml", "bmc-credentials.yaml"] {
            assert_eq!(mode(&dir.join(f)), 0o600, "{site}/{f}");
        }
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
    assert_eq!(cis["metadata"]["name"], "ibi-4.18.0-x86-64");
    assert_eq!(cis["spec"]["releaseImage"], RELEASE);

    let ci = yaml(&hub_dir.join("sites/a17/cluster-instance.yaml"));
    assert_eq!(
        ci["apiVersion"],
        "siteconfig.open-cluster-management.io/v1alpha1"
    );
    assert_eq!(
        ci["metadata"],
        json!({"name": "sno-a17", "namespace": "sno-a17"})
    );
    let s = &ci["spec"];
    assert_eq!(s["clusterName"], "sno-a17");
    assert_eq!(s["baseDomain"], "edge.example.com");
    assert_eq!(s["clusterType"], "SNO");
    assert_eq!(s["clusterImageSetNameRef"], "ibi-4.18.0-x86-64");
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
        "labels": {"cluster.open-cluster-management.io/backup": "true"}})
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

    kubectl_takes_every_object(&hub_dir, &want);
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
            "-R",
            "-f",
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
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    for want in [
        "sites[0].bootMode (site a17): invalid value \"BIOS\"",
        "sites[1].bmc.address (site a18): the hub's BareMetalHost needs one System",
        "sites[2].bmc (site a19): ",
        "no-such-file",
    ] {
        assert!(stderr.contains(want), "no {want:?} in:\n{stderr}");
    }
    assert!(!base.path().join("hub").exists());
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
    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--only", "a99"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--only: no site named \"a99\""), "{stderr}");
}
