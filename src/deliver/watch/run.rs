//! The watch's clock: look, judge, report what changed, until every milestone holds at once or
//! the time is up. The first time each milestone holds is kept; one that stops holding is reported
//! (a reboot, an API server restarting) but keeps its first time.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use chrono::{DateTime, Utc};
use serde::Serialize;
use tracing::debug;

use super::judge::{Check, Verdicts, judge};
use super::observe::{Observation, observe};
use crate::config_image::build::{AUTH_DIR, KUBECONFIG_FILE};
use crate::config_image::marker::{self, Expected};
use crate::contract::config_iso::{EXTRA_MANIFESTS_DIR, ISO_FILE_NAME, MANIFEST_PATH, MARKER_FILE};
use crate::install_image::one_shot_check;
use crate::kubeapi::{ApiError, Client, ClientOptions, load_kubeconfig};

/// How the `api` milestone's detail starts while the API does not answer.
const NOT_REACHABLE: &str = "not reachable: ";

/// image-based-install-operator's default: it gives a reconfiguration an hour.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// What to watch and for how long (`ibi watch`'s options give the defaults).
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// The site's directory: `auth/kubeconfig` and `imagebasedconfig.iso` as `create config-image`
    /// wrote them.
    pub site_dir: PathBuf,
    /// Zero looks once.
    pub timeout: Duration,
    /// Between two looks.
    pub interval: Duration,
    /// What the host was given, when not the site's configuration ISO as it is now (deploy's
    /// record, or a one-shot ISO's tree): the cluster is judged by it.
    pub expected: Option<Expected>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Milestone {
    Api,
    Readyz,
    Configuration,
    ClusterVersion,
    Node,
}

impl Milestone {
    pub const ALL: [Milestone; 5] = [
        Self::Api,
        Self::Readyz,
        Self::Configuration,
        Self::ClusterVersion,
        Self::Node,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Readyz => "readyz",
            Self::Configuration => "configuration",
            Self::ClusterVersion => "clusterversion",
            Self::Node => "node",
        }
    }
}

/// A milestone's state: whether it holds now, since when it first did, and what was last seen.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MilestoneState {
    pub milestone: Milestone,
    pub held: bool,
    pub first_held: Option<DateTime<Utc>>,
    pub detail: String,
}

/// A change worth a line: a milestone that holds, or stops (or, at the first look, does not yet).
#[derive(Debug, Clone)]
pub struct Event {
    pub at: DateTime<Utc>,
    pub milestone: Milestone,
    pub held: bool,
    /// It held before and does not now.
    pub lost: bool,
    pub detail: String,
}

/// How the watch ended, when it was not an error.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub server: String,
    pub ready: bool,
    pub started: DateTime<Utc>,
    pub ended: DateTime<Utc>,
    pub milestones: Vec<MilestoneState>,
    /// Whether the API ever answered.
    pub reached: bool,
    /// Since when it has not answered, if it does not now.
    pub unreachable_since: Option<DateTime<Utc>>,
}

/// The watch ended without the cluster ready: what the command reports and exits 2 for.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotReady(pub String);

impl Outcome {
    /// One sentence on why the cluster is not ready (for the exit message).
    pub fn not_ready_reason(&self) -> String {
        let seconds = (self.ended - self.started).num_seconds().max(0);
        let after = format!("not ready after {seconds} s");
        match (self.reached, self.unreachable_since) {
            (false, Some(since)) => format!(
                "{after}: the API at {} never answered (not reachable since {}: {})",
                self.server,
                since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                self.detail(Milestone::Api)
                    .trim_start_matches(NOT_REACHABLE)
            ),
            (true, Some(since)) => format!(
                "{after}: the API at {} has not answered since {}",
                self.server,
                since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
            _ => {
                let pending: Vec<String> = self
                    .milestones
                    .iter()
                    .filter(|m| !m.held)
                    .map(|m| format!("{}: {}", m.milestone.name(), m.detail))
                    .collect();
                format!("{after}: {}", pending.join("; "))
            }
        }
    }

    fn detail(&self, m: Milestone) -> &str {
        self.milestones
            .iter()
            .find(|s| s.milestone == m)
            .map_or("", |s| s.detail.as_str())
    }
}

/// Watches the site's cluster; `on_event` hears each change as it happens (a caller that does not
/// care passes `&mut |_| {}`). Blocking: a caller that watches many sites uses [`Watcher`], one look
/// at a time.
///
/// `Ok` is the verdict, ready or not ([`Outcome::ready`], [`Outcome::not_ready_reason`]); a host
/// that never answers is an `Ok` not ready, with [`Outcome::reached`] false. `Err` is what no wait
/// cures: an unusable site directory, an untrusted server, refused credentials.
pub fn watch(req: &WatchRequest, on_event: &mut dyn FnMut(&Event)) -> Result<Outcome> {
    let mut w = Watcher::open_expecting(&req.site_dir, req.expected.clone())?;
    let deadline = Instant::now() + req.timeout;
    loop {
        let ready = w.look(on_event)?;
        let left = deadline.saturating_duration_since(Instant::now());
        if ready || left.is_zero() {
            break;
        }
        std::thread::sleep(req.interval.min(left));
    }
    Ok(w.outcome())
}

/// One site's watch, a look at a time: for a fleet, where a few threads look at many clusters in
/// turn and the caller keeps the clock.
pub struct Watcher {
    site_dir: PathBuf,
    client: Client,
    expected: Expected,
    tracker: Tracker,
}

impl Watcher {
    /// Reads the site's kubeconfig and what the host was given (`expected` when there is one, else
    /// the site's configuration ISO), by which the cluster is judged; looks at nothing yet.
    pub fn open_expecting(
        site_dir: &std::path::Path,
        expected: Option<Expected>,
    ) -> Result<Watcher> {
        let (client, expected) = open_site(site_dir, expected)?;
        let tracker = Tracker::new(client.origin(), now());
        Ok(Watcher {
            site_dir: site_dir.to_path_buf(),
            client,
            expected,
            tracker,
        })
    }

    /// One look (a few GETs, each bounded); whether every milestone holds now. `Err` for what no
    /// wait cures.
    pub fn look(&mut self, on_event: &mut dyn FnMut(&Event)) -> Result<bool> {
        let obs = observe(&self.client).map_err(|e| hint(e, &self.site_dir))?;
        debug!(?obs, "observed");
        self.tracker.update(now(), &self.expected, &obs, on_event);
        Ok(self.tracker.all_held())
    }

    /// The verdict so far.
    pub fn outcome(&self) -> Outcome {
        self.tracker.clone().finish(now())
    }
}

fn now() -> DateTime<Utc> {
    DateTime::<Utc>::from(SystemTime::now())
}

/// The client for the site's kubeconfig and what its ISO promises.
fn open_site(dir: &std::path::Path, expected: Option<Expected>) -> Result<(Client, Expected)> {
    let kubeconfig = dir.join(AUTH_DIR).join(KUBECONFIG_FILE);
    let access = load_kubeconfig(&kubeconfig)?;
    let expected = match expected {
        Some(e) => e,
        None => marker::read_expected(&dir.join(ISO_FILE_NAME))?,
    };
    let client = Client::new(&access, ClientOptions::default())
        .with_context(|| format!("{}", kubeconfig.display()))?;
    Ok((client, expected))
}

/// What the one-shot ISO at `iso` carries, as the watch judges by it.
pub fn one_shot_expected(iso: &std::path::Path) -> Result<Expected> {
    let carried = match one_shot_check::carried(iso)? {
        Some(c @ one_shot_check::Carried::Tree(_)) => c,
        Some(one_shot_check::Carried::Fetch(_)) => bail!(
            "{}: this one-shot ISO fetches the site's configuration ISO at install time: watch without --one-shot (imagebasedconfig.iso is what it fetches)",
            iso.display()
        ),
        None => bail!(
            "{}: not a one-shot ISO (built with ibi create image --site): --one-shot judges by the configuration such an ISO carries",
            iso.display()
        ),
    };
    let file = |rel: &str| {
        one_shot_check::tree_file(&carried, rel)
            .with_context(|| format!("{}: its tree has no {rel}", iso.display()))
    };
    let marker = file(&format!("{EXTRA_MANIFESTS_DIR}/{MARKER_FILE}"))?;
    let manifest = file(MANIFEST_PATH)?;
    marker::expected_from(marker, manifest, &iso.display().to_string())
}

/// Says what the user can do about an error no wait cures.
fn hint(e: ApiError, dir: &std::path::Path) -> anyhow::Error {
    let kubeconfig = dir.join(AUTH_DIR).join(KUBECONFIG_FILE);
    let advice = match &e {
        ApiError::ServerNotTrusted { .. } => format!(
            "the server is not this site's cluster, or not yet reconfigured with its keys: {} trusts only the site's signers (is the API name resolving to the right host? a site rebuilt with --rotate-crypto needs its host reconfigured with the new ISO)",
            kubeconfig.display()
        ),
        ApiError::ClientCertificateRefused { .. } | ApiError::Unauthorized { .. } => format!(
            "the cluster does not accept this site's admin certificate ({}): is it another cluster, or one reconfigured from another build of this site?",
            kubeconfig.display()
        ),
        _ => format!("watching with {}", kubeconfig.display()),
    };
    anyhow::Error::new(e).context(advice)
}

/// Milestones' states across looks.
#[derive(Clone)]
struct Tracker {
    server: String,
    started: DateTime<Utc>,
    states: Vec<MilestoneState>,
    reached: bool,
    unreachable_since: Option<DateTime<Utc>>,
    looked: bool,
}

impl Tracker {
    fn new(server: &str, started: DateTime<Utc>) -> Self {
        Self {
            server: server.to_string(),
            started,
            states: Milestone::ALL
                .iter()
                .map(|&milestone| MilestoneState {
                    milestone,
                    held: false,
                    first_held: None,
                    detail: "not looked at yet".into(),
                })
                .collect(),
            reached: false,
            unreachable_since: None,
            looked: false,
        }
    }

    fn update(
        &mut self,
        at: DateTime<Utc>,
        expected: &Expected,
        obs: &Observation,
        on_event: &mut dyn FnMut(&Event),
    ) {
        let checks = match obs {
            Observation::Unreachable(why) => {
                self.unreachable_since.get_or_insert(at);
                unreachable(why)
            }
            Observation::Answered(facts) => {
                self.reached = true;
                self.unreachable_since = None;
                answered(judge(expected, facts))
            }
        };
        let first = !std::mem::replace(&mut self.looked, true);
        for (state, check) in self.states.iter_mut().zip(checks) {
            let changed = state.held != check.held;
            state.held = check.held;
            state.detail = check.detail;
            if check.held && state.first_held.is_none() {
                state.first_held = Some(at);
            }
            // At the first look only the API's state is worth a line when it does not hold: the
            // rest cannot hold before it.
            let first_line = first && state.milestone == Milestone::Api;
            if changed || first_line {
                on_event(&Event {
                    at,
                    milestone: state.milestone,
                    held: state.held,
                    lost: !state.held && state.first_held.is_some(),
                    detail: state.detail.clone(),
                });
            }
        }
    }

    fn all_held(&self) -> bool {
        self.states.iter().all(|s| s.held)
    }

    fn finish(self, ended: DateTime<Utc>) -> Outcome {
        Outcome {
            ready: self.all_held(),
            server: self.server,
            started: self.started,
            ended,
            milestones: self.states,
            reached: self.reached,
            unreachable_since: self.unreachable_since,
        }
    }
}

/// The checks of a look without an answer, in [`Milestone::ALL`] order.
fn unreachable(why: &str) -> Vec<Check> {
    let unknown = || Check {
        held: false,
        detail: "unknown: the API does not answer".into(),
    };
    vec![
        Check {
            held: false,
            detail: format!("{NOT_REACHABLE}{why}"),
        },
        unknown(),
        unknown(),
        unknown(),
        unknown(),
    ]
}

/// The checks of an answered look, in [`Milestone::ALL`] order.
fn answered(v: Verdicts) -> Vec<Check> {
    vec![
        Check {
            held: true,
            detail: "reachable".into(),
        },
        v.readyz,
        v.configuration,
        v.cluster_version,
        v.node,
    ]
}

#[cfg(test)]
mod tests;
