//! Golden tests of the installation ISO's Ignition config: every generated file's exact text, the file
//! and unit lists with modes, the `[""]` SSH key rule and the precedence of `ignitionConfigOverride`.
//! Expected texts come from the installer's `ignition_test.go` and templates, not from our own output.

use super::*;
use crate::config::{ImageDigestSource, Proxy};
use crate::contract::ibi_configuration::{
    IBI_CONFIGURATION_PATH, POST_SCRIPT_PATH, PULL_SECRET_PATH,
};
use crate::ignition::{Config, Unit, to_json};

const SEED: &str = "quay.io/openshift-kni/seed-image:4.16.0";
const PULL_SECRET: &str = r#"{"auths":{"example.com":{"auth":"c3VwZXItc2VjcmV0Cg=="}}}"#;
const NETWORK: &str = "interfaces:\n- ipv4:\n    address:\n    - ip: 192.168.122.21\n      prefix-length: 24\n    enabled: true\n  mac-address: 00:01:02:03:04:05\n  name: eth0\n  state: up\n  type: ethernet\n";
const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n";
const POST: &str = "#!/bin/bash\necho \"Post image-based installation script\"";

fn minimal() -> InstallationIgnitionInputs {
    InstallationIgnitionInputs {
        seed_image: SEED.into(),
        seed_version: "4.16.0".into(),
        installation_disk: "/dev/vda".into(),
        pull_secret: PULL_SECRET.into(),
        ..Default::default()
    }
}

/// The installer test's "comprehensive configuration" plus everything else set.
fn full() -> InstallationIgnitionInputs {
    InstallationIgnitionInputs {
        ssh_key: "ssh-ed25519 AAAA user@host".into(),
        extra_partition_start: Some("-40G".into()),
        extra_partition_label: Some("var-lib-containers".into()),
        extra_partition_number: Some(5),
        shutdown: true,
        skip_disk_cleanup: true,
        coreos_installer_args: vec![
            "--append-karg".into(),
            "a=b&c".into(),
            "--save-partindex".into(),
            "6".into(),
        ],
        release_registry: "mirror.quay.io".into(),
        precache_best_effort: Some(true),
        precache_disabled: Some(false),
        network_config: Some(NETWORK.into()),
        proxy: Some(Proxy {
            http_proxy: "http://proxy:3128".into(),
            https_proxy: "http://u:p%40ss@proxy:3128".into(),
            no_proxy: ".example.com,10.0.0.0/8".into(),
        }),
        image_digest_sources: vec![ImageDigestSource {
            source: "quay.io".into(),
            mirrors: vec!["mirror-quay.io".into()],
            source_policy: None,
        }],
        additional_trust_bundle: CERT.into(),
        post_sh: Some(POST.as_bytes().to_vec()),
        ..minimal()
    }
}

fn build(i: &InstallationIgnitionInputs) -> Config {
    build_installation_ignition(i).unwrap()
}

fn file_text(c: &Config, path: &str) -> String {
    let f = c
        .storage
        .files
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| panic!("no file {path}"));
    String::from_utf8(f.data().unwrap()).unwrap()
}

fn unit<'a>(c: &'a Config, name: &str) -> &'a Unit {
    c.systemd
        .units
        .iter()
        .find(|u| u.name == name)
        .unwrap_or_else(|| panic!("no unit {name}"))
}

fn files_and_modes(c: &Config) -> Vec<(&str, u32)> {
    c.storage
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.mode.unwrap()))
        .collect()
}

#[test]
fn ibi_configuration_minimal() {
    let got = String::from_utf8(ibi_configuration_json(&minimal()).unwrap()).unwrap();
    let want = "{\"installationDisk\":\"/dev/vda\",\"seedImage\":\"quay.io/openshift-kni/seed-image:4.16.0\",\"seedVersion\":\"4.16.0\"}\n";
    assert_eq!(got, want);
}

#[test]
fn ibi_configuration_matches_the_installer_golden() {
    let i = InstallationIgnitionInputs {
        extra_partition_start: Some("-40G".into()),
        extra_partition_label: Some("var-lib-containers".into()),
        extra_partition_number: Some(5),
        release_registry: "mirror.quay.io".into(),
        ..minimal()
    };
    let want = "{\"extraPartitionLabel\":\"var-lib-containers\",\"extraPartitionNumber\":5,\"extraPartitionStart\":\"-40G\",\"installationDisk\":\"/dev/vda\",\"releaseRegistry\":\"mirror.quay.io\",\"seedImage\":\"quay.io/openshift-kni/seed-image:4.16.0\",\"seedVersion\":\"4.16.0\"}\n";
    assert_eq!(file_text(&build(&i), IBI_CONFIGURATION_PATH), want);
}

#[test]
fn ibi_configuration_full_with_precache_keys_and_go_escaping() {
    let got = String::from_utf8(ibi_configuration_json(&full()).unwrap()).unwrap();
    let want = "{\"extraPartitionLabel\":\"var-lib-containers\",\"extraPartitionNumber\":5,\"extraPartitionStart\":\"-40G\",\"installationDisk\":\"/dev/vda\",\"releaseRegistry\":\"mirror.quay.io\",\"seedImage\":\"quay.io/openshift-kni/seed-image:4.16.0\",\"seedVersion\":\"4.16.0\",\"shutdown\":true,\"skipDiskCleanup\":true,\"coreosInstallerArgs\":[\"--append-karg\",\"a=b\\u0026c\",\"--save-partindex\",\"6\"],\"precacheBestEffort\":true,\"precacheDisabled\":false}\n";
    assert_eq!(got, want);
}

#[test]
fn empty_and_zero_values_are_omitted() {
    let i = InstallationIgnitionInputs {
        extra_partition_start: Some(String::new()),
        extra_partition_label: Some(String::new()),
        extra_partition_number: Some(0),
        ..minimal()
    };
    assert_eq!(
        ibi_configuration_json(&i).unwrap(),
        ibi_configuration_json(&minimal()).unwrap()
    );
}

#[test]
fn registries_conf_from_the_reference_example() {
    let want = "credential-helpers = []\nshort-name-mode = \"\"\nunqualified-search-registries = []\n\n[[registry]]\n  location = \"quay.io\"\n  mirror-by-digest-only = true\n  prefix = \"\"\n\n  [[registry.mirror]]\n    location = \"mirror-quay.io\"\n";
    assert_eq!(file_text(&build(&full()), REGISTRIES_CONF_PATH), want);
}

#[test]
fn install_script_does_the_documented_steps_in_order() {
    let text = file_text(&build(&minimal()), INSTALL_SCRIPT_PATH);
    assert_eq!(text, INSTALL_SCRIPT);
    let steps = [
        "set -e\n",
        "seed_image=\"${1:-${SEED_IMAGE}}\"",
        "authfile=\"${PULL_SECRET_FILE:-/var/tmp/pull-secret.json}\"",
        "ibi_config=\"${IBI_CONFIGURATION_FILE:-/var/tmp/ibi-configuration.json}\"",
        "podman create --authfile \"${authfile}\" --name lca-cli \"${seed_image}\" lca-cli",
        "sleep 10",
        "podman cp lca-cli:lca-cli /usr/local/bin/lca-cli",
        "podman rm lca-cli",
        "/usr/local/bin/lca-cli ibi -f \"${ibi_config}\"",
    ];
    let mut at = 0;
    for step in steps {
        let found = text[at..]
            .find(step)
            .unwrap_or_else(|| panic!("{step:?} missing or out of order"));
        at += found + step.len();
    }
    assert!(text.starts_with("#!/bin/bash\n"));
    assert!(text.contains(PULL_SECRET_PATH) && text.contains(IBI_CONFIGURATION_PATH));
    let syntax = std::process::Command::new("bash")
        .args(["-n", "-c", &text])
        .status()
        .unwrap();
    assert!(syntax.success(), "bash -n rejects the script");
}

#[test]
fn install_unit_without_proxy() {
    let want = "[Unit]\nWants=network-online.target\nAfter=network-online.target\nDescription=SNO Image-based Installation\n\n[Service]\nEnvironment=SEED_IMAGE=quay.io/openshift-kni/seed-image:4.16.0\nEnvironment=IBI_CONFIGURATION_FILE=/var/tmp/ibi-configuration.json\nEnvironment=PULL_SECRET_FILE=/var/tmp/pull-secret.json\nType=oneshot\nRemainAfterExit=yes\nExecStartPre=/usr/bin/chcon -t install_exec_t /usr/local/bin/install-rhcos-and-restore-seed.sh\nExecStart=/usr/local/bin/install-rhcos-and-restore-seed.sh\n\n[Install]\nWantedBy=multi-user.target\n";
    let c = build(&minimal());
    let u = unit(&c, INSTALL_UNIT);
    assert_eq!(u.contents.as_deref(), Some(want));
    assert_eq!(u.enabled, Some(true));
    let empty_proxy = install_service(SEED, Some(&Proxy::default())).unwrap();
    assert_eq!(empty_proxy, want);
}

#[test]
fn install_unit_with_proxy() {
    let want = "[Unit]\nWants=network-online.target\nAfter=network-online.target\nDescription=SNO Image-based Installation\n\n[Service]\nEnvironment=SEED_IMAGE=quay.io/openshift-kni/seed-image:4.16.0\nEnvironment=IBI_CONFIGURATION_FILE=/var/tmp/ibi-configuration.json\nEnvironment=PULL_SECRET_FILE=/var/tmp/pull-secret.json\nEnvironment=HTTP_PROXY=\"http://proxy:3128\"\nEnvironment=http_proxy=\"http://proxy:3128\"\nEnvironment=HTTPS_PROXY=\"http://u:p%%40ss@proxy:3128\"\nEnvironment=https_proxy=\"http://u:p%%40ss@proxy:3128\"\nEnvironment=NO_PROXY=\".example.com,10.0.0.0/8\"\nEnvironment=no_proxy=\".example.com,10.0.0.0/8\"\nType=oneshot\nRemainAfterExit=yes\nExecStartPre=/usr/bin/chcon -t install_exec_t /usr/local/bin/install-rhcos-and-restore-seed.sh\nExecStart=/usr/local/bin/install-rhcos-and-restore-seed.sh\n\n[Install]\nWantedBy=multi-user.target\n";
    assert_eq!(
        unit(&build(&full()), INSTALL_UNIT).contents.as_deref(),
        Some(want)
    );
    let only_https = Proxy {
        https_proxy: "http://p".into(),
        ..Default::default()
    };
    let got = install_service(SEED, Some(&only_https)).unwrap();
    assert!(got.contains("PULL_SECRET_FILE=/var/tmp/pull-secret.json\nEnvironment=HTTPS_PROXY=\"http://p\"\nEnvironment=https_proxy=\"http://p\"\nType=oneshot"));
}

#[test]
fn unit_values_with_control_characters_are_refused() {
    let e = install_service("quay.io/x\nExecStart=/bin/evil", None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "seedImage \"quay.io/x\\nExecStart=/bin/evil\" contains the control character '\\n', which cannot go into a systemd unit"
    );
    let i = InstallationIgnitionInputs {
        proxy: Some(Proxy {
            no_proxy: "a\rb".into(),
            ..Default::default()
        }),
        ..minimal()
    };
    assert!(build_installation_ignition(&i).is_err());
}

#[test]
fn units_run_with_cwd_root() {
    // lca-cli opens var/tmp/pull-secret.json, var/tmp/post.sh … relative to its CWD: systemd's default `/`
    // must not be changed by the unit, nor by the script before it runs lca-cli.
    let c = build(&full());
    for u in &c.systemd.units {
        assert!(
            !u.contents.as_deref().unwrap().contains("WorkingDirectory"),
            "{}",
            u.name
        );
    }
    assert!(
        !INSTALL_SCRIPT
            .lines()
            .any(|l| l.trim_start().starts_with("cd "))
    );
}

#[test]
fn network_config_unit_and_file() {
    let want = "[Unit]\nDescription=Pre Network Manager Config\nAfter=NetworkManager.service\nBefore=install-rhcos-and-restore-seed.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nTimeoutSec=60\nExecStart=bash -c \"until /usr/bin/nmstatectl apply /var/tmp/network-config.yaml; do sleep 1; done\"\n\n[Install]\nWantedBy=multi-user.target\n";
    let with = build(&full());
    assert_eq!(
        unit(&with, NETWORK_CONFIG_UNIT).contents.as_deref(),
        Some(want)
    );
    assert_eq!(unit(&with, NETWORK_CONFIG_UNIT).enabled, Some(true));
    assert_eq!(
        file_text(&with, NETWORK_CONFIG_PATH),
        format!("{NETWORK}\n")
    );
    for network_config in [None, Some(String::new())] {
        let c = build(&InstallationIgnitionInputs {
            network_config,
            ..minimal()
        });
        assert_eq!(unit(&c, NETWORK_CONFIG_UNIT).enabled, None);
        assert_eq!(file_text(&c, NETWORK_CONFIG_PATH), "\n");
    }
}

#[test]
fn pull_secret_trust_bundle_and_post_sh() {
    let c = build(&full());
    assert_eq!(file_text(&c, PULL_SECRET_PATH), format!("{PULL_SECRET}\n"));
    assert_eq!(file_text(&c, TRUST_BUNDLE_PATH), CERT);
    assert_eq!(file_text(&c, POST_SCRIPT_PATH), POST);
}

#[test]
fn minimal_files_units_and_modes() {
    let c = build(&minimal());
    let want = [
        (INSTALL_SCRIPT_PATH, 0o555),
        (IBI_CONFIGURATION_PATH, 0o600),
        (NETWORK_CONFIG_PATH, 0o600),
        (PULL_SECRET_PATH, 0o600),
    ];
    assert_eq!(files_and_modes(&c), want);
    let names: Vec<&str> = c.systemd.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, [INSTALL_UNIT, NETWORK_CONFIG_UNIT]);
}

#[test]
fn full_files_in_build_order_owned_by_root() {
    let c = build(&full());
    let want = [
        ("/etc/containers/registries.conf", 0o644),
        (
            "/etc/pki/ca-trust/source/anchors/additional-trust-bundle.pem",
            0o600,
        ),
        ("/var/tmp/post.sh", 0o755),
        ("/usr/local/bin/install-rhcos-and-restore-seed.sh", 0o555),
        ("/var/tmp/ibi-configuration.json", 0o600),
        ("/var/tmp/network-config.yaml", 0o600),
        ("/var/tmp/pull-secret.json", 0o600),
    ];
    assert_eq!(files_and_modes(&c), want);
    for f in &c.storage.files {
        assert_eq!(f.user.as_ref().unwrap().name.as_deref(), Some("root"));
        assert_eq!(f.overwrite, Some(true));
        assert!(
            f.contents
                .as_ref()
                .unwrap()
                .source
                .as_deref()
                .unwrap()
                .starts_with("data:text/plain;charset=utf-8;base64,")
        );
    }
}

#[test]
fn core_user_gets_an_empty_key_when_none_is_given() {
    let c = build(&minimal());
    assert_eq!(c.passwd.users.len(), 1);
    assert_eq!(c.passwd.users[0].name, "core");
    assert_eq!(c.passwd.users[0].ssh_authorized_keys, [""]);
    let json = String::from_utf8(to_json(&c).unwrap()).unwrap();
    assert!(json.starts_with(r#"{"ignition":{"version":"3.2.0"},"passwd":{"users":[{"name":"core","sshAuthorizedKeys":[""]}]},"storage":{"files":[{"overwrite":true,"path":"/usr/local/bin/install-rhcos-and-restore-seed.sh","user":{"name":"root"},"contents":{"source":"data:text/plain;charset=utf-8;base64,"#), "{json}");
    assert_eq!(
        build(&full()).passwd.users[0].ssh_authorized_keys,
        ["ssh-ed25519 AAAA user@host"]
    );
}

#[test]
fn override_of_the_installer_test_adds_its_file() {
    let over = r#"{"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/tmp/example", "contents": {"source": "data:text/plain;charset=utf-8;base64,aGVscGltdHJhcHBlZGluYXN3YWdnZXJzcGVj"}}]}}"#;
    let c = build(&InstallationIgnitionInputs {
        ignition_config_override: Some(over.into()),
        ..full()
    });
    // The installer's expectation: 8 files, the override's right after the optional ones.
    assert_eq!(c.storage.files.len(), 8);
    assert_eq!(c.storage.files[3].path, "/tmp/example");
    assert_eq!(file_text(&c, "/tmp/example"), "helpimtrappedinaswaggerspec");
    assert_eq!(c.storage.files[3].mode, None);
}

#[test]
fn override_precedence() {
    let over = r#"{"ignition":{"version":"3.1.0"},
        "passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-rsa BBBB"]}]},
        "storage":{"files":[
            {"path":"/var/tmp/pull-secret.json","contents":{"source":"data:,override"},"mode":420},
            {"path":"/etc/containers/registries.conf","contents":{"source":"data:,mine"}}]},
        "systemd":{"units":[
            {"name":"install-rhcos-and-restore-seed.service","enabled":false,"contents":"x",
             "dropins":[{"name":"10-env.conf","contents":"[Service]\nEnvironment=A=b\n"}]},
            {"name":"extra.service","enabled":true,"contents":"[Install]\nWantedBy=multi-user.target\n"}]}}"#;
    let c = build(&InstallationIgnitionInputs {
        ignition_config_override: Some(over.into()),
        ..full()
    });
    assert_eq!(c.ignition.version, "3.2.0");
    assert_eq!(
        c.passwd.users[0].ssh_authorized_keys,
        ["ssh-ed25519 AAAA user@host", "ssh-rsa BBBB"]
    );
    // The override wins over the optional files (merged field by field) …
    assert_eq!(file_text(&c, REGISTRIES_CONF_PATH), "mine");
    assert_eq!(c.storage.files[0].mode, Some(0o644));
    // … and loses to the template files, which replace its entry in place.
    assert_eq!(file_text(&c, PULL_SECRET_PATH), format!("{PULL_SECRET}\n"));
    assert_eq!(files_and_modes(&c)[3], (PULL_SECRET_PATH, 0o600));
    assert_eq!(c.storage.files.len(), 7);
    // Our unit wins on contents and enabled; the override's drop-in stays; its own unit comes first.
    let names: Vec<&str> = c.systemd.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, [INSTALL_UNIT, "extra.service", NETWORK_CONFIG_UNIT]);
    let u = unit(&c, INSTALL_UNIT);
    assert_eq!(u.enabled, Some(true));
    assert!(
        u.contents
            .as_deref()
            .unwrap()
            .starts_with("[Unit]\nWants=network-online.target")
    );
    assert_eq!(u.extra["dropins"][0]["name"], "10-env.conf");
}

/// The generated config is written at the lowest spec that holds it: 3.2.0, unless the override
/// declares 3.3.0 or 3.4.0 (whose fields, such as `kernelArguments`, 3.2.0 lacks).
#[test]
fn an_override_of_a_later_spec_raises_the_version_and_only_then() {
    assert_eq!(build(&full()).ignition.version, "3.2.0");
    for (declared, written) in [("3.0.0", "3.2.0"), ("3.3.0", "3.3.0"), ("3.4.0", "3.4.0")] {
        let over = format!(
            r#"{{"ignition":{{"version":"{declared}"}},"kernelArguments":{{"shouldExist":["ibi.test=1"]}}}}"#
        );
        let c = build(&InstallationIgnitionInputs {
            ignition_config_override: Some(over),
            ..full()
        });
        assert_eq!(c.ignition.version, written, "{declared}");
        assert_eq!(
            c.extra["kernelArguments"],
            serde_json::json!({"shouldExist": ["ibi.test=1"]})
        );
        assert_eq!(
            c.storage.files.len(),
            7,
            "the generated files are all there"
        );
    }
}

#[test]
fn bad_override_is_an_error_with_the_installer_prefix() {
    let i = InstallationIgnitionInputs {
        ignition_config_override: Some("not json".into()),
        ..minimal()
    };
    let e = build_installation_ignition(&i).unwrap_err();
    assert!(
        format!("{e:#}").starts_with("failed to override ignition config: failed to parse ignition config override: invalid JSON: "),
        "{e:#}"
    );
    let empty = InstallationIgnitionInputs {
        ignition_config_override: Some(String::new()),
        ..minimal()
    };
    assert_eq!(build(&empty), build(&minimal()));
}

#[test]
fn override_conflicting_with_our_files_or_twice_the_same_unit_is_refused() {
    let link = r#"{"ignition":{"version":"3.2.0"},"storage":{"links":[{"path":"/var/tmp/pull-secret.json","target":"/x"}]}}"#;
    let i = InstallationIgnitionInputs {
        ignition_config_override: Some(link.into()),
        ..minimal()
    };
    assert_eq!(
        build_installation_ignition(&i).unwrap_err().to_string(),
        "ignitionConfigOverride: /var/tmp/pull-secret.json is given as a file and as a link; Ignition would reject the config at boot"
    );
    let units = r#"{"ignition":{"version":"3.2.0"},"systemd":{"units":[{"name":"a.service"},{"name":"a.service","mask":true}]}}"#;
    let i = InstallationIgnitionInputs {
        ignition_config_override: Some(units.into()),
        ..minimal()
    };
    assert_eq!(
        build_installation_ignition(&i).unwrap_err().to_string(),
        "ignitionConfigOverride: unit a.service is given twice; Ignition would reject the config at boot"
    );
}
