//! Runs the planned steps of an install in order: skips what an earlier run finished, refuses a destructive
//! step the state forbids, records each success durably before the next step starts, and keeps the status
//! file and the journal current. A failure is recorded (status `failed` with the error text) and returned
//! with the step named in its context.

use std::time::Instant;

use anyhow::{Result, bail};

use super::{Progress, StateFile, Step};

/// One step's work. It reports bytes and images through a clone of the runner's [`Progress`].
pub(crate) type StepFn<'a> = Box<dyn FnMut() -> Result<()> + 'a>;

/// Executes a plan of steps against a [`StateFile`] and a [`Progress`].
#[derive(Debug)]
pub(crate) struct Runner {
    state: StateFile,
    progress: Progress,
}

impl Runner {
    pub(crate) fn new(state: StateFile, progress: Progress) -> Runner {
        Runner { state, progress }
    }

    /// The recorded state.
    pub(crate) fn state(&self) -> &StateFile {
        &self.state
    }

    /// The recorded state, to [`StateFile::relocate`] it between two `run` calls (e.g. onto the target disk
    /// once it is mounted).
    pub(crate) fn state_mut(&mut self) -> &mut StateFile {
        &mut self.state
    }

    /// The status handle, for step code to clone.
    pub(crate) fn progress(&self) -> &Progress {
        &self.progress
    }

    /// Runs `plan` in order. The plan must list steps in [`Step::ALL`] order, each at most once, and must
    /// depend only on the configuration (whose fingerprint the state pins), so that every run of one
    /// install sees the same plan.
    pub(crate) fn run<'a>(&mut self, plan: Vec<(Step, StepFn<'a>)>) -> Result<()> {
        check_plan(&plan)?;
        for (step, mut work) in plan {
            self.run_step(step, &mut work)?;
        }
        Ok(())
    }

    fn run_step(&mut self, step: Step, work: &mut StepFn<'_>) -> Result<()> {
        if self.state.is_done(step) {
            if !step.reruns_on_resume() {
                tracing::info!(target: "ibi::agent::state::runner",
                    "{step}: done in an earlier run, skipping");
                return Ok(());
            }
            tracing::info!(target: "ibi::agent::state::runner",
                "{step}: done in an earlier run, running again (its effect does not survive a restart)"
            );
        }
        self.progress.begin(step);
        tracing::info!(target: "ibi::agent::state::runner", "{step}: starting");
        let started = Instant::now();
        match self.attempt(step, work) {
            Ok(()) => {
                self.progress.finish();
                self.log_done(step, started);
                Ok(())
            }
            Err(e) => {
                let text = format!("{e:#}");
                self.progress.fail(&text);
                tracing::error!(target: "ibi::agent::state::runner", "{step}: failed: {text}");
                Err(e.context(format!("step {step} failed")))
            }
        }
    }

    fn log_done(&self, step: Step, started: Instant) {
        let secs = started.elapsed().as_secs_f64();
        match self.progress.snapshot().counts() {
            Some(counts) => {
                tracing::info!(target: "ibi::agent::state::runner",
                    "{step}: done in {secs:.1} s ({counts})")
            }
            None => {
                tracing::info!(target: "ibi::agent::state::runner", "{step}: done in {secs:.1} s")
            }
        }
    }

    /// The guard, the work, then the durable record; any of the three failing fails the step.
    fn attempt(&mut self, step: Step, work: &mut StepFn<'_>) -> Result<()> {
        self.state.check_may_run(step)?;
        work()?;
        self.state.mark_done(step)
    }
}

/// Rejects a plan out of order or with a step twice: the resume logic relies on the order.
fn check_plan(plan: &[(Step, StepFn<'_>)]) -> Result<()> {
    for pair in plan.windows(2) {
        let (a, b) = (pair[0].0, pair[1].0);
        if a >= b {
            bail!("internal error: the install plan lists {b} after {a}");
        }
    }
    Ok(())
}

/// Builds a plan entry; `run` takes boxed closures so that steps of different types fit in one list.
pub(crate) fn step<'a>(step: Step, work: impl FnMut() -> Result<()> + 'a) -> (Step, StepFn<'a>) {
    (step, Box::new(work))
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::path::Path;
    use std::time::Duration;

    use super::super::StateError;
    use super::*;
    use crate::prepare_config::ConfigFingerprint;
    use contract::agent_status::{RunState, Status};

    const PLAN: [Step; 8] = [
        Step::DiskCleanup,
        Step::WriteRhcos,
        Step::CreateExtraPartition,
        Step::MkfsExtraPartition,
        Step::GrowRoot,
        Step::FetchSeed,
        Step::Deploy,
        Step::RestoreEtc,
    ];

    fn runner(dir: &Path, config: &str) -> Result<Runner> {
        let state = StateFile::load_or_new(
            &dir.join("state.json"),
            ConfigFingerprint::of(config.as_bytes()),
        )?;
        let progress =
            Progress::with_intervals(&dir.join("status.json"), Duration::ZERO, Duration::ZERO);
        Ok(Runner::new(state, progress))
    }

    /// Runs `steps`, logging each one that runs; `fail_at` fails with "disk on fire".
    fn run_logged(
        r: &mut Runner,
        steps: &[Step],
        fail_at: Option<Step>,
    ) -> (Result<()>, Vec<Step>) {
        let log = RefCell::new(Vec::new());
        let plan = steps
            .iter()
            .map(|&s| {
                let log = &log;
                step(s, move || {
                    log.borrow_mut().push(s);
                    if Some(s) == fail_at {
                        bail!("disk on fire");
                    }
                    Ok(())
                })
            })
            .collect();
        let result = r.run(plan);
        (result, log.into_inner())
    }

    fn status(dir: &Path) -> Status {
        serde_json::from_slice(&std::fs::read(dir.join("status.json")).unwrap()).unwrap()
    }

    #[test]
    fn resumes_after_a_crash_at_step_k() {
        let d = tempfile::tempdir().unwrap();
        let mut r = runner(d.path(), "cfg").unwrap();
        let (result, ran) = run_logged(&mut r, &PLAN, Some(Step::FetchSeed));
        let err = format!("{:#}", result.unwrap_err());
        assert_eq!(err, "step fetch-seed failed: disk on fire");
        assert_eq!(ran, PLAN[..6]);
        let s = status(d.path());
        assert_eq!((s.step.as_str(), s.state), ("fetch-seed", RunState::Failed));
        assert_eq!(s.error.as_deref(), Some("disk on fire"));
        drop(r);

        let mut r = runner(d.path(), "cfg").unwrap();
        let (result, ran) = run_logged(&mut r, &PLAN, None);
        result.unwrap();
        assert_eq!(ran, [Step::FetchSeed, Step::Deploy, Step::RestoreEtc]);
        let s = status(d.path());
        assert_eq!(
            (s.step.as_str(), s.state, s.error),
            ("restore-etc", RunState::Done, None)
        );

        let mut r = runner(d.path(), "cfg").unwrap();
        let (result, ran) = run_logged(&mut r, &PLAN, None);
        result.unwrap();
        assert!(
            ran.is_empty(),
            "a finished install runs nothing again: {ran:?}"
        );
    }

    #[test]
    fn mounts_are_redone_on_resume() {
        let d = tempfile::tempdir().unwrap();
        let plan = [Step::GrowRoot, Step::MountTargets, Step::FetchSeed];
        let mut r = runner(d.path(), "cfg").unwrap();
        let (result, _) = run_logged(&mut r, &plan, Some(Step::FetchSeed));
        assert!(result.is_err());
        let mut r = runner(d.path(), "cfg").unwrap();
        let (result, ran) = run_logged(&mut r, &plan, None);
        result.unwrap();
        assert_eq!(ran, [Step::MountTargets, Step::FetchSeed]);
    }

    #[test]
    fn destructive_step_never_runs_on_a_disk_with_later_work() {
        let d = tempfile::tempdir().unwrap();
        let mut r = runner(d.path(), "cfg").unwrap();
        // What an edited or damaged state file could say: the seed restored, the disk never wiped.
        r.state.mark_done(Step::Deploy).unwrap();
        let (result, ran) = run_logged(&mut r, &PLAN, None);
        let err = result.unwrap_err();
        assert!(ran.is_empty(), "nothing ran: {ran:?}");
        assert!(matches!(
            err.downcast_ref::<StateError>(),
            Some(StateError::DestructiveAfterProgress {
                step: Step::DiskCleanup,
                later: Step::Deploy,
                ..
            })
        ));
        assert!(
            format!("{err:#}").starts_with("step disk-cleanup failed: "),
            "{err:#}"
        );
        assert_eq!(status(d.path()).state, RunState::Failed);
    }

    #[test]
    fn crash_between_destructive_steps_continues_without_repeating() {
        let d = tempfile::tempdir().unwrap();
        let mut r = runner(d.path(), "cfg").unwrap();
        let (result, _) = run_logged(&mut r, &PLAN, Some(Step::CreateExtraPartition));
        assert!(result.is_err());
        let mut r = runner(d.path(), "cfg").unwrap();
        let (result, ran) = run_logged(&mut r, &PLAN, None);
        result.unwrap();
        assert_eq!(
            ran[0],
            Step::CreateExtraPartition,
            "disk-cleanup and write-rhcos not repeated"
        );
    }

    #[test]
    fn state_moved_onto_the_target_between_phases_resumes_from_there() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("target-state.json");
        let mut r = runner(d.path(), "cfg").unwrap();
        run_logged(&mut r, &PLAN[..5], None).0.unwrap();
        r.state_mut().relocate(&target).unwrap();
        assert!(
            run_logged(&mut r, &PLAN[5..], Some(Step::Deploy))
                .0
                .is_err()
        );

        let state = StateFile::load_or_new(&target, ConfigFingerprint::of(b"cfg")).unwrap();
        let progress = Progress::with_intervals(
            &d.path().join("status.json"),
            Duration::ZERO,
            Duration::ZERO,
        );
        let mut r = Runner::new(state, progress);
        let (result, ran) = run_logged(&mut r, &PLAN, None);
        result.unwrap();
        assert_eq!(ran, [Step::Deploy, Step::RestoreEtc]);
    }

    #[test]
    fn another_configuration_is_refused_before_any_step() {
        let d = tempfile::tempdir().unwrap();
        let mut r = runner(d.path(), "cfg A").unwrap();
        let (result, _) = run_logged(&mut r, &PLAN, Some(Step::GrowRoot));
        assert!(result.is_err());
        let err = runner(d.path(), "cfg B").unwrap_err();
        assert!(matches!(
            err.downcast_ref::<StateError>(),
            Some(StateError::FingerprintMismatch { .. })
        ));
    }

    #[test]
    fn status_is_running_while_a_step_works() {
        let d = tempfile::tempdir().unwrap();
        let mut r = runner(d.path(), "cfg").unwrap();
        let progress = r.progress().clone();
        let seen = RefCell::new(None);
        let plan = vec![step(Step::Deploy, || {
            progress.set_bytes(1 << 30, 2 << 30);
            *seen.borrow_mut() = Some(status(d.path()));
            Ok(())
        })];
        r.run(plan).unwrap();
        let seen = seen.into_inner().unwrap();
        assert_eq!(
            (seen.step.as_str(), seen.state),
            ("deploy", RunState::Running)
        );
        assert_eq!((seen.bytes_done, seen.bytes_total), (1 << 30, 2 << 30));
        assert_eq!(
            r.progress().progress_line(),
            "ibi: deploy 1.0/2.0 GiB, done"
        );
    }

    thread_local! {
        static LOG_LINES: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }

    /// Appends to this thread's log buffer: tests run in parallel threads, each sees only its own lines.
    struct ThreadLog;

    impl std::io::Write for ThreadLog {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            LOG_LINES.with(|l| l.borrow_mut().extend_from_slice(buf));
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Runs `f` and returns what it logged. A global subscriber, set once: scoped ones (`with_default`)
    /// race with parallel tests over tracing's per-callsite interest cache and lose lines.
    fn logs_of(f: impl FnOnce()) -> String {
        static INIT: std::sync::Once = std::sync::Once::new();
        INIT.call_once(|| {
            let subscriber = tracing_subscriber::fmt()
                .with_writer(|| ThreadLog)
                .with_ansi(false)
                .without_time()
                .with_target(false)
                .finish();
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber in unit tests");
        });
        LOG_LINES.with(|l| l.borrow_mut().clear());
        f();
        LOG_LINES.with(|l| String::from_utf8_lossy(&l.borrow()).into_owned())
    }

    #[test]
    fn logs_each_step_start_and_end() {
        let d = tempfile::tempdir().unwrap();
        let text = logs_of(|| {
            let plan = [Step::GrowRoot, Step::FetchSeed];
            let mut r = runner(d.path(), "cfg").unwrap();
            assert!(run_logged(&mut r, &plan, Some(Step::FetchSeed)).0.is_err());
            let mut r = runner(d.path(), "cfg").unwrap();
            run_logged(&mut r, &plan, None).0.unwrap();
        });
        for want in [
            "INFO grow-root: starting",
            "INFO grow-root: done in ",
            "INFO fetch-seed: starting",
            "ERROR fetch-seed: failed: disk on fire",
            "INFO grow-root: done in an earlier run, skipping",
        ] {
            assert!(text.contains(want), "{want:?} not in:\n{text}");
        }
    }

    #[test]
    fn plan_out_of_order_is_an_internal_error() {
        let d = tempfile::tempdir().unwrap();
        let mut r = runner(d.path(), "cfg").unwrap();
        for steps in [
            [Step::Deploy, Step::FetchSeed],
            [Step::Deploy, Step::Deploy],
        ] {
            let (result, ran) = run_logged(&mut r, &steps, None);
            assert!(ran.is_empty());
            let err = format!("{:#}", result.unwrap_err());
            assert!(
                err.starts_with("internal error: the install plan lists"),
                "{err}"
            );
        }
    }
}
