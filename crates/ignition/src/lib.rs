//! Ignition, the format: the spec 3.2.0 types ibi needs (an override may raise a config to 3.3.0 or
//! 3.4.0, which only add fields) and Ignition's own config-merge rules. It knows nothing of OpenShift;
//! `install_image::ignition` builds the installation ISO's config with it.
//!
//! [`types`] holds the serde model (only the fields a builder reads or writes are typed, the rest travels
//! through untouched), [`merge`] the merge rules.

pub mod merge;
pub mod types;

pub use merge::{merge_configs, parse_override};
pub use types::{
    Config, File, IGNITION_VERSION, Ignition, NodeUser, Passwd, PasswdUser, Resource, Storage,
    Systemd, Unit, data_url, decode_data_url, to_json,
};
