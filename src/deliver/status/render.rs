//! `ibi status`'s output: a table with each phase's result and the current phase's step, a line per
//! failure and per damaged record or store line, a count, and whether a deploy runs on BASE; or the
//! same as JSON. Every text that came from outside (a host's name, step, error and journal lines; a
//! site's file name) is printed with its control characters escaped, so a report cannot move the
//! cursor, clear the screen, retitle the terminal or forge a line.

use anyhow::Result;
use serde_json::{Value, json};

use super::fleet::{DeployRun, Fleet, HostStatus, PhaseStatus};
use crate::contract::agent_status::RunState;
use crate::util::lock::rfc3339;
use crate::util::text::escape_control;

/// Damaged store lines named one by one; the rest are counted.
const DAMAGED_LINES_SHOWN: usize = 10;

pub(super) fn state_word(s: Option<RunState>) -> &'static str {
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

const HEADER: [&str; 8] = [
    "SITE",
    "BMC",
    "SYSTEM",
    "HOST",
    "FACTORY",
    "SITE-PHASE",
    "STEP",
    "AGE",
];

/// The table's cells of `h`, in [`HEADER`]'s order, each escaped.
pub(super) fn cells(h: &HostStatus, now: u64) -> [String; 8] {
    let dash = |v: Option<&str>| escape_control(v.filter(|s| !s.is_empty()).unwrap_or("-"));
    let (factory, site_phase) = match &h.damaged {
        Some(_) => ("damaged", "damaged"),
        None => (
            // A site phase without a factory record: the factory was done without deploy.
            match (&h.factory, &h.site_phase) {
                (None, Some(_)) => "-",
                (f, _) => state_word(f.as_ref().map(|p| p.state)),
            },
            h.site_phase
                .as_ref()
                .map_or("-", |p| state_word(Some(p.state))),
        ),
    };
    let current = h.current();
    [
        dash(h.site.as_deref()),
        dash(h.bmc.as_deref()),
        dash(h.system.as_deref()),
        dash(h.hostname.as_deref()),
        factory.to_string(),
        site_phase.to_string(),
        dash(current.map(|p| p.step.as_str())),
        current.map_or("-".into(), |p| age(p.updated, now)),
    ]
}

/// The text `ibi status` prints (journal lines of failed hosts only with `logs`).
pub fn render(fleet: &Fleet, now: u64, logs: bool) -> String {
    let mut table = vec![HEADER.map(String::from)];
    table.extend(fleet.hosts.iter().map(|h| cells(h, now)));
    let mut out = columns(&table);
    for h in &fleet.hosts {
        out.push_str(&trouble_lines(h, logs));
    }
    out.push_str(&store_lines(fleet));
    out.push_str(&summary(&fleet.hosts));
    out.push_str(&deploy_line(&fleet.deploy, now));
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
        let mut line = String::new();
        for (cell, w) in row.iter().zip(widths) {
            line.push_str(&format!("{cell:<w$}  "));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `site a17` or `host <uuid>`/`host <name>`, escaped.
pub(super) fn who(h: &HostStatus) -> String {
    let who = match (&h.site, &h.system, &h.hostname) {
        (Some(s), _, _) => format!("site {s}"),
        (None, Some(u), _) => format!("host {u}"),
        (None, None, n) => format!("host {}", n.as_deref().unwrap_or("-")),
    };
    escape_control(&who)
}

/// The damaged record, or each failed phase with its error (and the factory's journal lines).
fn trouble_lines(h: &HostStatus, logs: bool) -> String {
    let who = who(h);
    if let Some(line) = damaged_line(h, &who) {
        return line;
    }
    let mut out = notes(h, &who);
    for (phase, p) in failures(h) {
        out.push_str(&failure_line(&who, phase, p));
        if logs && phase == FACTORY {
            if h.logs.is_empty() {
                out.push_str(&format!("  {NO_JOURNAL}\n"));
            }
            for line in &h.logs {
                out.push_str(&format!("  | {}\n", escape_control(line)));
            }
        }
    }
    out
}

/// How [`failures`] names the factory phase; its journal lines are the host's.
pub(super) const FACTORY: &str = "factory";
/// Said where a failed factory phase's journal lines would be.
pub(super) const NO_JOURNAL: &str = "(no journal lines were sent)";

/// The phases of `h` that failed, named as the failure lines name them.
pub(super) fn failures(h: &HostStatus) -> Vec<(&'static str, &PhaseStatus)> {
    [
        (FACTORY, h.factory.as_ref()),
        ("site phase", h.site_phase.as_ref()),
    ]
    .into_iter()
    .filter_map(|(name, p)| Some((name, p.filter(|p| p.state == RunState::Failed)?)))
    .collect()
}

/// The line naming `h`'s damaged record and the way out; `None` when it is not damaged.
pub(super) fn damaged_line(h: &HostStatus, who: &str) -> Option<String> {
    let d = h.damaged.as_ref()?;
    let site = escape_control(h.site.as_deref().unwrap_or("SITE"));
    Some(format!(
        "{who}: record {} is damaged: {}; `ibi deploy ... --redo {site}` starts the site over\n",
        escape_control(&d.file),
        escape_control(&d.problem)
    ))
}

/// What the row does not count, and why: a shared-token host claiming a site, records a later
/// install superseded, own-token reports after the install ended.
pub(super) fn notes(h: &HostStatus, who: &str) -> String {
    let mut out = String::new();
    if let Some(site) = &h.claims_site {
        let site = escape_control(site);
        out.push_str(&format!(
            "{who}: unverified: it reported with the installation ISO's shared token and the System UUID of site {site}'s BMC; only {site}'s own token speaks for {site}\n"
        ));
    }
    for s in &h.superseded {
        out.push_str(&format!(
            "{who}: its {} phase recorded earlier no longer counts: the {} phase booted the host again at {}\n",
            s.phase.name(),
            s.by.name(),
            rfc3339(s.booted)
        ));
    }
    if let Some(l) = &h.late {
        out.push_str(&format!(
            "{who}: {} report(s) with its own token arrived after deploy recorded the install's end at {}: not counted (the last said {} at {})\n",
            l.count,
            rfc3339(l.phase_ended),
            state_word(Some(l.last.state)),
            escape_control(if l.last.step.is_empty() { "-" } else { &l.last.step })
        ));
    }
    out
}

pub(super) fn failure_line(who: &str, phase: &str, p: &PhaseStatus) -> String {
    let step = if p.step.is_empty() {
        String::new()
    } else {
        format!(" at {}", escape_control(&p.step))
    };
    let host = p
        .host_step
        .as_deref()
        .map(|s| format!("; the host last reported step {}", escape_control(s)))
        .unwrap_or_default();
    format!(
        "{who}: {phase} failed{step}: {}{host}\n",
        escape_control(p.error.as_deref().unwrap_or("no error text"))
    )
}

pub(super) fn store_lines(fleet: &Fleet) -> String {
    let file = escape_control(&fleet.reports_file);
    let mut out = String::new();
    for d in fleet.damaged_reports.iter().take(DAMAGED_LINES_SHOWN) {
        out.push_str(&format!(
            "{file}: line {}: {}; skipped, the other reports are shown\n",
            d.line, d.problem
        ));
    }
    let more = fleet
        .damaged_reports
        .len()
        .saturating_sub(DAMAGED_LINES_SHOWN);
    if more > 0 {
        out.push_str(&format!("{file}: {more} more damaged lines skipped\n"));
    }
    out
}

pub(super) fn summary(hosts: &[HostStatus]) -> String {
    let live = || hosts.iter().filter(|h| h.damaged.is_none());
    let count = |s: Option<RunState>| live().filter(|h| h.state() == s).count();
    let damaged = hosts.len() - live().count();
    format!(
        "{} host(s): {} done, {} running, {} failed, {} pending{}\n",
        hosts.len(),
        count(Some(RunState::Done)),
        count(Some(RunState::Running)),
        count(Some(RunState::Failed)),
        count(None),
        if damaged > 0 {
            format!(", {damaged} damaged")
        } else {
            String::new()
        }
    )
}

pub(super) fn deploy_line(run: &DeployRun, now: u64) -> String {
    let line = match run {
        DeployRun::Never => return String::new(),
        DeployRun::Running(h) => format!("deploy: running now: {}", h.describe()),
        DeployRun::Stopped(h) => {
            let stopped = h.stopped.unwrap_or(h.started);
            format!(
                "deploy: not running; the last one, {}, stopped at {} ({} ago)",
                h.describe(),
                rfc3339(stopped),
                age(stopped, now)
            )
        }
        DeployRun::Killed(h) => format!(
            "deploy: not running; the last one, {}, never recorded its stop: it was killed (or its machine went down)",
            h.describe()
        ),
        DeployRun::Unknown { problem } => {
            format!("deploy: cannot tell whether one is running: {problem}")
        }
    };
    format!("{}\n", escape_control(&line))
}

/// The current phase's state word, or `damaged`.
pub(super) fn state_of(h: &HostStatus) -> &'static str {
    match h.damaged {
        Some(_) => "damaged",
        None => state_word(h.state()),
    }
}

fn phase_json(p: Option<&PhaseStatus>, now: u64) -> Result<Value> {
    let Some(p) = p else {
        return Ok(Value::Null);
    };
    let mut v = serde_json::to_value(p)?;
    v["ageSeconds"] = now.saturating_sub(p.updated).into();
    Ok(v)
}

fn host_json(h: &HostStatus, now: u64, logs: bool) -> Result<Value> {
    let mut v = serde_json::to_value(h)?;
    let current = h.current();
    v["factory"] = phase_json(h.factory.as_ref(), now)?;
    v["sitePhase"] = phase_json(h.site_phase.as_ref(), now)?;
    v["phase"] = h.phase().name().into();
    v["step"] = current.map(|p| p.step.clone()).into();
    v["state"] = state_of(h).into();
    v["ageSeconds"] = current.map(|p| now.saturating_sub(p.updated)).into();
    v["error"] = current.and_then(|p| p.error.clone()).into();
    if logs {
        v["logs"] = h.logs.clone().into();
    }
    Ok(v)
}

/// `ibi status --json`: `{"hosts": [...], "damagedReports": [...], "deploy": {...}}`, each host with
/// both phases and its current phase's step, state and age in seconds, and its journal lines with
/// `logs`.
pub fn render_json(fleet: &Fleet, now: u64, logs: bool) -> Result<String> {
    let hosts = fleet
        .hosts
        .iter()
        .map(|h| host_json(h, now, logs))
        .collect::<Result<Vec<_>>>()?;
    let damaged: Vec<Value> = fleet
        .damaged_reports
        .iter()
        .map(|d| json!({"file": fleet.reports_file, "line": d.line, "problem": d.problem}))
        .collect();
    let doc = json!({
        "hosts": hosts,
        "damagedReports": damaged,
        "deploy": serde_json::to_value(&fleet.deploy)?,
    });
    let mut text = escape_json_controls(&serde_json::to_string_pretty(&doc)?);
    text.push('\n');
    Ok(text)
}

/// serde_json escapes C0 controls in strings but leaves DEL and the C1 controls (`\u{9b}` is a
/// terminal's CSI) raw; `\uXXXX` means the same to a JSON reader and nothing to a terminal. Outside
/// strings, pretty JSON has only newlines and spaces.
fn escape_json_controls(json: &str) -> String {
    if !json.chars().any(|c| c.is_control() && c != '\n') {
        return json.to_string();
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c.is_control() && c != '\n' {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}
