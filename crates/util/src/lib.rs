//! Small, boring helpers: atomic file writes, directory locks, logging setup, progress bars, a guard for YAML input and
//! the lines of a YAML document's keys, clipping a server's text for a message and a reader on its own
//! thread.

pub mod digest;
pub mod fault;
pub mod file_version;
pub mod finding;
pub mod fs;
pub mod interrupt;
pub mod lock;
pub mod logging;
pub mod progress;
pub mod read_ahead;
pub mod secret;
pub mod summary;
pub mod text;
pub mod token;
#[allow(unsafe_code)] // libyaml's scanner, run alone (see the module)
pub mod yaml;
#[allow(unsafe_code)] // libyaml's event stream, for the keys' lines (see the module)
pub mod yaml_lines;
