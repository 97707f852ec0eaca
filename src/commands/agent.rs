//! `ibi agent install` and `ibi agent fetch-config` (feature `agent`): the host side.

use std::time::Duration;

use anyhow::Result;
use tracing::info;

use crate::agent::fetch_config::{self, FetchConfigOptions, Outcome};
use crate::agent::install::{self, InstallOptions};
use crate::cli::{AgentCommand, AgentFetchConfigOpts, AgentInstallOpts};

pub fn run(cmd: AgentCommand) -> Result<()> {
    match cmd {
        AgentCommand::Install(o) => run_install(*o),
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

fn run_install(o: AgentInstallOpts) -> Result<()> {
    let opts = InstallOptions {
        root: o.root,
        sysroot_mount: o.sysroot_mount,
        containers_mount: o.containers_mount,
        state_file: o.state_file,
        status_file: o.status_file,
        registries_conf: o.registries_conf,
        authfile: o.authfile,
        coreos_installer: o.coreos_installer,
        storage_driver: o.storage_driver,
        fresh: o.fresh,
        report_config: o.report_config,
        ..InstallOptions::new(o.config)
    };
    install::install(&opts)
}
