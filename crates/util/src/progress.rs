//! Progress bars on stderr when stderr is a terminal; elsewhere (CI logs, pipes) one plain line when a
//! long step starts, so a log never goes silent for minutes without saying why.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A byte-count bar, hidden unless stderr is a TTY (then one line says the step started).
pub fn bytes_bar(len: u64, message: &'static str) -> ProgressBar {
    let bar = tty_bar(len, Some(format!("{message} ({len} bytes)…")));
    if let Ok(style) =
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message);
    bar
}

/// A bar counting items (sites of a batch), hidden unless stderr is a TTY. No start line: a batch
/// reports each failing site on stderr as it is found and its summary at the end, so it is not silent.
pub fn count_bar(len: u64, message: &'static str) -> ProgressBar {
    let bar = tty_bar(len, None);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message);
    bar
}

fn tty_bar(len: u64, start_line: Option<String>) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
        if let Some(line) = start_line {
            eprintln!("{line}");
        }
    }
    bar
}
