#![cfg(feature = "agent")]
//! The generators of the end-to-end fixtures (issue 4 item 6): `seed-fixtures/make-real-seed.sh`
//! must give an OCI layout skopeo reads, with both lifecycle-agent labels, whose `ostree.tgz` is a
//! real repo holding the commit `rpm-ostree.json` names, and the same digests on a second run;
//! `seed-fixtures/make-metal-image.sh` must give a GPT with the RHCOS partition names and an ostree
//! sysroot in `root` with an `rhcos` deployment. The metal test needs root and loop devices; both
//! need their tools. Without them: `SKIP <test>: <reason>`; under `CI` that is a failure, except
//! "not root". Every mount and loop device the test makes is a guard, undone on failure too.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::registry::extract_layer;
use ibi::agent::disk::{LoopDevice, Mount, find_partition_by_label, read_table};

const SEED_INFO_LABEL: &str = "com.openshift.lifecycle-agent.seed_cluster_info";
const FORMAT_LABEL: &str = "com.openshift.lifecycle-agent.seed_format_version";

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seed-fixtures")
        .join(name)
}

fn run(program: &Path, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} {args:?}: {stderr}",
        program.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tool(name: &str) -> &Path {
    Path::new(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn real_seed_generator() {
    const TEST: &str = "real_seed_generator";
    if !common::require_tools(TEST, &["ostree", "skopeo", "tar", "gzip"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed");
    let precache = tmp.path().join("precache");
    let printed = run(
        &script("make-real-seed.sh"),
        &[s(&seed), "4.16.0", s(&precache)],
    );
    assert!(printed.starts_with("real seed: "), "{printed}");

    let inspect: serde_json::Value = serde_json::from_str(&run(
        tool("skopeo"),
        &["inspect", &format!("oci:{}:4.16.0", s(&seed))],
    ))
    .unwrap();
    assert_eq!(inspect["Architecture"], "amd64");
    assert_eq!(inspect["Labels"][FORMAT_LABEL], "4");
    let files = tmp.path().join("files");
    extract_layer(&seed, &files);
    let manifest = fs::read_to_string(files.join("manifest.json")).unwrap();
    assert_eq!(inspect["Labels"][SEED_INFO_LABEL], manifest.as_str());
    let info: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(info["seed_cluster_ocp_version"], "4.16.0");
    assert_eq!(
        info["container_storage_mountpoint_target"],
        "/dev/disk/by-partlabel/var-lib-containers"
    );
    assert_eq!(
        (&info["has_proxy"], &info["mirror_registry_configured"]),
        (&serde_json::json!(false), &serde_json::json!(false))
    );

    check_ostree(&files, tmp.path());
    check_lists(&files, &info, &precache);

    // A second run gives the same image.
    let again = tmp.path().join("again");
    run(&script("make-real-seed.sh"), &[s(&again)]);
    assert_eq!(
        fs::read(seed.join("index.json")).unwrap(),
        fs::read(again.join("index.json")).unwrap(),
        "make-real-seed.sh is not deterministic"
    );
}

/// `ostree.tgz` is a repo whose log shows the commit `rpm-ostree.json` boots, with a kernel.
fn check_ostree(files: &Path, tmp: &Path) {
    let rpm_ostree = fs::read_to_string(files.join("rpm-ostree.json")).unwrap();
    let (checksum, deployment) =
        ibi::agent::ostree_restore::booted_deployment(&rpm_ostree).unwrap();
    assert_eq!(deployment, format!("{checksum}.0"));
    assert!(files.join(format!("ostree-{deployment}.origin")).is_file());
    let repo = tmp.join("repo");
    fs::create_dir(&repo).unwrap();
    run(
        tool("tar"),
        &["-xzf", s(&files.join("ostree.tgz")), "-C", s(&repo)],
    );
    let repo_arg = format!("--repo={}", s(&repo));
    let log = run(tool("ostree"), &["log", &repo_arg, &checksum]);
    assert!(log.contains(&format!("commit {checksum}")), "{log}");
    let ls = run(
        tool("ostree"),
        &["ls", "-R", &repo_arg, &checksum, "/usr/lib/modules"],
    );
    assert!(
        ls.contains("/vmlinuz") && ls.contains("/initramfs.img"),
        "{ls}"
    );
    let mco = fs::read_to_string(files.join("mco-currentconfig.json")).unwrap();
    let kargs = ibi::agent::ostree_restore::kernel_args(&mco).unwrap();
    assert_eq!(kargs.len(), 3, "{kargs:?}");
}

/// `etc.deletions`, `containers.list`, the archives' key members, and the precache layout.
fn check_lists(files: &Path, info: &serde_json::Value, precache: &Path) {
    let deletions = fs::read_to_string(files.join("etc.deletions")).unwrap();
    assert_eq!(deletions.lines().count(), 3, "{deletions}");
    let etc = run(
        tool("tar"),
        &["--xattrs", "-tvvzf", s(&files.join("etc.tgz"))],
    );
    assert!(etc.contains("user.ibi.fixture"), "{etc}");
    let var = run(tool("tar"), &["-tvzf", s(&files.join("var.tgz"))]);
    for member in [
        "var/lib/kubelet/",
        "var/lib/etcd/member/",
        "var/opt/",
        "kubelet-client-current.pem -> ",
    ] {
        assert!(var.contains(member), "{member} missing: {var}");
    }

    let list = fs::read_to_string(files.join("containers.list")).unwrap();
    let registry = info["release_registry"].as_str().unwrap();
    let tsv = fs::read_to_string(precache.join("images.tsv")).unwrap();
    let entries: Vec<&str> = list.lines().collect();
    assert_eq!(entries.len(), tsv.lines().count(), "{list}\n{tsv}");
    for (entry, row) in entries.iter().zip(tsv.lines()) {
        let cols: Vec<&str> = row.split(' ').collect();
        assert_eq!(*entry, format!("{registry}/{}{}", cols[1], cols[2]));
        let inspect: serde_json::Value = serde_json::from_str(&run(
            tool("skopeo"),
            &["inspect", &format!("oci:{}:{}", s(precache), cols[0])],
        ))
        .unwrap();
        if let Some(digest) = cols[2].strip_prefix('@') {
            assert_eq!(inspect["Digest"], digest);
        }
    }
}

/// A loop device over partition `label` of `img`.
fn attach_partition(img: &Path, label: &str) -> LoopDevice {
    let part = find_partition_by_label(img, label).unwrap();
    LoopDevice::attach_range(img, part.offset_bytes(), part.len_bytes()).unwrap()
}

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
        common::skip(TEST, "no loop devices (/dev/loop-control, losetup -f)");
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
