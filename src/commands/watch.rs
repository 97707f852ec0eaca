//! `watch`: follow the site's cluster, print one line per milestone as it happens and a summary at
//! the end (or, with --json, one JSON document); a cluster not ready in time exits 2.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result};
use chrono::{DateTime, SecondsFormat, Utc};

use crate::cli::WatchOpts;
use crate::deliver::watch::{self, Event, NotReady, Outcome, WatchRequest, one_shot_expected};
use crate::install_image::build::OUTPUT_FILE;
use crate::install_image::one_shot_check;

pub fn run(o: &WatchOpts) -> Result<()> {
    let one_shot = o.dir.join(OUTPUT_FILE);
    let expected = match o.one_shot {
        true => Some(one_shot_expected(&one_shot)?),
        false => {
            // A one-shot ISO in DIR that carries another configuration: its hosts show that one.
            if let Ok(Some(why)) = one_shot_check::mismatch(&one_shot, &o.dir) {
                tracing::warn!("{why}");
            }
            None
        }
    };
    let req = WatchRequest {
        site_dir: o.dir.clone(),
        timeout: Duration::from_secs(o.timeout),
        interval: o.interval,
        expected,
    };
    let json = o.json;
    let mut print = |e: &Event| {
        let line = event_line(e);
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    let outcome = watch::watch(&req, &mut print)?;
    if json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, &outcome).context("writing the JSON result")?;
        writeln!(out).context("writing the JSON result")?;
    } else {
        print!("{}", summary(&outcome));
    }
    if outcome.ready {
        Ok(())
    } else {
        Err(NotReady(outcome.not_ready_reason()).into())
    }
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `2026-03-02T10:04:10Z  clusterversion  Available=True, …`, or `… not yet: …` / `… lost: …`.
fn event_line(e: &Event) -> String {
    let state = match (e.held, e.lost) {
        (true, _) => "",
        (false, true) => "lost: ",
        (false, false) => "not yet: ",
    };
    format!(
        "{}  {:<15} {state}{}",
        ts(e.at),
        e.milestone.name(),
        e.detail
    )
}

/// The closing table: each milestone, when it first held and how long after the start, and what
/// was seen last.
fn summary(o: &Outcome) -> String {
    let mut s = String::new();
    let elapsed = duration((o.ended - o.started).num_seconds());
    s.push_str(&if o.ready {
        format!("\nready: {} after {elapsed}\n", o.server)
    } else {
        format!("\nnot ready: {} after {elapsed}\n", o.server)
    });
    s.push_str(&format!(
        "{:<15} {:<21} {:>7}  {}\n",
        "MILESTONE", "FIRST HELD", "AFTER", "LAST SEEN"
    ));
    for m in &o.milestones {
        let (first, after) = match m.first_held {
            Some(t) => (ts(t), duration((t - o.started).num_seconds())),
            None => ("-".to_string(), "-".to_string()),
        };
        s.push_str(&format!(
            "{:<15} {first:<21} {after:>7}  {}\n",
            m.milestone.name(),
            m.detail
        ));
    }
    s
}

/// `4m51s`, `1h0m0s`, `7s`.
fn duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m{s}s"),
        _ => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_go_ones() {
        assert_eq!(duration(7), "7s");
        assert_eq!(duration(291), "4m51s");
        assert_eq!(duration(3600), "1h0m0s");
        assert_eq!(duration(-3), "0s");
    }
}
