use super::*;
use crate::contract::agent_status::Status;
use crate::contract::host_report::{HostIdentity, HostReport, REPORT_VERSION};
use crate::deliver::deploy_state::{BmcSystem, save_site};
use crate::deliver::report_store::ReportStore;

const A: &str = "27946b59-9e44-4fa7-8e91-f3527a1ef094";
const B: &str = "4c4c4544-0000-0000-0000-000000000000";

fn stored(
    uuid: Option<&str>,
    boot: &str,
    step: &str,
    state: RunState,
    finished: bool,
    at: u64,
) -> StoredReport {
    let mut status = Status::idle(at);
    status.step = step.into();
    status.state = state;
    if state == RunState::Failed {
        status.error = Some(format!("{step} broke"));
    }
    StoredReport {
        received: at,
        client: "127.0.0.1:1".into(),
        site: None,
        report: HostReport {
            version: REPORT_VERSION,
            agent: ReportingAgent::Ibi,
            host: HostIdentity {
                hostname: format!("h-{}", uuid.unwrap_or("none")),
                product_uuid: uuid.map(str::to_string),
                boot_id: Some(boot.into()),
            },
            status,
            finished,
            logs: if state == RunState::Failed {
                vec!["first".into(), "last".into()]
            } else {
                Vec::new()
            },
        },
    }
}

fn site(name: &str, uuid: &str) -> SiteDeployState {
    let mut s = SiteDeployState::new(name);
    s.bmc = Some(BmcSystem {
        address: format!("https://bmc-{name}"),
        system: Some("/redfish/v1/Systems/1".into()),
        uuid: Some(uuid.to_ascii_uppercase()),
    });
    s
}

fn record(state: RunState, step: &str, at: u64) -> PhaseRecord {
    PhaseRecord {
        state,
        step: step.into(),
        started: at,
        updated: at,
        finished: None,
        error: (state == RunState::Failed).then(|| "no answer".to_string()),
        bytes_served: 0,
        booted: None,
    }
}

fn base(reports: &[StoredReport], sites: &[SiteDeployState]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let mut store = ReportStore::open(d.path()).unwrap();
    for r in reports {
        store.append(r).unwrap();
    }
    for s in sites {
        save_site(d.path(), s).unwrap();
    }
    d
}

#[test]
fn sites_take_their_hosts_reports_by_system_uuid() {
    let d = base(
        &[
            stored(Some(A), "1", "fetch-seed", RunState::Running, false, 100),
            stored(Some(B), "1", "precache", RunState::Failed, true, 110),
            stored(Some(A), "1", "install-host-unit", RunState::Done, true, 120),
            stored(
                Some("99999999-0000-0000-0000-000000000000"),
                "1",
                "deploy",
                RunState::Done,
                false,
                130,
            ),
        ],
        &[
            site("a17", A),
            site("a18", B),
            site("a19", "11111111-0000-0000-0000-000000000000"),
        ],
    );
    let rows = fleet_status(d.path(), None).unwrap();
    let summary: Vec<(Option<&str>, &str, Option<RunState>)> = rows
        .iter()
        .map(|r| (r.site.as_deref(), r.step.as_str(), r.state))
        .collect();
    assert_eq!(
        summary,
        [
            (Some("a17"), "install-host-unit", Some(RunState::Done)),
            (Some("a18"), "precache", Some(RunState::Failed)),
            (Some("a19"), "", None),
            (None, "deploy", Some(RunState::Running)),
        ]
    );
    assert_eq!(rows[0].bmc.as_deref(), Some("https://bmc-a17"));
    assert_eq!(rows[1].logs, ["first", "last"]);
    let text = render(&rows, 190, true);
    assert_eq!(
        text,
        "SITE  BMC              SYSTEM                                HOST                                    PHASE    STEP               STATE    AGE\n\
         a17   https://bmc-a17  27946B59-9E44-4FA7-8E91-F3527A1EF094  h-27946b59-9e44-4fa7-8e91-f3527a1ef094  factory  install-host-unit  done     1m\n\
         a18   https://bmc-a18  4C4C4544-0000-0000-0000-000000000000  h-4c4c4544-0000-0000-0000-000000000000  factory  precache           failed   1m\n\
         a19   https://bmc-a19  11111111-0000-0000-0000-000000000000  -                                       factory  -                  pending  -\n\
         -     -                99999999-0000-0000-0000-000000000000  h-99999999-0000-0000-0000-000000000000  factory  deploy             running  1m\n\
         site a18: failed at precache: precache broke\n  | first\n  | last\n\
         4 host(s): 1 done, 1 running, 1 failed, 1 pending\n"
    );
    assert!(!render(&rows, 190, false).contains("| first"));
}

#[test]
fn an_end_report_is_not_undone_by_a_late_start_report_of_the_same_boot() {
    let d = base(
        &[
            stored(Some(A), "1", "x", RunState::Done, true, 100),
            stored(Some(A), "1", "x", RunState::Running, false, 101),
        ],
        &[],
    );
    let rows = fleet_status(d.path(), None).unwrap();
    assert_eq!(rows[0].state, Some(RunState::Done));
    // A new boot installs again: its start counts.
    let d = base(
        &[
            stored(Some(A), "1", "x", RunState::Done, true, 100),
            stored(Some(A), "2", "x", RunState::Running, false, 101),
        ],
        &[],
    );
    assert_eq!(
        fleet_status(d.path(), None).unwrap()[0].state,
        Some(RunState::Running)
    );
}

#[test]
fn the_newer_of_report_and_deploy_speaks_and_the_site_phase_is_deploys() {
    let mut s = site("a17", A);
    s.phases
        .insert(Phase::Factory, record(RunState::Failed, "wait-report", 200));
    let d = base(
        &[stored(
            Some(A),
            "1",
            "deploy",
            RunState::Running,
            false,
            100,
        )],
        &[s.clone()],
    );
    let row = &fleet_status(d.path(), None).unwrap()[0];
    assert_eq!(
        (row.step.as_str(), row.state),
        ("wait-report", Some(RunState::Failed))
    );
    assert_eq!(
        row.hostname.as_deref(),
        Some("h-27946b59-9e44-4fa7-8e91-f3527a1ef094")
    );

    s.phases
        .insert(Phase::Factory, record(RunState::Running, "wait-report", 50));
    save_site(d.path(), &s).unwrap();
    let row = &fleet_status(d.path(), None).unwrap()[0];
    assert_eq!(
        (row.step.as_str(), row.state),
        ("deploy", Some(RunState::Running))
    );

    s.phases
        .insert(Phase::Site, record(RunState::Running, "watch", 60));
    save_site(d.path(), &s).unwrap();
    let row = &fleet_status(d.path(), None).unwrap()[0];
    assert_eq!((row.phase, row.step.as_str()), (Phase::Site, "watch"));
}

#[test]
fn one_site_or_a_clear_error() {
    let d = base(&[], &[site("a17", A), site("a18", B)]);
    let rows = fleet_status(d.path(), Some("a18")).unwrap();
    assert_eq!(rows.len(), 1);
    let err = format!("{:#}", fleet_status(d.path(), Some("zz")).unwrap_err());
    assert!(err.starts_with("site zz: no record in "), "{err}");
    assert!(
        fleet_status(tempfile::tempdir().unwrap().path(), None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn json_has_ages_states_and_logs_only_when_asked() {
    let d = base(
        &[stored(
            Some(B),
            "1",
            "precache",
            RunState::Failed,
            true,
            100,
        )],
        &[site("a18", B)],
    );
    let rows = fleet_status(d.path(), None).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&render_json(&rows, 160, false).unwrap()).unwrap();
    let h = &v["hosts"][0];
    assert_eq!(h["site"], "a18");
    assert_eq!(h["state"], "failed");
    assert_eq!(h["ageSeconds"], 60);
    assert_eq!(h["agent"], "ibi");
    assert!(h.get("logs").is_none());
    let v: serde_json::Value =
        serde_json::from_str(&render_json(&rows, 160, true).unwrap()).unwrap();
    assert_eq!(v["hosts"][0]["logs"], serde_json::json!(["first", "last"]));
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
