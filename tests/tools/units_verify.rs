//! `systemd-analyze verify` over every unit in `units/`. The units name `/usr/local/bin/ibi` and
//! other paths that do not exist on a build machine, so each unit is checked inside a temp
//! `--root` holding the machine's own system units and an executable stub for every command the
//! unit runs. verify exits 0 on mere warnings (an unknown key, an unparsable value), so any output
//! counts as a failure too. Without systemd-analyze the test fails, saying so.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs;
use std::process::Command;

use crate::common::units_verify::*;

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
