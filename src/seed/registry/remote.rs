//! A remote registry: manifests and configs of an image by digest or tag, through mirrors, with
//! the pull secret, TLS and retries (`oci-client`, each call on its own current-thread runtime).

use std::time::Duration;

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::manifest::{
    ImageInfo, Manifest, config_descriptor, image_info, parse_manifest, select_platform,
};
use super::mirrors::pull_endpoints;
use crate::config::ImageDigestSource;
use crate::contract::pull_secret::{PullSecret, PullSecretError};
use crate::image_ref::ImageReference;

/// Manifest media types ibi understands: OCI and Docker v2s2, single images and indexes.
const MANIFEST_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
/// Connect and read timeouts per request when the caller sets none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

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
    #[cfg(any(test, feature = "test-support"))]
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
    let endpoints =
        pull_endpoints(reference, &opts.image_digest_sources).map_err(|e| other(e.to_string()))?;
    let client = build_client(opts).map_err(|e| other(e.to_string()))?;
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

/// Why no registry client could be made.
#[derive(Debug, thiserror::Error)]
pub(super) enum NoClient {
    #[error("additionalTrustBundle is not a PEM certificate bundle: {0}")]
    NotPem(openssl::error::ErrorStack),
    #[error("additionalTrustBundle is not a PEM certificate bundle: it holds no certificate")]
    Empty,
    #[error("additionalTrustBundle: {0}")]
    Der(openssl::error::ErrorStack),
    /// The client's error chain, joined.
    #[error("setting up the registry client: {0}")]
    Setup(String),
}

/// A client with the extra trust roots, plain HTTP for insecure registries, and timeouts.
pub(super) fn build_client(opts: &RegistryOptions) -> Result<Client, NoClient> {
    let mut roots = Vec::new();
    if let Some(pem) = opts
        .additional_trust_bundle
        .as_deref()
        .filter(|p| !p.trim().is_empty())
    {
        let certs =
            openssl::x509::X509::stack_from_pem(pem.as_bytes()).map_err(NoClient::NotPem)?;
        if certs.is_empty() {
            return Err(NoClient::Empty);
        }
        for cert in certs {
            let data = cert.to_der().map_err(NoClient::Der)?;
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
    .map_err(|e| NoClient::Setup(error_chain(&e)))
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
    let auth = registry_auth(endpoint, opts).map_err(|e| fail(e.to_string()))?;
    let top = oci_reference(endpoint, None);
    let (bytes, digest) = client
        .pull_manifest_raw(&top, &auth, MANIFEST_MEDIA_TYPES)
        .await
        .map_err(oci)?;
    let mut manifest = parse_manifest(&bytes).map_err(|e| fail(e.to_string()))?;
    let mut manifest_digest = digest.clone();
    if let Some(entries) = &manifest.manifests {
        let chosen = select_platform(entries, architecture)
            .map_err(|e| fail(e.to_string()))?
            .digest
            .clone();
        let platform_ref = oci_reference(endpoint, Some(&chosen));
        let (bytes, d) = client
            .pull_manifest_raw(&platform_ref, &auth, MANIFEST_MEDIA_TYPES)
            .await
            .map_err(oci)?;
        manifest = parse_manifest(&bytes).map_err(|e| fail(e.to_string()))?;
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
    let config = config_descriptor(&manifest).map_err(|e| fail(e.to_string()))?;
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
    .map_err(|e| fail(e.to_string()))
}

/// The pull secret's credentials for `endpoint`, or anonymous access.
fn registry_auth(
    endpoint: &ImageReference,
    opts: &RegistryOptions,
) -> Result<RegistryAuth, PullSecretError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_trust_bundle() {
        let opts = RegistryOptions {
            additional_trust_bundle: Some("not a certificate".into()),
            ..Default::default()
        };
        let e = build_client(&opts).err().expect("bad bundle").to_string();
        assert!(
            e.starts_with("additionalTrustBundle is not a PEM certificate bundle"),
            "{e}"
        );
    }
}
