//! The machine-readable status of a running install: a small JSON file (default
//! `/var/tmp/ibi-status.json`) that a BMC agent, an SSH user or a test can poll, and the one-line summary
//! that goes to the journal. Every write replaces the file atomically, so a reader never sees half a
//! document; byte and image progress is throttled, state changes are written at once.
//!
//! Writing the status is observability, not the install: a failed write is logged and the install goes on.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use super::Step;
use contract::agent_status::{RunState, Status};
use util::fs::{Clobber, write_atomic};

/// World-readable: it holds no secret, and monitoring need not run as root.
const STATUS_FILE_MODE: u32 = 0o644;
/// Default minimum interval between two progress writes of the file.
const DEFAULT_WRITE_EVERY: Duration = Duration::from_millis(1000);
/// Default minimum interval between two progress lines in the journal.
const DEFAULT_JOURNAL_EVERY: Duration = Duration::from_secs(10);
/// Minimum interval between two progress calls of the observer (state changes always call it): a
/// fleet's reports stay a few per host and minute.
const OBSERVE_EVERY: Duration = Duration::from_secs(60);

/// Told the status at every state change, and now and then while a step works (`ibi serve`'s
/// reports). Called with the status lock held: it must only hand the status on, never block.
pub(crate) type Observer = Arc<dyn Fn(&Status) + Send + Sync>;

/// Holds the observer; `Debug` only says whether there is one.
struct ObserverSlot(Observer);

impl std::fmt::Debug for ObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A cheap, clonable handle on the status: the runner drives step transitions, step code (including
/// precache's worker threads) reports bytes and images through its own clone.
#[derive(Debug, Clone)]
pub struct Progress {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    path: PathBuf,
    status: Status,
    write_every: Duration,
    journal_every: Duration,
    last_write: Option<Instant>,
    last_journal: Option<Instant>,
    observer: Option<ObserverSlot>,
    last_observed: Option<Instant>,
}

impl Progress {
    /// A status written to `path` at most once a second for progress, with a journal line every 10 s.
    pub fn new(path: &Path) -> Progress {
        Progress::with_intervals(path, DEFAULT_WRITE_EVERY, DEFAULT_JOURNAL_EVERY)
    }

    /// Same, with explicit throttles for file writes and journal lines.
    pub fn with_intervals(path: &Path, write_every: Duration, journal_every: Duration) -> Progress {
        let inner = Inner {
            path: path.to_path_buf(),
            status: Status::idle(unix_now()),
            write_every,
            journal_every,
            last_write: None,
            last_journal: None,
            observer: None,
            last_observed: None,
        };
        Progress {
            inner: Arc::new(Mutex::new(inner)),
        }
    }

    /// A poisoned lock only means a reporting thread panicked; the status itself is still usable.
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands every state change (and, at most once a minute, progress) to `observer` from now on.
    pub fn observe(&self, observer: Observer) {
        self.lock().observer = Some(ObserverSlot(observer));
    }

    /// The current status.
    pub fn snapshot(&self) -> Status {
        self.lock().status.clone()
    }

    /// The current status's journal line.
    #[cfg(test)]
    pub(crate) fn progress_line(&self) -> String {
        self.lock().status.progress_line()
    }

    /// Starts `step`: counters reset, state `running`, written at once.
    pub fn begin(&self, step: Step) {
        let mut inner = self.lock();
        let now = unix_now();
        inner.status = Status {
            step: step.name().to_string(),
            started: now,
            updated: now,
            ..Status::idle(unix_now())
        };
        inner.last_journal = None;
        inner.publish(true);
    }

    /// The current step succeeded; written at once.
    pub fn finish(&self) {
        self.transition(RunState::Done, None);
    }

    /// The current step failed with `error` (rendered with its causes); written at once.
    pub(crate) fn fail(&self, error: &str) {
        self.transition(RunState::Failed, Some(error.to_string()));
    }

    fn transition(&self, state: RunState, error: Option<String>) {
        let mut inner = self.lock();
        inner.status.state = state;
        inner.status.error = error;
        inner.status.updated = unix_now();
        inner.publish(true);
    }

    /// Sets the byte counters of the current step (throttled). The tests' way to set both counters;
    /// the steps count as they copy ([`Self::add_bytes`]).
    #[cfg(test)]
    pub(crate) fn set_bytes(&self, done: u64, total: u64) {
        self.update(|s| {
            s.bytes_done = done;
            s.bytes_total = total;
        });
    }

    /// Adds `n` bytes to the current step's count (throttled); for streams that count as they copy.
    pub(crate) fn add_bytes(&self, n: u64) {
        self.update(|s| s.bytes_done = s.bytes_done.saturating_add(n));
    }

    /// Sets the number of images to precache (throttled).
    pub(crate) fn set_images_total(&self, total: u64) {
        self.update(|s| s.images.total = total);
    }

    /// Counts one pulled image (throttled).
    pub(crate) fn image_pulled(&self) {
        self.update(|s| s.images.pulled += 1);
    }

    /// Counts one image that could not be pulled (throttled).
    pub(crate) fn image_failed(&self) {
        self.update(|s| s.images.failed += 1);
    }

    fn update(&self, change: impl FnOnce(&mut Status)) {
        let mut inner = self.lock();
        change(&mut inner.status);
        inner.status.updated = unix_now();
        inner.publish(false);
    }

    /// Writes the current status now, whatever the throttle says; errors are returned, not just logged.
    #[cfg(test)]
    pub(crate) fn flush(&self) -> Result<()> {
        let mut inner = self.lock();
        inner.write()
    }
}

impl Inner {
    /// Writes the file when forced (a state change) or when its interval has passed, and the journal line
    /// when its own interval has passed. State changes are not journaled here: the runner logs them.
    fn publish(&mut self, transition: bool) {
        let due =
            |last: Option<Instant>, every: Duration| last.is_none_or(|t| t.elapsed() >= every);
        if (transition || due(self.last_write, self.write_every))
            && let Err(e) = self.write()
        {
            tracing::warn!(target: "ibi::agent::state::status", "updating the status file: {e:#}");
        }
        if !transition && due(self.last_journal, self.journal_every) {
            self.last_journal = Some(Instant::now());
            tracing::info!(target: "ibi::agent::state::status", "{}", self.status.progress_line());
        }
        if let Some(ObserverSlot(observe)) = &self.observer
            && (transition || due(self.last_observed, OBSERVE_EVERY))
        {
            self.last_observed = Some(Instant::now());
            observe(&self.status);
        }
    }

    fn write(&mut self) -> Result<()> {
        self.last_write = Some(Instant::now());
        let mut json = serde_json::to_vec(&self.status).context("serializing the status")?;
        json.push(b'\n');
        write_atomic(&self.path, &json, STATUS_FILE_MODE, Clobber::Replace)
            .with_context(|| format!("writing the status to {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract::agent_status::ImageCounts;

    #[test]
    fn progress_is_shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Progress>();
    }

    #[test]
    fn json_shape() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ibi-status.json");
        let progress = Progress::with_intervals(&p, Duration::ZERO, Duration::ZERO);
        progress.begin(Step::Precache);
        progress.set_images_total(3);
        progress.image_pulled();
        progress.image_failed();
        progress.fail("boom");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        // Sorted: the map's order depends on serde_json's `preserve_order` feature.
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "bytes_done",
                "bytes_total",
                "error",
                "images",
                "started",
                "state",
                "step",
                "updated"
            ]
        );
        assert_eq!(v["step"], "precache");
        assert_eq!(v["state"], "failed");
        assert_eq!(v["error"], "boom");
        assert_eq!(
            v["images"],
            serde_json::json!({"pulled": 1, "failed": 1, "total": 3})
        );
        assert!(v["started"].as_u64().unwrap() > 1_700_000_000);
        progress.begin(Step::PostScript);
        let v: Status = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(
            (v.state, v.error, v.images),
            (RunState::Running, None, ImageCounts::default())
        );
    }

    #[test]
    fn progress_is_throttled_but_transitions_are_not() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.json");
        let progress =
            Progress::with_intervals(&p, Duration::from_secs(3600), Duration::from_secs(3600));
        let read = || serde_json::from_slice::<Status>(&std::fs::read(&p).unwrap()).unwrap();
        progress.begin(Step::Deploy);
        progress.set_bytes(100, 1000);
        progress.add_bytes(50);
        assert_eq!(read().bytes_done, 0, "throttled");
        assert_eq!(progress.snapshot().bytes_done, 150);
        progress.flush().unwrap();
        assert_eq!(read().bytes_done, 150);
        progress.add_bytes(1);
        progress.finish();
        assert_eq!((read().bytes_done, read().state), (151, RunState::Done));
    }

    #[test]
    fn readers_never_see_partial_json() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.json");
        let progress = Progress::with_intervals(&p, Duration::ZERO, Duration::from_secs(3600));
        progress.begin(Step::Deploy);
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (p, stop) = (p.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let bytes = std::fs::read(&p).unwrap();
                    serde_json::from_slice::<Status>(&bytes)
                        .unwrap_or_else(|e| panic!("partial status {e}: {bytes:?}"));
                    reads += 1;
                }
                reads
            })
        };
        for i in 0..300 {
            progress.set_bytes(i * 4096, 300 * 4096);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
        let leftovers = std::fs::read_dir(d.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temp files left behind");
    }

    #[test]
    fn write_errors_do_not_panic_and_flush_reports_them() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("missing-dir").join("s.json");
        let progress = Progress::new(&p);
        progress.begin(Step::Deploy);
        progress.finish();
        let err = format!("{:#}", progress.flush().unwrap_err());
        assert!(
            err.starts_with(&format!("writing the status to {}", p.display())),
            "{err}"
        );
    }

    #[test]
    fn the_observer_sees_every_state_change_and_throttled_progress() {
        let d = tempfile::tempdir().unwrap();
        let progress = Progress::with_intervals(
            &d.path().join("s.json"),
            Duration::ZERO,
            Duration::from_secs(3600),
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        progress.observe(Arc::new(move |s: &Status| {
            sink.lock()
                .unwrap()
                .push((s.step.clone(), s.state, s.bytes_done));
        }));
        progress.begin(Step::FetchSeed);
        progress.set_bytes(10, 100);
        progress.set_bytes(20, 100);
        progress.finish();
        progress.begin(Step::Deploy);
        progress.fail("boom");
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            [
                ("fetch-seed".to_string(), RunState::Running, 0),
                ("fetch-seed".to_string(), RunState::Done, 20),
                ("deploy".to_string(), RunState::Running, 0),
                ("deploy".to_string(), RunState::Failed, 0),
            ],
            "progress within a minute of the last call is not passed on"
        );
    }
}
