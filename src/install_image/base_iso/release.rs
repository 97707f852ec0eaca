//! The base ISO that matches the seed, found through its release payload: the payload carries the
//! CoreOS stream metadata the installer of that very version embeds, as the ConfigMap
//! `release-manifests/0000_50_installer_coreos-bootimages.yaml` whose `data.stream` is the stream JSON.
//! The payload is the image the seed's cluster-version-operator ran, listed in the seed's
//! `containers.list`, or named with `--release-image`. Both images are read through the seed's
//! registry client (pull secret, mirrors, insecure registries) or from an `oci:` layout.

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::image_ref::parse_image_reference;
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

/// `data.stream` of the coreos-bootimages ConfigMap: the CoreOS stream metadata JSON.
pub fn stream_from_bootimages(yaml: &str) -> Result<String> {
    let doc: Value = serde_yaml_ng::from_str(yaml).context("not a YAML ConfigMap")?;
    match doc.pointer("/data/stream").and_then(Value::as_str) {
        Some(s) if !s.trim().is_empty() => Ok(s.to_string()),
        _ => bail!("the ConfigMap has no data.stream"),
    }
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

/// The CoreOS stream metadata JSON of the release payload `release`.
pub fn release_stream(
    release: &str,
    architecture: &str,
    registry: &RegistryOptions,
) -> Result<String> {
    let yaml = read_file(
        release,
        architecture,
        registry,
        BOOTIMAGES_MANIFEST,
        LayerOrder::LastToFirst,
    )
    .with_context(|| format!("reading the release payload {release}"))?
    .with_context(|| format!("the release payload {release} has no {BOOTIMAGES_MANIFEST}"))?;
    stream_from_bootimages(&String::from_utf8_lossy(&yaml))
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
        assert_eq!(
            stream_from_bootimages(yaml).unwrap(),
            "{\"stream\": \"rhcos-4.18\"}\n"
        );
        let e = stream_from_bootimages("data: {}").unwrap_err();
        assert_eq!(e.to_string(), "the ConfigMap has no data.stream");
    }
}
