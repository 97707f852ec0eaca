//! The one image-reference grammar, used by the configuration checks and the registry client alike: the
//! docker reference grammar (registry host, lower-case path components, tag, digest) and the host[:port]
//! grammar under it. It knows nothing of OpenShift.
//!
//! Two readings, as the tools ibi stands beside have them:
//! - the installer's checks of what a user writes ([`check_repository`] for mirror sources, which must name
//!   a repository, not a reference, or a whole registry; [`check_pull_spec`] for an image to pull such as
//!   `hostAgentImage`, fully qualified with a tag or a digest), with the installer's messages;
//! - [`parse_image_reference`], the fully qualified reference the registry client pulls
//!   (`quay.io/org/seed:4.16.0`, `host:port/repo@sha256:…`). Short names (`seed:4.16`) are refused: podman
//!   on the installed host would resolve them through its own search registries, so the image ibi checks
//!   might not be the one lifecycle-agent pulls.

use std::fmt;

/// A host name as accepted in an image repository: DNS-style components of alphanumerics and inner `-`
/// (upper case allowed, as in the docker reference grammar), or a bracketed IPv6 address.
pub fn is_registry_host(s: &str) -> bool {
    if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        return inner.parse::<std::net::Ipv6Addr>().is_ok();
    }
    let component = |c: &str| {
        let b = c.as_bytes();
        !b.is_empty()
            && b.first().is_some_and(u8::is_ascii_alphanumeric)
            && b.last().is_some_and(u8::is_ascii_alphanumeric)
            && b.iter().all(|x| x.is_ascii_alphanumeric() || *x == b'-')
    };
    !s.is_empty() && s.split('.').all(component)
}

/// Why a text is not what was asked for: a repository, a pull spec, `host[:port]` or a fully
/// qualified reference. `Display` is the installer's message where ibi mirrors its checks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("missing ']' in IPv6 host")]
    UnclosedIpv6,
    #[error("invalid port {0:?}")]
    Port(String),
    /// The installer's message for a tag or digest on a mirror source.
    #[error("must be repository--not reference")]
    NotRepository,
    #[error("failed to parse: invalid reference format")]
    BadFormat,
    #[error("failed to parse: invalid reference format: repository name must be lowercase")]
    NotLowercase,
    /// A short name would go through the live ISO's search registries (or fail under short-name
    /// enforcing).
    #[error("must start with a registry host name, e.g. quay.io/namespace/repo:tag")]
    NotQualified,
    #[error("a tag or a digest is required, e.g. quay.io/namespace/repo:tag")]
    NoTagOrDigest,
    /// Not canonical, and not a bare registry `host[:port]` either.
    #[error("the repository provided is invalid: {0}")]
    BareHost(BareHost),
    /// Not a fully qualified reference ([`parse_image_reference`]).
    #[error("invalid image reference {text:?}: {why}")]
    Reference { text: String, why: Unqualified },
}

/// Why a repository without a registry is no bare registry host either.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BareHost {
    #[error("it must start with a registry host name (e.g. quay.io/namespace/repo)")]
    HasPath,
    #[error("{0}")]
    HostPort(Box<RefError>),
    #[error("{0:?} is not a valid host name")]
    Host(String),
}

/// Why a text is not a fully qualified reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unqualified {
    #[error("the digest must be sha256: and 64 hex digits")]
    Digest,
    #[error("invalid tag")]
    Tag,
    #[error("it must start with a registry host (quay.io/org/seed:4.16.0)")]
    NoRegistry,
    #[error("the repository path must be lower-case [a-z0-9] words joined by . _ __ or -")]
    Path,
    #[error("a tag or a digest is required")]
    NoTagOrDigest,
}

/// Splits `host[:port]`; the port, if present, must be a number up to 65535.
pub fn split_host_port(s: &str) -> Result<(&str, Option<u16>), RefError> {
    let (host, port) = if s.starts_with('[') {
        match s.find(']') {
            Some(end) => (&s[..=end], s[end + 1..].strip_prefix(':')),
            None => return Err(RefError::UnclosedIpv6),
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => Some(
            p.parse::<u16>()
                .map_err(|_| RefError::Port(p.to_string()))?,
        ),
        Some(p) => return Err(RefError::Port(p.to_string())),
    };
    Ok((host, port))
}

/// A reference split per the docker grammar.
struct Parsed<'a> {
    /// `None` when the first component does not look like a registry (docker.io would be implied).
    domain: Option<&'a str>,
    has_tag_or_digest: bool,
}

/// Checks that `s` is a repository (`host[:port]/path`) or a bare registry `host[:port]`.
pub fn check_repository(s: &str) -> Result<(), RefError> {
    let parsed = parse(s)?;
    if parsed.domain.is_none() {
        // Not canonical (docker.io would be implied); accepted only as a bare registry host[:port].
        return check_bare_host(s);
    }
    if parsed.has_tag_or_digest {
        return Err(RefError::NotRepository);
    }
    Ok(())
}

/// Checks that `s` is a pull spec podman on the live ISO resolves without search registries:
/// `host[:port]/path` with a tag, a digest or both.
pub fn check_pull_spec(s: &str) -> Result<(), RefError> {
    let parsed = parse(s)?;
    if parsed.domain.is_none() {
        return Err(RefError::NotQualified);
    }
    if !parsed.has_tag_or_digest {
        return Err(RefError::NoTagOrDigest);
    }
    Ok(())
}

fn check_bare_host(s: &str) -> Result<(), RefError> {
    if s.contains('/') {
        return Err(RefError::BareHost(BareHost::HasPath));
    }
    let (host, _) =
        split_host_port(s).map_err(|e| RefError::BareHost(BareHost::HostPort(Box::new(e))))?;
    if !is_registry_host(host) {
        return Err(RefError::BareHost(BareHost::Host(host.to_string())));
    }
    Ok(())
}

fn parse(s: &str) -> Result<Parsed<'_>, RefError> {
    if s.is_empty() || s.len() > 255 {
        return Err(RefError::BadFormat);
    }
    let (name, digest) = match s.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (s, None),
    };
    if let Some(d) = digest {
        check_digest(d)?;
    }
    let (domain, remainder) = split_domain(name);
    let (path, tag) = match remainder.rsplit_once(':') {
        Some((p, t)) => (p, Some(t)),
        None => (remainder, None),
    };
    if let Some(t) = tag {
        check_tag(t)?;
    }
    if let Some(d) = domain {
        check_domain(d)?;
    }
    if path.to_ascii_lowercase() != path {
        return Err(RefError::NotLowercase);
    }
    if !path.split('/').all(is_path_component) {
        return Err(RefError::BadFormat);
    }
    Ok(Parsed {
        domain,
        has_tag_or_digest: tag.is_some() || digest.is_some(),
    })
}

/// The first component is a registry when it has a `.` or `:`, is `localhost`, or has upper case.
fn split_domain(name: &str) -> (Option<&str>, &str) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.to_ascii_lowercase() != first =>
        {
            (Some(first), rest)
        }
        _ => (None, name),
    }
}

fn check_domain(d: &str) -> Result<(), RefError> {
    match split_host_port(d) {
        Ok((host, _)) if is_registry_host(host) => Ok(()),
        _ => Err(RefError::BadFormat),
    }
}

fn check_tag(t: &str) -> Result<(), RefError> {
    if is_tag(t) {
        Ok(())
    } else {
        Err(RefError::BadFormat)
    }
}

/// The docker tag grammar `[\w][\w.-]{0,127}`.
pub fn is_tag(t: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    t.len() <= 128
        && t.bytes().next().is_some_and(word)
        && t.bytes().all(|b| word(b) || b == b'.' || b == b'-')
}

fn check_digest(d: &str) -> Result<(), RefError> {
    let ok = d.split_once(':').is_some_and(|(algo, hex)| {
        algo.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && algo
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_+.".contains(&b))
            && hex.len() >= 32
            && hex.bytes().all(|b| b.is_ascii_hexdigit())
    });
    if ok { Ok(()) } else { Err(RefError::BadFormat) }
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
pub fn is_path_component(c: &str) -> bool {
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let b = c.as_bytes();
    if !(b.first().is_some_and(alnum) && b.last().is_some_and(alnum)) {
        return false;
    }
    let mut sep = String::new();
    for &x in b {
        if alnum(&x) {
            let ok = sep.is_empty()
                || sep == "."
                || sep == "_"
                || sep == "__"
                || sep.bytes().all(|s| s == b'-');
            if !ok {
                return false;
            }
            sep.clear();
        } else if b"._-".contains(&x) {
            sep.push(char::from(x));
        } else {
            return false;
        }
    }
    true
}

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
pub fn parse_image_reference(text: &str) -> Result<ImageReference, RefError> {
    let s = text.strip_prefix("docker://").unwrap_or(text);
    let bad = |why| RefError::Reference {
        text: text.to_string(),
        why,
    };
    let (name, digest) = match s.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (s, None),
    };
    if let Some(d) = digest
        && !is_digest(d)
    {
        return Err(bad(Unqualified::Digest));
    }
    let (name, tag) = match name.rsplit_once(':') {
        Some((n, t)) if !t.contains('/') => (n, Some(t)),
        _ => (name, None),
    };
    if let Some(t) = tag
        && !is_tag(t)
    {
        return Err(bad(Unqualified::Tag));
    }
    let Some((registry, repository)) = name.split_once('/') else {
        return Err(bad(Unqualified::NoRegistry));
    };
    if !is_registry(registry) {
        return Err(bad(Unqualified::NoRegistry));
    }
    if !repository.split('/').all(is_path_component) {
        return Err(bad(Unqualified::Path));
    }
    if tag.is_none() && digest.is_none() {
        return Err(bad(Unqualified::NoTagOrDigest));
    }
    Ok(ImageReference {
        registry: registry.to_string(),
        repository: repository.to_string(),
        tag: tag.map(str::to_string),
        digest: digest.map(str::to_string),
    })
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

    // The installer's messages, as users see them.
    const NOT_REPOSITORY: &str = "must be repository--not reference";
    const BAD_FORMAT: &str = "failed to parse: invalid reference format";
    const NOT_LOWERCASE: &str =
        "failed to parse: invalid reference format: repository name must be lowercase";
    const NOT_QUALIFIED: &str =
        "must start with a registry host name, e.g. quay.io/namespace/repo:tag";
    const NO_TAG_OR_DIGEST: &str = "a tag or a digest is required, e.g. quay.io/namespace/repo:tag";

    #[test]
    fn repositories() {
        let digest = format!("quay.io/ocp/release@sha256:{}", "a".repeat(64));
        let cases: &[(&str, Result<(), &str>)] = &[
            ("quay.io/openshift-release-dev/ocp-release", Ok(())),
            ("registry.lab:5000/ocp4/openshift4", Ok(())),
            ("localhost/foo", Ok(())),
            ("[fd00::1]:5000/a/b", Ok(())),
            ("Registry.lab:5000/a_b/c__d/e--f/g.h", Ok(())),
            ("registry.lab.redhat.com:5000", Ok(())),
            ("registry.lab.redhat.com", Ok(())),
            ("quay.io/ocp/release:4.16", Err(NOT_REPOSITORY)),
            (&digest, Err(NOT_REPOSITORY)),
            ("Registry.lab.redhat.com:5000", Err(NOT_LOWERCASE)),
            ("quay.io/Ocp/release", Err(NOT_LOWERCASE)),
            ("quay.io/ocp//release", Err(BAD_FORMAT)),
            ("quay.io/ocp/-release", Err(BAD_FORMAT)),
            ("quay.io/ocp/release@sha256:abc", Err(BAD_FORMAT)),
            ("quay.io/ocp/release:", Err(BAD_FORMAT)),
            (
                "library/ubuntu",
                Err(
                    "the repository provided is invalid: it must start with a registry host name (e.g. quay.io/namespace/repo)",
                ),
            ),
            (
                "registry:latest",
                Err("the repository provided is invalid: invalid port \"latest\""),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                check_repository(input).map_err(|e| e.to_string()),
                want.map_err(str::to_string),
                "{input}"
            );
        }
    }

    #[test]
    fn pull_specs() {
        let digest = format!("quay.io/ocp/ibi@sha256:{}", "a".repeat(64));
        let both = format!("registry.lab:5000/ocp/ibi:4.16@sha256:{}", "b".repeat(64));
        let cases: &[(&str, Result<(), &str>)] = &[
            ("quay.io/openshift-kni/ibi:4.16.0", Ok(())),
            ("localhost/ibi:dev", Ok(())),
            ("[fd00::1]:5000/a/ibi:latest", Ok(())),
            (&digest, Ok(())),
            (&both, Ok(())),
            ("quay.io/openshift-kni/ibi", Err(NO_TAG_OR_DIGEST)),
            ("registry.lab:5000/ibi", Err(NO_TAG_OR_DIGEST)),
            ("ibi:4.16", Err(NOT_QUALIFIED)),
            ("openshift-kni/ibi:4.16", Err(NOT_QUALIFIED)),
            ("quay.io:5000", Err(NOT_QUALIFIED)),
            ("quay.io/Kni/ibi:1", Err(NOT_LOWERCASE)),
            ("quay.io/kni/ibi:", Err(BAD_FORMAT)),
            ("quay.io/kni/ibi@sha256:abc", Err(BAD_FORMAT)),
            ("docker://quay.io/kni/ibi:1", Err(BAD_FORMAT)),
            ("quay.io/kni/ibi:1 ", Err(BAD_FORMAT)),
            ("", Err(BAD_FORMAT)),
        ];
        for (input, want) in cases {
            assert_eq!(
                check_pull_spec(input).map_err(|e| e.to_string()),
                want.map_err(str::to_string),
                "{input}"
            );
        }
    }

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
            let e = parse_image_reference(text).expect_err(text).to_string();
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
}
