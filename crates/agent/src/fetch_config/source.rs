//! Reading the configuration off the device into the staging dir. An ISO 9660 device is read in
//! userspace through [`IsoReader`]: minimal hosts (and the build machines) lack the iso9660
//! module, and not mounting at all leaves nothing to clean up. Other filesystems are mounted
//! read-only, without journal replay, in a private temp dir that a guard unmounts on every path.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::BufReader;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tempfile::TempDir;

use super::label::FsKind;
use super::stage::Staging;
use crate::cmd;
use iso9660::{Entry, IsoReader};

/// Largest file we copy. Configuration files are kilobytes; a huge one means a wrong or hostile
/// device, and files are read whole.
pub(crate) const MAX_FILE_SIZE: u64 = 256 << 20;

/// Mount options: nothing on the device may run or act as a device node, and nothing is written
/// to it (`noload`/`norecovery` stop ext4 and XFS from replaying a journal on a read-only mount).
pub(crate) fn mount_options(kind: FsKind) -> &'static str {
    match kind {
        FsKind::Ext => "ro,nosuid,nodev,noexec,noload",
        FsKind::Xfs => "ro,nosuid,nodev,noexec,norecovery",
        FsKind::Iso9660 => "ro,nosuid,nodev,noexec",
    }
}

/// `mount -t <type> -o <options> <dev> <dir>`.
pub(crate) fn mount_argv(kind: FsKind, dev: &Path, dir: &Path) -> Vec<OsString> {
    let args = ["-t", kind.mount_type(), "-o", mount_options(kind)].map(OsStr::new);
    let mut argv = cmd::argv("mount", &args);
    argv.extend([dev.as_os_str().to_owned(), dir.as_os_str().to_owned()]);
    argv
}

/// `umount <dir>`.
pub(crate) fn umount_argv(dir: &Path) -> Vec<OsString> {
    cmd::argv("umount", &[dir])
}

/// Copies the device's tree into `staging`. ISO 9660 goes through the userspace reader first and
/// falls back to a kernel mount only if the reader cannot make sense of the image.
pub(crate) fn copy_device(dev: &Path, kind: FsKind, staging: &Staging) -> Result<()> {
    if kind != FsKind::Iso9660 {
        return copy_mounted(dev, kind, staging);
    }
    match open_iso(dev) {
        Ok((reader, entries)) => extract_iso(reader, &entries, staging),
        Err(e) => {
            tracing::warn!(target: "ibi::agent::fetch_config::source",
                "reading {} as ISO 9660 failed ({e:#}); trying a mount",
                dev.display()
            );
            copy_mounted(dev, kind, staging)
                .with_context(|| format!("after the userspace reader failed: {e:#}"))
        }
    }
}

type DeviceIso = IsoReader<BufReader<File>>;

/// Opens the image and lists it; nothing has been written yet if this fails.
fn open_iso(dev: &Path) -> Result<(DeviceIso, Vec<Entry>)> {
    let file = File::open(dev).with_context(|| format!("opening {}", dev.display()))?;
    let mut reader = IsoReader::open(BufReader::new(file)).context("opening the ISO 9660 image")?;
    let entries = reader.walk().context("listing the ISO 9660 image")?;
    Ok((reader, entries))
}

/// Writes every directory and file of the image (walk order puts parents first).
fn extract_iso(mut reader: DeviceIso, entries: &[Entry], staging: &Staging) -> Result<()> {
    if !reader.has_rock_ridge() {
        tracing::warn!(target: "ibi::agent::fetch_config::source",
            "the ISO has no Rock Ridge names; using its 8.3 identifiers as file names");
    }
    for entry in entries {
        let mode = entry.mode;
        if entry.is_dir {
            staging.create_dir(&entry.path, mode)?;
            continue;
        }
        if mode.is_some_and(|m| m & 0o170000 != 0o100000) {
            tracing::warn!(target: "ibi::agent::fetch_config::source",
                "skipping {:?}: not a regular file", entry.path);
            continue;
        }
        check_size(&entry.path, entry.size)?;
        let data = reader
            .read_entry(entry)
            .with_context(|| format!("reading {} from the ISO", entry.path))?;
        staging.write_file(&entry.path, &data, mode)?;
    }
    Ok(())
}

/// ext's `lost+found` at the top is filesystem metadata, not configuration.
const SKIP_AT_TOP: &str = "lost+found";

/// Mounts the device, copies its tree, unmounts.
fn copy_mounted(dev: &Path, kind: FsKind, staging: &Staging) -> Result<()> {
    let mount = Mount::new(dev, kind)?;
    copy_tree(mount.path(), staging)
}

/// One entry of a directory tree: its path relative to the top, its path and its metadata (not
/// following symlinks).
struct TreeEntry {
    rel: String,
    path: PathBuf,
    meta: fs::Metadata,
}

/// Every entry below `dir`, sorted by name, each directory before what it holds; ext's
/// `lost+found` at the top left out.
fn list_tree(dir: &Path, rel: &str) -> Result<Vec<TreeEntry>> {
    let mut entries = fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .collect::<std::io::Result<Vec<_>>>()
        .with_context(|| format!("listing {}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    let mut out = Vec::new();
    for entry in entries {
        let name = entry.file_name();
        if rel.is_empty() && name == SKIP_AT_TOP {
            continue;
        }
        let child_rel = join_rel(rel, &name);
        let path = entry.path();
        let meta = entry
            .metadata()
            .with_context(|| format!("reading {}", path.display()))?;
        let below = meta.is_dir().then(|| list_tree(&path, &child_rel));
        out.push(TreeEntry {
            rel: child_rel,
            path,
            meta,
        });
        out.extend(below.transpose()?.into_iter().flatten());
    }
    Ok(out)
}

/// Copies regular files and directories below `dir`; symlinks and special files are skipped
/// (they could point outside the tree), with a warning.
pub(crate) fn copy_tree(dir: &Path, staging: &Staging) -> Result<()> {
    for e in list_tree(dir, "")? {
        let mode = Some(e.meta.permissions().mode());
        if e.meta.is_dir() {
            staging.create_dir(&e.rel, mode)?;
        } else if e.meta.is_file() {
            check_size(&e.rel, e.meta.len())?;
            let data =
                fs::read(&e.path).with_context(|| format!("reading {}", e.path.display()))?;
            staging.write_file(&e.rel, &data, mode)?;
        } else {
            tracing::warn!(target: "ibi::agent::fetch_config::source",
                "skipping {:?}: not a regular file or directory", e.rel);
        }
    }
    Ok(())
}

/// True when `target` holds exactly the regular files and directories of `src`, with the same bytes
/// (modes are not compared: staging sets its own). A missing target is not the same.
pub(crate) fn same_tree(src: &Path, target: &Path) -> Result<bool> {
    if !target.is_dir() {
        return Ok(false);
    }
    let copied = |dir: &Path| -> Result<Vec<(String, bool)>> {
        let entries = list_tree(dir, "")?.into_iter();
        let kept = entries.filter(|e| e.meta.is_dir() || e.meta.is_file());
        Ok(kept.map(|e| (e.rel, e.meta.is_dir())).collect())
    };
    let listed = copied(src)?;
    if listed != copied(target)? {
        return Ok(false);
    }
    for (rel, is_dir) in &listed {
        if !is_dir && fs::read(src.join(rel))? != fs::read(target.join(rel))? {
            return Ok(false);
        }
    }
    Ok(true)
}

fn check_size(rel: &str, size: u64) -> Result<()> {
    if size > MAX_FILE_SIZE {
        bail!("{rel} is {size} bytes; configuration files over {MAX_FILE_SIZE} bytes are refused");
    }
    Ok(())
}

fn join_rel(rel: &str, name: &OsStr) -> String {
    let name = name.to_string_lossy();
    if rel.is_empty() {
        name.into_owned()
    } else {
        format!("{rel}/{name}")
    }
}

/// A read-only mount in a private temp dir. Dropping it unmounts; if unmounting fails the
/// directory is kept rather than recursively removed through a live mount.
struct Mount {
    path: PathBuf,
    dir: Option<TempDir>,
}

impl Mount {
    fn new(dev: &Path, kind: FsKind) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("ibi-config-")
            .tempdir()
            .context("creating a mount point")?;
        cmd::run(&mount_argv(kind, dev, dir.path()))
            .with_context(|| format!("mounting {} read-only", dev.display()))?;
        Ok(Self {
            path: dir.path().to_path_buf(),
            dir: Some(dir),
        })
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let Some(dir) = self.dir.take() else { return };
        if let Err(e) = cmd::run(&umount_argv(dir.path())) {
            tracing::error!(target: "ibi::agent::fetch_config::source",
                "{e:#}; leaving {} in place", dir.path().display());
            let _ = dir.keep();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_argv_is_read_only_and_never_writes() {
        let args = mount_argv(FsKind::Ext, Path::new("/dev/sdb1"), Path::new("/tmp/m"));
        let want = [
            "mount",
            "-t",
            "ext4",
            "-o",
            "ro,nosuid,nodev,noexec,noload",
            "/dev/sdb1",
            "/tmp/m",
        ];
        assert_eq!(args, want.map(OsString::from));
        assert!(mount_options(FsKind::Xfs).ends_with("norecovery"));
        assert!(mount_options(FsKind::Iso9660).starts_with("ro,"));
        let umount = umount_argv(Path::new("/tmp/m"));
        assert_eq!(umount, ["umount", "/tmp/m"].map(OsString::from));
    }

    #[test]
    fn refuses_huge_files() {
        assert!(check_size("a", MAX_FILE_SIZE).is_ok());
        let err = check_size("extra-manifests/big.yaml", MAX_FILE_SIZE + 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "extra-manifests/big.yaml is 268435457 bytes; configuration files over 268435456 bytes are refused"
        );
    }

    #[test]
    fn copies_a_plain_tree_skipping_symlinks() {
        let src = tempfile::tempdir().unwrap();
        fs::create_dir_all(src.path().join("cluster-configuration/manifests")).unwrap();
        fs::write(
            src.path().join("cluster-configuration/manifest.json"),
            b"{}",
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc/shadow", src.path().join("link")).unwrap();
        let out = tempfile::tempdir().unwrap();
        let target = out.path().join("t");
        let err = super::super::stage::install_atomically(&target, |s| {
            copy_tree(src.path(), s)?;
            assert!(s.path().join("cluster-configuration/manifests").is_dir());
            assert!(!s.path().join("link").exists());
            bail!("stop")
        });
        assert!(err.is_err());
    }
}
