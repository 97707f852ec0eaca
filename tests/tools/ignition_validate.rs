//! The installation ISO's Ignition config checked by the real tools: `ignition-validate` (Debian package
//! `ignition`) on the whole config, and `systemd-analyze verify` on its units.
//!
//! Both must exit 0 with nothing on stderr: systemd-analyze reports unknown keys and bad specifiers only as
//! warnings. A missing tool fails the test. The cases cover
//! both host agents (`lca`, the installer's, and `ibi`, whose unit carries a drop-in).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::process::Command;

use ibi::ignition::to_json;

use crate::common::ignition_validate::*;

/// Every config is validated at the spec it is written at wherever the installed validator knows that
/// spec. One it does not know is validated one spec down instead, which holds because these configs
/// use no field of the newer spec (3.4.0 added only LUKS and S3 features); a note on stderr says so.
#[test]
fn ignition_validate_accepts_the_generated_configs() {
    if !common::tool(
        "ignition-validate",
        "ignition_validate_accepts_the_generated_configs",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut checked = Vec::new();
    for (name, mut config) in configs() {
        if !validator_knows(dir.path(), &config.ignition.version) {
            assert_eq!(
                config.ignition.version, "3.4.0",
                "{name}: a spec ibi never writes"
            );
            eprintln!(
                "note: {name} at spec 3.4.0: this ignition-validate does not know it; validated as 3.3.0"
            );
            config.ignition.version = "3.3.0".into();
        }
        checked.push((name, config.ignition.version.clone()));
        let path = dir.path().join(format!("{name}.ign"));
        std::fs::write(&path, to_json(&config).unwrap()).unwrap();
        run_clean(Command::new("ignition-validate").arg(&path), name);
    }
    assert!(
        checked.iter().any(|(_, v)| v == "3.3.0") && checked.iter().any(|(_, v)| v == "3.2.0"),
        "{checked:?}"
    );
}

#[test]
fn systemd_analyze_verify_accepts_the_generated_units() {
    if !common::tool(
        "systemd-analyze",
        "systemd_analyze_verify_accepts_the_generated_units",
    ) {
        return;
    }
    for (name, config) in configs() {
        let root = tempfile::tempdir().unwrap();
        let units = systemd_root(root.path(), &config);
        let mut cmd = Command::new("systemd-analyze");
        cmd.args(["verify", "--man=no"])
            .arg(format!("--root={}", root.path().display()))
            .args(&units);
        run_clean(&mut cmd, name);
    }
}
