//! The base ISO that matches the seed, found through its release payload: the payload carries the
//! CoreOS stream metadata the installer of that very version embeds, as the ConfigMap
//! `release-manifests/0000_50_installer_coreos-bootimages.yaml`. Its `data.stream` is one stream JSON;
//! the multi-stream payloads (installer `hack/build-coreos-manifest.go` @ 006d4573) add `data.streams`,
//! a JSON object keyed by stream name (`rhel-9`, `rhel-10`), and keep `rhel-9` in `data.stream` as the
//! default. The installer boots the stream of its own major version (`rhel-10` from 5 on), so ibi takes
//! that stream of `streams` for the release's version.
//! The payload is the image the seed's cluster-version-operator ran, listed in the seed's
//! `containers.list`, or named with `--release-image`. Both images are read through the seed's
//! registry client (pull secret, mirrors, insecure registries) or from an `oci:` layout.

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::config::parse_minor_version;
use crate::image_ref::parse_image_reference;
use crate::seed::coreos_stream;
use crate::seed::defects::read_image_file;
use crate::seed::registry::{LayerOrder, RegistryOptions};

/// The ConfigMap of the release payload that holds the CoreOS stream (installer's `coreos-bootimages`).
pub const BOOTIMAGES_MANIFEST: &str = "release-manifests/0000_50_installer_coreos-bootimages.yaml";
/// The seed's list of the images its cluster ran (lifecycle-agent writes it at the image root).
pub const CONTAINERS_LIST: &str = "containers.list";
/// Repositories a release payload is published under: OpenShift's, OKD's, and `oc adm release mirror`'s
/// usual target.
const RELEASE_REPOSITORIES: [&str; 3] = ["ocp-release", "release", "openshift4"];
/// Both files are small; a bigger one is not what we look for.
const FILE_LIMIT: u64 = 8 << 20;

/// The release payload in a seed's `containers.list`: the entry whose repository is one a payload is
/// published under.
pub fn release_in_containers_list(text: &str) -> Option<String> {
    text.lines().map(str::trim).find_map(|line| {
        let r = parse_image_reference(line).ok()?;
        let last = r.repository.rsplit('/').next()?;
        RELEASE_REPOSITORIES
            .contains(&last)
            .then(|| line.to_string())
    })
}

/// The CoreOS stream metadata a release's coreos-bootimages ConfigMap names for it, and which stream
/// it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootStream {
    /// `rhel-9`, `rhel-10` when taken from `data.streams`; `None` for the single `data.stream`.
    pub name: Option<String>,
    /// The stream metadata JSON.
    pub json: String,
}

/// The stream of the ConfigMap for the release: from `data.streams`, the one of the release's major
/// version (`data.releaseVersion`, else `seed_version`: `rhel-10` from 5 on, `rhel-9` below); without
/// `data.streams`, `data.stream`.
pub fn stream_from_bootimages(yaml: &str, seed_version: &str) -> Result<BootStream> {
    let doc: Value = serde_yaml_ng::from_str(yaml).context("not a YAML ConfigMap")?;
    let Some(streams) = doc.pointer("/data/streams").and_then(Value::as_str) else {
        return match doc.pointer("/data/stream").and_then(Value::as_str) {
            Some(s) if !s.trim().is_empty() => Ok(BootStream {
                name: None,
                json: s.to_string(),
            }),
            _ => bail!("the ConfigMap has no data.stream"),
        };
    };
    let release = doc
        .pointer("/data/releaseVersion")
        .and_then(Value::as_str)
        .and_then(parse_minor_version)
        .filter(|v| v.major >= 4);
    let version = release
        .or_else(|| parse_minor_version(seed_version))
        .with_context(|| {
            format!("neither data.releaseVersion nor the seedVersion {seed_version:?} names an OpenShift version, so the stream of data.streams cannot be chosen")
        })?;
    let name = coreos_stream(version);
    let all: serde_json::Map<String, Value> =
        serde_json::from_str(streams).context("data.streams is not a JSON object")?;
    let Some(stream) = all.get(name) else {
        let names: Vec<&str> = all.keys().map(String::as_str).collect();
        bail!(
            "data.streams has no {name} stream, the one OpenShift {version} boots (it has: {})",
            names.join(", ")
        );
    };
    Ok(BootStream {
        name: Some(name.to_string()),
        json: serde_json::to_string(stream).context("re-encoding the stream")?,
    })
}

/// Reads `path` from the image `reference` (a registry reference or `oci:PATH[:TAG]`).
fn read_file(
    reference: &str,
    architecture: &str,
    registry: &RegistryOptions,
    path: &str,
    order: LayerOrder,
) -> Result<Option<Vec<u8>>> {
    read_image_file(
        reference,
        architecture,
        registry,
        path.into(),
        order,
        FILE_LIMIT,
    )
}

/// The release payload the seed's cluster ran, from its `containers.list`.
pub fn seed_release(seed: &str, architecture: &str, registry: &RegistryOptions) -> Result<String> {
    let list = read_file(
        seed,
        architecture,
        registry,
        CONTAINERS_LIST,
        LayerOrder::FirstToLast,
    )
    .with_context(|| format!("reading {CONTAINERS_LIST} of the seed {seed}"))?
    .with_context(|| format!("the seed {seed} has no {CONTAINERS_LIST}"))?;
    release_in_containers_list(&String::from_utf8_lossy(&list)).with_context(|| {
        format!("the seed's {CONTAINERS_LIST} names no release payload (a repository named ocp-release, release or openshift4)")
    })
}

/// The CoreOS stream metadata of the release payload `release` for a seed of `seed_version`.
pub fn release_stream(
    release: &str,
    architecture: &str,
    registry: &RegistryOptions,
    seed_version: &str,
) -> Result<BootStream> {
    let yaml = read_file(
        release,
        architecture,
        registry,
        BOOTIMAGES_MANIFEST,
        LayerOrder::LastToFirst,
    )
    .with_context(|| format!("reading the release payload {release}"))?
    .with_context(|| format!("the release payload {release} has no {BOOTIMAGES_MANIFEST}"))?;
    stream_from_bootimages(&String::from_utf8_lossy(&yaml), seed_version)
        .with_context(|| format!("{BOOTIMAGES_MANIFEST} of {release}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_is_found_in_containers_list() {
        let list = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:1111111111111111111111111111111111111111111111111111111111111111\n\
                    quay.io/openshift-release-dev/ocp-release@sha256:2222222222222222222222222222222222222222222222222222222222222222\n\
                    quay.io/edge-infrastructure/recert:v0";
        assert_eq!(
            release_in_containers_list(list).as_deref(),
            Some(
                "quay.io/openshift-release-dev/ocp-release@sha256:2222222222222222222222222222222222222222222222222222222222222222"
            )
        );
        assert_eq!(release_in_containers_list("quay.io/a/b:1\n\n"), None);
    }

    #[test]
    fn the_stream_is_the_configmaps_data_stream() {
        let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coreos-bootimages\ndata:\n  releaseVersion: 4.18.0\n  stream: |\n    {\"stream\": \"rhcos-4.18\"}\n";
        let got = stream_from_bootimages(yaml, "4.18.0").unwrap();
        assert_eq!(got.json, "{\"stream\": \"rhcos-4.18\"}\n");
        assert_eq!(got.name, None);
        let e = stream_from_bootimages("data: {}", "4.18.0").unwrap_err();
        assert_eq!(e.to_string(), "the ConfigMap has no data.stream");
    }

    /// A multi-stream ConfigMap as the installer's generator writes it: rhel-9 the default.
    fn multi(release_version: &str) -> String {
        format!(
            "data:\n  releaseVersion: {release_version}\n  stream: '{{\"stream\":\"nine\"}}'\n  streams: |\n    {{\"rhel-10\": {{\"stream\": \"ten\"}}, \"rhel-9\": {{\"stream\": \"nine\"}}}}\n"
        )
    }

    #[test]
    fn the_stream_of_the_releases_major_version_is_taken_from_streams() {
        let cases = [
            ("5.0.0", "4.22.0", "rhel-10", "ten"),
            ("4.23.1", "5.0.0", "rhel-9", "nine"),
            // The generator's placeholder is no release: the seed's version decides.
            ("0.0.1-snapshot", "5.0.0", "rhel-10", "ten"),
            ("0.0.1-snapshot", "4.21.0", "rhel-9", "nine"),
        ];
        for (release, seed, name, stream) in cases {
            let got = stream_from_bootimages(&multi(release), seed).unwrap();
            assert_eq!(got.name.as_deref(), Some(name), "{release} {seed}");
            assert_eq!(got.json, format!("{{\"stream\":\"{stream}\"}}"));
        }
    }

    #[test]
    fn a_missing_stream_of_streams_is_an_error_naming_those_there() {
        let yaml =
            "data:\n  releaseVersion: 5.0.0\n  stream: '{}'\n  streams: '{\"rhel-9\": {}}'\n";
        let e = stream_from_bootimages(yaml, "5.0.0").unwrap_err();
        assert_eq!(
            e.to_string(),
            "data.streams has no rhel-10 stream, the one OpenShift 5.0 boots (it has: rhel-9)"
        );
    }
}
