//! `ibi watch`'s marker in the configuration ISO (`contract::config_iso::MARKER_FILE`): a ConfigMap
//! stamped with the build's time, which post-pivot applies with the other extra manifests and the
//! watch reads back from the cluster (docs/deliver.md, "Stale answers"). Also reads back, from a
//! built ISO, what the watch compares the cluster with: the marker's stamp and the `cluster_id`
//! post-pivot writes into ClusterVersion.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Deserialize;

use crate::config::ExtraManifest;
use crate::contract::config_iso::{
    EXTRA_MANIFESTS_DIR, MANIFEST_PATH, MARKER_BUILT_AT_KEY, MARKER_FILE, MARKER_NAME,
    MARKER_NAMESPACE,
};
use crate::iso9660::{IsoError, IsoReader};

/// The build's time as the marker writes it: RFC 3339, UTC, whole seconds.
pub fn built_at(timestamp: i64) -> Result<String> {
    let t = DateTime::<Utc>::from_timestamp(timestamp, 0)
        .with_context(|| format!("the build time {timestamp} is out of range"))?;
    Ok(t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// The marker manifest for a build at `timestamp` (seconds since 1970).
pub fn render(timestamp: i64) -> Result<ExtraManifest> {
    let yaml = format!(
        "# Written by ibi create config-image. `ibi watch` reads this ConfigMap back: its creation time
# tells a ClusterVersion that changed after this reconfiguration from the seed's own status.
apiVersion: v1
kind: ConfigMap
metadata:
  name: {MARKER_NAME}
  namespace: {MARKER_NAMESPACE}
data:
  {MARKER_BUILT_AT_KEY}: \"{}\"
",
        built_at(timestamp)?
    );
    Ok(ExtraManifest {
        name: MARKER_FILE.to_string(),
        data: yaml.into_bytes(),
    })
}

/// The user's extra manifests with the marker added, in name order; a user file of the marker's
/// name is refused (it would be silently replaced, or replace ours).
pub fn with_marker(user: &[ExtraManifest], timestamp: i64) -> Result<Vec<ExtraManifest>> {
    if user.iter().any(|m| m.name == MARKER_FILE) {
        bail!(
            "{EXTRA_MANIFESTS_DIR}/{MARKER_FILE}: this name is ibi's own (the ConfigMap {MARKER_NAMESPACE}/{MARKER_NAME} that ibi watch reads back): rename the file"
        );
    }
    let mut all = user.to_vec();
    all.push(render(timestamp)?);
    all.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(all)
}

/// What a built configuration ISO promises the cluster will show once reconfigured with it. Kept in
/// deploy's record of a phase as what the host was given (`builtAt`, `clusterId`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expected {
    /// The marker's `builtAt`.
    pub built_at: String,
    /// manifest.json's `cluster_id`, which post-pivot writes into ClusterVersion `spec.clusterID`.
    pub cluster_id: String,
}

#[derive(Deserialize)]
struct MarkerDoc {
    #[serde(default)]
    data: BTreeMap<String, String>,
}

/// Only `cluster_id` is read: the rest of manifest.json (keys, pull secret) is skipped unparsed.
#[derive(Deserialize)]
struct ManifestIds {
    #[serde(default)]
    cluster_id: String,
}

/// Reads [`Expected`] from the configuration ISO at `iso`.
pub fn read_expected(iso: &Path) -> Result<Expected> {
    let file = std::fs::File::open(iso).with_context(|| {
        format!(
            "opening {} (the site's configuration ISO: ibi create config-image builds it)",
            iso.display()
        )
    })?;
    let mut r = IsoReader::open(file)
        .with_context(|| format!("{}: not a readable ISO 9660 image", iso.display()))?;
    let marker_path = format!("{EXTRA_MANIFESTS_DIR}/{MARKER_FILE}");
    let marker = match r.read_file(&marker_path) {
        Ok(b) => b,
        Err(IsoError::NotFound { .. }) => bail!(
            "{}: has no {marker_path}: it was built by an older ibi, and without it a ClusterVersion fresh from this reconfiguration cannot be told from the seed's; build it again with ibi create config-image (and give the host the new ISO)",
            iso.display()
        ),
        Err(e) => {
            return Err(e).with_context(|| format!("{}: reading {marker_path}", iso.display()));
        }
    };
    let manifest = r
        .read_file(MANIFEST_PATH)
        .with_context(|| format!("{}: reading {MANIFEST_PATH}", iso.display()))?;
    expected_from(&marker, &manifest, &iso.display().to_string())
}

/// [`Expected`] from the marker's and manifest.json's bytes (a configuration ISO's, or the tree a
/// one-shot installation ISO carries); `shown` names where they came from in errors.
pub fn expected_from(marker: &[u8], manifest: &[u8], shown: &str) -> Result<Expected> {
    let marker_path = format!("{EXTRA_MANIFESTS_DIR}/{MARKER_FILE}");
    let doc: MarkerDoc = serde_yaml_ng::from_slice(marker)
        .with_context(|| format!("{shown}: {marker_path}: not the marker ConfigMap"))?;
    let built_at = doc
        .data
        .get(MARKER_BUILT_AT_KEY)
        .cloned()
        .with_context(|| {
            format!("{shown}: {marker_path}: data.{MARKER_BUILT_AT_KEY} is missing")
        })?;
    let ids: ManifestIds = serde_json::from_slice(manifest)
        .map_err(|_| anyhow::anyhow!("{shown}: {MANIFEST_PATH}: not JSON"))?;
    Ok(Expected {
        built_at,
        cluster_id: ids.cluster_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(name: &str) -> ExtraManifest {
        ExtraManifest {
            name: name.into(),
            data: b"apiVersion: v1\nkind: ConfigMap\n".to_vec(),
        }
    }

    #[test]
    fn the_marker_is_a_configmap_stamped_with_the_build_time() {
        let m = render(1_700_000_000).unwrap();
        assert_eq!(m.name, "ibi-reconfiguration.yaml");
        let v: serde_json::Value = serde_yaml_ng::from_slice(&m.data).unwrap();
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["kind"], "ConfigMap");
        assert_eq!(v["metadata"]["name"], "ibi-reconfiguration");
        assert_eq!(v["metadata"]["namespace"], "openshift-config");
        assert_eq!(v["data"]["builtAt"], "2023-11-14T22:13:20Z");
    }

    #[test]
    fn the_marker_joins_the_user_manifests_in_name_order() {
        let all = with_marker(&[manifest("50-a.yaml"), manifest("zz.yaml")], 0).unwrap();
        let names: Vec<&str> = all.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["50-a.yaml", "ibi-reconfiguration.yaml", "zz.yaml"]);
    }

    /// An ISO as `create config-image` lays it out, with or without the marker.
    fn iso_with(manifests: &[ExtraManifest]) -> tempfile::NamedTempFile {
        let tree =
            crate::config_image::iso::build_tree(crate::config_image::iso::ConfigIsoContent {
                manifest_json: br#"{"api_version":1,"cluster_id":"c-1","pull_secret":"MARKER"}"#
                    .to_vec(),
                image_digest_mirror_set: None,
                extra_manifests: manifests,
            })
            .unwrap();
        let f = tempfile::NamedTempFile::new().unwrap();
        crate::config_image::iso::write_iso(f.path(), &tree, 0).unwrap();
        f
    }

    #[test]
    fn the_expectations_are_read_back_from_the_iso() {
        let iso = iso_with(&with_marker(&[manifest("50-a.yaml")], 1_700_000_000).unwrap());
        assert_eq!(
            read_expected(iso.path()).unwrap(),
            Expected {
                built_at: "2023-11-14T22:13:20Z".into(),
                cluster_id: "c-1".into(),
            }
        );
    }

    #[test]
    fn an_iso_without_the_marker_is_refused_with_what_to_do() {
        let iso = iso_with(&[manifest("50-a.yaml")]);
        let e = format!("{:#}", read_expected(iso.path()).unwrap_err());
        assert!(
            e.contains(
                "has no extra-manifests/ibi-reconfiguration.yaml: it was built by an older ibi"
            ),
            "{e}"
        );
        assert!(
            e.contains("build it again with ibi create config-image"),
            "{e}"
        );
        let e = format!(
            "{:#}",
            read_expected(Path::new("/nonexistent/x.iso")).unwrap_err()
        );
        assert!(e.contains("ibi create config-image builds it"), "{e}");
    }

    #[test]
    fn a_user_file_of_the_markers_name_is_refused() {
        let e = with_marker(&[manifest("ibi-reconfiguration.yaml")], 0)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("extra-manifests/ibi-reconfiguration.yaml: this name is ibi's own"),
            "{e}"
        );
    }
}
