//! What `ibi deploy` asks of the reports a fleet's hosts sent `ibi serve` (factory phase): the reports of
//! one host, tied to its site by the System UUID read from the BMC (the DMI product UUID the host
//! reports), the one that speaks for it now, and a bounded wait for its result. Reports received before
//! `since` (an earlier boot of the same host) never count.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::report_store::{StoredReport, load_reports, supersedes};
use crate::contract::agent_status::RunState;

/// How often [`wait_for_result`] reads the store again.
pub const DEFAULT_POLL: Duration = Duration::from_secs(2);

/// How a host's install ended, or that it did not within the wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostResult {
    Done(StoredReport),
    Failed(StoredReport),
    /// No end report in time; the last report received, if any (a host that never reported has none).
    TimedOut(Option<StoredReport>),
}

/// The reports of the host whose System UUID is `uuid` (any case) received at or after `since` (Unix
/// seconds, by the server's clock), in the order received.
pub fn host_reports(base: &Path, uuid: &str, since: u64) -> Result<Vec<StoredReport>> {
    let uuid = uuid.to_ascii_lowercase();
    Ok(load_reports(base)?
        .into_iter()
        .filter(|r| r.received >= since)
        .filter(|r| {
            r.report
                .host
                .product_uuid
                .as_deref()
                .is_some_and(|u| u.eq_ignore_ascii_case(&uuid))
        })
        .collect())
}

/// The report that speaks for the host now ([`host_reports`], then the rule of `ibi status`).
pub fn latest_host_report(base: &Path, uuid: &str, since: u64) -> Result<Option<StoredReport>> {
    let mut latest: Option<StoredReport> = None;
    for r in host_reports(base, uuid, since)? {
        if latest
            .as_ref()
            .is_none_or(|old| supersedes(&r.report, &old.report))
        {
            latest = Some(r);
        }
    }
    Ok(latest)
}

/// The host's result once an end report is in `base`'s store, reading it every `poll` until `timeout`
/// has passed; a failed report carries the error and the journal lines the host sent.
pub fn wait_for_result(
    base: &Path,
    uuid: &str,
    since: u64,
    timeout: Duration,
    poll: Duration,
) -> Result<HostResult> {
    let deadline = Instant::now() + timeout;
    loop {
        let latest = latest_host_report(base, uuid, since)?;
        if let Some(r) = latest.as_ref().filter(|r| r.report.finished) {
            return Ok(match r.report.status.state {
                RunState::Done => HostResult::Done(r.clone()),
                _ => HostResult::Failed(r.clone()),
            });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(HostResult::TimedOut(latest));
        }
        std::thread::sleep(poll.min(left));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::agent_status::Status;
    use crate::contract::host_report::{HostIdentity, HostReport, REPORT_VERSION, ReportingAgent};
    use crate::deliver::report_store::ReportStore;

    const UUID: &str = "27946b59-9e44-4fa7-8e91-f3527a1ef094";

    fn stored(uuid: &str, received: u64, state: RunState, finished: bool) -> StoredReport {
        let mut status = Status::idle(received);
        status.state = state;
        StoredReport {
            received,
            client: "127.0.0.1:1".into(),
            report: HostReport {
                version: REPORT_VERSION,
                agent: ReportingAgent::Lca,
                host: HostIdentity {
                    hostname: "h".into(),
                    product_uuid: Some(uuid.into()),
                    boot_id: Some("b".into()),
                },
                status,
                finished,
                logs: Vec::new(),
            },
        }
    }

    fn store(d: &Path, reports: &[StoredReport]) {
        let mut s = ReportStore::open(d).unwrap();
        for r in reports {
            s.append(r).unwrap();
        }
    }

    #[test]
    fn a_host_is_found_by_uuid_in_any_case_and_older_boots_do_not_count() {
        let d = tempfile::tempdir().unwrap();
        store(
            d.path(),
            &[
                stored(UUID, 10, RunState::Failed, true),
                stored("other", 20, RunState::Done, true),
                stored(UUID, 30, RunState::Running, false),
            ],
        );
        let upper = UUID.to_uppercase();
        assert_eq!(host_reports(d.path(), &upper, 0).unwrap().len(), 2);
        assert_eq!(host_reports(d.path(), UUID, 11).unwrap().len(), 1);
        // The end report of a boot is not undone by a later start report of that boot.
        let latest = latest_host_report(d.path(), UUID, 0).unwrap().unwrap();
        assert_eq!(latest.received, 10);
        assert_eq!(
            wait_for_result(d.path(), UUID, 11, Duration::ZERO, DEFAULT_POLL).unwrap(),
            HostResult::TimedOut(Some(stored(UUID, 30, RunState::Running, false)))
        );
        assert_eq!(
            wait_for_result(d.path(), "nobody", 0, Duration::ZERO, DEFAULT_POLL).unwrap(),
            HostResult::TimedOut(None)
        );
    }

    #[test]
    fn the_wait_ends_with_the_end_report_when_it_arrives() {
        let d = tempfile::tempdir().unwrap();
        store(d.path(), &[stored(UUID, 10, RunState::Running, false)]);
        let dir = d.path().to_path_buf();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            store(&dir, &[stored(UUID, 11, RunState::Failed, true)]);
        });
        // A bound far beyond the writer's delay: the test ends when the report arrives.
        let got = wait_for_result(
            d.path(),
            UUID,
            0,
            Duration::from_secs(300),
            Duration::from_millis(10),
        )
        .unwrap();
        writer.join().unwrap();
        assert_eq!(
            got,
            HostResult::Failed(stored(UUID, 11, RunState::Failed, true))
        );
        store(d.path(), &[stored(UUID, 12, RunState::Done, true)]);
        let done = wait_for_result(d.path(), UUID, 0, Duration::ZERO, DEFAULT_POLL).unwrap();
        assert!(matches!(done, HostResult::Done(r) if r.received == 12));
    }
}
