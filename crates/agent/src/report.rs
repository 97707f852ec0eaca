//! The host's reports to `ibi serve` while `ibi agent install` runs (`hostAgent: ibi` with `statusURL`;
//! contract: `contract::host_report`): every step change and, at most once a minute, progress,
//! then the result; a failure carries the last lines of the install unit's journal, filtered of secrets
//! (the report token, every credential of the pull secret, the password of any `scheme://user:pass@`).
//!
//! Reporting is observability, not the install: reports are posted by a thread of their own, so a slow
//! or unreachable server never holds a step back. Every state change is sent, in order; progress within
//! a step replaces the progress report still waiting before it. While the server is unreachable (no
//! answer, 408, 429, 5xx) a report is tried again after `delaySeconds`, `attempts` times in all, and the
//! newest report queued meanwhile replaces it (the server then only needs where the install is). The final report is the exception:
//! [`Reporter::finish`] waits until it is delivered or its tries are used up, so it is sent before the
//! host powers off. A refusal of the token (401, 403) ends reporting; other refusals drop that report.

mod host;
mod reporter;

pub use host::ReporterSetup;
pub(crate) use host::load_report_config;
pub use reporter::Delivery;
pub(crate) use reporter::{Reporter, innermost};
