//! The registry client: manifests, configs and blobs of an image by digest or tag, through mirrors, with the pull secret, TLS and retries; and OCI layouts on disk.

use super::auth::PullSecret;
use super::mirrors::pull_endpoints;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use serde::Deserialize;

use crate::config::ImageDigestSource;
use crate::image_ref::ImageReference;
use crate::util::digest::sha256_hex;

/// Manifest media types ibi understands: OCI and Docker v2s2, single images and indexes.
const MANIFEST_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
/// A config blob is a few KiB; refuse to buffer anything absurd.
const MAX_BLOB_SIZE: u64 = 4 << 20;
/// Connect and read timeouts per request when the caller sets none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The OCI annotation skopeo and podman write into `index.json` for `oci:DIR:TAG`.
const REF_NAME_ANNOTATION: &str = "org.opencontainers.image.ref.name";

/// How to reach registries.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    pub pull_secret: Option<PullSecret>,
    pub image_digest_sources: Vec<ImageDigestSource>,
    /// PEM certificates trusted in addition to the system roots (`additionalTrustBundle`).
    pub additional_trust_bundle: Option<String>,
    /// `host[:port]` entries reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// Connect and read timeout per request; [`DEFAULT_TIMEOUT`] when `None`.
    pub timeout: Option<Duration>,
}

/// A registry failure; callers branch on [`RegistryError::is_retryable`].
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Timeouts, connection failures, 5xx and 429: trying again later may work.
    #[error("reading image {reference} from registry {registry}: temporary failure: {detail}")]
    Retryable {
        reference: String,
        registry: String,
        detail: String,
    },
    #[error(
        "reading image {reference} from registry {registry}: access denied (check the pull secret entry for {registry}): {detail}"
    )]
    Unauthorized {
        reference: String,
        registry: String,
        detail: String,
    },
    /// Certificate verification or TLS handshake failures: retrying will not help.
    #[error(
        "reading image {reference} from registry {registry}: TLS failed (trust its CA with additionalTrustBundle, or list it as an insecure registry if it serves plain HTTP): {detail}"
    )]
    Tls {
        reference: String,
        registry: String,
        detail: String,
    },
    #[error("reading image {reference} from registry {registry}: not found: {detail}")]
    NotFound {
        reference: String,
        registry: String,
        detail: String,
    },
    #[error("reading image {reference} from registry {registry}: {detail}")]
    Other {
        reference: String,
        registry: String,
        detail: String,
    },
}

impl RegistryError {
    pub fn is_retryable(&self) -> bool {
        matches!(self, RegistryError::Retryable { .. })
    }

    /// The same error with `note` appended to its detail.
    fn with_note(mut self, note: &str) -> Self {
        let (RegistryError::Retryable { detail, .. }
        | RegistryError::Unauthorized { detail, .. }
        | RegistryError::Tls { detail, .. }
        | RegistryError::NotFound { detail, .. }
        | RegistryError::Other { detail, .. }) = &mut self;
        detail.push_str(note);
        self
    }
}

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
    size: u64,
    #[serde(default)]
    platform: Option<Platform>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
struct Platform {
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
    manifests: Option<Vec<Descriptor>>,
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

fn parse_manifest(bytes: &[u8]) -> Result<Manifest, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("manifest is not valid JSON: {e}"))
}

/// Picks the `linux/<architecture>` entry of an image index.
fn select_platform<'a>(
    entries: &'a [Descriptor],
    architecture: &str,
) -> Result<&'a Descriptor, String> {
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
    Err(format!(
        "the image index has no linux/{architecture} image (it has: {})",
        if found.is_empty() {
            "no platforms".to_string()
        } else {
            found.join(", ")
        }
    ))
}

/// The config descriptor of an image manifest, refusing an index or an oversized config.
fn config_descriptor(manifest: &Manifest) -> Result<&Descriptor, String> {
    let config = manifest
        .config
        .as_ref()
        .ok_or("the manifest has no config (is it a nested image index?)")?;
    if config.size > MAX_BLOB_SIZE {
        return Err(format!(
            "the image config is {} bytes, over the {MAX_BLOB_SIZE}-byte limit",
            config.size
        ));
    }
    Ok(config)
}

/// Builds [`ImageInfo`] from the config blob of the platform manifest.
fn image_info(
    digest: String,
    manifest_digest: String,
    manifest: &Manifest,
    config: &[u8],
    source: String,
) -> Result<ImageInfo, String> {
    let file: ConfigFile = serde_json::from_slice(config)
        .map_err(|e| format!("image config is not valid JSON: {e}"))?;
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

/// Reads the manifest and config of `reference` for `architecture` (used when the reference names an image
/// index), trying the mirror endpoints first. When every endpoint fails, the last error is returned with
/// the mirrors' failures appended.
pub fn inspect_registry_image(
    reference: &ImageReference,
    architecture: &str,
    opts: &RegistryOptions,
) -> Result<ImageInfo, RegistryError> {
    let other = |detail: String| RegistryError::Other {
        reference: reference.to_string(),
        registry: reference.registry.clone(),
        detail,
    };
    let endpoints = pull_endpoints(reference, &opts.image_digest_sources).map_err(other)?;
    let client = build_client(opts).map_err(other)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| other(format!("starting the I/O runtime: {e}")))?;
    let mut failures: Vec<String> = Vec::new();
    let mut last = None;
    for endpoint in &endpoints {
        tracing::debug!("reading image {endpoint} (for {reference})");
        match runtime.block_on(inspect_endpoint(
            &client,
            reference,
            endpoint,
            architecture,
            opts,
        )) {
            Ok(info) => return Ok(info),
            Err(e) => {
                tracing::debug!("{e}");
                failures.push(format!("{endpoint}: {e}"));
                last = Some(e);
            }
        }
    }
    let err = last.unwrap_or_else(|| {
        other("no source to read it from (NeverContactSource without mirrors)".into())
    });
    if failures.len() > 1 {
        let tried = failures[..failures.len() - 1].join("; ");
        return Err(err.with_note(&format!(" (mirrors also failed: {tried})")));
    }
    Err(err)
}

/// A client with the extra trust roots, plain HTTP for insecure registries, and timeouts.
pub(super) fn build_client(opts: &RegistryOptions) -> Result<Client, String> {
    let mut roots = Vec::new();
    if let Some(pem) = opts
        .additional_trust_bundle
        .as_deref()
        .filter(|p| !p.trim().is_empty())
    {
        let certs = openssl::x509::X509::stack_from_pem(pem.as_bytes())
            .map_err(|e| format!("additionalTrustBundle is not a PEM certificate bundle: {e}"))?;
        if certs.is_empty() {
            return Err(
                "additionalTrustBundle is not a PEM certificate bundle: it holds no certificate"
                    .into(),
            );
        }
        for cert in certs {
            let data = cert
                .to_der()
                .map_err(|e| format!("additionalTrustBundle: {e}"))?;
            roots.push(Certificate {
                encoding: CertificateEncoding::Der,
                data,
            });
        }
    }
    let timeout = opts.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let protocol = if opts.insecure_registries.is_empty() {
        ClientProtocol::Https
    } else {
        ClientProtocol::HttpsExcept(opts.insecure_registries.clone())
    };
    // Not `Client::new`: it falls back to a default client on error, dropping the trust roots and HTTP list.
    Client::try_from(ClientConfig {
        protocol,
        extra_root_certificates: roots,
        platform_resolver: None,
        connect_timeout: Some(timeout),
        read_timeout: Some(timeout),
        ..Default::default()
    })
    .map_err(|e| format!("setting up the registry client: {}", error_chain(&e)))
}

/// The platform manifest of `endpoint` for `architecture`: what both inspecting and reading layers start
/// from, and the reference blobs are pulled through (the client keeps the token it logged in with).
pub(super) struct PlatformManifest {
    pub top: Reference,
    pub digest: String,
    pub manifest_digest: String,
    pub manifest: Manifest,
}

pub(super) async fn platform_manifest(
    client: &Client,
    asked: &ImageReference,
    endpoint: &ImageReference,
    architecture: &str,
    opts: &RegistryOptions,
) -> Result<PlatformManifest, RegistryError> {
    let fail = |detail: String| RegistryError::Other {
        reference: asked.to_string(),
        registry: endpoint.registry.clone(),
        detail,
    };
    let oci = |e: OciDistributionError| classify(e, asked, &endpoint.registry);
    let auth = registry_auth(endpoint, opts).map_err(fail)?;
    let top = oci_reference(endpoint, None);
    let (bytes, digest) = client
        .pull_manifest_raw(&top, &auth, MANIFEST_MEDIA_TYPES)
        .await
        .map_err(oci)?;
    let mut manifest = parse_manifest(&bytes).map_err(fail)?;
    let mut manifest_digest = digest.clone();
    if let Some(entries) = &manifest.manifests {
        let chosen = select_platform(entries, architecture)
            .map_err(fail)?
            .digest
            .clone();
        let platform_ref = oci_reference(endpoint, Some(&chosen));
        let (bytes, d) = client
            .pull_manifest_raw(&platform_ref, &auth, MANIFEST_MEDIA_TYPES)
            .await
            .map_err(oci)?;
        manifest = parse_manifest(&bytes).map_err(fail)?;
        manifest_digest = d;
    }
    Ok(PlatformManifest {
        top,
        digest,
        manifest_digest,
        manifest,
    })
}

async fn inspect_endpoint(
    client: &Client,
    asked: &ImageReference,
    endpoint: &ImageReference,
    architecture: &str,
    opts: &RegistryOptions,
) -> Result<ImageInfo, RegistryError> {
    let fail = |detail: String| RegistryError::Other {
        reference: asked.to_string(),
        registry: endpoint.registry.clone(),
        detail,
    };
    let oci = |e: OciDistributionError| classify(e, asked, &endpoint.registry);
    let PlatformManifest {
        top,
        digest,
        manifest_digest,
        manifest,
        ..
    } = platform_manifest(client, asked, endpoint, architecture, opts).await?;
    let config = config_descriptor(&manifest).map_err(fail)?;
    let mut blob = Vec::new();
    client
        .pull_blob(&top, config.digest.as_str(), &mut blob)
        .await
        .map_err(oci)?;
    image_info(
        digest,
        manifest_digest,
        &manifest,
        &blob,
        endpoint.to_string(),
    )
    .map_err(fail)
}

/// The pull secret's credentials for `endpoint`, or anonymous access.
fn registry_auth(
    endpoint: &ImageReference,
    opts: &RegistryOptions,
) -> Result<RegistryAuth, String> {
    let Some(secret) = &opts.pull_secret else {
        return Ok(RegistryAuth::Anonymous);
    };
    Ok(
        match secret.credentials_for(&endpoint.registry, &endpoint.repository)? {
            Some(c) => RegistryAuth::Basic(c.username, c.password),
            None => RegistryAuth::Anonymous,
        },
    )
}

/// The oci-client reference for `r`, by `digest` when given, else by `r`'s digest, else by tag.
fn oci_reference(r: &ImageReference, digest: Option<&str>) -> Reference {
    match digest.or(r.digest.as_deref()) {
        Some(d) => Reference::with_digest(r.registry.clone(), r.repository.clone(), d.to_string()),
        None => Reference::with_tag(
            r.registry.clone(),
            r.repository.clone(),
            r.tag.clone().unwrap_or_default(),
        ),
    }
}

/// Sorts an oci-client error into a [`RegistryError`] kind.
pub(super) fn classify(
    e: OciDistributionError,
    asked: &ImageReference,
    registry: &str,
) -> RegistryError {
    let detail = error_chain(&e);
    let (reference, registry) = (asked.to_string(), registry.to_string());
    let codes: Vec<&OciErrorCode> = match &e {
        OciDistributionError::RegistryError { envelope, .. } => {
            envelope.errors.iter().map(|x| &x.code).collect()
        }
        _ => Vec::new(),
    };
    let has = |c: OciErrorCode| codes.iter().any(|x| **x == c);
    let retryable = match &e {
        OciDistributionError::RequestError(r) => r.is_timeout() || r.is_connect(),
        OciDistributionError::ServerError { code, .. } => *code >= 500 || *code == 429,
        _ => has(OciErrorCode::Toomanyrequests),
    };
    let unauthorized = matches!(
        e,
        OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::AuthenticationFailure(_)
    ) || has(OciErrorCode::Unauthorized)
        || has(OciErrorCode::Denied);
    let not_found = matches!(e, OciDistributionError::ImageManifestNotFoundError(_))
        || matches!(e, OciDistributionError::ServerError { code: 404, .. })
        || has(OciErrorCode::ManifestUnknown)
        || has(OciErrorCode::NameUnknown)
        || has(OciErrorCode::BlobUnknown);
    // native-tls reports through OpenSSL's text; its error type is not reachable from here.
    let tls = detail.contains("SSL routines") || detail.contains("certificate verify failed");
    match () {
        _ if tls => RegistryError::Tls {
            reference,
            registry,
            detail,
        },
        _ if retryable => RegistryError::Retryable {
            reference,
            registry,
            detail,
        },
        _ if unauthorized => RegistryError::Unauthorized {
            reference,
            registry,
            detail,
        },
        _ if not_found => RegistryError::NotFound {
            reference,
            registry,
            detail,
        },
        _ => RegistryError::Other {
            reference,
            registry,
            detail,
        },
    }
}

/// `e: source: source…`, since reqwest's own message hides the cause (refused, TLS, DNS).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let part = s.to_string();
        if !text.contains(&part) {
            text = format!("{text}: {part}");
        }
        cur = s.source();
    }
    text
}

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
    use super::*;

    fn entry(digest: &str, arch: Option<&str>, name: Option<&str>) -> Descriptor {
        Descriptor {
            digest: digest.into(),
            size: 1,
            platform: arch.map(|a| Platform {
                architecture: a.into(),
                os: "linux".into(),
            }),
            annotations: name
                .map(|n| BTreeMap::from([(REF_NAME_ANNOTATION.to_string(), n.to_string())]))
                .unwrap_or_default(),
        }
    }

    #[test]
    fn selects_platform() {
        let entries = [
            entry("sha256:a", Some("amd64"), None),
            entry("sha256:b", Some("arm64"), None),
        ];
        assert_eq!(
            select_platform(&entries, "arm64").expect("arm64").digest,
            "sha256:b"
        );
        let e = select_platform(&entries, "s390x").expect_err("s390x");
        assert_eq!(
            e,
            "the image index has no linux/s390x image (it has: linux/amd64, linux/arm64)"
        );
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
        let entries = [
            entry("sha256:a", None, Some("4.16.0")),
            entry("sha256:b", None, Some("4.17.0")),
        ];
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
            .expect_err("no config");
        assert!(e.contains("no config"), "{e}");
    }

    #[test]
    fn rejects_bad_trust_bundle() {
        let opts = RegistryOptions {
            additional_trust_bundle: Some("not a certificate".into()),
            ..Default::default()
        };
        let e = build_client(&opts).err().expect("bad bundle");
        assert!(
            e.starts_with("additionalTrustBundle is not a PEM certificate bundle"),
            "{e}"
        );
    }
}
