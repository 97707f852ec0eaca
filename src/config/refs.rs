//! Image repository syntax for `imageDigestSources` / `imageContentSources`: the docker reference grammar
//! (registry host, lower-case path components, optional tag or digest), reduced to what the installer checks.
//!
//! A mirror source must name a repository, not a reference: a tag or digest is an error. A bare
//! `host[:port]` (a whole registry) is accepted, as the installer does. An image to pull
//! (`hostAgentImage`) is the opposite: a fully qualified reference with a tag or a digest.

use super::net::{is_registry_host, split_host_port};

/// The installer's message for a tag or digest on a mirror source.
pub(crate) const NOT_REPOSITORY: &str = "must be repository--not reference";
const BAD_FORMAT: &str = "failed to parse: invalid reference format";
const NOT_LOWERCASE: &str =
    "failed to parse: invalid reference format: repository name must be lowercase";

/// A short name would go through the live ISO's search registries (or fail under short-name enforcing).
const NOT_QUALIFIED: &str = "must start with a registry host name, e.g. quay.io/namespace/repo:tag";
const NO_TAG_OR_DIGEST: &str = "a tag or a digest is required, e.g. quay.io/namespace/repo:tag";

/// A reference split per the docker grammar.
struct Parsed<'a> {
    /// `None` when the first component does not look like a registry (docker.io would be implied).
    domain: Option<&'a str>,
    has_tag_or_digest: bool,
}

/// Checks that `s` is a repository (`host[:port]/path`) or a bare registry `host[:port]`.
pub(crate) fn check_repository(s: &str) -> Result<(), String> {
    let parsed = parse(s)?;
    if parsed.domain.is_none() {
        // Not canonical (docker.io would be implied); accepted only as a bare registry host[:port].
        return check_bare_host(s);
    }
    if parsed.has_tag_or_digest {
        return Err(NOT_REPOSITORY.into());
    }
    Ok(())
}

/// Checks that `s` is a pull spec podman on the live ISO resolves without search registries:
/// `host[:port]/path` with a tag, a digest or both.
pub(crate) fn check_pull_spec(s: &str) -> Result<(), String> {
    let parsed = parse(s)?;
    if parsed.domain.is_none() {
        return Err(NOT_QUALIFIED.into());
    }
    if !parsed.has_tag_or_digest {
        return Err(NO_TAG_OR_DIGEST.into());
    }
    Ok(())
}

fn check_bare_host(s: &str) -> Result<(), String> {
    let invalid = |why: String| format!("the repository provided is invalid: {why}");
    if s.contains('/') {
        return Err(invalid(
            "it must start with a registry host name (e.g. quay.io/namespace/repo)".into(),
        ));
    }
    let (host, _) = split_host_port(s).map_err(invalid)?;
    if !is_registry_host(host) {
        return Err(invalid(format!("{host:?} is not a valid host name")));
    }
    Ok(())
}

fn parse(s: &str) -> Result<Parsed<'_>, String> {
    if s.is_empty() || s.len() > 255 {
        return Err(BAD_FORMAT.into());
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
        return Err(NOT_LOWERCASE.into());
    }
    if !path.split('/').all(is_path_component) {
        return Err(BAD_FORMAT.into());
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

fn check_domain(d: &str) -> Result<(), String> {
    match split_host_port(d) {
        Ok((host, _)) if is_registry_host(host) => Ok(()),
        _ => Err(BAD_FORMAT.into()),
    }
}

fn check_tag(t: &str) -> Result<(), String> {
    if is_tag(t) {
        Ok(())
    } else {
        Err(BAD_FORMAT.into())
    }
}

/// The docker tag grammar `[\w][\w.-]{0,127}`; shared with `registry::reference`.
pub(crate) fn is_tag(t: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    t.len() <= 128
        && t.bytes().next().is_some_and(word)
        && t.bytes().all(|b| word(b) || b == b'.' || b == b'-')
}

fn check_digest(d: &str) -> Result<(), String> {
    let ok = d.split_once(':').is_some_and(|(algo, hex)| {
        algo.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && algo
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_+.".contains(&b))
            && hex.len() >= 32
            && hex.bytes().all(|b| b.is_ascii_hexdigit())
    });
    if ok { Ok(()) } else { Err(BAD_FORMAT.into()) }
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`; shared with `registry::reference`.
pub(crate) fn is_path_component(c: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
                check_repository(input),
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
                check_pull_spec(input),
                want.map_err(str::to_string),
                "{input}"
            );
        }
    }
}
