//! `ibi agent fetch-config` against real block devices: a labelled ext4 image and ISO images
//! attached as (read-only) loop devices, found through the machine's real `/sys/class/block`.
//! Each test restricts the scan to its own loop device, so the host's disks are never opened and
//! parallel tests never see each other's devices. The device tests (tests/root) need root and loop
//! devices, and fail without them.
#![cfg(feature = "agent")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs;
use std::path::Path;
use std::process::Command;

use ibi::agent::fetch_config::{Outcome, fetch_config};

use crate::common::agent_fetch_config::*;

#[test]
fn ext4_loop_device_is_mounted_read_only_and_copied_needs_root() {
    let test = "ext4_loop_device_is_mounted_read_only_and_copied_needs_root";
    if Command::new("mkfs.ext4").arg("-V").output().is_err() {
        return common::missing(test, "mkfs.ext4 not installed");
    }
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    for (path, data, mode) in tree(GOOD_MANIFEST) {
        let p = src.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, data).unwrap();
        fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }
    let image = work.path().join("config.ext4");
    fs::File::create(&image).unwrap().set_len(16 << 20).unwrap();
    let mkfs = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-L", "cluster-config", "-d"])
        .arg(&src)
        .arg(&image)
        .status()
        .unwrap();
    assert!(mkfs.success(), "mkfs.ext4");
    let Some(lo) = attach_or_skip(test, &image) else {
        return;
    };
    let target = work.path().join("opt/openshift");
    let got = fetch_config(&options(&target, &lo.name())).unwrap();
    assert_eq!(
        got,
        Outcome::Copied {
            device: lo.dev.clone()
        }
    );
    assert_tree_copied(&target);
    assert!(
        !target.join("lost+found").exists(),
        "filesystem metadata is not configuration"
    );
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap();
    let dev = lo.dev.to_string_lossy();
    assert!(
        !mounts.lines().any(|l| l.split(' ').next() == Some(&*dev)),
        "unmounted"
    );
}

#[test]
fn iso_loop_device_is_read_in_userspace_needs_root() {
    let test = "iso_loop_device_is_read_in_userspace_needs_root";
    let work = tempfile::tempdir().unwrap();
    let image = iso_image(work.path(), "cluster-config", GOOD_MANIFEST);
    let Some(lo) = attach_or_skip(test, &image) else {
        return;
    };
    let target = work.path().join("opt/openshift");
    // This kernel has no iso9660 module: success means the userspace reader did the work.
    let got = fetch_config(&options(&target, &lo.name())).unwrap();
    assert_eq!(
        got,
        Outcome::Copied {
            device: lo.dev.clone()
        }
    );
    assert_tree_copied(&target);
    assert_eq!(
        entries(&work.path().join("opt")),
        ["openshift"],
        "no leftovers"
    );
}

#[test]
fn bad_iso_loop_device_fails_and_leaves_target_untouched_needs_root() {
    let test = "bad_iso_loop_device_fails_and_leaves_target_untouched_needs_root";
    let work = tempfile::tempdir().unwrap();
    let image = iso_image(work.path(), "cluster-config", br#"{"api_version":2}"#);
    let Some(lo) = attach_or_skip(test, &image) else {
        return;
    };
    let opt = work.path().join("opt");
    fs::create_dir_all(opt.join("openshift")).unwrap();
    let target = opt.join("openshift");
    let err = fetch_config(&options(&target, &lo.name())).unwrap_err();
    let text = format!("{err:#}");
    assert!(
        text.contains(&format!("configuration device {}", lo.dev.display())),
        "{text}"
    );
    assert!(
        text.ends_with("manifest.json: api_version is 2, expected 1"),
        "{text}"
    );
    assert!(entries(&target).is_empty(), "target untouched");
    assert_eq!(entries(&opt), ["openshift"], "no leftovers");
}

#[test]
fn cli_fetches_the_config_iso_built_by_create_config_image_needs_root() {
    let test = "cli_fetches_the_config_iso_built_by_create_config_image_needs_root";
    let work = tempfile::tempdir().unwrap();
    // The real output of `ibi create config-image` on the bundled example site.
    let site = work.path().join("site");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/example-site");
    fs::create_dir_all(site.join("extra-manifests")).unwrap();
    for f in ["install-config.yaml", "image-based-config.yaml"] {
        fs::copy(example.join(f), site.join(f)).unwrap();
    }
    let ibi = env!("CARGO_BIN_EXE_ibi");
    let built = std::process::Command::new(ibi)
        .args(["create", "config-image", "--dir"])
        .arg(&site)
        .status()
        .unwrap();
    assert!(built.success());
    let Some(lo) = attach_or_skip(test, &site.join("imagebasedconfig.iso")) else {
        return;
    };
    let target = work.path().join("opt/openshift");
    let out = std::process::Command::new(ibi)
        .args([
            "agent",
            "fetch-config",
            "--timeout",
            "10",
            "--device",
            &lo.name(),
            "--target",
        ])
        .arg(&target)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest = fs::read(target.join("cluster-configuration/manifest.json")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(v["api_version"], 1);
    assert!(
        target
            .join("cluster-configuration/manifests/image-digest-mirror-set.json")
            .is_file()
    );
}
