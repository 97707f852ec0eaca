use super::*;
use crate::kubeapi::{Condition, ObjectMeta};

const BUILT: &str = "2023-11-14T22:13:20Z";
const CLUSTER: &str = "0f3c6f9e-5d0b-4d8e-9a57-2f1c1e7c4a11";
/// When post-pivot applied the marker, on the cluster's clock.
const MARKER_CREATED: &str = "2026-03-02T10:00:00Z";

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn expected() -> Expected {
    Expected {
        built_at: BUILT.into(),
        cluster_id: CLUSTER.into(),
    }
}

fn marker(built_at: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: MARKER_NAME.into(),
            namespace: MARKER_NAMESPACE.into(),
            creation_timestamp: Some(t(MARKER_CREATED)),
        },
        data: [(MARKER_BUILT_AT_KEY.to_string(), built_at.to_string())].into(),
    }
}

fn cond(type_: &str, status: &str, changed: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        last_transition_time: Some(t(changed)),
        ..Condition::default()
    }
}

fn cv(cluster_id: &str, conditions: Vec<Condition>) -> ClusterVersion {
    let mut cv = ClusterVersion::default();
    cv.spec.cluster_id = cluster_id.into();
    cv.status.conditions = conditions;
    cv.status.desired.version = "4.18.3".into();
    cv
}

fn node(ready: &str, heartbeat: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = "sno1".into();
    let mut c = cond("Ready", ready, "2026-03-02T10:01:00Z");
    c.last_heartbeat_time = Some(t(heartbeat));
    n.status.conditions = vec![c];
    n
}

/// The cluster once reconfigured: everything fresh and fine.
fn ready_facts() -> Facts {
    Facts {
        readyz: Ok(Health {
            ok: true,
            status: 200,
            text: "ok".into(),
        }),
        marker: Ok(Some(marker(BUILT))),
        cluster_version: Ok(Some(cv(
            CLUSTER,
            vec![
                cond("Available", "True", "2025-01-01T00:00:00Z"),
                cond("Progressing", "False", "2026-03-02T10:05:00Z"),
            ],
        ))),
        nodes: Ok(vec![node("True", "2026-03-02T10:06:00Z")]),
    }
}

#[test]
fn a_fresh_cluster_holds_everything() {
    let v = judge(&expected(), &ready_facts());
    assert_eq!(v.readyz, Check::held("ok"));
    assert_eq!(
        v.configuration,
        Check::held("ConfigMap openshift-config/ibi-reconfiguration created 2026-03-02T10:00:00Z")
    );
    assert_eq!(
        v.cluster_version,
        Check::held("Available=True, Progressing=False (version 4.18.3)")
    );
    assert_eq!(v.node, Check::held("sno1 Ready"));
}

/// Each case changes one fact of a ready cluster; the named milestone must then not hold, saying
/// why, and the others are as they were.
#[test]
fn each_missing_or_stale_fact_is_named() {
    type Edit = fn(&mut Facts);
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "readyz fails",
            |f| {
                f.readyz = Ok(Health {
                    ok: false,
                    status: 500,
                    text: "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed".into(),
                })
            },
            "readyz: HTTP 500: [-]etcd failed: reason withheld",
        ),
        (
            "no marker yet",
            |f| f.marker = Ok(None),
            "configuration: ConfigMap openshift-config/ibi-reconfiguration not there yet",
        ),
        (
            "another build's marker",
            |f| f.marker = Ok(Some(marker("2023-01-01T00:00:00Z"))),
            "configuration: ConfigMap openshift-config/ibi-reconfiguration is another build's (builtAt 2023-01-01T00:00:00Z, this site's ISO: 2023-11-14T22:13:20Z)",
        ),
        (
            "the seed's cluster ID",
            |f| {
                if let Ok(Some(cv)) = &mut f.cluster_version {
                    cv.spec.cluster_id = "seed-id".into();
                }
            },
            "clusterversion: spec.clusterID is \"seed-id\", not this site's",
        ),
        (
            // Every condition changed before the marker less an hour: the seed's own status.
            "stale ClusterVersion",
            |f| {
                f.cluster_version = Ok(Some(cv(
                    CLUSTER,
                    vec![
                        cond("Available", "True", "2025-01-01T00:00:00Z"),
                        cond("Progressing", "False", "2026-03-02T09:00:00Z"),
                    ],
                )))
            },
            "clusterversion: stale: no condition changed after 2026-03-02T09:00:00Z (the marker's creation less 60 min), so Available=True is the seed's own",
        ),
        (
            "not available",
            |f| {
                f.cluster_version = Ok(Some(cv(
                    CLUSTER,
                    vec![cond("Available", "False", "2026-03-02T10:05:00Z")],
                )))
            },
            "clusterversion: Available=False",
        ),
        (
            "still progressing",
            |f| {
                f.cluster_version = Ok(Some(cv(
                    CLUSTER,
                    vec![
                        cond("Available", "True", "2026-03-02T10:05:00Z"),
                        cond("Progressing", "True", "2026-03-02T10:05:00Z"),
                    ],
                )))
            },
            "clusterversion: Available=True, Progressing=True",
        ),
        (
            "no ClusterVersion",
            |f| f.cluster_version = Ok(None),
            "clusterversion: clusterversions/version not found",
        ),
        (
            "node not ready",
            |f| f.nodes = Ok(vec![node("False", "2026-03-02T10:06:00Z")]),
            "node: sno1: Ready=False",
        ),
        (
            "node ready only in the seed's last heartbeat",
            |f| f.nodes = Ok(vec![node("True", "2026-03-02T08:59:59Z")]),
            "node: sno1: Ready=True is stale (last heartbeat 2026-03-02T08:59:59Z, not after 2026-03-02T09:00:00Z)",
        ),
        ("no nodes", |f| f.nodes = Ok(vec![]), "node: no nodes"),
        (
            "a transient failure",
            |f| f.nodes = Err("HTTP 503: starting".into()),
            "node: HTTP 503: starting",
        ),
    ];
    let ready = judge(&expected(), &ready_facts());
    for (name, edit, want) in cases {
        let mut facts = ready_facts();
        edit(&mut facts);
        let v = judge(&expected(), &facts);
        let (milestone, detail) = want.split_once(": ").unwrap();
        let all = [
            ("readyz", &v.readyz, &ready.readyz),
            ("configuration", &v.configuration, &ready.configuration),
            ("clusterversion", &v.cluster_version, &ready.cluster_version),
            ("node", &v.node, &ready.node),
        ];
        for (m, got, was) in all {
            if m == milestone {
                assert!(!got.held, "{name}: {m} held: {got:?}");
                assert!(
                    got.detail.starts_with(detail),
                    "{name}: {m}: {}",
                    got.detail
                );
            } else if milestone == "configuration" && m != "readyz" {
                assert!(!got.held, "{name}: {m} held without the marker");
                assert!(
                    got.detail.starts_with("waiting for the ConfigMap"),
                    "{name}: {got:?}"
                );
            } else {
                assert_eq!(got, was, "{name}: {m} changed");
            }
        }
    }
}

/// A change exactly at the bound is not after it (the operator's `After`).
#[test]
fn the_bound_is_exclusive() {
    let mut f = ready_facts();
    f.cluster_version = Ok(Some(cv(
        CLUSTER,
        vec![
            cond("Available", "True", "2026-03-02T09:00:00Z"),
            cond("Progressing", "False", "2026-03-02T09:00:00Z"),
        ],
    )));
    assert!(!judge(&expected(), &f).cluster_version.held);
    f.cluster_version = Ok(Some(cv(
        CLUSTER,
        vec![
            cond("Available", "True", "2026-03-02T09:00:01Z"),
            cond("Progressing", "False", "2026-03-02T09:00:00Z"),
        ],
    )));
    assert!(judge(&expected(), &f).cluster_version.held);
}
