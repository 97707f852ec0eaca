//! Which lifecycle-agent version first honours each optional key of `ibi-configuration.json`, and the
//! rule that refuses a key the seed's own `lca-cli ibi` would silently drop.
//!
//! With `hostAgent: lca` the live ISO runs the `lca-cli` copied out of the seed, so the seed's version
//! (`seedVersion`, which the seed checks hold equal to the seed's `seed_cluster_ocp_version`) decides
//! what the file means. Older versions decode it leniently and drop keys they do not know: a
//! `--save-partindex 6` given to a 4.17 seed silently lets `coreos-installer` overwrite the partition
//! the user meant to keep. `ibi agent install` (`hostAgent: ibi`) honours every key, so the rule is
//! for `lca` only. [`VERSIONED_KEYS`] is the one table the rule and `docs/create-image.md` follow (a
//! test holds the docs to [`markdown_table`]). Facts: lifecycle-agent's release branches
//! (`api/ibiconfig/ibiconfig.go`, `ibipreparation.go`), see lifecycle-agent-versions.md. What each
//! seed line's lifecycle-agent does on the live ISO, and its known defects, is `seed::lines`.

use std::fmt;

use super::finding::Findings;

/// An OpenShift `major.minor`, which is also the lifecycle-agent release branch a seed carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct MinorVersion {
    pub major: u32,
    pub minor: u32,
}

impl MinorVersion {
    pub const fn new(major: u32, minor: u32) -> MinorVersion {
        MinorVersion { major, minor }
    }
}

impl fmt::Display for MinorVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The `major.minor` at the start of an OpenShift version (`4.17.3`, `4.18.0-rc.1`, `4.20`); `None`
/// for anything else.
pub fn parse_minor_version(version: &str) -> Option<MinorVersion> {
    let mut parts = version.splitn(3, '.');
    let number = |s: Option<&str>| -> Option<u32> {
        let digits: String = s?.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let major = number(parts.next())?;
    let rest = parts.next()?;
    // "4.18.0" or "4.18" or "4.18-rc.1"; never "4.x".
    let minor = number(Some(rest))?;
    Some(MinorVersion { major, minor })
}

/// One `ibi-configuration.json` key that older lifecycle-agents do not know.
pub struct VersionedKey {
    /// The key in image-based-installation-config.yaml (and in ibi-configuration.json).
    pub field: &'static str,
    /// The first lifecycle-agent release that honours it.
    pub since: MinorVersion,
    /// What older releases do instead (they drop the key).
    pub older: &'static str,
}

/// The keys, oldest first.
pub const VERSIONED_KEYS: &[VersionedKey] = &[
    VersionedKey {
        field: "releaseRegistry",
        since: MinorVersion {
            major: 4,
            minor: 17,
        },
        older: "precaches from the seed's own registry",
    },
    VersionedKey {
        field: "coreosInstallerArgs",
        since: MinorVersion {
            major: 4,
            minor: 18,
        },
        older: "runs `coreos-installer install <disk>` with no extra arguments",
    },
];

/// For a seed whose own lca-cli installs (`hostAgent: lca`): each of the `set` keys the seed's lca-cli
/// would drop is a finding naming the field, the seed's version and the first version that honours it.
/// A `seedVersion` that is no OpenShift version (the seed checks compare it anyway) only warns.
pub(crate) fn check(f: &mut Findings, seed_version: &str, set: &[&str]) {
    if seed_version.trim().is_empty() {
        return;
    }
    let set: Vec<&VersionedKey> = VERSIONED_KEYS
        .iter()
        .filter(|k| set.contains(&k.field))
        .collect();
    let Some(seed) = parse_minor_version(seed_version) else {
        for key in set {
            f.warn(
                key.field,
                format!(
                    "seedVersion {:?} is not an OpenShift version, so ibi cannot tell whether the seed's lca-cli honours this key (it does from {} on)",
                    seed_version, key.since
                ),
            );
        }
        return;
    };
    for key in set.into_iter().filter(|k| seed < k.since) {
        f.add(
            key.field,
            format!(
                "the seed is {} (seedVersion), whose lca-cli ignores this key and {}; lca-cli honours it from {} on: remove it, use a seed of {} or later, or set hostAgent: ibi",
                seed_version, key.older, key.since, key.since
            ),
        );
    }
}

/// The table as docs/create-image.md shows it.
#[cfg(test)]
pub fn markdown_table() -> String {
    let mut s = String::from(
        "| key | first lifecycle-agent version | what an older lca-cli does (`hostAgent: lca`: refused) |\n|---|---|---|\n",
    );
    for k in VERSIONED_KEYS {
        s.push_str(&format!(
            "| `{}` | {} | drops the key and {} |\n",
            k.field, k.since, k.older
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(major: u32, minor: u32) -> Option<MinorVersion> {
        Some(MinorVersion { major, minor })
    }

    #[test]
    fn parses_openshift_versions() {
        let cases = [
            ("4.16.0", v(4, 16)),
            ("4.17.12", v(4, 17)),
            ("4.18.0-rc.1", v(4, 18)),
            ("4.20.0-ec.3", v(4, 20)),
            ("4.20", v(4, 20)),
            ("5.0.1", v(5, 0)),
            ("4", None),
            ("4.x.0", None),
            ("latest", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_minor_version(text), want, "{text}");
        }
        assert!(v(4, 9) < v(4, 17) && v(4, 17) < v(5, 0));
    }

    #[test]
    fn the_docs_hold_the_table() {
        let docs = include_str!("../../docs/create-image.md");
        let table = markdown_table();
        assert!(
            docs.contains(&table),
            "docs/create-image.md must hold this table verbatim:\n{table}"
        );
        assert!(table.contains("| `coreosInstallerArgs` | 4.18 | drops the key and runs `coreos-installer install <disk>` with no extra arguments |"));
    }
}
