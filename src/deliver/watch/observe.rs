//! One look at the API: `/readyz` first (no answer there means the API is not reachable, and nothing
//! else is asked), then the marker ConfigMap, ClusterVersion `version` and the nodes. A failure
//! that waiting may cure (no answer, an error status, an unreadable body) becomes that milestone's
//! detail; one it cannot (an untrusted server, refused credentials) ends the watch.

use crate::contract::config_iso::{MARKER_NAME, MARKER_NAMESPACE};
use crate::kubeapi::{ApiError, Client, cluster_version_path, config_map_path, nodes_path};

use super::judge::{Facts, Fetched};

/// The one ClusterVersion of an OpenShift cluster.
const CLUSTER_VERSION: &str = "version";

#[derive(Debug)]
pub(super) enum Observation {
    /// No HTTP answer to `/readyz`; why.
    Unreachable(String),
    Answered(Box<Facts>),
}

pub(super) fn observe(client: &Client) -> Result<Observation, ApiError> {
    let readyz = match client.readyz() {
        Ok(h) => h,
        Err(ApiError::Unreachable { detail, .. }) => return Ok(Observation::Unreachable(detail)),
        Err(e) => return Err(e),
    };
    Ok(Observation::Answered(Box::new(Facts {
        readyz: Ok(readyz),
        marker: fetched(client.get_object(&config_map_path(MARKER_NAMESPACE, MARKER_NAME)))?,
        cluster_version: fetched(client.get_object(&cluster_version_path(CLUSTER_VERSION)))?,
        nodes: fetched(client.list(nodes_path()))?,
    })))
}

/// A transient failure becomes the fact's text; any other ends the watch.
fn fetched<T>(r: Result<T, ApiError>) -> Result<Fetched<T>, ApiError> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e) if e.is_transient() => Ok(Err(e.to_string())),
        Err(e) => Err(e),
    }
}
