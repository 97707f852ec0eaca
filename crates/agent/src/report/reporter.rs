//! The reporting thread: a queue of one (the latest report), retries while the server is unreachable,
//! and the final report's wait; see the parent module.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{Context, Result};
use tracing::{info, warn};

use crate::state::Observer;
use contract::agent_status::{RunState, Status};
use contract::host_report::{
    HostIdentity, HostReport, REPORT_VERSION, ReportConfig, ReportingAgent, bound_log_lines,
    redact_url_credentials,
};
use util::secret::{Secret, scrub};

/// One request's bound: a server that accepted the connection answers a small POST at once.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Reports waiting while one is being delivered: a whole install has fewer step changes, so none is
/// dropped while the server answers; past it the oldest go (the newest says where the install is).
const MAX_PENDING: usize = 64;

/// What a report's delivery came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Delivered,
    /// The server said no (its HTTP status); not tried again.
    Refused(u16),
    /// Every try failed to reach the server.
    GaveUp,
}

/// Posts reports from a thread of its own; see the module comment.
#[derive(Debug)]
pub struct Reporter {
    shared: Arc<Shared>,
    identity: HostIdentity,
    secrets: Vec<Secret>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    queue: Mutex<Queue>,
    changed: Condvar,
    sender: Sender,
}

#[derive(Debug, Default)]
struct Queue {
    /// In order; a progress report replaces the one before it of the same step and state.
    pending: VecDeque<HostReport>,
    /// The final report was queued: nothing after it is sent.
    closed: bool,
    /// The server refused the token: nothing more is sent.
    refused: bool,
    /// How the final report went, once it has.
    outcome: Option<Delivery>,
}

impl Reporter {
    /// Starts the reporting thread. `secrets` are scrubbed from everything sent besides the token,
    /// which always is.
    pub(crate) fn start(
        config: ReportConfig,
        identity: HostIdentity,
        mut secrets: Vec<Secret>,
    ) -> Result<Reporter> {
        secrets.insert(0, config.token.clone());
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue::default()),
            changed: Condvar::new(),
            sender: Sender::new(config)?,
        });
        let worker = shared.clone();
        let thread = std::thread::Builder::new()
            .name("ibi-report".into())
            .spawn(move || worker.run())
            .context("starting the report thread")?;
        Ok(Reporter {
            shared,
            identity,
            secrets,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Hands `status` on as a progress report (not final).
    pub(crate) fn report(&self, status: &Status) {
        let report = self.build(status.clone(), false, Vec::new());
        self.shared.enqueue(report, false);
    }

    /// An observer for [`crate::state::Progress::observe`].
    pub fn observer(self: &Arc<Self>) -> Observer {
        let me = Arc::clone(self);
        Arc::new(move |s: &Status| me.report(s))
    }

    /// Sends the final report and waits until it is delivered or given up. `status` is where the
    /// install ended; `Err(error)` marks it failed with that error and attaches `logs`. Only the first
    /// call sends anything.
    pub fn finish(
        &self,
        mut status: Status,
        outcome: Result<(), &str>,
        logs: Vec<String>,
    ) -> Delivery {
        let logs = match outcome {
            Ok(()) => {
                status.state = RunState::Done;
                Vec::new()
            }
            Err(error) => {
                status.state = RunState::Failed;
                status.error = Some(error.to_string());
                logs
            }
        };
        let report = self.build(status, true, logs);
        self.shared.enqueue(report, true);
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle
            && h.join().is_err()
        {
            warn!(target: "ibi::agent::report::reporter", "the report thread panicked");
        }
        self.shared.lock().outcome.unwrap_or(Delivery::GaveUp)
    }

    fn build(&self, mut status: Status, finished: bool, logs: Vec<String>) -> HostReport {
        if let Some(e) = status.error.as_mut() {
            *e = scrub(e, &self.secrets);
        }
        HostReport {
            version: REPORT_VERSION,
            agent: ReportingAgent::Ibi,
            host: self.identity.clone(),
            status,
            finished,
            logs: filter_logs(logs, &self.secrets),
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn enqueue(&self, report: HostReport, last: bool) {
        let mut q = self.lock();
        if q.closed || q.refused {
            return;
        }
        let same_state = |r: &HostReport| {
            r.status.step == report.status.step && r.status.state == report.status.state
        };
        if !last && q.pending.back().is_some_and(same_state) {
            q.pending.pop_back();
        }
        q.pending.push_back(report);
        if q.pending.len() > MAX_PENDING {
            q.pending.pop_front();
        }
        q.closed = last;
        self.changed.notify_all();
    }

    /// The thread: the latest pending report, delivered with retries, until the final one.
    fn run(&self) {
        while let Some(report) = self.next() {
            // The report delivered may be a newer one than the one taken: the final report replaces a
            // progress report that is waiting to be tried again.
            let (outcome, last) = self.deliver(report);
            let mut q = self.lock();
            if matches!(outcome, Delivery::Refused(401 | 403)) {
                q.refused = true;
            }
            if last || q.refused {
                q.outcome = Some(outcome);
                self.changed.notify_all();
                return;
            }
        }
    }

    fn next(&self) -> Option<HostReport> {
        let mut q = self.lock();
        loop {
            if let Some(r) = q.pending.pop_front() {
                return Some(r);
            }
            if q.closed {
                return None;
            }
            q = self.changed.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Tries `report` until it is delivered, refused, replaced by a newer one (unless final) or out
    /// of tries; how it went, and whether the report it came to (the last one tried) was the final.
    fn deliver(&self, mut report: HostReport) -> (Delivery, bool) {
        let outcome = self.deliver_latest(&mut report);
        (outcome, report.finished)
    }

    fn deliver_latest(&self, report: &mut HostReport) -> Delivery {
        let config = &self.sender.config;
        let mut attempt = 1;
        loop {
            match self.sender.post(report) {
                Ok(()) => return Delivery::Delivered,
                Err(Failure::Refused(code)) => {
                    warn!(target: "ibi::agent::report::reporter",
                        "{} refused the report: HTTP {code}{}",
                        config.endpoint(),
                        if matches!(code, 401 | 403) {
                            " (the report token is not this server's); no further reports"
                        } else {
                            ""
                        }
                    );
                    return Delivery::Refused(code);
                }
                Err(Failure::Unreachable(why)) if attempt >= config.attempts => {
                    warn!(target: "ibi::agent::report::reporter",
                        "gave up reporting to {} after {attempt} tries: {why}",
                        config.endpoint()
                    );
                    return Delivery::GaveUp;
                }
                Err(Failure::Unreachable(why)) => {
                    info!(target: "ibi::agent::report::reporter",
                        "could not report to {} (try {attempt} of {}): {why}; again in {} s",
                        config.endpoint(),
                        config.attempts,
                        config.delay_seconds
                    );
                }
            }
            attempt += 1;
            match self.wait_or_newer(report) {
                Some(newer) => {
                    *report = newer;
                    attempt = 1;
                }
                None if self.lock().refused => return Delivery::GaveUp,
                None => {}
            }
        }
    }

    /// Waits the retry delay; the newest report queued meanwhile replaces a non-final `current` and
    /// every report between them: while the server is unreachable only where the install is matters.
    fn wait_or_newer(&self, current: &HostReport) -> Option<HostReport> {
        let delay = Duration::from_secs(self.sender.config.delay_seconds);
        let q = self.lock();
        let (mut q, _) = self
            .changed
            .wait_timeout_while(q, delay, |q| current.finished || q.pending.is_empty())
            .unwrap_or_else(|e| e.into_inner());
        if current.finished {
            return None;
        }
        q.pending.drain(..).next_back()
    }
}

/// Why one try failed.
enum Failure {
    Unreachable(String),
    Refused(u16),
}

/// The HTTP side: one client, TLS checked against `caPem` only when given.
#[derive(Debug)]
struct Sender {
    config: ReportConfig,
    client: reqwest::blocking::Client,
}

impl Sender {
    fn new(config: ReportConfig) -> Result<Sender> {
        let mut builder = reqwest::blocking::Client::builder()
            .user_agent(concat!("ibi/", env!("CARGO_PKG_VERSION")))
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .pool_max_idle_per_host(0);
        if let Some(pem) = &config.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
                .context("reading the report CA (statusCA)")?;
            builder = builder.tls_certs_only(certs);
        }
        let client = builder.build().context("setting up the report client")?;
        Ok(Sender { config, client })
    }

    fn post(&self, report: &HostReport) -> Result<(), Failure> {
        let body = serde_json::to_vec(report)
            .map_err(|e| Failure::Unreachable(format!("encoding the report: {e}")))?;
        let answer = self
            .client
            .post(self.config.endpoint())
            .bearer_auth(self.config.token.expose_str())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send();
        let status = match answer {
            Ok(r) => r.status().as_u16(),
            Err(e) => return Err(Failure::Unreachable(innermost(&e))),
        };
        match status {
            200..=299 => Ok(()),
            408 | 429 | 500..=599 => Err(Failure::Unreachable(format!("HTTP {status}"))),
            _ => Err(Failure::Refused(status)),
        }
    }
}

/// reqwest's outer messages repeat the URL; the innermost cause says what happened.
pub(crate) fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Lines as a report may carry them: every secret and URL password replaced, then bounded. Scrubbed
/// before they are cut, so a cut never leaves part of a secret.
fn filter_logs(lines: Vec<String>, secrets: &[Secret]) -> Vec<String> {
    bound_log_lines(
        lines
            .into_iter()
            .map(|l| redact_url_credentials(&scrub(&l, secrets))),
    )
}

#[cfg(test)]
mod tests;
