//! Progress bars on stderr, only when stderr is a terminal: logs and CI output stay clean.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A byte-count bar, hidden unless stderr is a TTY.
pub fn bytes_bar(len: u64, message: &'static str) -> ProgressBar {
    let bar = tty_bar(len);
    if let Ok(style) =
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} ({eta})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message);
    bar
}

/// A bar counting items (sites of a batch), hidden unless stderr is a TTY.
pub fn count_bar(len: u64, message: &'static str) -> ProgressBar {
    let bar = tty_bar(len);
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message);
    bar
}

fn tty_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}
