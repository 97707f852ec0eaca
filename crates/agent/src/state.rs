//! The host agent's run state: the steps of an install in lca-cli's order (reference `lifecycle-agent.md`
//! §4), the state file that records which of them finished so a re-run after a crash or power loss resumes
//! where it stopped, and (submodules) the JSON status file and the runner that ties them together.
//!
//! Steps are at-least-once: a step is recorded done only after it returns, so a crash between its effect and
//! the record runs it again. Each step therefore tolerates finding its own work already done. What must never
//! happen twice is a destructive step once the disk holds later work; [`StateFile::check_may_run`] enforces it.

mod file;
mod runner;
mod status;
pub(crate) use runner::{Runner, StepFn, step};
pub(crate) use status::Observer;
pub use status::Progress;

pub use file::Step;
pub(crate) use file::{StateError, StateFile};
