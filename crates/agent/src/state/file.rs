//! The state file: which steps of one install finished, pinned to the configuration's sha256, written durably after every change; the steps themselves, in lca-cli's order.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::prepare_config::ConfigFingerprint;
use util::fs::{Clobber, write_atomic};

/// The state file's format version; a file with another version is refused, not guessed at.
const STATE_VERSION: u32 = 1;
/// The state file is only read by ibi itself, but it names the disk's progress: keep it private.
const STATE_FILE_MODE: u32 = 0o600;

/// One step of `ibi agent install`, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    DiskCleanup,
    WriteRhcos,
    CreateExtraPartition,
    MkfsExtraPartition,
    GrowRoot,
    MountTargets,
    /// Stream the seed once: ostree.tgz into a work repo, var.tgz into the new stateroot, etc.tgz
    /// staged, the small documents saved beside the state file.
    FetchSeed,
    /// Pull the seed commit into the target repo and deploy it with the seed's kernel arguments.
    Deploy,
    /// Move the staged etc.tgz over the deployment's `/etc`, then apply etc.deletions.
    RestoreEtc,
    Precache,
    /// One-shot site install: the site's configuration tree from the live system
    /// (`contract::config_iso::LIVE_SITE_TREE`) into the stateroot's `var/opt/openshift`, atomically.
    WriteSiteConfig,
    PostScript,
    UndeployRhcos,
    InstallHostUnit,
    Shutdown,
}

impl Step {
    /// Every step, in order.
    pub const ALL: [Step; 15] = [
        Step::DiskCleanup,
        Step::WriteRhcos,
        Step::CreateExtraPartition,
        Step::MkfsExtraPartition,
        Step::GrowRoot,
        Step::MountTargets,
        Step::FetchSeed,
        Step::Deploy,
        Step::RestoreEtc,
        Step::Precache,
        Step::WriteSiteConfig,
        Step::PostScript,
        Step::UndeployRhcos,
        Step::InstallHostUnit,
        Step::Shutdown,
    ];

    /// The stable name used in the state file, the status file and the journal.
    pub fn name(self) -> &'static str {
        match self {
            Step::DiskCleanup => "disk-cleanup",
            Step::WriteRhcos => "write-rhcos",
            Step::CreateExtraPartition => "create-extra-partition",
            Step::MkfsExtraPartition => "mkfs-extra-partition",
            Step::GrowRoot => "grow-root",
            Step::MountTargets => "mount-targets",
            Step::FetchSeed => "fetch-seed",
            Step::Deploy => "deploy",
            Step::RestoreEtc => "restore-etc",
            Step::Precache => "precache",
            Step::WriteSiteConfig => "write-site-config",
            Step::PostScript => "post-script",
            Step::UndeployRhcos => "undeploy-rhcos",
            Step::InstallHostUnit => "install-host-unit",
            Step::Shutdown => "shutdown",
        }
    }

    /// The step called `name`, if any.
    pub(crate) fn from_name(name: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Steps that erase what is on the disk: run again after later steps, they would destroy restored work.
    pub(crate) fn is_destructive(self) -> bool {
        matches!(
            self,
            Step::DiskCleanup
                | Step::WriteRhcos
                | Step::CreateExtraPartition
                | Step::MkfsExtraPartition
        )
    }

    /// Steps whose effect does not outlive the process or a reboot (mounts), so a resumed run repeats them
    /// even when recorded done: later steps need the targets mounted again.
    pub(crate) fn reruns_on_resume(self) -> bool {
        matches!(self, Step::MountTargets)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why the state file refuses a run; callers branch on these to tell the user what to do.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StateError {
    #[error(
        "{path} records an install with a different ibi-configuration (sha256 {recorded}, now {current}); \
         the disk may be half-written with the other configuration: restore that file, or remove {path} \
         to start over from a disk wipe"
    )]
    FingerprintMismatch {
        path: PathBuf,
        recorded: ConfigFingerprint,
        current: ConfigFingerprint,
    },
    #[error(
        "{path} says {later} is done but {step} is not; refusing to run the destructive step {step} on a \
         disk that already holds later work (the state file was edited or damaged)"
    )]
    DestructiveAfterProgress {
        path: PathBuf,
        step: Step,
        later: Step,
    },
    #[error("{path} names an unknown step {name:?} (written by another ibi version?)")]
    UnknownStep { path: PathBuf, name: String },
    #[error("{path} has state version {found}, this ibi reads version {STATE_VERSION}")]
    Version { path: PathBuf, found: u32 },
}

/// The state file's JSON form.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StateRecord {
    version: u32,
    config_fingerprint: ConfigFingerprint,
    /// Names of finished steps, in step order.
    done: Vec<String>,
    /// The install ended (targets unmounted, no state left on the disk): a further run does nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    finished: bool,
}

/// The finished steps of one install, persisted at `path` after every change.
#[derive(Debug)]
pub(crate) struct StateFile {
    path: PathBuf,
    fingerprint: ConfigFingerprint,
    done: BTreeSet<Step>,
    finished: bool,
}

impl StateFile {
    /// Loads the state at `path`, or starts (and writes) a new one. A state recorded for another
    /// configuration is refused: resuming it would mix two installs on one disk.
    pub(crate) fn load_or_new(path: &Path, fingerprint: ConfigFingerprint) -> Result<StateFile> {
        match std::fs::read(path) {
            Ok(bytes) => Self::from_bytes(path, &bytes, fingerprint),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let state = StateFile {
                    path: path.to_path_buf(),
                    fingerprint,
                    done: BTreeSet::new(),
                    finished: false,
                };
                // Written at once so the configuration is pinned even if the first step never finishes.
                state.save()?;
                Ok(state)
            }
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn from_bytes(path: &Path, bytes: &[u8], current: ConfigFingerprint) -> Result<StateFile> {
        let record: StateRecord = serde_json::from_slice(bytes)
            .with_context(|| format!("parsing the state file {}", path.display()))?;
        let path_buf = path.to_path_buf();
        if record.version != STATE_VERSION {
            return Err(StateError::Version {
                path: path_buf,
                found: record.version,
            }
            .into());
        }
        if record.config_fingerprint != current {
            return Err(StateError::FingerprintMismatch {
                path: path_buf,
                recorded: record.config_fingerprint,
                current,
            }
            .into());
        }
        let done = parse_done(&path_buf, &record.done)?;
        Ok(StateFile {
            path: path_buf,
            fingerprint: current,
            done,
            finished: record.finished,
        })
    }

    /// Where the state lives.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether `step` finished in this or an earlier run.
    pub(crate) fn is_done(&self, step: Step) -> bool {
        self.done.contains(&step)
    }

    /// Whether the whole install ended in this or an earlier run.
    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }

    /// Records that the install ended, durably.
    pub(crate) fn mark_finished(&mut self) -> Result<()> {
        self.finished = true;
        self.save()
    }

    /// The finished steps, in order.
    pub(crate) fn done_steps(&self) -> impl Iterator<Item = Step> + '_ {
        self.done.iter().copied()
    }

    /// Records `step` as finished and makes that durable (temp file, fsync, rename, directory fsync)
    /// before returning, so a power loss right after never forgets it.
    pub(crate) fn mark_done(&mut self, step: Step) -> Result<()> {
        if self.done.insert(step)
            && let Err(e) = self.save()
        {
            self.done.remove(&step);
            return Err(e);
        }
        Ok(())
    }

    /// Moves the state to `new_path`: written durably there first, then the old file removed. The live
    /// ISO's `/var/tmp` lives in RAM, so a state kept there survives a crash of the agent but not a power
    /// loss; once the target disk is mounted the caller moves the state onto it.
    pub(crate) fn relocate(&mut self, new_path: &Path) -> Result<()> {
        if new_path == self.path {
            return Ok(());
        }
        let old = std::mem::replace(&mut self.path, new_path.to_path_buf());
        if let Err(e) = self.save() {
            self.path = old;
            return Err(e);
        }
        match std::fs::remove_file(&old) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing the old state file {}", old.display()))
            }
            _ => Ok(()),
        }
    }

    /// The guard on destructive steps: `step` may not run when any later step is recorded done.
    ///
    /// Steps run strictly in order and each is recorded only after it succeeds, and the configuration
    /// (hence the plan of steps) is pinned by its fingerprint, so the recorded steps are always a prefix of
    /// the plan: a destructive step is never pending while a later step is done. If the file says so anyway
    /// it was edited or damaged, and the disk may hold the restored seed; wiping it on that word would be
    /// the one unrecoverable mistake, so this stops instead of guessing.
    pub(crate) fn check_may_run(&self, step: Step) -> Result<(), StateError> {
        if !step.is_destructive() {
            return Ok(());
        }
        match self.done.range(step..).find(|s| **s != step) {
            Some(&later) => Err(StateError::DestructiveAfterProgress {
                path: self.path.clone(),
                step,
                later,
            }),
            None => Ok(()),
        }
    }

    fn save(&self) -> Result<()> {
        let record = StateRecord {
            version: STATE_VERSION,
            config_fingerprint: self.fingerprint.clone(),
            done: self.done.iter().map(|s| s.name().to_string()).collect(),
            finished: self.finished,
        };
        let mut json = serde_json::to_vec_pretty(&record).context("serializing the state file")?;
        json.push(b'\n');
        write_atomic(&self.path, &json, STATE_FILE_MODE, Clobber::Replace)
            .with_context(|| format!("saving install state to {}", self.path.display()))
    }
}

fn parse_done(path: &Path, names: &[String]) -> Result<BTreeSet<Step>, StateError> {
    names
        .iter()
        .map(|name| {
            Step::from_name(name).ok_or_else(|| StateError::UnknownStep {
                path: path.to_path_buf(),
                name: name.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(s: &str) -> ConfigFingerprint {
        ConfigFingerprint::of(s.as_bytes())
    }

    #[test]
    fn finished_is_durable_and_absent_from_unfinished_files() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state.json");
        let mut state = StateFile::load_or_new(&path, fp("a")).unwrap();
        state.mark_done(Step::DiskCleanup).unwrap();
        assert!(!std::fs::read_to_string(&path).unwrap().contains("finished"));
        assert!(
            !StateFile::load_or_new(&path, fp("a"))
                .unwrap()
                .is_finished()
        );
        state.mark_finished().unwrap();
        let again = StateFile::load_or_new(&path, fp("a")).unwrap();
        assert!(again.is_finished());
        assert!(again.is_done(Step::DiskCleanup));
    }

    #[test]
    fn names_are_stable_unique_and_round_trip() {
        let names: Vec<&str> = Step::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names[0], "disk-cleanup");
        assert_eq!(names[6], "fetch-seed");
        assert_eq!(names[10], "write-site-config");
        assert_eq!(names[14], "shutdown");
        let unique: BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), Step::ALL.len());
        for s in Step::ALL {
            assert_eq!(Step::from_name(s.name()), Some(s));
        }
        assert_eq!(Step::from_name("reboot"), None);
    }

    #[test]
    fn order_and_destructive_set() {
        assert!(
            Step::ALL.windows(2).all(|w| w[0] < w[1]),
            "ALL is in Ord order"
        );
        let destructive: Vec<Step> = Step::ALL
            .into_iter()
            .filter(|s| s.is_destructive())
            .collect();
        assert_eq!(
            destructive,
            [
                Step::DiskCleanup,
                Step::WriteRhcos,
                Step::CreateExtraPartition,
                Step::MkfsExtraPartition
            ]
        );
        // Every destructive step comes before every other step.
        assert!(Step::ALL[..4].iter().all(|s| s.is_destructive()));
    }

    #[test]
    fn new_state_is_written_at_once_and_marks_persist() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        let mut s = StateFile::load_or_new(&p, fp("a")).unwrap();
        assert!(p.exists());
        s.mark_done(Step::DiskCleanup).unwrap();
        s.mark_done(Step::WriteRhcos).unwrap();
        let s = StateFile::load_or_new(&p, fp("a")).unwrap();
        assert!(s.is_done(Step::DiskCleanup) && s.is_done(Step::WriteRhcos));
        assert!(!s.is_done(Step::GrowRoot));
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(
            text.contains("\"done\": [\n    \"disk-cleanup\",\n    \"write-rhcos\"\n  ]"),
            "{text}"
        );
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
    }

    #[test]
    fn refuses_another_configuration() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        StateFile::load_or_new(&p, fp("a")).unwrap();
        let err = StateFile::load_or_new(&p, fp("b")).unwrap_err();
        assert!(matches!(
            err.downcast_ref::<StateError>(),
            Some(StateError::FingerprintMismatch { .. })
        ));
        let text = format!("{err:#}");
        assert!(
            text.contains(&format!(
                "records an install with a different ibi-configuration (sha256 {}, now {})",
                fp("a"),
                fp("b")
            )),
            "{text}"
        );
        assert!(text.contains("remove"), "{text}");
    }

    #[test]
    fn refuses_unknown_steps_versions_and_garbage() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        let cases = [
            (
                format!(
                    r#"{{"version":1,"configFingerprint":"{}","done":["reboot"]}}"#,
                    fp("a")
                ),
                "names an unknown step \"reboot\"",
            ),
            (
                format!(
                    r#"{{"version":2,"configFingerprint":"{}","done":[]}}"#,
                    fp("a")
                ),
                "has state version 2, this ibi reads version 1",
            ),
            ("{\"version\":1,".to_string(), "parsing the state file"),
        ];
        for (text, want) in cases {
            std::fs::write(&p, text).unwrap();
            let err = format!("{:#}", StateFile::load_or_new(&p, fp("a")).unwrap_err());
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn destructive_guard() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        let mut s = StateFile::load_or_new(&p, fp("a")).unwrap();
        s.mark_done(Step::DiskCleanup).unwrap();
        s.check_may_run(Step::WriteRhcos).unwrap();
        s.check_may_run(Step::DiskCleanup).unwrap();
        // A hand-edited state: a later step done, an earlier destructive one not.
        s.mark_done(Step::Deploy).unwrap();
        let err = s.check_may_run(Step::WriteRhcos).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{} says deploy is done but write-rhcos is not; refusing to run the destructive step \
                 write-rhcos on a disk that already holds later work (the state file was edited or damaged)",
                p.display()
            )
        );
        s.check_may_run(Step::Precache).unwrap();
    }

    #[test]
    fn relocate_moves_the_record() {
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.json"), d.path().join("b.json"));
        let mut s = StateFile::load_or_new(&a, fp("x")).unwrap();
        s.mark_done(Step::GrowRoot).unwrap();
        s.relocate(&b).unwrap();
        assert!(!a.exists());
        assert_eq!(s.path(), b);
        s.mark_done(Step::MountTargets).unwrap();
        let s = StateFile::load_or_new(&b, fp("x")).unwrap();
        assert_eq!(
            s.done_steps().collect::<Vec<_>>(),
            [Step::GrowRoot, Step::MountTargets]
        );
        let mut s = s;
        let err = s
            .relocate(&d.path().join("no/such/dir/c.json"))
            .unwrap_err();
        assert!(
            format!("{err:#}").contains("saving install state"),
            "{err:#}"
        );
        assert_eq!(s.path(), b, "a failed move keeps the old path");
    }

    #[test]
    fn failed_save_does_not_record() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub").join("state.json");
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let mut s = StateFile::load_or_new(&p, fp("a")).unwrap();
        std::fs::remove_dir_all(d.path().join("sub")).unwrap();
        assert!(s.mark_done(Step::DiskCleanup).is_err());
        assert!(!s.is_done(Step::DiskCleanup));
    }
}
