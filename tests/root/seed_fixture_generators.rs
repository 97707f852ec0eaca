#![cfg(feature = "agent")]
//! The generators of the end-to-end fixtures (issue 4 item 6): `seed-fixtures/make-real-seed.sh`
//! must give an OCI layout skopeo reads, with both lifecycle-agent labels, whose `ostree.tgz` is a
//! real repo holding the commit `rpm-ostree.json` names, and the same digests on a second run;
//! `seed-fixtures/make-metal-image.sh` must give a GPT with the RHCOS partition names and an ostree
//! sysroot in `root` with an `rhcos` deployment. The metal test needs root and loop devices; both
//! need their tools (tests/root and tests/tools). Without them the test fails, naming what is missing.
//! Every mount and loop device the test makes is a guard, undone on failure too.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Command;

use ibi::agent::disk::{Mount, find_partition_by_label, read_table};

use crate::common::seed_fixture_generators::*;

#[test]
fn metal_image_generator_needs_root() {
    const TEST: &str = "metal_image_generator_needs_root";
    if !common::require_root(TEST) {
        return;
    }
    let loop_ok = Command::new("losetup")
        .arg("-f")
        .output()
        .is_ok_and(|o| o.status.success());
    if !Path::new("/dev/loop-control").exists() || !loop_ok {
        common::missing(TEST, "no loop devices (/dev/loop-control, losetup -f)");
        return;
    }
    if !common::require_tools(TEST, &["ostree", "sfdisk", "mkfs.xfs", "mkfs.ext4"]) {
        return;
    }
    // The image's UUIDs are fixed: no other test may mount one of its filesystems meanwhile.
    let _metal = common::agent::metal_image_lock();
    let tmp = tempfile::tempdir().unwrap();
    let img = tmp.path().join("metal.img");
    let printed = run(&script("make-metal-image.sh"), &[s(&img)]);
    let checksum = printed
        .trim()
        .rsplit_once("rhcos commit ")
        .map(|(_, c)| c.trim_end_matches(')').to_string())
        .unwrap_or_else(|| panic!("no commit in {printed:?}"));
    assert_eq!(fs::metadata(&img).unwrap().len(), 1024 * 1024 * 1024);

    let table = read_table(&img).unwrap();
    let names: Vec<(u32, &str)> = table
        .partitions
        .iter()
        .map(|p| (p.number, p.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (1, "BIOS-BOOT"),
            (2, "EFI-SYSTEM"),
            (3, "boot"),
            (4, "root")
        ]
    );
    assert!(find_partition_by_label(&img, "root").unwrap().len_bytes() >= 300_000_000);

    // Drop order: boot mount, root mount, then the loop devices.
    let root_dev = attach_partition(&img, "root");
    let boot_dev = attach_partition(&img, "boot");
    let mnt = tmp.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let root = Mount::new(root_dev.path(), &mnt, Some("xfs"), Some("ro")).unwrap();
    let deploy = mnt.join(format!("ostree/deploy/rhcos/deploy/{checksum}.0"));
    assert!(deploy.join("usr/lib/os-release").is_file(), "{deploy:?}");
    let boot = Mount::new(boot_dev.path(), &mnt.join("boot"), Some("ext4"), Some("ro")).unwrap();
    // Counted, not collected: a DirEntry keeps the directory open, and the mount busy.
    let entries = fs::read_dir(mnt.join("boot/loader/entries"))
        .unwrap()
        .count();
    assert_eq!(entries, 1, "BLS entries on the boot partition");
    let status = run(
        tool("ostree"),
        &["admin", "status", &format!("--sysroot={}", s(&mnt))],
    );
    assert!(
        status
            .lines()
            .any(|l| l.trim_start_matches(['*', ' ']) == format!("rhcos {checksum}.0")),
        "{status}"
    );
    boot.unmount().unwrap();
    root.unmount().unwrap();
    boot_dev.detach().unwrap();
    root_dev.detach().unwrap();
}
