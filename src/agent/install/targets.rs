//! The target's filesystems while the seed is restored (lifecycle-agent reference §4.3a steps 6–10):
//! `root` at the sysroot mount point, `boot` under it, and the container storage (the extra partition,
//! or a folder of root with `useContainersFolder`) at the containers mount point. Partitions are found
//! by GPT name in the table itself and reached through the kernel's device or a loop device over their
//! range ([`PartitionDevice`]). A run that was killed leaves its mounts and loop devices behind; they
//! are taken down first, because XFS refuses to mount a second device with the same UUID.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tracing::{debug, info, warn};

use crate::agent::cmd;
use crate::agent::disk::{Mount, PartitionDevice, find_partition_by_label, read_table, xfs_growfs};

/// GPT names coreos-installer's metal image gives the RHCOS partitions.
pub const ROOT_LABEL: &str = "root";
pub const BOOT_LABEL: &str = "boot";
/// With `useContainersFolder`, the storage is this folder of the root filesystem (lca-cli's).
pub const CONTAINERS_FOLDER: &str = "containers";
/// Most stacked mounts taken down from one mount point.
const MAX_STACKED: usize = 8;

/// Where things go.
#[derive(Debug, Clone)]
pub struct Layout {
    pub disk: PathBuf,
    pub sysroot: PathBuf,
    pub containers: PathBuf,
    /// The extra partition's GPT name, or `None` with `useContainersFolder`.
    pub extra_label: Option<String>,
}

/// The mounted target. Fields drop in order: containers, boot, root, then the devices.
#[derive(Debug)]
pub struct Targets {
    containers: Option<Mount>,
    boot: Option<Mount>,
    root: Option<Mount>,
    devices: Vec<PartitionDevice>,
}

impl Targets {
    /// Mounts root, boot and the container storage; grows root's XFS to its partition.
    pub fn mount(layout: &Layout) -> Result<Targets> {
        release_stale(layout);
        let mut t = Targets {
            containers: None,
            boot: None,
            root: None,
            devices: Vec::new(),
        };
        fs::create_dir_all(&layout.sysroot)
            .with_context(|| format!("creating {}", layout.sysroot.display()))?;
        t.root = Some(t.mount_partition(&layout.disk, ROOT_LABEL, &layout.sysroot)?);
        let boot = layout.sysroot.join("boot");
        ensure_dir(&boot)?;
        t.boot = Some(t.mount_partition(&layout.disk, BOOT_LABEL, &boot)?);
        xfs_growfs(&layout.sysroot)?;
        fs::create_dir_all(&layout.containers)
            .with_context(|| format!("creating {}", layout.containers.display()))?;
        t.containers = Some(match &layout.extra_label {
            Some(label) => t.mount_partition(&layout.disk, label, &layout.containers)?,
            None => bind_containers_folder(&layout.sysroot, &layout.containers)?,
        });
        relabel(&layout.containers);
        Ok(t)
    }

    fn mount_partition(&mut self, disk: &Path, label: &str, at: &Path) -> Result<Mount> {
        let part = find_partition_by_label(disk, label)?;
        let dev = PartitionDevice::open(disk, &part)?;
        let mount = Mount::new(dev.path(), at, None, None)
            .with_context(|| format!("mounting partition {label:?} of {}", disk.display()))?;
        info!(partition = label, device = %dev.path().display(), at = %at.display(), "mounted");
        self.devices.push(dev);
        Ok(mount)
    }

    /// Unmounts everything and releases the devices, reporting the first failure.
    pub fn unmount(mut self) -> Result<()> {
        for m in [self.containers.take(), self.boot.take(), self.root.take()]
            .into_iter()
            .flatten()
        {
            m.unmount()?;
        }
        for dev in std::mem::take(&mut self.devices) {
            dev.close()?;
        }
        Ok(())
    }
}

/// `mkdir <sysroot>/containers` (clearing root's immutable bit around it as lca-cli does) and a bind
/// mount of it at `at`.
fn bind_containers_folder(sysroot: &Path, at: &Path) -> Result<Mount> {
    let folder = sysroot.join(CONTAINERS_FOLDER);
    if !folder.is_dir() {
        let chattr = |flag: &str| {
            if let Err(e) = cmd::run(&cmd::argv("chattr", &[flag, &sysroot.to_string_lossy()])) {
                debug!("chattr {flag} {}: {e:#}", sysroot.display());
            }
        };
        chattr("-i");
        let made = fs::create_dir_all(&folder);
        chattr("+i");
        made.with_context(|| format!("creating {}", folder.display()))?;
    }
    Mount::new(&folder, at, None, Some("bind"))
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
        warn!("restorecon -R {} (ignored): {e:#}", dir.display());
    }
}

/// Takes down what a killed run left: mounts on our mount points (deepest first) and loop devices
/// over the disk's partitions. Only logs failures: the mount that follows reports a real problem.
pub fn release_stale(layout: &Layout) {
    for point in [
        layout.containers.clone(),
        layout.sysroot.join("boot"),
        layout.sysroot.clone(),
    ] {
        for _ in 0..MAX_STACKED {
            match is_mount_point(&point) {
                Ok(true) => {
                    warn!(at = %point.display(), "unmounting what an earlier run left mounted");
                    if let Err(e) = cmd::run(&cmd::argv("umount", &[&point])) {
                        warn!("{e:#}");
                        break;
                    }
                }
                Ok(false) => break,
                Err(e) => {
                    warn!("{e:#}");
                    break;
                }
            }
        }
    }
    for dev in loops_over(&layout.disk) {
        warn!(device = %dev, "detaching a loop device an earlier run left attached");
        if let Err(e) = cmd::run(&cmd::argv("losetup", &["-d", dev.as_str()])) {
            warn!("{e:#}");
        }
    }
}

/// Loop devices whose backing file is `disk` (`losetup -j`); none when losetup fails.
fn loops_over(disk: &Path) -> Vec<String> {
    match cmd::run(&cmd::argv("losetup", &[Path::new("-j"), disk])) {
        Ok(out) => parse_losetup_j(&out),
        Err(e) => {
            debug!("{e:#}");
            Vec::new()
        }
    }
}

/// The device of each `losetup -j` line (`/dev/loop3: [0005]:2 (/dev/loop0), offset 1048576`).
pub fn parse_losetup_j(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.split_once(':').map(|(dev, _)| dev.trim().to_string()))
        .filter(|dev| dev.starts_with("/dev/"))
        .collect()
}

/// Whether `path` is a mount point, from `/proc/self/mountinfo`.
pub fn is_mount_point(path: &Path) -> Result<bool> {
    let real = match fs::canonicalize(path) {
        Ok(p) => p,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e).with_context(|| format!("resolving {}", path.display())),
    };
    let info =
        fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    Ok(mount_points(&info).any(|p| Path::new(&p) == real))
}

/// The mount points of a mountinfo text (field 5, with its octal escapes undone).
pub fn mount_points(mountinfo: &str) -> impl Iterator<Item = String> + '_ {
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mountinfo)
}

fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The state file an interrupted install left on the disk, if any: found by mounting the volume that
/// holds it (the extra partition, or root with `useContainersFolder`) read-only in a private
/// directory. `rel` is the state file's path inside the containers mount. Any failure to find it
/// means there is none: the disk is then treated as blank, as lca-cli treats every disk.
pub fn find_state_on_disk(layout: &Layout, rel: &Path) -> Option<Vec<u8>> {
    release_stale(layout);
    let (label, inside) = match &layout.extra_label {
        Some(label) => (label.as_str(), rel.to_path_buf()),
        None => (ROOT_LABEL, Path::new(CONTAINERS_FOLDER).join(rel)),
    };
    let found = (|| -> Result<Option<Vec<u8>>> {
        let table = read_table(&layout.disk)?;
        let Some(part) = table.partitions.iter().find(|p| p.name == label) else {
            return Ok(None);
        };
        let dev = PartitionDevice::open(&layout.disk, part)?;
        let dir = tempfile::tempdir().context("creating a private mount point")?;
        let mount = Mount::new(dev.path(), dir.path(), None, Some("ro"))?;
        let bytes = match fs::read(dir.path().join(&inside)) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).context("reading the state file on the disk"),
        };
        mount.unmount()?;
        dev.close()?;
        Ok(bytes)
    })();
    match found {
        Ok(bytes) => bytes,
        Err(e) => {
            debug!("no install state on {}: {e:#}", layout.disk.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_points_with_escapes() {
        let info = "22 1 0:21 / / rw shared:1 - ext4 /dev/vda rw\n\
                    40 22 7:1 / /mnt/with\\040space rw - xfs /dev/loop1 rw\n";
        let points: Vec<String> = mount_points(info).collect();
        assert_eq!(points, ["/", "/mnt/with space"]);
        assert_eq!(unescape_mountinfo("a\\134b\\01"), "a\\b\\01");
    }

    #[test]
    fn losetup_j_devices() {
        let out = "/dev/loop3: [0005]:2 (/dev/loop0), offset 1048576, sizelimit 4096\n\
                   /dev/loop4: [0005]:2 (/dev/loop0), offset 8192\n";
        assert_eq!(parse_losetup_j(out), ["/dev/loop3", "/dev/loop4"]);
        assert!(parse_losetup_j("").is_empty());
    }

    #[test]
    fn a_missing_path_is_no_mount_point() {
        assert!(!is_mount_point(Path::new("/nonexistent/ibi-test")).unwrap());
        assert!(is_mount_point(Path::new("/")).unwrap());
    }
}
