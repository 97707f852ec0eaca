use super::*;
use crate::deliver::watch::judge::Facts;
use crate::kubeapi::Health;

fn at(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn expected() -> Expected {
    Expected {
        built_at: "2023-11-14T22:13:20Z".into(),
        cluster_id: "c".into(),
    }
}

/// An answering API whose `/readyz` says `ready`, and nothing else there yet.
fn answering(ready: bool) -> Observation {
    Observation::Answered(Box::new(Facts {
        readyz: Ok(Health {
            ok: ready,
            status: if ready { 200 } else { 500 },
            text: if ready { "ok" } else { "[-]etcd failed" }.into(),
        }),
        marker: Ok(None),
        cluster_version: Ok(None),
        nodes: Ok(vec![]),
    }))
}

fn lines(t: &mut Tracker, when: &str, obs: &Observation) -> Vec<String> {
    let mut out = Vec::new();
    t.update(at(when), &expected(), obs, &mut |e: &Event| {
        out.push(format!(
            "{} {} {}",
            e.milestone.name(),
            match (e.held, e.lost) {
                (true, _) => "held",
                (false, true) => "lost",
                (false, false) => "not",
            },
            e.detail
        ))
    });
    out
}

#[test]
fn events_come_when_a_milestone_changes_and_first_times_are_kept() {
    let mut t = Tracker::new("https://api:6443", at("2026-01-01T00:00:00Z"));
    let refused = Observation::Unreachable("Connection refused (os error 111)".into());
    assert_eq!(
        lines(&mut t, "2026-01-01T00:00:00Z", &refused),
        ["api not not reachable: Connection refused (os error 111)"]
    );
    assert_eq!(
        lines(&mut t, "2026-01-01T00:00:10Z", &refused),
        Vec::<String>::new()
    );
    assert_eq!(t.unreachable_since, Some(at("2026-01-01T00:00:00Z")));

    assert_eq!(
        lines(&mut t, "2026-01-01T00:00:20Z", &answering(false)),
        ["api held reachable"]
    );
    assert_eq!(t.unreachable_since, None);
    assert_eq!(
        lines(&mut t, "2026-01-01T00:00:30Z", &answering(true)),
        ["readyz held ok"]
    );
    // The API goes away (a restart): the loss is reported, the first times stay.
    let lost = lines(&mut t, "2026-01-01T00:00:40Z", &refused);
    assert_eq!(
        lost,
        [
            "api lost not reachable: Connection refused (os error 111)",
            "readyz lost unknown: the API does not answer"
        ]
    );
    let o = t.finish(at("2026-01-01T00:00:50Z"));
    assert!(!o.ready && o.reached);
    assert_eq!(o.unreachable_since, Some(at("2026-01-01T00:00:40Z")));
    assert_eq!(o.milestones[0].first_held, Some(at("2026-01-01T00:00:20Z")));
    assert_eq!(o.milestones[1].first_held, Some(at("2026-01-01T00:00:30Z")));
    assert_eq!(o.milestones[2].first_held, None);
    assert_eq!(
        o.not_ready_reason(),
        "not ready after 50 s: the API at https://api:6443 has not answered since 2026-01-01T00:00:40Z"
    );
}

#[test]
fn a_host_that_never_answers_is_an_outcome_saying_so() {
    let mut t = Tracker::new("https://api:6443", at("2026-01-01T00:00:00Z"));
    let refused = Observation::Unreachable("Connection refused (os error 111)".into());
    lines(&mut t, "2026-01-01T00:00:00Z", &refused);
    let o = t.finish(at("2026-01-01T01:00:00Z"));
    assert!(!o.ready && !o.reached);
    assert_eq!(
        o.not_ready_reason(),
        "not ready after 3600 s: the API at https://api:6443 never answered (not reachable since 2026-01-01T00:00:00Z: Connection refused (os error 111))"
    );
}

#[test]
fn an_answering_cluster_names_what_is_missing() {
    let mut t = Tracker::new("https://api:6443", at("2026-01-01T00:00:00Z"));
    lines(&mut t, "2026-01-01T00:00:05Z", &answering(true));
    let o = t.finish(at("2026-01-01T00:00:05Z"));
    let why = o.not_ready_reason();
    assert!(
        why.starts_with("not ready after 5 s: configuration: ConfigMap openshift-config/ibi-reconfiguration not there yet"),
        "{why}"
    );
    assert!(
        why.contains("; clusterversion: waiting for the ConfigMap"),
        "{why}"
    );
}
