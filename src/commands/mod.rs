//! One file per command, each a `run(opts)` that composes the modules below it.

#[cfg(feature = "agent")]
mod agent;
mod completion;
pub mod create_config_image;
mod create_config_template;
mod create_image;
mod inspect;

use anyhow::Result;

use crate::cli::{Cli, Command, CreateCommand};
use crate::config::ValidationError;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Create(CreateCommand::ConfigTemplate(o)) => create_config_template::run(&o),
        Command::Create(CreateCommand::ConfigImage(o)) => create_config_image::run(&o),
        Command::Create(CreateCommand::ImageConfigTemplate(o)) => {
            create_config_template::run_image(&o)
        }
        Command::Create(CreateCommand::Image(o)) => create_image::run(&o),
        Command::Inspect(o) => inspect::run(&o),
        #[cfg(feature = "agent")]
        Command::Agent(c) => agent::run(c),
        Command::Completion(o) => completion::run(&o),
    }
}

/// Prints an error to stderr: validation findings one per line (so the user fixes all of them in
/// one pass), anything else with its context chain.
pub fn report_error(e: &anyhow::Error) {
    match e.downcast_ref::<ValidationError>() {
        Some(v) => {
            for f in &v.findings {
                eprintln!("error: {f}");
            }
        }
        None => eprintln!("error: {e:#}"),
    }
}
