//! Small, boring helpers: atomic file writes, logging setup and progress bars.

pub mod fs;
pub mod logging;
pub mod progress;
