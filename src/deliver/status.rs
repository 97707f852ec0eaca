//! `ibi status`: where each host of a fleet stands, from what `BASE/.ibi/` holds: the reports the hosts
//! sent `ibi serve` ([`super::report_store`]) and the record `ibi deploy` keeps per site
//! ([`super::deploy_state`]). A site and its host are tied by the System UUID deploy reads from the BMC,
//! which is the DMI product UUID the host reports; a host whose UUID no site claims is shown on its own.
//!
//! For a host, its latest report counts, except that a report of the install's end is not undone by a
//! progress report of the same boot that arrived after it (the lca units post their start and end
//! independently). In the factory phase the newer of the latest report and deploy's factory record
//! speaks; in the site phase, deploy's record. Ages are by the server's clock (the report's arrival),
//! never a live ISO's.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Result, bail};
use serde::Serialize;

use super::deploy_state::{DEPLOY_STATE_DIR, Phase, PhaseRecord, SiteDeployState, load_all};
use super::report_store::{StoredReport, load_reports, supersedes};
use crate::contract::agent_status::RunState;
use crate::contract::host_report::ReportingAgent;

/// One host of the fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostStatus {
    pub site: Option<String>,
    pub bmc: Option<String>,
    /// The System UUID (deploy's, else the reported DMI product UUID).
    pub system: Option<String>,
    pub hostname: Option<String>,
    pub agent: Option<ReportingAgent>,
    pub phase: Phase,
    pub step: String,
    /// `None` before anything happened.
    pub state: Option<RunState>,
    /// Unix seconds of the last news, by the server's clock.
    pub updated: Option<u64>,
    pub error: Option<String>,
    #[serde(skip)]
    pub logs: Vec<String>,
}

/// Every host, sites first (by name), then hosts no site claims; or only `site`'s.
pub fn fleet_status(base: &Path, site: Option<&str>) -> Result<Vec<HostStatus>> {
    let mut reports = latest_by_host(load_reports(base)?);
    let mut rows = Vec::new();
    for state in load_all(base)? {
        let uuid = state
            .bmc
            .as_ref()
            .and_then(|b| b.uuid.as_deref())
            .map(str::to_ascii_lowercase);
        let report = uuid.and_then(|u| reports.remove(&format!("uuid:{u}")));
        rows.push(site_row(&state, report.as_ref()));
    }
    rows.extend(reports.values().map(|r| host_row(r, None)));
    match site {
        None => Ok(rows),
        Some(s) => {
            rows.retain(|r| r.site.as_deref() == Some(s));
            if rows.is_empty() {
                bail!(
                    "site {s}: no record in {} (ibi deploy writes one per site; a host that only reported is listed without a site)",
                    base.join(DEPLOY_STATE_DIR).display()
                );
            }
            Ok(rows)
        }
    }
}

/// The report that speaks for each host, keyed by `uuid:<uuid>` or, without one, `host:<name>`.
fn latest_by_host(all: Vec<StoredReport>) -> BTreeMap<String, StoredReport> {
    let mut latest: BTreeMap<String, StoredReport> = BTreeMap::new();
    for r in all {
        let host = &r.report.host;
        let key = match &host.product_uuid {
            Some(u) => format!("uuid:{}", u.to_ascii_lowercase()),
            None => format!("host:{}", host.hostname),
        };
        let keep_old = latest
            .get(&key)
            .is_some_and(|old| !supersedes(&r.report, &old.report));
        if !keep_old {
            latest.insert(key, r);
        }
    }
    latest
}

fn site_row(state: &SiteDeployState, report: Option<&StoredReport>) -> HostStatus {
    let bmc = state.bmc.as_ref();
    let base = HostStatus {
        site: Some(state.site.clone()),
        bmc: bmc.map(|b| b.address.clone()),
        system: bmc.and_then(|b| b.uuid.clone()),
        ..empty_row(Phase::Factory)
    };
    let deployed = state.current();
    let factory_report = report.filter(|r| {
        deployed.is_none_or(|(p, rec)| p == Phase::Factory && r.received >= rec.updated)
    });
    match (factory_report, deployed) {
        (Some(r), _) => host_row(r, Some(base)),
        (None, Some((phase, rec))) => HostStatus {
            hostname: report.map(|r| r.report.host.hostname.clone()),
            ..deploy_row(phase, rec, base)
        },
        (None, None) => base,
    }
}

fn empty_row(phase: Phase) -> HostStatus {
    HostStatus {
        site: None,
        bmc: None,
        system: None,
        hostname: None,
        agent: None,
        phase,
        step: String::new(),
        state: None,
        updated: None,
        error: None,
        logs: Vec::new(),
    }
}

fn deploy_row(phase: Phase, rec: &PhaseRecord, base: HostStatus) -> HostStatus {
    HostStatus {
        phase,
        step: rec.step.clone(),
        state: Some(rec.state),
        updated: Some(rec.updated),
        error: rec.error.clone(),
        ..base
    }
}

/// A row from a report; `base` carries the site's columns when a site claims the host.
fn host_row(r: &StoredReport, base: Option<HostStatus>) -> HostStatus {
    let rep = &r.report;
    let base = base.unwrap_or_else(|| empty_row(Phase::Factory));
    HostStatus {
        system: base
            .system
            .clone()
            .or_else(|| rep.host.product_uuid.clone()),
        hostname: Some(rep.host.hostname.clone()).filter(|h| !h.is_empty()),
        agent: Some(rep.agent),
        phase: Phase::Factory,
        step: rep.status.step.clone(),
        state: Some(install_state(r)),
        updated: Some(r.received),
        error: rep.status.error.clone(),
        logs: rep.logs.clone(),
        ..base
    }
}

/// The install's state, not the step's: a step done with more to come is a running install.
fn install_state(r: &StoredReport) -> RunState {
    match (r.report.finished, r.report.status.state) {
        (true, s) => s,
        (false, RunState::Failed) => RunState::Failed,
        (false, _) => RunState::Running,
    }
}

fn state_word(s: Option<RunState>) -> &'static str {
    match s {
        None => "pending",
        Some(RunState::Running) => "running",
        Some(RunState::Done) => "done",
        Some(RunState::Failed) => "failed",
    }
}

/// `42s`, `7m`, `3h`, `2d`; a time in the future (another clock) is `0s`.
pub fn age(updated: u64, now: u64) -> String {
    let s = now.saturating_sub(updated);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The table `ibi status` prints, then one line per failed host (with its journal lines when `logs`),
/// then a count.
pub fn render(rows: &[HostStatus], now: u64, logs: bool) -> String {
    let dash = |v: Option<&str>| v.filter(|s| !s.is_empty()).unwrap_or("-").to_string();
    let mut table = vec![
        [
            "SITE", "BMC", "SYSTEM", "HOST", "PHASE", "STEP", "STATE", "AGE",
        ]
        .map(String::from),
    ];
    for r in rows {
        table.push([
            dash(r.site.as_deref()),
            dash(r.bmc.as_deref()),
            dash(r.system.as_deref()),
            dash(r.hostname.as_deref()),
            r.phase.name().to_string(),
            dash(Some(&r.step)),
            state_word(r.state).to_string(),
            r.updated.map_or("-".into(), |u| age(u, now)),
        ]);
    }
    let mut out = columns(&table);
    for r in rows.iter().filter(|r| r.state == Some(RunState::Failed)) {
        out.push_str(&failure_lines(r, logs));
    }
    out.push_str(&summary(rows));
    out
}

fn columns(table: &[[String; 8]]) -> String {
    let mut widths = [0usize; 8];
    for row in table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in table {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn failure_lines(r: &HostStatus, logs: bool) -> String {
    let who = match (&r.site, &r.system, &r.hostname) {
        (Some(s), _, _) => format!("site {s}"),
        (None, Some(u), _) => format!("host {u}"),
        (None, None, h) => format!("host {}", h.as_deref().unwrap_or("-")),
    };
    let step = if r.step.is_empty() {
        String::new()
    } else {
        format!(" at {}", r.step)
    };
    let mut out = format!(
        "{who}: failed{step}: {}\n",
        r.error.as_deref().unwrap_or("no error text")
    );
    if logs {
        if r.logs.is_empty() {
            out.push_str("  (no journal lines were sent)\n");
        }
        for line in &r.logs {
            out.push_str(&format!("  | {line}\n"));
        }
    }
    out
}

fn summary(rows: &[HostStatus]) -> String {
    let count = |s: Option<RunState>| rows.iter().filter(|r| r.state == s).count();
    format!(
        "{} host(s): {} done, {} running, {} failed, {} pending\n",
        rows.len(),
        count(Some(RunState::Done)),
        count(Some(RunState::Running)),
        count(Some(RunState::Failed)),
        count(None)
    )
}

/// `ibi status --json`: `{"hosts": [...]}` with each host's age in seconds, and its journal lines with
/// `logs`.
pub fn render_json(rows: &[HostStatus], now: u64, logs: bool) -> Result<String> {
    let hosts: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r)?;
            v["ageSeconds"] = r.updated.map(|u| now.saturating_sub(u)).into();
            v["state"] = state_word(r.state).into();
            if logs {
                v["logs"] = r.logs.clone().into();
            }
            Ok(v)
        })
        .collect::<Result<_, serde_json::Error>>()?;
    let mut text = serde_json::to_string_pretty(&serde_json::json!({ "hosts": hosts }))?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests;
