//! The join behind `ibi status`: deploy's per-site records, the hosts' reports and deploy's lock, read
//! once each and joined in one pass over the reports (grouped by site and by host), so a fleet of
//! hundreds of sites costs what reading its files costs.
//!
//! Which reports speak for a site, and when, is deploy's rule (`deliver::verdict`): only those that
//! carried the site's own report token, and of those only the ones received within its install
//! phase as deploy recorded it. A report with the ISO's shared token is listed as its host's own row,
//! never a site's; when it claims the System UUID deploy read from a site's BMC, the row says so
//! (unverified). Own-token reports that arrived after the phase ended are counted, never shown over
//! deploy's result. A phase record that a later install superseded counts as not started
//! (`SiteDeployState::live`).
//!
//! Reports are ordered and aged by the server's receive time only: a host's own timestamps (a live
//! ISO's clock may be anything) are never compared with anything. Among a host's reports the latest
//! speaks, except that an end report is not undone by a progress report of the same boot that arrived
//! after it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::contract::agent_status::RunState;
use crate::contract::host_report::ReportingAgent;
use crate::deliver::deploy::Step;
use crate::deliver::deploy_state::LOCK_FILE;
use crate::deliver::deploy_state::{
    DEPLOY_STATE_DIR, DamagedRecord, Phase, PhaseRecord, SiteDeployState, load_all_checked,
};
use crate::deliver::report_store::{
    DamagedLine, REPORTS_FILE, StoredReport, load_reports_checked, supersedes,
};
use crate::deliver::verdict::{self, Within};
use crate::util::lock::{self, Holder, LockState};

/// Where one phase of one host stands, as far as anybody said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseStatus {
    pub state: RunState,
    /// The host's step while its report speaks, else deploy's.
    pub step: String,
    /// Unix seconds of the last news, by the server's clock.
    pub updated: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The host's last reported step, when deploy's step speaks instead (deploy failed, or is still
    /// at work after the host's end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_step: Option<String>,
}

/// A site's record that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Damage {
    pub file: String,
    /// Why, never the file's content.
    pub problem: String,
}

/// One host of the fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostStatus {
    pub site: Option<String>,
    pub bmc: Option<String>,
    /// The System UUID (deploy's, else the reported DMI product UUID).
    pub system: Option<String>,
    pub hostname: Option<String>,
    pub agent: Option<ReportingAgent>,
    /// `None`: nothing heard of it (pending; or, with the site phase under way, done without
    /// deploy and without a report).
    pub factory: Option<PhaseStatus>,
    /// `None`: deploy has not begun it. One-shot: deploy's record once the install is done (its
    /// disk boot and watch).
    pub site_phase: Option<PhaseStatus>,
    /// Installed one-shot (`deploy --phase oneshot`): `factory` is its install, `site_phase` the rest.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub oneshot: bool,
    /// Deploy's record of the site is damaged: both phases are unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damaged: Option<Damage>,
    /// Phases deploy recorded that a later install superseded: they count as not started.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub superseded: Vec<Superseded>,
    /// Reports with the site's own token that arrived after its install phase ended: not counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late: Option<Late>,
    /// A host known only from shared-token reports whose System UUID is the one deploy read from
    /// this site's BMC: unverified (anyone with the ISO has the shared token), so not the site's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claims_site: Option<String>,
    /// The journal lines of the report that speaks for the factory phase.
    #[serde(skip)]
    pub logs: Vec<String>,
    /// When the last report that counts for the row arrived, by the server's clock (`None`: none
    /// did). Not in the JSON, whose phases carry their own `updated`.
    #[serde(skip)]
    pub reported: Option<u64>,
}

impl HostStatus {
    /// The phase under way: the site phase once deploy began it.
    pub fn phase(&self) -> Phase {
        if self.oneshot {
            Phase::Oneshot
        } else if self.site_phase.is_some() {
            Phase::Site
        } else {
            Phase::Factory
        }
    }

    pub fn current(&self) -> Option<&PhaseStatus> {
        self.site_phase.as_ref().or(self.factory.as_ref())
    }

    /// The current phase's state; `None` before anything happened (or when damaged).
    pub fn state(&self) -> Option<RunState> {
        self.current().map(|p| p.state)
    }
}

/// A phase record a later install ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Superseded {
    pub phase: Phase,
    /// The install that ended it, and when deploy booted that install.
    pub by: Phase,
    pub booted: u64,
}

/// Own-token reports received after the install phase ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Late {
    pub count: usize,
    /// The last of them, as it would have spoken.
    pub last: PhaseStatus,
    /// When the phase ended, by deploy's record.
    pub phase_ended: u64,
}

/// Whether `ibi deploy` runs on BASE now, from its lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "camelCase")]
pub enum DeployRun {
    /// No deploy ever took the lock.
    Never,
    Running(Holder),
    /// The last one ended and said when.
    Stopped(Holder),
    /// The last one ended without saying when: killed, or its machine went down.
    Killed(Holder),
    /// The lock could not be read.
    Unknown {
        problem: String,
    },
}

/// Everything `ibi status` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fleet {
    /// Sites first (by name), then hosts no site claims.
    pub hosts: Vec<HostStatus>,
    /// The report store's path, for [`Fleet::damaged_reports`].
    pub reports_file: String,
    /// Lines of the store that are not reports (skipped; the others are shown).
    pub damaged_reports: Vec<DamagedLine>,
    pub deploy: DeployRun,
}

impl Fleet {
    /// How many things could not be read (damaged records and store lines, an unreadable lock).
    pub fn problems(&self) -> usize {
        self.hosts.iter().filter(|h| h.damaged.is_some()).count()
            + self.damaged_reports.len()
            + usize::from(matches!(self.deploy, DeployRun::Unknown { .. }))
    }
}

/// The fleet under `base`, or only `site`'s row. `base` must exist; damaged records and store lines
/// are shown as such ([`Fleet::problems`]), never an error that hides the rest.
pub fn fleet_status(base: &Path, site: Option<&str>) -> Result<Fleet> {
    match std::fs::metadata(base) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("{}: not a directory", base.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{}: no such directory (--dir is the BASE ibi serve and ibi deploy were given)",
            base.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("reading {}", base.display())),
    }
    let (reports, damaged_reports) = load_reports_checked(base)?;
    let mut pool = Pool::new(reports);
    let mut hosts = Vec::new();
    // The System UUIDs deploy read from the sites' BMCs, for the shared-token rows that claim one.
    let mut bmc_uuids = BTreeMap::new();
    for record in load_all_checked(base)? {
        hosts.push(match record {
            Ok(state) => {
                if let Some(u) = state.bmc.as_ref().and_then(|b| b.uuid.as_deref()) {
                    bmc_uuids.insert(u.to_ascii_lowercase(), state.site.clone());
                }
                let reports = pool.by_site.remove(&state.site).unwrap_or_default();
                site_row(&state, &reports)
            }
            Err(d) => {
                let reports = pool.by_site.remove(&d.site).unwrap_or_default();
                damaged_row(d, &reports)
            }
        });
    }
    // Reports that carried the token of a site deploy has no record of: that site's all the same.
    for (name, reports) in std::mem::take(&mut pool.by_site) {
        hosts.push(HostStatus {
            site: Some(name),
            ..report_row(&reports)
        });
    }
    // Stable: the records' order is kept, the sites known only from reports fall into place.
    hosts.sort_by(|a, b| a.site.cmp(&b.site));
    hosts.extend(pool.by_host.values().map(|r| {
        HostStatus {
            claims_site: r
                .last()
                .and_then(|r| r.report.host.product_uuid.as_deref())
                .and_then(|u| bmc_uuids.get(&u.to_ascii_lowercase()).cloned()),
            ..report_row(r)
        }
    }));
    if let Some(s) = site {
        hosts.retain(|h| h.site.as_deref() == Some(s));
        if hosts.is_empty() {
            bail!(
                "site {s}: no record in {} and no report with its token (ibi deploy writes one per site; a host that only reported with the ISO's token is listed without a site)",
                base.join(DEPLOY_STATE_DIR).display()
            );
        }
    }
    Ok(Fleet {
        hosts,
        reports_file: base.join(REPORTS_FILE).display().to_string(),
        damaged_reports,
        deploy: deploy_run(base),
    })
}

/// The store's reports in arrival order (by the server's clock; the store's order among equal
/// times), grouped once: by the site whose token they carried, else by host.
struct Pool {
    by_site: BTreeMap<String, Vec<StoredReport>>,
    /// Shared-token reports by `uuid:<lower-case UUID>`, or `host:<name>` without one.
    by_host: BTreeMap<String, Vec<StoredReport>>,
}

impl Pool {
    fn new(mut all: Vec<StoredReport>) -> Pool {
        all.sort_by_key(|r| r.received);
        let mut pool = Pool {
            by_site: BTreeMap::new(),
            by_host: BTreeMap::new(),
        };
        for r in all {
            let group = match &r.site {
                Some(s) => pool.by_site.entry(s.clone()),
                None => pool.by_host.entry(host_key(&r)),
            };
            group.or_default().push(r);
        }
        pool
    }
}

fn host_key(r: &StoredReport) -> String {
    let host = &r.report.host;
    match &host.product_uuid {
        Some(u) => format!("uuid:{}", u.to_ascii_lowercase()),
        None => format!("host:{}", host.hostname),
    }
}

/// The report that speaks among `reports` (in arrival order).
fn speaking<'r>(reports: impl IntoIterator<Item = &'r StoredReport>) -> Option<&'r StoredReport> {
    let mut latest: Option<&StoredReport> = None;
    for r in reports {
        if latest.is_none_or(|old| supersedes(&r.report, &old.report)) {
            latest = Some(r);
        }
    }
    latest
}

/// A site's own-token reports against its install phase `rec` (all of them without one): those
/// that speak for it, and those that arrived after it ended.
fn split<'r>(
    site: &str,
    rec: Option<&PhaseRecord>,
    reports: &'r [StoredReport],
) -> (Vec<&'r StoredReport>, Option<Late>) {
    let Some(rec) = rec else {
        return (reports.iter().collect(), None);
    };
    let (mut counted, mut late) = (Vec::new(), Vec::new());
    for r in reports {
        match verdict::within(site, rec, r) {
            Some(Within::Yes) => counted.push(r),
            Some(Within::After) => late.push(r),
            Some(Within::Before) | None => {}
        }
    }
    let late = speaking(late.iter().copied()).map(|last| Late {
        count: late.len(),
        last: host_view(last),
        phase_ended: rec.finished.unwrap_or(rec.updated),
    });
    (counted, late)
}

/// The phases of the site's record a later install superseded.
fn superseded(state: &SiteDeployState) -> Vec<Superseded> {
    state
        .phases
        .keys()
        .filter_map(|p| {
            let (by, booted) = state.superseded(*p)?;
            Some(Superseded {
                phase: *p,
                by,
                booted,
            })
        })
        .collect()
}

fn site_row(state: &SiteDeployState, reports: &[StoredReport]) -> HostStatus {
    let bmc = state.bmc.as_ref();
    let factory = state.live(Phase::Factory);
    let oneshot = state
        .live(Phase::Oneshot)
        .filter(|o| factory.is_none_or(|f| o.started >= f.started));
    if let Some(rec) = oneshot {
        return oneshot_row(state, rec, reports);
    }
    let (counted, late) = split(&state.site, factory, reports);
    let report = speaking(counted.iter().copied());
    let row = identity(&counted);
    HostStatus {
        site: Some(state.site.clone()),
        bmc: bmc.map(|b| b.address.clone()),
        system: bmc.and_then(|b| b.uuid.clone()).or(row.system),
        factory: factory_status(factory, report),
        site_phase: state.live(Phase::Site).map(deploy_view),
        logs: report.map(|r| r.report.logs.clone()).unwrap_or_default(),
        superseded: superseded(state),
        late,
        ..row
    }
}

/// A one-shot install: the install as the factory phase shows it (deploy's record and the host's
/// reports) until deploy boots the disk, then deploy's record as the site phase's.
fn oneshot_row(state: &SiteDeployState, rec: &PhaseRecord, reports: &[StoredReport]) -> HostStatus {
    let bmc = state.bmc.as_ref();
    let (counted, late) = split(&state.site, Some(rec), reports);
    let report = speaking(counted.iter().copied());
    let row = identity(&counted);
    let installed = rec.disk_booted.is_some() || Step::parse(&rec.step) == Some(Step::BootDisk);
    let (factory, site_phase) = match installed {
        false => (factory_status(Some(rec), report), None),
        // Deploy took the install as done (its end report, or the host's power off).
        true => (
            report.map(host_view).or_else(|| {
                Some(PhaseStatus {
                    state: RunState::Done,
                    step: Step::WaitReport.name().to_string(),
                    updated: rec.booted.unwrap_or(rec.started),
                    error: None,
                    host_step: None,
                })
            }),
            Some(deploy_view(rec)),
        ),
    };
    HostStatus {
        site: Some(state.site.clone()),
        bmc: bmc.map(|b| b.address.clone()),
        system: bmc.and_then(|b| b.uuid.clone()).or(row.system),
        factory,
        site_phase,
        oneshot: true,
        logs: report.map(|r| r.report.logs.clone()).unwrap_or_default(),
        superseded: superseded(state),
        late,
        ..row
    }
}

fn damaged_row(d: DamagedRecord, reports: &[StoredReport]) -> HostStatus {
    HostStatus {
        site: Some(d.site),
        damaged: Some(Damage {
            file: d.path.display().to_string(),
            problem: d.problem.to_string(),
        }),
        ..identity(&reports.iter().collect::<Vec<_>>())
    }
}

/// A host known only from its reports.
fn report_row(reports: &[StoredReport]) -> HostStatus {
    let report = speaking(reports);
    HostStatus {
        factory: factory_status(None, report),
        logs: report.map(|r| r.report.logs.clone()).unwrap_or_default(),
        ..identity(&reports.iter().collect::<Vec<_>>())
    }
}

/// Who the host says it is, from its last report that counts; no phase yet.
fn identity(reports: &[&StoredReport]) -> HostStatus {
    let last = reports.last().map(|r| &r.report);
    HostStatus {
        site: None,
        bmc: None,
        system: last.and_then(|r| r.host.product_uuid.clone()),
        hostname: last
            .map(|r| r.host.hostname.clone())
            .filter(|h| !h.is_empty()),
        agent: last.map(|r| r.agent),
        factory: None,
        site_phase: None,
        oneshot: false,
        damaged: None,
        superseded: Vec::new(),
        late: None,
        claims_site: None,
        logs: Vec::new(),
        reported: reports.last().map(|r| r.received),
    }
}

fn deploy_view(rec: &PhaseRecord) -> PhaseStatus {
    PhaseStatus {
        state: rec.state,
        step: rec.step.clone(),
        updated: rec.updated,
        error: rec.error.clone(),
        host_step: None,
    }
}

fn host_view(r: &StoredReport) -> PhaseStatus {
    PhaseStatus {
        state: verdict::install_state(&r.report),
        step: r.report.status.step.clone(),
        updated: r.received,
        error: r.report.status.error.clone(),
        host_step: None,
    }
}

/// The factory phase from deploy's record and the report that speaks since the phase began. The
/// host tells its own failure, its step while deploy waits, and its step once both are done; deploy
/// tells its own failure (a timeout, an eject that failed) and its work after the host's end.
fn factory_status(rec: Option<&PhaseRecord>, report: Option<&StoredReport>) -> Option<PhaseStatus> {
    let (rec, report) = match (rec, report) {
        (None, None) => return None,
        (Some(rec), None) => return Some(deploy_view(rec)),
        (None, Some(r)) => return Some(host_view(r)),
        (Some(rec), Some(r)) => (rec, r),
    };
    let host = host_view(report);
    let deploy = deploy_view(rec);
    let updated = host.updated.max(deploy.updated);
    let speaks = match (host.state, deploy.state) {
        (RunState::Failed, _)
        | (RunState::Running, RunState::Running)
        | (RunState::Done, RunState::Done) => host,
        (_, RunState::Failed) | (RunState::Done, RunState::Running) => PhaseStatus {
            host_step: Some(host.step).filter(|s| !s.is_empty()),
            ..deploy
        },
        // Deploy took the phase as done without the host's end (`shutdown: true`: powered off).
        (RunState::Running, RunState::Done) => deploy,
    };
    Some(PhaseStatus { updated, ..speaks })
}

fn deploy_run(base: &Path) -> DeployRun {
    match lock::state(&base.join(LOCK_FILE)) {
        Ok(LockState::Never | LockState::Free(None)) => DeployRun::Never,
        Ok(LockState::Held(h)) => DeployRun::Running(h),
        Ok(LockState::Free(Some(h))) if h.stopped.is_some() => DeployRun::Stopped(h),
        Ok(LockState::Free(Some(h))) => DeployRun::Killed(h),
        Err(e) => DeployRun::Unknown {
            problem: format!("{e:#}"),
        },
    }
}
