//! The contracts between what ibi builds and what reads it on a host, in one place each: the factory
//! side (ibi's `config_image`, `install_image`, `seed`) and the host side (`ibi-agent`,
//! lifecycle-agent) both read them from here.

pub mod agent_status;
pub mod config_iso;
pub mod host_report;
pub mod ibi_configuration;
pub mod pull_secret;
pub mod seed_image;
