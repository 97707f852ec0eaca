//! Golden tests of the `hostAgent: ibi` variant: the fetch script, `ibi-agent-install.service` with its
//! drop-in, no trace of lca-cli, and every other file and unit identical to the lca variant's.

use serde_json::{Value, json};

use super::*;
use crate::config::Proxy;
use crate::ignition::{Config, File, to_json};
use crate::install_image::ignition::installation::*;

const IMAGE: &str = "quay.io/openshift-kni/ibi:4.16.0";
const PULL_SECRET: &str = r#"{"auths":{"example.com":{"auth":"c3VwZXItc2VjcmV0Cg=="}}}"#;

fn lca() -> InstallationIgnitionInputs {
    InstallationIgnitionInputs {
        seed_image: "quay.io/openshift-kni/seed-image:4.16.0".into(),
        seed_version: "4.16.0".into(),
        installation_disk: "/dev/vda".into(),
        pull_secret: PULL_SECRET.into(),
        ..Default::default()
    }
}

fn ibi() -> InstallationIgnitionInputs {
    InstallationIgnitionInputs {
        host_agent_image: Some(IMAGE.into()),
        ..lca()
    }
}

fn lca_full() -> InstallationIgnitionInputs {
    InstallationIgnitionInputs {
        ssh_key: "ssh-ed25519 AAAA user@host".into(),
        extra_partition_start: Some("-40G".into()),
        release_registry: "mirror.quay.io".into(),
        network_config: Some("interfaces: []\n".into()),
        proxy: Some(Proxy {
            http_proxy: "http://proxy:3128".into(),
            https_proxy: "http://u:p%40ss@proxy:3128".into(),
            no_proxy: ".example.com,10.0.0.0/8".into(),
        }),
        image_digest_sources: vec![crate::config::ImageDigestSource {
            source: "quay.io".into(),
            mirrors: vec!["mirror-quay.io".into()],
            source_policy: None,
        }],
        additional_trust_bundle: "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n"
            .into(),
        post_sh: Some(b"#!/bin/bash\necho post\n".to_vec()),
        ..lca()
    }
}

fn ibi_full() -> InstallationIgnitionInputs {
    InstallationIgnitionInputs {
        host_agent_image: Some(IMAGE.into()),
        ..lca_full()
    }
}

fn build(i: &InstallationIgnitionInputs) -> Config {
    build_installation_ignition(i).unwrap()
}

fn text(f: &File) -> String {
    String::from_utf8(f.data().unwrap()).unwrap()
}

fn file_text(c: &Config, path: &str) -> String {
    let f = c.storage.files.iter().find(|f| f.path == path);
    text(f.unwrap_or_else(|| panic!("no file {path}")))
}

#[test]
fn files_units_and_modes() {
    let c = build(&ibi());
    let files: Vec<(&str, u32)> = c
        .storage
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.mode.unwrap()))
        .collect();
    let want = [
        ("/usr/local/bin/fetch-ibi.sh", 0o555),
        ("/var/tmp/ibi-configuration.json", 0o600),
        ("/var/tmp/network-config.yaml", 0o600),
        ("/var/tmp/pull-secret.json", 0o600),
    ];
    assert_eq!(files, want);
    let names: Vec<&str> = c.systemd.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(
        names,
        ["ibi-agent-install.service", "network-config.service"]
    );
}

#[test]
fn fetch_script_copies_ibi_out_of_the_image() {
    let script = file_text(&build(&ibi()), FETCH_IBI_SCRIPT_PATH);
    assert_eq!(script, FETCH_IBI_SCRIPT);
    let steps = [
        "set -e\n",
        "image=\"${1:-${HOST_AGENT_IMAGE}}\"",
        "authfile=\"${PULL_SECRET_FILE:-/var/tmp/pull-secret.json}\"",
        "exit 1",
        "while ! podman create --authfile \"${authfile}\" --name ibi-agent \"${image}\" /usr/local/bin/ibi; do",
        "sleep 10",
        "podman cp ibi-agent:/usr/local/bin/ibi /usr/local/bin/ibi",
        "podman rm ibi-agent",
    ];
    let mut at = 0;
    for step in steps {
        let found = script[at..]
            .find(step)
            .unwrap_or_else(|| panic!("{step:?} missing or out of order"));
        at += found + step.len();
    }
    assert_eq!(&script[at..], "\n", "nothing runs after the copy");
    assert!(script.starts_with("#!/bin/bash\n"));
    let binary_in_image = crate::config::HOST_AGENT_BINARY_IN_IMAGE;
    assert!(script.contains(&format!("ibi-agent:{binary_in_image} ")));
    let syntax = std::process::Command::new("bash")
        .args(["-n", "-c", &script])
        .status()
        .unwrap();
    assert!(syntax.success(), "bash -n rejects the script");
}

#[test]
fn unit_is_the_shipped_file_enabled_with_its_drop_in() {
    let c = build(&ibi());
    let got = serde_json::to_value(&c.systemd.units[0]).unwrap();
    let want = json!({
        "contents": std::fs::read_to_string(
            concat!(env!("CARGO_MANIFEST_DIR"), "/units/ibi-agent-install.service")).unwrap(),
        "enabled": true,
        "name": "ibi-agent-install.service",
        "dropins": [{
            "name": "10-ibi-host-agent.conf",
            "contents": "[Service]\nEnvironment=HOST_AGENT_IMAGE=quay.io/openshift-kni/ibi:4.16.0\n",
        }],
    });
    assert_eq!(got, want);
}

#[test]
fn unit_fetches_relabels_then_runs_after_the_network() {
    let lines: Vec<&str> = IBI_AGENT_SERVICE.lines().collect();
    let pos = |l: &str| {
        lines
            .iter()
            .position(|x| *x == l)
            .unwrap_or_else(|| panic!("missing {l:?}"))
    };
    let fetch = pos(&format!("ExecStartPre={FETCH_IBI_SCRIPT_PATH}"));
    let chcon = pos("ExecStartPre=/usr/bin/chcon -t install_exec_t /usr/local/bin/ibi");
    let run = pos("ExecStart=/usr/local/bin/ibi agent install -f /var/tmp/ibi-configuration.json");
    assert!(fetch < chcon && chcon < run);
    for l in [
        "After=network-config.service",
        "After=network-online.target",
        "WorkingDirectory=/",
        "TimeoutStartSec=infinity",
        "WantedBy=multi-user.target",
    ] {
        pos(l);
    }
}

#[test]
fn drop_in_carries_the_installers_proxy_lines() {
    let c = build(&ibi_full());
    let want = "[Service]\nEnvironment=HOST_AGENT_IMAGE=quay.io/openshift-kni/ibi:4.16.0\nEnvironment=HTTP_PROXY=\"http://proxy:3128\"\nEnvironment=http_proxy=\"http://proxy:3128\"\nEnvironment=HTTPS_PROXY=\"http://u:p%%40ss@proxy:3128\"\nEnvironment=https_proxy=\"http://u:p%%40ss@proxy:3128\"\nEnvironment=NO_PROXY=\".example.com,10.0.0.0/8\"\nEnvironment=no_proxy=\".example.com,10.0.0.0/8\"\n";
    assert_eq!(c.systemd.units[0].extra["dropins"][0]["contents"], want);
}

#[test]
fn lca_cli_is_not_referenced() {
    let c = build(&ibi_full());
    let mut texts: Vec<String> = c.storage.files.iter().map(text).collect();
    for u in &c.systemd.units {
        texts.push(u.contents.clone().unwrap_or_default());
        texts.push(
            u.extra
                .get("dropins")
                .map(Value::to_string)
                .unwrap_or_default(),
        );
    }
    for t in &texts {
        assert!(!t.contains("lca-cli"), "{t}");
        assert!(!t.contains(INSTALL_SCRIPT_PATH), "{t}");
    }
    assert!(!c.systemd.units.iter().any(|u| u.name == INSTALL_UNIT));
    let json = String::from_utf8(to_json(&c).unwrap()).unwrap();
    assert!(!json.contains("lca-cli"));
}

#[test]
fn everything_else_is_the_lca_variants() {
    let (ours, theirs) = (build(&ibi_full()), build(&lca_full()));
    assert_eq!(ours.passwd, theirs.passwd);
    let others = |c: &Config| -> Vec<File> {
        let skip = [FETCH_IBI_SCRIPT_PATH, INSTALL_SCRIPT_PATH];
        let files = c
            .storage
            .files
            .iter()
            .filter(|f| !skip.contains(&f.path.as_str()));
        files.cloned().collect()
    };
    assert_eq!(others(&ours), others(&theirs));
    assert_eq!(others(&ours).len(), 6);
    // network-config.service differs only in the unit its Before= names.
    let mut network = theirs.systemd.units[1].clone();
    network.contents = network
        .contents
        .map(|t| t.replace(INSTALL_UNIT, IBI_AGENT_UNIT));
    assert_eq!(ours.systemd.units[1], network);
    assert_eq!(ours.systemd.units[1].name, NETWORK_CONFIG_UNIT);
    // The script takes the install script's place in the build order.
    let paths =
        |c: &Config| -> Vec<String> { c.storage.files.iter().map(|f| f.path.clone()).collect() };
    let swapped: Vec<String> = paths(&theirs)
        .into_iter()
        .map(|p| {
            if p == INSTALL_SCRIPT_PATH {
                FETCH_IBI_SCRIPT_PATH.into()
            } else {
                p
            }
        })
        .collect();
    assert_eq!(paths(&ours), swapped);
}

#[test]
fn without_an_image_the_config_is_the_lca_one() {
    let c = build(&lca());
    assert_eq!(c.systemd.units[0].name, INSTALL_UNIT);
    let json = String::from_utf8(to_json(&c).unwrap()).unwrap();
    assert!(!json.contains(IBI_AGENT_UNIT) && !json.contains("fetch-ibi"));
}

#[test]
fn override_drop_ins_on_the_ibi_unit_are_kept_ours_win_by_name() {
    let over = r#"{"ignition":{"version":"3.2.0"},"systemd":{"units":[
        {"name":"ibi-agent-install.service","enabled":false,"dropins":[
            {"name":"10-ibi-host-agent.conf","contents":"[Service]\nEnvironment=HOST_AGENT_IMAGE=evil\n"},
            {"name":"20-debug.conf","contents":"[Service]\nEnvironment=RUST_LOG=debug\n"}]}]}}"#;
    let c = build(&InstallationIgnitionInputs {
        ignition_config_override: Some(over.into()),
        ..ibi()
    });
    let u = &c.systemd.units[0];
    assert_eq!((u.name.as_str(), u.enabled), (IBI_AGENT_UNIT, Some(true)));
    assert_eq!(u.contents.as_deref(), Some(IBI_AGENT_SERVICE));
    let dropins = &u.extra["dropins"];
    assert_eq!(dropins.as_array().unwrap().len(), 2);
    assert_eq!(dropins[0]["name"], HOST_AGENT_DROPIN);
    assert!(dropins[0]["contents"].as_str().unwrap().contains(IMAGE));
    assert_eq!(dropins[1]["name"], "20-debug.conf");
}

#[test]
fn an_image_that_would_break_the_drop_in_is_refused() {
    let i = InstallationIgnitionInputs {
        host_agent_image: Some("quay.io/x:1\nExecStart=/bin/evil".into()),
        ..lca()
    };
    assert_eq!(
        build_installation_ignition(&i).unwrap_err().to_string(),
        "hostAgentImage \"quay.io/x:1\\nExecStart=/bin/evil\" contains the control character '\\n', which cannot go into a systemd unit"
    );
}

/// Every `Before=` of every unit names a unit the ISO carries: with `hostAgent: ibi` there is no
/// install-rhcos-and-restore-seed.service to order network-config.service before.
#[test]
fn before_names_only_units_the_iso_carries() {
    for (variant, c) in [("lca", build(&lca_full())), ("ibi", build(&ibi_full()))] {
        let names: Vec<&str> = c.systemd.units.iter().map(|u| u.name.as_str()).collect();
        let befores: Vec<&str> = c
            .systemd
            .units
            .iter()
            .filter_map(|u| u.contents.as_deref())
            .flat_map(str::lines)
            .filter_map(|l| l.strip_prefix("Before="))
            .flat_map(str::split_whitespace)
            .collect();
        assert!(
            !befores.is_empty(),
            "{variant}: network-config.service has one"
        );
        for unit in befores {
            assert!(
                names.contains(&unit),
                "{variant}: Before={unit} but units are {names:?}"
            );
        }
    }
}
