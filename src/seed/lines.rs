//! The seed lines ibi knows, as data: for each OpenShift `major.minor`, the lifecycle-agent branch
//! its seeds carry, the RHEL and CoreOS stream its live ISO boots, how its `lca-cli ibi` makes the
//! extra partition; the known seed defects and the branches that fixed them; and the rules drawn
//! from those tables: a seed's exposure to a defect, the warnings, and which live ISO a seed may
//! pair with. The versioned keys of `ibi-configuration.json` (a rule on the configuration alone)
//! stay in `config::lca_versions`. Facts: lifecycle-agent's release branches, see
//! lifecycle-agent-versions.md.

use crate::config::{MinorVersion, parse_minor_version};

/// The Red Hat Enterprise Linux major a seed line's hosts run, and so the live ISO that
/// `openshift-install image-based create image` of that line boots: RHEL 10 from OpenShift 5 on,
/// RHEL 9 below (installer `BuildDefaultOSImageStream`, whose test maps `v4.18.3` to `rhel-9` and
/// `v5.0.0` to `rhel-10`).
pub fn host_rhel(seed: MinorVersion) -> u32 {
    if seed.major >= 5 { 10 } else { 9 }
}

/// The CoreOS stream (`rhel-9`, `rhel-10`) of a seed line: the key of the release payload's
/// `coreos-bootimages` `streams` and the installer's `coreos-<stream>.json`.
pub fn coreos_stream(seed: MinorVersion) -> &'static str {
    if host_rhel(seed) >= 10 {
        "rhel-10"
    } else {
        "rhel-9"
    }
}

/// One-shot site install (`ibi create image --site`): the first lifecycle-agent whose post-pivot takes
/// an existing `/opt/openshift/cluster-configuration` in place of the `cluster-config` device (the same
/// rule on release-4.16 through main, reference README item 23) and whose `lca-cli ibi` runs
/// `var/tmp/post.sh` after the precache, with the target still mounted at `/mnt` (the installer of
/// 4.16 ships `post.sh`; lifecycle-agent a13913d97, MGMT-16608; inferred for the release branches from
/// those two facts, not run). Older seeds are refused; every seed line ibi knows is at least this.
pub const ONE_SHOT_SINCE: MinorVersion = v(4, 16);

/// The first seed line whose post-pivot reads manifest.json's `machine_networks` list; 4.16–4.19 read
/// only `machine_network` (one CIDR) and, with a proxy, fail without it ("machineNetwork is empty,
/// must be provided in case of proxy", 4.16 `postpivot.go:339-340`; lifecycle-agent-versions.md).
pub const MACHINE_NETWORKS_SINCE: MinorVersion = v(4, 20);

/// A day (`YYYY-MM-DD`), compared as text. A fix's day is the day it **reached its branch** (the
/// date of the merge that brought it there, on the branch's first-parent history), not its author
/// date: a seed built from that branch before that day cannot have it. A seed created on that very
/// day may or may not (the day cannot decide).
pub type Day = &'static str;

/// lifecycle-agent a1ce5991e (`main` only): `sgdisk` replaced by `sfdisk --append`, "RHEL 10 no
/// longer includes gdisk". Authored 2026-06-16, reached main 2026-06-18 (merge a300521a8, PR
/// #7240). Every release branch 4.16–4.22 still calls `sgdisk`.
pub const SFDISK_SINCE: (&str, Day) = ("a1ce5991e", "2026-06-18");
/// lifecycle-agent 66bd55bb4 (`main` only): a negative `extraPartitionStart` works again with
/// `sfdisk` (start computed from `blockdev --getsize64`/`--getss`). Reached main 2026-07-22 (merge
/// 939cd9599, PR #7974).
pub const NEGATIVE_START_FIXED: (&str, Day) = ("66bd55bb4", "2026-07-22");

/// One line of seeds: what the lifecycle-agent of an OpenShift `major.minor` does on the live ISO.
#[cfg(test)]
pub struct SeedLine {
    pub line: MinorVersion,
    /// The lifecycle-agent branch the seed's `lca-cli` is built from.
    pub lca_branch: &'static str,
    /// How `lca-cli ibi` makes the extra partition.
    pub partitions: &'static str,
}

const fn v(major: u32, minor: u32) -> MinorVersion {
    MinorVersion::new(major, minor)
}

/// The seed lines ibi knows, oldest first (lifecycle-agent @ 0e1bf182, 2026-08-22). 4.23 is absent:
/// no lifecycle-agent branch for it was found.
#[cfg(test)]
pub const SEED_LINES: &[SeedLine] = &[
    SeedLine {
        line: v(4, 16),
        lca_branch: "release-4.16",
        partitions: "`sgdisk`",
    },
    SeedLine {
        line: v(4, 17),
        lca_branch: "release-4.17",
        partitions: "`sgdisk`",
    },
    SeedLine {
        line: v(4, 18),
        lca_branch: "release-4.18",
        partitions: "`sgdisk`",
    },
    SeedLine {
        line: v(4, 19),
        lca_branch: "release-4.19",
        partitions: "`sgdisk`",
    },
    SeedLine {
        line: v(4, 20),
        lca_branch: "release-4.20",
        partitions: "`sgdisk`",
    },
    SeedLine {
        line: v(4, 21),
        lca_branch: "release-4.21",
        partitions: "`sgdisk`",
    },
    SeedLine {
        line: v(4, 22),
        lca_branch: "release-4.22",
        partitions: "`sgdisk`",
    },
    SeedLine {
        line: v(5, 0),
        lca_branch: "main",
        partitions: "`sgdisk` before a1ce5991e (on main 2026-06-18); `sfdisk --append` since, a negative start broken until 66bd55bb4 (on main 2026-07-22)",
    },
];

/// A fix of a seed defect on one lifecycle-agent branch.
pub struct DefectFix {
    pub line: MinorVersion,
    pub branch: &'static str,
    pub commit: &'static str,
    pub day: Day,
}

/// Which defect (the checks that read the seed itself differ by defect).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefectId {
    CaTrustRace,
}

/// A known defect of seeds generated by some lifecycle-agent builds.
pub struct SeedDefect {
    pub id: DefectId,
    pub name: &'static str,
    /// What the installed host suffers.
    pub effect: &'static str,
    /// Where it is fixed; a line without an entry here has no fix.
    pub fixes: &'static [DefectFix],
}

// Not a defect of image-based installs: lifecycle-agent 1c1713e9b (main) and 187bbde1f
// (release-4.22), "Fix CRI-O startup delays during seedgen restoration", remove pod sandboxes in
// `StopClusterServices` (lca-cli/ops/ops.go), which runs at seed creation and in the IP-config
// pre-pivot, both on the seed SNO itself. A seed's var.tgz is made with `--exclude
// /var/lib/containers/*` (lca-cli/seedcreator/seedcreator.go `backupVar`), where CRI-O keeps its
// sandboxes, and an installed host gets a fresh containers partition: no sandbox of the seed cluster
// reaches it. Checked at lifecycle-agent 0e1bf182c.

/// `installation-configuration.service` (post-pivot, shipped in the seed's `/etc`) and
/// `coreos-update-ca-trust.service` both run `update-ca-trust` at boot; run twice at once it breaks.
pub const CA_TRUST_RACE: SeedDefect = SeedDefect {
    id: DefectId::CaTrustRace,
    name: "ca-trust race of installation-configuration.service",
    effect: "unless the seed's installation-configuration.service (lca-cli post-pivot) is ordered after \
             coreos-update-ca-trust.service, both run update-ca-trust at once on first boot, which is not safe; on \
             RHEL 10 it takes ~5.9 s instead of ~1.3 s and the race hits reliably (an IBU from 5.0.0-ec.2 to \
             5.0.0-ec.4 rolled back from it, OCPBUGS-98688), on RHEL 9 rarely",
    fixes: &[
        // Each day is the merge that brought the fix to its branch (lifecycle-agent 0e1bf182c):
        // 875c2ea83 (PR #7921), 151fbe574 (PR #7910), d47ad9aa5 (PR #7892), ce9f5e7ec (PR #7846).
        DefectFix {
            line: v(4, 20),
            branch: "release-4.20",
            commit: "85b360bbd",
            day: "2026-07-17",
        },
        DefectFix {
            line: v(4, 21),
            branch: "release-4.21",
            commit: "729153a6b",
            day: "2026-07-16",
        },
        DefectFix {
            line: v(4, 22),
            branch: "release-4.22",
            commit: "0a6d4eb31",
            day: "2026-07-16",
        },
        DefectFix {
            line: v(5, 0),
            branch: "main",
            commit: "95c0672d1",
            day: "2026-07-16",
        },
    ],
};

/// Every known seed defect.
pub const SEED_DEFECTS: &[&SeedDefect] = &[&CA_TRUST_RACE];

/// What ibi could learn of a seed beyond its version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeedEvidence {
    /// The seed image's `created` (RFC 3339), which podman sets when `lca-cli create` builds it:
    /// the lifecycle-agent that built the seed is older than this.
    pub created: Option<String>,
    /// Whether the seed's own `installation-configuration.service` is ordered
    /// `After=coreos-update-ca-trust.service`; `None` when it was not read.
    pub post_pivot_after_ca_trust: Option<bool>,
}

impl SeedEvidence {
    /// The day of `created` (`YYYY-MM-DD`), when it has that shape.
    fn created_day(&self) -> Option<&str> {
        let c = self.created.as_deref()?;
        let day = c.get(..10)?;
        let b = day.as_bytes();
        let shape = b.len() == 10
            && b[4] == b'-'
            && b[7] == b'-'
            && b.iter()
                .enumerate()
                .all(|(i, x)| i == 4 || i == 7 || x.is_ascii_digit());
        shape.then_some(day)
    }
}

/// How a seed stands with a defect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// Shown not to have it.
    Clear,
    /// Shown to have it; the reason says how ibi knows.
    Affected(String),
    /// Could not be told; the reason says what was checked and what could not be.
    Unknown(String),
}

/// How the seed of `seed_version` stands with `defect`, from its version and `evidence`.
pub fn exposure(defect: &SeedDefect, seed_version: &str, evidence: &SeedEvidence) -> Exposure {
    let Some(seed) = parse_minor_version(seed_version) else {
        return Exposure::Unknown(format!(
            "Its seedVersion {seed_version:?} is no OpenShift version, so its lifecycle-agent line is unknown"
        ));
    };
    if defect.id == DefectId::CaTrustRace {
        match evidence.post_pivot_after_ca_trust {
            Some(true) => return Exposure::Clear,
            Some(false) => {
                return Exposure::Affected(
                    "Checked: the seed's own /etc/systemd/system/installation-configuration.service has no \
                     After=coreos-update-ca-trust.service"
                        .to_string(),
                );
            }
            None => {}
        }
    }
    let Some(fix) = defect.fixes.iter().find(|f| f.line == seed) else {
        let oldest = defect.fixes.iter().map(|f| f.line).min();
        return match oldest {
            Some(first) if seed < first => Exposure::Affected(format!(
                "No lifecycle-agent of the {seed} line has the fix (fixed only in {})",
                fix_list(defect)
            )),
            _ => Exposure::Unknown(format!(
                "ibi knows no lifecycle-agent branch for {seed} (fixed in {})",
                fix_list(defect)
            )),
        };
    };
    match evidence.created_day() {
        Some(day) if day < fix.day => Exposure::Affected(format!(
            "The seed image was created on {day}, before the fix ({}) reached {} on {}",
            fix.commit, fix.branch, fix.day
        )),
        created => {
            Exposure::Unknown(format!(
                "The seed does not record which lifecycle-agent build generated it{}; it has the fix only if that \
             build of {} includes {} ({})",
                created.map_or(String::new(), |d| match d == fix.day {
                    true => format!(
                        " (checked: it was created on {d}, the day the fix reached its branch)"
                    ),
                    false => format!(" (checked: it was created on {d}, after the fix)"),
                }),
                fix.branch,
                fix.commit,
                fix.day
            ))
        }
    }
}

fn fix_list(defect: &SeedDefect) -> String {
    defect
        .fixes
        .iter()
        .map(|f| format!("{} {}", f.branch, f.commit))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What to do about `defect` for a seed of `seed_version`.
fn remedy(defect: &SeedDefect, seed_version: &str) -> String {
    let seed = parse_minor_version(seed_version);
    let on_line = seed.and_then(|s| defect.fixes.iter().find(|f| f.line == s));
    let oldest = defect.fixes.iter().map(|f| f.line).min();
    match (seed, on_line, oldest) {
        (_, Some(f), _) => format!(
            "regenerate the seed with a lifecycle-agent of {} that includes {} ({})",
            f.branch, f.commit, f.day
        ),
        (Some(s), None, Some(first)) if s < first => format!(
            "no lifecycle-agent of {s} has it; a seed of {first} or later generated with a lifecycle-agent that \
             includes the fix ({}) does not have this defect",
            fix_list(defect)
        ),
        _ => format!(
            "regenerate the seed with a lifecycle-agent that includes the fix ({})",
            fix_list(defect)
        ),
    }
}

/// What `hostAgent: ibi` adds against the ca-trust race: `ibi-fetch-config.service` is ordered after
/// the trust update and before post-pivot, and systemd orders transitively.
const IBI_ORDERS_POST_PIVOT: &str = " With hostAgent: ibi the race is avoided on this host: ibi's \
ibi-fetch-config.service runs After=coreos-update-ca-trust.service and Before=installation-configuration.service, \
so post-pivot starts only after the trust update.";

/// One defect a seed has or may have, as `create image` says it: a line of what to do (a warning),
/// and the whole story (how ibi knows, the effect, the fix) for whoever asks (`--log-level info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefectWarning {
    pub short: String,
    pub detail: String,
}

/// The warnings `create image` prints for a seed: one per defect it has or may have.
/// `host_agent_ibi`: ibi's units are on the host.
pub fn defect_warnings(
    seed_version: &str,
    evidence: &SeedEvidence,
    host_agent_ibi: bool,
) -> Vec<DefectWarning> {
    SEED_DEFECTS
        .iter()
        .filter_map(|d| {
            let (verdict, why) = match exposure(d, seed_version, evidence) {
                Exposure::Clear => return None,
                Exposure::Affected(why) => ("has", why),
                Exposure::Unknown(why) => ("may have", why),
            };
            let avoided = host_agent_ibi && d.id == DefectId::CaTrustRace;
            let mitigation = if avoided { IBI_ORDERS_POST_PIVOT } else { "" };
            let todo = match avoided {
                true => "nothing to do: hostAgent: ibi avoids it on this host".to_string(),
                false => remedy(d, seed_version),
            };
            Some(DefectWarning {
                short: format!(
                    "seed defect ({}): the seed {seed_version} {verdict} it; {todo} (details: --log-level info, docs/create-image.md \"Known seed defects\")",
                    d.name
                ),
                detail: format!(
                    "seed defect ({}): the seed {seed_version} {verdict} it. {why}. Effect: {}. Fix: {}.{mitigation}",
                    d.name,
                    d.effect,
                    remedy(d, seed_version)
                ),
            })
        })
        .collect()
}

/// What ibi makes of a seed and a base live ISO together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pairing {
    Fine,
    Warn(String),
    /// Refused before anything is written: the host would be wiped and left without an install.
    Refuse(String),
}

/// The seed and the base ISO, as `create image` knows them.
pub struct PairingInputs<'a> {
    /// `seedVersion` (held equal to the seed's `seed_cluster_ocp_version` by the seed checks).
    pub seed_version: &'a str,
    /// The base ISO as messages name it (its volume ID and where it is).
    pub iso: &'a str,
    /// The RHEL major of the base ISO; `None` when its metadata does not say.
    pub iso_rhel: Option<u32>,
    /// `extraPartitionStart` as written to ibi-configuration.json (default `-40G`).
    pub extra_partition_start: &'a str,
    /// `hostAgent: lca`: the seed's own `lca-cli ibi` partitions the disk.
    pub host_agent_lca: bool,
    pub evidence: &'a SeedEvidence,
}

/// The alternative every refusal names: ibi's agent does not run the seed's lca-cli.
const IBI_AGENT_ALTERNATIVE: &str = "or set hostAgent: ibi (with hostAgentImage): ibi's own agent \
partitions the disk natively, without sgdisk or sfdisk, and is not affected";

/// Whether the seed's `lca-cli ibi` can run on the base ISO; the rule of docs/create-image.md.
pub fn live_iso_pairing(p: &PairingInputs<'_>) -> Pairing {
    let Some(seed) = parse_minor_version(p.seed_version) else {
        return Pairing::Fine;
    };
    let want = host_rhel(seed);
    let Some(rhel) = p.iso_rhel else {
        return Pairing::Warn(format!(
            "could not tell which RHEL the base ISO {} is (its volume ID is not rhcos-<version> or \
             scos-<version>); a {seed} seed needs a RHEL {want} live ISO (CoreOS stream {})",
            p.iso,
            coreos_stream(seed)
        ));
    };
    match (p.host_agent_lca, rhel, seed.major) {
        (true, 10, 4) => Pairing::Refuse(format!(
            "the seed is {} (seedVersion), whose own lca-cli makes the extra partition with sgdisk (every \
             lifecycle-agent release branch 4.16 to 4.22 does), and the base ISO {} is RHEL 10, which ships no \
             sgdisk: lca-cli ibi would fail at the extra partition after it has wiped the disk (inferred from \
             lifecycle-agent {}, not run). Use a RHEL 9 live ISO of the seed's release instead: leave out \
             --base-iso and --coreos-stream so ibi takes it from the seed's release payload, or pass the \
             stream that `openshift-install coreos print-stream-json` of {seed} prints; {IBI_AGENT_ALTERNATIVE}",
            p.seed_version, p.iso, SFDISK_SINCE.0
        )),
        (true, 10, _) => rhel10_lca(p),
        (_, got, _) if got != want => Pairing::Warn(format!(
            "the seed is {} (seedVersion), a RHEL {want} line whose openshift-install boots a RHEL {want} live \
             ISO (CoreOS stream {}), and the base ISO {} is RHEL {got}: this pairing is untested{}",
            p.seed_version,
            coreos_stream(seed),
            p.iso,
            if p.host_agent_lca {
                ""
            } else {
                " (hostAgent: ibi partitions natively, so no sgdisk/sfdisk failure applies)"
            }
        )),
        _ => Pairing::Fine,
    }
}

/// A 5.x seed whose lca-cli runs on a RHEL 10 live ISO: fine only if its lifecycle-agent has both
/// the sfdisk switch and, for a negative start, the fix of the negative start.
fn rhel10_lca(p: &PairingInputs<'_>) -> Pairing {
    let negative = p.extra_partition_start.trim_start().starts_with('-');
    let day = p.evidence.created_day();
    let (sfdisk, sfdisk_day) = SFDISK_SINCE;
    let (fixed, fixed_day) = NEGATIVE_START_FIXED;
    let regenerate =
        format!("regenerate the seed with a lifecycle-agent that includes {fixed} ({fixed_day})");
    match day {
        Some(d) if d < sfdisk_day => {
            return Pairing::Refuse(format!(
                "the seed {} was created on {d}, before lifecycle-agent's move from sgdisk to sfdisk ({sfdisk}) \
                 reached main on {sfdisk_day}, so its lca-cli calls sgdisk, which the RHEL 10 base ISO {} does not \
                 ship: lca-cli ibi would fail at the extra partition after it has wiped the disk. Instead, \
                 {regenerate}, or use a RHEL 9 live ISO, which ships sgdisk (--coreos-stream for rhel-9, or \
                 --base-iso; an untested pairing for a 5.x seed), {IBI_AGENT_ALTERNATIVE}",
                p.seed_version, p.iso
            ));
        }
        Some(d) if negative && d < fixed_day => {
            return Pairing::Refuse(format!(
                "the seed {} was created on {d}, before lifecycle-agent {fixed} ({fixed_day}) fixed a negative \
                 extraPartitionStart under sfdisk; every lca-cli built before it fails on RHEL 10 with the start \
                 {} (builds since {sfdisk} compute a wrong start, older ones lack sgdisk on the base ISO {}). \
                 Instead, {regenerate}, {IBI_AGENT_ALTERNATIVE}",
                p.seed_version, p.extra_partition_start, p.iso
            ));
        }
        _ => {}
    }
    let created = day.map_or(String::new(), |d| format!(" (checked: created on {d})"));
    let start = if negative {
        format!(
            "builds between {sfdisk} ({sfdisk_day}) and {fixed} ({fixed_day}) fail on a negative \
             extraPartitionStart such as {}, and ",
            p.extra_partition_start
        )
    } else {
        String::new()
    };
    Pairing::Warn(format!(
        "could not check the seed {} against the RHEL 10 base ISO {}: the seed does not record which \
         lifecycle-agent build generated it{created}; {start}builds before {sfdisk} call sgdisk, which RHEL 10 \
         does not ship. If its lifecycle-agent predates {fixed}, {regenerate}, {IBI_AGENT_ALTERNATIVE}",
        p.seed_version, p.iso
    ))
}

/// The seed lines as docs/create-image.md shows them.
#[cfg(test)]
pub fn seed_lines_table() -> String {
    let mut s = String::from(
        "| seed line | lifecycle-agent branch | host and live ISO | `lca-cli ibi` makes the extra partition with | ca-trust race fixed in |\n|---|---|---|---|---|\n",
    );
    let fixed = |d: &SeedDefect, line: MinorVersion| {
        d.fixes
            .iter()
            .find(|f| f.line == line)
            .map_or("not fixed".to_string(), |f| {
                format!("{} ({})", f.commit, f.day)
            })
    };
    for l in SEED_LINES {
        s.push_str(&format!(
            "| {} | `{}` | RHEL {} (`{}`) | {} | {} |\n",
            l.line,
            l.lca_branch,
            host_rhel(l.line),
            coreos_stream(l.line),
            l.partitions,
            fixed(&CA_TRUST_RACE, l.line)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(created: Option<&str>, unit: Option<bool>) -> SeedEvidence {
        SeedEvidence {
            created: created.map(str::to_string),
            post_pivot_after_ca_trust: unit,
        }
    }

    fn pairing(
        seed: &str,
        rhel: Option<u32>,
        start: &str,
        lca: bool,
        created: Option<&str>,
    ) -> Pairing {
        live_iso_pairing(&PairingInputs {
            seed_version: seed,
            iso: "rhcos-10.2.20260715-0 (/isos/live.iso)",
            iso_rhel: rhel,
            extra_partition_start: start,
            host_agent_lca: lca,
            evidence: &evidence(created, None),
        })
    }

    #[test]
    fn the_live_iso_follows_the_installers_major_version_rule() {
        let cases = [
            ("4.16.0", 9, "rhel-9"),
            ("4.22.3", 9, "rhel-9"),
            ("4.23.0", 9, "rhel-9"),
            ("5.0.0", 10, "rhel-10"),
            ("5.1.0-ec.1", 10, "rhel-10"),
        ];
        for (text, rhel, stream) in cases {
            let line = parse_minor_version(text).unwrap();
            assert_eq!(
                (host_rhel(line), coreos_stream(line)),
                (rhel, stream),
                "{text}"
            );
        }
    }

    #[test]
    fn defects_by_line_and_evidence() {
        use Exposure::*;
        let none = evidence(None, None);
        let affected = |e: Exposure| matches!(e, Affected(_));
        let unknown = |e: Exposure| matches!(e, Unknown(_));
        // No branch below 4.20 has the ca-trust fix.
        assert!(affected(exposure(&CA_TRUST_RACE, "4.19.0", &none)));
        // Fixed lines: a seed created before the fix has it; a later one cannot be told.
        let early = evidence(Some("2026-06-01T10:00:00Z"), None);
        let late = evidence(Some("2026-08-01T10:00:00Z"), None);
        assert!(affected(exposure(&CA_TRUST_RACE, "4.22.1", &early)));
        assert!(unknown(exposure(&CA_TRUST_RACE, "4.22.1", &late)));
        assert!(unknown(exposure(&CA_TRUST_RACE, "4.23.0", &none)));
        // The seed's own unit decides the ca-trust race whatever the version.
        assert_eq!(
            exposure(&CA_TRUST_RACE, "4.18.0", &evidence(None, Some(true))),
            Clear
        );
        assert!(affected(exposure(
            &CA_TRUST_RACE,
            "5.0.0",
            &evidence(Some("2026-08-20T00:00:00Z"), Some(false))
        )));
        assert!(unknown(exposure(&CA_TRUST_RACE, "latest", &none)));
    }

    #[test]
    fn a_warning_names_the_defect_the_evidence_its_effect_and_the_fix() {
        let all = defect_warnings("4.21.0", &evidence(None, Some(false)), false);
        let w: Vec<&String> = all.iter().map(|d| &d.detail).collect();
        assert_eq!(w.len(), 1, "{w:#?}");
        assert!(
            w[0].starts_with("seed defect (ca-trust race of installation-configuration.service): the seed 4.21.0 has it. Checked: the seed's own /etc/systemd/system/installation-configuration.service has no After=coreos-update-ca-trust.service. Effect: "),
            "{}",
            w[0]
        );
        assert!(
            w[0].ends_with("Fix: regenerate the seed with a lifecycle-agent of release-4.21 that includes 729153a6b (2026-07-16)."),
            "{}",
            w[0]
        );
        // Issue 34 item 13: the warning itself is what to do, one line.
        assert_eq!(
            all[0].short,
            "seed defect (ca-trust race of installation-configuration.service): the seed 4.21.0 has it; regenerate the seed with a lifecycle-agent of release-4.21 that includes 729153a6b (2026-07-16) (details: --log-level info, docs/create-image.md \"Known seed defects\")"
        );
        let w = defect_warnings("4.21.0", &evidence(None, Some(false)), true);
        assert!(
            w[0].detail
                .ends_with("so post-pivot starts only after the trust update."),
            "{}",
            w[0].detail
        );
        assert!(
            w[0].short
                .contains("; nothing to do: hostAgent: ibi avoids it on this host")
        );
        // Issue 34 item 11: no slow-CRI-O warning for any seed (it is not a defect of image-based
        // installs); item 12: a seed created on the day the fix reached its branch "may have" it.
        for version in ["4.16.0", "4.21.0", "5.0.0"] {
            let w = defect_warnings(version, &evidence(None, None), false);
            assert!(!w.iter().any(|w| w.detail.contains("CRI-O")), "{w:#?}");
        }
        let w = defect_warnings(
            "4.20.3",
            &evidence(Some("2026-07-17T09:00:00Z"), None),
            false,
        );
        assert!(
            w[0].detail.contains("the seed 4.20.3 may have it. The seed does not record which lifecycle-agent build generated it (checked: it was created on 2026-07-17, the day the fix reached its branch)"),
            "{:?}",
            w[0]
        );
        let w = defect_warnings(
            "4.20.3",
            &evidence(Some("2026-07-16T09:00:00Z"), None),
            false,
        );
        assert!(
            w[0].detail.contains("the seed 4.20.3 has it. The seed image was created on 2026-07-16, before the fix (85b360bbd) reached release-4.20 on 2026-07-17"),
            "{:?}",
            w[0]
        );
    }

    #[test]
    fn a_4x_seed_on_a_rhel_10_live_iso_is_refused_naming_both_and_the_way_out() {
        let Pairing::Refuse(msg) = pairing("4.21.0", Some(10), "-40G", true, None) else {
            panic!("not refused");
        };
        for part in [
            "the seed is 4.21.0 (seedVersion)",
            "sgdisk",
            "the base ISO rhcos-10.2.20260715-0 (/isos/live.iso) is RHEL 10",
            "after it has wiped the disk",
            "leave out --base-iso and --coreos-stream",
            "hostAgent: ibi",
            "not affected",
        ] {
            assert!(msg.contains(part), "{part}: {msg}");
        }
        // hostAgent: ibi does not run the seed's lca-cli: a warning only.
        assert!(matches!(
            pairing("4.21.0", Some(10), "-40G", false, None),
            Pairing::Warn(_)
        ));
        assert_eq!(
            pairing("4.21.0", Some(9), "-40G", true, None),
            Pairing::Fine
        );
    }

    #[test]
    fn a_5x_seed_older_than_the_negative_start_fix_is_refused_with_a_negative_start() {
        let refuse = |p: Pairing| matches!(p, Pairing::Refuse(_));
        let warn = |p: Pairing| matches!(p, Pairing::Warn(_));
        // Before the sfdisk switch: sgdisk, whatever the start.
        assert!(refuse(pairing(
            "5.0.0",
            Some(10),
            "1000000",
            true,
            Some("2026-05-30T00:00:00Z")
        )));
        // In the window: a negative start fails, a positive one cannot be told.
        let Pairing::Refuse(msg) = pairing(
            "5.0.0",
            Some(10),
            "-40G",
            true,
            Some("2026-07-01T00:00:00Z"),
        ) else {
            panic!("not refused");
        };
        assert!(msg.contains("created on 2026-07-01, before lifecycle-agent 66bd55bb4 (2026-07-22) fixed a negative extraPartitionStart") && msg.contains("-40G") && msg.contains("hostAgent: ibi"), "{msg}");
        assert!(warn(pairing(
            "5.0.0",
            Some(10),
            "1000000",
            true,
            Some("2026-07-01T00:00:00Z")
        )));
        // Later or unknown: what could not be checked is said.
        let Pairing::Warn(msg) = pairing(
            "5.0.0",
            Some(10),
            "-40G",
            true,
            Some("2026-08-01T00:00:00Z"),
        ) else {
            panic!("no warning");
        };
        assert!(msg.contains("does not record which lifecycle-agent build generated it (checked: created on 2026-08-01)"), "{msg}");
        assert_eq!(
            pairing("5.0.0", Some(10), "-40G", false, None),
            Pairing::Fine
        );
        assert!(warn(pairing("5.0.0", Some(9), "-40G", true, None)));
        assert!(warn(pairing("5.0.0", None, "-40G", true, None)));
    }

    #[test]
    fn the_docs_hold_the_seed_lines() {
        let docs = include_str!("../../docs/create-image.md");
        let table = seed_lines_table();
        assert!(
            docs.contains(&table),
            "docs/create-image.md must hold this table verbatim:\n{table}"
        );
    }
}
