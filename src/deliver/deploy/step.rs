//! Deploy's one step model. Each phase is a fixed table of [`Step`]s ([`steps`]); where a run takes
//! a site up is [`resume`], from its record alone; what happens after each event is [`next`], a
//! pure function of the phase, the site's step and the event. The engine only carries the
//! decisions out (saves the step, starts its job or its wait, ends the site), so the decisions are
//! tested here, path by path, without a thread, a BMC or a clock.
//!
//! The step names are the record's on-disk words (`deploy_state` leaves them to deploy) and the
//! names the progress lines and `ibi status` show.

use std::fmt;

use crate::contract::agent_status::RunState;
use crate::deliver::deploy_state::{Phase, PhaseRecord};

/// A step of a site's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The BMC boots the host from the phase's medium (the site phase: from its disk, with the
    /// configuration ISO inserted).
    Boot,
    /// The host installs: its final report, or its power going off.
    WaitReport,
    /// The cluster comes up.
    Watch,
    /// One-shot: the host installed; power off, eject, boot the disk.
    BootDisk,
    /// The medium is ejected.
    Eject,
}

/// Every step, for parsing.
const ALL: [Step; 5] = [
    Step::Boot,
    Step::WaitReport,
    Step::Watch,
    Step::BootDisk,
    Step::Eject,
];

impl Step {
    /// The record's word for the step.
    pub const fn name(self) -> &'static str {
        match self {
            Step::Boot => "boot",
            Step::WaitReport => "wait-report",
            Step::Watch => "watch",
            Step::BootDisk => "boot-disk",
            Step::Eject => "eject",
        }
    }

    /// The step a record's word names; `None` for a word deploy does not write.
    pub fn parse(word: &str) -> Option<Step> {
        ALL.into_iter().find(|s| s.name() == word)
    }

    /// The BMC job that carries the step out, as progress lines name it; `None` for a wait.
    pub const fn job(self) -> Option<&'static str> {
        match self {
            Step::Boot => Some("boot"),
            Step::BootDisk => Some("disk boot"),
            Step::Eject => Some("eject"),
            Step::WaitReport | Step::Watch => None,
        }
    }

    /// What saving the step after this one records, as a failure to save it names it.
    const fn recording(self) -> &'static str {
        match self {
            Step::Boot => "the boot",
            Step::BootDisk => "the disk boot",
            Step::WaitReport | Step::Watch | Step::Eject => "the step",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The phase's steps, in order: the one table every decision reads.
pub const fn steps(phase: Phase) -> &'static [Step] {
    match phase {
        Phase::Factory => &[Step::Boot, Step::WaitReport, Step::Eject],
        Phase::Site => &[Step::Boot, Step::Watch, Step::Eject],
        // Nothing is inserted for the disk boot: nothing to eject after the watch.
        Phase::Oneshot => &[Step::Boot, Step::WaitReport, Step::BootDisk, Step::Watch],
    }
}

/// The phase's first wait: for the host (factory, one-shot) or for the cluster (site).
pub const fn first_wait(phase: Phase) -> Step {
    steps(phase)[1]
}

/// The step after `step` in the phase; `None` after its last.
fn after(phase: Phase, step: Step) -> Option<Step> {
    let table = steps(phase);
    let at = table.iter().position(|s| *s == step)?;
    table.get(at + 1).copied()
}

/// Whether the site waits for its cluster (rather than for its host) at `step`.
pub fn watching(step: Step) -> bool {
    step == Step::Watch
}

/// Where a run takes a site's phase up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// Done by an earlier run: nothing to do.
    Done,
    /// At this step: a step after the boot means the host was booted for this phase earlier and
    /// is not booted again.
    At(Step),
}

/// The resume rule: the first unfinished step, and never a second boot of a host that was booted
/// for this phase (deploy saves `booted` before it asks the BMC to power the host on) or that
/// reported since the phase began (`heard`: its own token's reports, received after `started`): a
/// finished host whose eject failed is ejected, a slow cluster is watched again, a host that
/// reported a failure stays failed. `rec` is the phase's live record (`None`: not begun).
pub fn resume(phase: Phase, rec: Option<&PhaseRecord>, heard: bool) -> Resume {
    let Some(r) = rec else {
        return Resume::At(Step::Boot);
    };
    let step = Step::parse(&r.step);
    if r.state == RunState::Done {
        Resume::Done
    } else if step == Some(Step::Eject) {
        Resume::At(Step::Eject)
    } else if r.disk_booted.is_some() {
        // One-shot: the power-on from disk may have happened; never powered on twice.
        Resume::At(Step::Watch)
    } else if step == Some(Step::BootDisk) {
        Resume::At(Step::BootDisk)
    } else if r.booted.is_some() || heard {
        Resume::At(first_wait(phase))
    } else {
        // Never powered on for this phase: booting is the only way on.
        Resume::At(Step::Boot)
    }
}

/// What a site's record says was done, as a re-run will take it up (said when an interrupt cuts
/// a job).
pub fn left_as(phase: Phase, resume: Resume) -> &'static str {
    match resume {
        Resume::Done => "done",
        Resume::At(Step::Boot) => "not powered on for this phase: a re-run boots it",
        Resume::At(Step::Eject) => "installed: a re-run only ejects",
        Resume::At(Step::BootDisk) => "installed: a re-run boots its disk",
        Resume::At(Step::Watch) if phase == Phase::Oneshot => {
            "its disk booted: a re-run watches its cluster"
        }
        Resume::At(Step::WaitReport | Step::Watch) => {
            "booted: a re-run waits for it, without booting it again"
        }
    }
}

/// The progress line a resumed step starts with.
pub fn resumed(phase: Phase, step: Step) -> String {
    match step {
        Step::Boot => "boot: resumed".to_string(),
        Step::Eject => "eject: resumed".to_string(),
        Step::BootDisk => {
            "boot-disk: resumed (the host installed earlier; it is not installed again)".to_string()
        }
        Step::Watch if phase == Phase::Oneshot => {
            "watch: resumed (the disk was booted earlier; it is not booted again)".to_string()
        }
        Step::WaitReport | Step::Watch => format!(
            "{step}: resumed (the host was booted for this phase earlier; it is not booted again)"
        ),
    }
}

/// What happened to a site at its step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The step's BMC job ended (boot, disk boot, eject).
    JobEnded(Result<(), String>),
    /// The host's install ended: its final report (its own token's, within the phase), or its
    /// power going off (done).
    HostEnded(Result<(), HostFailed>),
    /// The cluster is ready.
    ClusterReady,
    /// The cluster could not be looked at (or its watch not opened).
    LookFailed(String),
    /// The wait ran out; why, as the user reads it.
    TimedOut(String),
    /// The job that held the site panicked.
    Panicked { job: &'static str, message: String },
}

/// How the host said its install failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFailed {
    /// The report's error, when it carried one.
    pub error: Option<String>,
    /// The host's step when it failed.
    pub step: String,
}

/// What the engine does next with a site.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `done` is finished: save `next` as the site's step, then start it (its job or its wait).
    Go { done: Step, next: Step },
    /// The site ends in this run (`done`: the step it finished last, when it ended well).
    Finish(Result<Step, Failure>),
    /// Nothing to do: the event is not one this step takes.
    Stay,
}

/// Why a site failed, as `ibi deploy` and `ibi status` say it. Host and BMC text is kept as it
/// came; it is escaped where it is printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The site's record could not be read or saved.
    Record(String),
    /// Before any job: the site's BMC entry, its image or its medium.
    Setup(String),
    /// The step's BMC job failed.
    Job(Step, String),
    /// The host reported that its install failed.
    Host { site: String, failed: HostFailed },
    /// The wait ran out.
    TimedOut(String),
    /// The cluster could not be looked at.
    Cluster(String),
    /// A job panicked: a bug in ibi.
    Panicked {
        site: String,
        job: &'static str,
        message: String,
    },
    /// The failure, and why it could not be saved in the site's record.
    Unsaved(Box<Failure>, String),
}

/// How much of a panic's message is shown.
const PANIC_SHOWN: usize = 400;

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Record(e) | Failure::Setup(e) | Failure::TimedOut(e) | Failure::Cluster(e) => {
                f.write_str(e)
            }
            Failure::Job(Step::BootDisk, e) => write!(f, "booting the disk: {e}"),
            Failure::Job(Step::Eject, e) => write!(f, "ejecting: {e}"),
            Failure::Job(_, e) => f.write_str(e),
            Failure::Host {
                site,
                failed: HostFailed { error: Some(e), .. },
            } => write!(
                f,
                "the host reported a failure: {e} (it is not booted again by a re-run: check it, then pass --redo {site} to install it again)"
            ),
            Failure::Host {
                site,
                failed: HostFailed { error: None, step },
            } => write!(
                f,
                "the host reported a failure at step {step} (pass --redo {site} to install it again)"
            ),
            Failure::Panicked { site, job, message } => write!(
                f,
                "ibi's {job} job panicked ({}): a bug in ibi; the host may be part-way through the {job}: check it (a re-run resumes the site where its record says; --redo {site} starts it over)",
                crate::util::text::clip(message, PANIC_SHOWN),
            ),
            Failure::Unsaved(e, why) => write!(
                f,
                "{e}; and this failure could not be recorded ({why}): `ibi status` still shows the site as it was before"
            ),
        }
    }
}

/// What follows `event` for `site` at `at` in `phase`: the one place deploy decides.
pub fn next(phase: Phase, site: &str, at: Step, event: Event) -> Action {
    let onward = || match after(phase, at) {
        Some(next) => Action::Go { done: at, next },
        None => Action::Finish(Ok(at)),
    };
    match (at, event) {
        (_, Event::Panicked { job, message }) => Action::Finish(Err(Failure::Panicked {
            site: site.to_string(),
            job,
            message,
        })),
        (Step::Boot | Step::BootDisk | Step::Eject, Event::JobEnded(Ok(()))) => onward(),
        (Step::Boot | Step::BootDisk | Step::Eject, Event::JobEnded(Err(e))) => {
            Action::Finish(Err(Failure::Job(at, e)))
        }
        (Step::WaitReport, Event::HostEnded(Ok(()))) => onward(),
        (Step::WaitReport, Event::HostEnded(Err(failed))) => Action::Finish(Err(Failure::Host {
            site: site.to_string(),
            failed,
        })),
        (Step::Watch, Event::ClusterReady) => onward(),
        (Step::Watch, Event::LookFailed(e)) => Action::Finish(Err(Failure::Cluster(e))),
        (Step::WaitReport | Step::Watch, Event::TimedOut(why)) => {
            Action::Finish(Err(Failure::TimedOut(why)))
        }
        _ => Action::Stay,
    }
}

/// What a failure to save `next` after `done` says.
pub fn not_saved(done: Step, error: &anyhow::Error) -> Failure {
    Failure::Record(format!("recording {}: {error:#}", done.recording()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PHASES: [Phase; 3] = [Phase::Factory, Phase::Site, Phase::Oneshot];

    fn ok() -> Event {
        Event::JobEnded(Ok(()))
    }

    /// Drives a site from `from` through `events`, as the engine would (a `Go` moves it on, a
    /// `Finish` ends it); the steps it went through and how it ended.
    fn walk(phase: Phase, from: Step, events: Vec<Event>) -> (Vec<Step>, Option<Action>) {
        let mut at = from;
        let mut seen = vec![at];
        for ev in events {
            match next(phase, "a17", at, ev) {
                Action::Go { done, next } => {
                    assert_eq!(done, at);
                    at = next;
                    seen.push(at);
                }
                Action::Stay => {}
                end @ Action::Finish(_) => return (seen, Some(end)),
            }
        }
        (seen, None)
    }

    fn record(step: Step, state: RunState) -> PhaseRecord {
        PhaseRecord {
            state,
            ..PhaseRecord::begun(step.name(), 100)
        }
    }

    #[test]
    fn every_phase_runs_its_table_in_order_and_ends_after_its_last_step() {
        let host = || Event::HostEnded(Ok(()));
        let cases = [
            (Phase::Factory, vec![ok(), host(), ok()]),
            (Phase::Site, vec![ok(), Event::ClusterReady, ok()]),
            (
                Phase::Oneshot,
                vec![ok(), host(), ok(), Event::ClusterReady],
            ),
        ];
        for (phase, events) in cases {
            let (seen, end) = walk(phase, Step::Boot, events);
            assert_eq!(seen, steps(phase), "{phase:?}");
            let last = *steps(phase).last().unwrap();
            assert_eq!(end, Some(Action::Finish(Ok(last))), "{phase:?}");
        }
        assert_eq!(first_wait(Phase::Site), Step::Watch);
        assert_eq!(first_wait(Phase::Factory), Step::WaitReport);
        assert_eq!(first_wait(Phase::Oneshot), Step::WaitReport);
    }

    #[test]
    fn an_event_a_step_does_not_take_changes_nothing() {
        for phase in PHASES {
            for &at in steps(phase) {
                let foreign = match at {
                    Step::Boot | Step::BootDisk | Step::Eject => Event::ClusterReady,
                    Step::WaitReport => ok(),
                    Step::Watch => Event::HostEnded(Ok(())),
                };
                assert_eq!(next(phase, "a17", at, foreign), Action::Stay, "{at}");
            }
            // A job step has no timeout of its own: the BMC job's own bounds end it.
            assert_eq!(
                next(phase, "a17", Step::Boot, Event::TimedOut("x".into())),
                Action::Stay
            );
        }
    }

    #[test]
    fn a_failed_job_ends_the_site_naming_the_job() {
        let fail = |phase, at| match next(
            phase,
            "a17",
            at,
            Event::JobEnded(Err("BMC said 500".into())),
        ) {
            Action::Finish(Err(f)) => f.to_string(),
            other => panic!("{other:?}"),
        };
        assert_eq!(fail(Phase::Factory, Step::Boot), "BMC said 500");
        assert_eq!(
            fail(Phase::Factory, Step::Eject),
            "ejecting: BMC said 500",
            "an eject failure"
        );
        assert_eq!(fail(Phase::Site, Step::Eject), "ejecting: BMC said 500");
        assert_eq!(
            fail(Phase::Oneshot, Step::BootDisk),
            "booting the disk: BMC said 500"
        );
    }

    #[test]
    fn a_wait_ends_failed_on_a_host_failure_a_timeout_or_a_look_that_fails() {
        let host = Event::HostEnded(Err(HostFailed {
            error: Some("disk not found".into()),
            step: "install".into(),
        }));
        let Action::Finish(Err(f)) = next(Phase::Factory, "a17", Step::WaitReport, host) else {
            panic!()
        };
        assert!(f.to_string().contains("disk not found"), "{f}");
        assert!(f.to_string().contains("--redo a17"), "{f}");
        let quiet = Event::HostEnded(Err(HostFailed {
            error: None,
            step: "precache".into(),
        }));
        let Action::Finish(Err(f)) = next(Phase::Oneshot, "c", Step::WaitReport, quiet) else {
            panic!()
        };
        assert!(f.to_string().contains("at step precache"), "{f}");
        for (phase, at) in [
            (Phase::Factory, Step::WaitReport),
            (Phase::Site, Step::Watch),
            (Phase::Oneshot, Step::Watch),
        ] {
            assert_eq!(
                next(phase, "a17", at, Event::TimedOut("no report".into())),
                Action::Finish(Err(Failure::TimedOut("no report".into())))
            );
        }
        assert_eq!(
            next(
                Phase::Site,
                "a17",
                Step::Watch,
                Event::LookFailed("401".into())
            ),
            Action::Finish(Err(Failure::Cluster("401".into())))
        );
    }

    #[test]
    fn a_panicked_job_ends_its_site_at_any_step_with_a_bounded_message() {
        for phase in PHASES {
            for &at in steps(phase) {
                let ev = Event::Panicked {
                    job: "boot",
                    message: "x".repeat(5000),
                };
                let Action::Finish(Err(f)) = next(phase, "a17", at, ev) else {
                    panic!("{phase:?} {at}")
                };
                let text = f.to_string();
                assert!(text.contains("a bug in ibi"), "{text}");
                assert!(text.contains("--redo a17"), "{text}");
                assert!(text.len() < 1000, "{}", text.len());
            }
        }
    }

    #[test]
    fn a_rerun_resumes_at_the_first_unfinished_step_and_never_boots_twice() {
        use Resume::{At, Done};
        for phase in PHASES {
            assert_eq!(resume(phase, None, false), At(Step::Boot), "not begun");
            let begun = record(Step::Boot, RunState::Running);
            assert_eq!(resume(phase, Some(&begun), false), At(Step::Boot));
            // Reported since the phase began: it was booted, even if `booted` was not saved.
            assert_eq!(resume(phase, Some(&begun), true), At(first_wait(phase)));
            let mut booted = record(Step::Boot, RunState::Failed);
            booted.booted = Some(101);
            assert_eq!(
                resume(phase, Some(&booted), false),
                At(first_wait(phase)),
                "killed during the power-on: waited for, not booted again"
            );
            let done = record(*steps(phase).last().unwrap(), RunState::Done);
            assert_eq!(resume(phase, Some(&done), true), Done);
        }
        let eject = record(Step::Eject, RunState::Failed);
        assert_eq!(
            resume(Phase::Factory, Some(&eject), true),
            At(Step::Eject),
            "a finished host whose eject failed is only ejected"
        );
        let disk = record(Step::BootDisk, RunState::Failed);
        assert_eq!(
            resume(Phase::Oneshot, Some(&disk), true),
            At(Step::BootDisk)
        );
        let mut powered = disk.clone();
        powered.disk_booted = Some(200);
        assert_eq!(
            resume(Phase::Oneshot, Some(&powered), true),
            At(Step::Watch),
            "the disk may have been powered on: only watched again"
        );
    }

    #[test]
    fn an_interrupted_job_still_moves_its_site_and_the_rerun_takes_it_from_there() {
        // An interrupt starts no new job, but the result of one under way is taken: its step is
        // saved, and a re-run resumes after it.
        let Action::Go { next: at, .. } = next(Phase::Factory, "a17", Step::Boot, ok()) else {
            panic!()
        };
        let mut rec = record(at, RunState::Running);
        rec.booted = Some(101);
        let resumed_at = resume(Phase::Factory, Some(&rec), false);
        assert_eq!(resumed_at, Resume::At(Step::WaitReport));
        assert_eq!(
            left_as(Phase::Factory, resumed_at),
            "booted: a re-run waits for it, without booting it again"
        );
        assert_eq!(
            left_as(Phase::Oneshot, Resume::At(Step::Watch)),
            "its disk booted: a re-run watches its cluster"
        );
        assert_eq!(
            left_as(Phase::Site, Resume::At(Step::Watch)),
            "booted: a re-run waits for it, without booting it again"
        );
    }

    #[test]
    fn the_record_words_are_the_ones_earlier_runs_wrote() {
        for (step, word) in [
            (Step::Boot, "boot"),
            (Step::WaitReport, "wait-report"),
            (Step::Watch, "watch"),
            (Step::BootDisk, "boot-disk"),
            (Step::Eject, "eject"),
        ] {
            assert_eq!(step.name(), word);
            assert_eq!(Step::parse(word), Some(step));
        }
        assert_eq!(Step::parse("wait"), None);
    }

    #[test]
    fn an_unsaved_failure_says_the_record_still_shows_the_state_before() {
        let f = Failure::Unsaved(
            Box::new(Failure::Job(Step::Eject, "refused".into())),
            "disk full".into(),
        );
        assert_eq!(
            f.to_string(),
            "ejecting: refused; and this failure could not be recorded (disk full): `ibi status` still shows the site as it was before"
        );
    }
}
