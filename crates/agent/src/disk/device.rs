//! Block devices the agent reaches partitions through. The kernel's own partition device is used
//! when sysfs shows it with the range the table says; otherwise (a loop device whose partitions the
//! kernel does not expose, a kernel that has not re-read the table) a loop device is attached over
//! the partition's byte range. Loop devices are RAII guards: detached on drop, error paths included.

use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tracing::{debug, warn};

use super::PartitionInfo;
use crate::cmd;

/// Where the kernel lists block devices and their partitions.
const SYS_CLASS_BLOCK: &str = "/sys/class/block";
/// Where device nodes live.
const DEV: &str = "/dev";
/// sysfs counts partition `start` and `size` in 512-byte units whatever the sector size.
const SYSFS_SECTOR: u64 = 512;

/// An attached loop device, detached when dropped.
#[derive(Debug)]
pub struct LoopDevice {
    path: PathBuf,
    attached: bool,
}

impl LoopDevice {
    /// Attaches the whole of `file` (an image or a block device).
    #[cfg(any(test, feature = "test-support"))]
    pub fn attach(file: &Path) -> Result<LoopDevice> {
        Self::attach_argv(&losetup_attach_args(file, None), file)
    }

    /// Attaches `len` bytes of `file` starting at `offset`.
    pub fn attach_range(file: &Path, offset: u64, len: u64) -> Result<LoopDevice> {
        Self::attach_argv(&losetup_attach_args(file, Some((offset, len))), file)
    }

    fn attach_argv(argv: &[OsString], file: &Path) -> Result<LoopDevice> {
        let out = cmd::run(argv)
            .with_context(|| format!("attaching a loop device to {}", file.display()))?;
        let dev = out.trim();
        if !dev.starts_with("/dev/") {
            bail!(
                "losetup printed {dev:?} instead of a loop device for {}",
                file.display()
            );
        }
        debug!(target: "ibi::agent::disk::device",
            device = dev, file = %file.display(), "attached loop device");
        Ok(LoopDevice {
            path: PathBuf::from(dev),
            attached: true,
        })
    }

    /// The device node, like `/dev/loop3`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Detaches now, reporting failure (dropping only logs it).
    pub fn detach(mut self) -> Result<()> {
        self.attached = false;
        release_loop(&self.path)
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        if self.attached
            && let Err(e) = release_loop(&self.path)
        {
            warn!(target: "ibi::agent::disk::device", device = %self.path.display(), "{e:#}");
        }
    }
}

/// Removes the kernel partitions of a loop device, then detaches it. Partitions added with
/// `partx` outlive `losetup -d` (the kernel drops them only for devices attached with `-P`) and
/// would show up, with a stale range, on the next user of the same loop device.
pub fn release_loop(dev: &Path) -> Result<()> {
    let name = dev.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let cleared = if kernel_partitions(Path::new(SYS_CLASS_BLOCK), name).is_empty() {
        Ok(())
    } else {
        cmd::run(&partx_delete_args(dev))
            .map(drop)
            .with_context(|| format!("removing the kernel partitions of {}", dev.display()))
    };
    let detached = cmd::run(&losetup_detach_args(dev))
        .map(drop)
        .with_context(|| format!("detaching {}", dev.display()));
    cleared.and(detached)
}

/// Names of the partitions sysfs shows for disk `name` (`loop0p1` …).
pub(super) fn kernel_partitions(sys_block: &Path, name: &str) -> Vec<String> {
    let Ok(entries) = fs::read_dir(sys_block.join(name)) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("partition").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect()
}

/// `partx --delete DEVICE`: removes all its kernel partitions.
fn partx_delete_args(dev: &Path) -> Vec<OsString> {
    cmd::argv("partx", &[OsString::from("--delete"), dev.into()])
}

/// `losetup -f --show [-o OFFSET --sizelimit LEN] FILE`.
pub(crate) fn losetup_attach_args(file: &Path, range: Option<(u64, u64)>) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["-f".into(), "--show".into()];
    if let Some((offset, len)) = range {
        args.extend([
            "-o".into(),
            offset.to_string().into(),
            "--sizelimit".into(),
            len.to_string().into(),
        ]);
    }
    args.push(file.into());
    cmd::argv("losetup", &args)
}

/// `losetup -d DEVICE`.
fn losetup_detach_args(dev: &Path) -> Vec<OsString> {
    cmd::argv("losetup", &[OsString::from("-d"), dev.into()])
}

/// A device node holding exactly one partition: the kernel's, or a loop device over its range.
#[derive(Debug)]
pub struct PartitionDevice {
    path: PathBuf,
    loop_dev: Option<LoopDevice>,
}

impl PartitionDevice {
    /// Finds or makes a device for `part` of `disk` (a block device or an image file).
    pub fn open(disk: &Path, part: &PartitionInfo) -> Result<PartitionDevice> {
        if let Some(path) = kernel_device_for(disk, part) {
            debug!(target: "ibi::agent::disk::device",
                device = %path.display(), "using the kernel's device for {part}");
            return Ok(PartitionDevice {
                path,
                loop_dev: None,
            });
        }
        let dev = LoopDevice::attach_range(disk, part.offset_bytes(), part.len_bytes())
            .with_context(|| format!("reaching {part} of {}", disk.display()))?;
        Ok(PartitionDevice {
            path: dev.path().to_path_buf(),
            loop_dev: Some(dev),
        })
    }

    /// The device node to hand to mkfs or mount.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this is a loop device over the partition's range (rather than the kernel's).
    #[cfg(any(test, feature = "test-support"))]
    pub fn is_loop(&self) -> bool {
        self.loop_dev.is_some()
    }

    /// Releases the device now, reporting a failed detach (dropping only logs it).
    pub fn close(mut self) -> Result<()> {
        match self.loop_dev.take() {
            Some(dev) => dev.detach(),
            None => Ok(()),
        }
    }
}

/// The kernel's device for `part` when `disk` is a block device whose partition sysfs shows.
fn kernel_device_for(disk: &Path, part: &PartitionInfo) -> Option<PathBuf> {
    let real = fs::canonicalize(disk).ok()?;
    let meta = fs::metadata(&real).ok()?;
    if !meta.file_type().is_block_device() {
        return None;
    }
    let name = real.file_name()?.to_str()?;
    kernel_partition_device(Path::new(SYS_CLASS_BLOCK), Path::new(DEV), name, part)
}

/// Looks for partition `part` of disk `disk_name` under `sys_block` (`/sys/class/block`):
/// `<disk>p<N>` (nvme0n1p4, loop0p4) or `<disk><N>` (sda4), whose `partition`, `start` and `size`
/// match the table, and whose node exists under `dev`. A stale kernel view (other start or size)
/// counts as absent, so the caller falls back to a loop device over the right range.
pub(crate) fn kernel_partition_device(
    sys_block: &Path,
    dev: &Path,
    disk_name: &str,
    part: &PartitionInfo,
) -> Option<PathBuf> {
    let n = part.number;
    for candidate in [format!("{disk_name}p{n}"), format!("{disk_name}{n}")] {
        let dir = sys_block.join(disk_name).join(&candidate);
        if read_u64(&dir.join("partition")) != Some(u64::from(n)) {
            continue;
        }
        let start = read_u64(&dir.join("start"));
        let size = read_u64(&dir.join("size"));
        let want_start = part.offset_bytes() / SYSFS_SECTOR;
        let want_size = part.len_bytes() / SYSFS_SECTOR;
        if start != Some(want_start) || size != Some(want_size) {
            warn!(target: "ibi::agent::disk::device",
                "the kernel's {candidate} (start {start:?}, size {size:?}) does not match {part}; \
                 using a loop device over the partition instead"
            );
            return None;
        }
        let node = dev.join(&candidate);
        return node.exists().then_some(node);
    }
    None
}

fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(number: u32, first: u64, last: u64, sector_size: u64) -> PartitionInfo {
        PartitionInfo {
            number,
            first_lba: first,
            last_lba: last,
            sector_size,
            name: "root".into(),
        }
    }

    /// A fake sysfs disk `disk` with partition directory `name`, and its node under dev.
    fn fake(root: &Path, disk: &str, name: &str, fields: [(&str, u64); 3]) {
        let dir = root.join("sys").join(disk).join(name);
        fs::create_dir_all(&dir).unwrap();
        for (file, value) in fields {
            fs::write(dir.join(file), format!("{value}\n")).unwrap();
        }
        fs::create_dir_all(root.join("dev")).unwrap();
        fs::write(root.join("dev").join(name), "").unwrap();
    }

    #[test]
    fn finds_kernel_partitions_by_both_names() {
        let tmp = tempfile::tempdir().unwrap();
        let (sys, dev) = (tmp.path().join("sys"), tmp.path().join("dev"));
        fake(
            tmp.path(),
            "sda",
            "sda4",
            [("partition", 4), ("start", 2048), ("size", 4096)],
        );
        fake(
            tmp.path(),
            "nvme0n1",
            "nvme0n1p4",
            [("partition", 4), ("start", 2048), ("size", 4096)],
        );
        let p = part(4, 2048, 6143, 512);
        assert_eq!(
            kernel_partition_device(&sys, &dev, "sda", &p),
            Some(dev.join("sda4"))
        );
        assert_eq!(
            kernel_partition_device(&sys, &dev, "nvme0n1", &p),
            Some(dev.join("nvme0n1p4"))
        );
        // 4Kn: sysfs still counts 512-byte units.
        let p4k = part(4, 256, 767, 4096);
        assert_eq!(
            kernel_partition_device(&sys, &dev, "sda", &p4k),
            Some(dev.join("sda4"))
        );
    }

    #[test]
    fn lists_kernel_partitions() {
        let tmp = tempfile::tempdir().unwrap();
        let sys = tmp.path().join("sys");
        fake(
            tmp.path(),
            "loop0",
            "loop0p5",
            [("partition", 5), ("start", 2048), ("size", 4096)],
        );
        fs::create_dir_all(sys.join("loop0/queue")).unwrap();
        assert_eq!(kernel_partitions(&sys, "loop0"), ["loop0p5"]);
        assert!(kernel_partitions(&sys, "loop1").is_empty());
    }

    #[test]
    fn stale_or_missing_kernel_partitions_are_not_used() {
        let tmp = tempfile::tempdir().unwrap();
        let (sys, dev) = (tmp.path().join("sys"), tmp.path().join("dev"));
        fake(
            tmp.path(),
            "vda",
            "vda4",
            [("partition", 4), ("start", 2048), ("size", 4096)],
        );
        // Grown in the table, not yet in the kernel.
        assert_eq!(
            kernel_partition_device(&sys, &dev, "vda", &part(4, 2048, 9999, 512)),
            None
        );
        // Partition 5 was just added; the kernel does not know it.
        assert_eq!(
            kernel_partition_device(&sys, &dev, "vda", &part(5, 10240, 20479, 512)),
            None
        );
        // The loop device case: no partitions at all.
        assert_eq!(
            kernel_partition_device(&sys, &dev, "loop0", &part(5, 10240, 20479, 512)),
            None
        );
    }

    #[test]
    fn losetup_argv() {
        assert_eq!(
            losetup_attach_args(Path::new("/img/disk.raw"), None),
            ["losetup", "-f", "--show", "/img/disk.raw"]
        );
        assert_eq!(
            losetup_attach_args(Path::new("/dev/vda"), Some((1_048_576, 536_870_912))),
            [
                "losetup",
                "-f",
                "--show",
                "-o",
                "1048576",
                "--sizelimit",
                "536870912",
                "/dev/vda"
            ]
        );
        assert_eq!(
            losetup_detach_args(Path::new("/dev/loop7")),
            ["losetup", "-d", "/dev/loop7"]
        );
    }

    #[test]
    fn regular_files_have_no_kernel_partitions() {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        assert_eq!(
            kernel_device_for(tmp.path(), &part(1, 2048, 4095, 512)),
            None
        );
    }
}
