//! Logging to stderr through `tracing`, quiet by default so stdout holds results only.

use std::io::IsTerminal;
use std::str::FromStr;

use anyhow::{Context, Result, bail};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// The values `--log-level` takes.
pub const LEVELS: [&str; 6] = ["error", "warn", "info", "debug", "trace", "off"];

/// Sets up the global subscriber. `RUST_LOG`, when set, wins over `--log-level`.
pub fn init(level: &str) -> Result<()> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => {
            check_rust_log(&spec)?;
            EnvFilter::try_new(&spec).context("parsing RUST_LOG")?
        }
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

/// Refuses what `EnvFilter` accepts but cannot be meant: a bare word that is no level (`RUST_LOG=bogus`)
/// is a target filter that enables nothing of ibi's, so even warnings would vanish without a word.
fn check_rust_log(spec: &str) -> Result<()> {
    for directive in spec.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let level = directive.rsplit_once('=').map_or(directive, |(_, l)| l);
        if LevelFilter::from_str(level).is_err() {
            bail!(
                "RUST_LOG: {directive:?} is neither a level ({}) nor TARGET=LEVEL",
                LEVELS.join(", ")
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_takes_levels_and_target_levels_only() {
        for ok in [
            "warn",
            "ibi=debug",
            "info,ibi::seed=trace",
            "OFF",
            " debug , ",
        ] {
            assert!(check_rust_log(ok).is_ok(), "{ok}");
        }
        for (bad, shown) in [("bogus", "\"bogus\""), ("warn,ibi=loud", "\"ibi=loud\"")] {
            let e = check_rust_log(bad).unwrap_err().to_string();
            assert_eq!(
                e,
                format!(
                    "RUST_LOG: {shown} is neither a level (error, warn, info, debug, trace, off) nor TARGET=LEVEL"
                )
            );
        }
    }
}
