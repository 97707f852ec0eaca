//! PLACEHOLDER: replaced by the config module.
use std::collections::BTreeMap;
use serde::Serialize;
pub const INSTALL_CONFIG_FILE: &str = "install-config.yaml";
pub const IMAGE_BASED_CONFIG_FILE: &str = "image-based-config.yaml";
pub const EXTRA_MANIFESTS_DIR: &str = "extra-manifests";
pub const IMAGE_BASED_CONFIG_TEMPLATE: &str = "";
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding { pub file: String, pub field: String, pub message: String }
#[derive(Debug, thiserror::Error)]
#[error("placeholder")]
pub struct ValidationError { pub findings: Vec<Finding> }
#[derive(Debug, Clone, Default)]
pub struct Metadata { pub name: String }
#[derive(Debug, Clone, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Proxy { pub http_proxy: String, pub https_proxy: String, pub no_proxy: String }
#[derive(Debug, Clone, Default)]
pub struct ImageDigestSource { pub source: String, pub mirrors: Vec<String>, pub source_policy: Option<String> }
#[derive(Debug, Clone, Default)]
pub struct InstallConfig { pub metadata: Metadata, pub base_domain: String, pub pull_secret: String, pub ssh_key: String, pub proxy: Option<Proxy>, pub additional_trust_bundle: String, pub additional_trust_bundle_policy: String }
impl InstallConfig {
    pub fn machine_network_cidrs(&self) -> Vec<String> { vec![] }
    pub fn image_digest_sources(&self) -> Option<Vec<ImageDigestSource>> { None }
}
#[derive(Debug, Clone, Default)]
pub struct ImageBasedConfig { pub hostname: String, pub additional_ntp_sources: Vec<String>, pub release_registry: String, pub node_labels: BTreeMap<String, String>, pub cluster_id: String, pub infra_id: String }
impl ImageBasedConfig { pub fn canonical_network_config(&self) -> anyhow::Result<Option<String>> { Ok(None) } }
pub struct ExtraManifest { pub name: String, pub data: Vec<u8> }
pub struct SiteInputs { pub install_config: InstallConfig, pub image_based_config: ImageBasedConfig, pub extra_manifests: Vec<ExtraManifest>, pub warnings: Vec<String> }
pub fn load_site_inputs(_dir: &std::path::Path) -> anyhow::Result<SiteInputs> { anyhow::bail!("placeholder") }
impl std::fmt::Display for Finding { fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "{}: {}: {}", self.file, self.field, self.message) } }
