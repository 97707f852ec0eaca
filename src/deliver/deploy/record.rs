//! One site's record of one phase, saved (atomically, by `deploy_state`) at every change: a killed
//! deploy leaves each site at its last step, and the next run resumes from there.
//!
//! Where a re-run takes the phase up is decided from the record by `step::resume`, which states
//! the rule; only `--redo SITE` starts a site over.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;

use super::step::{self, Resume, Step};
use crate::config_image::marker::Expected;
use crate::contract::agent_status::RunState;
use crate::deliver::deploy_state::{
    BmcSystem, Phase, PhaseRecord, SiteDeployState, load_site, save_site,
};

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

    /// A new record for the site, whatever is on disk (`--redo`: the next save replaces it).
    pub fn fresh(base: &Path, site: &str, phase: Phase, address: &str) -> Record {
        let mut state = SiteDeployState::new(site);
        state.bmc = Some(BmcSystem {
            address: address.to_string(),
            ..BmcSystem::default()
        });
        Record {
            base: base.to_path_buf(),
            phase,
            state,
        }
    }

    /// The phase's record, unless a later install boot superseded it (then the phase counts as
    /// not started, and [`Record::begin`] replaces it).
    pub fn get(&self) -> Option<&PhaseRecord> {
        self.state.live(self.phase)
    }

    /// Why the phase's record no longer counts: the install that superseded it, and when it booted.
    pub fn superseded(&self) -> Option<(Phase, u64)> {
        self.state.superseded(self.phase)
    }

    /// Where this run takes the phase up ([`step::resume`]): `heard` says whether the host reported
    /// since the phase began (its own token's reports, received after `started`).
    pub fn resume(&self, heard: bool) -> Resume {
        step::resume(self.phase, self.get(), heard)
    }

    /// Saved before the power-on request: from now on the host may boot.
    pub fn mark_booted(&mut self) -> Result<()> {
        let t = now();
        self.change(|r| r.booted = Some(t))
    }

    /// Site and one-shot: what the host's medium carries, saved before the boot.
    pub fn ship(&mut self, expected: Expected) -> Result<()> {
        self.change(|r| r.shipped = Some(expected))
    }

    /// One-shot: saved before the power-on from disk is asked for.
    pub fn mark_disk_booted(&mut self) -> Result<()> {
        let t = now();
        self.change(|r| r.disk_booted = Some(t))
    }

    /// Saved when a re-run takes a failed phase up again (at its wait or its eject).
    pub fn reopen(&mut self) -> Result<()> {
        self.change(|r| {
            r.state = RunState::Running;
            r.finished = None;
            r.error = None;
        })
    }

    /// The phase (again) from its start: a failed or interrupted boot is done again.
    pub fn begin(&mut self) -> Result<()> {
        let t = now();
        self.state
            .phases
            .insert(self.phase, PhaseRecord::begun(Step::Boot.name(), t));
        self.save()
    }

    pub fn step(&mut self, step: Step) -> Result<()> {
        self.change(|r| r.step = step.name().to_string())
    }

    /// The System `UUID` the BMC showed, as saved when the boot found it.
    pub fn bmc_uuid(&self) -> Option<&str> {
        self.state.bmc.as_ref().and_then(|b| b.uuid.as_deref())
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
        assert_eq!(r.resume(false), Resume::At(Step::Boot));
        r.begin().unwrap();
        assert_eq!(
            r.resume(false),
            Resume::At(Step::Boot),
            "never powered on: boot"
        );
        assert_eq!(
            r.resume(true),
            Resume::At(Step::WaitReport),
            "it reported: it was booted"
        );
        r.system("/redfish/v1/Systems/1", Some("u-1".into()))
            .unwrap();
        r.add_bytes(100).unwrap();
        r.mark_booted().unwrap();
        let mut r = Record::open(d.path(), "a17", Phase::Factory, "https://bmc").unwrap();
        assert_eq!(
            r.resume(false),
            Resume::At(Step::WaitReport),
            "killed during the power-on"
        );
        r.step(Step::WaitReport).unwrap();
        assert_eq!(
            r.state.bmc.as_ref().and_then(|b| b.uuid.as_deref()),
            Some("u-1")
        );
        assert_eq!(r.get().unwrap().bytes_served, 100);
        r.finish(&Err("no report".into())).unwrap();
        let mut r = Record::open(d.path(), "a17", Phase::Factory, "https://bmc").unwrap();
        assert_eq!(
            r.resume(false),
            Resume::At(Step::WaitReport),
            "a failed wait is waited again"
        );
        r.reopen().unwrap();
        r.step(Step::Eject).unwrap();
        r.finish(&Err("BMC down".into())).unwrap();
        let r = Record::open(d.path(), "a17", Phase::Factory, "https://other").unwrap();
        let got = r.get().unwrap();
        assert_eq!(
            (got.state, got.error.as_deref()),
            (RunState::Failed, Some("BMC down"))
        );
        assert_eq!(
            r.resume(false),
            Resume::At(Step::Eject),
            "a finished host is only ejected"
        );
        assert_eq!(
            r.state.bmc.as_ref().and_then(|b| b.uuid.clone()),
            None,
            "another BMC: the old UUID no longer applies"
        );
    }

    #[test]
    fn a_one_shot_resumes_at_its_disk_boot_and_never_powers_the_disk_on_twice() {
        let d = tempfile::tempdir().unwrap();
        let mut r = Record::open(d.path(), "c", Phase::Oneshot, "https://bmc").unwrap();
        r.begin().unwrap();
        r.mark_booted().unwrap();
        r.step(Step::WaitReport).unwrap();
        assert_eq!(
            r.resume(false),
            Resume::At(Step::WaitReport),
            "installing: wait again"
        );
        r.step(Step::BootDisk).unwrap();
        r.finish(&Err("BMC down".into())).unwrap();
        let mut r = Record::open(d.path(), "c", Phase::Oneshot, "https://bmc").unwrap();
        assert_eq!(
            r.resume(false),
            Resume::At(Step::BootDisk),
            "installed, the disk not powered on: the disk boot again, not the install"
        );
        r.reopen().unwrap();
        r.mark_disk_booted().unwrap();
        let mut r = Record::open(d.path(), "c", Phase::Oneshot, "https://bmc").unwrap();
        assert_eq!(
            r.resume(false),
            Resume::At(Step::Watch),
            "killed during the power-on from disk: only watched again"
        );
        r.step(Step::Watch).unwrap();
        r.finish(&Err("not ready".into())).unwrap();
        let mut r = Record::open(d.path(), "c", Phase::Oneshot, "https://bmc").unwrap();
        assert_eq!(r.resume(true), Resume::At(Step::Watch));
        r.reopen().unwrap();
        r.finish(&Ok(())).unwrap();
        assert_eq!(r.resume(true), Resume::Done);
    }

    #[test]
    fn a_failed_boot_before_the_power_on_boots_again_and_done_stays_done() {
        let d = tempfile::tempdir().unwrap();
        let mut r = Record::open(d.path(), "b", Phase::Site, "https://bmc").unwrap();
        r.begin().unwrap();
        r.finish(&Err("insert refused".into())).unwrap();
        assert_eq!(r.resume(false), Resume::At(Step::Boot));
        r.begin().unwrap();
        r.mark_booted().unwrap();
        r.step(Step::Watch).unwrap();
        r.step(Step::Eject).unwrap();
        r.finish(&Ok(())).unwrap();
        assert_eq!(r.resume(true), Resume::Done);
    }
}
