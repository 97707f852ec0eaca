//! What counts: the watch's rules, pure, on what one look at the API returned.
//!
//! Stale answers must not count. The seed's own ClusterVersion said Available long before the seed
//! was taken, and the API of a freshly reconfigured host may serve it for a while, so (as
//! image-based-install-operator does with its `ibi-monitor-cm`) ClusterVersion counts only once the
//! marker ConfigMap of *this* build (`data.builtAt` equal to the site's ISO's) exists, and only when
//! at least one of its conditions changed after the marker's creation less an hour of slack. Beyond
//! the operator: its `spec.clusterID` must be the site's (post-pivot sets it after applying the
//! extra manifests), and the node's Ready needs a heartbeat after that same bound, because the seed's
//! Node object says Ready too.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde::Serialize;

use crate::config_image::marker::Expected;
use crate::contract::config_iso::{
    MARKER_BUILT_AT_KEY, MARKER_NAME, MARKER_NAMESPACE, MARKER_SLACK_SECS,
};
use crate::kubeapi::{ClusterVersion, ConfigMap, Health, Node};

/// What one call gave: its answer, or why there was none worth judging (a transient failure's text).
pub type Fetched<T> = Result<T, String>;

/// What one look at an answering API returned.
#[derive(Debug, Clone)]
pub struct Facts {
    pub readyz: Fetched<Health>,
    pub marker: Fetched<Option<ConfigMap>>,
    pub cluster_version: Fetched<Option<ClusterVersion>>,
    pub nodes: Fetched<Vec<Node>>,
}

/// Whether a milestone holds, and what was seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub held: bool,
    pub detail: String,
}

impl Check {
    fn held(detail: impl Into<String>) -> Self {
        Self {
            held: true,
            detail: detail.into(),
        }
    }
    fn not(detail: impl Into<String>) -> Self {
        Self {
            held: false,
            detail: detail.into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdicts {
    pub readyz: Check,
    pub configuration: Check,
    pub cluster_version: Check,
    pub node: Check,
}

/// Judges one look at the API against what the site's ISO promises.
pub fn judge(expected: &Expected, facts: &Facts) -> Verdicts {
    let (configuration, bound) = configuration(expected, &facts.marker);
    Verdicts {
        readyz: readyz(&facts.readyz),
        configuration,
        cluster_version: cluster_version(expected, &facts.cluster_version, bound),
        node: node(&facts.nodes, bound),
    }
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn marker_name() -> String {
    format!("ConfigMap {MARKER_NAMESPACE}/{MARKER_NAME}")
}

fn readyz(r: &Fetched<Health>) -> Check {
    let h = match r {
        Ok(h) => h,
        Err(e) => return Check::not(e.clone()),
    };
    if h.ok {
        return Check::held("ok");
    }
    // kube-apiserver lists each check; the failing ones start with `[-]`.
    let failing: Vec<&str> = h.text.lines().filter(|l| l.starts_with("[-]")).collect();
    let why = if failing.is_empty() {
        h.text.lines().next().unwrap_or_default().to_string()
    } else {
        failing.join("; ")
    };
    Check::not(format!("HTTP {}: {why}", h.status))
}

/// The marker's verdict and, when it holds, the bound every later condition must be after.
fn configuration(
    expected: &Expected,
    r: &Fetched<Option<ConfigMap>>,
) -> (Check, Option<DateTime<Utc>>) {
    let cm = match r {
        Ok(Some(cm)) => cm,
        Ok(None) => {
            return (
                Check::not(format!(
                    "{} not there yet (post-pivot applies it with the extra manifests)",
                    marker_name()
                )),
                None,
            );
        }
        Err(e) => return (Check::not(e.clone()), None),
    };
    let built_at = cm.data.get(MARKER_BUILT_AT_KEY).map(String::as_str);
    if built_at != Some(expected.built_at.as_str()) {
        return (
            Check::not(format!(
                "{} is another build's ({MARKER_BUILT_AT_KEY} {}, this site's ISO: {}): the host has not been reconfigured with this ISO (yet)",
                marker_name(),
                built_at.unwrap_or("missing"),
                expected.built_at
            )),
            None,
        );
    }
    let Some(created) = cm.metadata.creation_timestamp else {
        return (
            Check::not(format!("{} has no creationTimestamp", marker_name())),
            None,
        );
    };
    (
        Check::held(format!("{} created {}", marker_name(), ts(created))),
        Some(created - Duration::seconds(MARKER_SLACK_SECS)),
    )
}

fn waiting_for_marker() -> Check {
    Check::not(format!(
        "waiting for the {}: until it is there, what the API says may be the seed's",
        marker_name()
    ))
}

fn cluster_version(
    expected: &Expected,
    r: &Fetched<Option<ClusterVersion>>,
    bound: Option<DateTime<Utc>>,
) -> Check {
    let Some(bound) = bound else {
        return waiting_for_marker();
    };
    let cv = match r {
        Ok(Some(cv)) => cv,
        Ok(None) => return Check::not("clusterversions/version not found"),
        Err(e) => return Check::not(e.clone()),
    };
    if cv.spec.cluster_id != expected.cluster_id {
        return Check::not(format!(
            "spec.clusterID is {:?}, not this site's {:?}: post-pivot has not set it yet",
            cv.spec.cluster_id, expected.cluster_id
        ));
    }
    let state = |t: &str| match cv.condition(t) {
        Some(c) => format!("{t}={}", c.status),
        None => format!("{t} missing"),
    };
    let show = |t: &str| match cv.condition(t) {
        Some(c) if !c.message.is_empty() => format!("{} ({})", state(t), c.message),
        _ => state(t),
    };
    let fresh = cv
        .status
        .conditions
        .iter()
        .any(|c| c.last_transition_time.is_some_and(|t| t > bound));
    if !fresh {
        return Check::not(format!(
            "stale: no condition changed after {} (the marker's creation less {} min), so {} is the seed's own",
            ts(bound),
            MARKER_SLACK_SECS / 60,
            state("Available")
        ));
    }
    let status = |t: &str| cv.condition(t).map(|c| c.status.as_str());
    if status("Available") != Some("True") {
        return Check::not(show("Available"));
    }
    if status("Progressing") != Some("False") {
        return Check::not(format!("Available=True, {}", show("Progressing")));
    }
    Check::held(format!(
        "Available=True, Progressing=False (version {})",
        cv.status.desired.version
    ))
}

fn node(r: &Fetched<Vec<Node>>, bound: Option<DateTime<Utc>>) -> Check {
    let Some(bound) = bound else {
        return waiting_for_marker();
    };
    let nodes = match r {
        Ok(n) if n.is_empty() => return Check::not("no nodes"),
        Ok(n) => n,
        Err(e) => return Check::not(e.clone()),
    };
    let problems: Vec<String> = nodes
        .iter()
        .filter_map(|n| node_problem(n, bound))
        .collect();
    if !problems.is_empty() {
        return Check::not(problems.join("; "));
    }
    let names: Vec<&str> = nodes.iter().map(|n| n.metadata.name.as_str()).collect();
    Check::held(format!("{} Ready", names.join(", ")))
}

/// Why one node does not count, if it does not.
fn node_problem(n: &Node, bound: DateTime<Utc>) -> Option<String> {
    let name = &n.metadata.name;
    let Some(c) = n.condition("Ready") else {
        return Some(format!("{name}: no Ready condition"));
    };
    if c.status != "True" {
        return Some(format!(
            "{name}: Ready={} ({}: {})",
            c.status, c.reason, c.message
        ));
    }
    let seen = c.last_heartbeat_time.or(c.last_transition_time);
    match seen {
        Some(t) if t > bound => None,
        _ => Some(format!(
            "{name}: Ready=True is stale (last heartbeat {}, not after {})",
            seen.map(ts).unwrap_or_else(|| "never".into()),
            ts(bound)
        )),
    }
}

#[cfg(test)]
mod tests;
