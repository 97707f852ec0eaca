//! The fleet's clock. One loop on the calling thread holds every site's state and decides; blocking
//! work runs on two fixed pools: `--parallel` threads for BMC jobs (boot, eject, power reads) and
//! [`LOOK_THREADS`] for looks at clusters. The hosts' reports are read once per poll for the whole
//! fleet, from where the last read ended. Threads and memory so follow `--parallel`, not the number
//! of sites: a waiting site is a few hundred bytes of state, not a thread.
//!
//! Each site: boot (factory: the installation ISO, one-time CD override; site: the configuration ISO,
//! boot the disk) → wait (factory: the host's final report with its own token, or with `shutdown:
//! true` its power off; site: the cluster ready) → eject → done. One-shot: boot (the host's own
//! installation ISO carrying its site's configuration, one-time CD override) → wait as the factory
//! does → boot-disk (power off, eject, no override, power on) → watch as the site does → done. Every step is saved in the site's
//! record before the next begins, and `booted` before the power-on request, so a re-run resumes
//! where this one stopped and never boots a host twice for one phase (see `record`).
//!
//! SIGINT/SIGTERM: no new job starts; the jobs under way get [`STOP_GRACE`] to finish; the caller
//! prints the table so far and exits 130/143.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};

use super::plan::{Bmc, DeployOptions, HostSignals, Target};
use super::pool::Pool;
use super::progress::Progress;
use super::record::Record;
use super::signals::Signals;
use super::step::{self, Action, Event, Failure, HostFailed, Resume, Step};
use super::summary::{Ending, SiteOutcome};
use crate::config_image::marker;
use crate::contract::agent_status::RunState;
use crate::contract::config_iso::ISO_FILE_NAME;
use crate::deliver::boot::{self, BootEvent, BootFrom, BootRequest, Job};
use crate::deliver::deploy_state::Phase;
use crate::deliver::report_store::{StoredReport, Tail};
use crate::deliver::serve::Running;
use crate::deliver::verdict;
use crate::deliver::watch::Watcher;
use crate::redfish::system::{self, Patience};
use crate::redfish::{Client, PowerState};
use crate::util::secret::Secret;
use crate::util::text::escape_control;

/// Threads that look at clusters (site phase): a look is a few bounded GETs.
pub const LOOK_THREADS: usize = 4;
/// How often the loop wakes when nothing arrives.
const TICK: Duration = Duration::from_millis(200);
/// After an interrupt, how long the jobs under way get to finish.
pub const STOP_GRACE: Duration = Duration::from_secs(60);

/// What every site shares.
pub struct Ctx<'a> {
    pub opts: &'a DeployOptions,
    pub server: &'a Running,
    /// The factory's ways of hearing that a host is done.
    pub signals: HostSignals,
    /// SIGINT and SIGTERM, as heard.
    pub interrupt: Arc<Signals>,
}

/// Where a site is in this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// At this step of its phase's table: its job queued or under way, or its wait.
    At(Step),
    Finished,
}

/// What the fleet heard from one site's host (with the site's own token) since the store was opened:
/// only what a decision needs, so memory does not grow with the reports.
#[derive(Debug, Default, Clone)]
struct News {
    /// The last report's arrival (server clock).
    last: Option<u64>,
    /// The last end report: its arrival, how it ended and why.
    end: Option<(u64, RunState, Option<String>, String)>,
    /// A UUID mismatch between the host and its BMC was told (once a site).
    uuid_told: bool,
}

struct Site<'t> {
    t: &'t Target,
    /// `None` while a BMC job holds it.
    rec: Option<Record>,
    stage: Stage,
    busy: bool,
    /// The job that holds it while `busy` (`boot`, `eject`, `disk boot`, `power read`, `cluster look`).
    job: &'static str,
    deadline: Option<Instant>,
    next_look: Instant,
    /// The site phase's watch; `None` while a look holds it.
    watcher: Option<Box<Watcher>>,
    sent_seen: u64,
    ending: Option<Ending>,
}

enum Msg {
    /// The BMC job of the site's step ended.
    Job(Box<JobEnd>),
    Power(usize, Result<Option<PowerState>>),
    Looked(usize, Box<Watcher>, Result<bool>),
    /// A job panicked: which pool ran it, the site, what the job was, the panic's message.
    Panicked(Worker, usize, &'static str, String),
}

/// A BMC job's end: the site, its step, the record the job held, what the job returned; the
/// boot's also with the byte count it recorded up to.
struct JobEnd {
    i: usize,
    at: Step,
    rec: Record,
    result: Result<boot::Report>,
    seen: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
enum Worker {
    Bmc,
    Look,
}

/// What a job's panic sends back: the site ends with it instead of waiting for the job forever.
fn on_panic(
    tx: &Sender<Msg>,
    worker: Worker,
    i: usize,
    what: &'static str,
) -> impl FnOnce(String) + Send + 'static {
    let tx = tx.clone();
    move |m| {
        let _ = tx.send(Msg::Panicked(worker, i, what, m));
    }
}

pub struct Engine<'a, 't> {
    ctx: &'a Ctx<'a>,
    sites: Vec<Site<'t>>,
    bmc: Pool,
    looks: Option<Pool>,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    tail: Tail,
    news: HashMap<String, News>,
    next_read: Instant,
    progress: Progress,
}

impl<'a, 't> Engine<'a, 't> {
    /// Sites whose record could not be opened (or is damaged) come in `failed` with their error.
    pub fn new(
        ctx: &'a Ctx<'a>,
        targets: &'t [Target],
        failed: &HashMap<String, String>,
        progress: Progress,
    ) -> Result<Engine<'a, 't>> {
        let o = ctx.opts;
        let (tx, rx) = channel();
        let looks = match o.phase {
            Phase::Site | Phase::Oneshot => Some(Pool::new(LOOK_THREADS, "ibi-look")?),
            Phase::Factory => None,
        };
        let mut e = Engine {
            ctx,
            sites: Vec::with_capacity(targets.len()),
            bmc: Pool::new(o.parallel, "ibi-bmc")?,
            looks,
            tx,
            rx,
            tail: Tail::new(&o.base),
            news: HashMap::new(),
            next_read: Instant::now(),
            progress,
        };
        e.read_reports();
        for t in targets {
            let site = e.start_site(t, failed.get(&t.name));
            e.sites.push(site);
            if let Stage::At(at) = e.sites[e.sites.len() - 1].stage
                && at.job().is_none()
            {
                e.enter_wait(e.sites.len() - 1);
            }
        }
        Ok(e)
    }

    /// Runs until every site has ended or an interrupt; each site's outcome, in target order
    /// (`None` for a site an interrupt left under way).
    pub fn run(mut self) -> Vec<(String, Option<Ending>)> {
        loop {
            let stop = self.ctx.interrupt.first().is_some();
            if !stop {
                self.step();
            }
            let busy = self.bmc.busy() + self.looks.as_ref().map_or(0, Pool::busy);
            let open = self.sites.iter().any(|s| s.stage != Stage::Finished);
            if busy == 0 && (stop || !open) {
                break;
            }
            if stop {
                self.tell_finishing();
                if !self.drain_for(STOP_GRACE) {
                    self.tell_abandoned();
                }
                break;
            }
            match self.rx.recv_timeout(TICK) {
                Ok(m) => self.handle(m),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            while let Ok(m) = self.rx.try_recv() {
                self.handle(m);
            }
        }
        for i in 0..self.sites.len() {
            self.flush_bytes(i);
        }
        self.progress.finish();
        self.bmc.close();
        if let Some(p) = self.looks {
            p.close();
        }
        self.sites
            .into_iter()
            .map(|s| (s.t.name.clone(), s.ending))
            .collect()
    }

    /// After an interrupt: the results of the jobs under way, for at most `grace`, or until a second
    /// signal; whether every job ended.
    fn drain_for(&mut self, grace: Duration) -> bool {
        let end = Instant::now() + grace;
        while self.bmc.busy() + self.looks.as_ref().map_or(0, Pool::busy) > 0 {
            if self.ctx.interrupt.again() {
                return false;
            }
            let left = end.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left.min(TICK)) {
                Ok(m) => self.handle(m),
                Err(RecvTimeoutError::Timeout) if left.is_zero() => return false,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
        true
    }

    /// The sites whose job is under way, as `a17 (boot)`.
    fn under_way(&self) -> Vec<String> {
        self.sites
            .iter()
            .filter(|s| s.busy)
            .map(|s| format!("{} ({})", escape_control(&s.t.name), s.job))
            .collect()
    }

    /// Said at once on the first signal: what deploy waits for, and how not to.
    fn tell_finishing(&self) {
        let jobs = self.under_way();
        let line = match jobs.len() {
            0 => "interrupted: no job under way; stopping".to_string(),
            n => format!(
                "interrupted: starting nothing new; {n} job(s) finishing, at most {} s: {}; Ctrl-C again abandons them",
                STOP_GRACE.as_secs(),
                jobs.join(", ")
            ),
        };
        self.progress.say(&line);
    }

    /// Said when jobs were left running (a second signal, or the grace ran out): each site whose
    /// job was cut, and what its record says was done, so the user knows what a re-run does.
    fn tell_abandoned(&self) {
        let o = self.ctx.opts;
        let left: Vec<String> = self
            .sites
            .iter()
            .filter(|s| s.busy)
            .map(|s| {
                let state = Record::open(&o.base, &s.t.name, o.phase, &s.t.address)
                    .map_or("its record cannot be read: check the host", |r| {
                        step::left_as(o.phase, r.resume(false))
                    });
                format!("{} ({} cut: {state})", escape_control(&s.t.name), s.job)
            })
            .collect();
        let why = match self.ctx.interrupt.again() {
            true => "interrupted again",
            false => "the jobs did not finish in time",
        };
        self.progress
            .say(&format!("{why}: abandoned {}", left.join("; ")));
    }

    fn start_site(&mut self, t: &'t Target, failure: Option<&String>) -> Site<'t> {
        let o = self.ctx.opts;
        let mut site = Site {
            t,
            rec: None,
            stage: Stage::Finished,
            busy: false,
            job: "",
            deadline: None,
            next_look: Instant::now(),
            watcher: None,
            sent_seen: self.ctx.server.sent(&t.alias.name),
            ending: None,
        };
        let redo = o.redo.contains(&t.name);
        let opened = match failure {
            Some(e) => Err(e.clone()),
            // Starting over: the phase's old record is replaced, a damaged file entirely.
            None if redo => Ok(Record::open(&o.base, &t.name, o.phase, &t.address)
                .unwrap_or_else(|_| Record::fresh(&o.base, &t.name, o.phase, &t.address))),
            None => Record::open(&o.base, &t.name, o.phase, &t.address).map_err(|e| {
                format!(
                    "{e:#}; deploy does not know what was done to this host: check it, then pass --redo {} to start the site over",
                    t.name
                )
            }),
        };
        let mut rec = match opened {
            Ok(r) => r,
            Err(e) => {
                self.progress.failed(&t.name, &e);
                site.ending = Some(Ending::Failed(Failure::Record(e)));
                return site;
            }
        };
        if !redo && let Some((by, at)) = rec.superseded() {
            self.progress.line(
                &t.name,
                &format!(
                    "its {} phase recorded earlier no longer counts: the host was installed again ({} phase booted at {}); the phase starts from its boot",
                    o.phase.name(),
                    by.name(),
                    crate::util::lock::rfc3339(at)
                ),
            );
        }
        let resume = if redo {
            Resume::At(Step::Boot)
        } else {
            rec.resume(self.heard_since(&t.name, &rec))
        };
        if let Err(e) = &t.bmc
            && resume != Resume::Done
        {
            let e = unsaved(Failure::Setup(e.clone()), record_failure(&mut rec, e));
            self.progress.failed(&t.name, &e.to_string());
            site.ending = Some(Ending::Failed(e));
            return site;
        }
        let begun = match resume {
            Resume::Done => {
                self.progress
                    .line(&t.name, "done by an earlier run: not touched");
                site.ending = Some(Ending::DoneEarlier);
                Ok(Stage::Finished)
            }
            Resume::At(Step::Boot) => rec.begin().map(|()| Stage::At(Step::Boot)),
            Resume::At(at) => {
                self.progress.line(&t.name, &step::resumed(o.phase, at));
                rec.reopen()
                    .and_then(|()| rec.step(at))
                    .map(|()| Stage::At(at))
            }
        };
        match begun {
            Ok(stage) => site.stage = stage,
            Err(e) => {
                let e = format!("recording the site: {e:#}");
                self.progress.failed(&t.name, &e);
                site.ending = Some(Ending::Failed(Failure::Record(e)));
            }
        }
        site.rec = Some(rec);
        site
    }

    /// Whether the site's host reported since the phase began.
    fn heard_since(&self, name: &str, rec: &Record) -> bool {
        let since = rec.get().map_or(u64::MAX, |r| r.started);
        self.news
            .get(name)
            .and_then(|n| n.last)
            .is_some_and(|t| t >= since)
    }

    /// One pass: read the reports when due, start what can start, judge the waits.
    fn step(&mut self) {
        let now = Instant::now();
        if self.ctx.signals.reports && now >= self.next_read {
            self.read_reports();
            self.next_read = now + self.ctx.opts.timeouts.poll;
        }
        for i in 0..self.sites.len() {
            if self.sites[i].busy {
                continue;
            }
            match self.sites[i].stage {
                Stage::At(Step::Boot) | Stage::Finished => {}
                Stage::At(Step::Eject) if self.bmc.has_room() => self.start_eject(i),
                Stage::At(Step::BootDisk) if self.bmc.has_room() => self.start_boot_disk(i),
                Stage::At(at) if at.job().is_none() => self.judge_wait(i, now),
                Stage::At(_) => {}
            }
        }
        // Boots last: the hosts already started finish first.
        for i in 0..self.sites.len() {
            if self.sites[i].stage == Stage::At(Step::Boot)
                && !self.sites[i].busy
                && self.bmc.has_room()
            {
                self.start_boot(i);
            }
        }
        self.progress.counts(&self.counts());
    }

    /// How many sites are at each step of the phase's table, then done and failed.
    fn counts(&self) -> Vec<(&'static str, usize)> {
        let table = step::steps(self.ctx.opts.phase);
        let mut c: Vec<(&'static str, usize)> = table.iter().map(|s| (s.name(), 0)).collect();
        c.extend([("done", 0), ("failed", 0)]);
        let n = c.len();
        for s in &self.sites {
            let k = match (s.stage, &s.ending) {
                (Stage::At(at), _) => table.iter().position(|x| *x == at).unwrap_or(0),
                (Stage::Finished, Some(Ending::Failed(_))) => n - 1,
                (Stage::Finished, _) => n - 2,
            };
            c[k].1 += 1;
        }
        c
    }

    fn read_reports(&mut self) {
        let new = match self.tail.read_new() {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!("reading the hosts' reports: {e:#}");
                return;
            }
        };
        for r in new {
            let StoredReport {
                received,
                site,
                report,
                ..
            } = r;
            // Only a site's own token speaks for it (`verdict`); when, the wait decides.
            let Some(site) = site else { continue };
            self.compare_uuids(&site, report.host.product_uuid.as_deref());
            let n = self.news.entry(site).or_default();
            n.last = n.last.max(Some(received));
            let state = verdict::install_state(&report);
            if state != RunState::Running && n.end.as_ref().is_none_or(|e| e.0 <= received) {
                n.end = Some((received, state, report.status.error, report.status.step));
            }
        }
    }

    /// Warns, once a site, when the host's DMI UUID is not the one its BMC showed: the host's own
    /// token decides which site it speaks for, but a mismatch may mean the inventory names another
    /// host's BMC (or firmware that swaps the UUID's byte order).
    fn compare_uuids(&mut self, site: &str, host: Option<&str>) {
        let Some(host) = host else { return };
        if self.news.get(site).is_some_and(|n| n.uuid_told) {
            return;
        }
        let bmc = self
            .sites
            .iter()
            .find(|s| s.t.name == site)
            .and_then(|s| s.rec.as_ref())
            .and_then(|r| r.bmc_uuid().map(str::to_string));
        let Some(bmc) = bmc else { return };
        if let Some(why) = uuid_mismatch(&bmc, host) {
            let clip = |u: &str| escape_control(&u.chars().take(UUID_SHOWN).collect::<String>());
            tracing::warn!(
                "site {}: the host reports System UUID {}, its BMC shows {}: {why}",
                escape_control(site),
                clip(host),
                clip(&bmc)
            );
            self.news.entry(site.to_string()).or_default().uuid_told = true;
        }
    }

    fn start_boot(&mut self, i: usize) {
        let o = self.ctx.opts;
        let t = self.sites[i].t;
        let (Ok(bmc), Some(mut rec)) = (&t.bmc, self.sites[i].rec.take()) else {
            return;
        };
        let url = match self.url(t) {
            Ok(u) => u,
            Err(e) => {
                self.sites[i].rec = Some(rec);
                return self.finish(i, Err(Failure::Setup(format!("{e:#}"))));
            }
        };
        // What the medium carries, saved before the boot: the watch judges the cluster by it.
        if matches!(o.phase, Phase::Site | Phase::Oneshot) {
            let shipped =
                marker::read_expected(&t.dir.join(ISO_FILE_NAME)).and_then(|e| rec.ship(e));
            if let Err(e) = shipped {
                self.sites[i].rec = Some(rec);
                return self.finish(i, Err(Failure::Setup(format!("{e:#}"))));
            }
        }
        let from = match o.phase {
            Phase::Factory | Phase::Oneshot => BootFrom::Cd,
            Phase::Site => BootFrom::Disk,
        };
        let req = request(
            bmc,
            Job::Boot {
                iso: url,
                from,
                iso_ca: None,
            },
            o,
        );
        let counter = self.ctx.server.counter(&t.alias.name);
        let mut seen = self.sites[i].sent_seen;
        self.spawn_job(i, Step::Boot, rec, move |rec| {
            // Saved before the job goes on: the System before anything changes, the bytes once the
            // BMC has the image, `booted` before the power-on request (a failed save stops the job
            // there), so a deploy killed at any point knows what was done.
            let result = boot::run_observed(&req, &mut |ev| match ev {
                BootEvent::Found { system, uuid } => rec.system(&system, uuid),
                BootEvent::Inserted { .. } => {
                    let now = counter.as_ref().map_or(seen, |c| c.load(Ordering::Relaxed));
                    rec.add_bytes(now.saturating_sub(seen))?;
                    seen = now;
                    Ok(())
                }
                BootEvent::PoweringOn => rec.mark_booted(),
                BootEvent::PoweredOff | BootEvent::PoweredOn => Ok(()),
            });
            (result, Some(seen))
        });
    }

    fn start_eject(&mut self, i: usize) {
        let o = self.ctx.opts;
        let t = self.sites[i].t;
        let (Ok(bmc), Some(rec)) = (&t.bmc, self.sites[i].rec.take()) else {
            return;
        };
        let req = request(bmc, Job::Eject, o);
        self.spawn_job(i, Step::Eject, rec, move |_| (boot::run(&req), None));
    }

    /// One-shot: the host's disk is booted with no media; saved before the power-on.
    fn start_boot_disk(&mut self, i: usize) {
        let o = self.ctx.opts;
        let t = self.sites[i].t;
        let (Ok(bmc), Some(rec)) = (&t.bmc, self.sites[i].rec.take()) else {
            return;
        };
        let req = request(bmc, Job::BootDisk, o);
        self.spawn_job(i, Step::BootDisk, rec, move |rec| {
            let result = boot::run_observed(&req, &mut |ev| match ev {
                BootEvent::Found { system, uuid } => rec.system(&system, uuid),
                BootEvent::PoweringOn => rec.mark_disk_booted(),
                _ => Ok(()),
            });
            (result, None)
        });
    }

    /// Runs the BMC job of the site's step `at` on the pool, with the record it saves into; its
    /// end (or its panic) comes back as a message.
    fn spawn_job(
        &mut self,
        i: usize,
        at: Step,
        mut rec: Record,
        job: impl FnOnce(&mut Record) -> (Result<boot::Report>, Option<u64>) + Send + 'static,
    ) {
        let name = at.job().unwrap_or("job");
        let tx = self.tx.clone();
        self.sites[i].busy = true;
        self.sites[i].job = name;
        let panicked = on_panic(&tx, Worker::Bmc, i, name);
        self.bmc.run(
            move || {
                let (result, seen) = job(&mut rec);
                let end = JobEnd {
                    i,
                    at,
                    rec,
                    result,
                    seen,
                };
                let _ = tx.send(Msg::Job(Box::new(end)));
            },
            panicked,
        );
    }

    /// Whether the site waits for its cluster (the site phase's wait, the one-shot's watch) rather
    /// than for its host.
    fn watching(&self, i: usize) -> bool {
        matches!(self.sites[i].stage, Stage::At(at) if step::watching(at))
    }

    /// A waiting site: the host's reports and power, or the site's cluster; the timeout.
    fn judge_wait(&mut self, i: usize, now: Instant) {
        let watching = self.watching(i);
        if !watching && let Some(verdict) = self.host_verdict(i) {
            return self.decide(i, Event::HostEnded(verdict));
        }
        if self.sites[i].deadline.is_some_and(|d| now >= d) {
            let why = self.silence(i);
            return self.decide(i, Event::TimedOut(why));
        }
        if now < self.sites[i].next_look {
            return;
        }
        let started = if watching {
            self.start_look(i)
        } else if self.ctx.signals.shutdown {
            self.start_power_read(i)
        } else {
            // Reports only: they are read for the whole fleet at once.
            true
        };
        // A look that found no free thread is tried at the next tick, not a poll later.
        if started {
            self.flush_bytes(i);
            self.sites[i].next_look = now + self.ctx.opts.timeouts.poll;
        }
    }

    /// The host's end, from its own token's reports since the phase began.
    fn host_verdict(&self, i: usize) -> Option<Result<(), HostFailed>> {
        let s = &self.sites[i];
        let phase = s.rec.as_ref()?.get()?;
        let (received, state, error, step) = self.news.get(&s.t.name)?.end.clone()?;
        if verdict::within_phase(phase, received) != verdict::Within::Yes {
            return None;
        }
        Some(match state {
            RunState::Done => Ok(()),
            _ => Err(HostFailed { error, step }),
        })
    }

    fn silence(&self, i: usize) -> String {
        let o = self.ctx.opts;
        match self.watching(i) {
            true => {
                let reason = self.sites[i].watcher.as_ref().map_or_else(
                    || "not ready".to_string(),
                    |w| w.outcome().not_ready_reason(),
                );
                format!("{reason} (--watch-timeout; a re-run watches again without a new boot)")
            }
            false => {
                let s = self.ctx.signals;
                let what = match (s.reports, s.shutdown) {
                    (true, true) => "no final report from the host and no power off",
                    (true, false) => "no final report from the host",
                    _ => "the host did not power off",
                };
                format!(
                    "{what} within {} s (--report-timeout; a re-run waits again without a new boot)",
                    o.timeouts.report.as_secs()
                )
            }
        }
    }

    /// Whether a power read was started (a BMC thread was free and the System is known).
    fn start_power_read(&mut self, i: usize) -> bool {
        if !self.bmc.has_room() {
            return false;
        }
        let s = &self.sites[i];
        let Ok(bmc) = &s.t.bmc else { return true };
        let path = s
            .rec
            .as_ref()
            .and_then(|r| r.state.bmc.as_ref())
            .and_then(|b| b.system.clone());
        // Resumed without the System recorded: only a report or the timeout can end the wait.
        let Some(path) = path else { return true };
        let (bmc, tx) = (bmc.clone(), self.tx.clone());
        self.sites[i].busy = true;
        let panicked = on_panic(&tx, Worker::Bmc, i, "power read");
        self.sites[i].job = "power read";
        self.bmc.run(
            move || {
                let result = power(&bmc, &path);
                let _ = tx.send(Msg::Power(i, result));
            },
            panicked,
        );
        true
    }

    /// Whether a look was started (a look thread was free).
    fn start_look(&mut self, i: usize) -> bool {
        let Some(pool) = self.looks.as_mut() else {
            return true;
        };
        if !pool.has_room() {
            return false;
        }
        let Some(mut w) = self.sites[i].watcher.take() else {
            return true;
        };
        let tx = self.tx.clone();
        self.sites[i].busy = true;
        let panicked = on_panic(&tx, Worker::Look, i, "cluster look");
        self.sites[i].job = "cluster look";
        pool.run(
            move || {
                let result = w.look(&mut |_| {});
                let _ = tx.send(Msg::Looked(i, w, result));
            },
            panicked,
        );
        true
    }

    fn handle(&mut self, m: Msg) {
        match m {
            Msg::Job(end) => {
                let JobEnd {
                    i,
                    at,
                    rec,
                    result,
                    seen,
                } = *end;
                self.bmc.done();
                if let Some(seen) = seen {
                    self.sites[i].sent_seen = seen;
                }
                self.back(i, rec);
                self.job_ended(i, at, result);
            }
            Msg::Power(i, result) => {
                self.bmc.done();
                self.sites[i].busy = false;
                match result {
                    Ok(Some(PowerState::Off)) => {
                        self.progress
                            .line(&self.sites[i].t.name, "the host powered off");
                        self.decide(i, Event::HostEnded(Ok(())));
                    }
                    Ok(_) => {}
                    // A BMC that does not answer one poll is asked again at the next.
                    Err(e) => {
                        tracing::warn!("site {}: reading the power: {e:#}", self.sites[i].t.name)
                    }
                }
            }
            Msg::Panicked(worker, i, what, message) => self.panicked(worker, i, what, &message),
            Msg::Looked(i, w, result) => {
                if let Some(p) = self.looks.as_mut() {
                    p.done();
                }
                self.sites[i].busy = false;
                self.sites[i].watcher = Some(w);
                match result {
                    Ok(true) => {
                        self.progress.line(&self.sites[i].t.name, "watch: ready");
                        self.decide(i, Event::ClusterReady);
                    }
                    Ok(false) => {}
                    Err(e) => self.decide(i, Event::LookFailed(format!("{e:#}"))),
                }
            }
        }
    }

    /// A job of the site's panicked (a bug, or a reply nobody foresaw): the site ends failed with
    /// it, its record as the job last saved it, and the run goes on.
    fn panicked(&mut self, worker: Worker, i: usize, what: &'static str, message: &str) {
        match worker {
            Worker::Bmc => self.bmc.done(),
            Worker::Look => {
                if let Some(p) = self.looks.as_mut() {
                    p.done();
                }
            }
        }
        let o = self.ctx.opts;
        let t = self.sites[i].t;
        self.sites[i].busy = false;
        if self.sites[i].rec.is_none() {
            // The record went with the job: what it saved is on disk.
            self.sites[i].rec = Record::open(&o.base, &t.name, o.phase, &t.address).ok();
        }
        let (job, message) = (what, message.to_string());
        self.decide(i, Event::Panicked { job, message });
    }

    fn back(&mut self, i: usize, rec: Record) {
        self.sites[i].busy = false;
        self.sites[i].rec = Some(rec);
        self.flush_bytes(i);
    }

    /// A BMC job ended: the boot's System is saved first (the power read and the UUID check use
    /// it), then the step model decides.
    fn job_ended(&mut self, i: usize, at: Step, result: Result<boot::Report>) {
        let result = match result {
            Ok(report) if at == Step::Boot => {
                let saved = self.sites[i].rec.as_mut().map_or(Ok(()), |rec| {
                    rec.system(&report.system, report.uuid.clone())
                });
                if let Err(e) = saved {
                    return self.finish(i, Err(step::not_saved(at, &e)));
                }
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(e) => Err(format!("{e:#}")),
        };
        self.decide(i, Event::JobEnded(result));
    }

    /// Carries out what the step model decides for `event` at the site's step.
    fn decide(&mut self, i: usize, event: Event) {
        let Stage::At(at) = self.sites[i].stage else {
            return;
        };
        let name = &self.sites[i].t.name;
        match step::next(self.ctx.opts.phase, name, at, event) {
            Action::Go { done, next } => self.go(i, done, next),
            Action::Finish(Ok(done)) => {
                self.progress.line(name, &format!("{done}: done"));
                self.finish(i, Ok(()));
            }
            Action::Finish(Err(f)) => self.finish(i, Err(f)),
            Action::Stay => {}
        }
    }

    /// `done` is finished: `next` is saved as the site's step before it starts; a wait starts at
    /// once, a job when a BMC thread is free.
    fn go(&mut self, i: usize, done: Step, next: Step) {
        let saved = self.sites[i].rec.as_mut().map_or(Ok(()), |r| r.step(next));
        if let Err(e) = saved {
            return self.finish(i, Err(step::not_saved(done, &e)));
        }
        self.progress
            .line(&self.sites[i].t.name, &format!("{done}: done"));
        self.sites[i].stage = Stage::At(next);
        if next.job().is_none() {
            self.enter_wait(i);
        }
    }

    /// The wait starts (again): its timeout runs from now; a watch opens the cluster's.
    fn enter_wait(&mut self, i: usize) {
        let o = self.ctx.opts;
        let watching = self.watching(i);
        let timeout = match watching {
            false => o.timeouts.report,
            true => o.timeouts.watch,
        };
        let s = &mut self.sites[i];
        s.deadline = Some(Instant::now() + timeout);
        s.next_look = Instant::now();
        if watching {
            let shipped = s
                .rec
                .as_ref()
                .and_then(|r| r.get())
                .and_then(|p| p.shipped.clone());
            match Watcher::open_expecting(&s.t.dir, shipped) {
                Ok(w) => s.watcher = Some(Box::new(w)),
                Err(e) => self.decide(i, Event::LookFailed(format!("{e:#}"))),
            }
        }
    }

    /// The site's end in this run, saved.
    fn finish(&mut self, i: usize, result: Result<(), Failure>) {
        self.flush_bytes(i);
        let s = &mut self.sites[i];
        let text = result.as_ref().map(|_| ()).map_err(Failure::to_string);
        let saved = s.rec.as_mut().map_or(Ok(()), |r| r.finish(&text));
        s.stage = Stage::Finished;
        s.watcher = None;
        let ending = match (result, saved) {
            (Ok(()), Ok(())) => Ending::Done,
            (Err(e), saved) => Ending::Failed(unsaved(e, saved)),
            (Ok(()), Err(e)) => Ending::Failed(Failure::Record(format!(
                "recording the end: {e:#}; `ibi status` still shows the site as it was before"
            ))),
        };
        match &ending {
            Ending::Failed(e) => self.progress.failed(&s.t.name, &e.to_string()),
            _ => self.progress.line(&s.t.name, "done"),
        }
        s.ending = Some(ending);
    }

    /// The bytes the server sent for this site's image since the last look, added to its record.
    fn flush_bytes(&mut self, i: usize) {
        let now = self.ctx.server.sent(&self.sites[i].t.alias.name);
        let s = &mut self.sites[i];
        if let Some(rec) = s.rec.as_mut() {
            let new = now.saturating_sub(s.sent_seen);
            if rec.add_bytes(new).is_ok() {
                s.sent_seen = now;
            }
        }
    }

    /// The URL this site's image is served at (a capability: kept in a `Secret`).
    fn url(&self, t: &Target) -> Result<Secret> {
        self.ctx
            .server
            .entries()
            .into_iter()
            .find(|e| e.name == t.alias.name)
            .map(|e| Secret::new(e.url))
            .with_context(|| format!("{} is not served", t.alias.name))
    }
}

/// A site's failure `e`, with what went wrong saving it, if anything did: its record then still
/// shows the state before, and the user must hear that.
fn unsaved(e: Failure, saved: Result<()>) -> Failure {
    match saved {
        Ok(()) => e,
        Err(why) => Failure::Unsaved(Box::new(e), format!("{why:#}")),
    }
}

fn record_failure(rec: &mut Record, e: &str) -> Result<()> {
    if rec.get().is_none() {
        // Failed before its boot began: still recorded, so `ibi status` shows why.
        rec.begin()?;
    }
    rec.finish(&Err(e.to_string()))
}

fn request(bmc: &Bmc, job: Job, o: &DeployOptions) -> BootRequest {
    BootRequest {
        bmc: bmc.url.clone(),
        system_id: bmc.system.clone(),
        client: bmc.client.clone(),
        job,
        timeout: o.timeouts.bmc,
        patience: Patience::default(),
    }
}

/// The System's `PowerState`.
fn power(bmc: &Bmc, system_path: &str) -> Result<Option<PowerState>> {
    let mut c = Client::new(&bmc.url, bmc.client.clone())?;
    let sys = system::read_system(&mut c, system_path)?;
    let state = system::power_state(&mut c, &sys);
    c.logout();
    state.map_err(|e| anyhow!("{e:#}"))
}

/// How a site ended, as the summary shows it; `interrupted_at`, when the first signal came.
pub fn outcome(
    o: &DeployOptions,
    t: &Target,
    ending: Option<Ending>,
    interrupted_at: Option<u64>,
) -> SiteOutcome {
    let rec = Record::open(&o.base, &t.name, o.phase, &t.address).ok();
    let phase = rec.as_ref().and_then(|r| r.get().cloned());
    let took = phase.as_ref().map_or(Duration::ZERO, |p| {
        // Under way when interrupted: the time to the interruption.
        let end = match (&ending, interrupted_at) {
            (None, Some(at)) => at,
            _ => p.finished.unwrap_or(p.updated),
        };
        Duration::from_secs(end.saturating_sub(p.started))
    });
    SiteOutcome {
        site: t.name.clone(),
        bmc: t.address.clone(),
        phase: o.phase,
        ending: ending.unwrap_or_else(|| {
            Ending::Interrupted(
                phase
                    .as_ref()
                    .map_or(Step::Boot.name().into(), |p| p.step.clone()),
            )
        }),
        took,
        bytes_served: phase.map_or(0, |p| p.bytes_served),
    }
}

/// How much of a UUID a warning shows (a UUID has 36 characters; the text is the sender's).
const UUID_SHOWN: usize = 64;

/// Why a host's DMI UUID and its BMC's `UUID` differ, or `None` when they are the same (case
/// aside). SMBIOS before 2.6 stored the first three fields little-endian, and some firmware still
/// shows them swapped on one side.
fn uuid_mismatch(bmc: &str, host: &str) -> Option<&'static str> {
    let (bmc, host) = (bmc.to_ascii_lowercase(), host.to_ascii_lowercase());
    if bmc == host {
        return None;
    }
    let swapped = |u: &str| -> Option<String> {
        // Sent by a host or a BMC: only hex digits and dashes are sliced by byte.
        if !u.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return None;
        }
        let f: Vec<&str> = u.split('-').collect();
        if f.len() != 5 || f[..3].iter().any(|x| x.len() % 2 != 0) {
            return None;
        }
        let rev = |x: &str| -> String {
            (0..x.len() / 2)
                .rev()
                .map(|i| &x[2 * i..2 * i + 2])
                .collect()
        };
        Some(format!(
            "{}-{}-{}-{}-{}",
            rev(f[0]),
            rev(f[1]),
            rev(f[2]),
            f[3],
            f[4]
        ))
    };
    if swapped(&bmc).is_some_and(|s| s == host) {
        Some(
            "the same UUID with its first three fields byte-swapped (firmware that stores them little-endian); the host's own report token identified it",
        )
    } else {
        Some(
            "check that the inventory names this host's BMC (the host's own report token identified the site)",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::uuid_mismatch;

    #[test]
    fn a_byte_swapped_uuid_is_named_as_such_and_another_is_a_mismatch() {
        let bmc = "27946b59-9e44-4fa7-8e91-f3527a1ef094";
        assert_eq!(uuid_mismatch(bmc, &bmc.to_uppercase()), None);
        let swapped = "596b9427-449e-a74f-8e91-f3527a1ef094";
        assert!(
            uuid_mismatch(bmc, swapped)
                .unwrap()
                .contains("byte-swapped")
        );
        assert!(
            uuid_mismatch(bmc, "d4d4d4d4-0000-4000-8000-00000000000d")
                .unwrap()
                .contains("inventory")
        );
        assert!(
            uuid_mismatch(bmc, "not-a-uuid")
                .unwrap()
                .contains("inventory")
        );
    }
}
