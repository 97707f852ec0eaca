//! `systemd-analyze verify` over every unit in `units/`. The units name `/usr/local/bin/ibi` and
//! other paths that do not exist on a build machine, so each unit is checked inside a temp
//! `--root` holding the machine's own system units and an executable stub for every command the
//! unit runs. verify exits 0 on mere warnings (an unknown key, an unparsable value), so any output
//! counts as a failure too. Without systemd-analyze the test skips with a reason, except under CI.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Units that must be there; any other unit file in `units/` is verified as well.
const REQUIRED: &[&str] = &["ibi-fetch-config.service", "ibi-agent-install.service"];
const UNIT_SUFFIXES: &[&str] = &[
    ".service", ".target", ".mount", ".path", ".timer", ".socket",
];

fn units_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("units")
}

fn unit_names() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(units_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| UNIT_SUFFIXES.iter().any(|s| n.ends_with(s)))
        .collect();
    names.sort();
    for r in REQUIRED {
        assert!(names.iter().any(|n| n == r), "units/{r} is missing");
    }
    names
}

/// The executables a unit runs: the first word of each Exec*= line, prefixes (`-@:+!`) removed.
fn executables(unit: &str) -> Vec<String> {
    unit.lines()
        .filter_map(|l| l.trim().split_once('='))
        .filter(|(k, _)| k.trim().starts_with("Exec"))
        .filter_map(|(_, v)| v.split_whitespace().next())
        .map(|p| p.trim_start_matches(['-', '@', ':', '+', '!']).to_string())
        .filter(|p| p.starts_with('/'))
        .collect()
}

/// A root with the host's system units (for sysinit.target and friends) and stub executables.
fn verify_root(unit_name: &str, unit: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let system = ["/usr/lib/systemd/system", "/lib/systemd/system"]
        .into_iter()
        .find(|p| Path::new(p).is_dir())
        .expect("no system unit directory");
    let dest = root.path().join("usr/lib/systemd/system");
    fs::create_dir_all(&dest).unwrap();
    let status = Command::new("cp")
        .args(["-a", &format!("{system}/."), &dest.to_string_lossy()])
        .status()
        .unwrap();
    assert!(status.success(), "copying {system}");
    for exe in executables(unit) {
        let stub = root.path().join(exe.trim_start_matches('/'));
        fs::create_dir_all(stub.parent().unwrap()).unwrap();
        fs::write(&stub, "#!/bin/sh\nexit 0\n").unwrap();
        fs::set_permissions(&stub, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let etc = root.path().join("etc/systemd/system");
    fs::create_dir_all(&etc).unwrap();
    live_iso_units(&etc, unit_name);
    fs::write(etc.join(unit_name), unit).unwrap();
    root
}

/// The units `ibi create image` generates beside ours on the live ISO (the installer's install unit, the
/// network unit), from the builder itself: the report units require the install unit to exist.
fn live_iso_units(etc: &Path, except: &str) {
    use ibi::install_image::ignition::status_report::StatusReportInputs;
    use ibi::install_image::ignition::{InstallationIgnitionInputs, build_installation_ignition};
    let inputs = InstallationIgnitionInputs {
        seed_image: "quay.io/openshift-kni/seed-image:4.16.0".into(),
        seed_version: "4.16.0".into(),
        installation_disk: "/dev/vda".into(),
        pull_secret: r#"{"auths":{}}"#.into(),
        status_report: Some(StatusReportInputs {
            url: "https://192.0.2.10:8443".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let config = build_installation_ignition(&inputs).unwrap();
    for u in config.systemd.units.iter().filter(|u| u.name != except) {
        fs::write(etc.join(&u.name), u.contents.as_deref().unwrap()).unwrap();
    }
}

#[test]
fn executables_are_found_with_prefixes_removed() {
    let unit = "[Service]\nExecStartPre=-/usr/bin/chcon x\nExecStart=/usr/local/bin/ibi a\n";
    assert_eq!(executables(unit), ["/usr/bin/chcon", "/usr/local/bin/ibi"]);
}

#[test]
fn units_pass_systemd_analyze_verify() {
    if !common::tool("systemd-analyze", "units_pass_systemd_analyze_verify") {
        return;
    }
    for name in unit_names() {
        let unit = fs::read_to_string(units_dir().join(&name)).unwrap();
        let root = verify_root(&name, &unit);
        let path = root.path().join("etc/systemd/system").join(&name);
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(format!("--root={}", root.path().display()))
            .arg(&path)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.trim().is_empty(),
            "{name}:\n{text}"
        );
    }
}

#[test]
fn fetch_config_unit_runs_after_the_trust_update_before_post_pivot_and_waits_forever() {
    let unit = fs::read_to_string(units_dir().join("ibi-fetch-config.service")).unwrap();
    for line in [
        "Before=installation-configuration.service",
        "After=coreos-update-ca-trust.service",
        "WantedBy=multi-user.target",
        "WantedBy=installation-configuration.service",
        "Type=oneshot",
        "ExecStart=/usr/local/bin/ibi agent fetch-config",
        "TimeoutStartSec=infinity",
        "Restart=on-failure",
    ] {
        assert!(unit.lines().any(|l| l == line), "missing {line:?}");
    }
}

#[test]
fn agent_install_unit_matches_the_installers_unit() {
    let unit = fs::read_to_string(units_dir().join("ibi-agent-install.service")).unwrap();
    for line in [
        "Wants=network-online.target",
        "After=network-online.target",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "WorkingDirectory=/",
        "ExecStart=/usr/local/bin/ibi agent install -f /var/tmp/ibi-configuration.json",
        "WantedBy=multi-user.target",
    ] {
        assert!(unit.lines().any(|l| l == line), "missing {line:?}");
    }
}
