//! Atomic file output. Every file ibi produces is written to a temp file in its final directory,
//! given its final mode before any byte lands in it, fsynced and renamed: a crash or a failed step
//! never leaves a partial file at a final path, and a secret never sits in a world-readable file.

use std::fs::{self, File, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use anyhow::{Context, Result, bail};

/// Mode of files holding secrets (keys, pull secret, passwords).
pub const SECRET_FILE_MODE: u32 = 0o600;
/// Mode of directories holding secret files.
pub const SECRET_DIR_MODE: u32 = 0o700;

/// What to do when the final path already exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clobber {
    Replace,
    Refuse,
}

/// Largest input document ibi reads (configuration YAML/JSON, manifests): real ones are a few KiB,
/// and a bigger file is a mistake whose whole read would only waste memory.
pub const MAX_INPUT_BYTES: u64 = 16 << 20;

/// Why an input file was refused before reading it.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path} is not a regular file (it is a {kind})")]
    NotAFile { path: String, kind: &'static str },
    #[error("{path} is {size} bytes, larger than the {limit}-byte limit for an input file")]
    TooBig { path: String, size: u64, limit: u64 },
    #[error("reading {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl InputError {
    /// The I/O error behind it, if any (a missing file is often a finding of its own).
    pub fn io_kind(&self) -> Option<std::io::ErrorKind> {
        match self {
            InputError::Io { source, .. } => Some(source.kind()),
            _ => None,
        }
    }
}

/// Checks that `path` (followed through symlinks) is a regular file of at most `limit` bytes. A FIFO
/// or a device would block or never end a read; a directory gives a confusing error later.
pub fn check_input_file(path: &Path, limit: u64) -> Result<u64, InputError> {
    let shown = path.display().to_string();
    let meta = fs::metadata(path).map_err(|source| InputError::Io {
        path: shown.clone(),
        source,
    })?;
    let ft = meta.file_type();
    if !ft.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let kind = if ft.is_dir() {
            "directory"
        } else if ft.is_fifo() {
            "named pipe"
        } else if ft.is_socket() {
            "socket"
        } else if ft.is_block_device() || ft.is_char_device() {
            "device"
        } else {
            "special file"
        };
        return Err(InputError::NotAFile { path: shown, kind });
    }
    if meta.len() > limit {
        return Err(InputError::TooBig {
            path: shown,
            size: meta.len(),
            limit,
        });
    }
    Ok(meta.len())
}

/// Reads an input document: a regular file of at most `limit` bytes (see [`check_input_file`]).
pub fn read_input_file(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    check_input_file(path, limit)?;
    let io = |source| InputError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    // The size was checked, but the file may grow between the check and the read: cap the read too.
    std::io::Read::read_to_end(&mut std::io::Read::take(file, limit + 1), &mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(InputError::TooBig {
            path: path.display().to_string(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}

/// Writes `data` to `path` atomically with `mode`.
pub fn write_atomic(path: &Path, data: &[u8], mode: u32, clobber: Clobber) -> Result<()> {
    write_atomic_with(path, mode, clobber, |f| {
        f.write_all(data).context("writing data")
    })
}

/// Creates a temp file beside `path`, lets `fill` write it, then fsyncs and renames it into place.
/// On any error the temp file is removed and `path` is untouched.
pub fn write_atomic_with<F>(path: &Path, mode: u32, clobber: Clobber, fill: F) -> Result<()>
where
    F: FnOnce(&mut File) -> Result<()>,
{
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .with_context(|| format!("{} has no file name", path.display()))?;
    if clobber == Clobber::Refuse && path.symlink_metadata().is_ok() {
        bail!(
            "{} already exists (use --force to overwrite it)",
            path.display()
        );
    }
    let name = name.to_string_lossy();
    sweep_stale_temps(dir, &name);
    // Created and registered with the interrupt handler in one step: a signal between the two
    // would leave a temp file the handler does not know of.
    let (guard, mut tmp) = crate::interrupt::TempFile::create(
        || {
            tempfile::Builder::new()
                .prefix(&temp_prefix(&name, std::process::id()))
                .suffix(".tmp")
                .permissions(Permissions::from_mode(mode))
                .tempfile_in(dir)
                .with_context(|| format!("creating a temp file in {}", dir.display()))
        },
        |t| t.path(),
    )?;
    // The builder's mode is filtered by the umask; set it exactly before writing anything.
    tmp.as_file()
        .set_permissions(Permissions::from_mode(mode))
        .with_context(|| format!("setting mode of the temp file for {}", path.display()))?;
    fill(tmp.as_file_mut()).with_context(|| format!("writing {}", path.display()))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("syncing {}", path.display()))?;
    guard.complete(|| persist(tmp, path, clobber))?;
    sync_dir(dir)
}

/// `.<name>.<pid>.`: the temp file names its writer, so a later run can tell a temp file of a killed
/// run (remove it) from one a concurrent run is still writing (leave it).
fn temp_prefix(name: &str, pid: u32) -> String {
    format!(".{name}.{pid}.")
}

/// Removes the temp files of `name` in `dir` whose writing process is gone. A `SIGKILL` or a power
/// loss skips the cleanup of a temp file, and an installation ISO's is gigabytes. Best effort: a
/// failure is logged and the write goes on.
fn sweep_stale_temps(dir: &Path, name: &str) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) = stale_temp_pid(&file.to_string_lossy(), name) else {
            continue;
        };
        if process_alive(pid) {
            continue;
        }
        let path = entry.path();
        match fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(target: "ibi::util::fs", "removed {}, left by an interrupted run", path.display())
            }
            Err(e) => {
                tracing::warn!(target: "ibi::util::fs", "cannot remove the stale {}: {e}", path.display())
            }
        }
    }
}

/// The writer's PID when `file` is a temp file of `name` (`.<name>.<pid>.<random>.tmp`).
fn stale_temp_pid(file: &str, name: &str) -> Option<i32> {
    let rest = file
        .strip_prefix(&format!(".{name}."))?
        .strip_suffix(".tmp")?;
    let (pid, random) = rest.split_once('.')?;
    if random.is_empty() || random.contains('.') {
        return None;
    }
    pid.parse().ok().filter(|p| *p > 0)
}

/// Whether process `pid` exists (signal 0). "Not permitted" means it exists under another user.
fn process_alive(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

fn persist(tmp: tempfile::NamedTempFile, path: &Path, clobber: Clobber) -> Result<()> {
    let result = match clobber {
        Clobber::Replace => tmp.persist(path).map(drop),
        Clobber::Refuse => tmp.persist_noclobber(path).map(drop),
    };
    result
        .map_err(|e| anyhow::Error::new(e.error))
        .with_context(|| format!("renaming the temp file to {}", path.display()))
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Makes the rename durable: without this a power loss can forget the new directory entry.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing directory {}", dir.display()))
}

/// Creates `dir` (and missing parents) and makes sure it has exactly `mode`.
pub fn ensure_dir(dir: &Path, mode: u32) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .with_context(|| format!("creating directory {}", dir.display()))?;
    fs::set_permissions(dir, Permissions::from_mode(mode))
        .with_context(|| format!("setting mode {mode:o} on {}", dir.display()))
}

/// The entry names in `dir`, sorted: what tests compare a directory's listing with.
#[cfg(any(test, feature = "test-support"))]
#[allow(clippy::unwrap_used)] // test support: a panic is how a test fails
pub fn sorted_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_must_be_small_regular_files() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("in.yaml");
        fs::write(&f, b"a: 1\n").unwrap();
        assert_eq!(read_input_file(&f, 100).unwrap(), b"a: 1\n");
        let err = read_input_file(&f, 3).unwrap_err().to_string();
        assert!(
            err.contains("is 5 bytes, larger than the 3-byte limit"),
            "{err}"
        );
        let err = read_input_file(d.path(), 100).unwrap_err().to_string();
        assert!(
            err.ends_with("is not a regular file (it is a directory)"),
            "{err}"
        );
        let fifo = d.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let err = read_input_file(&fifo, 100).unwrap_err().to_string();
        assert!(err.ends_with("(it is a named pipe)"), "{err}");
        let missing = read_input_file(&d.path().join("nope"), 100).unwrap_err();
        assert_eq!(missing.io_kind(), Some(std::io::ErrorKind::NotFound));
    }

    #[test]
    fn temp_names_parse_back() {
        assert_eq!(temp_prefix("a.iso", 42), ".a.iso.42.");
        assert_eq!(stale_temp_pid(".a.iso.42.Xy12Ab.tmp", "a.iso"), Some(42));
        for other in [
            ".a.iso.42.tmp",
            ".a.iso.x.Ab.tmp",
            ".b.iso.42.Ab.tmp",
            "a.iso",
            ".a.iso.42.Ab.c.tmp",
            ".a.iso.0.Ab.tmp",
        ] {
            assert_eq!(stale_temp_pid(other, "a.iso"), None, "{other}");
        }
    }

    #[test]
    fn temps_of_dead_writers_are_swept_live_ones_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.iso");
        // A PID that cannot be running: above the kernel's pid_max limit.
        let dead = d.path().join(".out.iso.4194305.AbCdEf.tmp");
        let live = d
            .path()
            .join(format!(".out.iso.{}.AbCdEf.tmp", std::process::id()));
        let unrelated = d.path().join(".other.4194305.AbCdEf.tmp");
        for f in [&dead, &live, &unrelated] {
            fs::write(f, b"partial").unwrap();
        }
        write_atomic(&p, b"whole", 0o644, Clobber::Replace).unwrap();
        assert!(!dead.exists(), "a killed run's temp file is removed");
        assert!(live.exists(), "a running writer's temp file is kept");
        assert!(
            unrelated.exists(),
            "other outputs' temp files are not touched"
        );
        assert_eq!(fs::read(&p).unwrap(), b"whole");
    }
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn writes_with_exact_mode_and_replaces() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("secret");
        write_atomic(&p, b"one", 0o600, Clobber::Replace).unwrap();
        write_atomic(&p, b"two", 0o600, Clobber::Replace).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
    }

    #[test]
    fn refuses_to_clobber_and_keeps_the_old_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.yaml");
        write_atomic(&p, b"old", 0o600, Clobber::Refuse).unwrap();
        let err = write_atomic(&p, b"new", 0o600, Clobber::Refuse).unwrap_err();
        assert!(
            format!("{err:#}").contains("already exists (use --force"),
            "{err:#}"
        );
        assert_eq!(fs::read(&p).unwrap(), b"old");
    }

    #[test]
    fn failure_leaves_no_file_and_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.iso");
        let err = write_atomic_with(&p, 0o600, Clobber::Replace, |f| {
            f.write_all(b"partial")?;
            anyhow::bail!("boom")
        })
        .unwrap_err();
        assert!(format!("{err:#}").contains("boom"));
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 0, "no leftovers");
    }

    #[test]
    fn ensure_dir_tightens_mode() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("auth");
        fs::create_dir(&p).unwrap();
        fs::set_permissions(&p, Permissions::from_mode(0o755)).unwrap();
        ensure_dir(&p, 0o700).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o700);
    }
}
