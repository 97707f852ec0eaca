//! The `image-based-config.yaml` model (the per-host input of `create config-image`) and its validation.
//!
//! Every field ends up in the SeedReconfiguration `manifest.json` that lifecycle-agent's post-pivot step
//! reads on the host, so the rules here reject what post-pivot would fail on later (a `localhost` hostname, a
//! network config nmstate cannot apply, a cluster ID that is not a UUID).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_yaml_ng::Value;

use super::finding::{Findings, decode_strict, idx};
use super::net::{is_dns1123_subdomain, is_ip_or_domain};
use super::{nmstate_check, rules};
use crate::util::finding::{Finding, ValidationError};

/// The per-host input of `openshift-install image-based create config-image`.
pub const IMAGE_BASED_CONFIG_FILE: &str = "image-based-config.yaml";

/// `image-based-config.yaml`, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ImageBasedConfig {
    /// Ignored, like the installer.
    pub api_version: String,
    /// Ignored, like the installer.
    pub kind: String,
    /// Ignored, like the installer.
    pub metadata: Option<Value>,
    /// The node's host name; empty means lifecycle-agent keeps the host's current name.
    pub hostname: String,
    /// nmstate state for the host, applied by lifecycle-agent with `nmstatectl apply`.
    pub network_config: Option<serde_json::Value>,
    #[serde(rename = "additionalNTPSources")]
    pub additional_ntp_sources: Vec<String>,
    /// The registry of the release image during deployment (lifecycle-agent rewrites image references).
    pub release_registry: String,
    pub node_labels: BTreeMap<String, String>,
    /// `cluster_id` (snake_case in the YAML): a UUID; generated when empty.
    #[serde(rename = "cluster_id")]
    pub cluster_id: String,
    /// `infra_id` (snake_case in the YAML); generated from the cluster name when empty.
    #[serde(rename = "infra_id")]
    pub infra_id: String,
}

/// Strictly decodes `image-based-config.yaml`; unknown keys and type errors are findings with line and column.
pub fn parse_image_based_config(text: &str) -> Result<ImageBasedConfig, ValidationError> {
    decode_strict(IMAGE_BASED_CONFIG_FILE, text, true)
}

impl ImageBasedConfig {
    /// The network config as YAML with keys sorted at every level (manifest `raw_nm_state_config`), or
    /// `None` when there is none.
    pub fn canonical_network_config(&self) -> anyhow::Result<Option<String>> {
        nmstate_check::canonical_network_config(self.network_config.as_ref())
    }
}

/// Validates an image-based-config; returns every finding and the warnings.
pub fn validate_image_based_config(c: &ImageBasedConfig) -> (Vec<Finding>, Vec<String>) {
    let mut f = Findings::new(IMAGE_BASED_CONFIG_FILE);
    hostname(&mut f, &c.hostname);
    for (i, source) in c.additional_ntp_sources.iter().enumerate() {
        if !is_ip_or_domain(source) {
            f.add(
                idx("additionalNTPSources", i),
                format!("invalid value {source:?}: NTP server is not a valid IP or domain name"),
            );
        }
    }
    if let Some(config) = c.network_config.as_ref().filter(|v| !v.is_null())
        && let Err(e) = nmstate_check::check(config)
    {
        f.add("networkConfig", e.to_string());
    }
    rules::node_labels(&mut f, "nodeLabels", &c.node_labels);
    if !c.cluster_id.is_empty() && !rules::is_uuid(&c.cluster_id) {
        f.add(
            "cluster_id",
            format!(
                "invalid value {:?}: must be a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), as ClusterVersion requires",
                c.cluster_id
            ),
        );
    }
    if !c.infra_id.is_empty() {
        rules::infra_id(&mut f, "infra_id", &c.infra_id);
    }
    f.into_parts()
}

fn hostname(f: &mut Findings, name: &str) {
    if name.is_empty() {
        f.warn(
            "hostname",
            "not set: lifecycle-agent keeps the host's current name, and fails if that is \"localhost\"",
        );
    } else if name == "localhost" {
        f.add(
            "hostname",
            format!("{name:?} is not allowed: lifecycle-agent rejects it"),
        );
    } else if !is_dns1123_subdomain(name) {
        f.add(
            "hostname",
            format!("invalid value {name:?}: must be a DNS-1123 subdomain (lower-case alphanumerics, '-' and '.')"),
        );
    }
}
