//! `systemd-analyze verify` over every unit in `units/`. The units name `/usr/local/bin/ibi` and
//! other paths that do not exist on a build machine, so each unit is checked inside a temp
//! `--root` holding the machine's own system units and an executable stub for every command the
//! unit runs. verify exits 0 on mere warnings (an unknown key, an unparsable value), so any output
//! counts as a failure too. Without systemd-analyze the test fails, saying so.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;

use crate::common::units_verify::*;

#[test]
fn executables_are_found_with_prefixes_removed() {
    let unit = "[Service]\nExecStartPre=-/usr/bin/chcon x\nExecStart=/usr/local/bin/ibi a\n";
    assert_eq!(executables(unit), ["/usr/bin/chcon", "/usr/local/bin/ibi"]);
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
