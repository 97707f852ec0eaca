//! Where the server's record goes: one line per request (and per report), on stderr for `ibi serve`
//! (it is the server's output), appended to a file for `ibi deploy`, whose stderr holds the progress
//! bars and the sites' errors.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, Result};

use crate::util::fs::SECRET_FILE_MODE;

#[derive(Debug)]
pub enum AccessLog {
    Stderr,
    File(Mutex<File>),
}

impl AccessLog {
    /// Appends to `path` (0600: lines name clients and images, never tokens, but stay private).
    pub fn append_to(path: &Path) -> Result<AccessLog> {
        use std::os::unix::fs::OpenOptionsExt;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(SECRET_FILE_MODE)
            .open(path)
            .with_context(|| format!("opening the access log {}", path.display()))?;
        Ok(AccessLog::File(Mutex::new(f)))
    }

    /// One line; a failing log write is not worth failing a download for.
    pub fn line(&self, line: &str) {
        match self {
            AccessLog::Stderr => eprintln!("{line}"),
            AccessLog::File(f) => {
                let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
                let _ = writeln!(f, "{line}");
            }
        }
    }
}
