//! Registry image references (`quay.io/org/seed:4.16.0`, `host:port/repo@sha256:…`): the docker reference
//! grammar reduced to fully qualified names, and the `imageDigestSources` mirror rewrite containers/image
//! applies to them.
//!
//! Short names (`seed:4.16`) are refused: podman on the installed host would resolve them through its own
//! search registries, so the image ibi checks might not be the one lifecycle-agent pulls.

use std::fmt;

use crate::config::ImageDigestSource;
use crate::config::refs::{is_path_component, is_tag};

/// The `sourcePolicy` value that forbids falling back to the source registry.
const NEVER_CONTACT_SOURCE: &str = "NeverContactSource";

/// A fully qualified registry image reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageReference {
    /// `host[:port]`, as written (`quay.io`, `127.0.0.1:5000`, `[fd00::1]:5000`).
    pub registry: String,
    /// The path under the registry (`org/seed`).
    pub repository: String,
    pub tag: Option<String>,
    /// `algorithm:hex`; when present it wins over the tag, as in containers/image.
    pub digest: Option<String>,
}

impl ImageReference {
    /// `registry/repository`, the name mirror sources are matched against.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// `registry/repository@digest`: the same image, immune to a moved tag.
    pub fn pinned(&self, digest: &str) -> String {
        format!("{}@{digest}", self.name())
    }

    /// The same repository path on another registry and repository prefix (a mirror).
    fn with_name(&self, name: &str) -> Result<ImageReference, String> {
        let mut text = name.to_string();
        if let Some(d) = &self.digest {
            text = format!("{text}@{d}");
        }
        parse_image_reference(&text)
    }
}

impl fmt::Display for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name())?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// Parses a fully qualified reference; an optional `docker://` transport prefix is dropped.
pub fn parse_image_reference(text: &str) -> Result<ImageReference, String> {
    let s = text.strip_prefix("docker://").unwrap_or(text);
    let bad = |why: &str| format!("invalid image reference {text:?}: {why}");
    let (name, digest) = match s.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (s, None),
    };
    if let Some(d) = digest
        && !is_digest(d)
    {
        return Err(bad("the digest must be sha256: and 64 hex digits"));
    }
    let (name, tag) = match name.rsplit_once(':') {
        Some((n, t)) if !t.contains('/') => (n, Some(t)),
        _ => (name, None),
    };
    if let Some(t) = tag
        && !is_tag(t)
    {
        return Err(bad("invalid tag"));
    }
    let Some((registry, repository)) = name.split_once('/') else {
        return Err(bad(
            "it must start with a registry host (quay.io/org/seed:4.16.0)",
        ));
    };
    if !is_registry(registry) {
        return Err(bad(
            "it must start with a registry host (quay.io/org/seed:4.16.0)",
        ));
    }
    if !repository.split('/').all(is_path_component) {
        return Err(bad(
            "the repository path must be lower-case [a-z0-9] words joined by . _ __ or -",
        ));
    }
    if tag.is_none() && digest.is_none() {
        return Err(bad("a tag or a digest is required"));
    }
    Ok(ImageReference {
        registry: registry.to_string(),
        repository: repository.to_string(),
        tag: tag.map(str::to_string),
        digest: digest.map(str::to_string),
    })
}

/// Where to look for `reference`, in order: for a digest reference, each mirror of every matching
/// `imageDigestSources` entry (the longest matching source, as registries.conf does), then the source
/// itself unless its policy is `NeverContactSource`. A tag reference goes to its own registry only: digest
/// mirrors do not apply to tags.
pub fn pull_endpoints(
    reference: &ImageReference,
    sources: &[ImageDigestSource],
) -> Result<Vec<ImageReference>, String> {
    if reference.digest.is_none() {
        return Ok(vec![reference.clone()]);
    }
    let name = reference.name();
    let best = sources
        .iter()
        .filter(|s| matches_prefix(&name, &s.source))
        .max_by_key(|s| s.source.len());
    let Some(source) = best else {
        return Ok(vec![reference.clone()]);
    };
    let rest = &name[source.source.len()..];
    let mut out = Vec::new();
    for mirror in &source.mirrors {
        out.push(reference.with_name(&format!("{mirror}{rest}"))?);
    }
    if source.source_policy.as_deref() != Some(NEVER_CONTACT_SOURCE) {
        out.push(reference.clone());
    }
    Ok(out)
}

/// containers/image `refMatchesPrefix`: equal, or `prefix` followed by `/`, `:` or `@`.
fn matches_prefix(name: &str, prefix: &str) -> bool {
    match name.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with(['/', ':', '@']),
        None => false,
    }
}

fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// `host[:port]` where the host has a dot, is `localhost`, or is a bracketed IPv6 address.
fn is_registry(r: &str) -> bool {
    let (host, port) = if let Some(end) = r.strip_prefix('[').and_then(|x| x.find(']')) {
        let inner = &r[1..=end];
        if inner.parse::<std::net::Ipv6Addr>().is_err() {
            return false;
        }
        (r, r[end + 2..].strip_prefix(':'))
    } else {
        match r.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (r, None),
        }
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok());
    let label = |c: &str| {
        !c.is_empty()
            && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !c.starts_with('-')
            && !c.ends_with('-')
    };
    let host_ok = host.starts_with('[')
        || ((host.contains('.') || host == "localhost") && host.split('.').all(label));
    port_ok && host_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest() -> String {
        format!("sha256:{}", "a".repeat(64))
    }

    #[test]
    fn parses_references() {
        let d = digest();
        // (text, (registry, repository, tag, digest))
        type Want<'a> = (&'a str, &'a str, Option<&'a str>, Option<&'a str>);
        let cases: Vec<(String, Want)> = vec![
            (
                "quay.io/org/seed:4.16.0".into(),
                ("quay.io", "org/seed", Some("4.16.0"), None),
            ),
            (
                "docker://quay.io/org/seed:4.16.0".into(),
                ("quay.io", "org/seed", Some("4.16.0"), None),
            ),
            (
                format!("127.0.0.1:5000/seed@{d}"),
                ("127.0.0.1:5000", "seed", None, Some(&d)),
            ),
            (
                format!("reg.lab:5000/a/b:t@{d}"),
                ("reg.lab:5000", "a/b", Some("t"), Some(&d)),
            ),
            (
                "localhost/seed:v1".into(),
                ("localhost", "seed", Some("v1"), None),
            ),
            (
                "[fd00::1]:5000/seed:v1".into(),
                ("[fd00::1]:5000", "seed", Some("v1"), None),
            ),
        ];
        for (text, (registry, repository, tag, dg)) in cases {
            let r = parse_image_reference(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(r.registry, registry, "{text}");
            assert_eq!(r.repository, repository, "{text}");
            assert_eq!(r.tag.as_deref(), tag, "{text}");
            assert_eq!(r.digest.as_deref(), dg, "{text}");
            assert_eq!(r.to_string(), text.trim_start_matches("docker://"));
        }
    }

    #[test]
    fn rejects_bad_references() {
        let cases = [
            ("seed:4.16", "it must start with a registry host"),
            ("org/seed:4.16", "it must start with a registry host"),
            ("quay.io/org/seed", "a tag or a digest is required"),
            ("quay.io/Org/seed:1", "lower-case"),
            ("quay.io/org/seed:", "invalid tag"),
            ("quay.io/org/seed@sha256:abc", "the digest must be"),
            ("quay.io:99999/seed:1", "it must start with a registry host"),
        ];
        for (text, want) in cases {
            let e = parse_image_reference(text).expect_err(text);
            assert!(e.contains(want) && e.contains(text), "{text}: {e}");
        }
    }

    #[test]
    fn pins_by_digest() {
        let r = parse_image_reference("quay.io/org/seed:4.16.0").expect("parse");
        assert_eq!(
            r.pinned(&digest()),
            format!("quay.io/org/seed@{}", digest())
        );
    }

    fn source(source: &str, mirrors: &[&str], policy: Option<&str>) -> ImageDigestSource {
        ImageDigestSource {
            source: source.into(),
            mirrors: mirrors.iter().map(|m| m.to_string()).collect(),
            source_policy: policy.map(str::to_string),
        }
    }

    #[test]
    fn mirrors_apply_to_digests_only() {
        let sources = [
            source("quay.io/org", &["mirror.lab:5000/org", "m2.lab/o"], None),
            source("quay.io/org/seed", &["exact.lab/seed"], None),
            source("quay.io/other", &["nope.lab/x"], None),
        ];
        let by_digest =
            parse_image_reference(&format!("quay.io/org/seed@{}", digest())).expect("parse");
        let names: Vec<String> = pull_endpoints(&by_digest, &sources)
            .expect("endpoints")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            names,
            [
                format!("exact.lab/seed@{}", digest()),
                by_digest.to_string()
            ]
        );
        let sub =
            parse_image_reference(&format!("quay.io/org/x/seed@{}", digest())).expect("parse");
        let names: Vec<String> = pull_endpoints(&sub, &sources)
            .expect("endpoints")
            .iter()
            .map(|r| r.name())
            .collect();
        assert_eq!(
            names,
            [
                "mirror.lab:5000/org/x/seed",
                "m2.lab/o/x/seed",
                "quay.io/org/x/seed"
            ]
        );
        let by_tag = parse_image_reference("quay.io/org/seed:4.16.0").expect("parse");
        assert_eq!(
            pull_endpoints(&by_tag, &sources).expect("endpoints"),
            [by_tag]
        );
    }

    #[test]
    fn never_contact_source_and_prefix_boundaries() {
        let sources = [
            source("quay.io/org/se", &["bad.lab/x"], None),
            source("quay.io/org/seed", &["m.lab/s"], Some("NeverContactSource")),
        ];
        let r = parse_image_reference(&format!("quay.io/org/seed@{}", digest())).expect("parse");
        let names: Vec<String> = pull_endpoints(&r, &sources)
            .expect("endpoints")
            .iter()
            .map(|r| r.name())
            .collect();
        assert_eq!(names, ["m.lab/s"]);
        assert!(!matches_prefix("quay.io/org/seedling", "quay.io/org/seed"));
        assert!(matches_prefix("quay.io/org/seed", "quay.io"));
    }
}
