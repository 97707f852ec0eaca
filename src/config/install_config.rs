//! The `install-config.yaml` model: the complete top-level key set `openshift-install` accepts, decoded
//! strictly, so a legitimate installer file is accepted and a typo is not silently ignored.
//!
//! Only the fields image-based installation uses are typed in detail; the rest are kept as YAML values so
//! validation can warn that they are ignored. Nothing is defaulted: values stay as written (the installer
//! persists the undefaulted config too, e.g. an omitted `additionalTrustBundlePolicy` stays "").

use std::collections::BTreeMap;

use crate::util::secret::Secret;

use serde::{Deserialize, Serialize};
use serde_yaml_ng::Value;

use super::finding::decode_strict;
use super::net::Cidr;
use crate::util::finding::ValidationError;

/// The cluster-wide input, in the format `openshift-install` reads.
pub const INSTALL_CONFIG_FILE: &str = "install-config.yaml";

/// `install-config.yaml`, as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct InstallConfig {
    pub api_version: String,
    pub kind: String,
    pub metadata: Metadata,
    pub additional_trust_bundle: String,
    /// As written: "" when omitted (the installer's default `Proxyonly` is not applied).
    pub additional_trust_bundle_policy: String,
    pub ssh_key: String,
    pub base_domain: String,
    pub networking: Option<Networking>,
    pub control_plane: Option<MachinePool>,
    pub arbiter: Option<MachinePool>,
    pub compute: Option<Vec<MachinePool>>,
    /// One key per platform; only `none` is supported.
    pub platform: Option<BTreeMap<String, Value>>,
    pub pull_secret: Secret<String>,
    pub proxy: Option<Proxy>,
    /// Deprecated form of `imageDigestSources`; see [`InstallConfig::image_digest_sources`].
    pub image_content_sources: Option<Vec<ImageContentSource>>,
    /// As written; see [`InstallConfig::image_digest_sources`] for the upconverted list.
    pub image_digest_sources: Option<Vec<ImageDigestSource>>,
    pub publish: Option<String>,
    pub operator_publishing_strategy: Option<Value>,
    pub fips: Option<bool>,
    pub cpu_partitioning_mode: Option<String>,
    pub credentials_mode: Option<String>,
    pub bootstrap_in_place: Option<Value>,
    pub capabilities: Option<Value>,
    pub feature_set: String,
    pub feature_gates: Option<Vec<String>>,
}

/// `metadata`: a Kubernetes ObjectMeta; only `name` (the cluster name) is used.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Metadata {
    pub name: String,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// `networking`, including the deprecated spellings the installer still upconverts.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Networking {
    pub network_type: String,
    pub machine_network: Vec<MachineNetworkEntry>,
    pub cluster_network: Vec<ClusterNetworkEntry>,
    pub service_network: Vec<String>,
    #[serde(rename = "clusterNetworkMTU")]
    pub cluster_network_mtu: Option<u32>,
    pub ovn_kubernetes_config: Option<Value>,
    /// Deprecated: `machineNetwork[0].cidr`.
    #[serde(rename = "machineCIDR")]
    pub machine_cidr: Option<String>,
    /// Deprecated: `networkType`.
    #[serde(rename = "type")]
    pub deprecated_type: String,
    /// Deprecated: `serviceNetwork[0]`.
    #[serde(rename = "serviceCIDR")]
    pub service_cidr: Option<String>,
    /// Deprecated: `clusterNetwork`.
    pub cluster_networks: Vec<ClusterNetworkEntry>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineNetworkEntry {
    pub cidr: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterNetworkEntry {
    pub cidr: String,
    #[serde(default)]
    pub host_prefix: Option<i64>,
    #[serde(default)]
    pub host_subnet_length: Option<i64>,
}

/// A machine pool (`controlPlane`, `compute[i]`, `arbiter`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MachinePool {
    pub name: String,
    /// `None` when omitted; the installer then defaults it to 3.
    pub replicas: Option<i64>,
    pub hyperthreading: String,
    pub architecture: String,
    pub platform: Option<Value>,
    pub fencing: Option<Value>,
    pub disk_setup: Option<Value>,
}

/// `proxy`: copied verbatim into `manifest.json` (keys `httpProxy`, `httpsProxy`, `noProxy`; empty values are
/// omitted, like the installer's `omitempty`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Proxy {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub http_proxy: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub https_proxy: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub no_proxy: String,
}

/// An `imageDigestSources` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageDigestSource {
    pub source: String,
    #[serde(default)]
    pub mirrors: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_policy: Option<String>,
}

/// A deprecated `imageContentSources` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageContentSource {
    pub source: String,
    #[serde(default)]
    pub mirrors: Vec<String>,
}

/// Strictly decodes `install-config.yaml`; unknown keys and type errors are findings with line and column.
pub fn parse_install_config(text: &str) -> Result<InstallConfig, ValidationError> {
    decode_strict(INSTALL_CONFIG_FILE, text, false)
}

impl InstallConfig {
    /// The machine network CIDRs (`networking.machineNetwork[*].cidr`, or the deprecated `machineCIDR`),
    /// normalized like the installer prints them (`2001:DB8::/32` → `2001:db8::/32`).
    pub fn machine_network_cidrs(&self) -> Vec<String> {
        let Some(n) = &self.networking else {
            return Vec::new();
        };
        let written: Vec<&str> = if n.machine_network.is_empty() {
            n.machine_cidr.iter().map(String::as_str).collect()
        } else {
            n.machine_network.iter().map(|e| e.cidr.as_str()).collect()
        };
        written
            .into_iter()
            .map(|s| Cidr::parse(s).map_or_else(|_| s.to_string(), |c| c.to_string()))
            .collect()
    }

    /// The mirror configuration after upconverting the deprecated `imageContentSources`; `None` when
    /// neither is set (then no ImageDigestMirrorSet is written).
    pub fn image_digest_sources(&self) -> Option<Vec<ImageDigestSource>> {
        if let Some(ids) = &self.image_digest_sources {
            return Some(ids.clone());
        }
        self.image_content_sources.as_ref().map(|ics| {
            ics.iter()
                .map(|s| ImageDigestSource {
                    source: s.source.clone(),
                    mirrors: s.mirrors.clone(),
                    source_policy: None,
                })
                .collect()
        })
    }

    /// `networking.networkType`, falling back to the deprecated `networking.type`.
    pub fn network_type(&self) -> &str {
        match &self.networking {
            Some(n) if !n.network_type.is_empty() => &n.network_type,
            Some(n) => &n.deprecated_type,
            None => "",
        }
    }

    /// The names of the keys under `platform`.
    pub fn platform_names(&self) -> Vec<&str> {
        self.platform
            .iter()
            .flat_map(|p| p.keys().map(String::as_str))
            .collect()
    }
}
