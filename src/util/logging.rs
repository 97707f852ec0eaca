//! Logging to stderr through `tracing`, quiet by default so stdout holds results only.

use std::io::IsTerminal;

use anyhow::{Context, Result};
use tracing_subscriber::EnvFilter;

/// Sets up the global subscriber. `RUST_LOG`, when set, wins over `--log-level`.
pub fn init(level: &str) -> Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::try_new(&spec).context("parsing RUST_LOG")?,
        _ => EnvFilter::try_new(level).with_context(|| format!("invalid --log-level {level:?}"))?,
    };
    // A CLI's log is read by people and CI logs: no timestamps, colour only on a terminal.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .without_time()
        .with_target(false)
        .try_init()
        .map_err(|e| anyhow::anyhow!("setting up logging: {e}"))
}
