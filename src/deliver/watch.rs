//! `ibi watch`: follows one site's cluster through its reconfiguration with the site's own admin
//! kubeconfig, until the API answers, `/readyz` says ok, this build's marker ConfigMap is there,
//! ClusterVersion is Available and not Progressing (and fresh: changed after the marker, so not the
//! seed's own status), and the node is Ready, or until the timeout. Each milestone is reported as it
//! is first held; a host that never answers is an outcome (not reachable since …), not an error.
//! The rules are in `judge`, pure; `observe` asks the API; `run` keeps time.

mod judge;
mod observe;
mod run;

pub use crate::config_image::marker::Expected;
pub use judge::{Check, Facts, Fetched, Verdicts, judge};
pub use run::{
    DEFAULT_TIMEOUT, Event, Milestone, MilestoneState, NotReady, Outcome, WatchRequest, Watcher,
    one_shot_expected, watch,
};
