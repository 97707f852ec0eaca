//! The fleet run: the plan, the lock on BASE, the hosts' own report tokens, the server, then the
//! engine; each site's outcome for the summary.

use std::collections::HashMap;

use anyhow::Result;
use tracing::info;

use super::engine::{Ctx, Engine, outcome};
use super::plan::{self, DeployOptions, HostSignals, Target};
use super::preflight::{self, Checked};
use super::progress::Progress;
use super::signals::Signals;
use super::summary::SiteOutcome;
use super::tokens;
use crate::deliver::deploy_state::{LOCK_FILE, Phase};
use crate::deliver::serve::catalog::HostToken;
use crate::deliver::serve::{self, Running, Selection, ServeOptions};
use crate::deliver::status;
use crate::util::lock::{self, DirLock, Holder};

/// deploy's own files beside `ibi serve`'s under BASE/.ibi/.
const MAP_FILE: &str = ".ibi/deploy-served.json";
const ACCESS_LOG: &str = ".ibi/deploy-access.log";

/// A run's result: each site's outcome, and the signal that interrupted it, if one did.
#[derive(Debug)]
pub struct Deployed {
    pub outcomes: Vec<SiteOutcome>,
    pub interrupted: Option<i32>,
}

/// Runs the phase for every site; errors only for what stops the whole run (the inventory, the
/// lock, the installation ISO's settings, the server).
pub fn deploy(o: &DeployOptions) -> Result<Deployed> {
    let interrupt = Signals::watch()?;
    let planned = plan::targets(o)?;
    let signals = signals(o)?;
    // Before anything is built, served or touched; after the checks that need no lock, so a run
    // refused for its inputs writes nothing.
    let _lock = take_lock(o)?;
    let checked = preflight::check(o, &planned, signals)?;
    if !checked.findings.is_empty() {
        return Err(Refused(checked).into());
    }
    let targets = planned.targets;
    let mut failed: HashMap<String, String> = match o.phase {
        Phase::Site | Phase::Oneshot => plan::build_missing(o, &targets)?.into_iter().collect(),
        Phase::Factory => HashMap::new(),
    };
    if o.phase == Phase::Oneshot {
        let built: Vec<&Target> = targets
            .iter()
            .filter(|t| !failed.contains_key(&t.name))
            .collect();
        for (site, e) in plan::oneshot_failures(&o.base, &built)? {
            failed.entry(site).or_insert(e);
        }
    }
    for t in &targets {
        if let Some(e) = plan::missing_image(t, &o.base) {
            failed.entry(t.name.clone()).or_insert(e);
        }
    }
    let served: Vec<&Target> = targets
        .iter()
        .filter(|t| !failed.contains_key(&t.name))
        .collect();
    let server = start_server(o, &served, signals, &checked)?;
    let ctx = Ctx {
        opts: o,
        server: &server,
        signals,
        interrupt: interrupt.clone(),
    };
    let progress = Progress::new(targets.len(), o.phase.name());
    interrupt.engine_started();
    let endings = Engine::new(&ctx, &targets, &failed, progress)?.run();
    let outcomes = targets
        .iter()
        .zip(endings)
        .map(|(t, (_, ending))| outcome(o, t, ending, interrupt.at()))
        .collect();
    server.stop()?;
    Ok(Deployed {
        outcomes,
        interrupted: interrupt.first(),
    })
}

/// The pre-flight found something to fix: nothing was touched.
#[derive(Debug, thiserror::Error)]
#[error("pre-flight: {} finding(s), listed above; no host was touched", .0.findings.len())]
pub struct Refused(pub Checked);

/// `ibi deploy --check`: the pre-flight alone, without the lock (it changes nothing).
pub fn check(o: &DeployOptions) -> Result<Checked> {
    let planned = plan::targets(o)?;
    preflight::check(o, &planned, signals(o)?)
}

/// How the phase hears that a host is done (the site phase watches the cluster instead).
fn signals(o: &DeployOptions) -> Result<HostSignals> {
    Ok(match o.phase {
        Phase::Factory | Phase::Oneshot => plan::factory_signals(&o.base)?,
        Phase::Site => HostSignals {
            reports: false,
            shutdown: false,
        },
    })
}

fn take_lock(o: &DeployOptions) -> Result<DirLock> {
    let holder = Holder::me("deploy", Some(o.listen.to_string()));
    lock::acquire(
        &o.base.join(LOCK_FILE),
        holder,
        &o.base.display().to_string(),
    )
}

/// The server for the sites to serve: one URL per host; in the factory each host's own variant of
/// the installation ISO, carrying its own report token, when the hosts report; one-shot, that
/// variant also carrying its site's configuration (the alias names the site).
fn start_server(
    o: &DeployOptions,
    served: &[&Target],
    signals: HostSignals,
    checked: &Checked,
) -> Result<Running> {
    let names: Vec<&str> = served.iter().map(|t| t.name.as_str()).collect();
    let own = match (o.phase, signals.reports) {
        (Phase::Factory | Phase::Oneshot, true) => tokens::load_or_draw(&o.base, &names)?,
        _ => Default::default(),
    };
    let aliases = served
        .iter()
        .map(|t| {
            let mut a = t.alias.clone();
            a.host = own.get(&t.name).map(|token| HostToken {
                site: t.name.clone(),
                token: token.clone(),
            });
            a
        })
        .collect();
    let opts = ServeOptions {
        dir: o.base.clone(),
        listen: o.listen,
        tls: o.tls.clone(),
        public_url: o.public_url.clone(),
        rotate_tokens: false,
        one_shot: false,
        selection: Some(Selection {
            aliases,
            map_file: o.base.join(MAP_FILE),
            access_log: o.base.join(ACCESS_LOG),
        }),
        dashboard: o
            .dashboard
            .then(|| status::dashboard(&o.base, Some(checked.table()))),
    };
    // BMCs behind one address (a NAT, a lab's emulator) may all download at once.
    let per_address = serve::PER_ADDRESS_DEFAULT.max(2 * o.parallel + 16);
    let prepared = serve::prepare(&opts)?;
    if let Some(url) = &prepared.dashboard_url {
        // Printed once, as asked for: the URL is the page's key.
        eprintln!("{}", status::dashboard_line(url.expose_str(), &o.base));
    }
    let running = prepared.per_address(per_address).start()?;
    info!(
        "serving on {} (access log: {})",
        running.address,
        o.base.join(ACCESS_LOG).display()
    );
    Ok(running)
}
