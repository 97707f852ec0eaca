//! Runs the parsed command line, and prints an error as the user reads it.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{Cli, Command, CreateCommand};
use crate::config::ValidationError;
use crate::deliver::watch::NotReady;
use crate::util::interrupt::Interrupted;
use crate::util::text::escape_control_but_newlines;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    if let Command::Create(_) = cli.command {
        // Before any writer thread starts, so the signals reach the handler's thread.
        crate::util::interrupt::install()?;
    }
    match cli.command {
        Command::Create(CreateCommand::ConfigTemplate(o)) => super::create_config_template::run(&o),
        Command::Create(CreateCommand::ConfigImage(o)) => super::create_config_image::run(&o),
        Command::Create(CreateCommand::HubManifests(o)) => super::create_hub_manifests::run(&o),
        Command::Create(CreateCommand::ImageConfigTemplate(o)) => {
            super::create_config_template::run_image(&o)
        }
        Command::Create(CreateCommand::Image(o)) => super::create_image::run(&o),
        Command::Inspect(o) => super::inspect::run(&o),
        #[cfg(feature = "agent")]
        Command::Agent(c) => super::agent::run(c),
        Command::Serve(o) => super::serve::run(&o),
        Command::Boot(o) => super::boot::run(&o),
        Command::Watch(o) => super::watch::run(&o),
        Command::Deploy(o) => super::deploy::run(&o),
        Command::Status(o) => super::status::run(&o),
        Command::Completion(o) => super::completion::run(&o),
    }
}

/// The exit status for a failed run: 2 when a watch ended with the cluster not ready (an outcome
/// scripts branch on, not a failure of ibi), 128 + the signal for an interrupted deploy (130 for
/// SIGINT, 143 for SIGTERM, as a shell reports a killed process), 1 for every error.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<NotReady>().is_some() {
        2
    } else if let Some(Interrupted(sig)) = e.downcast_ref::<Interrupted>() {
        u8::try_from(128 + sig).unwrap_or(1)
    } else {
        1
    }
}

/// Prints a command-line error (or `--help`, `--version`) as clap renders it, with a hint for a
/// subcommand this build lacks. Usage errors exit 1, as every other bad input does (clap's own
/// convention is 2); help and version exit 0.
pub fn report_usage(e: &clap::Error) -> ExitCode {
    // Printing to a closed pipe is no reason to fail differently.
    let _ = e.print();
    if !e.use_stderr() {
        return ExitCode::SUCCESS;
    }
    let args: Vec<String> = std::env::args().collect();
    if let Some(hint) = crate::cli::usage_hint(&args) {
        eprintln!("\nhint: {hint}");
    }
    ExitCode::from(1)
}

/// Prints an error to stderr: validation findings one per line (so the user fixes all of them in
/// one pass), a watch's not-ready outcome as such, anything else with its context chain.
pub fn report_error(e: &anyhow::Error) {
    if let Some(n) = e.downcast_ref::<NotReady>() {
        eprintln!("ibi watch: {n}");
        return;
    }
    if let Some(i) = e.downcast_ref::<Interrupted>() {
        eprintln!("{i}");
        return;
    }
    // An error may carry what a BMC, a host, a cluster or a registry wrote: no control character of
    // theirs reaches the terminal.
    match e.downcast_ref::<ValidationError>() {
        Some(v) => {
            for f in &v.findings {
                eprintln!("error: {}", escape_control_but_newlines(&f.to_string()));
            }
        }
        None => eprintln!("error: {}", escape_control_but_newlines(&format!("{e:#}"))),
    }
}
