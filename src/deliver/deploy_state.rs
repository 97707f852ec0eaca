//! The record `ibi deploy` keeps of each site of a fleet, so a re-run skips what is done and `ibi status`
//! can show it: one JSON file per site, `BASE/.ibi/deploy/<site>.json`, rewritten atomically (temp file,
//! fsync, rename) at every change, so a killed deploy loses nothing it recorded and parallel sites never
//! write the same file. The format is fixed here, before deploy exists, so both sides agree on it:
//!
//! ```json
//! {"version": 1, "site": "a17",
//!  "bmc": {"address": "https://10.0.17.9", "system": "/redfish/v1/Systems/1",
//!          "uuid": "27946b59-9e44-4fa7-8e91-f3527a1ef094"},
//!  "phases": {
//!    "factory": {"state": "done", "step": "eject", "started": 1764000000, "updated": 1764000900,
//!                "finished": 1764000900, "bytesServed": 1073741824, "booted": 1764000060},
//!    "site": {"state": "failed", "step": "watch", "started": 1764090000, "updated": 1764093600,
//!             "error": "the cluster did not become ready within 60 minutes"}}}
//! ```
//!
//! `bmc.uuid` is the System's Redfish `UUID`, which is also the host's DMI product UUID: the key that
//! ties a site to the reports its host sends (`contract::host_report`). Times are Unix seconds. `state`
//! uses the agent status words (`running`, `done`, `failed`); `step` is deploy's own (free text, e.g.
//! `boot`, `wait-report`, `eject`, `watch`). Errors must be written without secrets (scrubbed of
//! passwords, tokens and image URLs) like every other output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::config_image::marker::Expected;
use crate::contract::agent_status::RunState;
use crate::util::fs::{
    Clobber, InputError, SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir, read_input_file,
    write_atomic,
};

/// Under the fleet's base directory.
pub const DEPLOY_STATE_DIR: &str = ".ibi/deploy";
/// deploy's lock on a BASE (one deploy at a time), held while it runs; `ibi status` reads its
/// holder.
pub const LOCK_FILE: &str = ".ibi/deploy.lock";
/// The format version; a file with another one is refused, not guessed at.
pub const DEPLOY_STATE_VERSION: u32 = 1;
const MAX_STATE_FILE: u64 = 1 << 20;

/// The two boots of image-based installation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Booted from the installation ISO: RHCOS written, the seed restored.
    Factory,
    /// Booted from disk with the configuration ISO: the cluster reconfigured.
    Site,
    /// Both in one: booted once from the host's own installation ISO carrying its site's
    /// configuration, then from disk with no media.
    Oneshot,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Factory => "factory",
            Phase::Site => "site",
            Phase::Oneshot => "oneshot",
        }
    }
}

/// The site's host, as its BMC shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BmcSystem {
    /// The BMC's address, as in the inventory.
    pub address: String,
    /// The System's path (`/redfish/v1/Systems/1`), once found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The System's `UUID`, lower case, once read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// Where one phase of one site stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PhaseRecord {
    pub state: RunState,
    /// Deploy's step within the phase.
    pub step: String,
    pub started: u64,
    pub updated: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Bytes of ISO the server sent to this site's BMC in this phase.
    #[serde(default)]
    pub bytes_served: u64,
    /// When deploy was about to ask the BMC to power the host on for this phase (saved before the
    /// request): from then on the host may be booted, so a re-run never boots it again unless told
    /// to (`--redo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub booted: Option<u64>,
    /// One-shot: when deploy was about to power the host on from its disk (saved before the
    /// request), after the install; a re-run then only watches the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_booted: Option<u64>,
    /// Site and one-shot phases: what the host's medium carried when deploy booted it (the watch
    /// marker's `builtAt`, the `clusterId`), saved before the boot: its cluster is judged by that,
    /// whatever the site's configuration ISO holds by the time a re-run watches again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shipped: Option<Expected>,
}

impl PhaseRecord {
    /// A phase begun at `at` (running, at `step`), nothing else known yet.
    pub fn begun(step: &str, at: u64) -> PhaseRecord {
        PhaseRecord {
            state: RunState::Running,
            step: step.into(),
            started: at,
            updated: at,
            finished: None,
            error: None,
            bytes_served: 0,
            booted: None,
            disk_booted: None,
            shipped: None,
        }
    }
}

/// One site's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SiteDeployState {
    pub version: u32,
    pub site: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bmc: Option<BmcSystem>,
    #[serde(default)]
    pub phases: BTreeMap<Phase, PhaseRecord>,
}

impl SiteDeployState {
    /// A site deploy has not touched yet.
    pub fn new(site: &str) -> SiteDeployState {
        SiteDeployState {
            version: DEPLOY_STATE_VERSION,
            site: site.to_string(),
            bmc: None,
            phases: BTreeMap::new(),
        }
    }

    /// The phase's record, unless a later install ended it: see [`SiteDeployState::superseded`].
    /// Every reader of a phase's record (deploy's resume, its pre-flight, `ibi status`) goes
    /// through this, so all say the same of a host that was installed again.
    pub fn live(&self, phase: Phase) -> Option<&PhaseRecord> {
        let rec = self.phases.get(&phase)?;
        self.superseded(phase).is_none().then_some(rec)
    }

    /// The phases recorded and not superseded, in order.
    pub fn live_phases(&self) -> impl Iterator<Item = (Phase, &PhaseRecord)> {
        self.phases
            .iter()
            .filter(|(p, _)| self.superseded(**p).is_none())
            .map(|(p, r)| (*p, r))
    }

    /// The rule of a host installed again: a new boot of an install (the factory phase, or a
    /// one-shot) ends what every other phase recorded before it. A record that began before that
    /// boot counts as not started: the phase that superseded it, and its boot time. The install's
    /// boot is `booted`, saved before the power-on: a `--redo` that never powered the host on left
    /// it as it was.
    pub fn superseded(&self, phase: Phase) -> Option<(Phase, u64)> {
        let rec = self.phases.get(&phase)?;
        [Phase::Factory, Phase::Oneshot]
            .into_iter()
            .filter(|p| *p != phase)
            .filter_map(|p| Some((p, self.phases.get(&p)?.booted?)))
            .filter(|(_, booted)| *booted > rec.started)
            .max_by_key(|(_, booted)| *booted)
    }
}

fn state_path(base: &Path, site: &str) -> PathBuf {
    base.join(DEPLOY_STATE_DIR).join(format!("{site}.json"))
}

/// Writes `state` to `BASE/.ibi/deploy/<site>.json` atomically (0600: it names BMCs).
pub fn save_site(base: &Path, state: &SiteDeployState) -> Result<()> {
    let dir = base.join(DEPLOY_STATE_DIR);
    ensure_dir(&base.join(".ibi"), SECRET_DIR_MODE)?;
    ensure_dir(&dir, SECRET_DIR_MODE)?;
    let mut json = serde_json::to_vec_pretty(state).context("encoding the deploy state")?;
    json.push(b'\n');
    let path = state_path(base, &state.site);
    write_atomic(&path, &json, SECRET_FILE_MODE, Clobber::Replace)
        .with_context(|| format!("saving the deploy state to {}", path.display()))
}

/// The site's record, if deploy wrote one.
pub fn load_site(base: &Path, site: &str) -> Result<Option<SiteDeployState>> {
    let path = state_path(base, site);
    if !path.exists() {
        return Ok(None);
    }
    read_state(&path).map(Some)
}

/// The sites whose cluster deploy configured (or began to: their site or one-shot phase booted the
/// host, as [`SiteDeployState::live`] counts it), each with a line saying how deploy left it. A
/// damaged record is not such a site (`ibi status` names it).
pub fn configured_sites(base: &Path) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for state in load_all_checked(base)?.into_iter().flatten() {
        let rec = [Phase::Oneshot, Phase::Site]
            .into_iter()
            .find_map(|p| Some((p, state.live(p)?)).filter(|(_, r)| r.booted.is_some()));
        if let Some((phase, r)) = rec {
            let state_word = match r.state {
                RunState::Done => "done",
                RunState::Running => "under way",
                RunState::Failed => "failed, after its boot",
            };
            out.push((
                state.site.clone(),
                format!("deploy's {} phase {state_word}", phase.name()),
            ));
        }
    }
    Ok(out)
}

/// A site's record that could not be read: which site (from the file name), where, and why (never
/// the file's content).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedRecord {
    pub site: String,
    pub path: PathBuf,
    pub problem: RecordDamage,
}

/// What is wrong with a site's record, without its content (a damaged file may hold anything).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordDamage {
    #[error("not a regular file (a {0})")]
    NotAFile(String),
    #[error("{size} bytes, more than a record's {limit}-byte limit")]
    TooBig { size: u64, limit: u64 },
    #[error("cannot be read ({0})")]
    Unreadable(String),
    #[error("cut short (it ends at line {line}, column {column})")]
    CutShort { line: usize, column: usize },
    #[error("not a deploy state (line {line}, column {column}: {category:?} error)")]
    NotAState {
        line: usize,
        column: usize,
        category: serde_json::error::Category,
    },
    #[error("deploy state version {0}, this ibi reads version {DEPLOY_STATE_VERSION}")]
    Version(u32),
    #[error("names another site than its file name does")]
    OtherSite,
}

/// Every site's record, by site name, each read on its own: a damaged one is listed as such and
/// hides none of the others. An error only when the directory itself cannot be listed.
pub fn load_all_checked(base: &Path) -> Result<Vec<Result<SiteDeployState, DamagedRecord>>> {
    let dir = base.join(DEPLOY_STATE_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    let mut states = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // Temp files of an atomic write in progress start with a dot.
        let Some(site) = name
            .strip_suffix(".json")
            .filter(|_| !name.starts_with('.'))
        else {
            continue;
        };
        let path = entry.path();
        states.push(check_state(&path, site).map_err(|problem| DamagedRecord {
            site: site.to_string(),
            path,
            problem,
        }));
    }
    let site = |r: &Result<SiteDeployState, DamagedRecord>| match r {
        Ok(s) => s.site.clone(),
        Err(d) => d.site.clone(),
    };
    states.sort_by_cached_key(site);
    Ok(states)
}

fn read_state(path: &Path) -> Result<SiteDeployState> {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    check_state(path, stem.as_deref().unwrap_or_default())
        .map_err(|problem| anyhow::anyhow!("{}: {problem}", path.display()))
}

/// The record at `path`, which must be `site`'s, or what is wrong with it.
fn check_state(path: &Path, site: &str) -> std::result::Result<SiteDeployState, RecordDamage> {
    let bytes = read_input_file(path, MAX_STATE_FILE).map_err(|e| match e {
        InputError::NotAFile { kind, .. } => RecordDamage::NotAFile(kind.to_string()),
        InputError::TooBig { size, limit, .. } => RecordDamage::TooBig { size, limit },
        InputError::Io { source, .. } => RecordDamage::Unreadable(source.to_string()),
    })?;
    let state: SiteDeployState = serde_json::from_slice(&bytes).map_err(|e| {
        let (line, column) = (e.line(), e.column());
        match e.classify() {
            serde_json::error::Category::Eof => RecordDamage::CutShort { line, column },
            category => RecordDamage::NotAState {
                line,
                column,
                category,
            },
        }
    })?;
    if state.version != DEPLOY_STATE_VERSION {
        return Err(RecordDamage::Version(state.version));
    }
    if state.site != site {
        return Err(RecordDamage::OtherSite);
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every site's record, by site name; the first damaged record is an error (what the tests
    /// compare; ibi itself reads past a damaged record with [`load_all_checked`]).
    fn load_all(base: &Path) -> Result<Vec<SiteDeployState>> {
        load_all_checked(base)?
            .into_iter()
            .map(|r| r.map_err(|d| anyhow::anyhow!("{}: {}", d.path.display(), d.problem)))
            .collect()
    }

    fn record(state: RunState, step: &str, t: u64) -> PhaseRecord {
        PhaseRecord {
            state,
            ..PhaseRecord::begun(step, t)
        }
    }

    #[test]
    fn round_trips_privately_and_in_site_order() {
        let d = tempfile::tempdir().unwrap();
        assert!(load_all(d.path()).unwrap().is_empty());
        let mut b = SiteDeployState::new("b18");
        b.bmc = Some(BmcSystem {
            address: "https://10.0.18.9".into(),
            system: Some("/redfish/v1/Systems/1".into()),
            uuid: Some("27946b59-9e44-4fa7-8e91-f3527a1ef094".into()),
        });
        b.phases
            .insert(Phase::Factory, record(RunState::Done, "eject", 10));
        b.phases
            .insert(Phase::Site, record(RunState::Running, "watch", 20));
        save_site(d.path(), &b).unwrap();
        save_site(d.path(), &SiteDeployState::new("a17")).unwrap();
        let all = load_all(d.path()).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].site.as_str(), all[1].clone()), ("a17", b.clone()));
        assert_eq!(load_site(d.path(), "b18").unwrap(), Some(b));
        assert_eq!(load_site(d.path(), "c19").unwrap(), None);
        use std::os::unix::fs::MetadataExt;
        let mode = std::fs::metadata(d.path().join(".ibi/deploy/b18.json"))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_new_install_boot_ends_what_other_phases_recorded_before_it() {
        let booted = |mut r: PhaseRecord, t: u64| {
            r.booted = Some(t);
            r
        };
        let mut s = SiteDeployState::new("a17");
        s.phases.insert(
            Phase::Factory,
            booted(record(RunState::Done, "eject", 10), 11),
        );
        s.phases
            .insert(Phase::Site, record(RunState::Done, "eject", 20));
        assert!(s.live(Phase::Site).is_some() && s.live(Phase::Factory).is_some());
        // `--redo` of the factory, begun but never powered on: the host is as it was.
        s.phases
            .insert(Phase::Factory, record(RunState::Failed, "boot", 30));
        assert!(s.live(Phase::Site).is_some(), "not booted: nothing ended");
        // Booted again: the site phase recorded before no longer counts.
        s.phases.insert(
            Phase::Factory,
            booted(record(RunState::Done, "eject", 30), 31),
        );
        assert_eq!(s.superseded(Phase::Site), Some((Phase::Factory, 31)));
        assert!(s.live(Phase::Site).is_none());
        let live: Vec<Phase> = s.live_phases().map(|(p, _)| p).collect();
        assert_eq!(live, [Phase::Factory]);
        // A site phase begun after it counts again.
        s.phases
            .insert(Phase::Site, record(RunState::Running, "watch", 40));
        assert!(s.live(Phase::Site).is_some());
        // A one-shot booted later ends both; a factory booted after that ends the one-shot.
        s.phases.insert(
            Phase::Oneshot,
            booted(record(RunState::Done, "watch", 50), 51),
        );
        assert_eq!(s.superseded(Phase::Factory), Some((Phase::Oneshot, 51)));
        assert_eq!(s.superseded(Phase::Site), Some((Phase::Oneshot, 51)));
        assert_eq!(s.superseded(Phase::Oneshot), None);
        s.phases.insert(
            Phase::Factory,
            booted(record(RunState::Running, "wait-report", 60), 61),
        );
        assert_eq!(s.superseded(Phase::Oneshot), Some((Phase::Factory, 61)));
        assert_eq!(s.superseded(Phase::Factory), None);
    }

    #[test]
    fn the_documented_example_parses() {
        let doc = include_str!("deploy_state.rs")
            .split("//! ```json\n")
            .nth(1)
            .and_then(|s| s.split("//! ```").next())
            .unwrap()
            .lines()
            .map(|l| l.trim_start_matches("//!"))
            .collect::<String>();
        let s: SiteDeployState = serde_json::from_str(&doc).unwrap();
        assert_eq!(s.phases[&Phase::Factory].bytes_served, 1 << 30);
        assert_eq!(s.phases[&Phase::Site].state, RunState::Failed);
    }

    #[test]
    fn refuses_other_versions_misnamed_files_and_garbage() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join(DEPLOY_STATE_DIR);
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            (r#"{"version":2,"site":"a"}"#, "deploy state version 2"),
            (
                r#"{"version":1,"site":"b"}"#,
                "names another site than its file name",
            ),
            ("{", "cut short (it ends at line 1, column 1)"),
            ("", "cut short (it ends at line 1, column 0)"),
            ("{]", "not a deploy state (line 1, column 2: Syntax error)"),
        ];
        for (text, want) in cases {
            std::fs::write(dir.join("a.json"), text).unwrap();
            let err = format!("{:#}", load_all(d.path()).unwrap_err());
            assert!(err.contains(want), "{err}");
            let err = format!("{:#}", load_site(d.path(), "a").unwrap_err());
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn a_damaged_record_hides_none_of_the_others() {
        let d = tempfile::tempdir().unwrap();
        for s in ["a17", "c19"] {
            save_site(d.path(), &SiteDeployState::new(s)).unwrap();
        }
        let dir = d.path().join(DEPLOY_STATE_DIR);
        std::fs::write(dir.join("b18.json"), r#"{"version":1,"site":"MARKER"#).unwrap();
        std::fs::create_dir(dir.join("d20.json")).unwrap();
        std::fs::write(dir.join(".a17.json.tmp"), "{").unwrap();
        let all = load_all_checked(d.path()).unwrap();
        let problems: Vec<String> = all
            .iter()
            .map(|r| {
                r.as_ref()
                    .err()
                    .map(|e| e.problem.to_string())
                    .unwrap_or_default()
            })
            .collect();
        let got: Vec<std::result::Result<&str, (&str, &str)>> = all
            .iter()
            .zip(&problems)
            .map(|(r, problem)| match r {
                Ok(s) => Ok(s.site.as_str()),
                Err(e) => Err((e.site.as_str(), problem.as_str())),
            })
            .collect();
        assert_eq!(
            got,
            [
                Ok("a17"),
                Err(("b18", "cut short (it ends at line 1, column 27)")),
                Ok("c19"),
                Err(("d20", "not a regular file (a directory)")),
            ]
        );
        assert_eq!(all[1].as_ref().unwrap_err().path, dir.join("b18.json"));
        assert!(load_all(d.path()).is_err());
    }
}
