//! A small, read-only Kubernetes API client: a kubeconfig read as kubectl reads it (server, CA
//! bundle, client certificate and key or a bearer token), typed GETs over the project's blocking
//! reqwest on the system OpenSSL, the few object shapes a watcher needs (ClusterVersion, Node,
//! ConfigMap, Status) and errors sorted by what a caller does with them. It knows nothing of IBI.

mod client;
mod error;
mod kubeconfig;
mod objects;

pub use client::{Client, ClientOptions, Health};
pub use error::ApiError;
pub use kubeconfig::{Access, ClientAuth, KubeconfigError, Selected, load_kubeconfig};
pub use objects::{
    ClusterVersion, ClusterVersionSpec, ClusterVersionStatus, Condition, ConfigMap, List, Node,
    NodeStatus, ObjectMeta, Release, Status, cluster_version_path, config_map_path, nodes_path,
};
