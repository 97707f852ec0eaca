//! SIGINT and SIGTERM during a deploy, heard on a thread of their own. The first asks deploy to stop:
//! nothing new starts, the BMC jobs under way get their grace to finish (the engine says which),
//! then the table. A second abandons those jobs: the engine says which sites it left and in what
//! state, and the table still comes. Before the engine runs (pre-flight, builds), when no host has
//! been touched, a second ends the process at once; so does a third at any time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use anyhow::{Context, Result};
use signal_hook::consts::{SIGINT, SIGTERM};

use super::record::now;

#[derive(Debug, Default)]
pub struct Signals {
    /// The first signal's number (0: none yet).
    which: AtomicUsize,
    count: AtomicUsize,
    /// When the first came (Unix seconds).
    at: AtomicU64,
    /// The engine runs (or ran): it answers a second signal itself.
    engine: AtomicBool,
}

impl Signals {
    /// Starts hearing SIGINT and SIGTERM.
    pub fn watch() -> Result<Arc<Signals>> {
        let state = Arc::new(Signals::default());
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
            .context("handling SIGINT and SIGTERM")?;
        let s = state.clone();
        std::thread::Builder::new()
            .name("ibi-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    s.heard(sig);
                }
            })
            .context("starting the SIGINT/SIGTERM handler")?;
        Ok(state)
    }

    fn heard(&self, sig: i32) {
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if n == 1 {
            self.at.store(now(), Ordering::SeqCst);
            self.which.store(sig as usize, Ordering::SeqCst);
        }
        let first = self.first().unwrap_or(sig);
        if n == 2 && !self.engine.load(Ordering::SeqCst) {
            eprintln!("interrupted again: stopping now; no host was touched");
            std::process::exit(128 + first);
        }
        if n >= 3 {
            eprintln!(
                "interrupted a third time: stopping now, without the table (`ibi status` shows the fleet)"
            );
            std::process::exit(128 + first);
        }
    }

    /// The first signal, once one came.
    pub fn first(&self) -> Option<i32> {
        match self.which.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n as i32),
        }
    }

    /// Whether a second signal came: the jobs under way are abandoned.
    pub fn again(&self) -> bool {
        self.count.load(Ordering::SeqCst) >= 2
    }

    /// When the first signal came.
    pub fn at(&self) -> Option<u64> {
        self.first().map(|_| self.at.load(Ordering::SeqCst))
    }

    /// From now on the engine answers a second signal.
    pub fn engine_started(&self) {
        self.engine.store(true, Ordering::SeqCst);
    }
}
