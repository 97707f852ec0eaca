//! The pull pool: a fixed number of std threads take the images in list order, each image gets a few
//! attempts with a growing pause between them, and every finished image moves the status counts. An image
//! the registry does not have (`manifest unknown`) fails at once: asking again will not make it appear.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Result, bail};

use super::{DEFAULT_ATTEMPTS, parallelism};
use crate::state::Progress;

/// The registry's answer for an image or tag it does not hold (OCI distribution `MANIFEST_UNKNOWN`), as
/// skopeo and podman print it; lca-cli does not retry on it either.
const MANIFEST_UNKNOWN: &str = "manifest unknown";
/// The longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Copies one image into the target's container storage.
pub trait Puller: Sync {
    /// Pulls `image`; the error's rendered text is what the retry rule and the report look at.
    fn pull(&self, image: &str) -> Result<()>;
}

/// How to precache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrecacheOptions {
    /// Most pulls at once (at least 1).
    pub parallelism: usize,
    /// Most attempts per image (at least 1).
    pub attempts: u32,
    /// The pause after the first failed attempt; it doubles after each further one, up to 30 s.
    pub backoff: Duration,
    /// `precacheBestEffort`: failed images are reported and logged, not an error.
    pub best_effort: bool,
}

impl Default for PrecacheOptions {
    /// lca-cli's: `MAX_PULL_THREADS` or 10 pulls at once, 5 attempts; a 2 s first pause; not best effort.
    fn default() -> Self {
        PrecacheOptions {
            parallelism: parallelism(),
            attempts: DEFAULT_ATTEMPTS,
            backoff: Duration::from_secs(2),
            best_effort: false,
        }
    }
}

/// What a precache did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrecacheReport {
    pub total: usize,
    pub pulled: usize,
    /// `(image, error of its last attempt)`, in list order.
    pub failed: Vec<(String, String)>,
}

/// Pulls `images` with `puller` as `options` say, counting each finished image in `progress`. Fails,
/// naming every failed image and its last error, when any image failed and `best_effort` is not set;
/// with `best_effort` the failures are logged and returned in the report.
pub fn precache(
    images: &[String],
    puller: &dyn Puller,
    options: &PrecacheOptions,
    progress: &Progress,
) -> Result<PrecacheReport> {
    progress.set_images_total(images.len() as u64);
    let outcomes = run_pool(images, puller, options, progress);
    let failed: Vec<(String, String)> = images
        .iter()
        .zip(outcomes)
        .filter_map(|(image, outcome)| outcome.err().map(|e| (image.clone(), e)))
        .collect();
    let report = PrecacheReport {
        total: images.len(),
        pulled: images.len() - failed.len(),
        failed,
    };
    if report.failed.is_empty() {
        return Ok(report);
    }
    let summary = failure_summary(&report);
    if !options.best_effort {
        bail!("{summary}");
    }
    tracing::warn!(target: "ibi::agent::precache::pool",
        "{summary} (precacheBestEffort is set: going on)");
    Ok(report)
}

/// `precache: 2 of 40 images could not be pulled: a:1 (manifest unknown); b:2 (timeout)`.
fn failure_summary(report: &PrecacheReport) -> String {
    let list: Vec<String> = report
        .failed
        .iter()
        .map(|(image, error)| format!("{image} ({error})"))
        .collect();
    format!(
        "precache: {} of {} images could not be pulled: {}",
        report.failed.len(),
        report.total,
        list.join("; ")
    )
}

/// Runs the pulls on at most `parallelism` threads; the outcome of each image, in list order.
fn run_pool(
    images: &[String],
    puller: &dyn Puller,
    options: &PrecacheOptions,
    progress: &Progress,
) -> Vec<Result<(), String>> {
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<Option<Result<(), String>>>> = Mutex::new(vec![None; images.len()]);
    let workers = options.parallelism.max(1).min(images.len());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(image) = images.get(index) else {
                        break;
                    };
                    let outcome = pull_with_retries(puller, image, options);
                    match &outcome {
                        Ok(()) => progress.image_pulled(),
                        Err(_) => progress.image_failed(),
                    }
                    let mut all = outcomes.lock().unwrap_or_else(|e| e.into_inner());
                    all[index] = Some(outcome);
                }
            });
        }
    });
    outcomes
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err("not attempted".to_string())))
        .collect()
}

/// Pulls one image, up to `attempts` times; the last error's text on failure.
fn pull_with_retries(
    puller: &dyn Puller,
    image: &str,
    options: &PrecacheOptions,
) -> Result<(), String> {
    let attempts = options.attempts.max(1);
    let mut pause = options.backoff;
    for attempt in 1..=attempts {
        let error = match puller.pull(image) {
            Ok(()) => {
                tracing::debug!(target: "ibi::agent::precache::pool", "pulled {image}");
                return Ok(());
            }
            Err(e) => format!("{e:#}"),
        };
        if error.contains(MANIFEST_UNKNOWN) || attempt == attempts {
            tracing::warn!(target: "ibi::agent::precache::pool",
                "pulling {image} failed (attempt {attempt} of {attempts}): {error}");
            return Err(error);
        }
        tracing::info!(target: "ibi::agent::precache::pool",
            "pulling {image} failed (attempt {attempt} of {attempts}), retrying: {error}"
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_BACKOFF);
    }
    Err("no attempt made".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Step;
    use std::collections::HashMap;
    use std::sync::atomic::AtomicU32;

    /// A puller that fails each image a scripted number of times, with a scripted message, and records
    /// how many pulls ran at once.
    #[derive(Default)]
    struct FakePuller {
        /// image → (failures before success (u32::MAX: always), error text)
        script: HashMap<String, (u32, String)>,
        calls: Mutex<HashMap<String, u32>>,
        running: AtomicU32,
        max_running: AtomicU32,
        delay: Duration,
    }

    impl FakePuller {
        fn failing(mut self, image: &str, times: u32, error: &str) -> Self {
            self.script
                .insert(image.to_string(), (times, error.to_string()));
            self
        }

        fn calls(&self, image: &str) -> u32 {
            self.calls.lock().unwrap().get(image).copied().unwrap_or(0)
        }
    }

    impl Puller for FakePuller {
        fn pull(&self, image: &str) -> Result<()> {
            let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_running.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(self.delay);
            let call = {
                let mut calls = self.calls.lock().unwrap();
                let c = calls.entry(image.to_string()).or_default();
                *c += 1;
                *c
            };
            self.running.fetch_sub(1, Ordering::SeqCst);
            match self.script.get(image) {
                Some((times, error)) if call <= *times => {
                    Err(anyhow::anyhow!("{error}").context(format!("copying {image}")))
                }
                _ => Ok(()),
            }
        }
    }

    fn images(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("quay.io/x/img{i}:1")).collect()
    }

    fn opts(parallelism: usize, best_effort: bool) -> PrecacheOptions {
        PrecacheOptions {
            parallelism,
            attempts: 5,
            backoff: Duration::from_millis(1),
            best_effort,
        }
    }

    fn progress() -> (tempfile::TempDir, Progress) {
        let d = tempfile::tempdir().unwrap();
        let p = Progress::with_intervals(
            &d.path().join("s.json"),
            Duration::from_secs(3600),
            Duration::from_secs(3600),
        );
        p.begin(Step::Precache);
        (d, p)
    }

    #[test]
    fn concurrency_is_bounded() {
        for (parallelism, n, want_max) in [(3, 12, 3), (1, 4, 1), (10, 4, 4), (0, 2, 1)] {
            let puller = FakePuller {
                delay: Duration::from_millis(20),
                ..FakePuller::default()
            };
            let (_d, progress) = progress();
            let report =
                precache(&images(n), &puller, &opts(parallelism, false), &progress).unwrap();
            assert_eq!((report.total, report.pulled), (n, n));
            assert_eq!(
                puller.max_running.load(Ordering::SeqCst),
                want_max,
                "parallelism {parallelism}, {n} images"
            );
        }
    }

    #[test]
    fn transient_failures_are_retried() {
        let list = images(3);
        let puller = FakePuller::default()
            .failing(&list[0], 2, "connection reset by peer")
            .failing(&list[1], 4, "timeout");
        let (_d, progress) = progress();
        let report = precache(&list, &puller, &opts(2, false), &progress).unwrap();
        assert_eq!(
            report,
            PrecacheReport {
                total: 3,
                pulled: 3,
                failed: vec![]
            }
        );
        let calls: Vec<u32> = list.iter().map(|i| puller.calls(i)).collect();
        assert_eq!(calls, [3, 5, 1]);
    }

    #[test]
    fn manifest_unknown_is_not_retried_and_attempts_are_bounded() {
        let list = images(3);
        let puller = FakePuller::default()
            .failing(
                &list[0],
                u32::MAX,
                "reading manifest 1: manifest unknown: manifest unknown",
            )
            .failing(&list[2], u32::MAX, "connection refused");
        let (_d, progress) = progress();
        let err = precache(&list, &puller, &opts(3, false), &progress).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "precache: 2 of 3 images could not be pulled: \
             quay.io/x/img0:1 (copying quay.io/x/img0:1: reading manifest 1: manifest unknown: manifest unknown); \
             quay.io/x/img2:1 (copying quay.io/x/img2:1: connection refused)"
        );
        let calls: Vec<u32> = list.iter().map(|i| puller.calls(i)).collect();
        assert_eq!(calls, [1, 1, 5]);
        let counts = progress.snapshot().images;
        assert_eq!((counts.total, counts.pulled, counts.failed), (3, 1, 2));
    }

    #[test]
    fn best_effort_reports_instead_of_failing() {
        let list = images(4);
        let puller = FakePuller::default().failing(&list[1], u32::MAX, "manifest unknown");
        let (_d, progress) = progress();
        let report = precache(&list, &puller, &opts(2, true), &progress).unwrap();
        assert_eq!(
            report,
            PrecacheReport {
                total: 4,
                pulled: 3,
                failed: vec![(
                    list[1].clone(),
                    format!("copying {}: manifest unknown", list[1])
                )],
            }
        );
        let counts = progress.snapshot().images;
        assert_eq!((counts.total, counts.pulled, counts.failed), (4, 3, 1));
    }

    #[test]
    fn progress_counts_every_image() {
        let list = images(25);
        let mut puller = FakePuller::default();
        for image in list.iter().step_by(5) {
            puller = puller.failing(image, u32::MAX, "boom");
        }
        let (_d, progress) = progress();
        let report = precache(&list, &puller, &opts(4, true), &progress).unwrap();
        assert_eq!((report.pulled, report.failed.len()), (20, 5));
        let failed: Vec<&str> = report.failed.iter().map(|(i, _)| i.as_str()).collect();
        assert_eq!(
            failed,
            [
                "quay.io/x/img0:1",
                "quay.io/x/img5:1",
                "quay.io/x/img10:1",
                "quay.io/x/img15:1",
                "quay.io/x/img20:1"
            ]
        );
        let counts = progress.snapshot().images;
        assert_eq!((counts.total, counts.pulled, counts.failed), (25, 20, 5));
    }

    #[test]
    fn nothing_to_pull() {
        let (_d, progress) = progress();
        let report = precache(&[], &FakePuller::default(), &opts(10, false), &progress).unwrap();
        assert_eq!(report, PrecacheReport::default());
    }

    #[test]
    fn one_attempt_means_no_retry() {
        let list = images(1);
        let puller = FakePuller::default().failing(&list[0], 1, "timeout");
        let (_d, progress) = progress();
        let mut options = opts(1, false);
        options.attempts = 0;
        assert!(precache(&list, &puller, &options, &progress).is_err());
        assert_eq!(puller.calls(&list[0]), 1);
    }
}
