//! Where the seed comes from and how skopeo reaches it: the seed reference as a containers-transports(5)
//! string and the `skopeo experimental-image-proxy` options (auth file, TLS) built by pure functions.
//!
//! The pull secret is only ever a path handed to skopeo: ibi neither reads nor logs its content here.

use std::path::PathBuf;

use containers_image_proxy::ImageProxyConfig;

use contract::seed_image::{SeedReference, parse_seed_reference};
use image_ref::ImageReference;

/// The seed image to stream and how to authenticate to its registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedSource {
    pub(crate) reference: SeedReference,
    /// A containers-auth.json(5) file (the pull secret lca-cli writes to `/var/tmp/pull-secret.json`);
    /// `None` means anonymous access (`--no-creds`), never the host's default auth files.
    pub(crate) authfile: Option<PathBuf>,
    /// `host[:port][/path]` prefixes reached without TLS verification (and over plain HTTP when the
    /// registry speaks nothing else), as `insecure = true` in registries.conf(5).
    pub(crate) insecure_registries: Vec<String>,
    /// A directory of `*.crt` CA certificates for the registry (`skopeo --cert-dir`).
    pub(crate) cert_dir: Option<PathBuf>,
}

impl SeedSource {
    /// A source for `reference`, anonymous and with TLS verification.
    pub(crate) fn new(reference: SeedReference) -> SeedSource {
        SeedSource {
            reference,
            authfile: None,
            insecure_registries: Vec::new(),
            cert_dir: None,
        }
    }

    /// Parses a seed reference: `registry/repo@sha256:…`, `registry/repo:tag` or `oci:/path[:tag]`.
    pub fn parse(text: &str) -> anyhow::Result<SeedSource> {
        parse_seed_reference(text)
            .map(SeedSource::new)
            .map_err(anyhow::Error::msg)
    }

    /// The same source authenticating with the auth file at `path`.
    pub fn with_authfile(mut self, path: impl Into<PathBuf>) -> SeedSource {
        self.authfile = Some(path.into());
        self
    }

    /// The same source treating `registries` (`host[:port][/path]`) as insecure.
    pub fn with_insecure_registries<S: Into<String>>(
        mut self,
        registries: impl IntoIterator<Item = S>,
    ) -> SeedSource {
        self.insecure_registries = registries.into_iter().map(Into::into).collect();
        self
    }

    /// The containers-transports(5) reference skopeo opens.
    pub(crate) fn transport(&self) -> String {
        transport_reference(&self.reference)
    }

    /// True when the seed's registry is listed as insecure (never for an OCI layout).
    pub(crate) fn is_insecure(&self) -> bool {
        match &self.reference {
            SeedReference::Registry(r) => self
                .insecure_registries
                .iter()
                .any(|prefix| matches_prefix(&r.name(), prefix)),
            SeedReference::OciLayout { .. } => false,
        }
    }

    /// The proxy options: the auth file or `--no-creds`, `--tls-verify=false` for an insecure registry,
    /// `--cert-dir`. skopeo itself is the crate's default (`skopeo`, killed if this thread dies).
    pub(crate) fn proxy_config(&self) -> ImageProxyConfig {
        let mut config = ImageProxyConfig::default();
        match &self.authfile {
            Some(path) => config.authfile = Some(path.clone()),
            None => config.auth_anonymous = true,
        }
        config.certificate_directory = self.cert_dir.clone();
        if self.is_insecure() {
            config.insecure_skip_tls_verification = Some(true);
        }
        config
    }
}

/// `docker://registry/repo@digest` when pinned (containers/image refuses a tag and a digest together, and
/// the digest is what the caller pinned), `docker://registry/repo:tag` otherwise, `oci:PATH[:TAG]`.
pub(crate) fn transport_reference(reference: &SeedReference) -> String {
    match reference {
        SeedReference::Registry(r) => format!("docker://{}", registry_name(r)),
        SeedReference::OciLayout { path, tag: Some(t) } => format!("oci:{}:{t}", path.display()),
        SeedReference::OciLayout { path, tag: None } => format!("oci:{}", path.display()),
    }
}

fn registry_name(r: &ImageReference) -> String {
    match (&r.digest, &r.tag) {
        (Some(d), _) => r.pinned(d),
        (None, Some(t)) => format!("{}:{t}", r.name()),
        (None, None) => r.name(),
    }
}

/// containers/image `refMatchesPrefix`: equal, or `prefix` followed by `/`.
fn matches_prefix(name: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    match name.strip_prefix(prefix) {
        Some(rest) => !prefix.is_empty() && (rest.is_empty() || rest.starts_with('/')),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn digest() -> String {
        format!("sha256:{}", "b".repeat(64))
    }

    #[test]
    fn maps_references_to_transports() {
        let d = digest();
        let cases = [
            (
                format!("quay.io/org/seed@{d}"),
                format!("docker://quay.io/org/seed@{d}"),
            ),
            (
                format!("127.0.0.1:5000/seed:4.16.0@{d}"),
                format!("docker://127.0.0.1:5000/seed@{d}"),
            ),
            (
                "quay.io/org/seed:4.16.0".into(),
                "docker://quay.io/org/seed:4.16.0".into(),
            ),
            (
                "docker://quay.io/org/seed:4.16.0".into(),
                "docker://quay.io/org/seed:4.16.0".into(),
            ),
            ("oci:/srv/seed:4.16.0".into(), "oci:/srv/seed:4.16.0".into()),
            ("oci:/srv/seed".into(), "oci:/srv/seed".into()),
        ];
        for (text, want) in cases {
            let source = SeedSource::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(source.transport(), want, "{text}");
        }
        let e = SeedSource::parse("seed:4.16").expect_err("short name");
        assert!(e.to_string().contains("registry host"), "{e}");
    }

    fn args(source: &SeedSource) -> Vec<String> {
        let cmd = Command::try_from(source.proxy_config()).expect("command");
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn builds_proxy_options() {
        let base = SeedSource::parse("reg.lab:5000/org/seed:4.16.0").expect("parse");
        assert_eq!(args(&base), ["experimental-image-proxy", "--no-creds"]);
        let full = base
            .clone()
            .with_authfile("/var/tmp/pull-secret.json")
            .with_insecure_registries(["reg.lab:5000"]);
        assert_eq!(
            args(&full),
            [
                "experimental-image-proxy",
                "--authfile",
                "/var/tmp/pull-secret.json",
                "--tls-verify=false"
            ]
        );
        let mut certs = base.with_insecure_registries(["reg.lab"]);
        certs.cert_dir = Some("/etc/ibi/certs.d".into());
        assert_eq!(
            args(&certs),
            [
                "experimental-image-proxy",
                "--no-creds",
                "--cert-dir",
                "/etc/ibi/certs.d"
            ]
        );
    }

    #[test]
    fn matches_insecure_prefixes() {
        let source = SeedSource::parse("reg.lab:5000/org/seed:1").expect("parse");
        let insecure = |list: &[&str]| {
            source
                .clone()
                .with_insecure_registries(list.iter().copied())
                .is_insecure()
        };
        assert!(insecure(&["reg.lab:5000"]));
        assert!(insecure(&["reg.lab:5000/org"]));
        assert!(insecure(&["reg.lab:5000/org/seed/"]));
        assert!(!insecure(&["reg.lab"]));
        assert!(!insecure(&["reg.lab:5000/or"]));
        assert!(!insecure(&[""]));
        let layout = SeedSource::parse("oci:/srv/seed:1")
            .expect("parse")
            .with_insecure_registries(["reg.lab:5000"]);
        assert!(!layout.is_insecure());
    }
}
