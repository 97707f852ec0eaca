//! What the hosts said: the reports the server keeps in `BASE/.ibi/reports.jsonl`, read again only
//! when the file grew, and judged per host by its UUID (the System UUID the BMC showed, which is the
//! host's DMI product UUID) and only from the phase's boot on, so an earlier install's report never
//! counts for this one.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::Result;

use crate::contract::agent_status::RunState;
use crate::deliver::report_store::{REPORTS_FILE, StoredReport, load_reports};

/// Where one host's install stands by its reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    Nothing,
    /// Under way, at this step.
    Running(String),
    Done,
    /// Failed, with the host's error.
    Failed(String),
}

pub struct ReportBook {
    base: PathBuf,
    /// The store's length when last read, and what it held.
    seen: Mutex<(u64, Vec<StoredReport>)>,
}

impl ReportBook {
    pub fn new(base: &Path) -> ReportBook {
        ReportBook {
            base: base.to_path_buf(),
            seen: Mutex::new((0, Vec::new())),
        }
    }

    /// The latest word from host `uuid` received after `since` (Unix seconds).
    pub fn heard(&self, uuid: &str, since: u64) -> Result<Heard> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        // The store is append-only: a new length means new reports.
        let len = std::fs::metadata(self.base.join(REPORTS_FILE)).map_or(0, |m| m.len());
        if len != seen.0 {
            *seen = (len, load_reports(&self.base)?);
        }
        Ok(judge(&seen.1, uuid, since))
    }
}

/// The latest report of `uuid` since `since`; a finished one wins over later step reports (a
/// reporter may retry an older report after its final one).
pub fn judge(reports: &[StoredReport], uuid: &str, since: u64) -> Heard {
    let mine: Vec<&StoredReport> = reports
        .iter()
        // Strictly after: the boot began in that second, and no host reports within it.
        .filter(|r| r.received > since)
        .filter(|r| {
            r.report
                .host
                .product_uuid
                .as_deref()
                .is_some_and(|u| u.eq_ignore_ascii_case(uuid))
        })
        .collect();
    if let Some(end) = mine.iter().rev().find(|r| r.report.finished) {
        let s = &end.report.status;
        return match s.state {
            RunState::Done => Heard::Done,
            _ => Heard::Failed(
                s.error
                    .clone()
                    .unwrap_or_else(|| format!("failed at step {}", s.step)),
            ),
        };
    }
    match mine.last() {
        Some(r) => Heard::Running(r.report.status.step.clone()),
        None => Heard::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::agent_status::Status;
    use crate::contract::host_report::{HostIdentity, HostReport, REPORT_VERSION, ReportingAgent};

    fn stored(
        uuid: &str,
        received: u64,
        step: &str,
        state: RunState,
        finished: bool,
    ) -> StoredReport {
        let mut status = Status::idle(received);
        status.step = step.into();
        status.state = state;
        if state == RunState::Failed {
            status.error = Some("disk not found".into());
        }
        StoredReport {
            received,
            client: "127.0.0.1:1".into(),
            report: HostReport {
                version: REPORT_VERSION,
                agent: ReportingAgent::Lca,
                host: HostIdentity {
                    hostname: "h".into(),
                    product_uuid: Some(uuid.into()),
                    boot_id: None,
                },
                status,
                finished,
                logs: Vec::new(),
            },
        }
    }

    #[test]
    fn only_this_hosts_reports_since_the_boot_count() {
        let r = [
            stored("aa", 5, "x", RunState::Done, true),
            stored("bb", 20, "y", RunState::Done, true),
            stored("aa", 20, "write-rhcos", RunState::Running, false),
        ];
        assert_eq!(judge(&r, "AA", 10), Heard::Running("write-rhcos".into()));
        assert_eq!(judge(&r, "aa", 20), Heard::Nothing, "the boot's own second");
        assert_eq!(judge(&r, "aa", 30), Heard::Nothing);
        assert_eq!(
            judge(&r, "aa", 0),
            Heard::Done,
            "an end wins over a later step"
        );
        let f = [stored("aa", 20, "fetch-seed", RunState::Failed, true)];
        assert_eq!(judge(&f, "aa", 10), Heard::Failed("disk not found".into()));
    }
}
