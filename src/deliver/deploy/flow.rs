//! One site through one phase, step by step, each step recorded before the next begins.
//!
//! Factory: boot from the installation ISO (`boot`, one-time CD override) → wait for the host's
//! final report, or with `shutdown: true` for its power to go off → eject. Site: attach the
//! configuration ISO and boot the disk → watch the cluster until ready → eject. A re-run resumes
//! at the step the record shows; a boot that was cut short is done again from the start.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::permits::Permits;
use super::plan::{Bmc, DeployOptions, HostSignals, Target};
use super::record::{Record, STEP_EJECT, STEP_WAIT_REPORT, STEP_WATCH};
use crate::contract::agent_status::RunState;
use crate::deliver::boot::{self, BootFrom, BootRequest, Job};
use crate::deliver::host_result::latest_host_report;
use crate::deliver::serve::Running;
use crate::deliver::watch::{WatchRequest, watch};
use crate::redfish::Client;
use crate::redfish::system::{self, Patience};
use crate::util::secret::Secret;

/// What every site's flow shares.
pub struct Ctx<'a> {
    pub opts: &'a DeployOptions,
    pub permits: Permits,
    pub server: &'a Running,
    /// The factory's ways of hearing that a host is done.
    pub signals: HostSignals,
}

impl Ctx<'_> {
    /// One BMC job, holding a permit.
    fn bmc_job(&self, bmc: &Bmc, job: Job) -> Result<boot::Report> {
        let req = BootRequest {
            bmc: bmc.url.clone(),
            system_id: bmc.system.clone(),
            client: bmc.client.clone(),
            job,
            timeout: self.opts.timeouts.bmc,
            patience: Patience::default(),
        };
        self.permits.with(|| boot::run(&req))
    }

    /// The URL this site's image is served at (a capability: kept in a `Secret`).
    fn url(&self, t: &Target) -> Result<Secret> {
        self.server
            .entries()
            .into_iter()
            .find(|e| e.name == t.alias.name)
            .map(|e| Secret::new(e.url))
            .with_context(|| format!("{} is not served", t.alias.name))
    }

    /// The System's `PowerState`, holding a permit.
    fn power(&self, bmc: &Bmc, system_path: &str) -> Result<String> {
        self.permits.with(|| {
            let mut c = Client::new(&bmc.url, bmc.client.clone())?;
            let sys = system::read_system(&mut c, system_path)?;
            let state = system::power_state(&mut c, &sys);
            c.logout();
            state
        })
    }
}

/// The bytes the server sent for this site's image since the last look, added to the record.
struct Tally<'a> {
    server: &'a Running,
    name: &'a str,
    last: u64,
}

impl<'a> Tally<'a> {
    fn new(server: &'a Running, name: &'a str) -> Self {
        Tally {
            server,
            name,
            last: server.sent(name),
        }
    }

    fn flush(&mut self, rec: &mut Record) -> Result<()> {
        let now = self.server.sent(self.name);
        let new = now.saturating_sub(self.last);
        self.last = now;
        rec.add_bytes(new)
    }
}

pub fn factory(ctx: &Ctx, t: &Target, bmc: &Bmc, rec: &mut Record) -> Result<()> {
    let mut tally = Tally::new(ctx.server, &t.alias.name);
    if !matches!(rec.resume_step(), Some(STEP_WAIT_REPORT | STEP_EJECT)) {
        boot(ctx, t, bmc, rec, &mut tally, BootFrom::Cd)?;
        rec.step(STEP_WAIT_REPORT)?;
    }
    if rec.resume_step() == Some(STEP_WAIT_REPORT) {
        let waited = wait_host(ctx, bmc, rec, &mut tally);
        tally.flush(rec)?;
        waited?;
        rec.step(STEP_EJECT)?;
    }
    ctx.bmc_job(bmc, Job::Eject)?;
    tally.flush(rec)
}

/// Starts a new attempt: the media inserted and the host booted (`from`), its System recorded.
fn boot(
    ctx: &Ctx,
    t: &Target,
    bmc: &Bmc,
    rec: &mut Record,
    tally: &mut Tally,
    from: BootFrom,
) -> Result<()> {
    rec.begin()?;
    let iso = ctx.url(t)?;
    let job = Job::Boot {
        iso,
        from,
        iso_ca: None,
    };
    let done = ctx.bmc_job(bmc, job)?;
    rec.system(&done.system, done.uuid)?;
    tally.flush(rec)
}

/// Until the host's final report (from this boot on), or its power off when it shuts down at the
/// end, or the timeout.
fn wait_host(ctx: &Ctx, bmc: &Bmc, rec: &mut Record, tally: &mut Tally) -> Result<()> {
    let since = rec.get().map_or(0, |r| r.started);
    let uuid = rec.uuid();
    let system_path = rec.state.bmc.as_ref().and_then(|b| b.system.clone());
    let signals = ctx.signals;
    if signals.reports && uuid.is_none() && !signals.shutdown {
        bail!("the BMC shows no System UUID, so this host's reports cannot be told from others'");
    }
    let timeout = ctx.opts.timeouts.report;
    let deadline = Instant::now() + timeout;
    loop {
        if let (true, Some(u)) = (signals.reports, &uuid) {
            // Strictly after the boot's first second: no host reports within it, and a report from
            // an earlier boot (a failure before a re-run) may have arrived in that same second.
            let end =
                latest_host_report(&ctx.opts.base, u, since + 1)?.filter(|r| r.report.finished);
            if let Some(r) = end {
                let s = &r.report.status;
                match (s.state, &s.error) {
                    (RunState::Done, _) => return Ok(()),
                    (_, Some(e)) => bail!("the host reported a failure: {e}"),
                    (_, None) => bail!("the host reported a failure at step {}", s.step),
                }
            }
        }
        if let (true, Some(path)) = (signals.shutdown, &system_path)
            && ctx.power(bmc, path)? == "Off"
        {
            return Ok(());
        }
        tally.flush(rec)?;
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("{}", silence(signals, timeout));
        }
        std::thread::sleep(ctx.opts.timeouts.poll.min(left));
    }
}

fn silence(s: HostSignals, timeout: Duration) -> String {
    let what = match (s.reports, s.shutdown) {
        (true, true) => "no final report from the host and no power off",
        (true, false) => "no final report from the host",
        _ => "the host did not power off",
    };
    format!("{what} within {} s (--report-timeout)", timeout.as_secs())
}

pub fn site(ctx: &Ctx, t: &Target, bmc: &Bmc, rec: &mut Record) -> Result<()> {
    let mut tally = Tally::new(ctx.server, &t.alias.name);
    if !matches!(rec.resume_step(), Some(STEP_WATCH | STEP_EJECT)) {
        boot(ctx, t, bmc, rec, &mut tally, BootFrom::Disk)?;
        rec.step(STEP_WATCH)?;
    }
    if rec.resume_step() == Some(STEP_WATCH) {
        let req = WatchRequest {
            site_dir: t.dir.clone(),
            timeout: ctx.opts.timeouts.watch,
            interval: ctx.opts.timeouts.poll,
        };
        let outcome = watch(&req, &mut |_| {});
        tally.flush(rec)?;
        let outcome = outcome?;
        if !outcome.ready {
            bail!("{}", outcome.not_ready_reason());
        }
        rec.step(STEP_EJECT)?;
    }
    ctx.bmc_job(bmc, Job::Eject)?;
    tally.flush(rec)
}
