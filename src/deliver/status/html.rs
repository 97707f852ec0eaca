//! `ibi status --html`: the fleet as one self-contained HTML5 page, for a ticket, an email or a
//! screen on the wall. The page carries its own CSS and nothing else: no script, no image, no font,
//! no URL of any kind, and a Content-Security-Policy that lets a browser load nothing and run
//! nothing, even if something slipped through. It says what the text table says, with the same
//! functions (`render`'s cells, failure lines, notes, counts and deploy line): the failures first,
//! with their journal lines, then one row per host with a bar for the steps of its current phase.
//!
//! Every text from outside (a host's name, step, error and journal lines; a site's or a file's
//! name; BASE) goes through [`esc`]: control characters are written out as the terminal table writes
//! them (the Unicode controls that reorder or break lines too), then `& < > " '` become
//! character references, so host text stays text wherever it lands, in an element or an attribute.

use super::fleet::{DeployRun, Fleet, HostStatus};
use super::render::{
    FACTORY, NO_JOURNAL, age, cells, damaged_line, deploy_line, failure_line, failures, notes,
    state_of, store_lines, summary, who,
};
use crate::contract::agent_status::RunState;
use crate::deliver::deploy::{Step, first_wait, steps};
use crate::util::lock::rfc3339;
use crate::util::text::escape_control;

/// The page holds no secret (host names, steps, errors, journal lines the agent filtered): readable
/// by whoever serves or mails it.
pub const HTML_FILE_MODE: u32 = 0o644;

/// Nothing may be fetched, framed or run; only the page's own `<style>`.
const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";
/// The live page's: also its own script ([`LIVE_SCRIPT`], from the server that sent the page) and
/// that script's fetch of the page again; nothing inline runs.
pub(super) const LIVE_CSP: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; \
     style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'";

/// The live page's script, served beside it as `live.js`: it fetches the page again every few
/// seconds and puts the new body in place of the old, so the page changes without a reload.
pub const LIVE_SCRIPT: &str = include_str!("live.js");

/// Which page: the file `--html` writes, or the one a running server serves.
enum Kind<'a> {
    File,
    Live { preflight: Option<&'a str> },
}

const STYLE: &str = "\
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1b1b;background:#fff}
h1{font-size:1.4em;margin:0 0 .3em}
h2{font-size:1.1em;margin:1.2em 0 .4em}
h3{font-size:1em;margin:.2em 0}
code,pre,td{font-family:ui-monospace,monospace}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:.25em .6em;border-bottom:1px solid #ddd;vertical-align:top}
th{background:#f3f3f3;position:sticky;top:0;font-family:system-ui,sans-serif}
tr.failed td{background:#fdecea}
tr.damaged td{background:#fff4e5}
td.state{font-weight:600}
.failed .state,.failure h3{color:#b00020}
.running .state{color:#0b57d0}
.done .state{color:#137333}
progress{width:6em;accent-color:#0b57d0;vertical-align:middle}
.done progress{accent-color:#137333}
.failed progress{accent-color:#b00020}
.failure{border-left:4px solid #b00020;padding:.2em .8em;margin:.6em 0;background:#fdecea}
.failure p{margin:.2em 0;font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:break-word}
pre{white-space:pre-wrap;word-break:break-all;background:#fff;padding:.5em;margin:.3em 0;font-size:12px}
.deploy,.summary{margin:.2em 0}
#live{margin:.2em 0;color:#555;font-size:.9em}
";

/// The table's columns; [`row`] fills them in this order.
const COLUMNS: [&str; 12] = [
    "Site",
    "Host",
    "Phase",
    "Result",
    "Step",
    "Progress",
    "In step",
    "Last report",
    "Factory",
    "Site phase",
    "BMC",
    "System",
];

/// `text` safe anywhere in the page (element content, double- or single-quoted attribute):
/// [`escape_control`] (control characters and the Unicode ones that reorder or break a line written
/// out, `\u{202e}`), then `& < > " '` as character references.
pub(super) fn esc(text: &str) -> String {
    let text = escape_control(text);
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Where `h`'s current phase stands in that phase's table of steps (`deploy::steps`, the one table
/// deploy decides by): `(steps done, steps)`. The step shown is deploy's word, or the host's own
/// (not one of deploy's), which speaks only while deploy waits for the host: the phase's first
/// wait. `None` for a damaged record or a deploy step the phase does not have.
pub(super) fn progress(h: &HostStatus) -> Option<(usize, usize)> {
    if h.damaged.is_some() {
        return None;
    }
    let phase = h.phase();
    let table = steps(phase);
    let Some(p) = h.current() else {
        return Some((0, table.len()));
    };
    if p.state == RunState::Done {
        return Some((table.len(), table.len()));
    }
    let at = Step::parse(&p.step).unwrap_or(first_wait(phase));
    table
        .iter()
        .position(|s| *s == at)
        .map(|i| (i, table.len()))
}

/// The whole page, as `--html` writes it. `base` is the BASE the fleet was read from, as the user
/// named it.
pub fn render_html(fleet: &Fleet, base: &str, now: u64) -> String {
    render_page(fleet, base, now, Kind::File)
}

/// The page a running server serves (`--dashboard`): the same, with [`LIVE_SCRIPT`] to keep it
/// current and, from deploy, the pre-flight's result.
pub fn render_live(fleet: &Fleet, base: &str, now: u64, preflight: Option<&str>) -> String {
    render_page(fleet, base, now, Kind::Live { preflight })
}

fn render_page(fleet: &Fleet, base: &str, now: u64, kind: Kind) -> String {
    let mut page = String::with_capacity(4096 + fleet.hosts.len() * 1024);
    page.push_str(&head(base, &kind));
    page.push_str("<body>\n");
    page.push_str(&header(fleet, base, now, &kind));
    page.push_str(&failures_section(fleet));
    page.push_str(&list_section(
        "problems",
        "Could not be read",
        &problem_lines(fleet),
    ));
    page.push_str(&table(fleet, now));
    page.push_str(&list_section("notes", "Not counted", &note_lines(fleet)));
    if let Kind::Live {
        preflight: Some(text),
    } = kind
    {
        let lines: Vec<String> = text.lines().map(esc).collect();
        page.push_str(&format!(
            "<section id=\"preflight\">\n<h2>Pre-flight</h2>\n<pre>{}</pre>\n</section>\n",
            lines.join("\n")
        ));
    }
    page.push_str("</body>\n</html>\n");
    page
}

fn head(base: &str, kind: &Kind) -> String {
    let (csp, script) = match kind {
        Kind::File => (CSP, ""),
        // Relative: the page is `/TOKEN/`, its script `/TOKEN/live.js`.
        Kind::Live { .. } => (LIVE_CSP, "<script src=\"live.js\" defer></script>\n"),
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n\
         <title>ibi status: {}</title>\n<style>\n{STYLE}</style>\n{script}</head>\n",
        esc(base)
    )
}

fn header(fleet: &Fleet, base: &str, now: u64, kind: &Kind) -> String {
    let generated = rfc3339(now);
    let (class, deploy) = match &fleet.deploy {
        DeployRun::Never => ("never", "deploy: none has run on this BASE".to_string()),
        DeployRun::Running(_) => ("running", deploy_line(&fleet.deploy, now)),
        DeployRun::Unknown { .. } => ("unknown", deploy_line(&fleet.deploy, now)),
        DeployRun::Stopped(_) | DeployRun::Killed(_) => {
            ("stopped", deploy_line(&fleet.deploy, now))
        }
    };
    format!(
        "<header>\n<h1>ibi status: <code>{}</code></h1>\n\
         <p>Generated at <time datetime=\"{generated}\">{generated}</time> by ibi {} from the reports, \
         deploy's records and deploy's lock under <code>{}/.ibi/</code>.</p>\n\
         <p class=\"deploy {class}\" id=\"deploy\">{}</p>\n<p class=\"summary\" id=\"summary\">{}</p>\n{}</header>\n",
        esc(base),
        env!("CARGO_PKG_VERSION"),
        esc(base),
        esc(deploy.trim_end()),
        esc(summary(&fleet.hosts).trim_end()),
        match kind {
            Kind::File => "",
            // The script says when it last updated the page, or that it could not.
            Kind::Live { .. } => {
                "<p id=\"live\">Served live: with JavaScript on, this page updates itself; \
                 with it off, reload it to see the fleet now.</p>\n"
            }
        }
    )
}

/// Each failed host: its failure lines as the text prints them, and the factory's journal lines.
fn failures_section(fleet: &Fleet) -> String {
    let failed: Vec<&HostStatus> = fleet.hosts.iter().filter(|h| failed(h)).collect();
    if failed.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<section id=\"failures\">\n<h2>Failed ({})</h2>\n",
        failed.len()
    );
    for h in failed {
        let who = who(h);
        out.push_str(&format!(
            "<article class=\"failure\">\n<h3>{}</h3>\n",
            esc(&who)
        ));
        for (phase, p) in failures(h) {
            out.push_str(&format!(
                "<p class=\"error\">{}</p>\n",
                esc(failure_line(&who, phase, p).trim_end())
            ));
            if phase != FACTORY {
                continue;
            }
            if h.logs.is_empty() {
                out.push_str(&format!("<p class=\"journal\">{NO_JOURNAL}</p>\n"));
            } else {
                let lines: Vec<String> = h.logs.iter().map(|l| esc(l)).collect();
                out.push_str(&format!(
                    "<pre class=\"journal\">{}</pre>\n",
                    lines.join("\n")
                ));
            }
        }
        out.push_str("</article>\n");
    }
    out.push_str("</section>\n");
    out
}

fn failed(h: &HostStatus) -> bool {
    !failures(h).is_empty()
}

/// Damaged records and store lines, as the text names them.
fn problem_lines(fleet: &Fleet) -> Vec<String> {
    let mut lines: Vec<String> = fleet
        .hosts
        .iter()
        .filter_map(|h| damaged_line(h, &who(h)))
        .collect();
    lines.extend(store_lines(fleet).lines().map(str::to_string));
    lines
}

/// What the rows do not count (unverified hosts, superseded records, late reports).
fn note_lines(fleet: &Fleet) -> Vec<String> {
    fleet
        .hosts
        .iter()
        .flat_map(|h| {
            notes(h, &who(h))
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn list_section(id: &str, title: &str, lines: &[String]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "<section id=\"{id}\">\n<h2>{title} ({})</h2>\n<ul>\n",
        lines.len()
    );
    for l in lines {
        out.push_str(&format!("<li>{}</li>\n", esc(l.trim_end())));
    }
    out.push_str("</ul>\n</section>\n");
    out
}

/// One row per host: failed hosts first, then damaged records, then the rest, each in the fleet's
/// order (sites by name, then hosts no site claims).
fn table(fleet: &Fleet, now: u64) -> String {
    let mut hosts: Vec<&HostStatus> = fleet.hosts.iter().collect();
    hosts.sort_by_key(|h| match (failed(h), h.damaged.is_some()) {
        (true, _) => 0,
        (false, true) => 1,
        (false, false) => 2,
    });
    let mut out =
        String::from("<section id=\"hosts\">\n<h2>Hosts</h2>\n<table id=\"fleet\">\n<thead><tr>");
    for c in COLUMNS {
        out.push_str(&format!("<th>{c}</th>"));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for h in hosts {
        out.push_str(&row(h, now));
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
    out
}

fn row(h: &HostStatus, now: u64) -> String {
    let [site, bmc, system, host, factory, site_phase, step, in_step] = cells(h, now);
    let state = state_of(h);
    let reported = h.reported.map_or("-".to_string(), |t| {
        let at = rfc3339(t);
        format!(
            "<time datetime=\"{at}\" title=\"{at}\">{} ago</time>",
            age(t, now)
        )
    });
    let cells = [
        esc(&site),
        esc(&host),
        h.phase().name().to_string(),
        state.to_string(),
        esc(&step),
        progress_cell(h),
        esc(&in_step),
        reported,
        esc(&factory),
        esc(&site_phase),
        esc(&bmc),
        esc(&system),
    ];
    let mut out = format!("<tr class=\"{state}\" data-site=\"{}\">", esc(&site));
    for (name, cell) in COLUMNS.iter().zip(cells) {
        let class = match *name {
            "Result" => " class=\"state\"",
            "Progress" => " class=\"progress\"",
            _ => "",
        };
        out.push_str(&format!("<td{class}>{cell}</td>"));
    }
    out.push_str("</tr>\n");
    out
}

/// A bar and its count (`1/3`), readable without the bar; the title names the phase's steps.
fn progress_cell(h: &HostStatus) -> String {
    let Some((done, of)) = progress(h) else {
        return "-".to_string();
    };
    let phase = h.phase();
    let names: Vec<&str> = steps(phase).iter().map(|s| s.name()).collect();
    format!(
        "<progress max=\"{of}\" value=\"{done}\" title=\"the {} phase: {}\">{done}/{of}</progress> \
         <span class=\"steps\">{done}/{of}</span>",
        phase.name(),
        names.join(", ")
    )
}
