//! What the tests of tests/fast/units_verify.rs and tests/tools/units_verify.rs share: one file of
//! tests, split by what each test needs (docs/architecture.md, "Tests").

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Units that must be there; any other unit file in `units/` is verified as well.
pub(crate) const REQUIRED: &[&str] = &["ibi-fetch-config.service", "ibi-agent-install.service"];
pub(crate) const UNIT_SUFFIXES: &[&str] = &[
    ".service", ".target", ".mount", ".path", ".timer", ".socket",
];

pub(crate) fn units_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("units")
}

pub(crate) fn unit_names() -> Vec<String> {
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
pub(crate) fn executables(unit: &str) -> Vec<String> {
    unit.lines()
        .filter_map(|l| l.trim().split_once('='))
        .filter(|(k, _)| k.trim().starts_with("Exec"))
        .filter_map(|(_, v)| v.split_whitespace().next())
        .map(|p| p.trim_start_matches(['-', '@', ':', '+', '!']).to_string())
        .filter(|p| p.starts_with('/'))
        .collect()
}

/// A root with the host's system units (for sysinit.target and friends) and stub executables.
pub(crate) fn verify_root(unit_name: &str, unit: &str) -> tempfile::TempDir {
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
pub(crate) fn live_iso_units(etc: &Path, except: &str) {
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
