//! The table, the lines under it, and the JSON.

use super::fixtures::*;
use crate::contract::agent_status::RunState;
use crate::deliver::deploy_state::LOCK_FILE;
use crate::deliver::deploy_state::Phase;
use crate::deliver::report_store::{REPORTS_FILE, StoredReport};
use crate::deliver::status::*;
use crate::util::lock::{self, Holder};

#[test]
fn both_phases_show_and_json_has_them() {
    let mut s = site("a17", A);
    s.phases
        .insert(Phase::Factory, record(RunState::Done, "eject", 100));
    s.phases
        .insert(Phase::Site, record(RunState::Failed, "watch", 200));
    let d = base(
        &[own(
            "a17",
            stored(Some(A), "1", "install-host-unit", RunState::Done, true, 150),
        )],
        &[s],
    );
    let fleet = fleet_status(d.path(), None).unwrap();
    let text = render(&fleet, 260, false);
    let row: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[4..], ["done", "failed", "watch", "1m"], "{text}");
    assert!(
        text.contains("site a17: site phase failed at watch: no answer\n"),
        "{text}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&render_json(&fleet, 260, false).unwrap()).unwrap();
    let h = &v["hosts"][0];
    assert_eq!(
        (&h["phase"], &h["state"], &h["step"]),
        (&"site".into(), &"failed".into(), &"watch".into())
    );
    assert_eq!(h["factory"]["state"], "done");
    assert_eq!(h["factory"]["step"], "install-host-unit");
    assert_eq!(h["factory"]["ageSeconds"], 110);
    assert_eq!(h["sitePhase"]["error"], "no answer");
    assert_eq!(h["ageSeconds"], 60);
}

/// The site phase deployed on a host whose factory phase was done without deploy (`ibi boot`, by
/// hand): its factory result is unknown, not pending.
#[test]
fn a_site_phase_without_a_factory_record_shows_no_factory_result() {
    let mut s = site("a17", A);
    s.phases
        .insert(Phase::Site, record(RunState::Done, "eject", 100));
    let d = base(&[], &[s]);
    let text = render(&fleet_status(d.path(), None).unwrap(), 130, false);
    let row: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[4..], ["-", "done", "eject", "30s"], "{text}");
}

/// Issue 21 item 4: escape sequences in a report reached the terminal raw.
#[test]
fn host_text_is_printed_with_its_control_characters_escaped() {
    let nasty = |what: &str| format!("{what}\x1b[2J\x1b]0;owned\x07\r\nforged\u{9b}31m");
    let mut r = stored(Some(A), "1", "x", RunState::Failed, true, 100);
    r.report.host.hostname = nasty("h");
    r.report.status.step = nasty("s");
    r.report.status.error = Some(nasty("e"));
    r.report.logs = vec![nasty("l")];
    let mut other = stored(None, "1", "x", RunState::Failed, true, 100);
    other.report.host.hostname = nasty("n");
    let d = base(&[r.clone(), other], &[]);
    // What the host sent is stored unchanged.
    let stored_line = std::fs::read_to_string(d.path().join(REPORTS_FILE)).unwrap();
    let back: StoredReport = serde_json::from_str(stored_line.lines().next().unwrap()).unwrap();
    assert_eq!(back, r);
    let fleet = fleet_status(d.path(), None).unwrap();
    for text in [
        render(&fleet, 100, true),
        render_json(&fleet, 100, true).unwrap(),
    ] {
        let raw: Vec<char> = text
            .chars()
            .filter(|c| c.is_control() && *c != '\n')
            .collect();
        assert!(raw.is_empty(), "{raw:?} in {text}");
        assert!(
            !text.lines().any(|l| l.trim_start().starts_with("forged")),
            "a forged line: {text}"
        );
    }
    let text = render(&fleet, 100, true);
    assert!(
        text.contains("  | l\\x1b[2J\\x1b]0;owned\\x07\\r\\nforged\\u{9b}31m\n"),
        "{text}"
    );
    assert!(text.contains("host n\\x1b[2J"), "{text}");
    // JSON keeps the text (escaped as JSON escapes it): a script gets what the host sent.
    let v: serde_json::Value =
        serde_json::from_str(&render_json(&fleet, 100, true).unwrap()).unwrap();
    assert_eq!(v["hosts"][1]["hostname"], nasty("h").as_str());
    assert_eq!(v["hosts"][1]["logs"][0], nasty("l").as_str());
}

/// Issue 21 item 6: one truncated record made `ibi status` print nothing.
#[test]
fn a_damaged_record_is_a_row_of_its_own_and_hides_nothing() {
    let mut s = site("a18", B);
    s.phases
        .insert(Phase::Factory, record(RunState::Running, "boot", 100));
    let d = base(&[], &[site("a17", A), s, site("a19", A)]);
    let path = d.path().join(".ibi/deploy/a18.json");
    std::fs::write(&path, "{\"version\":1,\"site\":\"MARKER-a18\",\"bm").unwrap();
    let fleet = fleet_status(d.path(), None).unwrap();
    assert_eq!(
        fleet
            .hosts
            .iter()
            .map(|h| h.site.as_deref())
            .collect::<Vec<_>>(),
        [Some("a17"), Some("a18"), Some("a19")]
    );
    assert_eq!(fleet.problems(), 1);
    let text = render(&fleet, 100, false);
    assert!(!text.contains("MARKER"), "{text}");
    let row: Vec<&str> = text.lines().nth(2).unwrap().split_whitespace().collect();
    assert_eq!(
        row,
        ["a18", "-", "-", "-", "damaged", "damaged", "-", "-"],
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "site a18: record {} is damaged: cut short (it ends at line 1, column 36); `ibi deploy ... --redo a18` starts the site over\n",
            path.display()
        )),
        "{text}"
    );
    assert!(
        text.ends_with("3 host(s): 0 done, 0 running, 0 failed, 2 pending, 1 damaged\n"),
        "{text}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&render_json(&fleet, 100, false).unwrap()).unwrap();
    assert_eq!(v["hosts"][1]["state"], "damaged");
    assert_eq!(v["hosts"][1]["damaged"]["file"], path.display().to_string());
}

#[test]
fn json_has_ages_states_and_logs_only_when_asked() {
    let d = base(
        &[own(
            "a18",
            stored(Some(B), "1", "precache", RunState::Failed, true, 100),
        )],
        &[site("a18", B)],
    );
    let fleet = fleet_status(d.path(), None).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&render_json(&fleet, 160, false).unwrap()).unwrap();
    let h = &v["hosts"][0];
    assert_eq!(h["site"], "a18");
    assert_eq!(h["state"], "failed");
    assert_eq!(h["phase"], "factory");
    assert_eq!(h["ageSeconds"], 60);
    assert_eq!(h["agent"], "ibi");
    assert_eq!(h["sitePhase"], serde_json::Value::Null);
    assert!(h.get("logs").is_none());
    assert_eq!(v["deploy"], serde_json::json!({"state": "never"}));
    assert_eq!(v["damagedReports"], serde_json::json!([]));
    let v: serde_json::Value =
        serde_json::from_str(&render_json(&fleet, 160, true).unwrap()).unwrap();
    assert_eq!(v["hosts"][0]["logs"], serde_json::json!(["first", "last"]));
}

/// Issue 21 item 11: whether a deploy runs on BASE, or how the last one ended.
#[test]
fn the_deploy_lock_says_who_runs_or_how_the_last_one_ended() {
    let d = base(&[], &[site("a17", A)]);
    let deploy_line = |now| {
        let fleet = fleet_status(d.path(), None).unwrap();
        (
            fleet.deploy.clone(),
            render(&fleet, now, false)
                .lines()
                .last()
                .unwrap()
                .to_string(),
        )
    };
    assert_eq!(
        deploy_line(T).1,
        "1 host(s): 0 done, 0 running, 0 failed, 1 pending"
    );
    let path = d.path().join(LOCK_FILE);
    let mut me = Holder::me("deploy", Some("127.0.0.1:8443".into()));
    me.started = T;
    let held = lock::acquire(&path, me.clone(), "BASE").unwrap();
    let (run, line) = deploy_line(T + 60);
    assert_eq!(run, DeployRun::Running(me.clone()));
    assert_eq!(
        line,
        format!(
            "deploy: running now: ibi deploy (PID {}, listening on 127.0.0.1:8443, since 2025-11-24T16:00:00Z)",
            std::process::id()
        )
    );
    drop(held);
    let (run, line) = deploy_line(T + 7 * 60);
    let DeployRun::Stopped(h) = run else {
        panic!("{run:?}")
    };
    let stopped = h.stopped.unwrap();
    assert!(
        line.ends_with(&format!(
            "), stopped at {} ({} ago)",
            lock::rfc3339(stopped),
            age(stopped, T + 7 * 60)
        )),
        "{line}"
    );
    // What SIGKILL leaves: a holder with no stop time, and no lock.
    std::fs::write(&path, serde_json::to_vec(&me).unwrap()).unwrap();
    let (run, line) = deploy_line(T);
    assert_eq!(run, DeployRun::Killed(me));
    assert!(
        line.ends_with("never recorded its stop: it was killed (or its machine went down)"),
        "{line}"
    );
    let v: serde_json::Value = serde_json::from_str(
        &render_json(&fleet_status(d.path(), None).unwrap(), T, false).unwrap(),
    )
    .unwrap();
    assert_eq!(v["deploy"]["state"], "killed");
    assert_eq!(v["deploy"]["listen"], "127.0.0.1:8443");
}

#[test]
fn ages_read_at_a_glance() {
    let cases = [
        (0, "0s"),
        (59, "59s"),
        (60, "1m"),
        (3599, "59m"),
        (3600, "1h"),
        (86_400, "1d"),
    ];
    for (s, want) in cases {
        assert_eq!(age(1000, 1000 + s), want);
    }
    assert_eq!(age(2000, 1000), "0s");
}
