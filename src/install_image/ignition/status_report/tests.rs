use super::*;
use crate::install_image::ignition::{InstallationIgnitionInputs, build_installation_ignition};

fn inputs(host_agent_image: Option<&str>, shutdown: bool) -> InstallationIgnitionInputs {
    InstallationIgnitionInputs {
        seed_image: "quay.io/openshift-kni/seed-image:4.16.0".into(),
        seed_version: "4.16.0".into(),
        installation_disk: "/dev/vda".into(),
        pull_secret: r#"{"auths":{"example.com":{"auth":"dTpw"}}}"#.into(),
        shutdown,
        host_agent_image: host_agent_image.map(str::to_string),
        status_report: Some(StatusReportInputs {
            url: "https://192.0.2.10:8443".into(),
            token: Secret::new("0123456789abcdef0123456789abcdef"),
            ca_pem: Some("-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n".into()),
        }),
        ..Default::default()
    }
}

fn file<'a>(c: &'a crate::ignition::Config, path: &str) -> Option<&'a File> {
    c.storage.files.iter().find(|f| f.path == path)
}

fn unit_names(c: &crate::ignition::Config) -> Vec<&str> {
    c.systemd.units.iter().map(|u| u.name.as_str()).collect()
}

fn ibi_configuration(c: &crate::ignition::Config) -> serde_json::Value {
    let f = file(c, "/var/tmp/ibi-configuration.json").unwrap();
    serde_json::from_slice(&f.data().unwrap()).unwrap()
}

#[test]
fn the_report_settings_are_private_and_hold_url_token_ca_and_retries() {
    let c = build_installation_ignition(&inputs(None, false)).unwrap();
    let f = file(&c, REPORT_CONFIG_PATH).unwrap();
    assert_eq!(f.mode, Some(0o600));
    let cfg: ReportConfig = serde_json::from_slice(&f.data().unwrap()).unwrap();
    assert_eq!(cfg.endpoint(), "https://192.0.2.10:8443/reports");
    assert_eq!(cfg.token.expose_str(), "0123456789abcdef0123456789abcdef");
    assert!(
        cfg.ca_pem
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
    assert_eq!((cfg.attempts, cfg.delay_seconds), (30, 10));
}

#[test]
fn lca_gets_the_script_the_units_and_the_failure_dropin() {
    let c = build_installation_ignition(&inputs(None, false)).unwrap();
    assert_eq!(file(&c, REPORT_SCRIPT_PATH).unwrap().mode, Some(0o555));
    assert_eq!(
        unit_names(&c),
        [
            "install-rhcos-and-restore-seed.service",
            "network-config.service",
            REPORT_START_UNIT,
            REPORT_DONE_UNIT,
            REPORT_FAILED_UNIT
        ]
    );
    let install = &c.systemd.units[0];
    assert_eq!(
        install.extra["dropins"][0]["contents"],
        "[Unit]\nOnFailure=ibi-report-failed.service\n"
    );
    let enabled: Vec<Option<bool>> = c.systemd.units[2..].iter().map(|u| u.enabled).collect();
    assert_eq!(enabled, [Some(true), Some(true), None]);
    assert!(c.systemd.units[3].extra.get("dropins").is_none());
    assert_eq!(ibi_configuration(&c).get("shutdown"), None, "false");
}

#[test]
fn with_shutdown_lca_powers_off_after_the_success_report() {
    let c = build_installation_ignition(&inputs(None, true)).unwrap();
    assert_eq!(
        ibi_configuration(&c).get("shutdown"),
        None,
        "lca-cli must not power off before the report"
    );
    let done = c
        .systemd
        .units
        .iter()
        .find(|u| u.name == REPORT_DONE_UNIT)
        .unwrap();
    let text = done.extra["dropins"][0]["contents"].as_str().unwrap();
    assert!(
        text.contains("ExecStartPost=/usr/bin/systemctl --no-block poweroff"),
        "{text}"
    );
    assert!(REPORT_DONE_SERVICE.contains("ExecStart=-/usr/local/bin/ibi-report.sh done"));
}

#[test]
fn ibi_reports_by_itself_and_keeps_its_shutdown() {
    let c = build_installation_ignition(&inputs(Some("quay.io/x/ibi:1"), true)).unwrap();
    assert!(file(&c, REPORT_CONFIG_PATH).is_some());
    assert!(file(&c, REPORT_SCRIPT_PATH).is_none());
    assert_eq!(
        unit_names(&c),
        ["ibi-agent-install.service", "network-config.service"]
    );
    assert_eq!(ibi_configuration(&c)["shutdown"], true);
}

#[test]
fn without_status_url_nothing_changes() {
    let mut i = inputs(None, true);
    i.status_report = None;
    let c = build_installation_ignition(&i).unwrap();
    assert!(file(&c, REPORT_CONFIG_PATH).is_none());
    assert!(file(&c, REPORT_SCRIPT_PATH).is_none());
    assert_eq!(c.systemd.units.len(), 2);
    assert!(c.systemd.units[0].extra.get("dropins").is_none());
    assert_eq!(ibi_configuration(&c)["shutdown"], true);
}

#[test]
fn the_token_reaches_no_unit_and_no_script() {
    let c = build_installation_ignition(&inputs(None, true)).unwrap();
    let token = "0123456789abcdef0123456789abcdef";
    for u in &c.systemd.units {
        let json = serde_json::to_string(u).unwrap();
        assert!(!json.contains(token), "{}", u.name);
    }
    assert!(!REPORT_SCRIPT.contains(token));
}
