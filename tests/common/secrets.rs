//! What the tests of tests/fast/secrets.rs and tests/tools/secrets.rs share: one file of tests,
//! split by what each test needs (docs/architecture.md, "Tests").

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) const SITE: &str = "site";
pub(crate) const INSTALL: &str = "install";
pub(crate) const INSTALL_CONFIG: &str = "image-based-installation-config.yaml";
/// The auth of the examples' fake pull secret, replaced by the marked one.
pub(crate) const EXAMPLE_AUTH: &str = "ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk";
pub(crate) const NO_DISK: &str = "/dev/disk/by-id/ibi-secrets-test-no-such-disk";
pub(crate) const FLEET: &str = "fleet";
/// The fleet's one site, built into `fleet/sites/s/`.
pub(crate) const FLEET_SITE: &str = "fleet/sites/s";
pub(crate) const HUB_SECRETS: &str = "fleet/hub/secrets/s";

/// A secret, the needles that find it and the places it may be.
pub(crate) struct Secret {
    pub(crate) name: String,
    pub(crate) needles: Vec<Vec<u8>>,
    /// Files (relative to the test root) and streams (`stdout of LABEL`) allowed to hold it.
    pub(crate) allowed: Vec<String>,
    /// Where it must be found, proving the needles work.
    pub(crate) home: String,
}

/// One command's run.
pub(crate) struct Ran {
    pub(crate) label: String,
    pub(crate) out: Output,
}

/// The test's directories and how to run ibi in them.
pub(crate) struct Root {
    pub(crate) dir: tempfile::TempDir,
}

impl Root {
    pub(crate) fn new() -> Root {
        let root = Root {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        for d in [
            "home",
            "cache",
            "tmp",
            SITE,
            INSTALL,
            "tmpl-site",
            "tmpl-install",
            "agent",
            FLEET,
        ] {
            fs::create_dir(root.path(d)).expect("mkdir");
        }
        root
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub(crate) fn arg(&self, rel: &str) -> String {
        self.path(rel)
            .to_str()
            .expect("UTF-8 temp path")
            .to_string()
    }

    /// Runs `ibi ARGS` with `umask` (through sh, as a process cannot set it for a child otherwise
    /// without libc) and HOME, the cache and TMPDIR inside the root.
    pub(crate) fn ibi(&self, umask: &str, args: &[String]) -> Output {
        Command::new("sh")
            .args([
                "-c",
                r#"umask "$1" && shift && exec "$@""#,
                "ibi-umask",
                umask,
            ])
            .arg(env!("CARGO_BIN_EXE_ibi"))
            .args(args)
            .env_remove("RUST_LOG")
            .env_remove("OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE")
            .env("HOME", self.path("home"))
            .env("XDG_CACHE_HOME", self.path("cache"))
            .env("TMPDIR", self.path("tmp"))
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .output()
            .expect("running ibi")
    }
}

/// The examples with a marked pull secret, the password random so no other test's output matches.
pub(crate) fn write_inputs(root: &Root) -> String {
    let mut rand = [0u8; 12];
    openssl::rand::rand_bytes(&mut rand).unwrap();
    let hex: String = rand.iter().map(|b| format!("{b:02x}")).collect();
    let user_pass = format!("ibi-secrets-test:IBI-SECRET-MARKER-{hex}");
    let auth = openssl::base64::encode_block(user_pass.as_bytes());
    let site = copy_example();
    copy_tree(site.path(), &root.path(SITE));
    let ic = root.path(SITE).join("install-config.yaml");
    let text = fs::read_to_string(&ic).unwrap();
    assert!(text.contains(EXAMPLE_AUTH), "the example's auth changed");
    fs::write(&ic, text.replace(EXAMPLE_AUTH, &auth)).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = fs::read_to_string(
        repo.join("seed-fixtures/example-install")
            .join(INSTALL_CONFIG),
    )
    .unwrap()
    .replace(EXAMPLE_AUTH, &auth)
    .replace(
        "oci:seed-fixtures/seed:",
        &format!("oci:{}:", repo.join("seed-fixtures/seed").display()),
    );
    fs::write(root.path(INSTALL).join(INSTALL_CONFIG), text).unwrap();
    // The fleet of one: the site's inputs as the base (not its extra manifest, whose name is longer
    // than a hub takes), a BMC for the hub.
    for f in ["install-config.yaml", "image-based-config.yaml"] {
        fs::copy(root.path(SITE).join(f), root.path(FLEET).join(f)).unwrap();
    }
    fs::write(
        root.path(FLEET).join("bmc-password"),
        format!("IBI-BMC-MARKER-{hex}\n"),
    )
    .unwrap();
    fs::write(
        root.path(FLEET).join("sites.yaml"),
        "sites:\n  - name: s\n    hostname: sno-a17\n    bootMACAddress: 52:54:00:aa:17:01\n    bmc:\n      \
         address: https://127.0.0.1:8000/redfish/v1/Systems/1\n      user: admin\n      passwordFile: bmc-password\n",
    )
    .unwrap();
    auth
}

/// The fleet commands, after the single site's identity was copied into the fleet's site.
pub(crate) fn fleet_steps(root: &Root) -> Vec<(&'static str, Vec<String>, i32)> {
    let id = root.path(FLEET_SITE).join(".ibi");
    fs::create_dir_all(&id).unwrap();
    fs::copy(
        root.path("site/.ibi/identity.json"),
        id.join("identity.json"),
    )
    .unwrap();
    let (fleet, sites) = (root.arg(FLEET), root.arg("fleet/sites.yaml"));
    let hub = |extra: &[&str]| {
        let mut args = vec![
            "create",
            "hub-manifests",
            "--dir",
            &fleet,
            "--sites",
            &sites,
            "--release-image",
            "quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64",
        ];
        args.extend_from_slice(extra);
        trace(&args)
    };
    let templates = root.arg("fleet/hub-templates");
    vec![
        (
            "create config-image --sites",
            trace(&["create", "config-image", "--dir", &fleet, "--sites", &sites]),
            0,
        ),
        ("create hub-manifests", hub(&[]), 0),
        (
            "create hub-manifests --secret-templates",
            hub(&["--secret-templates", "--out", &templates]),
            0,
        ),
    ]
}

pub(crate) fn trace(args: &[&str]) -> Vec<String> {
    let mut v = vec!["--log-level".to_string(), "trace".to_string()];
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// Every command, at trace level; `(label, expected exit code)`.
pub(crate) fn run_all(root: &Root) -> Vec<Ran> {
    let base_iso =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/coreos-live-synthetic.iso");
    let (site, install) = (root.arg(SITE), root.arg(INSTALL));
    let config_iso = root.arg("site/imagebasedconfig.iso");
    let live_iso = root.arg("install/rhcos-ibi.iso");
    let steps: Vec<(&str, Vec<String>, i32)> = vec![
        (
            "create config-template",
            trace(&["create", "config-template", "--dir", &root.arg("tmpl-site")]),
            0,
        ),
        (
            "create image-config-template",
            trace(&[
                "create",
                "image-config-template",
                "--dir",
                &root.arg("tmpl-install"),
            ]),
            0,
        ),
        (
            "create config-image",
            trace(&["create", "config-image", "--dir", &site]),
            0,
        ),
        (
            "create config-image (identity reused)",
            trace(&["create", "config-image", "--dir", &site]),
            0,
        ),
        (
            "create image",
            trace(&[
                "create",
                "image",
                "--dir",
                &install,
                "--base-iso",
                base_iso.to_str().unwrap(),
            ]),
            0,
        ),
        ("inspect config ISO", trace(&["inspect", &config_iso]), 0),
        (
            "inspect --ignition config ISO",
            trace(&["inspect", "--ignition", &config_iso]),
            1,
        ),
        (
            "inspect installation ISO",
            trace(&["inspect", &live_iso]),
            0,
        ),
        (
            "inspect --ignition installation ISO",
            trace(&["inspect", "--ignition", &live_iso]),
            0,
        ),
    ];
    let run = |(label, args, code): (&str, Vec<String>, i32)| {
        let out = root.ibi("022", &args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ran {
            label: label.to_string(),
            out,
        }
    };
    let mut ran: Vec<Ran> = steps.into_iter().map(run).collect();
    // After the single site's config-image: the fleet's site takes its identity.
    ran.extend(fleet_steps(root).into_iter().map(run));
    if cfg!(feature = "agent") {
        let ignition = &ran
            .iter()
            .find(|r| r.label == "inspect --ignition installation ISO")
            .expect("ran")
            .out
            .stdout;
        ran.extend(run_agent(root, ignition));
    } else {
        crate::common::missing("secrets", "the agent commands need --features agent");
    }
    ran
}

/// `agent install` on the installation ISO's own configuration and pull secret, the disk swapped
/// for one that does not exist: it must fail before any step, creating nothing. Then `agent
/// fetch-config` with no device to find.
pub(crate) fn run_agent(root: &Root, ignition: &[u8]) -> Vec<Ran> {
    let config: Value = serde_json::from_slice(ignition).expect("Ignition JSON");
    let mut cfg: Value =
        serde_json::from_slice(&ignition_file(&config, "/var/tmp/ibi-configuration.json")).unwrap();
    cfg["installationDisk"] = Value::from(NO_DISK);
    assert!(!Path::new(NO_DISK).exists());
    let agent = root.path("agent");
    fs::write(agent.join("ibi-configuration.json"), cfg.to_string()).unwrap();
    let pull_secret = ignition_file(&config, "/var/tmp/pull-secret.json");
    fs::write(agent.join("pull-secret.json"), pull_secret).unwrap();
    let a = |rel: &str| root.arg(&format!("agent/{rel}"));
    let install = trace(&[
        "agent",
        "install",
        "-f",
        &a("ibi-configuration.json"),
        "--authfile",
        &a("pull-secret.json"),
        "--root",
        &a("root"),
        "--sysroot-mount",
        &a("sysroot"),
        "--containers-mount",
        &a("containers"),
        "--state-file",
        &a("state/state.json"),
        "--status-file",
        &a("state/status.json"),
        "--registries-conf",
        &a("registries.conf"),
        "--coreos-installer",
        "/bin/false",
    ]);
    let out = root.ibi("022", &install);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "agent install: {err}");
    assert!(err.contains(NO_DISK), "fails on the disk: {err}");
    let mut left: Vec<_> = fs::read_dir(&agent)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["ibi-configuration.json", "pull-secret.json"],
        "agent install created files before failing"
    );
    let fetch = trace(&[
        "agent",
        "fetch-config",
        "--target",
        &a("target"),
        "--timeout",
        "0",
        "--device",
        "ibi-secrets-test-no-such-device",
    ]);
    let out2 = root.ibi("022", &fetch);
    assert_eq!(out2.status.code(), Some(1), "agent fetch-config");
    assert!(
        !agent.join("target").exists(),
        "fetch-config created its target"
    );
    vec![
        Ran {
            label: "agent install".into(),
            out,
        },
        Ran {
            label: "agent fetch-config".into(),
            out: out2,
        },
    ]
}

/// The decoded contents of one `storage.files` entry of an Ignition config.
pub(crate) fn ignition_file(config: &Value, path: &str) -> Vec<u8> {
    let files = config["storage"]["files"].as_array().expect("files");
    let f = files
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("{path} missing"));
    let src = f["contents"]["source"].as_str().expect("source");
    let b64 = src.split_once(";base64,").expect("base64 data URL").1;
    openssl::base64::decode_block(b64).expect("base64")
}

/// `s` itself and its base64 encodings at the three alignments: whatever precedes it in an encoded
/// blob, one of the three appears there.
pub(crate) fn needles(s: &[u8]) -> Vec<Vec<u8>> {
    let mut v = vec![s.to_vec()];
    for k in 0..3 {
        let body = &s[k..];
        let body = &body[..body.len() / 3 * 3];
        assert!(body.len() >= 12, "secret too short to search for encoded");
        v.push(openssl::base64::encode_block(body).into_bytes());
    }
    v
}

/// Two base64 lines of a PEM body: enough to be unique, short enough to survive re-wrapping as
/// long as lines stay 64 characters (PEM) or are joined (JSON strings keep the `\n` escapes
/// between them).
pub(crate) fn key_needles(pem: &str) -> Vec<Vec<u8>> {
    let body: Vec<&str> = pem
        .lines()
        .filter(|l| !l.starts_with("-----") && l.len() == 64)
        .collect();
    assert!(body.len() > 4, "not a PEM key: {} lines", body.len());
    let mut v = needles(body[1].as_bytes());
    v.extend(needles(body[body.len() / 2].as_bytes()));
    v
}

pub(crate) fn secrets(root: &Root, auth: &str) -> Vec<Secret> {
    let id_rel = "site/.ibi/identity.json";
    let id: Value = serde_json::from_slice(&fs::read(root.path(id_rel)).unwrap()).unwrap();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let user_pass = openssl::base64::decode_block(auth).unwrap();
    let password = user_pass.split(|&b| b == b':').nth(1).unwrap().to_vec();
    let mut out = vec![
        Secret {
            name: "pull secret auth".into(),
            needles: [needles(auth.as_bytes()), needles(&password)].concat(),
            allowed: s(&[
                "site/install-config.yaml",
                "site/imagebasedconfig.iso",
                "install/image-based-installation-config.yaml",
                "install/rhcos-ibi.iso",
                "agent/pull-secret.json",
                "stdout of inspect --ignition installation ISO",
            ]),
            home: "site/imagebasedconfig.iso".into(),
        },
        Secret {
            name: "kubeadmin password".into(),
            needles: needles(id["kubeadmin_password"].as_str().unwrap().as_bytes()),
            allowed: s(&["site/auth/kubeadmin-password", id_rel]),
            home: "site/auth/kubeadmin-password".into(),
        },
        Secret {
            name: "kubeadmin password hash".into(),
            needles: needles(id["kubeadmin_password_hash"].as_str().unwrap().as_bytes()),
            allowed: s(&[id_rel, "site/imagebasedconfig.iso"]),
            home: "site/imagebasedconfig.iso".into(),
        },
    ];
    // Where each generated key may be: the signers lifecycle-agent needs travel in the ISO, the
    // admin client key in the kubeconfig; the admin signer key never leaves the identity.
    let keys: [(&str, &[&str]); 6] = [
        ("admin_kubeconfig_signer", &[]),
        ("admin_kubeconfig_client", &["site/auth/kubeconfig"]),
        (
            "kube_apiserver_localhost_signer",
            &["site/imagebasedconfig.iso"],
        ),
        (
            "kube_apiserver_service_network_signer",
            &["site/imagebasedconfig.iso"],
        ),
        ("kube_apiserver_lb_signer", &["site/imagebasedconfig.iso"]),
        ("ingress_operator_signer", &["site/imagebasedconfig.iso"]),
    ];
    let crypto = id["crypto"].as_object().expect("crypto");
    let pems: Vec<&str> = crypto
        .values()
        .filter_map(|v| v["key_pem"].as_str())
        .collect();
    assert_eq!(
        pems.len(),
        keys.len(),
        "a key was added: list where it may go"
    );
    for (name, places) in keys {
        let pem = crypto[name]["key_pem"].as_str().expect(name);
        assert!(pem.contains("PRIVATE KEY-----"), "{name}");
        let mut allowed = vec![id_rel.to_string()];
        allowed.extend(places.iter().map(|p| p.to_string()));
        out.push(Secret {
            name: format!("{name} private key"),
            needles: key_needles(pem),
            home: allowed.last().unwrap().clone(),
            allowed,
        });
    }
    // The fleet's site holds the same identity: each secret may also be where the fleet keeps it.
    for secret in &mut out {
        let fleet: Vec<String> = secret
            .allowed
            .iter()
            .flat_map(|p| fleet_places(p))
            .collect();
        secret.allowed.extend(fleet);
    }
    let bmc = fs::read_to_string(root.path("fleet/bmc-password")).unwrap();
    out.push(Secret {
        name: "BMC password".into(),
        needles: needles(bmc.trim_end().as_bytes()),
        allowed: vec![
            "fleet/bmc-password".into(),
            format!("{HUB_SECRETS}/bmc-credentials.yaml"),
        ],
        home: format!("{HUB_SECRETS}/bmc-credentials.yaml"),
    });
    out
}

/// Where the fleet of one keeps what the single site keeps at `rel`: its own copy, and the hub's
/// Secret holding it.
pub(crate) fn fleet_places(rel: &str) -> Vec<String> {
    let site = |f: &str| format!("{FLEET_SITE}/{f}");
    let hub = |f: &str| format!("{HUB_SECRETS}/{f}");
    match rel {
        "site/install-config.yaml" => {
            vec!["fleet/install-config.yaml".into(), hub("pull-secret.yaml")]
        }
        "site/imagebasedconfig.iso" => vec![
            site("imagebasedconfig.iso"),
            hub("seed-reconfiguration.yaml"),
        ],
        "site/auth/kubeadmin-password" => {
            vec![site("auth/kubeadmin-password"), hub("admin-password.yaml")]
        }
        "site/auth/kubeconfig" => vec![site("auth/kubeconfig"), hub("admin-kubeconfig.yaml")],
        "site/.ibi/identity.json" => vec![site(".ibi/identity.json")],
        _ => Vec::new(),
    }
}

/// Every regular file under `dir`, by path relative to `base`; symlinks are not followed.
pub(crate) fn files_under(base: &Path, dir: &Path, out: &mut BTreeMap<String, PathBuf>) {
    for e in fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("entry").path();
        let ft = fs::symlink_metadata(&p).expect("lstat").file_type();
        if ft.is_dir() {
            files_under(base, &p, out);
        } else if ft.is_file() {
            let rel = p.strip_prefix(base).unwrap().to_str().unwrap().to_string();
            out.insert(rel, p);
        }
    }
}

pub(crate) fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

pub(crate) fn holds(hay: &[u8], s: &Secret) -> bool {
    s.needles.iter().any(|n| contains(hay, n))
}

/// What each output's mode must be, under any umask.
pub(crate) const PRIVATE_OUTPUTS: [(&str, u32); 9] = [
    ("site/imagebasedconfig.iso", 0o600),
    ("site/auth", 0o700),
    ("site/auth/kubeconfig", 0o600),
    ("site/auth/kubeadmin-password", 0o600),
    ("site/.ibi", 0o700),
    ("site/.ibi/identity.json", 0o600),
    // docs/create-image.md: 0600, it holds the pull secret.
    ("install/rhcos-ibi.iso", 0o600),
    // README: the template is 0600; it is where the user puts a pull secret next.
    ("tmpl-site/image-based-config.yaml", 0o600),
    // Not documented; it receives the pull secret too, so it is held to the same rule.
    ("tmpl-install/image-based-installation-config.yaml", 0o600),
];
