//! install-config `imageDigestSources` as the cluster object they mean: a `config.openshift.io/v1`
//! ImageDigestMirrorSet, as the installer writes it. The configuration ISO carries it among the
//! cluster manifests; a hub takes it as an extra manifest (IBIO `docs/image_mirroring.md`).

use anyhow::{Context, Result};
use serde::Serialize;

use super::ImageDigestSource;

/// Name of the IDMS object the installer writes; post-pivot deletes all IDMSs before applying ours.
pub const IDMS_NAME: &str = "image-digest-mirror";

#[derive(Serialize)]
struct Idms<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: IdmsMeta,
    spec: IdmsSpec<'a>,
    status: serde_json::Map<String, serde_json::Value>,
}

#[derive(Serialize)]
struct IdmsMeta {
    name: &'static str,
}

#[derive(Serialize)]
struct IdmsSpec<'a> {
    #[serde(rename = "imageDigestMirrors")]
    image_digest_mirrors: Vec<IdmsMirror<'a>>,
}

#[derive(Serialize)]
struct IdmsMirror<'a> {
    source: &'a str,
    mirrors: &'a [String],
    #[serde(rename = "mirrorSourcePolicy", skip_serializing_if = "Option::is_none")]
    mirror_source_policy: Option<&'a str>,
}

/// A compact `config.openshift.io/v1` ImageDigestMirrorSet (`cluster-configuration/manifests/
/// image-digest-mirror-set.json` in the configuration ISO) built from install-config `imageDigestSources`.
pub fn image_digest_mirror_set(sources: &[ImageDigestSource]) -> Result<Vec<u8>> {
    let idms = Idms {
        kind: "ImageDigestMirrorSet",
        api_version: "config.openshift.io/v1",
        metadata: IdmsMeta { name: IDMS_NAME },
        spec: IdmsSpec {
            image_digest_mirrors: sources
                .iter()
                .map(|s| IdmsMirror {
                    source: &s.source,
                    mirrors: &s.mirrors,
                    mirror_source_policy: s.source_policy.as_deref(),
                })
                .collect(),
        },
        status: serde_json::Map::new(),
    };
    serde_json::to_vec(&idms).context("serialising image-digest-mirror-set.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idms_shape() {
        let src = [ImageDigestSource {
            source: "quay.io/openshift-release-dev/ocp-release".into(),
            mirrors: vec!["mirror.example.com:5000/ocp/release".into()],
            source_policy: Some("NeverContactSource".into()),
        }];
        let v: serde_json::Value =
            serde_json::from_slice(&image_digest_mirror_set(&src).unwrap()).unwrap();
        assert_eq!(v["kind"], "ImageDigestMirrorSet");
        assert_eq!(v["apiVersion"], "config.openshift.io/v1");
        assert_eq!(v["metadata"]["name"], "image-digest-mirror");
        let m = &v["spec"]["imageDigestMirrors"][0];
        assert_eq!(m["source"], "quay.io/openshift-release-dev/ocp-release");
        assert_eq!(m["mirrors"][0], "mirror.example.com:5000/ocp/release");
        assert_eq!(m["mirrorSourcePolicy"], "NeverContactSource");
    }
}
