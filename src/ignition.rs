//! Ignition for the installation ISO: the spec 3.2.0 types ibi needs (an override may raise the config to
//! 3.3.0 or 3.4.0, which only add fields), and the builder of the config that
//! the CoreOS live ISO runs on boot so that the seed's `lca-cli ibi` (or, with `hostAgent: ibi`,
//! `ibi agent install`) installs the host.
//!
//! The generated config reproduces `openshift-install image-based create image` (files, units, texts,
//! modes and the merge order of `ignitionConfigOverride`); where ibi deliberately differs, the item says
//! so in a comment. [`types`] holds the serde model (only the fields the builder reads or writes are typed,
//! the rest travels through untouched), [`merge`] Ignition's own config-merge rules, [`registries`] the
//! `registries.conf` writer, [`installation`] the builder and the texts of every generated file, and
//! [`host_agent`] the texts of the `hostAgent: ibi` variant.

pub mod host_agent;
pub mod installation;
pub mod merge;
pub mod registries;
pub mod types;

pub use host_agent::IBI_AGENT_UNIT;
pub use installation::{INSTALL_UNIT, InstallationIgnitionInputs, build_installation_ignition};
pub use merge::{merge_configs, parse_override};
pub use types::{
    Config, File, IGNITION_VERSION, Ignition, NodeUser, Passwd, PasswdUser, Resource, Storage,
    Systemd, Unit, data_url, decode_data_url, to_json,
};

#[cfg(test)]
mod host_agent_tests;
#[cfg(test)]
mod tests;
