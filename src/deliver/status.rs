//! `ibi status`: where each host of a fleet stands, from what `BASE/.ibi/` holds: the reports the hosts
//! sent `ibi serve` ([`super::report_store`]), the record `ibi deploy` keeps per site
//! ([`super::deploy_state`]) and deploy's lock. [`fleet`] joins them; [`render`] prints the table or
//! the JSON; [`html`] writes the same as one self-contained page.

mod fleet;
mod html;
mod live;
mod render;

pub use fleet::{Damage, DeployRun, Fleet, HostStatus, PhaseStatus, fleet_status};
pub use html::{HTML_FILE_MODE, render_html, render_live};
pub use live::{dashboard, dashboard_line};
pub use render::{age, render, render_json};

#[cfg(test)]
mod tests;
