//! Ctrl-C (SIGINT) and SIGTERM during a command that writes outputs: the temp files of the writes under
//! way are removed, one line says what is left ("interrupted; nothing was written", or what the command
//! set with [`set_message`], e.g. a batch's summary so far), and the process exits 130 or 143 as a
//! shell-killed process would. Without this an interrupted `create image` left a hidden gigabyte-sized
//! temp file that only a later run in the same directory removed.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGINT, SIGTERM};

/// A long-running command that stopped on SIGINT or SIGTERM after finishing what it could (`ibi
/// deploy`): the process prints the message and exits 128 + the signal.
#[derive(Debug, thiserror::Error)]
#[error("interrupted: re-run to resume")]
pub struct Interrupted(pub i32);

/// What the handler needs: the temp files being written, how many outputs were completed, and the
/// command's own line for the moment it is interrupted.
struct State {
    temps: Vec<PathBuf>,
    completed: usize,
    message: Option<String>,
}

static STATE: Mutex<State> = Mutex::new(State {
    temps: Vec::new(),
    completed: 0,
    message: None,
});

/// The state, even if a panicking thread poisoned it: cleanup must still run.
fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Handles SIGINT and SIGTERM from now on, on a thread of their own. Call it before starting threads
/// that write outputs; the `serve` command keeps its own handling and does not call it.
pub fn install() -> Result<()> {
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .context("installing the SIGINT/SIGTERM handler")?;
    std::thread::Builder::new()
        .name("interrupt".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                on_signal(sig);
            }
        })
        .context("starting the SIGINT/SIGTERM handler")?;
    Ok(())
}

/// Removes the temp files, says so and exits, holding the state so no write completes meanwhile.
fn on_signal(sig: i32) -> ! {
    let st = state();
    for t in &st.temps {
        // Best effort: the process is ending and a leftover is swept by the next run anyway.
        let _ = std::fs::remove_file(t);
    }
    eprintln!("{}", line(&st));
    std::process::exit(128 + sig)
}

/// The one line printed on interruption.
fn line(st: &State) -> String {
    match (&st.message, st.completed) {
        (Some(m), _) => format!("interrupted; {m}"),
        (None, 0) => "interrupted; nothing was written".to_string(),
        (None, n) => format!(
            "interrupted; {n} output file(s) were written completely, the one under way was removed"
        ),
    }
}

/// Replaces the line printed on interruption (after "interrupted; ").
pub fn set_message(message: String) {
    state().message = Some(message);
}

/// A temp file being written: removed by the handler if the process is interrupted meanwhile.
pub(crate) struct TempFile {
    path: PathBuf,
}

impl TempFile {
    /// Creates a temp file with `create` and registers it (`path_of` says where it is) as one step
    /// under the handler's lock: a signal comes either before the file exists or after it is
    /// registered, so the handler never leaves a temp file it did not know of. The guard comes
    /// first: bound as `let (guard, tmp)`, the temp file is dropped (removed) before the guard.
    pub(crate) fn create<T>(
        create: impl FnOnce() -> Result<T>,
        path_of: impl FnOnce(&T) -> &Path,
    ) -> Result<(TempFile, T)> {
        let mut st = state();
        let made = create()?;
        let path = path_of(&made).to_path_buf();
        st.temps.push(path.clone());
        Ok((TempFile { path }, made))
    }

    /// Runs `rename` (the temp file becoming the output) so that an interruption comes either before
    /// it, and the temp file is removed, or after it, and the output is complete.
    pub(crate) fn complete<T>(self, rename: impl FnOnce() -> T) -> T {
        let mut st = state();
        let out = rename();
        st.temps.retain(|t| *t != self.path);
        st.completed += 1;
        out
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        state().temps.retain(|t| *t != self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_what_was_written() {
        let mut st = State {
            temps: Vec::new(),
            completed: 0,
            message: None,
        };
        assert_eq!(line(&st), "interrupted; nothing was written");
        st.completed = 2;
        assert!(line(&st).starts_with("interrupted; 2 output file(s)"));
        st.message = Some("1 of 3 sites done".into());
        assert_eq!(line(&st), "interrupted; 1 of 3 sites done");
    }

    /// The temp file is created while the handler's lock is held (so a signal cannot fall between
    /// its creation and its registration): with the lock taken, as the handler takes it, `create`
    /// does not run until the lock is released.
    #[test]
    fn a_temp_file_is_created_and_registered_under_the_handlers_lock() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, mpsc};
        let created = Arc::new(AtomicBool::new(false));
        let held = state();
        let (tx, rx) = mpsc::channel();
        let flag = created.clone();
        let writer = std::thread::spawn(move || {
            tx.send(()).unwrap();
            let (guard, _) = TempFile::create(
                || {
                    flag.store(true, Ordering::SeqCst);
                    Ok(PathBuf::from("/nonexistent/.x.1.ab.tmp"))
                },
                |p| p.as_path(),
            )
            .unwrap();
            guard
        });
        rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            !created.load(Ordering::SeqCst),
            "created while the handler held the lock"
        );
        drop(held);
        let guard = writer.join().unwrap();
        assert!(created.load(Ordering::SeqCst));
        assert!(
            state()
                .temps
                .contains(&PathBuf::from("/nonexistent/.x.1.ab.tmp"))
        );
        drop(guard);
        assert!(
            !state()
                .temps
                .contains(&PathBuf::from("/nonexistent/.x.1.ab.tmp"))
        );
    }
}
