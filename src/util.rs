//! Small, boring helpers: atomic file writes, logging setup, progress bars and a guard for YAML input.

pub mod digest;
pub mod file_version;
pub mod fs;
pub mod logging;
pub mod progress;
pub mod secret;
pub mod yaml;
