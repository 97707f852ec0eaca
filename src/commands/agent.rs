//! `ibi agent install` and `ibi agent fetch-config` (feature `agent`): the host side.

use std::time::Duration;

use anyhow::{Result, bail};
use tracing::info;

use crate::agent::fetch_config::{self, FetchConfigOptions, Outcome};
use crate::cli::{AgentCommand, AgentFetchConfigOpts};

pub fn run(cmd: AgentCommand) -> Result<()> {
    match cmd {
        AgentCommand::Install(_) => bail!("agent install: not yet implemented"),
        AgentCommand::FetchConfig(o) => run_fetch_config(&o),
    }
}

fn run_fetch_config(opts: &AgentFetchConfigOpts) -> Result<()> {
    let o = FetchConfigOptions {
        target: opts.target.clone(),
        timeout: opts.timeout.map(Duration::from_secs),
        devices: opts.device.clone(),
        ..FetchConfigOptions::new("/")
    };
    match fetch_config::fetch_config(&o)? {
        Outcome::AlreadyPresent => {
            info!(target = %o.target.display(), "configuration already present")
        }
        Outcome::Copied { device } => {
            info!(device = %device.display(), target = %o.target.display(), "configuration copied");
        }
    }
    Ok(())
}
