//! A seed image as `create image` checks it: its lifecycle-agent labels and manifest (its reference and
//! `SeedClusterInfo` are `contract::seed_image`'s), and the checks against the installation config.

use std::collections::BTreeMap;
use std::fmt;

use super::registry::{PullSecretError, RegistryOptions};
use crate::config::{ImageDigestSource, InstallConfig, InstallationConfig};
use crate::contract::seed_image::{
    BadClusterInfo, SEED_CLUSTER_INFO_LABEL, SeedClusterInfo, SeedReference,
    parse_seed_cluster_info,
};

/// The seed format label; lifecycle-agent's IBU prep handler requires [`SEED_FORMAT_VERSION`] exactly.
pub const SEED_FORMAT_VERSION_LABEL: &str = "com.openshift.lifecycle-agent.seed_format_version";
/// `SeedFormatVersion` in lifecycle-agent `internal/common/consts.go` since 2024-05-14.
pub const SEED_FORMAT_VERSION: &str = "4";
/// udev's partition-label links, the form of `var-lib-containers.mount` `What=` on seeds.
const BY_PARTLABEL: &str = "/dev/disk/by-partlabel/";

/// What ibi learned about a seed image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedInfo {
    /// The digest the reference resolves to.
    pub digest: String,
    /// `registry/repository@digest` for a registry seed; `None` for an OCI layout (nothing to pin to).
    pub pinned_reference: Option<String>,
    pub architecture: String,
    pub labels: BTreeMap<String, String>,
    /// The decoded `seed_cluster_info` label; `None` when it is absent or undecodable (a check reports why).
    pub cluster_info: Option<SeedClusterInfo>,
    /// The image config's `created`: when `lca-cli create` built the seed (podman sets it).
    pub created: Option<String>,
    /// Where it was read (a mirror, the source, or `oci:…`).
    pub source: String,
}

/// Reads the seed's manifest and config (never its layer). A registry failure keeps its
/// [`super::registry::RegistryError`] as the error's source, so the caller can test `is_retryable`.
pub fn inspect_seed(
    reference: &SeedReference,
    architecture: &str,
    opts: &RegistryOptions,
) -> anyhow::Result<SeedInfo> {
    let (image, pinned) = match reference {
        SeedReference::Registry(r) => {
            let image = super::registry::inspect_registry_image(r, architecture, opts)?;
            let pinned = r.pinned(&image.digest);
            (image, Some(pinned))
        }
        SeedReference::OciLayout { path, tag } => (
            super::registry::inspect_layout_image(path, tag.as_deref(), architecture)?,
            None,
        ),
    };
    tracing::debug!("seed {reference}: {} from {}", image.digest, image.source);
    let cluster_info = image
        .labels
        .get(SEED_CLUSTER_INFO_LABEL)
        .and_then(|t| parse_seed_cluster_info(t).ok());
    Ok(SeedInfo {
        digest: image.digest,
        pinned_reference: pinned,
        architecture: image.architecture,
        labels: image.labels,
        cluster_info,
        created: image.created,
        source: image.source,
    })
}

/// Parses `text` and inspects it. Every error already names the reference (and the registry).
#[cfg(any(test, feature = "test-support"))]
pub fn inspect_seed_text(
    text: &str,
    architecture: &str,
    opts: &RegistryOptions,
) -> anyhow::Result<SeedInfo> {
    let reference =
        crate::contract::seed_image::parse_seed_reference(text).map_err(anyhow::Error::msg)?;
    inspect_seed(&reference, architecture, opts)
}

/// What the installation configuration expects of the seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedExpectations {
    /// `seedVersion`.
    pub seed_version: String,
    /// `architecture` (`amd64`, `arm64`).
    pub architecture: String,
    /// `extraPartitionLabel`; `None` when no extra partition is created.
    pub extra_partition_label: Option<String>,
}

impl SeedExpectations {
    /// What `image-based-installation-config.yaml` expects (lca-cli ibi always creates the extra partition).
    pub fn from_installation(config: &InstallationConfig) -> SeedExpectations {
        SeedExpectations {
            seed_version: config.seed_version.clone(),
            architecture: config.architecture().to_string(),
            extra_partition_label: Some(config.extra_partition_label().to_string()),
        }
    }
}

/// Registry access as the installation config describes it (pull secret, digest mirrors, trust bundle),
/// plus the build host's `--insecure-registry` entries. The error never quotes the pull secret.
pub fn registry_options(
    config: &InstallationConfig,
    insecure_registries: Vec<String>,
) -> Result<RegistryOptions, PullSecretError> {
    registry_access(
        config.pull_secret.expose(),
        config.image_digest_sources(),
        &config.additional_trust_bundle,
        insecure_registries,
    )
}

/// The same registry access from a site's install-config.yaml, for `create config-image --seed`: its
/// pull secret, `imageDigestSources` (or the upconverted `imageContentSources`) and trust bundle.
pub fn site_registry_options(
    config: &InstallConfig,
    insecure_registries: Vec<String>,
) -> Result<RegistryOptions, PullSecretError> {
    registry_access(
        config.pull_secret.expose(),
        &config.image_digest_sources().unwrap_or_default(),
        &config.additional_trust_bundle,
        insecure_registries,
    )
}

fn registry_access(
    pull_secret: &str,
    image_digest_sources: &[ImageDigestSource],
    additional_trust_bundle: &str,
    insecure_registries: Vec<String>,
) -> Result<RegistryOptions, PullSecretError> {
    let pull_secret = match pull_secret.trim() {
        "" => None,
        text => Some(super::registry::parse_pull_secret(text)?),
    };
    let bundle = additional_trust_bundle;
    Ok(RegistryOptions {
        pull_secret,
        image_digest_sources: image_digest_sources.to_vec(),
        additional_trust_bundle: (!bundle.trim().is_empty()).then(|| bundle.to_string()),
        insecure_registries,
        timeout: None,
    })
}

/// Which check a finding comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedCheck {
    FormatVersion,
    ClusterInfo,
    OcpVersion,
    Architecture,
    PartitionLabel,
}

/// One mismatch between the seed and the installation configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedFinding {
    pub check: SeedCheck,
    pub message: String,
}

impl fmt::Display for SeedFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Runs every check and returns every finding (empty: the seed fits).
pub fn check_seed(info: &SeedInfo, want: &SeedExpectations) -> Vec<SeedFinding> {
    let mut out = Vec::new();
    out.extend(check_format_version(&info.labels));
    match cluster_info(&info.labels) {
        Ok(Some(ci)) => {
            out.extend(check_ocp_version(&ci, &want.seed_version));
            if let Some(label) = &want.extra_partition_label {
                out.extend(check_partition_label(&ci, label));
            }
        }
        Ok(None) => out.push(finding(
            SeedCheck::ClusterInfo,
            format!("the seed image has no {SEED_CLUSTER_INFO_LABEL} label, so seedVersion {:?} cannot be checked against it", want.seed_version),
        )),
        Err(e) => out.push(finding(SeedCheck::ClusterInfo, e.to_string())),
    }
    if info.architecture != want.architecture {
        out.push(finding(
            SeedCheck::Architecture,
            format!(
                "architecture {:?} differs from the seed image's architecture {:?}",
                want.architecture, info.architecture
            ),
        ));
    }
    out
}

fn finding(check: SeedCheck, message: String) -> SeedFinding {
    SeedFinding { check, message }
}

fn cluster_info(
    labels: &BTreeMap<String, String>,
) -> Result<Option<SeedClusterInfo>, BadClusterInfo> {
    labels
        .get(SEED_CLUSTER_INFO_LABEL)
        .map(|t| parse_seed_cluster_info(t))
        .transpose()
}

fn check_format_version(labels: &BTreeMap<String, String>) -> Option<SeedFinding> {
    let message = match labels.get(SEED_FORMAT_VERSION_LABEL) {
        Some(v) if v == SEED_FORMAT_VERSION => return None,
        Some(v) => format!(
            "seed image label {SEED_FORMAT_VERSION_LABEL} is {v:?}, but ibi requires {SEED_FORMAT_VERSION:?}"
        ),
        None => format!(
            "the seed image has no {SEED_FORMAT_VERSION_LABEL} label; ibi requires {SEED_FORMAT_VERSION:?}"
        ),
    };
    Some(finding(SeedCheck::FormatVersion, message))
}

/// `lca-cli ibi` compares the strings exactly ("version specified in seed image … differs …").
fn check_ocp_version(ci: &SeedClusterInfo, seed_version: &str) -> Option<SeedFinding> {
    (ci.seed_cluster_ocp_version != seed_version).then(|| {
        finding(
            SeedCheck::OcpVersion,
            format!(
                "seedVersion {seed_version:?} differs from the seed image's seed_cluster_ocp_version {:?}",
                ci.seed_cluster_ocp_version
            ),
        )
    })
}

/// The installed host mounts `/var/lib/containers` with the seed's `var-lib-containers.mount`, whose
/// `What=` must name the partition lca-cli creates.
fn check_partition_label(ci: &SeedClusterInfo, label: &str) -> Option<SeedFinding> {
    let target = ci.container_storage_mountpoint_target.as_str();
    if target.is_empty() {
        return None;
    }
    let message = match partition_label(target) {
        Some(seed) if seed == label => return None,
        Some(seed) => format!(
            "extraPartitionLabel {label:?} differs from the seed's partition label {seed:?} (container_storage_mountpoint_target {target:?})"
        ),
        None => format!(
            "the seed mounts /var/lib/containers from {target:?}, not from a partition label, so it will not find the partition labelled {label:?} (extraPartitionLabel) that the installation creates"
        ),
    };
    Some(finding(SeedCheck::PartitionLabel, message))
}

/// The partition label a mount source names: `/dev/disk/by-partlabel/NAME` (udev-escaped, `\x20`) or
/// `PARTLABEL=NAME`; `None` for any other device.
pub fn partition_label(target: &str) -> Option<String> {
    if let Some(name) = target.strip_prefix("PARTLABEL=") {
        return Some(name.to_string());
    }
    let name = target.strip_prefix(BY_PARTLABEL)?;
    (!name.is_empty() && !name.contains('/')).then(|| unescape_udev(name))
}

/// Undoes udev's `\xNN` escaping of link names.
fn unescape_udev(name: &str) -> String {
    let mut bytes = Vec::with_capacity(name.len());
    let raw = name.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        let hex = raw
            .get(i + 2..i + 4)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (
            raw[i],
            raw.get(i + 1),
            hex.and_then(|h| u8::from_str_radix(h, 16).ok()),
        ) {
            (b'\\', Some(b'x'), Some(b)) => {
                bytes.push(b);
                i += 4;
            }
            (b, _, _) => {
                bytes.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_expectations_from_the_installation_config() {
        let config = InstallationConfig {
            seed_version: "4.16.0".into(),
            pull_secret: r#"{"auths":{"quay.io":{"auth":"dTpw"}}}"#.into(),
            image_digest_sources: Some(vec![crate::config::ImageDigestSource {
                source: "quay.io/org".into(),
                mirrors: vec!["m.lab/org".into()],
                source_policy: None,
            }]),
            ..Default::default()
        };
        let want = SeedExpectations::from_installation(&config);
        assert_eq!(want.architecture, "amd64");
        assert_eq!(
            want.extra_partition_label.as_deref(),
            Some("var-lib-containers")
        );
        let opts = registry_options(&config, vec!["127.0.0.1:5000".into()]).expect("options");
        let creds = opts
            .pull_secret
            .as_ref()
            .expect("secret")
            .credentials_for("quay.io", "org/seed");
        assert_eq!(
            creds.expect("lookup").map(|c| c.username),
            Some("u".to_string())
        );
        assert_eq!(opts.image_digest_sources.len(), 1);
        assert_eq!(opts.additional_trust_bundle, None);
        let bad = InstallationConfig {
            pull_secret: "{hunter2".into(),
            ..Default::default()
        };
        let e = registry_options(&bad, Vec::new())
            .expect_err("bad secret")
            .to_string();
        assert!(!e.contains("hunter2"), "{e}");
    }

    #[test]
    fn partition_labels() {
        let cases = [
            (
                "/dev/disk/by-partlabel/var-lib-containers",
                Some("var-lib-containers"),
            ),
            ("/dev/disk/by-partlabel/my\\x20label", Some("my label")),
            ("PARTLABEL=varlibcontainers", Some("varlibcontainers")),
            ("/dev/disk/by-label/var-lib-containers", None),
            ("/dev/sdb1", None),
            ("/dev/disk/by-partlabel/", None),
        ];
        for (target, want) in cases {
            assert_eq!(partition_label(target).as_deref(), want, "{target}");
        }
    }

    fn info(labels: &[(&str, &str)], arch: &str) -> SeedInfo {
        SeedInfo {
            digest: "sha256:x".into(),
            pinned_reference: None,
            architecture: arch.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            cluster_info: None,
            created: None,
            source: "test".into(),
        }
    }

    fn want(version: &str, arch: &str, label: Option<&str>) -> SeedExpectations {
        SeedExpectations {
            seed_version: version.into(),
            architecture: arch.into(),
            extra_partition_label: label.map(str::to_string),
        }
    }

    const INFO: &str = r#"{"seed_cluster_ocp_version":"4.16.0","has_proxy":false,"has_fips":false,"additionalTrustBundle":null,"container_storage_mountpoint_target":"/dev/disk/by-partlabel/var-lib-containers"}"#;

    #[test]
    fn checks_report_every_mismatch() {
        let good = info(
            &[
                (SEED_FORMAT_VERSION_LABEL, "4"),
                (SEED_CLUSTER_INFO_LABEL, INFO),
            ],
            "amd64",
        );
        assert_eq!(
            check_seed(&good, &want("4.16.0", "amd64", Some("var-lib-containers"))),
            []
        );
        assert_eq!(check_seed(&good, &want("4.16.0", "amd64", None)), []);
        let bad = info(
            &[
                (SEED_FORMAT_VERSION_LABEL, "3"),
                (SEED_CLUSTER_INFO_LABEL, INFO),
            ],
            "amd64",
        );
        let messages: Vec<String> =
            check_seed(&bad, &want("4.16.1", "arm64", Some("varlibcontainers")))
                .iter()
                .map(ToString::to_string)
                .collect();
        assert_eq!(
            messages,
            [
                r#"seed image label com.openshift.lifecycle-agent.seed_format_version is "3", but ibi requires "4""#,
                r#"seedVersion "4.16.1" differs from the seed image's seed_cluster_ocp_version "4.16.0""#,
                r#"extraPartitionLabel "varlibcontainers" differs from the seed's partition label "var-lib-containers" (container_storage_mountpoint_target "/dev/disk/by-partlabel/var-lib-containers")"#,
                r#"architecture "arm64" differs from the seed image's architecture "amd64""#,
            ]
        );
    }

    #[test]
    fn checks_missing_or_odd_labels() {
        let checks = |labels: &[(&str, &str)]| -> Vec<(SeedCheck, String)> {
            check_seed(
                &info(labels, "amd64"),
                &want("4.16.0", "amd64", Some("var-lib-containers")),
            )
            .into_iter()
            .map(|f| (f.check, f.message))
            .collect()
        };
        let got = checks(&[]);
        assert_eq!(
            got[0].1,
            r#"the seed image has no com.openshift.lifecycle-agent.seed_format_version label; ibi requires "4""#
        );
        assert_eq!(
            got[1].1,
            r#"the seed image has no com.openshift.lifecycle-agent.seed_cluster_info label, so seedVersion "4.16.0" cannot be checked against it"#
        );
        let got = checks(&[
            (SEED_FORMAT_VERSION_LABEL, "4"),
            (SEED_CLUSTER_INFO_LABEL, "not json"),
        ]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, SeedCheck::ClusterInfo);
        let by_label = INFO.replace("by-partlabel", "by-label");
        let got = checks(&[
            (SEED_FORMAT_VERSION_LABEL, "4"),
            (SEED_CLUSTER_INFO_LABEL, &by_label),
        ]);
        assert_eq!(got, [(SeedCheck::PartitionLabel, r#"the seed mounts /var/lib/containers from "/dev/disk/by-label/var-lib-containers", not from a partition label, so it will not find the partition labelled "var-lib-containers" (extraPartitionLabel) that the installation creates"#.to_string())]);
        let no_mount = INFO.replace("/dev/disk/by-partlabel/var-lib-containers", "");
        assert_eq!(
            checks(&[
                (SEED_FORMAT_VERSION_LABEL, "4"),
                (SEED_CLUSTER_INFO_LABEL, &no_mount)
            ]),
            []
        );
    }
}
