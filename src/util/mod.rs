//! Small, boring helpers: atomic file writes and logging setup.

pub mod fs;
pub mod logging;
