//! The installation ISO's Ignition config: the builder and the texts of every generated file, as
//! `openshift-install image-based create image` writes them ([`installation`]), the `hostAgent: ibi`
//! variant ([`host_agent`]), the one-shot site install's tree and `post.sh` ([`one_shot`]), the host's reports to `ibi serve` ([`status_report`]), the `registries.conf` writer ([`registries`]) and what units of both share
//! ([`units`]). The Ignition format itself (types, merge rules) is `crate::ignition`.

pub mod host_agent;
pub mod installation;
pub mod one_shot;
pub mod registries;
pub mod status_report;
pub mod units;

pub use host_agent::IBI_AGENT_UNIT;
pub use installation::{INSTALL_UNIT, InstallationIgnitionInputs, build_installation_ignition};
