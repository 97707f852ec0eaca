//! The optional `extra-manifests/` directory: user Kubernetes objects copied to `/extra-manifests/` of the
//! config ISO, which lifecycle-agent applies after the cluster manifests.
//!
//! As in the installer, only top-level `*.yaml`, `*.yml` and `*.json` files are used, sorted by name. Unlike
//! the installer, each is parsed here (multi-document YAML or JSON) so a broken manifest fails on the
//! workstation instead of during post-pivot on the host. Long file names are fine: our ISO keeps them.

use std::path::Path;

use anyhow::Context;

use super::finding::Findings;
use crate::util::finding::Finding;

/// User manifests copied to `/extra-manifests/` of the config ISO; lifecycle-agent applies them after the
/// cluster manifests.
pub const EXTRA_MANIFESTS_DIR: &str = "extra-manifests";

/// One extra manifest: its file name and bytes, copied verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraManifest {
    pub name: String,
    pub data: Vec<u8>,
}

const EXTENSIONS: &[&str] = &["yaml", "yml", "json"];

/// Reads the manifests in `dir` (which may be absent); returns them sorted by name with the findings and
/// warnings. I/O errors other than a missing directory are errors naming the path.
pub fn load_extra_manifests(
    dir: &Path,
) -> anyhow::Result<(Vec<ExtraManifest>, Vec<Finding>, Vec<String>)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(e).with_context(|| format!("reading directory {}", dir.display())),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("reading directory {}", dir.display()))?;
        names.push(entry.file_name());
    }
    names.sort();

    let mut manifests = Vec::new();
    let mut findings = Vec::new();
    let mut warnings = Vec::new();
    for name in names {
        let rel = format!("{EXTRA_MANIFESTS_DIR}/{}", name.to_string_lossy());
        let mut f = Findings::new(&rel);
        if let Some(m) = load_one(dir, &name, &mut f)? {
            manifests.push(m);
        }
        let (e, w) = f.into_parts();
        findings.extend(e);
        warnings.extend(w);
    }
    Ok((manifests, findings, warnings))
}

/// Reads and checks one directory entry; `None` when it is skipped or has findings.
fn load_one(
    dir: &Path,
    name: &std::ffi::OsStr,
    f: &mut Findings,
) -> anyhow::Result<Option<ExtraManifest>> {
    let path = dir.join(name);
    let Some(name) = name.to_str() else {
        f.warn("", "ignored: the file name is not valid UTF-8");
        return Ok(None);
    };
    // Not followed: a link could pull any file of the machine into an ISO that leaves it.
    let meta =
        std::fs::symlink_metadata(&path).with_context(|| format!("reading {}", path.display()))?;
    let ext = Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default();
    if meta.file_type().is_symlink() {
        f.warn(
            "",
            "ignored: a symbolic link (only regular files are used; copy the file here)",
        );
        return Ok(None);
    }
    if !meta.is_file() || !EXTENSIONS.contains(&ext) {
        f.warn(
            "",
            "ignored: only regular *.yaml, *.yml and *.json files are used",
        );
        return Ok(None);
    }
    let data = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let before = f.errors.len();
    check_manifest(f, ext == "json", &data);
    Ok((f.errors.len() == before).then(|| ExtraManifest {
        name: name.to_string(),
        data,
    }))
}

/// Parses the file and checks that every document is a Kubernetes object (or a `List` of them).
pub(crate) fn check_manifest(f: &mut Findings, json: bool, data: &[u8]) {
    let docs = match parse_documents(json, data) {
        Ok(d) => d,
        Err(e) => {
            f.file_error(e.to_string());
            return;
        }
    };
    let objects: Vec<(usize, serde_json::Value)> = docs
        .into_iter()
        .enumerate()
        .filter(|(_, d)| !d.is_null())
        .collect();
    if objects.is_empty() {
        f.warn("", "contains no Kubernetes objects");
    }
    for (i, doc) in objects {
        check_object(f, i + 1, &doc);
    }
}

/// Why a manifest file holds no documents.
#[derive(Debug, thiserror::Error)]
enum Undecodable {
    #[error("not valid JSON: {0}")]
    Json(serde_json::Error),
    #[error("not valid YAML: {0}")]
    TooDeep(crate::util::yaml::TooDeep),
    /// `number` counts from 1.
    #[error("document {number}: not valid YAML: {error}")]
    Yaml {
        number: usize,
        error: serde_yaml_ng::Error,
    },
}

fn parse_documents(json: bool, data: &[u8]) -> Result<Vec<serde_json::Value>, Undecodable> {
    if json {
        let v: serde_json::Value = serde_json::from_slice(data).map_err(Undecodable::Json)?;
        return Ok(vec![v]);
    }
    // Deep flow nesting makes the YAML scanner quadratic; refuse it before decoding (util::yaml).
    crate::util::yaml::check_flow_depth(data).map_err(Undecodable::TooDeep)?;
    let mut docs = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_slice(data).enumerate() {
        let v = serde::Deserialize::deserialize(doc).map_err(|error| Undecodable::Yaml {
            number: i + 1,
            error,
        })?;
        docs.push(v);
    }
    Ok(docs)
}

fn check_object(f: &mut Findings, n: usize, doc: &serde_json::Value) {
    let Some(obj) = doc.as_object() else {
        f.file_error(format!(
            "document {n}: not a Kubernetes object (expected a mapping)"
        ));
        return;
    };
    if let Some(items) = obj.get("items").and_then(|i| i.as_array()) {
        for item in items {
            check_object(f, n, item);
        }
        return;
    }
    for key in ["apiVersion", "kind"] {
        let value = obj.get(key).and_then(|v| v.as_str()).unwrap_or_default();
        if value.is_empty() {
            f.file_error(format!(
                "document {n}: not a Kubernetes object: {key} is missing"
            ));
        }
    }
    api_server_limits(f, n, obj);
}

/// A ConfigMap's or Secret's data the API server takes at most (`MaxSecretSize`, and the same
/// bound in ConfigMap validation: kubernetes `pkg/apis/core/validation`).
const MAX_DATA_BYTES: usize = 1024 * 1024;
/// Kinds whose names are path segments, not DNS-1123 subdomains (`system:…` ClusterRoles).
const PATH_SEGMENT_NAMED: &[&str] = &["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"];

/// What the API server would refuse when post-pivot (or a hub) applies the object, found now: a name
/// that is not a DNS-1123 subdomain (or, for RBAC kinds, not a path segment), and a ConfigMap or
/// Secret whose data is over 1 MiB.
fn api_server_limits(f: &mut Findings, n: usize, obj: &serde_json::Map<String, serde_json::Value>) {
    let kind = obj.get("kind").and_then(|v| v.as_str()).unwrap_or_default();
    let name = obj
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(|v| v.as_str());
    if let Some(name) = name {
        let ok = match PATH_SEGMENT_NAMED.contains(&kind) {
            true => !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%']),
            false => super::is_dns1123_subdomain(name),
        };
        if !ok {
            f.file_error(format!(
                "document {n}: metadata.name {:?} is not a name the API server takes for a {kind} (lower-case letters, digits, '-' and '.', at most 253): post-pivot would fail to apply it",
                crate::util::text::escape_control(name)
            ));
        }
    }
    if matches!(kind, "ConfigMap" | "Secret") {
        let bytes: usize = ["data", "binaryData", "stringData"]
            .iter()
            .filter_map(|k| obj.get(*k).and_then(|d| d.as_object()))
            .flat_map(|d| d.iter())
            .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
            .sum();
        // A Secret's `data` is base64: the limit is on what it decodes to.
        let bytes = match kind {
            "Secret" => bytes * 3 / 4,
            _ => bytes,
        };
        if bytes > MAX_DATA_BYTES {
            f.file_error(format!(
                "document {n}: the {kind}'s data is {bytes} bytes, over the {MAX_DATA_BYTES} bytes the API server takes: post-pivot would fail to apply it"
            ));
        }
    }
}
