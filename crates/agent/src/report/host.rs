//! What a report needs from the live system: the settings Ignition wrote (`/var/tmp/ibi-report.json`),
//! who this host is, the secrets to keep out of what is sent, and the tail of the install unit's journal.
//! Every path is under the live system's root (`--root`), so a test can play the host from a directory.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tracing::warn;

use super::Reporter;
use crate::cmd;
use contract::host_report::{
    BOOT_ID_PATH, HostIdentity, MAX_LOG_LINES, PRODUCT_UUID_PATH, ReportConfig,
};
use contract::pull_secret::parse_pull_secret;
use util::fs::read_input_file;
use util::secret::Secret;

const MAX_SMALL_FILE: u64 = 1 << 20;
/// The kernel's host name, under the root.
const HOSTNAME_PATH: &str = "/proc/sys/kernel/hostname";

/// Where the install finds what reporting needs.
#[derive(Debug, Clone)]
pub struct ReporterSetup {
    /// The report settings; no file: no reports.
    pub config_file: PathBuf,
    /// The live system's root, for the identity files.
    pub root: PathBuf,
    /// The pull secret, whose credentials are scrubbed from the journal lines sent.
    pub authfile: Option<PathBuf>,
    /// The program run as `<journalctl> --boot --unit <unit> …` for the journal's tail.
    pub journalctl: String,
    pub unit: String,
}

impl ReporterSetup {
    /// A started reporter when the settings file exists, `None` when it does not (an ISO built
    /// without `statusURL`). A settings file that cannot be used is an error for the caller to log:
    /// reporting must not stop the install.
    pub fn start(&self) -> Result<Option<Reporter>> {
        let Some(config) = load_report_config(&self.config_file)? else {
            return Ok(None);
        };
        let secrets = match &self.authfile {
            Some(path) => pull_secret_values(path),
            None => Vec::new(),
        };
        let identity = read_identity(&self.root);
        Reporter::start(config, identity, secrets).map(Some)
    }

    /// The last lines of the install unit's journal (unfiltered: the reporter filters what it sends).
    pub(crate) fn journal(&self) -> Vec<String> {
        journal_tail(&self.journalctl, &self.unit)
    }
}

/// The settings file, if there is one. Errors name the file, never its content (it holds the token).
pub(crate) fn load_report_config(path: &Path) -> Result<Option<ReportConfig>> {
    if !path.exists() {
        return Ok(None);
    }
    let bytes = read_input_file(path, MAX_SMALL_FILE)
        .with_context(|| format!("reading the report settings {}", path.display()))?;
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a report settings file ({:?} error at line {}, column {})",
            path.display(),
            e.classify(),
            e.line(),
            e.column()
        )
    })
}

/// Host name, DMI product UUID (lower case) and boot ID, read under `root`; what cannot be read is
/// left out.
pub(crate) fn read_identity(root: &Path) -> HostIdentity {
    let read = |p: &str| {
        std::fs::read_to_string(root.join(p.trim_start_matches('/')))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    };
    HostIdentity {
        hostname: read(HOSTNAME_PATH).unwrap_or_default(),
        product_uuid: read(PRODUCT_UUID_PATH).map(|u| u.to_ascii_lowercase()),
        boot_id: read(BOOT_ID_PATH),
    }
}

/// Every credential of the pull secret at `path`; none (with a warning) when it cannot be read.
fn pull_secret_values(path: &Path) -> Vec<Secret> {
    let text = match read_input_file(path, MAX_SMALL_FILE) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            warn!(target: "ibi::agent::report::host", "reports: {:#}", anyhow::Error::new(e));
            return Vec::new();
        }
    };
    match parse_pull_secret(&text) {
        Ok(ps) => ps.secret_values(),
        Err(e) => {
            warn!(target: "ibi::agent::report::host", "reports: {}: {e}", path.display());
            Vec::new()
        }
    }
}

/// The last [`MAX_LOG_LINES`] lines of `unit`'s journal in this boot; a single line saying why when
/// the journal cannot be read.
pub(crate) fn journal_tail(journalctl: &str, unit: &str) -> Vec<String> {
    let lines = MAX_LOG_LINES.to_string();
    let argv = cmd::argv(
        journalctl,
        &[
            "--boot",
            "--unit",
            unit,
            "--lines",
            &lines,
            "--output",
            "short-iso",
            "--no-pager",
        ],
    );
    match cmd::run(&argv) {
        Ok(out) => out.lines().map(str::to_string).collect(),
        Err(e) => vec![format!("(the journal could not be read: {e:#})")],
    }
}

#[cfg(test)]
mod tests;
