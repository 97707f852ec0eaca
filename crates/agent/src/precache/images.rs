//! What to precache and from where: the seed's containers.list with the release-registry rewrite rule, the live system's registries.conf, and the run over the pool.

use std::path::Path;

use anyhow::{Context, Result};

/// Where lca-cli reads the live host's mirror configuration (`GetMirrorRegistrySourceRegistries`).
pub(crate) const REGISTRIES_CONF: &str = "/etc/containers/registries.conf";
/// lca-cli's environment variable for the number of parallel pulls.
pub(crate) const MAX_PULL_THREADS_ENV: &str = "MAX_PULL_THREADS";
/// lca-cli's default number of parallel pulls.
pub(crate) const DEFAULT_PARALLELISM: usize = 10;
/// lca-cli's number of attempts per image.
pub(crate) const DEFAULT_ATTEMPTS: u32 = 5;

/// One `[[registry]]` table of `registries.conf`, as far as precache cares.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct RegistryEntry {
    location: String,
    insecure: bool,
}

/// The `[[registry]]` tables of a `registries.conf` (TOML). A line parser, not a TOML parser: it reads the
/// `key = "value"` lines of `[[registry]]` tables and ignores every other table (`[[registry.mirror]]`
/// has its own `location`, which is a mirror, not a source), comments and unknown keys.
fn registry_entries(text: &str) -> Vec<RegistryEntry> {
    let mut entries = Vec::new();
    let mut current: Option<RegistryEntry> = None;
    for line in text.lines().map(strip_comment).map(str::trim) {
        if line.starts_with('[') {
            entries.extend(current.take());
            if line.replace(' ', "") == "[[registry]]" {
                current = Some(RegistryEntry::default());
            }
            continue;
        }
        let (Some(entry), Some((key, value))) = (current.as_mut(), line.split_once('=')) else {
            continue;
        };
        match key.trim() {
            "location" => entry.location = unquote(value.trim()).to_string(),
            "insecure" => entry.insecure = value.trim() == "true",
            _ => {}
        }
    }
    entries.extend(current);
    entries
}

/// The line without a `#` comment; a `#` inside a quoted value is kept.
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') => return &line[..i],
            _ => {}
        }
    }
    line
}

fn unquote(value: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(q).and_then(|v| v.strip_suffix(q)) {
            return inner;
        }
    }
    value
}

/// The part of a registry location or image reference before the first `/`.
pub(crate) fn registry_host(reference: &str) -> &str {
    reference.split('/').next().unwrap_or(reference)
}

/// The mirror sources of a `registries.conf`: the host part of each `[[registry]] location`, in order,
/// without duplicates (lca-cli's mirror source list).
pub fn registry_sources_from_registries_conf(text: &str) -> Vec<String> {
    hosts(registry_entries(text).iter().map(|e| e.location.as_str()))
}

/// The hosts a `registries.conf` marks `insecure = true`: the puller skips TLS verification for them only.
pub fn insecure_hosts_from_registries_conf(text: &str) -> Vec<String> {
    let entries = registry_entries(text);
    hosts(
        entries
            .iter()
            .filter(|e| e.insecure)
            .map(|e| e.location.as_str()),
    )
}

fn hosts<'a>(locations: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for host in locations.map(registry_host).filter(|h| !h.is_empty()) {
        if !out.iter().any(|h| h == host) {
            out.push(host.to_string());
        }
    }
    out
}

/// Reads a `registries.conf`; a missing file means no mirrors and no insecure hosts (an empty text).
pub(crate) fn load_registries_conf(path: &Path) -> Result<String> {
    match std::fs::read_to_string(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        other => other.with_context(|| format!("reading {}", path.display())),
    }
}

/// lca-cli's rule for rewriting the seed's release registry: with no mirrors on the live host, rewrite
/// when the seed itself used mirrors; with mirrors, rewrite unless the seed's registry is one of their
/// sources (the mirror configuration then already redirects its pulls).
pub fn should_override(
    seed_release_registry: &str,
    seed_mirror_configured: bool,
    mirror_sources: &[String],
) -> bool {
    if mirror_sources.is_empty() {
        return seed_mirror_configured;
    }
    !mirror_sources.iter().any(|s| s == seed_release_registry)
}

/// The images to precache: the non-empty (trimmed) lines of `containers.list`. When `override_registry`
/// is set and both registries are non-empty and different, an image whose registry host is
/// `seed_release_registry` gets `release_registry` in its place.
///
/// lca-cli replaces the unescaped regex `^<seed registry>`; ibi matches the literal host followed by `/`.
/// The regex's dots match any character and it has no end anchor, so `quay.io` would also rewrite the
/// start of `quay.io.mirror.example.com/x` or `quayxio/x`, images of a different registry.
pub fn image_list(
    containers_list: &str,
    seed_release_registry: &str,
    release_registry: &str,
    override_registry: bool,
) -> Vec<String> {
    let rewrite = override_registry
        && !seed_release_registry.is_empty()
        && !release_registry.is_empty()
        && seed_release_registry != release_registry;
    containers_list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|image| {
            let rest = image
                .strip_prefix(seed_release_registry)
                .and_then(|r| r.strip_prefix('/'));
            match rest {
                Some(rest) if rewrite => format!("{release_registry}/{rest}"),
                _ => image.to_string(),
            }
        })
        .collect()
}

/// The pool size from `MAX_PULL_THREADS`'s value: a positive integer, else [`DEFAULT_PARALLELISM`].
pub(crate) fn parallelism_from_env(value: Option<&str>) -> usize {
    match value.map(str::trim) {
        None | Some("") => DEFAULT_PARALLELISM,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                tracing::warn!(target: "ibi::agent::precache::images",
                    "ignoring {MAX_PULL_THREADS_ENV}={v:?}: not a positive integer; using {DEFAULT_PARALLELISM}"
                );
                DEFAULT_PARALLELISM
            }
        },
    }
}

/// The pool size this process should use: `MAX_PULL_THREADS` when set and valid, else 10.
pub fn parallelism() -> usize {
    parallelism_from_env(std::env::var(MAX_PULL_THREADS_ENV).ok().as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = r#"
unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]
short-name-mode = "enforcing"

[[registry]]
  prefix = ""
  location = "quay.io/openshift-release-dev/ocp-release" # the release
  mirror-by-digest-only = true

  [[registry.mirror]]
    location = "mirror.example.com:5000/ocp/release"

[[registry]]
location='registry.redhat.io'
insecure = true

[[ registry ]]
location = "quay.io/openshift-release-dev/ocp-v4.0-art-dev"

[[registry]]
location = "registry.local:5000#not-a-comment"
insecure = false

[other]
location = "not.a.registry"
"#;

    #[test]
    fn registry_sources() {
        assert_eq!(
            registry_sources_from_registries_conf(CONF),
            [
                "quay.io",
                "registry.redhat.io",
                "registry.local:5000#not-a-comment"
            ]
        );
        assert_eq!(
            insecure_hosts_from_registries_conf(CONF),
            ["registry.redhat.io"]
        );
        let cases: [(&str, &[&str]); 3] = [
            ("", &[]),
            (
                "# nothing\n[[registry.mirror]]\nlocation = \"m.example.com\"\n",
                &[],
            ),
            ("[[registry]]\nlocation = \"host:5000\"\n", &["host:5000"]),
        ];
        for (text, want) in cases {
            assert_eq!(
                registry_sources_from_registries_conf(text),
                want,
                "{text:?}"
            );
        }
    }

    #[test]
    fn missing_registries_conf_is_empty() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(
            load_registries_conf(&d.path().join("none.conf")).unwrap(),
            ""
        );
        let err = load_registries_conf(d.path()).unwrap_err();
        assert!(format!("{err:#}").starts_with(&format!("reading {}", d.path().display())));
    }

    #[test]
    fn override_rule() {
        let quay = vec!["quay.io".to_string()];
        let other = vec!["registry.redhat.io".to_string()];
        let cases = [
            ("quay.io", false, vec![], false),
            ("quay.io", true, vec![], true),
            ("quay.io", true, quay.clone(), false),
            ("quay.io", false, quay, false),
            ("quay.io", false, other.clone(), true),
            ("quay.io", true, other, true),
        ];
        for (seed, mirrored, sources, want) in cases {
            assert_eq!(
                should_override(seed, mirrored, &sources),
                want,
                "{seed} {mirrored} {sources:?}"
            );
        }
    }

    #[test]
    fn image_lists() {
        let list = "quay.io/a/b:1\n\n  quay.io/c@sha256:00  \r\nquay.io.evil.com/d:2\nquayxio/e:3\nother.io/quay.io/f:4\n";
        let kept = [
            "quay.io/a/b:1",
            "quay.io/c@sha256:00",
            "quay.io.evil.com/d:2",
            "quayxio/e:3",
            "other.io/quay.io/f:4",
        ];
        let rewritten = [
            "mirror:5000/a/b:1",
            "mirror:5000/c@sha256:00",
            "quay.io.evil.com/d:2",
            "quayxio/e:3",
            "other.io/quay.io/f:4",
        ];
        let cases: [(&str, &str, bool, &[&str]); 6] = [
            ("quay.io", "mirror:5000", true, &rewritten),
            ("quay.io", "mirror:5000", false, &kept),
            ("", "mirror:5000", true, &kept),
            ("quay.io", "", true, &kept),
            ("quay.io", "quay.io", true, &kept),
            ("registry.redhat.io", "mirror:5000", true, &kept),
        ];
        for (seed, release, over, want) in cases {
            assert_eq!(
                image_list(list, seed, release, over),
                want,
                "{seed} {release} {over}"
            );
        }
        assert!(image_list("\n \n", "a", "b", true).is_empty());
    }

    #[test]
    fn parallelism_values() {
        let cases = [
            (None, 10),
            (Some(""), 10),
            (Some("3"), 3),
            (Some(" 25 "), 25),
            (Some("0"), 10),
            (Some("-1"), 10),
            (Some("many"), 10),
        ];
        for (value, want) in cases {
            assert_eq!(parallelism_from_env(value), want, "{value:?}");
        }
    }

    #[test]
    fn hosts_of_references() {
        let cases = [
            ("quay.io/a/b:1", "quay.io"),
            ("host:5000/x", "host:5000"),
            ("plain", "plain"),
            ("", ""),
        ];
        for (reference, want) in cases {
            assert_eq!(registry_host(reference), want);
        }
    }
}
