//! An OCI image layout on disk (`oci:DIR[:TAG]`): its `index.json` entry by tag, the platform's
//! manifest, and blobs read only after their sha256 is checked.

use std::path::Path;

use anyhow::{Context, bail};

use super::manifest::{
    Descriptor, ImageInfo, MAX_BLOB_SIZE, Manifest, config_descriptor, image_info, parse_manifest,
    select_platform,
};
use crate::util::digest::sha256_hex;

/// The OCI annotation skopeo and podman write into `index.json` for `oci:DIR:TAG`.
const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";

/// Reads an image from the OCI image layout `dir`: by `tag` (the `org.opencontainers.image.ref.name`
/// annotation), or the only image when `tag` is `None`. Blobs are checked against their sha256 digests.
pub fn inspect_layout_image(
    dir: &Path,
    tag: Option<&str>,
    architecture: &str,
) -> anyhow::Result<ImageInfo> {
    let source = match tag {
        Some(t) => format!("oci:{}:{t}", dir.display()),
        None => format!("oci:{}", dir.display()),
    };
    inspect_layout(dir, tag, architecture, source.clone())
        .with_context(|| format!("reading image {source}"))
}

/// `dir` as the user must read it: a relative `oci:` path is resolved against the working directory,
/// not against `--dir`, and a "not found" that does not say so sends them looking in the wrong place.
fn shown_layout_path(dir: &Path) -> String {
    if dir.is_absolute() {
        return dir.display().to_string();
    }
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_else(|_| "?".to_string());
    format!(
        "{} (a relative oci: path, resolved against the working directory {cwd}, not --dir)",
        dir.display()
    )
}

fn inspect_layout(
    dir: &Path,
    tag: Option<&str>,
    architecture: &str,
    source: String,
) -> anyhow::Result<ImageInfo> {
    let (manifest, digest, manifest_digest) = layout_manifest(dir, tag, architecture)?;
    let config = config_descriptor(&manifest).map_err(anyhow::Error::msg)?;
    let blob = read_blob(dir, &config.digest)?;
    image_info(digest, manifest_digest, &manifest, &blob, source).map_err(anyhow::Error::msg)
}

/// The platform manifest of the layout's image `tag` for `architecture`, the top entry's digest and the
/// platform manifest's.
pub(super) fn layout_manifest(
    dir: &Path,
    tag: Option<&str>,
    architecture: &str,
) -> anyhow::Result<(Manifest, String, String)> {
    if !dir.join("oci-layout").is_file() {
        bail!(
            "{} is not an OCI image layout (it has no oci-layout file)",
            shown_layout_path(dir)
        );
    }
    let index_path = dir.join("index.json");
    let index_bytes =
        std::fs::read(&index_path).with_context(|| format!("reading {}", index_path.display()))?;
    let index = parse_manifest(&index_bytes).map_err(anyhow::Error::msg)?;
    let top = select_layout_entry(index.manifests.as_deref().unwrap_or_default(), tag)?;
    let mut manifest = parse_manifest(&read_blob(dir, &top.digest)?).map_err(anyhow::Error::msg)?;
    let mut manifest_digest = top.digest.clone();
    if let Some(entries) = &manifest.manifests {
        manifest_digest = select_platform(entries, architecture)
            .map_err(anyhow::Error::msg)?
            .digest
            .clone();
        manifest =
            parse_manifest(&read_blob(dir, &manifest_digest)?).map_err(anyhow::Error::msg)?;
    }
    Ok((manifest, top.digest.clone(), manifest_digest))
}

/// The `index.json` entry named `tag`, or the only entry.
fn select_layout_entry<'a>(
    entries: &'a [Descriptor],
    tag: Option<&str>,
) -> anyhow::Result<&'a Descriptor> {
    let names = || {
        let n: Vec<&str> = entries
            .iter()
            .filter_map(|d| d.annotations.get(REF_NAME_ANNOTATION).map(String::as_str))
            .collect();
        if n.is_empty() {
            "none".to_string()
        } else {
            n.join(", ")
        }
    };
    match tag {
        Some(t) => entries
            .iter()
            .find(|d| {
                d.annotations
                    .get(REF_NAME_ANNOTATION)
                    .is_some_and(|n| n == t)
            })
            .with_context(|| format!("index.json has no image tagged {t:?} (tags: {})", names())),
        None => match entries {
            [only] => Ok(only),
            [] => bail!("index.json lists no image"),
            _ => bail!(
                "index.json lists {} images; name one with oci:DIR:TAG (tags: {})",
                entries.len(),
                names()
            ),
        },
    }
}

/// Reads `blobs/<algorithm>/<hex>` and checks its sha256.
/// Where the layout keeps the blob `digest` (sha256 only).
pub(super) fn blob_path(dir: &Path, digest: &str) -> anyhow::Result<std::path::PathBuf> {
    let hex = digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .with_context(|| format!("unsupported digest {digest:?} (only sha256 is supported)"))?;
    Ok(dir.join("blobs/sha256").join(hex))
}

fn read_blob(dir: &Path, digest: &str) -> anyhow::Result<Vec<u8>> {
    let path = blob_path(dir, digest)?;
    let hex = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let meta = std::fs::metadata(&path).with_context(|| format!("reading {}", path.display()))?;
    if meta.len() > MAX_BLOB_SIZE {
        bail!(
            "{} is {} bytes, over the {MAX_BLOB_SIZE}-byte limit for a manifest or config",
            path.display(),
            meta.len()
        );
    }
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let actual = sha256_hex(&bytes);
    if actual != hex {
        bail!("{} is corrupt: its sha256 is {actual}", path.display());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn entry(digest: &str, name: &str) -> Descriptor {
        Descriptor {
            digest: digest.into(),
            size: 1,
            platform: None,
            annotations: BTreeMap::from([(REF_NAME_ANNOTATION.to_string(), name.to_string())]),
        }
    }

    #[test]
    fn a_relative_layout_path_says_it_is_resolved_against_the_working_directory() {
        let e = inspect_layout_image(Path::new("no-such/seed"), None, "amd64").unwrap_err();
        let cwd = std::env::current_dir().unwrap();
        assert!(
            format!("{e:#}").contains(&format!(
                "no-such/seed (a relative oci: path, resolved against the working directory {}, not --dir) is not an OCI image layout",
                cwd.display()
            )),
            "{e:#}"
        );
        let e = inspect_layout_image(Path::new("/no-such/seed"), None, "amd64").unwrap_err();
        assert!(
            format!("{e:#}").contains(": /no-such/seed is not an OCI image layout"),
            "{e:#}"
        );
    }

    #[test]
    fn selects_layout_entry() {
        let entries = [entry("sha256:a", "4.16.0"), entry("sha256:b", "4.17.0")];
        assert_eq!(
            select_layout_entry(&entries, Some("4.17.0"))
                .expect("tag")
                .digest,
            "sha256:b"
        );
        let e = select_layout_entry(&entries, Some("4.18.0")).expect_err("missing");
        assert_eq!(
            e.to_string(),
            r#"index.json has no image tagged "4.18.0" (tags: 4.16.0, 4.17.0)"#
        );
        let e = select_layout_entry(&entries, None).expect_err("two");
        assert_eq!(
            e.to_string(),
            "index.json lists 2 images; name one with oci:DIR:TAG (tags: 4.16.0, 4.17.0)"
        );
        assert_eq!(
            select_layout_entry(&entries[..1], None)
                .expect("only")
                .digest,
            "sha256:a"
        );
    }
}
