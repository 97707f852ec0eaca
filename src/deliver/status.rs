//! `ibi status`: where each host of a fleet stands, from what `BASE/.ibi/` holds: the reports the hosts
//! sent `ibi serve` ([`super::report_store`]), the record `ibi deploy` keeps per site
//! ([`super::deploy_state`]) and deploy's lock. [`fleet`] joins them; [`render`] prints the table or
//! the JSON.

mod fleet;
mod render;

pub use fleet::{Damage, DeployRun, Fleet, HostStatus, PhaseStatus, fleet_status};
pub use render::{age, render, render_json};

#[cfg(test)]
mod tests;
