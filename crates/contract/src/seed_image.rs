//! The seed image as both sides read it: the `seedImage` value's grammar (a registry reference or an
//! `oci:` image layout), which `create image` checks and `ibi agent install` pulls, and lifecycle-agent's
//! `SeedClusterInfo` (`lca-cli create` writes it as the image's label and as the seed's
//! `/manifest.json`), which the build side checks against a site and the host side against the
//! configuration.

use std::fmt;
use std::path::PathBuf;

use image_ref::{ImageReference, RefError, parse_image_reference};
use serde::{Deserialize, Serialize};

/// The label holding the compact `SeedClusterInfo` JSON (the seed's `/manifest.json`, byte for byte).
pub const SEED_CLUSTER_INFO_LABEL: &str = "com.openshift.lifecycle-agent.seed_cluster_info";

/// Where the seed image is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeedReference {
    /// A registry reference (`quay.io/org/seed:4.16.0`, `host:port/repo@sha256:…`).
    Registry(ImageReference),
    /// An OCI image layout directory (`oci:/path/to/layout[:tag]`); without a tag, its only image.
    OciLayout { path: PathBuf, tag: Option<String> },
}

impl fmt::Display for SeedReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeedReference::Registry(r) => write!(f, "{r}"),
            SeedReference::OciLayout { path, tag: Some(t) } => {
                write!(f, "oci:{}:{t}", path.display())
            }
            SeedReference::OciLayout { path, tag: None } => write!(f, "oci:{}", path.display()),
        }
    }
}

/// Why a text is no seed reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeedRefError {
    #[error(transparent)]
    Image(#[from] RefError),
    #[error("invalid seed image {0:?}: oci: needs a layout directory (oci:/path/to/layout:tag)")]
    NoLayoutPath(String),
    #[error("invalid seed image {0:?}: invalid tag after the layout path")]
    LayoutTag(String),
}

/// Parses `seedImage`. `oci:PATH[:TAG]` follows containers-transports(5): the path ends at the first `:`.
pub fn parse_seed_reference(text: &str) -> Result<SeedReference, SeedRefError> {
    let Some(rest) = text.strip_prefix("oci:") else {
        return Ok(SeedReference::Registry(parse_image_reference(text)?));
    };
    let (path, tag) = match rest.split_once(':') {
        Some((p, t)) => (p, Some(t)),
        None => (rest, None),
    };
    if path.is_empty() {
        return Err(SeedRefError::NoLayoutPath(text.to_string()));
    }
    if tag.is_some_and(|t| t.is_empty() || t.contains(['/', ':', '@'])) {
        return Err(SeedRefError::LayoutTag(text.to_string()));
    }
    Ok(SeedReference::OciLayout {
        path: PathBuf::from(path),
        tag: tag.map(str::to_string),
    })
}

/// `SeedClusterInfo` (lifecycle-agent `lca-cli/seedclusterinfo`). Unknown keys are ignored, as Go does;
/// serialization follows the Go `omitempty` tags so a round trip keeps the document's shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeedClusterInfo {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub seed_cluster_ocp_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub base_domain: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster_name: String,
    /// Deprecated; readers fall back to it when `node_ips` is empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub node_ip: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_ips: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub release_registry: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mirror_registry_configured: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sno_hostname: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub recert_image_pull_spec: String,
    pub has_proxy: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cluster_network_cidr: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub service_network_cidr: Vec<String>,
    pub has_fips: bool,
    #[serde(rename = "additionalTrustBundle")]
    pub additional_trust_bundle: Option<SeedTrustBundle>,
    /// `What=` of the seed's `var-lib-containers.mount`; empty without one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub container_storage_mountpoint_target: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ingress_certificate_cn: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machine_networks: Vec<String>,
}

/// The seed's `additionalTrustBundle` summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SeedTrustBundle {
    pub has_user_ca_bundle: bool,
    pub proxy_configmap_name: String,
}

/// A `seed_cluster_info` label (or `/manifest.json`) that does not decode, with serde's reason.
#[derive(Debug, thiserror::Error)]
#[error("label {SEED_CLUSTER_INFO_LABEL} is not valid SeedClusterInfo JSON: {0}")]
pub struct BadClusterInfo(serde_json::Error);

/// Decodes the `seed_cluster_info` label (or the seed's `/manifest.json`).
pub fn parse_seed_cluster_info(text: &str) -> Result<SeedClusterInfo, BadClusterInfo> {
    serde_json::from_str(text).map_err(BadClusterInfo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_seed_references() {
        let oci = |p: &str, t: Option<&str>| SeedReference::OciLayout {
            path: p.into(),
            tag: t.map(str::to_string),
        };
        assert_eq!(
            parse_seed_reference("oci:/srv/seed:4.16.0"),
            Ok(oci("/srv/seed", Some("4.16.0")))
        );
        assert_eq!(
            parse_seed_reference("oci:/srv/seed"),
            Ok(oci("/srv/seed", None))
        );
        assert_eq!(
            parse_seed_reference("oci:rel/seed:v1"),
            Ok(oci("rel/seed", Some("v1")))
        );
        let r = parse_seed_reference("quay.io/org/seed:4.16.0").expect("registry");
        assert!(matches!(&r, SeedReference::Registry(i) if i.tag.as_deref() == Some("4.16.0")));
        assert_eq!(r.to_string(), "quay.io/org/seed:4.16.0");
        assert_eq!(oci("/srv/seed", Some("t")).to_string(), "oci:/srv/seed:t");
        for bad in [
            "oci:",
            "oci::tag",
            "oci:/srv/seed:",
            "oci:/srv/seed:a:b",
            "seed:4.16",
        ] {
            let e = parse_seed_reference(bad).expect_err(bad).to_string();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn parses_cluster_info_and_ignores_unknown_keys() {
        let text = r#"{"seed_cluster_ocp_version":"4.18.3","base_domain":"seed.example.com","cluster_name":"seed","node_ips":["192.168.126.10"],"release_registry":"quay.io","sno_hostname":"seed-node","recert_image_pull_spec":"quay.io/edge-infrastructure/recert:v0","has_proxy":false,"has_fips":false,"additionalTrustBundle":{"hasUserCaBundle":false,"proxyConfigmapName":""},"container_storage_mountpoint_target":"/dev/disk/by-partlabel/var-lib-containers","ingress_certificate_cn":"ingress-operator@1712345678","machine_networks":["192.168.126.0/24"]}"#;
        let ci = parse_seed_cluster_info(text).expect("parse");
        assert_eq!(ci.seed_cluster_ocp_version, "4.18.3");
        assert_eq!(ci.additional_trust_bundle, Some(SeedTrustBundle::default()));
        assert_eq!(
            serde_json::to_string(&ci).expect("json"),
            text,
            "round trip keeps omitempty shape"
        );
        let ci = parse_seed_cluster_info(
            r#"{"seed_cluster_ocp_version":"4.16.0","future_key":{"x":1},"has_proxy":true}"#,
        )
        .expect("unknown");
        assert!(ci.has_proxy);
        let e = parse_seed_cluster_info("{").expect_err("bad").to_string();
        assert!(e.starts_with("label com.openshift.lifecycle-agent.seed_cluster_info is not valid SeedClusterInfo JSON"), "{e}");
    }
}
