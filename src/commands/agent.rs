//! `ibi agent install` and `ibi agent fetch-config` (feature `agent`): the host side.

use anyhow::{Result, bail};

use crate::cli::AgentCommand;

pub fn run(cmd: AgentCommand) -> Result<()> {
    match cmd {
        AgentCommand::Install(_) => bail!("agent install: not yet implemented"),
        AgentCommand::FetchConfig(_) => bail!("agent fetch-config: not yet implemented"),
    }
}
