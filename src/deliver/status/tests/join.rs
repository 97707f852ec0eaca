//! Which reports and records speak for which host.

use super::fixtures::*;
use crate::contract::agent_status::RunState;
use crate::deliver::deploy_state::{Phase, save_site};
use crate::deliver::report_store::REPORTS_FILE;
use crate::deliver::status::*;

/// Issue 33 item 2: a report with the ISO's shared token and a site's System UUID turned the site
/// failed. Only a site's own token speaks for it; the shared-token host is a row of its own, named
/// as claiming the site (unverified).
#[test]
fn a_site_takes_only_its_own_tokens_reports_and_a_claim_is_shown_unverified() {
    let d = base(
        &[
            own(
                "a17",
                stored(Some(A), "1", "fetch-seed", RunState::Running, false, 100),
            ),
            own(
                "a18",
                stored(Some(B), "1", "precache", RunState::Failed, true, 110),
            ),
            own(
                "a17",
                stored(Some(A), "1", "install-host-unit", RunState::Done, true, 120),
            ),
            stored(Some(A), "2", "forged", RunState::Failed, true, 125),
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
    let fleet = fleet_status(d.path(), None).unwrap();
    assert_eq!(
        steps(&fleet.hosts),
        [
            (Some("a17"), "install-host-unit", Some(RunState::Done)),
            (Some("a18"), "precache", Some(RunState::Failed)),
            (Some("a19"), "", None),
            (None, "forged", Some(RunState::Failed)),
            (None, "deploy", Some(RunState::Running)),
        ]
    );
    assert_eq!(fleet.hosts[0].bmc.as_deref(), Some("https://bmc-a17"));
    assert_eq!(fleet.hosts[1].logs, ["first", "last"]);
    assert_eq!(fleet.hosts[3].claims_site.as_deref(), Some("a17"));
    assert_eq!(fleet.problems(), 0);
    let text = render(&fleet, 190, true);
    assert_eq!(
        text,
        "SITE  BMC              SYSTEM                                HOST                                    FACTORY  SITE-PHASE  STEP               AGE\n\
         a17   https://bmc-a17  27946B59-9E44-4FA7-8E91-F3527A1EF094  h-27946b59-9e44-4fa7-8e91-f3527a1ef094  done     -           install-host-unit  1m\n\
         a18   https://bmc-a18  4C4C4544-0000-0000-0000-000000000000  h-4c4c4544-0000-0000-0000-000000000000  failed   -           precache           1m\n\
         a19   https://bmc-a19  11111111-0000-0000-0000-000000000000  -                                       pending  -           -                  -\n\
         -     -                27946b59-9e44-4fa7-8e91-f3527a1ef094  h-27946b59-9e44-4fa7-8e91-f3527a1ef094  failed   -           forged             1m\n\
         -     -                99999999-0000-0000-0000-000000000000  h-99999999-0000-0000-0000-000000000000  running  -           deploy             1m\n\
         site a18: factory failed at precache: precache broke\n  | first\n  | last\n\
         host 27946b59-9e44-4fa7-8e91-f3527a1ef094: unverified: it reported with the installation ISO's shared token and the System UUID of site a17's BMC; only a17's own token speaks for a17\n\
         host 27946b59-9e44-4fa7-8e91-f3527a1ef094: factory failed at forged: forged broke\n  | first\n  | last\n\
         5 host(s): 1 done, 1 running, 2 failed, 1 pending\n"
    );
    assert!(!render(&fleet, 190, false).contains("| first"));
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
    assert_eq!(hosts(&d)[0].state(), Some(RunState::Done));
    // A new boot installs again: its start counts.
    let d = base(
        &[
            stored(Some(A), "1", "x", RunState::Done, true, 100),
            stored(Some(A), "2", "x", RunState::Running, false, 101),
        ],
        &[],
    );
    assert_eq!(hosts(&d)[0].state(), Some(RunState::Running));
}

/// Issue 21 item 5: deploy recorded the failure after reading the host's failure report, with the
/// host's clock an hour behind; the host's step, error and journal were hidden behind deploy's
/// `wait-report`.
#[test]
fn a_report_since_the_phase_began_speaks_even_when_deploy_wrote_later() {
    let mut r = own(
        "a17",
        stored(Some(A), "1", "precache", RunState::Failed, true, T),
    );
    r.report.status.started = T - 3600;
    r.report.status.updated = T - 3600;
    let mut s = site("a17", A);
    let mut rec = record(RunState::Failed, "wait-report", T - 100);
    rec.updated = T + 5;
    rec.error = Some("the host reported a failure: precache broke".into());
    s.phases.insert(Phase::Factory, rec);
    let d = base(&[r], &[s]);
    let fleet = fleet_status(d.path(), None).unwrap();
    let text = render(&fleet, T + 10, true);
    let f = fleet.hosts[0].factory.as_ref().unwrap();
    assert_eq!(
        (f.step.as_str(), f.state, f.error.as_deref()),
        ("precache", RunState::Failed, Some("precache broke")),
        "{text}"
    );
    assert!(
        text.contains(
            "site a17: factory failed at precache: precache broke\n  | first\n  | last\n"
        ),
        "{text}"
    );
    assert!(!text.contains("no journal lines"), "{text}");
    // Aged by the latest news on the workstation's clock (deploy's write), not the host's.
    assert_eq!(f.updated, T + 5);
}

/// The store's order is the order of the appends; the server's receive time decides.
#[test]
fn reports_are_ordered_by_the_servers_receive_time() {
    let later = stored(Some(A), "1", "later", RunState::Running, false, 200);
    let mut earlier = stored(Some(A), "1", "earlier", RunState::Running, false, 100);
    // The host's own clock says otherwise: never read.
    earlier.report.status.updated = 9_999_999_999;
    let d = base(&[later, earlier], &[]);
    let h = &hosts(&d)[0];
    assert_eq!(
        h.current().map(|p| (p.step.as_str(), p.updated)),
        Some(("later", 200))
    );
}

#[test]
fn a_report_from_before_the_phase_began_never_speaks_for_it() {
    let mut s = site("a17", A);
    s.phases
        .insert(Phase::Factory, record(RunState::Running, "boot", 200));
    // The second the phase began is an earlier boot's too (a failure just before a --redo).
    let d = base(
        &[
            own(
                "a17",
                stored(Some(A), "1", "old", RunState::Failed, true, 100),
            ),
            own(
                "a17",
                stored(Some(A), "1", "old", RunState::Failed, true, 200),
            ),
        ],
        &[s.clone()],
    );
    let h = &hosts(&d)[0];
    assert_eq!(steps(std::slice::from_ref(h))[0].1, "boot");
    assert!(h.logs.is_empty(), "an earlier install's journal");
    assert_eq!(
        h.hostname, None,
        "who the host is: only what speaks for this phase says"
    );
    // Site phase begun: it is the current phase, the factory's result stays.
    s.phases
        .insert(Phase::Factory, record(RunState::Done, "eject", 50));
    s.phases
        .insert(Phase::Site, record(RunState::Running, "watch", 300));
    save_site(d.path(), &s).unwrap();
    let h = &hosts(&d)[0];
    assert_eq!(
        (h.phase(), h.state()),
        (Phase::Site, Some(RunState::Running))
    );
    assert_eq!(h.factory.as_ref().map(|p| p.state), Some(RunState::Failed));
}

/// Who tells the factory phase: (host's install state, deploy's state) → (state, step, host_step).
#[test]
fn host_and_deploy_each_tell_their_part_of_the_factory_phase() {
    use RunState::{Done, Failed, Running};
    let cases = [
        (Running, Running, Running, "precache", None),
        (Failed, Running, Failed, "precache", None),
        (Failed, Failed, Failed, "precache", None),
        (Done, Done, Done, "precache", None),
        // Deploy's own failure (a timeout, an eject), or its work after the host's end.
        (Running, Failed, Failed, "wait-report", Some("precache")),
        (Done, Failed, Failed, "wait-report", Some("precache")),
        (Done, Running, Running, "wait-report", Some("precache")),
        // Deploy took a power-off as the end (`shutdown: true`).
        (Running, Done, Done, "wait-report", None),
    ];
    for (host, deploy, state, step, host_step) in cases {
        let mut s = site("a17", A);
        s.phases
            .insert(Phase::Factory, record(deploy, "wait-report", 100));
        let d = base(
            &[own(
                "a17",
                stored(Some(A), "1", "precache", host, host != Running, 150),
            )],
            &[s],
        );
        let f = hosts(&d)[0].factory.clone().unwrap();
        assert_eq!(
            (f.state, f.step.as_str(), f.host_step.as_deref()),
            (state, step, host_step),
            "host {host:?}, deploy {deploy:?}"
        );
    }
}

#[test]
fn a_damaged_store_line_hides_only_itself() {
    let d = base(
        &[
            stored(Some(A), "1", "a", RunState::Running, false, 100),
            stored(Some(B), "1", "b", RunState::Running, false, 110),
        ],
        &[],
    );
    let path = d.path().join(REPORTS_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let garbage = "{\"MARKER\": 1}\nnot json\n".repeat(6);
    std::fs::write(&path, format!("{}\n{garbage}{}\n", lines[0], lines[1])).unwrap();
    let fleet = fleet_status(d.path(), None).unwrap();
    assert_eq!(fleet.hosts.len(), 2);
    assert_eq!(fleet.problems(), 12);
    let out = render(&fleet, 120, false);
    assert!(!out.contains("MARKER"), "{out}");
    assert!(
        out.contains(&format!(
            "{}: line 2: not a report (Data error at column 9); skipped, the other reports are shown\n",
            path.display()
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{}: 2 more damaged lines skipped\n",
            path.display()
        )),
        "{out}"
    );
}

#[test]
fn a_base_that_does_not_exist_is_an_error() {
    let d = tempfile::tempdir().unwrap();
    let err = format!(
        "{:#}",
        fleet_status(&d.path().join("nope"), None).unwrap_err()
    );
    assert!(
        err.ends_with(
            "nope: no such directory (--dir is the BASE ibi serve and ibi deploy were given)"
        ),
        "{err}"
    );
    std::fs::write(d.path().join("file"), "").unwrap();
    assert!(fleet_status(&d.path().join("file"), None).is_err());
    // An existing BASE where nothing happened yet is an empty fleet.
    assert!(hosts(&d).is_empty());
}

#[test]
fn a_report_with_a_site_is_that_sites_whatever_its_body_claims() {
    // a18's token, a body claiming a17's UUID.
    let mut claimed = stored(Some(A), "1", "claimed", RunState::Running, false, 100);
    claimed.site = Some("a18".into());
    // c20 has no record yet: its token still names it.
    let mut lone = stored(None, "1", "lone", RunState::Running, false, 100);
    lone.site = Some("c20".into());
    let shared = stored(Some(B), "1", "shared", RunState::Running, false, 90);
    let d = base(&[claimed, lone, shared], &[site("a17", A), site("a18", B)]);
    assert_eq!(
        steps(&hosts(&d)),
        [
            (Some("a17"), "", None),
            (Some("a18"), "claimed", Some(RunState::Running)),
            (Some("c20"), "lone", Some(RunState::Running)),
            (None, "shared", Some(RunState::Running)),
        ]
    );
    assert_eq!(fleet_status(d.path(), Some("c20")).unwrap().hosts.len(), 1);
}

#[test]
fn one_site_or_a_clear_error() {
    let d = base(&[], &[site("a17", A), site("a18", B)]);
    let rows = fleet_status(d.path(), Some("a18")).unwrap().hosts;
    assert_eq!(rows.len(), 1);
    let err = format!("{:#}", fleet_status(d.path(), Some("zz")).unwrap_err());
    assert!(err.starts_with("site zz: no record in "), "{err}");
}

/// Issue 33 item 2: a report with the site's own token that arrived after deploy recorded the
/// factory done turned the site failed and showed another host's name. It is counted, not shown
/// over the result.
#[test]
fn a_report_after_the_phase_ended_never_speaks_over_its_result() {
    let mut s = site("a17", A);
    let mut rec = record(RunState::Done, "eject", 100);
    rec.finished = Some(300);
    rec.updated = 300;
    s.phases.insert(Phase::Factory, rec);
    let mut late = own(
        "a17",
        stored(Some(B), "9", "anything", RunState::Failed, true, 400),
    );
    late.report.host.hostname = "someone-else".into();
    let d = base(
        &[
            own(
                "a17",
                stored(Some(A), "1", "done", RunState::Done, true, 200),
            ),
            late,
        ],
        &[s],
    );
    let fleet = fleet_status(d.path(), None).unwrap();
    let h = &fleet.hosts[0];
    assert_eq!(
        (h.state(), h.factory.as_ref().unwrap().step.as_str()),
        (Some(RunState::Done), "done")
    );
    assert_eq!(
        h.hostname.as_deref(),
        Some("h-27946b59-9e44-4fa7-8e91-f3527a1ef094")
    );
    assert!(h.logs.is_empty());
    let text = render(&fleet, 500, true);
    assert!(
        text.contains("site a17: 1 report(s) with its own token arrived after deploy recorded the install's end at 1970-01-01T00:05:00Z: not counted (the last said failed at anything)\n"),
        "{text}"
    );
    assert!(
        !text.contains("someone-else") && !text.contains("failed at anything:"),
        "{text}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&render_json(&fleet, 500, false).unwrap()).unwrap();
    assert_eq!(v["hosts"][0]["state"], "done");
    assert_eq!(v["hosts"][0]["late"]["count"], 1);
}

/// Issue 33 item 1: a factory `--redo` booted the host again after its site phase was done; status
/// showed both phases done for a host holding only the bare seed.
#[test]
fn a_site_phase_before_a_new_factory_boot_counts_as_not_started() {
    let mut s = site("a17", A);
    let mut factory = record(RunState::Done, "eject", 300);
    factory.booted = Some(310);
    s.phases.insert(Phase::Factory, factory);
    s.phases
        .insert(Phase::Site, record(RunState::Done, "eject", 200));
    let d = base(&[], &[s]);
    let fleet = fleet_status(d.path(), None).unwrap();
    let h = &fleet.hosts[0];
    assert_eq!((h.phase(), h.site_phase.as_ref()), (Phase::Factory, None));
    let text = render(&fleet, 400, false);
    let row: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[4..6], ["done", "-"], "{text}");
    assert!(
        text.contains("site a17: its site phase recorded earlier no longer counts: the factory phase booted the host again at 1970-01-01T00:05:10Z\n"),
        "{text}"
    );
}
