//! Best-effort disk cleanup before RHCOS is written (lifecycle-agent reference §4.1): volume groups,
//! physical volumes, device-mapper devices and RAID arrays built on the installation disk are taken
//! apart, then its signatures wiped. As in lca-cli every failure is only logged: a missing tool or a
//! device that will not go away must not stop an install whose next step overwrites the disk anyway.
//! The parsing of each tool's output is a pure function, tested on its own.

use std::ffi::OsString;
use std::path::Path;

use tracing::{info, warn};

use crate::cmd;

/// Runs every cleanup on `disk` (its canonical `/dev/...` path), logging what fails.
pub(crate) fn cleanup_disk(disk: &Path) {
    let disk_text = disk.to_string_lossy().into_owned();
    let name = disk
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(out) = best_effort(&["vgs", "--noheadings", "-o", "vg_name,pv_name"]) {
        for vg in volume_groups_on(&out, &disk_text) {
            best_effort(&["vgremove", &vg, "-y"]);
        }
    }
    if let Some(out) = best_effort(&["pvs", "--noheadings", "-o", "pv_name"]) {
        for pv in physical_volumes_on(&out, &disk_text) {
            best_effort(&["pvremove", &pv, "-y", "-ff"]);
        }
    }
    remove_device_mapper(&name);
    if let Some(out) = best_effort(&["mdadm", "-v", "--query", "--detail", "--scan"]) {
        for (array, members) in raid_arrays_on(&out, &disk_text) {
            best_effort(&["mdadm", "--stop", &array]);
            for member in members {
                best_effort(&["mdadm", "--zero-superblock", &member]);
            }
        }
    }
    if best_effort(&["wipefs", "--all", "--force", &disk_text]).is_none() {
        best_effort(&["wipefs", "--all", &disk_text]);
    }
    info!(target: "ibi::agent::install::cleanup", disk = %disk.display(), "disk cleanup done");
}

/// `dmsetup remove --retry` for each device-mapper device built on the disk; thin-pool data and
/// metadata devices last, since the pool above them holds them open.
fn remove_device_mapper(disk_name: &str) {
    let Some(list) = best_effort(&["dmsetup", "ls"]) else {
        return;
    };
    let mut doomed: Vec<String> = Vec::new();
    for dm in dm_names(&list) {
        if let Some(deps) = best_effort(&["dmsetup", "deps", "-o", "devname", &dm])
            && dm_deps_on(&deps, disk_name)
        {
            doomed.push(dm);
        }
    }
    doomed.sort_by_key(|d| d.ends_with("_tdata") || d.ends_with("_tmeta"));
    for dm in doomed {
        best_effort(&["dmsetup", "remove", "--retry", &dm]);
    }
}

/// Runs a command, returning its stdout, or logging why not and returning `None`.
fn best_effort(args: &[&str]) -> Option<String> {
    let argv: Vec<OsString> = args.iter().map(OsString::from).collect();
    match cmd::run(&argv) {
        Ok(out) => Some(out),
        Err(e) => {
            warn!(target: "ibi::agent::install::cleanup", "disk cleanup (ignored): {e:#}");
            None
        }
    }
}

/// Volume groups of `vgs --noheadings -o vg_name,pv_name` with a physical volume on `disk`.
pub(crate) fn volume_groups_on(vgs: &str, disk: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in vgs.lines() {
        let mut fields = line.split_whitespace();
        if let (Some(vg), Some(pv)) = (fields.next(), fields.next())
            && on_disk(pv, disk)
            && !out.iter().any(|v| v == vg)
        {
            out.push(vg.to_string());
        }
    }
    out
}

/// Physical volumes of `pvs --noheadings -o pv_name` on `disk`.
pub(crate) fn physical_volumes_on(pvs: &str, disk: &str) -> Vec<String> {
    pvs.split_whitespace()
        .filter(|pv| on_disk(pv, disk))
        .map(str::to_string)
        .collect()
}

/// Device names of `dmsetup ls` (`name\t(253:0)` lines; "No devices found" gives none).
pub(crate) fn dm_names(ls: &str) -> Vec<String> {
    ls.lines()
        .filter(|l| l.trim_end().ends_with(')'))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Whether `dmsetup deps -o devname` output (` 1 dependencies  : (sda2)`) names the disk or one of
/// its partitions.
pub(crate) fn dm_deps_on(deps: &str, disk_name: &str) -> bool {
    !disk_name.is_empty()
        && deps
            .split(['(', ')'])
            .skip(1)
            .step_by(2)
            .any(|dev| dev == disk_name || is_partition_name(dev, disk_name))
}

/// `(array, members on the disk)` of each `ARRAY` line of `mdadm --detail --scan -v` with a member
/// (`devices=/dev/sda1,/dev/sdb1`) on `disk`.
pub(crate) fn raid_arrays_on(scan: &str, disk: &str) -> Vec<(String, Vec<String>)> {
    let mut arrays = Vec::new();
    let mut current: Option<String> = None;
    for line in scan.lines() {
        let mut words = line.split_whitespace();
        if line.starts_with("ARRAY") {
            words.next();
            current = words.next().map(str::to_string);
        }
        for word in line.split_whitespace() {
            let (Some(array), Some(list)) = (&current, word.strip_prefix("devices=")) else {
                continue;
            };
            let members: Vec<String> = list
                .split(',')
                .filter(|m| on_disk(m, disk))
                .map(str::to_string)
                .collect();
            if !members.is_empty() {
                arrays.push((array.clone(), members));
            }
        }
    }
    arrays
}

/// `dev` is `disk` or one of its partitions (`/dev/sda3`, `/dev/nvme0n1p2`).
fn on_disk(dev: &str, disk: &str) -> bool {
    dev == disk || is_partition_name(dev, disk)
}

fn is_partition_name(dev: &str, disk: &str) -> bool {
    dev.strip_prefix(disk)
        .map(|rest| rest.strip_prefix('p').unwrap_or(rest))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_groups_and_pvs_on_the_disk_only() {
        let vgs = "  data /dev/sda2\n  data /dev/sda3\n  other /dev/sdb1\n  nv /dev/nvme0n1p1\n";
        assert_eq!(volume_groups_on(vgs, "/dev/sda"), ["data"]);
        assert_eq!(volume_groups_on(vgs, "/dev/nvme0n1"), ["nv"]);
        assert!(
            volume_groups_on(vgs, "/dev/sd").is_empty(),
            "no prefix match"
        );
        let pvs = "  /dev/sda2\n  /dev/sdb1\n  /dev/sda\n";
        assert_eq!(
            physical_volumes_on(pvs, "/dev/sda"),
            ["/dev/sda2", "/dev/sda"]
        );
    }

    #[test]
    fn device_mapper_names_and_deps() {
        assert_eq!(
            dm_names("vg-lv\t(253:0)\nvg-pool_tdata\t(253:1)\n"),
            ["vg-lv", "vg-pool_tdata"]
        );
        assert!(dm_names("No devices found\n").is_empty());
        assert!(dm_deps_on(" 1 dependencies\t: (sda2)\n", "sda"));
        assert!(dm_deps_on(" 2 dependencies\t: (sdb1) (loop0p3)\n", "loop0"));
        assert!(!dm_deps_on(" 1 dependencies\t: (sdb1)\n", "sda"));
        assert!(!dm_deps_on(" 1 dependencies\t: (sda2)\n", ""));
    }

    #[test]
    fn raid_members_on_the_disk() {
        let scan = "ARRAY /dev/md/0 level=raid1 num-devices=2 metadata=1.2 UUID=x\n   devices=/dev/sda3,/dev/sdb3\nARRAY /dev/md/1 level=raid1 num-devices=2 metadata=1.2 UUID=y\n   devices=/dev/sdc1,/dev/sdd1\n";
        assert_eq!(
            raid_arrays_on(scan, "/dev/sda"),
            [("/dev/md/0".to_string(), vec!["/dev/sda3".to_string()])]
        );
        assert!(raid_arrays_on(scan, "/dev/sde").is_empty());
    }
}
