//! `ibi completion SHELL`: shell completion scripts generated from the CLI declaration.

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionOpts};

pub fn run(opts: &CompletionOpts) -> Result<()> {
    let mut cmd = Cli::command();
    clap_complete::generate(opts.shell, &mut cmd, "ibi", &mut std::io::stdout());
    Ok(())
}
