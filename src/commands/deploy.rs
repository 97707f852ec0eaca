//! `deploy`: translate the options, deploy the phase to the fleet, print the summary table; exit 1
//! when a site failed (each failure was already on stderr as it happened), 130/143 when interrupted.
//! The pre-flight's findings (or, with `--check`, its result) are a table on stdout.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::cli::{DeployOpts, DeployPhase};
use crate::deliver::deploy::{self, DeployOptions, Refused, Timeouts};
use crate::deliver::deploy_state::Phase;
use crate::util::interrupt::Interrupted;

pub fn run(o: &DeployOpts) -> Result<()> {
    let opts = DeployOptions {
        base: o.dir.clone(),
        inventory: o.sites.clone(),
        phase: match o.phase {
            DeployPhase::Factory => Phase::Factory,
            DeployPhase::Site => Phase::Site,
            DeployPhase::Oneshot => Phase::Oneshot,
        },
        only: o.only.clone(),
        redo: o.redo.clone(),
        parallel: usize::from(o.parallel),
        listen: o.server.listen,
        tls: super::serve::tls_choice(&o.server),
        public_url: o.server.public_url.clone(),
        dashboard: o.server.dashboard,
        timeouts: Timeouts {
            bmc: Duration::from_secs(o.bmc_timeout),
            report: Duration::from_secs(o.report_timeout),
            watch: Duration::from_secs(o.watch_timeout),
            poll: Duration::from_secs(o.poll),
        },
    };
    if o.check {
        let checked = deploy::check(&opts)?;
        print(&checked.table())?;
        if checked.nothing_to_do() {
            eprintln!(
                "nothing to do: every selected site's {} phase is done (--redo SITE does one again)",
                opts.phase.name()
            );
        }
        if !checked.findings.is_empty() {
            bail!(
                "pre-flight: {} finding(s), listed above; nothing was changed",
                checked.findings.len()
            );
        }
        return Ok(());
    }
    let deployed = match deploy::deploy(&opts) {
        Ok(d) => d,
        Err(e) => {
            if let Some(Refused(checked)) = e.downcast_ref::<Refused>() {
                print(&checked.table())?;
            }
            return Err(e);
        }
    };
    let mut out = std::io::stdout().lock();
    write!(out, "{}", deploy::table(&deployed.outcomes))
        .and_then(|()| out.flush())
        .context("writing to stdout")?;
    if let Some(sig) = deployed.interrupted {
        return Err(Interrupted(sig).into());
    }
    let failed = deployed.outcomes.iter().filter(|o| o.failed()).count();
    if failed > 0 {
        bail!(
            "{failed} of {} sites failed (see above; `ibi status --dir {}` shows the fleet)",
            deployed.outcomes.len(),
            o.dir.display()
        );
    }
    Ok(())
}

fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")
}
