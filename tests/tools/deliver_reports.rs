//! The hosts' reports to a live `ibi serve`, with real parts: an installation ISO built by `ibi create
//! image` with `statusURL`/`statusCA` (its Ignition read back by coreos-installer and checked by
//! ignition-validate), `ibi serve` on 127.0.0.1 with TLS from a test CA, and the hosts played by this
//! test as a booted live ISO would run them: the `hostAgent: lca` units' command (`ibi-report.sh`, taken
//! from the ISO's Ignition, run by bash with jq and curl) and, for `hostAgent: ibi`, `ibi agent install`
//! failing on a missing disk plus the library's reporter walking through steps. A stand-in `journalctl`
//! (first on PATH) plays the journal, with secrets in its lines. Then `ibi status` shows the fleet, a
//! wrong token is refused and logged without the token, and a torn last line of the store is ignored
//! and cut off when the server starts again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::deliver::host::{Host, ignition_file, iso_ignition, ok, test_tls};
use crate::common::deliver::{Served, example_install, free_port, ibi_env, synthetic_base};
use serde_json::Value;

const TEST: &str = "deliver_reports";
const UUID_LCA_OK: &str = "11111111-1111-4111-8111-111111111111";
const UUID_LCA_FAIL: &str = "22222222-2222-4222-8222-222222222222";
const UUID_IBI_FAIL: &str = "33333333-3333-4333-8333-333333333333";
const UUID_IBI_OK: &str = "44444444-4444-4444-8444-444444444444";
const UUID_LATE: &str = "55555555-5555-4555-8555-555555555555";
/// The example's pull secret: `auth` and its decoded password, both must never leave the host.
const PULL_AUTH: &str = "ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk";
const PULL_PASSWORD: &str = "not-a-real-password";
const PROXY_PASSWORD: &str = "MARKER-proxy-pw";

/// The journal a failed install leaves: every kind of secret the host must filter out.
fn failing_journal(token: &str) -> String {
    format!(
        "2026-11-24T10:00:00+0000 host lca-cli[1]: pulling the seed\n\
         2026-11-24T10:00:01+0000 host lca-cli[1]: auth {PULL_AUTH} for registry.edge.example.com:5000\n\
         2026-11-24T10:00:02+0000 host lca-cli[1]: login example:{PULL_PASSWORD} refused\n\
         2026-11-24T10:00:03+0000 host lca-cli[1]: proxyconnect tcp: http://u:{PROXY_PASSWORD}@proxy:3128 refused\n\
         2026-11-24T10:00:04+0000 host curl[2]: Authorization: Bearer {token}\n\
         2026-11-24T10:00:05+0000 host lca-cli[1]: error: failed to pull the seed image\n"
    )
}

fn status(base: &Path, extra: &[&str]) -> String {
    let mut args = vec!["status", "--dir", base.to_str().unwrap()];
    args.extend_from_slice(extra);
    ok(&ibi_env(&args, &[]), "ibi status")
}

fn stored(base: &Path) -> Vec<Value> {
    std::fs::read_to_string(base.join(".ibi/reports.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn assert_no_secret(what: &str, text: &str, token: &str) {
    for s in [token, PULL_AUTH, PULL_PASSWORD, PROXY_PASSWORD] {
        assert!(
            !text.contains(s),
            "{what} holds a secret ({s:.4}…):\n{text}"
        );
    }
}

/// Builds BASE with `statusURL` on `port`, starts serve there and returns (BASE, server, Ignition, token).
fn built_and_served(tls: &(PathBuf, PathBuf, PathBuf), base: &Path, port: u16) -> (Served, Value) {
    example_install(base);
    let cfg = base.join("image-based-installation-config.yaml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!(
        "statusURL: https://127.0.0.1:{port}\nstatusCA: {}\n",
        tls.0.display()
    ));
    std::fs::write(&cfg, text).unwrap();
    ok(
        &ibi_env(
            &[
                "create",
                "image",
                "--dir",
                base.to_str().unwrap(),
                "--base-iso",
                synthetic_base().to_str().unwrap(),
            ],
            &[],
        ),
        "ibi create image",
    );
    let ign = iso_ignition(&base.join("rhcos-ibi.iso"));
    let served = Served::start_on(
        base,
        &format!("127.0.0.1:{port}"),
        &[
            "--tls-cert",
            tls.1.to_str().unwrap(),
            "--tls-key",
            tls.2.to_str().unwrap(),
        ],
    );
    (served, ign)
}

/// `hostAgent: ibi`: `ibi agent install` failing before its first step reports the failure with the
/// journal's tail; the library's reporter, as `ibi agent install` drives it, reports each step change
/// and the end.
#[cfg(feature = "agent")]
fn agent_hosts(ign: &Value, base: &Path, token: &str) {
    use ibi::agent::report::Delivery;

    let c = Host::new(ign, UUID_IBI_FAIL, "sno-c", &failing_journal(token));
    let cfg = c.path("var/tmp/ibi-configuration.json");
    let mut conf: Value = serde_json::from_slice(&std::fs::read(&cfg).unwrap()).unwrap();
    conf["installationDisk"] = "/dev/disk/by-id/ibi-test-no-such-disk".into();
    std::fs::write(&cfg, conf.to_string()).unwrap();
    let out = ibi_env(
        &[
            "agent",
            "install",
            "--config",
            cfg.to_str().unwrap(),
            "--root",
            c.root.path().to_str().unwrap(),
            "--status-file",
            c.path("status.json").to_str().unwrap(),
            "--state-file",
            c.path("state.json").to_str().unwrap(),
        ],
        &[("PATH", &c.env_path())],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the install must fail without its disk: {err}"
    );
    assert!(err.contains("ibi-test-no-such-disk"), "{err}");
    let end = stored(base)
        .into_iter()
        .find(|l| l["report"]["host"]["productUuid"] == UUID_IBI_FAIL)
        .expect("ibi agent install's failure report");
    let r = &end["report"];
    assert_eq!(
        (r["agent"].as_str(), r["finished"].as_bool()),
        (Some("ibi"), Some(true))
    );
    assert_eq!(r["status"]["state"], "failed");
    assert_eq!(r["host"]["hostname"], "sno-c");
    assert!(
        r["status"]["error"]
            .as_str()
            .unwrap()
            .contains("ibi-test-no-such-disk"),
        "{r}"
    );
    let logs = r["logs"].to_string();
    assert!(
        logs.contains("error: failed to pull the seed image"),
        "{logs}"
    );
    assert!(logs.contains("<redacted>"), "{logs}");

    let d = Host::new(ign, UUID_IBI_OK, "sno-d", "");
    assert_eq!(d.agent_reports_three_steps(), Delivery::Delivered);
    let steps: Vec<(String, String)> = stored(base)
        .iter()
        .filter(|l| l["report"]["host"]["productUuid"] == UUID_IBI_OK)
        .map(|l| {
            let s = &l["report"]["status"];
            (
                s["step"].as_str().unwrap().into(),
                s["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        steps.last().unwrap(),
        &("fetch-seed".to_string(), "done".to_string())
    );
    for step in ["disk-cleanup", "write-rhcos", "fetch-seed"] {
        assert!(
            steps.iter().any(|(s, st)| s == step && st == "running"),
            "{step} was not reported: {steps:?}"
        );
    }
}

#[cfg(not(feature = "agent"))]
fn agent_hosts(_: &Value, _: &Path, _: &str) {
    common::missing(TEST, "hostAgent: ibi's reporter needs the agent feature");
}

fn check_status(base: &Path, token: &str) {
    let table = status(base, &[]);
    eprintln!("$ ibi status --dir BASE\n{table}");
    let header = table.lines().next().unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>().join(" "),
        "SITE BMC SYSTEM HOST FACTORY SITE-PHASE STEP AGE"
    );
    // The hosts' own rows (no site): the shared token's reports.
    let row = |uuid: &str| {
        table
            .lines()
            .find(|l| l.starts_with("- ") && l.contains(uuid))
            .unwrap_or_else(|| panic!("no row for {uuid}:\n{table}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    let b = row(UUID_LCA_FAIL);
    assert_eq!(
        (b[0], b[1], b[3], b[4], b[5], b[6]),
        (
            "-",
            "-",
            "sno-b",
            "failed",
            "-",
            "install-rhcos-and-restore-seed",
        ),
        "{table}"
    );
    let site_b: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("site-b "))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        site_b[3..6],
        ["-", "pending", "-"],
        "the shared token speaks for no site: {table}"
    );
    assert!(
        table.contains(&format!("host {UUID_LCA_FAIL}: unverified: it reported with the installation ISO's shared token and the System UUID of site site-b's BMC")),
        "{table}"
    );
    let a = row(UUID_LCA_OK);
    assert_eq!((a[0], a[3], a[4]), ("-", "sno-a", "done"), "{table}");
    assert!(
        table.contains(&format!("host {UUID_LCA_FAIL}: factory failed at install-rhcos-and-restore-seed: install-rhcos-and-restore-seed.service failed")),
        "{table}"
    );
    assert!(
        !table.contains("  | "),
        "journal lines only with --logs:\n{table}"
    );

    let one = status(base, &["--site", "site-b", "--logs"]);
    eprintln!("$ ibi status --dir BASE --site site-b --logs\n{one}");
    assert_eq!(
        one.lines().filter(|l| l.contains("sno-")).count(),
        0,
        "{one}"
    );
    let one = status(base, &["--logs"]);
    eprintln!("$ ibi status --dir BASE --logs\n{one}");
    assert!(
        one.contains(
            "  | 2026-11-24T10:00:05+0000 host lca-cli[1]: error: failed to pull the seed image"
        ),
        "{one}"
    );
    assert!(one.contains("<redacted>"), "{one}");
    assert_no_secret("ibi status --logs", &one, token);

    let json: Value = serde_json::from_str(&status(base, &["--json"])).unwrap();
    let hosts = json["hosts"].as_array().unwrap();
    let by_uuid = |u: &str| {
        hosts
            .iter()
            .find(|h| h["system"] == u && h["site"].is_null())
            .unwrap()
    };
    assert_eq!(by_uuid(UUID_LCA_FAIL)["claimsSite"], "site-b");
    assert_eq!(by_uuid(UUID_LCA_FAIL)["state"], "failed");
    assert_eq!(by_uuid(UUID_LCA_OK)["state"], "done");
    assert!(by_uuid(UUID_LCA_OK)["ageSeconds"].is_u64());
    if cfg!(feature = "agent") {
        assert_eq!(by_uuid(UUID_IBI_OK)["state"], "done");
        assert_eq!(by_uuid(UUID_IBI_OK)["agent"], "ibi");
        assert_eq!(by_uuid(UUID_IBI_FAIL)["state"], "failed");
    }
}

#[test]
fn hosts_report_to_a_live_serve_and_status_shows_the_fleet() {
    if !common::require_tools(
        TEST,
        &[
            "curl",
            "jq",
            "bash",
            "coreos-installer",
            "ignition-validate",
        ],
    ) {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let tls = test_tls(work.path());
    let base_dir = tempfile::tempdir().unwrap();
    let base = base_dir.path();
    let port = free_port();
    let (mut served, ign) = built_and_served(&tls, base, port);

    // The installation ISO's config, as coreos-installer read it back, is valid Ignition.
    let ign_path = work.path().join("installation.ign");
    std::fs::write(&ign_path, serde_json::to_vec(&ign).unwrap()).unwrap();
    ok(
        &Command::new("ignition-validate")
            .arg(&ign_path)
            .output()
            .unwrap(),
        "ignition-validate",
    );
    let settings: Value =
        serde_json::from_slice(&ignition_file(&ign, "/var/tmp/ibi-report.json")).unwrap();
    assert_eq!(settings["url"], format!("https://127.0.0.1:{port}"));
    let token = settings["token"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(base.join(".ibi/status-token"))
            .unwrap()
            .trim(),
        token,
        "the ISO carries the directory's report token"
    );

    // hostAgent: lca, success: the start unit, then the done unit.
    let a = Host::new(&ign, UUID_LCA_OK, "sno-a", "");
    ok(&a.lca_report("running", &[]), "ibi-report.sh running");
    ok(&a.lca_report("done", &[]), "ibi-report.sh done");

    // hostAgent: lca, failure: the failed unit, started by OnFailure= with systemd's MONITOR_*.
    let b = Host::new(&ign, UUID_LCA_FAIL, "sno-b", &failing_journal(&token));
    ok(&b.lca_report("running", &[]), "ibi-report.sh running");
    ok(
        &b.lca_report(
            "failed",
            &[
                ("MONITOR_SERVICE_RESULT", "exit-code"),
                ("MONITOR_EXIT_CODE", "exited"),
                ("MONITOR_EXIT_STATUS", "1"),
            ],
        ),
        "ibi-report.sh failed",
    );

    // A host whose ISO carries another token: refused at once (no retries), logged without either token.
    let wrong = Host::new(&ign, UUID_LATE, "sno-wrong", "");
    let bad_token = "f".repeat(32);
    let mut s = settings.clone();
    s["token"] = bad_token.clone().into();
    std::fs::write(wrong.path("var/tmp/ibi-report.json"), s.to_string()).unwrap();
    let out = wrong.lca_report("running", &[]);
    assert!(!out.status.success(), "a wrong token must be refused");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("HTTP 403"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    agent_hosts(&ign, base, &token);

    // The store: one line per accepted report, none from the wrong token, no secret anywhere.
    let lines = stored(base);
    let uuids: Vec<&str> = lines
        .iter()
        .map(|l| l["report"]["host"]["productUuid"].as_str().unwrap_or("-"))
        .collect();
    assert!(!uuids.contains(&UUID_LATE), "{uuids:?}");
    assert_eq!(
        uuids.iter().filter(|u| **u == UUID_LCA_OK).count(),
        2,
        "{uuids:?}"
    );
    let store_text = std::fs::read_to_string(base.join(".ibi/reports.jsonl")).unwrap();
    assert_no_secret("the report store", &store_text, &token);
    let failed = lines
        .iter()
        .find(|l| {
            l["report"]["host"]["productUuid"] == UUID_LCA_FAIL && l["report"]["finished"] == true
        })
        .unwrap();
    let logs: Vec<&str> = failed["report"]["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(logs.len(), 6, "{logs:?}");
    assert!(
        logs[5].ends_with("error: failed to pull the seed image"),
        "{logs:?}"
    );
    assert!(
        logs.iter()
            .any(|l| l.contains("http://<redacted>@proxy:3128")),
        "{logs:?}"
    );
    assert_eq!(
        failed["report"]["status"]["error"],
        "install-rhcos-and-restore-seed.service failed (result exit-code, exited 1)"
    );

    let log = served.stderr();
    assert!(log.contains("refused: wrong token"), "{log}");
    assert_no_secret("serve's log", &log, &token);
    assert!(
        !log.contains(&bad_token),
        "serve logged the wrong token:\n{log}"
    );

    // A deploy record naming site b's BMC, whose System UUID host b reports: the reports came with
    // the ISO's shared token, so they stay host b's own row (unverified), never site b's (issue 33).
    let mut record = ibi::deliver::deploy_state::SiteDeployState::new("site-b");
    record.bmc = Some(ibi::deliver::deploy_state::BmcSystem {
        address: "https://127.0.0.1:9".into(),
        system: Some("/redfish/v1/Systems/1".into()),
        uuid: Some(UUID_LCA_FAIL.to_uppercase()),
    });
    ibi::deliver::deploy_state::save_site(base, &record).unwrap();
    check_status(base, &token);

    // A torn last line (a crash mid-append) is ignored by status, then cut off when serve restarts.
    served.stop();
    let before = stored(base).len();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(base.join(".ibi/reports.jsonl"))
        .unwrap();
    f.write_all(br#"{"received":1764000000,"client":"127.0.0.1:1","report":{"vers"#)
        .unwrap();
    drop(f);
    assert!(status(base, &[]).contains("site-b"));
    let served = Served::start_on(
        base,
        &format!("127.0.0.1:{port}"),
        &[
            "--tls-cert",
            tls.1.to_str().unwrap(),
            "--tls-key",
            tls.2.to_str().unwrap(),
        ],
    );
    let late = Host::new(&ign, UUID_LATE, "sno-late", "");
    ok(
        &late.lca_report("running", &[]),
        "ibi-report.sh running after a restart",
    );
    let after = stored(base);
    assert_eq!(
        after.len(),
        before + 1,
        "the torn line is gone, the new report kept"
    );
    assert_eq!(after[before]["report"]["host"]["productUuid"], UUID_LATE);
    assert!(
        served
            .stderr()
            .contains("cutting off a report whose write was cut short")
    );
}
