//! What deploy says while it runs, on stderr. Off a terminal (a log, CI, a pipe): one line per site
//! and step change (`site a17: boot: done`), so a log shows progress. On a terminal: one bar that
//! counts the sites finished, how many are at each step, and the time since the deploy started.
//! Errors go out as they happen either way (`error: site b: …`). Everything a host, a BMC or a
//! cluster wrote is printed with its control characters escaped.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::util::text::escape_control;

pub struct Progress {
    /// `None` off a terminal.
    bar: Option<ProgressBar>,
}

impl Progress {
    /// For `sites` sites of `phase`: a bar on a terminal, plain lines elsewhere.
    pub fn new(sites: usize, phase: &str) -> Progress {
        Progress::with_terminal(sites, phase, std::io::stderr().is_terminal())
    }

    fn with_terminal(sites: usize, phase: &str, terminal: bool) -> Progress {
        if !terminal {
            eprintln!("deploy: {phase} phase for {sites} site(s)");
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(sites as u64), ProgressDrawTarget::stderr());
        let template = format!(
            "{phase} [{{bar:30}}] {{pos}}/{{len}} sites finished, {{elapsed_precise}} since the start · {{msg}}"
        );
        if let Ok(style) = ProgressStyle::with_template(&template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.enable_steady_tick(Duration::from_secs(1));
        Progress { bar: Some(bar) }
    }

    /// A step change of a site (off a terminal only).
    pub fn line(&self, site: &str, text: &str) {
        if self.bar.is_none() {
            eprintln!("site {}: {}", escape_control(site), escape_control(text));
        }
    }

    /// A line about the whole run (an interrupt), on a terminal too.
    pub fn say(&self, text: &str) {
        let line = escape_control(text);
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// A site's failure, as it happens.
    pub fn failed(&self, site: &str, error: &str) {
        let line = format!(
            "error: site {}: {}",
            escape_control(site),
            escape_control(error)
        );
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// How many sites are at each step; the last two are the finished ones (done, failed).
    pub fn counts(&self, counts: &[(&str, usize)]) {
        let Some(bar) = &self.bar else { return };
        let finished: usize = counts.iter().rev().take(2).map(|(_, n)| n).sum();
        bar.set_position(finished as u64);
        bar.set_message(message(counts));
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// `boot 2 · wait-report 15 · eject 0 · done 40 · failed 1`.
fn message(counts: &[(&str, usize)]) -> String {
    counts
        .iter()
        .map(|(step, n)| format!("{step} {n}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_says_how_many_sites_are_at_each_step() {
        assert_eq!(
            message(&[
                ("boot", 2),
                ("wait-report", 15),
                ("eject", 0),
                ("done", 40),
                ("failed", 1)
            ]),
            "boot 2 · wait-report 15 · eject 0 · done 40 · failed 1"
        );
    }
}
