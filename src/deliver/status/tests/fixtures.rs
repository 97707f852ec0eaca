//! What the tests of `ibi status` build: reports as the server stores them, records as deploy writes
//! them, and a BASE holding both.

use crate::contract::agent_status::{RunState, Status};
use crate::contract::host_report::{HostIdentity, HostReport, REPORT_VERSION, ReportingAgent};
use crate::deliver::deploy_state::{BmcSystem, PhaseRecord, SiteDeployState, save_site};
use crate::deliver::report_store::{ReportStore, StoredReport};
use crate::deliver::status::{HostStatus, fleet_status};

pub const A: &str = "27946b59-9e44-4fa7-8e91-f3527a1ef094";
pub const B: &str = "4c4c4544-0000-0000-0000-000000000000";
/// A time by the workstation's clock (the server's and deploy's).
pub const T: u64 = 1_764_000_000;

pub fn stored(
    uuid: Option<&str>,
    boot: &str,
    step: &str,
    state: RunState,
    finished: bool,
    at: u64,
) -> StoredReport {
    let mut status = Status::idle(at);
    status.step = step.into();
    status.state = state;
    if state == RunState::Failed {
        status.error = Some(format!("{step} broke"));
    }
    StoredReport {
        received: at,
        client: "127.0.0.1:1".into(),
        site: None,
        report: HostReport {
            version: REPORT_VERSION,
            agent: ReportingAgent::Ibi,
            host: HostIdentity {
                hostname: format!("h-{}", uuid.unwrap_or("none")),
                product_uuid: uuid.map(str::to_string),
                boot_id: Some(boot.into()),
            },
            status,
            finished,
            logs: if state == RunState::Failed {
                vec!["first".into(), "last".into()]
            } else {
                Vec::new()
            },
        },
    }
}

/// `r` as sent with `site`'s own report token.
pub fn own(site: &str, mut r: StoredReport) -> StoredReport {
    r.site = Some(site.into());
    r
}

pub fn site(name: &str, uuid: &str) -> SiteDeployState {
    let mut s = SiteDeployState::new(name);
    s.bmc = Some(BmcSystem {
        address: format!("https://bmc-{name}"),
        system: Some("/redfish/v1/Systems/1".into()),
        uuid: Some(uuid.to_ascii_uppercase()),
    });
    s
}

/// Started and updated `at`; built from JSON as deploy writes it, so fields deploy adds with a
/// default leave this alone.
pub fn record(state: RunState, step: &str, at: u64) -> PhaseRecord {
    let error = (state == RunState::Failed).then_some("no answer");
    serde_json::from_value(serde_json::json!({
        "state": state, "step": step, "started": at, "updated": at, "error": error,
    }))
    .unwrap()
}

pub fn base(reports: &[StoredReport], sites: &[SiteDeployState]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let mut store = ReportStore::open(d.path()).unwrap();
    for r in reports {
        store.append(r).unwrap();
    }
    for s in sites {
        save_site(d.path(), s).unwrap();
    }
    d
}

pub fn hosts(d: &tempfile::TempDir) -> Vec<HostStatus> {
    fleet_status(d.path(), None).unwrap().hosts
}

pub fn steps(hosts: &[HostStatus]) -> Vec<(Option<&str>, &str, Option<RunState>)> {
    hosts
        .iter()
        .map(|h| {
            (
                h.site.as_deref(),
                h.current().map_or("", |p| p.step.as_str()),
                h.state(),
            )
        })
        .collect()
}
