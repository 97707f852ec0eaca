//! What an image's manifest, index and config say, whichever store they come from (a registry or
//! an OCI layout on disk): the platform's entry of an index, the config's descriptor, and
//! [`ImageInfo`], what the checks need.

use std::collections::BTreeMap;

use serde::Deserialize;

/// A config blob is a few KiB; refuse to buffer anything absurd.
pub(super) const MAX_BLOB_SIZE: u64 = 4 << 20;

/// What the checks need from an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    /// The digest the reference resolves to (an image index's digest when it names an index).
    pub digest: String,
    /// The digest of the platform image manifest (equal to `digest` without an index).
    pub manifest_digest: String,
    /// `architecture` of the image config, in Go names (`amd64`, `arm64`).
    pub architecture: String,
    pub os: String,
    pub labels: BTreeMap<String, String>,
    /// The config's `created` (RFC 3339), when it has one.
    pub created: Option<String>,
    pub layer_count: usize,
    /// Where the image was read: the mirror or source reference, or `oci:DIR[:TAG]`.
    pub source: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Descriptor {
    pub digest: String,
    #[serde(default)]
    pub size: u64,
    #[serde(default)]
    pub platform: Option<Platform>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Platform {
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    os: String,
}

/// An image manifest or an image index (both shapes in one, as the media type may be absent).
#[derive(Debug, Deserialize)]
pub(super) struct Manifest {
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    pub manifests: Option<Vec<Descriptor>>,
    #[serde(default)]
    pub layers: Vec<Descriptor>,
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    architecture: String,
    #[serde(default)]
    created: Option<String>,
    #[serde(default)]
    os: String,
    #[serde(default)]
    config: Option<ContainerConfig>,
}

#[derive(Debug, Default, Deserialize)]
struct ContainerConfig {
    #[serde(rename = "Labels", default)]
    labels: Option<BTreeMap<String, String>>,
}

/// Why a manifest, an index or an image config gives ibi no image.
#[derive(Debug, thiserror::Error)]
pub(super) enum ManifestError {
    #[error("manifest is not valid JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("the image index has no linux/{architecture} image (it has: {})", platforms(.found))]
    NoPlatform {
        architecture: String,
        found: Vec<String>,
    },
    #[error("the manifest has no config (is it a nested image index?)")]
    NoConfig,
    #[error("the image config is {0} bytes, over the {MAX_BLOB_SIZE}-byte limit")]
    ConfigTooBig(u64),
    #[error("image config is not valid JSON: {0}")]
    ConfigNotJson(serde_json::Error),
}

fn platforms(found: &[String]) -> String {
    if found.is_empty() {
        "no platforms".to_string()
    } else {
        found.join(", ")
    }
}

pub(super) fn parse_manifest(bytes: &[u8]) -> Result<Manifest, ManifestError> {
    serde_json::from_slice(bytes).map_err(ManifestError::NotJson)
}

/// Picks the `linux/<architecture>` entry of an image index.
pub(super) fn select_platform<'a>(
    entries: &'a [Descriptor],
    architecture: &str,
) -> Result<&'a Descriptor, ManifestError> {
    let matches =
        |p: &Platform| p.architecture == architecture && (p.os.is_empty() || p.os == "linux");
    if let Some(d) = entries
        .iter()
        .find(|d| d.platform.as_ref().is_some_and(matches))
    {
        return Ok(d);
    }
    let found: Vec<String> = entries
        .iter()
        .filter_map(|d| {
            d.platform
                .as_ref()
                .map(|p| format!("{}/{}", p.os, p.architecture))
        })
        .collect();
    Err(ManifestError::NoPlatform {
        architecture: architecture.to_string(),
        found,
    })
}

/// The config descriptor of an image manifest, refusing an index or an oversized config.
pub(super) fn config_descriptor(manifest: &Manifest) -> Result<&Descriptor, ManifestError> {
    let config = manifest.config.as_ref().ok_or(ManifestError::NoConfig)?;
    if config.size > MAX_BLOB_SIZE {
        return Err(ManifestError::ConfigTooBig(config.size));
    }
    Ok(config)
}

/// Builds [`ImageInfo`] from the config blob of the platform manifest.
pub(super) fn image_info(
    digest: String,
    manifest_digest: String,
    manifest: &Manifest,
    config: &[u8],
    source: String,
) -> Result<ImageInfo, ManifestError> {
    let file: ConfigFile = serde_json::from_slice(config).map_err(ManifestError::ConfigNotJson)?;
    Ok(ImageInfo {
        digest,
        manifest_digest,
        architecture: file.architecture,
        os: file.os,
        labels: file.config.and_then(|c| c.labels).unwrap_or_default(),
        created: file.created,
        layer_count: manifest.layers.len(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(digest: &str, arch: &str) -> Descriptor {
        Descriptor {
            digest: digest.into(),
            size: 1,
            platform: Some(Platform {
                architecture: arch.into(),
                os: "linux".into(),
            }),
            annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn selects_platform() {
        let entries = [entry("sha256:a", "amd64"), entry("sha256:b", "arm64")];
        assert_eq!(
            select_platform(&entries, "arm64").expect("arm64").digest,
            "sha256:b"
        );
        let e = select_platform(&entries, "s390x")
            .expect_err("s390x")
            .to_string();
        assert_eq!(
            e,
            "the image index has no linux/s390x image (it has: linux/amd64, linux/arm64)"
        );
    }

    #[test]
    fn reads_config_labels() {
        let manifest = parse_manifest(br#"{"schemaVersion":2,"config":{"digest":"sha256:c","size":3},"layers":[{"digest":"sha256:l","size":1}]}"#).expect("manifest");
        let info = image_info(
            "d".into(),
            "d".into(),
            &manifest,
            br#"{"architecture":"arm64","os":"linux","config":{"Labels":{"a":"b"}}}"#,
            "s".into(),
        )
        .expect("info");
        assert_eq!(info.architecture, "arm64");
        assert_eq!(info.labels.get("a").map(String::as_str), Some("b"));
        assert_eq!(info.layer_count, 1);
        let e = config_descriptor(&parse_manifest(br#"{"manifests":[]}"#).expect("index"))
            .expect_err("no config")
            .to_string();
        assert!(e.contains("no config"), "{e}");
    }
}
