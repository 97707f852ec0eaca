//! What is mounted from a disk, read from `/proc/self/mountinfo`, and taking such mounts down in the
//! right order. A mount is matched by its device number (`major:minor`), never by its source text, so a
//! partition reached through the kernel's device, a loop device over its range or a bind mount of a folder
//! on it all count as "from the disk". Mounts stacked on top of or below one of them (containers-storage's
//! private bind of `storage/overlay`, the image layers it mounts, `boot` under `root`) are found through the
//! mount tree (each entry's parent id), so they are unmounted first, and mounts that merely sit under the
//! same path but belong to the live system are left alone.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tracing::{info, warn};

use super::device::kernel_partitions;
use crate::cmd;

/// Where the kernel lists block devices, their partitions and holders.
const SYS_CLASS_BLOCK: &str = "/sys/class/block";
/// Most `umount` calls one take-down makes: a loop guard, far above any real stack.
const MAX_UNMOUNTS: usize = 256;

/// A device number as mountinfo and sysfs print it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DevNum {
    pub(crate) major: u32,
    pub(crate) minor: u32,
}

impl DevNum {
    /// Parses `259:3`.
    pub(crate) fn parse(text: &str) -> Option<DevNum> {
        let (major, minor) = text.trim().split_once(':')?;
        Some(DevNum {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }

    /// The device number of a block device node.
    pub(crate) fn of_node(node: &Path) -> Option<DevNum> {
        let st = rustix::fs::stat(node).ok()?;
        let is_block =
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::BlockDevice;
        is_block.then(|| DevNum {
            major: rustix::fs::major(st.st_rdev),
            minor: rustix::fs::minor(st.st_rdev),
        })
    }
}

impl std::fmt::Display for DevNum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// One line of mountinfo (proc(5)): the fields the agent needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub(crate) id: u32,
    pub(crate) parent: u32,
    pub dev: DevNum,
    /// The mount point, octal escapes undone.
    pub point: PathBuf,
    pub(crate) fstype: String,
    pub source: String,
}

impl std::fmt::Display for MountEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} on {} ({})",
            self.source,
            self.point.display(),
            self.fstype
        )
    }
}

/// Parses mountinfo text; malformed lines are skipped (the kernel writes none).
pub(crate) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<MountEntry> {
    let (before, after) = line.split_once(" - ")?;
    let f: Vec<&str> = before.split(' ').collect();
    let mut tail = after.split(' ');
    Some(MountEntry {
        id: f.first()?.parse().ok()?,
        parent: f.get(1)?.parse().ok()?,
        dev: DevNum::parse(f.get(2)?)?,
        point: PathBuf::from(unescape(f.get(4)?)),
        fstype: unescape(tail.next()?),
        source: unescape(tail.next()?),
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
pub(crate) fn unescape(field: &str) -> String {
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

/// This process's mount table.
pub fn read_mountinfo() -> Result<Vec<MountEntry>> {
    let text =
        fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    Ok(parse_mountinfo(&text))
}

/// The entries `roots` selects and every mount below them in the tree, in the order they must be
/// unmounted: children before parents, the top of a stack before what it covers.
pub fn unmount_order(
    entries: &[MountEntry],
    roots: impl Fn(&MountEntry) -> bool,
) -> Vec<&MountEntry> {
    let by_id: BTreeMap<u32, &MountEntry> = entries.iter().map(|e| (e.id, e)).collect();
    let chosen: BTreeSet<u32> = entries.iter().filter(|e| roots(e)).map(|e| e.id).collect();
    // An entry is taken when it, or one of its ancestors, was chosen.
    let taken = |e: &MountEntry| -> bool {
        let mut cur = e;
        for _ in 0..=entries.len() {
            if chosen.contains(&cur.id) {
                return true;
            }
            match by_id.get(&cur.parent).filter(|p| p.id != cur.id) {
                Some(p) => cur = p,
                None => return false,
            }
        }
        false
    };
    let mut picked: Vec<(usize, &MountEntry)> = entries
        .iter()
        .filter(|e| taken(e))
        .map(|e| (tree_depth(&by_id, e), e))
        .collect();
    picked.sort_by(|(da, a), (db, b)| db.cmp(da).then(b.id.cmp(&a.id)));
    picked.into_iter().map(|(_, e)| e).collect()
}

/// How many ancestors an entry has in the table (the root mount has none listed).
fn tree_depth(by_id: &BTreeMap<u32, &MountEntry>, e: &MountEntry) -> usize {
    let mut depth = 0;
    let mut cur = e;
    while let Some(p) = by_id.get(&cur.parent).filter(|p| p.id != cur.id) {
        depth += 1;
        cur = p;
        if depth > by_id.len() {
            break;
        }
    }
    depth
}

/// Device numbers that belong to `disk` (a block device): the disk, its kernel partitions, the loop devices
/// attached over it (`losetup -j`) with their partitions, and what is built on any of these (device-mapper,
/// RAID: sysfs `holders`).
pub fn disk_devices(disk: &Path) -> BTreeSet<DevNum> {
    let mut names: Vec<String> = Vec::new();
    if let Some(name) = block_name(disk) {
        names.push(name);
    }
    names.extend(
        loops_over(disk)
            .iter()
            .filter_map(|d| block_name(Path::new(d))),
    );
    let sys = Path::new(SYS_CLASS_BLOCK);
    let mut devs = BTreeSet::new();
    let mut seen = BTreeSet::new();
    while let Some(name) = names.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(dev) = read_dev(&sys.join(&name)) {
            devs.insert(dev);
        }
        names.extend(kernel_partitions(sys, &name));
        names.extend(child_names(&sys.join(&name).join("holders")));
    }
    devs
}

fn block_name(dev: &Path) -> Option<String> {
    let real = fs::canonicalize(dev).ok()?;
    real.file_name()?.to_str().map(str::to_string)
}

fn read_dev(sys_dir: &Path) -> Option<DevNum> {
    DevNum::parse(&fs::read_to_string(sys_dir.join("dev")).ok()?)
}

fn child_names(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|it| {
            it.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Loop devices whose backing file is `disk` (`losetup -j`); none when losetup fails.
pub fn loops_over(disk: &Path) -> Vec<String> {
    match cmd::run(&cmd::argv("losetup", &[Path::new("-j"), disk])) {
        Ok(out) => parse_losetup_j(&out),
        Err(e) => {
            tracing::debug!(target: "ibi::agent::disk::mounts", "{e:#}");
            Vec::new()
        }
    }
}

/// The device of each `losetup -j` line (`/dev/loop3: [0005]:2 (/dev/loop0), offset 1048576`).
pub(crate) fn parse_losetup_j(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.split_once(':').map(|(dev, _)| dev.trim().to_string()))
        .filter(|dev| dev.starts_with("/dev/"))
        .collect()
}

/// Mounts whose filesystem lives on one of `devs`.
pub(crate) fn mounts_on<'a>(
    entries: &'a [MountEntry],
    devs: &BTreeSet<DevNum>,
) -> Vec<&'a MountEntry> {
    entries.iter().filter(|e| devs.contains(&e.dev)).collect()
}

/// Active swap areas (`/proc/swaps`) whose device is one of `devs`.
pub(crate) fn swaps_on(devs: &BTreeSet<DevNum>) -> Vec<String> {
    let Ok(text) = fs::read_to_string("/proc/swaps") else {
        return Vec::new();
    };
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .filter(|dev| DevNum::of_node(Path::new(dev)).is_some_and(|d| devs.contains(&d)))
        .map(str::to_string)
        .collect()
}

/// Refuses `action` on `disk` while any filesystem or swap on it is in use. The message names each mount:
/// wiping or repartitioning under a mounted filesystem would corrupt it and lose what it holds.
pub(crate) fn ensure_unused(disk: &Path, action: &str) -> Result<()> {
    let devs = disk_devices(disk);
    let entries = read_mountinfo()?;
    let mut busy: Vec<String> = mounts_on(&entries, &devs)
        .iter()
        .map(|e| e.to_string())
        .collect();
    busy.extend(swaps_on(&devs).into_iter().map(|s| format!("swap on {s}")));
    if busy.is_empty() {
        return Ok(());
    }
    bail!(
        "refusing to {action} {}: it is in use: {}. Unmount what is not this install's; \
         an earlier `ibi agent install` run's mounts are taken over by running it again",
        disk.display(),
        busy.join(", ")
    )
}

/// Unmounts the mounts `roots` selects and everything mounted below them, deepest first, with plain
/// `umount` (never lazily: a lazily detached filesystem stays busy and the next mount of it fails, or
/// worse, succeeds beside it). Each is thawed first (see [`thaw`]). Re-reads the table after each call,
/// so stacks and mounts that appear meanwhile are handled. Returns what was unmounted; a failure names
/// the mount and who holds it.
pub(crate) fn unmount_tree(roots: impl Fn(&MountEntry) -> bool) -> Result<Vec<PathBuf>> {
    let mut done = Vec::new();
    for _ in 0..MAX_UNMOUNTS {
        let entries = read_mountinfo()?;
        let order = unmount_order(&entries, &roots);
        let Some(first) = order.first() else {
            return Ok(done);
        };
        thaw(&first.point);
        if let Err(e) = cmd::run(&cmd::argv("umount", &[&first.point])) {
            let users = users_of(&first.point);
            let held = if users.is_empty() {
                String::new()
            } else {
                format!(" (in use by {})", users.join(", "))
            };
            return Err(e).with_context(|| format!("unmounting {first}{held}"));
        }
        info!(target: "ibi::agent::disk::mounts", at = %first.point.display(), "unmounted");
        done.push(first.point.clone());
    }
    bail!("more than {MAX_UNMOUNTS} mounts to take down; giving up")
}

/// Thaws the filesystem mounted at `point` if it is frozen; returns whether it was. libostree freezes
/// `/boot` around the bootloader swap when it writes deployments, with a watchdog child to thaw it should
/// the writer die; a SIGKILL to the whole process group (systemd's restart, an OOM kill of the unit) takes
/// the watchdog too and leaves `/boot` frozen. The kernel keeps a frozen filesystem alive through its
/// unmount, so it must be thawed first: unmounted frozen, it stays behind holding its device, and a later
/// mount of the same device gets the frozen filesystem back and blocks on its first write.
pub(crate) fn thaw(point: &Path) -> bool {
    // `fsfreeze -u` fails with EINVAL when the filesystem is not frozen: the usual case, not an error.
    match cmd::run(&cmd::argv("fsfreeze", &[Path::new("--unfreeze"), point])) {
        Ok(_) => {
            warn!(target: "ibi::agent::disk::mounts",
                at = %point.display(), "thawed a filesystem an earlier run left frozen");
            true
        }
        Err(e) => {
            tracing::debug!(target: "ibi::agent::disk::mounts", "not frozen: {e:#}");
            false
        }
    }
}

/// Processes whose working directory, root or an open file lies under `point`: `pid (name)`.
pub(crate) fn users_of(point: &Path) -> Vec<String> {
    let Ok(procs) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut users = Vec::new();
    for p in procs.filter_map(|e| e.ok()) {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if process_uses(&p.path(), point) {
            let name = fs::read_to_string(p.path().join("comm")).unwrap_or_default();
            users.push(format!("{pid} ({})", name.trim()));
        }
    }
    users
}

fn process_uses(proc_dir: &Path, point: &Path) -> bool {
    let under = |link: &Path| fs::read_link(link).is_ok_and(|t| t.starts_with(point));
    if ["cwd", "root"].iter().any(|l| under(&proc_dir.join(l))) {
        return true;
    }
    fs::read_dir(proc_dir.join("fd"))
        .map(|fds| fds.filter_map(|e| e.ok()).any(|fd| under(&fd.path())))
        .unwrap_or(false)
}

/// Detaches loop devices over `disk` that no longer back a mount; one still mounted is left alone (and
/// logged), since `losetup -d` on it would only mark it for detaching later.
pub(crate) fn detach_idle_loops(disk: &Path) {
    let entries = read_mountinfo().unwrap_or_default();
    for dev in loops_over(disk) {
        let mine = disk_devices(Path::new(&dev));
        if !mounts_on(&entries, &mine).is_empty() {
            warn!(target: "ibi::agent::disk::mounts",
                device = %dev, "a loop device over the disk is still mounted; leaving it attached");
            continue;
        }
        warn!(target: "ibi::agent::disk::mounts",
            device = %dev, "detaching a loop device an earlier run left attached");
        if let Err(e) = crate::disk::release_loop(Path::new(&dev)) {
            warn!(target: "ibi::agent::disk::mounts", "{e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root fs, the live system's podman home under /var/lib/containers (not the disk's), and an
    /// install's mounts: root at /mnt, boot under it, the extra partition at /var/lib/containers with
    /// containers-storage's bind of storage/overlay and one layer mount on top.
    const INFO: &str = "\
22 1 253:0 / / rw shared:1 - xfs /dev/vda rw
30 22 0:40 /storage/overlay /var/lib/containers/storage/overlay rw - tmpfs tmpfs rw
40 22 259:4 / /mnt rw - xfs /dev/loop0p4 rw
41 40 7:2 / /mnt/boot rw - ext4 /dev/loop2 rw
42 22 259:5 / /var/lib/containers rw - xfs /dev/loop0p5 rw
43 42 259:5 /storage/overlay /var/lib/containers/storage/overlay rw - xfs /dev/loop0p5[/storage/overlay] rw
44 43 0:51 / /var/lib/containers/storage/overlay/abc/merged rw - overlay overlay rw
50 22 0:60 / /mnt\\040x rw - tmpfs tmp\\040fs rw
";

    #[test]
    fn parses_fields_and_escapes() {
        let e = parse_mountinfo(INFO);
        assert_eq!(e.len(), 8);
        assert_eq!(
            e[4],
            MountEntry {
                id: 42,
                parent: 22,
                dev: DevNum {
                    major: 259,
                    minor: 5
                },
                point: "/var/lib/containers".into(),
                fstype: "xfs".into(),
                source: "/dev/loop0p5".into(),
            }
        );
        assert_eq!(e[7].point, Path::new("/mnt x"));
        assert_eq!(e[7].source, "tmp fs");
        assert_eq!(unescape("a\\134b\\01"), "a\\b\\01");
        assert!(parse_mountinfo("garbage\n1 2 x:y / / rw - a b c\n").is_empty());
    }

    #[test]
    fn unmounts_below_before_above_and_leaves_the_live_system_alone() {
        let e = parse_mountinfo(INFO);
        let order: Vec<u32> = unmount_order(&e, |m| {
            m.point == Path::new("/var/lib/containers") || m.point == Path::new("/mnt")
        })
        .iter()
        .map(|m| m.id)
        .collect();
        // The layer mount, then the bind, then the partition; boot before root.
        assert_eq!(order, [44, 43, 41, 42, 40]);
        assert!(
            !order.contains(&30),
            "the live system's own mount is not touched"
        );
    }

    #[test]
    fn stacked_mounts_come_off_top_first() {
        let info = "22 1 253:0 / / rw - xfs /dev/vda rw\n\
                    40 22 7:1 / /mnt rw - xfs /dev/loop1 rw\n\
                    45 40 7:3 / /mnt rw - xfs /dev/loop3 rw\n";
        let e = parse_mountinfo(info);
        let order: Vec<u32> = unmount_order(&e, |m| m.id == 40)
            .iter()
            .map(|m| m.id)
            .collect();
        assert_eq!(order, [45, 40]);
    }

    #[test]
    fn mounts_on_devices_by_number() {
        let e = parse_mountinfo(INFO);
        let devs: BTreeSet<DevNum> = [DevNum::parse("259:5").unwrap()].into();
        let on: Vec<u32> = mounts_on(&e, &devs).iter().map(|m| m.id).collect();
        assert_eq!(on, [42, 43]);
        assert_eq!(
            DevNum::parse(" 7:12\n").map(|d| d.to_string()),
            Some("7:12".into())
        );
        assert_eq!(DevNum::parse("7"), None);
    }

    #[test]
    fn losetup_j_devices() {
        let out = "/dev/loop3: [0005]:2 (/dev/loop0), offset 1048576, sizelimit 4096\n\
                   /dev/loop4: [0005]:2 (/dev/loop0), offset 8192\n";
        assert_eq!(parse_losetup_j(out), ["/dev/loop3", "/dev/loop4"]);
        assert!(parse_losetup_j("").is_empty());
    }

    #[test]
    fn the_root_filesystem_is_in_use() {
        let root = read_mountinfo()
            .unwrap()
            .into_iter()
            .find(|e| e.point == Path::new("/"))
            .unwrap();
        let devs: BTreeSet<DevNum> = [root.dev].into();
        assert!(!mounts_on(&read_mountinfo().unwrap(), &devs).is_empty());
        assert!(
            users_of(Path::new("/"))
                .iter()
                .any(|u| u.starts_with(&format!("{} ", std::process::id())))
        );
    }
}
