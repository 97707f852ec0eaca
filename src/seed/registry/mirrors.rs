//! The `imageDigestSources` mirror rewrite containers/image applies to a registry image reference: where to
//! look for an image, mirrors first.

use crate::config::ImageDigestSource;
use crate::image_ref::{ImageReference, RefError, parse_image_reference};

/// The `sourcePolicy` value that forbids falling back to the source registry.
const NEVER_CONTACT_SOURCE: &str = "NeverContactSource";

/// Where to look for `reference`, in order: for a digest reference, each mirror of every matching
/// `imageDigestSources` entry (the longest matching source, as registries.conf does), then the source
/// itself unless its policy is `NeverContactSource`. A tag reference goes to its own registry only: digest
/// mirrors do not apply to tags.
pub fn pull_endpoints(
    reference: &ImageReference,
    sources: &[ImageDigestSource],
) -> Result<Vec<ImageReference>, RefError> {
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
        out.push(with_name(reference, &format!("{mirror}{rest}"))?);
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

/// The same repository path on another registry and repository prefix (a mirror).
fn with_name(reference: &ImageReference, name: &str) -> Result<ImageReference, RefError> {
    let mut text = name.to_string();
    if let Some(d) = &reference.digest {
        text = format!("{text}@{d}");
    }
    parse_image_reference(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest() -> String {
        format!("sha256:{}", "a".repeat(64))
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
