//! What a host's report means for a site, decided here once for every command that acts on it or
//! shows it (`ibi deploy` waits on it, `ibi status` shows it), so ibi never says two things about one
//! host:
//!
//! - **Who speaks for a site.** Only a report that carried the site's own report token (deploy gives
//!   each host its own, in the ISO its BMC downloads). A report with the installation ISO's shared
//!   token speaks for no site, whatever System UUID its body claims: anyone with the ISO has that
//!   token.
//! - **When.** Only within the phase deploy recorded: received strictly after the phase began (a
//!   report of an earlier boot, a failure before a `--redo`, may arrive in that same second) and not
//!   after it ended. A report outside is kept and shown as such, never over a recorded result.
//! - **What it says.** Only a final report (`finished`) ends an install, as done or failed; every
//!   other report says the install is running, at its step.
//!
//! Times are the server's receive times (a live ISO's clock may be anything).

use crate::contract::agent_status::RunState;
use crate::contract::host_report::HostReport;
use crate::deliver::deploy_state::PhaseRecord;
use crate::deliver::report_store::StoredReport;

/// Where a report that carried `site`'s own token stands against the phase `rec` recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Within {
    /// It speaks for the phase.
    Yes,
    /// Received before the phase began (or in its first second): an earlier boot's.
    Before,
    /// Received after the phase ended.
    After,
}

/// Whether `report` speaks for `site`'s phase `rec` (see the module's rules); `None` when it did
/// not carry the site's own token, so it speaks for the site in no phase.
pub fn within(site: &str, rec: &PhaseRecord, report: &StoredReport) -> Option<Within> {
    if report.site.as_deref() != Some(site) {
        return None;
    }
    Some(within_phase(rec, report.received))
}

/// [`within`] for a report already known to carry the site's own token, by its receive time.
pub fn within_phase(rec: &PhaseRecord, received: u64) -> Within {
    if received <= rec.started {
        Within::Before
    } else if rec.finished.is_some_and(|f| received > f) {
        Within::After
    } else {
        Within::Yes
    }
}

/// What the report says of its host's install: its end (`done`, `failed`) when it is the final
/// report, else that the install is running.
pub fn install_state(report: &HostReport) -> RunState {
    match report.finished {
        true => report.status.state,
        false => RunState::Running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::agent_status::Status;
    use crate::contract::host_report::{HostIdentity, REPORT_VERSION, ReportingAgent};

    fn report(site: Option<&str>, received: u64, state: RunState, finished: bool) -> StoredReport {
        let mut status = Status::idle(0);
        status.state = state;
        StoredReport {
            received,
            client: "127.0.0.1:1".into(),
            site: site.map(str::to_string),
            report: HostReport {
                version: REPORT_VERSION,
                agent: ReportingAgent::Lca,
                host: HostIdentity {
                    hostname: "h".into(),
                    product_uuid: None,
                    boot_id: None,
                },
                status,
                finished,
                logs: Vec::new(),
            },
        }
    }

    fn phase(started: u64, finished: Option<u64>) -> PhaseRecord {
        serde_json::from_value(serde_json::json!({
            "state": "running", "step": "wait-report", "started": started, "updated": started,
            "finished": finished,
        }))
        .unwrap()
    }

    #[test]
    fn only_the_sites_own_token_within_its_phase_speaks() {
        let rec = phase(100, Some(200));
        let at = |site, t| within("a17", &rec, &report(site, t, RunState::Done, true));
        assert_eq!(at(None, 150), None, "the shared token speaks for no site");
        assert_eq!(at(Some("b18"), 150), None, "another site's token");
        assert_eq!(
            at(Some("a17"), 100),
            Some(Within::Before),
            "the phase's first second"
        );
        assert_eq!(at(Some("a17"), 101), Some(Within::Yes));
        assert_eq!(at(Some("a17"), 200), Some(Within::Yes));
        assert_eq!(at(Some("a17"), 201), Some(Within::After));
        let open = phase(100, None);
        assert_eq!(within_phase(&open, 10_000), Within::Yes, "still under way");
    }

    #[test]
    fn only_a_final_report_ends_the_install() {
        let state = |s, finished| install_state(&report(None, 0, s, finished).report);
        assert_eq!(state(RunState::Done, true), RunState::Done);
        assert_eq!(state(RunState::Failed, true), RunState::Failed);
        assert_eq!(state(RunState::Failed, false), RunState::Running);
        assert_eq!(state(RunState::Done, false), RunState::Running);
    }
}
