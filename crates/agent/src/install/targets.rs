//! The target's filesystems while the seed is restored (lifecycle-agent reference §4.3a steps 6–10):
//! `root` at the sysroot mount point, `boot` under it, and the container storage (the extra partition,
//! or a folder of root with `useContainersFolder`) at the containers mount point. Partitions are found
//! by GPT name in the table itself and reached through the kernel's device or a loop device over their
//! range ([`PartitionDevice`]). A run that was killed leaves its mounts and loop devices behind; they
//! are taken down first, because XFS refuses to mount a second device with the same UUID.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tracing::{debug, info, warn};

use crate::cmd;
use crate::disk::mounts::{
    DevNum, MountEntry, detach_idle_loops, disk_devices, thaw, unmount_tree,
};
use crate::disk::{
    PartitionDevice, PartitionInfo, find_partition_by_label, mount, read_table, umount_args,
    xfs_growfs,
};

/// GPT names coreos-installer's metal image gives the RHCOS partitions.
pub(crate) const ROOT_LABEL: &str = "root";
pub(crate) const BOOT_LABEL: &str = "boot";
/// With `useContainersFolder`, the storage is this folder of the root filesystem (lca-cli's).
pub(crate) const CONTAINERS_FOLDER: &str = "containers";

/// Where things go.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) disk: PathBuf,
    pub(crate) sysroot: PathBuf,
    pub(crate) containers: PathBuf,
    /// The extra partition's GPT name, or `None` with `useContainersFolder`.
    pub(crate) extra_label: Option<String>,
}

impl Layout {
    /// The install's own mount points: root, boot under it, the container storage.
    fn mount_points(&self) -> [PathBuf; 3] {
        [
            canonical(&self.sysroot),
            canonical(&self.sysroot.join("boot")),
            canonical(&self.containers),
        ]
    }

    /// Whether `e` is one of this install's mounts (or a probe of [`find_state_on_disk`]): on one of
    /// its mount points, or on a probe directory, with a filesystem from the disk.
    fn is_ours(&self, e: &MountEntry, devs: &BTreeSet<DevNum>) -> bool {
        let at_ours = self.mount_points().contains(&e.point)
            || e.point
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(PROBE_PREFIX));
        at_ours && devs.contains(&e.dev)
    }
}

/// A mount point as the kernel names it (mountinfo holds resolved paths).
fn canonical(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The mounted target: the devices it was mounted through. The mounts themselves are found in the
/// kernel's table when they come down, so what containers-storage mounted under them comes down first.
#[derive(Debug)]
pub(crate) struct Targets {
    layout: Layout,
    devices: Vec<PartitionDevice>,
    mounted: bool,
}

impl Targets {
    /// Mounts root, boot and the container storage; grows root's XFS to its partition. A failure
    /// part-way takes down what was mounted.
    pub(crate) fn mount(layout: &Layout) -> Result<Targets> {
        release_stale(layout)?;
        let mut t = Targets {
            layout: layout.clone(),
            devices: Vec::new(),
            mounted: true,
        };
        fs::create_dir_all(&layout.sysroot)
            .with_context(|| format!("creating {}", layout.sysroot.display()))?;
        t.mount_partition(&layout.disk, ROOT_LABEL, &layout.sysroot)?;
        let boot = layout.sysroot.join("boot");
        ensure_dir(&boot)?;
        t.mount_partition(&layout.disk, BOOT_LABEL, &boot)?;
        // Mounting a device whose filesystem a killed run left frozen (and unmounted) gets that frozen
        // filesystem back; ostree would block on its first write.
        thaw(&boot);
        thaw(&layout.sysroot);
        xfs_growfs(&layout.sysroot)?;
        fs::create_dir_all(&layout.containers)
            .with_context(|| format!("creating {}", layout.containers.display()))?;
        match &layout.extra_label {
            Some(label) => t.mount_partition(&layout.disk, label, &layout.containers)?,
            None => bind_containers_folder(&layout.sysroot, &layout.containers)?,
        }
        relabel(&layout.containers);
        Ok(t)
    }

    fn mount_partition(&mut self, disk: &Path, label: &str, at: &Path) -> Result<()> {
        let part = find_partition_by_label(disk, label)?;
        let dev = PartitionDevice::open(disk, &part)?;
        let mounted = mount(dev.path(), at, None, None)
            .with_context(|| format!("mounting partition {label:?} of {}", disk.display()));
        // Kept even when the mount failed: closing it is what detaches a loop device.
        let path = dev.path().to_path_buf();
        self.devices.push(dev);
        mounted?;
        info!(target: "ibi::agent::install::targets",
            partition = label, device = %path.display(), at = %at.display(), "mounted");
        Ok(())
    }

    /// Unmounts the targets and everything mounted below them (deepest first), then releases the
    /// devices, reporting the first failure.
    pub(crate) fn unmount(mut self) -> Result<()> {
        self.take_down()
    }

    fn take_down(&mut self) -> Result<()> {
        if std::mem::take(&mut self.mounted) {
            unmount_ours(&self.layout)?;
        }
        for dev in std::mem::take(&mut self.devices) {
            dev.close()?;
        }
        Ok(())
    }
}

impl Drop for Targets {
    /// Error paths: best effort, never lazily (see [`unmount_tree`]); the next run takes over what
    /// is left.
    fn drop(&mut self) {
        if let Err(e) = self.take_down() {
            warn!(target: "ibi::agent::install::targets", "taking down the targets: {e:#}");
        }
    }
}

/// Unmounts this install's mounts on the disk and all below them.
fn unmount_ours(layout: &Layout) -> Result<Vec<PathBuf>> {
    let devs = disk_devices(&layout.disk);
    unmount_tree(|e| layout.is_ours(e, &devs))
}

/// `mkdir <sysroot>/containers` (clearing root's immutable bit around it as lca-cli does) and a bind
/// mount of it at `at`.
fn bind_containers_folder(sysroot: &Path, at: &Path) -> Result<()> {
    let folder = sysroot.join(CONTAINERS_FOLDER);
    if !folder.is_dir() {
        let chattr = |flag: &str| {
            if let Err(e) = cmd::run(&cmd::argv("chattr", &[flag, &sysroot.to_string_lossy()])) {
                debug!(target: "ibi::agent::install::targets",
                    "chattr {flag} {}: {e:#}", sysroot.display());
            }
        };
        chattr("-i");
        let made = fs::create_dir_all(&folder);
        chattr("+i");
        made.with_context(|| format!("creating {}", folder.display()))?;
    }
    mount(&folder, at, None, Some("bind"))
}

/// A mount point that may already exist on an immutable root: creating is only tried when missing.
fn ensure_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

/// `restorecon -R` on the container storage, as lca-cli does, so the images written next get the
/// labels CRI-O expects on the installed host. Skipped with a note where SELinux tools are absent.
fn relabel(dir: &Path) {
    let argv = cmd::argv("restorecon", &[Path::new("-R"), dir]);
    if let Err(e) = cmd::run(&argv) {
        warn!(target: "ibi::agent::install::targets",
            "restorecon -R {} (ignored): {e:#}", dir.display());
    }
}

/// Takes over from a killed run: unmounts its mounts on the disk (at the install's mount points or a
/// probe directory) with everything mounted below them, deepest first, then detaches the loop devices
/// over the disk that nothing uses any more. A mount that will not come down is an error naming it and
/// who holds it: going on would mount the filesystem a second time or work under a stale view.
pub(crate) fn release_stale(layout: &Layout) -> Result<()> {
    let taken = unmount_ours(layout).context("taking down the mounts an earlier run left")?;
    for point in &taken {
        warn!(target: "ibi::agent::install::targets",
            at = %point.display(), "unmounted what an earlier run left mounted");
    }
    detach_idle_loops(&layout.disk);
    Ok(())
}

/// Whether `path` is a mount point, from `/proc/self/mountinfo`.
#[cfg(test)]
pub(crate) fn is_mount_point(path: &Path) -> Result<bool> {
    let real = match fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e).with_context(|| format!("resolving {}", path.display())),
    };
    Ok(crate::disk::mounts::read_mountinfo()?
        .iter()
        .any(|e| e.point == real))
}

/// Prefix of the private directory the state probe mounts in; a killed run's probe mount is
/// recognised by it and taken down like the targets.
const PROBE_PREFIX: &str = "ibi-state-probe";
/// XFS superblock magic, at byte 0 of the filesystem.
const XFS_MAGIC: &[u8; 4] = b"XFSB";

/// The state file an interrupted install left on the disk, if any: found by mounting the volume that
/// holds it (the extra partition, or root with `useContainersFolder`) read-only in a private
/// directory. `rel` is the state file's path inside the containers mount.
///
/// No GPT, no such partition, or no XFS on it: no state (the disk is blank for this install). An XFS
/// volume that cannot be mounted or read is an error: it may hold an interrupted install, and treating it
/// as blank would wipe it. The caller takes over the killed run's mounts first ([`release_stale`]).
pub(crate) fn find_state_on_disk(layout: &Layout, rel: &Path) -> Result<Option<Vec<u8>>> {
    let (label, inside) = match &layout.extra_label {
        Some(label) => (label.as_str(), rel.to_path_buf()),
        None => (ROOT_LABEL, Path::new(CONTAINERS_FOLDER).join(rel)),
    };
    let table = match read_table(&layout.disk) {
        Ok(t) => t,
        Err(e) => {
            debug!(target: "ibi::agent::install::targets",
                "no partition table on {}: {e:#}", layout.disk.display());
            return Ok(None);
        }
    };
    let Some(part) = table.partitions.iter().find(|p| p.name == label) else {
        return Ok(None);
    };
    if !has_xfs_magic(&layout.disk, part.offset_bytes())? {
        debug!(target: "ibi::agent::install::targets",
            "{part} of {} holds no XFS filesystem",
            layout.disk.display()
        );
        return Ok(None);
    }
    read_on_partition(&layout.disk, part, &inside).with_context(|| {
        format!(
            "looking for an interrupted install's state on {part} of {} (an XFS filesystem that \
             could not be read; `--fresh` starts over and wipes the disk)",
            layout.disk.display()
        )
    })
}

fn has_xfs_magic(disk: &Path, offset: u64) -> Result<bool> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = fs::File::open(disk).with_context(|| format!("opening {}", disk.display()))?;
    let mut magic = [0u8; 4];
    f.seek(SeekFrom::Start(offset))
        .and_then(|_| f.read_exact(&mut magic))
        .with_context(|| format!("reading {} at byte {offset}", disk.display()))?;
    Ok(&magic == XFS_MAGIC)
}

/// Mounts `part` read-only in a private directory and reads `inside`, unmounting (plainly: the
/// filesystem is mounted again next) before returning.
fn read_on_partition(disk: &Path, part: &PartitionInfo, inside: &Path) -> Result<Option<Vec<u8>>> {
    let dev = PartitionDevice::open(disk, part)?;
    let dir = tempfile::Builder::new()
        .prefix(PROBE_PREFIX)
        .tempdir()
        .context("creating a private mount point")?;
    mount(dev.path(), dir.path(), None, Some("ro"))?;
    let read = fs::read(dir.path().join(inside));
    cmd::run(&umount_args(dir.path(), false))
        .with_context(|| format!("unmounting {}", dir.path().display()))?;
    dev.close()?;
    match read {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).context("reading the state file on the disk"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_path_is_no_mount_point() {
        assert!(!is_mount_point(Path::new("/nonexistent/ibi-test")).unwrap());
        assert!(is_mount_point(Path::new("/")).unwrap());
    }

    #[test]
    fn only_disk_mounts_at_our_points_are_ours() {
        let tmp = tempfile::tempdir().unwrap();
        let layout = Layout {
            disk: "/dev/loop9".into(),
            sysroot: tmp.path().join("mnt"),
            containers: tmp.path().join("containers"),
            extra_label: Some("var-lib-containers".into()),
        };
        let disk_dev = DevNum {
            major: 259,
            minor: 5,
        };
        let devs: BTreeSet<DevNum> = [disk_dev].into();
        let entry = |point: PathBuf, dev: DevNum| MountEntry {
            id: 1,
            parent: 0,
            dev,
            point,
            fstype: "xfs".into(),
            source: "/dev/x".into(),
        };
        let other = DevNum { major: 8, minor: 1 };
        assert!(layout.is_ours(&entry(tmp.path().join("containers"), disk_dev), &devs));
        assert!(layout.is_ours(&entry(tmp.path().join("mnt/boot"), disk_dev), &devs));
        assert!(layout.is_ours(&entry("/tmp/ibi-state-probeAbC".into(), disk_dev), &devs));
        assert!(!layout.is_ours(&entry(tmp.path().join("containers"), other), &devs));
        assert!(!layout.is_ours(&entry("/srv/data".into(), disk_dev), &devs));
    }
}
