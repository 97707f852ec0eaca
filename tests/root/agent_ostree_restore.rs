//! The ostree restore against a real sysroot, as root: a tiny bootable tree (kernel, initramfs,
//! `/usr/etc`, a `/usr/bin/sh` stub) committed with the `ostree` CLI into a seed repo, shipped as
//! `ostree.tgz` and extracted by the agent's own tar code; the target sysroot sits on its own
//! loop-mounted ext4 (`ostree admin deploy` freezes the filesystem holding the sysroot) and already
//! has an "RHCOS" deployment of a different commit, as coreos-installer leaves it. The seed commit is
//! deployed into a new stateroot with the kernel arguments of a FIPS MachineConfig; the
//! `ostree` CLI, the boot loader entries and the files on disk check the result; a re-run must
//! change nothing; then the RHCOS deployment is removed. The loop device and the mount are RAII
//! guards, so they go away on failure too; the immutable deployment dirs live only on the loop
//! filesystem, which is thrown away whole. Needs root, loop devices, `ostree`, `mkfs.ext4` and
//! `tar`; without them the test fails, naming what is missing.

#![cfg(all(feature = "agent", target_os = "linux"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ibi::agent::disk::{LoopDevice, Mount};
use ibi::agent::ostree_restore::{
    Deployed, booted_deployment, kernel_args, restore_ostree, undeploy_other,
};
use ibi::agent::restore_files::extract_tgz;

const STATEROOT: &str = "rhcos_4.16.0_rc.1";
const KVER: &str = "5.14.0-284.test.el9_2.x86_64";
const SYSROOT_BYTES: u64 = 256 * 1024 * 1024;
const SEED_ORIGIN: &str = "[origin]\n\
    container-image-reference=ostree-unverified-registry:quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:0123\n\
    \n\
    # kept byte for byte\n\
    [rpmostree]\n\
    custom-origin-description=seed\n";
const MCO_CURRENTCONFIG: &str = r#"{"apiVersion":"machineconfiguration.openshift.io/v1",
    "kind":"MachineConfig","metadata":{"name":"rendered-master-abc"},
    "spec":{"config":{"ignition":{"version":"3.2.0"}},"fips":true,
            "kernelArguments":["systemd.unified_cgroup_hierarchy=1","cgroup_no_v1=all","console=ttyS0,115200n8"]}}"#;

/// False, or the test fails ([`common::missing`]) when this machine lacks what it needs.
fn should_skip(test: &str) -> bool {
    if !common::require_root(test)
        || !common::require_tools(test, &["ostree", "mkfs.ext4", "tar", "losetup"])
    {
        return true;
    }
    if !Path::new("/dev/loop-control").exists() {
        common::missing(test, "no loop devices (/dev/loop-control)");
        return true;
    }
    false
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A minimal tree libostree can deploy: kernel and initramfs under `/usr/lib/modules/<kver>`,
/// an os-release with `PRETTY_NAME` (the boot entry title), `/usr/etc` (becomes `/etc`).
fn make_tree(dir: &Path, name: &str) {
    let modules = dir.join("usr/lib/modules").join(KVER);
    fs::create_dir_all(&modules).unwrap();
    fs::create_dir_all(dir.join("usr/etc")).unwrap();
    fs::create_dir_all(dir.join("usr/bin")).unwrap();
    fs::write(modules.join("vmlinuz"), format!("{name} kernel\n")).unwrap();
    fs::write(modules.join("initramfs.img"), format!("{name} initramfs\n")).unwrap();
    let os_release = format!("NAME={name}\nID={name}\nPRETTY_NAME=\"{name} test\"\n");
    fs::write(dir.join("usr/lib/os-release"), os_release).unwrap();
    fs::write(dir.join("usr/etc/hostname"), format!("{name}\n")).unwrap();
    fs::write(dir.join("usr/bin/sh"), "#!/bin/true\n").unwrap();
    fs::set_permissions(dir.join("usr/bin/sh"), fs::Permissions::from_mode(0o755)).unwrap();
}

/// Commits `tree` into `repo` without a ref; returns the checksum.
fn commit(repo: &Path, tree: &Path) -> String {
    let tree_arg = format!("--tree=dir={}", s(tree));
    let repo_arg = format!("--repo={}", s(repo));
    let args = [
        repo_arg.as_str(),
        "commit",
        "--orphan",
        &tree_arg,
        "--owner-uid=0",
        "--owner-gid=0",
    ];
    common::run_tool("ostree", &args).trim().to_string()
}

/// The seed side: a bare repo with one commit, tarred like lca-cli's `ostree.tgz` and extracted
/// into `<work>/ws/ostree` by the agent's tar code. Returns (extracted repo, checksum).
fn make_seed(work: &Path) -> (PathBuf, String) {
    let repo = work.join("seed-repo");
    make_tree(&work.join("seed-tree"), "seed");
    common::run_tool(
        "ostree",
        &["init", "--mode=bare", &format!("--repo={}", s(&repo))],
    );
    let checksum = commit(&repo, &work.join("seed-tree"));
    let tgz = work.join("ostree.tgz");
    common::run_tool("tar", &["czf", s(&tgz), "-C", s(&repo), "."]);
    let extracted = work.join("ws/ostree");
    fs::create_dir_all(&extracted).unwrap();
    extract_tgz(File::open(&tgz).unwrap(), &extracted, &mut |_| {}).unwrap();
    (extracted, checksum)
}

/// The target: a sysroot on its own loop-mounted ext4. Fields drop in order: unmount, then detach.
struct Target {
    mount: Mount,
    _loop: LoopDevice,
}

impl Target {
    fn new(work: &Path) -> Target {
        let img = work.join("sysroot.img");
        File::create(&img).unwrap().set_len(SYSROOT_BYTES).unwrap();
        common::run_tool("mkfs.ext4", &["-q", "-F", s(&img)]);
        let dev = LoopDevice::attach(&img).unwrap();
        let mnt = work.join("mnt");
        fs::create_dir(&mnt).unwrap();
        let mount = Mount::new(dev.path(), &mnt, Some("ext4"), None).unwrap();
        Target { mount, _loop: dev }
    }

    fn root(&self) -> &Path {
        self.mount.target()
    }

    fn sysroot_arg(&self) -> String {
        format!("--sysroot={}", s(self.root()))
    }

    fn repo_arg(&self) -> String {
        format!("--repo={}", s(&self.root().join("ostree/repo")))
    }

    /// What coreos-installer leaves: an `rhcos` stateroot with one deployment of its own commit.
    fn install_rhcos(&self, work: &Path) -> String {
        common::run_tool("ostree", &["admin", "init-fs", s(self.root())]);
        common::run_tool(
            "ostree",
            &["admin", "os-init", "rhcos", &self.sysroot_arg()],
        );
        make_tree(&work.join("rhcos-tree"), "rhcos");
        let checksum = commit(&self.root().join("ostree/repo"), &work.join("rhcos-tree"));
        let args = ["admin", "deploy", "--os=rhcos", "--karg=rhcos.test=1"];
        common::run_tool(
            "ostree",
            &[&args[..], &[&self.sysroot_arg(), &checksum]].concat(),
        );
        checksum
    }

    /// `(stateroot, <checksum>.<serial>)` per deployment, in order, from `ostree admin status`.
    fn status(&self) -> Vec<(String, String)> {
        let out = common::run_tool("ostree", &["admin", "status", &self.sysroot_arg()]);
        out.lines()
            .filter(|l| !l.starts_with("    "))
            .filter_map(|l| {
                let mut fields = l.trim_start_matches(['*', ' ']).split_whitespace();
                Some((fields.next()?.to_string(), fields.next()?.to_string()))
            })
            .collect()
    }

    /// The `options` line of every boot loader entry.
    fn boot_options(&self) -> Vec<String> {
        let dir = self.root().join("boot/loader/entries");
        let mut options: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| fs::read_to_string(e.unwrap().path()).unwrap())
            .filter_map(|text| {
                let line = text.lines().find(|l| l.starts_with("options "))?;
                Some(line["options ".len()..].to_string())
            })
            .collect();
        options.sort();
        options
    }

    fn has_commit(&self, checksum: &str) -> bool {
        Command::new("ostree")
            .args([&self.repo_arg(), "show", checksum])
            .output()
            .unwrap()
            .status
            .success()
    }
}

fn rpm_ostree_json(booted: &str, other: &str) -> String {
    format!(
        r#"{{"deployments":[
            {{"id":"rhcos-{other}.0","osname":"rhcos","checksum":"{other}","serial":0,"booted":false}},
            {{"id":"rhcos-{booted}.1","osname":"rhcos","checksum":"{booted}","serial":1,"booted":true}}
        ],"transaction":null,"cached-update":null}}"#
    )
}

fn restore(seed: &Path, checksum: &str, target: &Target, kargs: &[String]) -> Deployed {
    let origin = Some(SEED_ORIGIN.as_bytes());
    restore_ostree(seed, checksum, target.root(), STATEROOT, kargs, origin).unwrap()
}

fn assert_seed_deployed(target: &Target, deployed: &Deployed, checksum: &str, kargs: &[String]) {
    let root = target.root();
    let dir = root.join(format!("ostree/deploy/{STATEROOT}/deploy/{checksum}.0"));
    assert_eq!(deployed.deploy_dir, dir);
    assert_eq!(deployed.checksum, checksum);
    assert_eq!(deployed.index, 0);
    assert_eq!(
        fs::read_to_string(dir.join("etc/hostname")).unwrap(),
        "seed\n"
    );
    assert!(
        dir.join(format!("usr/lib/modules/{KVER}/vmlinuz"))
            .is_file()
    );
    let origin = fs::read(root.join(format!(
        "ostree/deploy/{STATEROOT}/deploy/{checksum}.0.origin"
    )));
    assert_eq!(origin.unwrap(), SEED_ORIGIN.as_bytes());
    let seed_entry: Vec<String> = target
        .boot_options()
        .into_iter()
        .filter(|o| o.contains(&format!("/{STATEROOT}/")))
        .collect();
    assert_eq!(seed_entry.len(), 1, "{:?}", target.boot_options());
    let want = format!("{} ostree=/ostree/boot.", kargs.join(" "));
    assert!(
        seed_entry[0].starts_with(&want),
        "{} vs {want}",
        seed_entry[0]
    );
    let var = root.join(format!("ostree/deploy/{STATEROOT}/var"));
    assert_eq!(
        fs::read_link(var.join("lock")).unwrap(),
        Path::new("../run/lock")
    );
    assert_eq!(
        fs::metadata(var.join("tmp")).unwrap().permissions().mode() & 0o7777,
        0o1777
    );
}

fn check_undeploy(target: &Target, checksum: &str, rhcos_commit: &str) {
    let removed = undeploy_other(target.root(), STATEROOT).unwrap();
    assert_eq!(removed, vec![format!("rhcos {rhcos_commit}.0")]);
    assert_eq!(
        target.status(),
        vec![(STATEROOT.to_string(), format!("{checksum}.0"))]
    );
    assert!(!target.root().join("ostree/deploy/rhcos").exists());
    assert!(
        target
            .root()
            .join(format!("ostree/deploy/{STATEROOT}/deploy/{checksum}.0"))
            .is_dir()
    );
    assert_eq!(target.boot_options().len(), 1);
    assert!(target.has_commit(checksum));
    assert!(
        !target.has_commit(rhcos_commit),
        "the RHCOS commit is pruned"
    );

    // Again: nothing left to remove, the missing rhcos dir is only a warning.
    assert!(undeploy_other(target.root(), STATEROOT).unwrap().is_empty());
    // Keeping a stateroot without deployments would remove everything: refused.
    let err = undeploy_other(target.root(), "rhcos").unwrap_err();
    assert!(
        format!("{err:#}").starts_with("stateroot rhcos has no deployment in "),
        "{err:#}"
    );
    assert_eq!(target.status().len(), 1);
}

/// The `objects/XX` directory holding the object named `rest` (`<62 hex>.<kind>`) in `repo`.
fn checksum_prefix_of(repo: &Path, rest: &str) -> String {
    for dir in fs::read_dir(repo.join("objects")).unwrap() {
        let dir = dir.unwrap();
        if dir.path().join(rest).exists() {
            return dir.file_name().into_string().unwrap();
        }
    }
    panic!("{rest} is not in {}", repo.display());
}

#[test]
fn restore_and_undeploy_on_a_loop_mounted_sysroot_as_root() {
    if should_skip("restore_and_undeploy_on_a_loop_mounted_sysroot_as_root") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let (seed, seed_commit) = make_seed(work.path());
    let target = Target::new(work.path());
    let rhcos_commit = target.install_rhcos(work.path());

    let (checksum, deployment) =
        booted_deployment(&rpm_ostree_json(&seed_commit, &rhcos_commit)).unwrap();
    assert_eq!(
        (checksum.as_str(), deployment),
        (seed_commit.as_str(), format!("{seed_commit}.1"))
    );
    let kargs = kernel_args(MCO_CURRENTCONFIG).unwrap();
    assert_eq!(kargs.last().map(String::as_str), Some("boot=LABEL=boot"));

    let missing = "0".repeat(64);
    let err = restore_ostree(&seed, &missing, target.root(), STATEROOT, &kargs, None).unwrap_err();
    assert!(
        format!("{err:#}").starts_with(&format!("pulling commit {missing} from the seed repo"))
    );
    assert_eq!(target.status().len(), 1);

    // What an os-init that died half way leaves: some of the stateroot's `var`.
    fs::create_dir_all(
        target
            .root()
            .join(format!("ostree/deploy/{STATEROOT}/var/tmp")),
    )
    .unwrap();
    let deployed = restore(&seed, &checksum, &target, &kargs);
    assert!(target.has_commit(&checksum));
    assert_seed_deployed(&target, &deployed, &checksum, &kargs);
    let both = vec![
        (STATEROOT.to_string(), format!("{checksum}.0")),
        ("rhcos".to_string(), format!("{rhcos_commit}.0")),
    ];
    assert_eq!(target.status(), both);
    let entries_before = target.boot_options();

    // A re-run (the agent resuming after a crash) finds the deployment and changes nothing.
    fs::write(deployed.deploy_dir.with_extension("0.origin"), "[origin]\n").unwrap();
    assert_eq!(restore(&seed, &checksum, &target, &kargs), deployed);
    assert_eq!(target.status(), both);
    assert_eq!(target.boot_options(), entries_before);
    assert_seed_deployed(&target, &deployed, &checksum, &kargs);

    check_undeploy(&target, &checksum, &rhcos_commit);
}

/// The agent extracts `ostree.tgz` on the target's root filesystem, as here: the seed's bare
/// objects are then renamed into the sysroot's repo before the pull. Checked: they left the seed
/// repo, the commit stayed for the pull, one the sysroot already had (the shared `/usr/bin/sh`)
/// stayed too, the deployment is complete, `ostree fsck` finds the repo sound, and a run that
/// finds half the objects already moved (a crash between renames) finishes the job.
#[test]
fn bare_seed_objects_move_into_the_sysroot_repo_as_root() {
    if should_skip("bare_seed_objects_move_into_the_sysroot_repo_as_root") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let target = Target::new(work.path());
    let rhcos_commit = target.install_rhcos(work.path());
    let seed_repo = work.path().join("seed-repo");
    make_tree(&work.path().join("seed-tree"), "seed");
    common::run_tool(
        "ostree",
        &["init", "--mode=bare", &format!("--repo={}", s(&seed_repo))],
    );
    let checksum = commit(&seed_repo, &work.path().join("seed-tree"));
    let tgz = work.path().join("ostree.tgz");
    common::run_tool("tar", &["czf", s(&tgz), "-C", s(&seed_repo), "."]);
    let extracted = target.root().join("ostree/ibi-work/repo");
    fs::create_dir_all(&extracted).unwrap();
    extract_tgz(File::open(&tgz).unwrap(), &extracted, &mut |_| {}).unwrap();

    let objects = |repo: &Path, suffix: &str| -> Vec<String> {
        let mut found = Vec::new();
        for dir in fs::read_dir(repo.join("objects")).unwrap() {
            for entry in fs::read_dir(dir.unwrap().path()).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                if name.ends_with(suffix) {
                    found.push(name);
                }
            }
        }
        found.sort();
        found
    };
    let seed_files = objects(&extracted, ".file");
    let sysroot_repo = target.root().join("ostree/repo");
    let shared: Vec<String> = objects(&sysroot_repo, ".file")
        .into_iter()
        .filter(|n| seed_files.contains(n))
        .collect();
    assert!(!shared.is_empty(), "the trees share /usr/bin/sh");
    // A crash after some renames: one object already moved, as the agent would have.
    let moved = seed_files.iter().find(|n| !shared.contains(n)).unwrap();
    let prefix = checksum_prefix_of(&extracted, moved);
    fs::rename(
        extracted.join("objects").join(&prefix).join(moved),
        sysroot_repo.join("objects").join(&prefix).join(moved),
    )
    .or_else(|_| {
        fs::create_dir_all(sysroot_repo.join("objects").join(&prefix))?;
        fs::rename(
            extracted.join("objects").join(&prefix).join(moved),
            sysroot_repo.join("objects").join(&prefix).join(moved),
        )
    })
    .unwrap();

    let kargs = kernel_args(MCO_CURRENTCONFIG).unwrap();
    let deployed = restore(&extracted, &checksum, &target, &kargs);
    assert_seed_deployed(&target, &deployed, &checksum, &kargs);
    // Left behind: the commit (the pull copies it) and the content the sysroot already had.
    assert_eq!(objects(&extracted, ".commit").len(), 1);
    assert_eq!(objects(&extracted, ".file"), shared);
    common::run_tool("ostree", &["fsck", &target.repo_arg()]);
    assert!(target.has_commit(&rhcos_commit));
    assert!(target.has_commit(&checksum));
}
