//! What `ibi deploy` asks of the reports a fleet's hosts sent `ibi serve` (factory phase): the reports of
//! one host, tied to its site by the System UUID read from the BMC (the DMI product UUID the host
//! reports), and the one that speaks for it now; deploy's wait polls it beside the host's power.
//! Reports received before `since` (an earlier boot of the same host) never count.

use std::path::Path;

use anyhow::Result;

use super::report_store::{StoredReport, load_reports, supersedes};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::agent_status::{RunState, Status};
    use crate::contract::host_report::{HostIdentity, HostReport, REPORT_VERSION, ReportingAgent};
    use crate::deliver::report_store::ReportStore;

    const UUID: &str = "27946b59-9e44-4fa7-8e91-f3527a1ef094";

    fn stored(uuid: &str, received: u64, state: RunState, finished: bool) -> StoredReport {
        let mut status = Status::idle(received);
        status.state = state;
        StoredReport {
            received,
            client: "127.0.0.1:1".into(),
            site: None,
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
    }
}
