//! The parts of Kubernetes and OpenShift objects a watcher reads, with the JSON names the API
//! server uses (camelCase, `type`); everything else in an object is ignored. Timestamps are RFC 3339
//! in UTC, as `metav1.Time` writes them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Deserialize;

/// kube-apiserver's readiness endpoint: `ok` with 200 when every check passes, else 500 and one
/// `[-]check failed` line per failing check.
pub(crate) const READYZ_PATH: &str = "/readyz";

/// `config.openshift.io/v1` ClusterVersion, cluster-scoped.
pub fn cluster_version_path(name: &str) -> String {
    format!("/apis/config.openshift.io/v1/clusterversions/{name}")
}

/// The core v1 Node collection.
pub fn nodes_path() -> &'static str {
    "/api/v1/nodes"
}

/// A core v1 ConfigMap.
pub fn config_map_path(namespace: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/configmaps/{name}")
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    pub creation_timestamp: Option<DateTime<Utc>>,
}

/// A status condition, as ClusterVersion (`lastTransitionTime`) and Node (`lastHeartbeatTime` too)
/// carry them.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub message: String,
    pub last_transition_time: Option<DateTime<Utc>>,
    pub last_heartbeat_time: Option<DateTime<Utc>>,
}

/// The condition of `type_` in `conditions`, if any.
pub(crate) fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterVersion {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ClusterVersionSpec,
    #[serde(default)]
    pub status: ClusterVersionStatus,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterVersionSpec {
    #[serde(rename = "clusterID", default)]
    pub cluster_id: String,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterVersionStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub desired: Release,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Release {
    #[serde(default)]
    pub version: String,
}

impl ClusterVersion {
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        find(&self.status.conditions, type_)
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Node {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: NodeStatus,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct NodeStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

impl Node {
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        find(&self.status.conditions, type_)
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct ConfigMap {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub data: BTreeMap<String, String>,
}

/// A list answer (`NodeList`, …): only its items.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct List<T> {
    #[serde(default = "Vec::new")]
    pub items: Vec<T>,
}

/// The `Status` object the API server answers errors with.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct Status {
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub code: u16,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_version_as_the_api_server_writes_it() {
        let json = r#"{"apiVersion":"config.openshift.io/v1","kind":"ClusterVersion",
            "metadata":{"name":"version","creationTimestamp":"2024-05-01T10:00:00Z","generation":2},
            "spec":{"clusterID":"0f3c6f9e-5d0b-4d8e-9a57-2f1c1e7c4a11","channel":"stable-4.18"},
            "status":{"desired":{"version":"4.18.3","image":"quay.io/x@sha256:0"},
              "conditions":[
                {"type":"Available","status":"True","lastTransitionTime":"2024-05-01T10:20:00Z","message":"Done applying 4.18.3"},
                {"type":"Progressing","status":"False","lastTransitionTime":"2024-05-01T10:20:00Z"}],
              "history":[]}}"#;
        let cv: ClusterVersion = serde_json::from_str(json).unwrap();
        assert_eq!(cv.metadata.name, "version");
        assert_eq!(cv.spec.cluster_id, "0f3c6f9e-5d0b-4d8e-9a57-2f1c1e7c4a11");
        assert_eq!(cv.status.desired.version, "4.18.3");
        let available = cv.condition("Available").unwrap();
        assert_eq!(available.status, "True");
        assert_eq!(
            available.last_transition_time.unwrap().to_rfc3339(),
            "2024-05-01T10:20:00+00:00"
        );
        assert!(cv.condition("Failing").is_none());
    }

    #[test]
    fn node_list_and_config_map() {
        let json = r#"{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},
            "items":[{"metadata":{"name":"sno1"},"status":{"conditions":[
              {"type":"Ready","status":"True","reason":"KubeletReady",
               "lastHeartbeatTime":"2024-05-01T10:21:00Z","lastTransitionTime":"2024-05-01T10:05:00Z"}]}}]}"#;
        let nodes: List<Node> = serde_json::from_str(json).unwrap();
        let ready = nodes.items[0].condition("Ready").unwrap();
        assert_eq!(ready.reason, "KubeletReady");
        assert!(ready.last_heartbeat_time.unwrap() > ready.last_transition_time.unwrap());
        let cm: ConfigMap = serde_json::from_str(
            r#"{"kind":"ConfigMap","metadata":{"name":"a","namespace":"b",
                "creationTimestamp":"2024-05-01T10:10:00Z"},"data":{"k":"v"}}"#,
        )
        .unwrap();
        assert_eq!(cm.data["k"], "v");
        assert_eq!(cm.metadata.namespace, "b");
    }

    #[test]
    fn paths_are_kube_apiservers() {
        assert_eq!(
            cluster_version_path("version"),
            "/apis/config.openshift.io/v1/clusterversions/version"
        );
        assert_eq!(
            config_map_path("openshift-config", "x"),
            "/api/v1/namespaces/openshift-config/configmaps/x"
        );
    }
}
