//! The fleet run: the plan, the server, one thread per site (BMC work bounded by `--parallel`),
//! one progress bar for the phase, and each site's outcome for the summary.

use std::time::Duration;

use anyhow::Result;
use indicatif::ProgressBar;
use tracing::info;

use super::flow::{self, Ctx};
use super::permits::Permits;
use super::plan::{self, DeployOptions, HostSignals, Target};
use super::record::Record;
use crate::contract::agent_status::RunState;
use crate::deliver::deploy_state::Phase;
use crate::deliver::serve::{self, Running, Selection, ServeOptions};
use crate::util::progress::count_bar;

/// deploy's own files beside `ibi serve`'s under BASE/.ibi/.
const MAP_FILE: &str = ".ibi/deploy-served.json";
const ACCESS_LOG: &str = ".ibi/deploy-access.log";

/// How a site's phase ended in this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Done,
    /// Done by an earlier run: nothing was done again.
    DoneEarlier,
    Failed(String),
}

#[derive(Debug, Clone)]
pub struct SiteOutcome {
    pub site: String,
    pub bmc: String,
    pub phase: Phase,
    pub ending: Ending,
    /// The phase's time, from its boot to its end, across runs.
    pub took: Duration,
    pub bytes_served: u64,
}

impl SiteOutcome {
    pub fn failed(&self) -> bool {
        matches!(self.ending, Ending::Failed(_))
    }
}

/// Runs the phase for every site; errors only for what stops the whole run (the inventory, the
/// installation ISO's settings, the server).
pub fn deploy(o: &DeployOptions) -> Result<Vec<SiteOutcome>> {
    let targets = plan::targets(o)?;
    let signals = match o.phase {
        Phase::Factory => plan::factory_signals(&o.base)?,
        Phase::Site => HostSignals {
            reports: false,
            shutdown: false,
        },
    };
    let build_failures = match o.phase {
        Phase::Site => plan::build_missing(o, &targets)?,
        Phase::Factory => Vec::new(),
    };
    let todo: Vec<&Target> = targets
        .iter()
        .filter(|t| !done_earlier(o, t))
        .filter(|t| plan::missing_image(t, &o.base).is_none())
        .collect();
    let server = match todo.is_empty() {
        true => None,
        false => Some(start_server(o, &todo)?),
    };
    let bar = count_bar(targets.len() as u64, o.phase.name());
    let outcomes = match &server {
        Some(server) => {
            let ctx = Ctx {
                opts: o,
                permits: Permits::new(o.parallel),
                server,
                signals,
            };
            run_all(&ctx, &targets, &build_failures, &bar)
        }
        None => targets
            .iter()
            .map(|t| outcome(o, t, not_served(o, t, &build_failures)))
            .collect(),
    };
    bar.finish_and_clear();
    if let Some(s) = server {
        s.stop()?;
    }
    Ok(outcomes)
}

fn done_earlier(o: &DeployOptions, t: &Target) -> bool {
    Record::open(&o.base, &t.name, o.phase, &t.address)
        .ok()
        .and_then(|r| r.get().map(|p| p.state == RunState::Done))
        .unwrap_or(false)
}

fn start_server(o: &DeployOptions, todo: &[&Target]) -> Result<Running> {
    let opts = ServeOptions {
        dir: o.base.clone(),
        listen: o.listen,
        tls: o.tls.clone(),
        public_url: o.public_url.clone(),
        rotate_tokens: false,
        selection: Some(Selection {
            aliases: todo.iter().map(|t| t.alias.clone()).collect(),
            map_file: o.base.join(MAP_FILE),
            access_log: o.base.join(ACCESS_LOG),
        }),
    };
    let running = serve::prepare(&opts)?.start()?;
    info!(
        "serving on {} (access log: {})",
        running.address,
        o.base.join(ACCESS_LOG).display()
    );
    Ok(running)
}

/// Why a site is not served at all: its build failed or its image is missing.
fn not_served(
    o: &DeployOptions,
    t: &Target,
    build_failures: &[(String, String)],
) -> Option<String> {
    if let Some((_, e)) = build_failures.iter().find(|(n, _)| *n == t.name) {
        return Some(e.clone());
    }
    plan::missing_image(t, &o.base)
}

fn run_all(
    ctx: &Ctx,
    targets: &[Target],
    build_failures: &[(String, String)],
    bar: &ProgressBar,
) -> Vec<SiteOutcome> {
    std::thread::scope(|s| {
        let handles: Vec<_> = targets
            .iter()
            .map(|t| {
                s.spawn(move || {
                    let failure = not_served(ctx.opts, t, build_failures);
                    let out = run_one(ctx, t, failure);
                    if let Ending::Failed(e) = &out.ending {
                        bar.suspend(|| eprintln!("error: site {}: {e}", t.name));
                    }
                    bar.inc(1);
                    out
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(targets)
            .map(|(h, t)| {
                h.join().unwrap_or_else(|_| {
                    outcome(ctx.opts, t, Some("the site's thread panicked".into()))
                })
            })
            .collect()
    })
}

/// One site: skipped when done earlier, else its phase, recorded.
fn run_one(ctx: &Ctx, t: &Target, failure: Option<String>) -> SiteOutcome {
    let o = ctx.opts;
    let mut rec = match Record::open(&o.base, &t.name, o.phase, &t.address) {
        Ok(r) => r,
        Err(e) => return outcome(o, t, Some(format!("{e:#}"))),
    };
    if rec.get().is_some_and(|p| p.state == RunState::Done) {
        return outcome(o, t, None);
    }
    let result = match (&failure, &t.bmc) {
        (Some(e), _) | (None, Err(e)) => Err(e.clone()),
        (None, Ok(bmc)) => match o.phase {
            Phase::Factory => flow::factory(ctx, t, bmc, &mut rec),
            Phase::Site => flow::site(ctx, t, bmc, &mut rec),
        }
        .map_err(|e| plan::describe(&e)),
    };
    if rec.get().is_none() {
        // Failed before its boot began: still recorded, so `ibi status` shows why.
        let _ = rec.begin();
    }
    let saved = rec.finish(&result);
    let mut out = outcome(o, t, None);
    out.ending = match (result, saved) {
        (Ok(()), Ok(())) => Ending::Done,
        (Err(e), _) => Ending::Failed(e),
        (Ok(()), Err(e)) => Ending::Failed(format!("recording the end: {e:#}")),
    };
    out
}

/// The site's outcome from its record; `failure` when it failed before its record could say so.
fn outcome(o: &DeployOptions, t: &Target, failure: Option<String>) -> SiteOutcome {
    let rec = Record::open(&o.base, &t.name, o.phase, &t.address).ok();
    let phase = rec.as_ref().and_then(|r| r.get().cloned());
    let took = phase.as_ref().map_or(Duration::ZERO, |p| {
        Duration::from_secs(p.finished.unwrap_or(p.updated).saturating_sub(p.started))
    });
    let ending = match (&failure, &phase) {
        (Some(e), _) => Ending::Failed(e.clone()),
        (None, Some(p)) if p.state == RunState::Done => Ending::DoneEarlier,
        (None, Some(p)) => Ending::Failed(p.error.clone().unwrap_or_else(|| "not done".into())),
        (None, None) => Ending::Failed("not done".into()),
    };
    SiteOutcome {
        site: t.name.clone(),
        bmc: t.address.clone(),
        phase: o.phase,
        ending,
        took,
        bytes_served: phase.map_or(0, |p| p.bytes_served),
    }
}
