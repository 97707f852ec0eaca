//! Filesystems on the target's partitions: `mkfs.xfs`, `xfs_growfs` and mounts, as small wrappers
//! over the commands with their argv built by pure functions. A `Mount` is an RAII guard: it
//! unmounts when dropped, lazily if a plain unmount fails, so an error path never leaves the
//! target mounted under a busy directory.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{Context, Result, ensure};
use tracing::debug;

use crate::cmd;

/// Longest XFS filesystem label (xfsprogs refuses longer ones).
const XFS_LABEL_MAX: usize = 12;

/// Makes an XFS filesystem on `dev`, overwriting whatever is there (as lca-cli does with `-f`).
pub fn mkfs_xfs(dev: &Path, label: Option<&str>) -> Result<()> {
    cmd::run(&mkfs_xfs_args(dev, label)?)
        .map(drop)
        .with_context(|| format!("making an XFS filesystem on {}", dev.display()))
}

/// `mkfs.xfs -f [-L LABEL] DEV`.
pub(crate) fn mkfs_xfs_args(dev: &Path, label: Option<&str>) -> Result<Vec<OsString>> {
    let mut args: Vec<OsString> = vec!["-f".into()];
    if let Some(label) = label {
        ensure!(
            !label.is_empty()
                && label.len() <= XFS_LABEL_MAX
                && !label.contains(char::is_whitespace),
            "XFS label {label:?} must be 1 to {XFS_LABEL_MAX} bytes without spaces"
        );
        args.extend(["-L".into(), label.into()]);
    }
    args.push(dev.into());
    Ok(cmd::argv("mkfs.xfs", &args))
}

/// Grows the XFS filesystem mounted at `mountpoint` to fill its (grown) partition.
pub fn xfs_growfs(mountpoint: &Path) -> Result<()> {
    cmd::run(&xfs_growfs_args(mountpoint))
        .map(drop)
        .with_context(|| format!("growing the XFS filesystem at {}", mountpoint.display()))
}

/// `xfs_growfs MOUNTPOINT`.
pub(crate) fn xfs_growfs_args(mountpoint: &Path) -> Vec<OsString> {
    cmd::argv("xfs_growfs", &[mountpoint])
}

/// A mounted filesystem, unmounted when dropped.
#[cfg(any(test, feature = "test-support"))]
#[derive(Debug)]
pub struct Mount {
    target: std::path::PathBuf,
    mounted: bool,
}

#[cfg(any(test, feature = "test-support"))]
impl Mount {
    /// Mounts `source` on `target` (which must exist), with an optional type and `-o` options.
    pub fn new(
        source: &Path,
        target: &Path,
        fstype: Option<&str>,
        options: Option<&str>,
    ) -> Result<Mount> {
        mount(source, target, fstype, options)?;
        Ok(Mount {
            target: target.to_path_buf(),
            mounted: true,
        })
    }

    /// Where it is mounted.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Unmounts now, reporting failure; nothing is retried lazily.
    pub fn unmount(mut self) -> Result<()> {
        self.mounted = false;
        cmd::run(&umount_args(&self.target, false))
            .map(drop)
            .with_context(|| format!("unmounting {}", self.target.display()))
    }
}

#[cfg(any(test, feature = "test-support"))]
impl Drop for Mount {
    fn drop(&mut self) {
        if !self.mounted {
            return;
        }
        let Err(e) = cmd::run(&umount_args(&self.target, false)) else {
            return;
        };
        tracing::warn!(target: "ibi::agent::disk::fs",
            target = %self.target.display(), "unmounting: {e:#}; detaching lazily");
        if let Err(e) = cmd::run(&umount_args(&self.target, true)) {
            tracing::warn!(target: "ibi::agent::disk::fs",
                target = %self.target.display(), "lazy unmount: {e:#}");
        }
    }
}

/// Mounts `source` on `target` with no guard: for mounts whose owner finds them again in the kernel's
/// table to take them down (see `agent::disk::mounts`).
pub fn mount(
    source: &Path,
    target: &Path,
    fstype: Option<&str>,
    options: Option<&str>,
) -> Result<()> {
    cmd::run(&mount_args(source, target, fstype, options))
        .with_context(|| format!("mounting {} on {}", source.display(), target.display()))?;
    debug!(target: "ibi::agent::disk::fs",
        source = %source.display(), target = %target.display(), "mounted");
    Ok(())
}

/// `mount [-t TYPE] [-o OPTIONS] SOURCE TARGET`.
pub(crate) fn mount_args(
    source: &Path,
    target: &Path,
    fstype: Option<&str>,
    options: Option<&str>,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    if let Some(t) = fstype {
        args.extend(["-t".into(), t.into()]);
    }
    if let Some(o) = options {
        args.extend(["-o".into(), o.into()]);
    }
    args.extend([source.into(), target.into()]);
    cmd::argv("mount", &args)
}

/// `umount [-l] TARGET`.
pub(crate) fn umount_args(target: &Path, lazy: bool) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    if lazy {
        args.push("-l".into());
    }
    args.push(target.into());
    cmd::argv("umount", &args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mkfs_argv() {
        let dev = Path::new("/dev/loop3");
        assert_eq!(
            mkfs_xfs_args(dev, None).unwrap(),
            ["mkfs.xfs", "-f", "/dev/loop3"]
        );
        assert_eq!(
            mkfs_xfs_args(dev, Some("containers")).unwrap(),
            ["mkfs.xfs", "-f", "-L", "containers", "/dev/loop3"]
        );
        for bad in ["var-lib-containers", "", "a b"] {
            assert_eq!(
                mkfs_xfs_args(dev, Some(bad)).unwrap_err().to_string(),
                format!("XFS label {bad:?} must be 1 to 12 bytes without spaces")
            );
        }
    }

    #[test]
    fn mount_argv() {
        let (src, dst) = (Path::new("/dev/vda4"), Path::new("/mnt"));
        assert_eq!(
            mount_args(src, dst, None, None),
            ["mount", "/dev/vda4", "/mnt"]
        );
        assert_eq!(
            mount_args(src, dst, Some("xfs"), Some("ro,nodev")),
            ["mount", "-t", "xfs", "-o", "ro,nodev", "/dev/vda4", "/mnt"]
        );
        assert_eq!(umount_args(dst, false), ["umount", "/mnt"]);
        assert_eq!(umount_args(dst, true), ["umount", "-l", "/mnt"]);
        assert_eq!(xfs_growfs_args(dst), ["xfs_growfs", "/mnt"]);
    }

    #[test]
    fn failed_mount_names_both_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("no-such-device");
        let err = Mount::new(&missing, tmp.path(), Some("xfs"), None).unwrap_err();
        let text = format!("{err:#}");
        let want = format!(
            "mounting {} on {}: ",
            missing.display(),
            tmp.path().display()
        );
        assert!(text.starts_with(&want), "{text}");
    }
}
