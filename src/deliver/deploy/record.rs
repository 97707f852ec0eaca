//! One site's record of one phase, saved (atomically, by `deploy_state`) at every change: a killed
//! deploy leaves each site at its last step, and the next run resumes from there.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;

use crate::contract::agent_status::RunState;
use crate::deliver::deploy_state::{
    BmcSystem, Phase, PhaseRecord, SiteDeployState, load_site, save_site,
};

/// The steps deploy records (`deploy_state` leaves their names to deploy).
pub const STEP_BOOT: &str = "boot";
pub const STEP_WAIT_REPORT: &str = "wait-report";
pub const STEP_WATCH: &str = "watch";
pub const STEP_EJECT: &str = "eject";

pub struct Record {
    base: PathBuf,
    phase: Phase,
    pub state: SiteDeployState,
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Record {
    /// The site's record as the last run left it (or a new one), with the BMC's address updated.
    pub fn open(base: &Path, site: &str, phase: Phase, address: &str) -> Result<Record> {
        let mut state = load_site(base, site)?.unwrap_or_else(|| SiteDeployState::new(site));
        let bmc = state.bmc.get_or_insert_with(BmcSystem::default);
        if bmc.address != address {
            // Another BMC: the system and UUID read from the old one no longer apply.
            *bmc = BmcSystem {
                address: address.to_string(),
                ..BmcSystem::default()
            };
        }
        Ok(Record {
            base: base.to_path_buf(),
            phase,
            state,
        })
    }

    pub fn get(&self) -> Option<&PhaseRecord> {
        self.state.phases.get(&self.phase)
    }

    pub fn uuid(&self) -> Option<String> {
        self.state.bmc.as_ref().and_then(|b| b.uuid.clone())
    }

    /// The step a re-run resumes at, when the phase is under way past its boot.
    pub fn resume_step(&self) -> Option<&str> {
        self.get()
            .filter(|r| r.state == RunState::Running && r.step != STEP_BOOT)
            .map(|r| r.step.as_str())
    }

    /// The phase (again) from its start: a failed or interrupted boot is done again.
    pub fn begin(&mut self) -> Result<()> {
        let t = now();
        self.state.phases.insert(
            self.phase,
            PhaseRecord {
                state: RunState::Running,
                step: STEP_BOOT.into(),
                started: t,
                updated: t,
                finished: None,
                error: None,
                bytes_served: 0,
            },
        );
        self.save()
    }

    pub fn step(&mut self, step: &str) -> Result<()> {
        self.change(|r| r.step = step.to_string())
    }

    pub fn system(&mut self, path: &str, uuid: Option<String>) -> Result<()> {
        let bmc = self.state.bmc.get_or_insert_with(BmcSystem::default);
        bmc.system = Some(path.to_string());
        if uuid.is_some() {
            bmc.uuid = uuid;
        }
        self.save()
    }

    /// Adds bytes served; saved only when there are some.
    pub fn add_bytes(&mut self, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.change(|r| r.bytes_served += n)
    }

    pub fn finish(&mut self, outcome: &Result<(), String>) -> Result<()> {
        let t = now();
        self.change(|r| {
            r.finished = Some(t);
            match outcome {
                Ok(()) => {
                    r.state = RunState::Done;
                    r.error = None;
                }
                Err(e) => {
                    r.state = RunState::Failed;
                    r.error = Some(e.clone());
                }
            }
        })
    }

    fn change(&mut self, f: impl FnOnce(&mut PhaseRecord)) -> Result<()> {
        let t = now();
        if let Some(r) = self.state.phases.get_mut(&self.phase) {
            f(r);
            r.updated = t;
        }
        self.save()
    }

    fn save(&self) -> Result<()> {
        save_site(&self.base, &self.state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_under_way_resumes_after_its_boot_and_survives_reopening() {
        let d = tempfile::tempdir().unwrap();
        let mut r = Record::open(d.path(), "a17", Phase::Factory, "https://bmc").unwrap();
        assert!(r.get().is_none());
        r.begin().unwrap();
        assert_eq!(r.resume_step(), None, "an interrupted boot is done again");
        r.system("/redfish/v1/Systems/1", Some("u-1".into()))
            .unwrap();
        r.add_bytes(100).unwrap();
        r.step(STEP_WAIT_REPORT).unwrap();
        let mut r = Record::open(d.path(), "a17", Phase::Factory, "https://bmc").unwrap();
        assert_eq!(r.resume_step(), Some(STEP_WAIT_REPORT));
        assert_eq!(r.uuid().as_deref(), Some("u-1"));
        assert_eq!(r.get().unwrap().bytes_served, 100);
        r.finish(&Err("no report".into())).unwrap();
        let r = Record::open(d.path(), "a17", Phase::Factory, "https://other").unwrap();
        let got = r.get().unwrap();
        assert_eq!(
            (got.state, got.error.as_deref()),
            (RunState::Failed, Some("no report"))
        );
        assert_eq!(r.resume_step(), None);
        assert_eq!(
            r.uuid(),
            None,
            "another BMC: the old UUID no longer applies"
        );
    }
}
