//! One file per command, each a `run(opts)` that composes the modules below it.

#[cfg(feature = "agent")]
mod agent;
mod boot;
mod completion;
mod create_config_image;
mod create_config_template;
mod create_hub_manifests;
mod create_image;
mod deploy;
mod dispatch;
mod inspect;
mod serve;
mod status;
mod watch;

pub use dispatch::{exit_code, report_error, report_usage, run};
