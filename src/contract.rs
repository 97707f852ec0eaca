//! The contracts between what ibi builds and what reads it on a host, in one place each, never behind a
//! feature: the factory side (`config_image`, `install_image`) and the host side (`agent`, lifecycle-agent)
//! both read them from here.

pub mod agent_status;
pub mod config_iso;
pub mod host_report;
pub mod ibi_configuration;
