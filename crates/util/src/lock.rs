//! One lock per directory a long-running command owns (`ibi deploy` on BASE, `ibi serve` on DIR):
//! a file under the directory's `.ibi/`, locked with `flock` for as long as the command runs, that
//! also says who holds it (command, PID, listen address, since when) and, once released, when the
//! holder stopped. The kernel drops the lock when the process dies however it dies, so a killed
//! command never leaves a stale lock; its file then shows a holder with no stop time.
//!
//! A second command on the same directory is refused with the holder's name; `ibi status` reads the
//! state without taking the lock from anybody ([`state`]).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::fs::{SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir};

/// A reader ([`state`]) holds a shared lock for a few microseconds: a starting command waits this
/// long for it before calling the lock held.
const READER_GRACE: Duration = Duration::from_secs(2);
const MAX_LOCK_FILE: u64 = 64 * 1024;

/// Who holds (or last held) a lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    /// The command, as a user would type it after `ibi` (`deploy`, `serve`).
    pub command: String,
    pub pid: u32,
    /// The address its server listens on, when it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Unix seconds.
    pub started: u64,
    /// Unix seconds when it released the lock; absent while it runs, and for good when it was
    /// killed before it could say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<u64>,
}

impl Holder {
    /// This process, running `command` now.
    pub fn me(command: &str, listen: Option<String>) -> Holder {
        Holder {
            command: command.to_string(),
            pid: std::process::id(),
            listen,
            started: unix_now(),
            stopped: None,
        }
    }

    /// `ibi deploy (PID 4242, listening on 127.0.0.1:8443, since 2026-11-26T10:00:00Z)`.
    pub fn describe(&self) -> String {
        let listen = self
            .listen
            .as_deref()
            .map(|l| format!(", listening on {l}"))
            .unwrap_or_default();
        format!(
            "ibi {} (PID {}{listen}, since {})",
            self.command,
            self.pid,
            rfc3339(self.started)
        )
    }
}

/// What [`state`] finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockState {
    /// Nobody ever took it.
    Never,
    /// Held now by this holder.
    Held(Holder),
    /// Free; the last holder, with its stop time if it said so (none: it was killed).
    Free(Option<Holder>),
}

/// A held lock; released (and its stop time written) when dropped.
#[derive(Debug)]
pub struct DirLock {
    file: File,
    path: PathBuf,
    holder: Holder,
}

impl DirLock {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let mut done = self.holder.clone();
        done.stopped = Some(unix_now());
        if let Err(e) = write_holder(&mut self.file, &done) {
            tracing::warn!(target: "ibi::util::lock", "{}: recording the stop: {e:#}", self.path.display());
        }
        // Closing the file releases the lock.
    }
}

/// Takes the lock at `path` (its directory is created 0700) for `holder`, or says who has it.
pub fn acquire(path: &Path, holder: Holder, what: &str) -> Result<DirLock> {
    if let Some(dir) = path.parent() {
        ensure_dir(dir, SECRET_DIR_MODE)?;
    }
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(SECRET_FILE_MODE)
        .open(path)
        .with_context(|| format!("opening the lock {}", path.display()))?;
    let deadline = Instant::now() + READER_GRACE;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            // A reader ([`state`]) holds it for an instant: try again for a moment before
            // naming the holder.
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(TryLockError::WouldBlock) => {
                return Err(match read_holder(&mut file).ok().flatten() {
                    Some(h) if h.stopped.is_none() => anyhow::anyhow!(
                        "{what} is in use by {}: stop it first, or wait for it to end (lock: {})",
                        h.describe(),
                        path.display()
                    ),
                    _ => anyhow::anyhow!(
                        "{what} is locked by another process ({}); try again",
                        path.display()
                    ),
                });
            }
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("locking {}", path.display()));
            }
        }
    }
    write_holder(&mut file, &holder).with_context(|| format!("writing {}", path.display()))?;
    Ok(DirLock {
        file,
        path: path.to_path_buf(),
        holder,
    })
}

/// Whether the lock at `path` is held, and by whom, without waiting or disturbing a holder.
pub fn state(path: &Path) -> Result<LockState> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(LockState::Never),
        Err(e) => return Err(e).with_context(|| format!("opening {}", path.display())),
    };
    let held = match file.try_lock_shared() {
        Ok(()) => false,
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("locking {}", path.display()));
        }
    };
    let holder = read_holder(&mut file).with_context(|| format!("reading {}", path.display()))?;
    Ok(match (held, holder) {
        // Taken an instant ago, before its holder wrote its name.
        (true, None) => LockState::Held(Holder {
            command: "?".into(),
            pid: 0,
            listen: None,
            started: unix_now(),
            stopped: None,
        }),
        (true, Some(h)) => LockState::Held(h),
        (false, h) => LockState::Free(h),
    })
}

fn read_holder(file: &mut File) -> Result<Option<Holder>> {
    file.seek(SeekFrom::Start(0))?;
    let mut text = Vec::new();
    file.take(MAX_LOCK_FILE).read_to_end(&mut text)?;
    if text.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    // A damaged file says nothing about the holder; the lock itself still decides.
    Ok(serde_json::from_slice(&text).ok())
}

fn write_holder(file: &mut File, holder: &Holder) -> Result<()> {
    let mut json = serde_json::to_vec(holder)?;
    json.push(b'\n');
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&json)?;
    file.sync_data()?;
    Ok(())
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Unix seconds as `2026-11-26T10:00:00Z`.
pub fn rfc3339(secs: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(secs);
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_by_name_and_the_stop_is_recorded() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(".ibi/deploy.lock");
        assert_eq!(state(&path).unwrap(), LockState::Never);
        let first = Holder::me("deploy", Some("127.0.0.1:8443".into()));
        let lock = acquire(&path, first.clone(), "BASE").unwrap();
        assert_eq!(state(&path).unwrap(), LockState::Held(first.clone()));
        let err = format!(
            "{:#}",
            acquire(&path, Holder::me("deploy", None), "BASE").unwrap_err()
        );
        assert!(
            err.starts_with(&format!(
                "BASE is in use by ibi deploy (PID {}, listening on 127.0.0.1:8443, since ",
                std::process::id()
            )),
            "{err}"
        );
        drop(lock);
        let LockState::Free(Some(last)) = state(&path).unwrap() else {
            panic!("not free")
        };
        assert_eq!(last.pid, first.pid);
        assert!(last.stopped.is_some());
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        // Free again: the next one takes it.
        let again = acquire(&path, Holder::me("serve", None), "DIR").unwrap();
        assert!(matches!(state(&path).unwrap(), LockState::Held(h) if h.command == "serve"));
        drop(again);
    }

    #[test]
    fn a_killed_holder_leaves_no_lock_and_no_stop_time() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("x.lock");
        // What SIGKILL leaves: the holder's name without a stop time, and no lock (the kernel
        // dropped it with the process).
        let dead = Holder::me("deploy", None);
        std::fs::write(&path, serde_json::to_vec(&dead).unwrap()).unwrap();
        assert_eq!(state(&path).unwrap(), LockState::Free(Some(dead)));
        drop(acquire(&path, Holder::me("deploy", None), "BASE").unwrap());
    }
}
