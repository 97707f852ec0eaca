//! `/etc/containers/registries.conf` for the live ISO, from `imageDigestSources`: the text the installer's
//! `RegistriesConf` asset produces (containers `sysregistriesv2` marshalled by pelletier/go-toml v1), written
//! by hand because the format is tiny and fixed.
//!
//! Consumers: podman on the live ISO (the script's `podman create`, lca-cli's `podman pull`s), and lca-cli's
//! precache, which reads the `[[registry]]` `location` hosts to decide whether to rewrite image references
//! to `releaseRegistry`.

use crate::config::ImageDigestSource;

/// The `sourcePolicy` that blocks pulls from the source itself (`blocked = true`).
pub const NEVER_CONTACT_SOURCE: &str = "NeverContactSource";

/// One `[[registry]]` entry after merging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorGroup {
    pub source: String,
    pub mirrors: Vec<String>,
    pub blocked: bool,
}

/// Merges `imageDigestSources` by `source` in order of first appearance, mirrors deduplicated in order
/// (installer `MergedMirrorSets`), and drops groups left without mirrors.
///
/// Choice: the newest installer keys the merge on (source, sourcePolicy) and so can write two entries for
/// one location, which containers' registries.conf parsing does not merge cleanly; we key on the source
/// alone, as the reference describes, and block it when any of its entries says `NeverContactSource`.
pub fn merged_mirror_groups(sources: &[ImageDigestSource]) -> Vec<MirrorGroup> {
    let mut groups: Vec<MirrorGroup> = Vec::new();
    for s in sources {
        let idx = match groups.iter().position(|g| g.source == s.source) {
            Some(i) => i,
            None => {
                groups.push(MirrorGroup {
                    source: s.source.clone(),
                    mirrors: Vec::new(),
                    blocked: false,
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[idx];
        g.blocked |= s.source_policy.as_deref() == Some(NEVER_CONTACT_SOURCE);
        for m in &s.mirrors {
            if !g.mirrors.contains(m) {
                g.mirrors.push(m.clone());
            }
        }
    }
    groups.retain(|g| !g.mirrors.is_empty());
    groups
}

/// The registries.conf text, or `None` when `sources` is empty (the installer then writes no file and the
/// live ISO keeps RHCOS's own, which lca-cli needs to exist).
///
/// Keys are sorted as go-toml sorts them; every `[[…]]` header is preceded by an empty line.
pub fn registries_conf(sources: &[ImageDigestSource]) -> Option<String> {
    if sources.is_empty() {
        return None;
    }
    let mut out = String::from(
        "credential-helpers = []\nshort-name-mode = \"\"\nunqualified-search-registries = []\n",
    );
    for g in merged_mirror_groups(sources) {
        out.push_str("\n[[registry]]\n");
        if g.blocked {
            out.push_str("  blocked = true\n");
        }
        out.push_str(&format!("  location = {}\n", toml_string(&g.source)));
        out.push_str("  mirror-by-digest-only = true\n  prefix = \"\"\n");
        for m in &g.mirrors {
            out.push_str("\n  [[registry.mirror]]\n");
            out.push_str(&format!("    location = {}\n", toml_string(m)));
        }
    }
    Some(out)
}

/// A TOML basic string, escaped like go-toml v1's `encodeTomlString`.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04X}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(source: &str, mirrors: &[&str], policy: Option<&str>) -> ImageDigestSource {
        ImageDigestSource {
            source: source.into(),
            mirrors: mirrors.iter().map(|m| m.to_string()).collect(),
            source_policy: policy.map(str::to_string),
        }
    }

    #[test]
    fn reference_example_is_exact() {
        let got = registries_conf(&[ids("quay.io", &["mirror-quay.io"], None)]).unwrap();
        let want = "credential-helpers = []\nshort-name-mode = \"\"\nunqualified-search-registries = []\n\n\
                    [[registry]]\n  location = \"quay.io\"\n  mirror-by-digest-only = true\n  prefix = \"\"\n\n  \
                    [[registry.mirror]]\n    location = \"mirror-quay.io\"\n";
        assert_eq!(got, want);
    }

    #[test]
    fn merges_sources_skips_empty_groups_and_blocks() {
        let got = registries_conf(&[
            ids("quay.io/a", &["m1", "m2"], None),
            ids("registry.io", &[], None),
            ids("quay.io/a", &["m2", "m3"], Some("NeverContactSource")),
            ids("r.io", &["m4"], Some("AllowContactingSource")),
        ])
        .unwrap();
        let want = "credential-helpers = []\nshort-name-mode = \"\"\nunqualified-search-registries = []\n\n\
                    [[registry]]\n  blocked = true\n  location = \"quay.io/a\"\n  mirror-by-digest-only = true\n  \
                    prefix = \"\"\n\n  [[registry.mirror]]\n    location = \"m1\"\n\n  [[registry.mirror]]\n    \
                    location = \"m2\"\n\n  [[registry.mirror]]\n    location = \"m3\"\n\n[[registry]]\n  \
                    location = \"r.io\"\n  mirror-by-digest-only = true\n  prefix = \"\"\n\n  \
                    [[registry.mirror]]\n    location = \"m4\"\n";
        assert_eq!(got, want);
    }

    #[test]
    fn no_sources_no_file_and_only_empty_groups_gives_the_header() {
        assert_eq!(registries_conf(&[]), None);
        assert_eq!(
            registries_conf(&[ids("quay.io", &[], None)]).unwrap(),
            "credential-helpers = []\nshort-name-mode = \"\"\nunqualified-search-registries = []\n"
        );
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(toml_string("a\"b\\c\u{1}"), "\"a\\\"b\\\\c\\u0001\"");
    }
}
