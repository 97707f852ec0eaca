//! What the tests of tests/fast/ignition_validate.rs and tests/tools/ignition_validate.rs share:
//! one file of tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common;
use ibi::config::{ImageDigestSource, Proxy};
use ibi::ignition::Config;
use ibi::install_image::ignition::status_report::StatusReportInputs;
use ibi::install_image::ignition::{InstallationIgnitionInputs, build_installation_ignition};
use ibi::util::secret::Secret;
use std::path::Path;
use std::process::Command;

pub(crate) fn minimal() -> InstallationIgnitionInputs {
    InstallationIgnitionInputs {
        seed_image: "quay.io/openshift-kni/seed-image:4.16.0".into(),
        seed_version: "4.16.0".into(),
        installation_disk: "/dev/vda".into(),
        pull_secret: r#"{"auths":{"example.com":{"auth":"c3VwZXItc2VjcmV0Cg=="}}}"#.into(),
        ..Default::default()
    }
}

pub(crate) fn full() -> InstallationIgnitionInputs {
    InstallationIgnitionInputs {
        ssh_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host".into(),
        extra_partition_start: Some("-40G".into()),
        extra_partition_label: Some("var-lib-containers".into()),
        extra_partition_number: Some(5),
        shutdown: true,
        coreos_installer_args: vec!["--save-partindex".into(), "6".into()],
        release_registry: "mirror.quay.io".into(),
        precache_best_effort: Some(true),
        network_config: Some("interfaces:\n- name: eth0\n  state: up\n  type: ethernet\n".into()),
        proxy: Some(Proxy {
            http_proxy: "http://proxy:3128".into(),
            https_proxy: "http://u:p%40ss@proxy:3128".into(),
            no_proxy: ".example.com,10.0.0.0/8".into(),
        }),
        image_digest_sources: vec![ImageDigestSource {
            source: "quay.io".into(),
            mirrors: vec!["mirror-quay.io".into()],
            source_policy: Some("NeverContactSource".into()),
        }],
        additional_trust_bundle: "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n".into(),
        post_sh: Some(b"#!/bin/bash\necho post\n".to_vec()),
        ..minimal()
    }
}

pub(crate) const OVERRIDE: &str = r#"{"ignition":{"version":"3.1.0"},
  "passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-rsa AAAAB3NzaC1yc2E= other"]}]},
  "storage":{"files":[{"path":"/tmp/example","contents":{"source":"data:,hello"}},
                      {"path":"/var/tmp/pull-secret.json","contents":{"source":"data:,x"}}],
             "links":[{"path":"/etc/localtime","target":"../usr/share/zoneinfo/UTC"}]},
  "systemd":{"units":[{"name":"install-rhcos-and-restore-seed.service",
                       "dropins":[{"name":"10-env.conf","contents":"[Service]\nEnvironment=A=b\n"}]}]}}"#;

/// An override of a later spec, with a field 3.2.0 lacks: the config is then written at `version`.
pub(crate) fn later_spec_override(version: &str) -> String {
    format!(
        r#"{{"ignition":{{"version":"{version}"}},"kernelArguments":{{"shouldExist":["ibi.test=1"],"shouldNotExist":["quiet"]}},
  "storage":{{"files":[{{"path":"/tmp/example","contents":{{"source":"data:,hello"}}}}]}}}}"#
    )
}

pub(crate) fn configs() -> Vec<(&'static str, Config)> {
    let with_override = InstallationIgnitionInputs {
        ignition_config_override: Some(OVERRIDE.into()),
        ..full()
    };
    let spec_3_3 = InstallationIgnitionInputs {
        ignition_config_override: Some(later_spec_override("3.3.0")),
        ..full()
    };
    let spec_3_4 = InstallationIgnitionInputs {
        ignition_config_override: Some(later_spec_override("3.4.0")),
        ..full()
    };
    let ibi_agent = InstallationIgnitionInputs {
        host_agent_image: Some("quay.io/openshift-kni/ibi:4.16.0".into()),
        ..full()
    };
    // statusURL: the report settings for both agents; with lca, three report units and the install
    // unit's OnFailure= drop-in, and (shutdown: true) the power-off drop-in of the success unit.
    let report = Some(StatusReportInputs {
        url: "https://192.0.2.10:8443".into(),
        token: Secret::new("0123456789abcdef0123456789abcdef"),
        ca_pem: Some(common::self_signed_ca_pem("ibi serve test CA")),
    });
    let lca_reports = InstallationIgnitionInputs {
        status_report: report.clone(),
        ..full()
    };
    let ibi_reports = InstallationIgnitionInputs {
        status_report: report,
        ..ibi_agent.clone()
    };
    [
        ("minimal", minimal()),
        ("full", full()),
        ("override", with_override),
        ("override-spec-3.3.0", spec_3_3),
        ("override-spec-3.4.0", spec_3_4),
        ("ibi-host-agent", ibi_agent),
        ("lca-status-report", lca_reports),
        ("ibi-status-report", ibi_reports),
    ]
    .into_iter()
    .map(|(n, i)| (n, build_installation_ignition(&i).unwrap()))
    .collect()
}

pub(crate) fn run_clean(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty() && stdout.trim().is_empty(),
        "{what}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
}

/// Whether this `ignition-validate` knows spec `version` (Debian's 2.14 stops at 3.3.0).
pub(crate) fn validator_knows(dir: &Path, version: &str) -> bool {
    let probe = dir.join(format!("probe-{version}.ign"));
    std::fs::write(
        &probe,
        format!(r#"{{"ignition":{{"version":"{version}"}}}}"#),
    )
    .unwrap();
    let out = Command::new("ignition-validate")
        .arg(&probe)
        .output()
        .unwrap();
    out.status.success()
}

/// A root holding the host's systemd units (for the targets ours refer to), our units, and stub
/// executables for every command they start, so `verify` checks our files and not this machine.
pub(crate) fn systemd_root(root: &Path, config: &Config) -> Vec<String> {
    let system = root.join("usr/lib/systemd");
    std::fs::create_dir_all(&system).unwrap();
    let host_units = ["/usr/lib/systemd/system", "/lib/systemd/system"]
        .into_iter()
        .find(|p| Path::new(p).is_dir())
        .expect("host systemd unit directory");
    let status = Command::new("cp")
        .args(["-r", host_units])
        .arg(&system)
        .status()
        .unwrap();
    assert!(status.success());
    let etc = root.join("etc/systemd/system");
    std::fs::create_dir_all(&etc).unwrap();
    let mut names = Vec::new();
    for unit in &config.systemd.units {
        let contents = unit.contents.as_deref().unwrap();
        std::fs::write(etc.join(&unit.name), contents).unwrap();
        stub_commands(root, contents);
        write_dropins(root, &etc.join(format!("{}.d", unit.name)), unit);
        names.push(unit.name.clone());
    }
    names
}

/// The unit's Ignition drop-ins, where Ignition puts them (`/etc/systemd/system/NAME.d/`).
pub(crate) fn write_dropins(root: &Path, dir: &Path, unit: &ibi::ignition::Unit) {
    let Some(dropins) = unit.extra.get("dropins").and_then(|d| d.as_array()) else {
        return;
    };
    std::fs::create_dir_all(dir).unwrap();
    for d in dropins {
        let contents = d["contents"].as_str().unwrap();
        std::fs::write(dir.join(d["name"].as_str().unwrap()), contents).unwrap();
        stub_commands(root, contents);
    }
}

pub(crate) fn stub_commands(root: &Path, unit: &str) {
    use std::os::unix::fs::PermissionsExt;
    for line in unit.lines().filter(|l| l.starts_with("Exec")) {
        let cmd = line
            .split_once('=')
            .unwrap()
            .1
            .split_whitespace()
            .next()
            .unwrap();
        let path = match cmd.strip_prefix('/') {
            Some(abs) => root.join(abs),
            None => root.join("usr/bin").join(cmd),
        };
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
