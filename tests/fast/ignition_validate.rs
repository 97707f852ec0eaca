//! The installation ISO's Ignition config checked by the real tools: `ignition-validate` (Debian package
//! `ignition`) on the whole config, and `systemd-analyze verify` on its units.
//!
//! Both must exit 0 with nothing on stderr: systemd-analyze reports unknown keys and bad specifiers only as
//! warnings. A missing tool fails the test. The cases cover
//! both host agents (`lca`, the installer's, and `ibi`, whose unit carries a drop-in).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use ibi::ignition::Config;

use crate::common::ignition_validate::*;

#[test]
fn the_generated_config_is_written_at_the_lowest_spec_that_holds_it() {
    let versions: Vec<(&str, String)> = configs()
        .into_iter()
        .map(|(n, c)| (n, c.ignition.version))
        .collect();
    let want = [
        ("minimal", "3.2.0"),
        ("full", "3.2.0"),
        ("override", "3.2.0"),
        ("override-spec-3.3.0", "3.3.0"),
        ("override-spec-3.4.0", "3.4.0"),
        ("ibi-host-agent", "3.2.0"),
        ("lca-status-report", "3.2.0"),
        ("ibi-status-report", "3.2.0"),
    ];
    let want: Vec<(&str, String)> = want.iter().map(|(n, v)| (*n, v.to_string())).collect();
    assert_eq!(versions, want);
}

#[test]
fn the_ibi_case_carries_the_ibi_unit_and_its_drop_in() {
    let (_, config) = configs()
        .into_iter()
        .find(|(n, _)| *n == "ibi-host-agent")
        .unwrap();
    let unit = &config.systemd.units[0];
    assert_eq!(unit.name, "ibi-agent-install.service");
    assert_eq!(unit.extra["dropins"][0]["name"], "10-ibi-host-agent.conf");
}

#[test]
fn the_status_report_cases_carry_the_report_settings_and_the_lca_units() {
    let all = configs();
    let get = |n: &str| &all.iter().find(|(name, _)| *name == n).unwrap().1;
    let has_file = |c: &Config, p: &str| c.storage.files.iter().any(|f| f.path == p);
    let units =
        |c: &Config| -> Vec<String> { c.systemd.units.iter().map(|u| u.name.clone()).collect() };
    let lca = get("lca-status-report");
    assert!(has_file(lca, "/var/tmp/ibi-report.json"));
    assert!(has_file(lca, "/usr/local/bin/ibi-report.sh"));
    for u in [
        "ibi-report-start.service",
        "ibi-report-done.service",
        "ibi-report-failed.service",
    ] {
        assert!(
            units(lca).iter().any(|n| n == u),
            "{u} missing: {:?}",
            units(lca)
        );
    }
    let ibi = get("ibi-status-report");
    assert!(has_file(ibi, "/var/tmp/ibi-report.json"));
    assert!(!has_file(ibi, "/usr/local/bin/ibi-report.sh"));
    assert!(!units(ibi).iter().any(|n| n.starts_with("ibi-report-")));
}
