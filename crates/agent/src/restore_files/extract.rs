//! Extracting the seed's var and etc archives, applying its deletion list, and syncing while it works.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use anyhow::{Context, Result};
use flate2::read::MultiGzDecoder;

use super::apply::RestoreReport;
use util::read_ahead::read_ahead;

/// Inflated bytes per block handed from the gunzip thread to the untar, and blocks in flight: 1 MiB.
const INFLATE_BLOCK: usize = 256 << 10;
const INFLATE_DEPTH: usize = 4;

/// First component of every member of `var.tgz`: lca-cli builds it with `tar czf var.tgz /var`, and
/// GNU tar strips the leading `/`. Members land under the stateroot dir, i.e. in the stateroot's var.
pub(crate) const VAR_TOP: &str = "var";
/// First component of every member of `etc.tgz` (built from `ostree admin config-diff`, paths under
/// `/etc`). Members land in the deployment dir, over the deployment's `/etc`.
pub(crate) const ETC_TOP: &str = "etc";

/// Extracts a gzip'd tar stream into `dest` (which must exist), overwriting what is there.
/// `progress` is called with the running total of file bytes written, after every buffer.
pub fn extract_tgz<R: Read + Send>(
    archive: R,
    dest: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<RestoreReport> {
    extract(archive, dest, None, progress)
}

/// Restores `var.tgz` into the stateroot dir (`<sysroot>/ostree/deploy/<stateroot>`): its `var/...`
/// members become the stateroot's `var`. Members outside `var/` are refused. Syncs the filesystem.
pub fn restore_var(
    archive: impl Read + Send,
    stateroot_dir: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<RestoreReport> {
    let report = extract(archive, stateroot_dir, Some(VAR_TOP), progress)
        .with_context(|| format!("restoring var.tgz into {}", stateroot_dir.display()))?;
    sync_filesystem(stateroot_dir)?;
    Ok(report)
}

/// Restores `etc.tgz` over the deployment dir (`<stateroot>/deploy/<checksum>.<serial>`): its
/// `etc/...` members overlay the deployment's `/etc`; files it does not name are kept. Members
/// outside `etc/` are refused. Syncs the filesystem.
pub fn restore_etc(
    archive: impl Read + Send,
    deploy_dir: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<RestoreReport> {
    let report = extract(archive, deploy_dir, Some(ETC_TOP), progress)
        .with_context(|| format!("restoring etc.tgz over {}", deploy_dir.display()))?;
    sync_filesystem(deploy_dir)?;
    Ok(report)
}

/// Applies `etc.deletions` under `root` (the deployment dir): each non-empty trimmed line is a path
/// such as `/etc/foo`, taken relative to `root`, deleted whatever its type (directories
/// recursively). Returns how many were deleted and the lines that named nothing (warned about).
/// A line climbing out of `root` (`..`, or through a symlink leading out) fails the whole list
/// before anything is deleted.
pub fn apply_deletions(list: &str, root: &Path) -> Result<(u64, Vec<String>)> {
    super::deletions::apply(list, root)
        .with_context(|| format!("applying etc.deletions under {}", root.display()))
}

fn extract<R: Read + Send>(
    archive: R,
    dest: &Path,
    top: Option<&str>,
    progress: &mut dyn FnMut(u64),
) -> Result<RestoreReport> {
    let dest = dest
        .canonicalize()
        .with_context(|| format!("opening destination {}", dest.display()))?;
    std::thread::scope(|scope| {
        let inflated = read_ahead(
            scope,
            "ibi-gunzip",
            MultiGzDecoder::new(archive),
            INFLATE_BLOCK,
            INFLATE_DEPTH,
        )
        .context("starting the gunzip thread")?;
        let mut extractor = super::apply::Extractor::new(&dest, top, progress);
        let mut tar = tar::Archive::new(inflated);
        for entry in tar.entries().context("reading the archive")? {
            let mut entry = entry.with_context(|| extractor.reading_context())?;
            extractor.apply(&mut entry)?;
        }
        let report = extractor.finish()?;
        // Reading to the end checks the gzip trailer (CRC and length): tar stops at its end marker.
        io::copy(&mut tar.into_inner(), &mut io::sink())
            .context("reading the archive's gzip trailer")?;
        Ok(report)
    })
}

/// Runs `work` while a thread syncs the filesystem of `dir` every `every`, so that the data `work`
/// writes goes to the disk while it runs instead of all in the [`sync_filesystem`] that makes it
/// durable afterwards (which then only waits for the tail). The background syncs are only a head
/// start: a failure there is logged at debug level, the caller's final sync reports it. Returns
/// once `work` has and the thread has finished its current sync.
pub(crate) fn syncing_in_background<T>(dir: &Path, every: Duration, work: impl FnOnce() -> T) -> T {
    let handle = match File::open(dir) {
        Ok(handle) => handle,
        Err(e) => {
            tracing::debug!(target: "ibi::agent::restore_files::extract",
                "no background sync of {}: {e}", dir.display());
            return work();
        }
    };
    let (stop, stopped) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("ibi-sync".to_string())
            .spawn_scoped(scope, move || {
                // Ends when `stop` is dropped, i.e. when `work` returns or unwinds.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    if let Err(e) = rustix::fs::syncfs(&handle) {
                        tracing::debug!(target: "ibi::agent::restore_files::extract",
                            "background sync: {e}");
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::debug!(target: "ibi::agent::restore_files::extract",
                "no background sync of {}: {e}", dir.display());
        }
        let out = work();
        drop(stop);
        out
    })
}

/// Makes the restored files durable before the agent records the step as done: a power loss
/// after that must not leave a half-written stateroot behind a "finished" mark.
pub(crate) fn sync_filesystem(dir: &Path) -> Result<()> {
    let handle = File::open(dir).with_context(|| format!("opening {}", dir.display()))?;
    rustix::fs::syncfs(&handle)
        .with_context(|| format!("syncing the filesystem of {}", dir.display()))
}
