//! `hostAgent: lca` in the lab (issue 35): the installation ISO ibi builds runs lifecycle-agent's own
//! `lca-cli ibi` (the upstream builds in `../shared/fixtures/lca-cli/`, read there and decompressed
//! into the test's directory), carried where a real seed carries it: at the seed image's root, from
//! where the ISO's install script copies it out with podman.
//!
//! What stands in for what (docs/deliver.md, "The lab"): the live root is Debian 12 with the Debian
//! packages of every tool lca-cli calls by name (podman, ostree, sfdisk, sgdisk, blockdev, growpart,
//! lsblk, jq, mkfs.xfs, xfs_growfs, mount, restorecon, chattr, tar, wipefs, vgs/pvs, dmsetup,
//! mdadm, shutdown); three RHCOS-only parts are stand-ins, each recording its calls on the serial
//! console or saying what it did: `coreos-installer` (writes the fake metal image: the lab's ISO
//! has no osmet image), `chcon` (no SELinux: relabels nothing and says so) and `nmstatectl` (no
//! NIC). lca-cli's `ibi` runs no rpm-ostree. The seed is the lab's bootable Debian tree
//! (`tests/lab/seed-tree.sh`) as a lifecycle-agent seed; its own `lca-cli` in /var (what the
//! installed host runs as `lca-cli post-pivot`) is [`POST_PIVOT_SCRIPT`].

use super::*;

/// One upstream lca-cli build and the seed version it installs in the lab.
pub struct LcaRef {
    /// The branch it was built from: the fixture is `lca-cli-<branch>.xz`.
    pub branch: &'static str,
    /// The seed's OCP version (`seedVersion`, `manifest.json`'s `seed_cluster_ocp_version`).
    pub seed_version: &'static str,
}

/// The 4.x line: release-4.18 (sgdisk makes the extra partition).
pub static LCA_4_18: LcaRef = LcaRef {
    branch: "release-4.18",
    seed_version: "4.18.0",
};

/// main, the 5.0 line (sfdisk --append makes the extra partition).
pub static LCA_MAIN: LcaRef = LcaRef {
    branch: "main",
    seed_version: "5.0.0",
};

/// The registry as the VM names it (docker-registry on its loopback, tests/lab/live-root/).
pub const REGISTRY: &str = "localhost:5000";
/// This side's registry, at the same port, so that one reference names the seed here (for
/// `create image`'s seed check) and in the VM.
pub const REGISTRY_HERE: &str = "127.0.0.1:5000";

/// The lab seed's etc.deletions for lca-cli: a file of the tree. lca-cli removes each line with Go's
/// `os.Remove` and stops at the first failure, so the fixture's default lines (a directory that is
/// not empty, an absent file: what ibi's agent tolerates) are not what a seed made by
/// `ostree admin config-diff` holds, and would end the run there.
pub const ETC_DELETIONS: &str = "/etc/motd\n";

/// The seed's `lca-cli` in its /var (run by the installed host's `installation-configuration.service`
/// as `lca-cli post-pivot`): waits as lifecycle-agent's post-pivot does, for
/// `/opt/openshift/cluster-configuration` or a whole device labelled `cluster-config`, which it
/// mounts and copies to `/opt/openshift` (an lca-installed host has no ibi unit to do it); then
/// records what it found, as the ibi lab's stand-in does, and powers the VM off.
pub const POST_PIVOT_SCRIPT: &str = r#"#!/bin/sh
# ibi lab: stands in for lifecycle-agent's post-pivot (bounded here): waits for the configuration
# folder, or a top-level device labelled cluster-config, copied to /opt/openshift; then records.
[ $# -eq 0 ] || [ "$1" = post-pivot ] || exit 0
i=0
source=folder
while [ ! -e /opt/openshift/cluster-configuration/manifest.json ] && [ $i -lt 900 ]; do
    dev=$(lsblk -dn -o NAME,LABEL | awk '$2 == "cluster-config" {print $1; exit}')
    if [ -n "$dev" ]; then
        mkdir -p /run/lab-config /opt/openshift
        mount -o ro "/dev/$dev" /run/lab-config && cp -R /run/lab-config/. /opt/openshift/
        umount /run/lab-config
        source="device /dev/$dev"
        break
    fi
    sleep 1; i=$((i+1))
done
mkdir -p /var/lib/lab
{
    echo "waited=$i"
    echo "source=$source"
    echo "cmdline=$(cat /proc/cmdline)"
} > /var/lib/lab/result
sync
echo "IBI-LAB: configuration arrived" > /dev/ttyS0
systemctl --no-block poweroff
"#;

/// The user's own `post.sh` (BASE/post.sh) of the one-shot test: records whether the site's tree was
/// in the new stateroot when it ran (ibi's post.sh runs first, then this one) and says so.
pub fn user_post_sh(l: &LcaRef) -> String {
    format!(
        r#"#!/bin/bash
# ibi lab: the user's own post.sh, run by ibi's one-shot post.sh after it wrote the site's tree.
var=/mnt/ostree/deploy/rhcos_{}/var
ls "$var/opt/openshift/cluster-configuration/manifest.json" >"$var/lib/ibi-lab-user-post" 2>&1
echo "IBI-LAB: the user's post.sh ran in $(pwd)" >/dev/ttyS0
"#,
        l.seed_version
    )
}

/// The fixture's lca-cli of `l`, decompressed into `dir` (never into the project).
pub fn binary(l: &LcaRef, dir: &Path) -> PathBuf {
    let xz = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/lca-cli")
        .join(format!("lca-cli-{}.xz", l.branch));
    assert!(
        xz.is_file(),
        "{}: the upstream lca-cli fixture (../shared beside the project)",
        xz.display()
    );
    let out = dir.join(format!("lca-cli-{}", l.branch));
    let file = std::fs::File::create(&out).unwrap();
    let status = Command::new("xz")
        .arg("-dc")
        .arg(&xz)
        .stdout(file)
        .status()
        .expect("xz");
    assert!(status.success(), "xz -dc {}", xz.display());
    out
}

/// The lab's installation config for `hostAgent: lca`: the seed from the VM's registry, the VM's
/// disk by its serial, the extra partition in the last GiB, precache on (the seed's three images,
/// from the same registry), power off at the end.
pub fn config(l: &LcaRef) -> String {
    let v = l.seed_version;
    format!(
        r#"apiVersion: v1beta1
kind: ImageBasedInstallationConfig
metadata:
  name: ibi-lab-lca
seedImage: {REGISTRY}/ibi/seed:{v}
seedVersion: {v}
installationDisk: /dev/disk/by-id/virtio-ibi-lab-host
pullSecret: '{{"auths":{{"registry.edge.example.com:5000":{{"auth":"ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk"}}}}}}'
sshKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBtzJA7zEa76v2rl4hgeLwFAXBzQeW4q3kbmvgJNYl70 edge-ops@example.com
extraPartitionStart: -1G
extraPartitionLabel: var-lib-containers
extraPartitionNumber: 5
coreosInstallerArgs: ["--append-karg", "ibi.test=1"]
hostAgent: lca
shutdown: true
"#
    )
}

/// Every command lca-cli ran, in order, from its `Executing <cmd> with args [<args>]` lines on the
/// serial console (logrus text format: the message quoted, `"` escaped). The precache's pulls
/// (`podman pull <image> --authfile var/tmp/pull-secret.json`) are logged only when they fail;
/// each success is its `Successfully pulled image: <image>` line, listed as `precache pulled
/// <image>`.
pub fn calls(serial: &str) -> Vec<String> {
    serial
        .lines()
        .filter_map(|l| {
            let (_, msg) = l.split_once("msg=\"")?;
            let msg = msg.strip_suffix('"').unwrap_or(msg);
            let msg = msg.replace("\\\"", "\"").replace("\\\\", "\\");
            if let Some(image) = msg.strip_prefix("Successfully pulled image: ") {
                return Some(format!("precache pulled {image}"));
            }
            let m = msg.strip_prefix("Executing ")?;
            Some(match m.split_once(" with args [") {
                Some((cmd, args)) => format!("{cmd} {}", args.strip_suffix(']').unwrap_or(args)),
                None => m.to_string(),
            })
        })
        .collect()
}

/// Whether lca-cli lost the 4.x line's race for its extra partition: its last calls are its
/// `sgdisk --new`, the `lsblk` that looks for the new partition, and `mkfs.xfs -f null`, as that
/// `lsblk` found none. Every 4.x branch writes the GPT with `echo write | sfdisk` and right after
/// adds the partition with `sgdisk --new`, which has the kernel re-read the table (BLKRRPART). The
/// kernel refuses that (EBUSY) while any partition is open, and udev is probing them then (it
/// re-reads the disk on sfdisk's close); sgdisk exits 0 all the same, and udev, busy with that
/// event, misses sgdisk's close. lca-cli's main adds the partition with `sfdisk --append`, which
/// tells the kernel of the one partition instead (`../shared/reference/openshift-5.md`). What the
/// serial console shows fits this: after sgdisk the kernel still lists four partitions. Under TCG
/// udev's probing is slow enough that it happened in 2 of the 3 runs of the faster live ISO that
/// we made before the test retried; on hardware the window is far shorter, but it is there.
pub fn lost_partition_race(serial: &str) -> bool {
    let calls = calls(serial);
    let [.., new, lsblk, mkfs] = calls.as_slice() else {
        return false;
    };
    new.starts_with("sgdisk --new ") && lsblk.contains("lsblk ") && mkfs == "mkfs.xfs -f null"
}

/// Asserts that `calls` holds each of `want` (prefixes) in this order, others between allowed.
pub fn assert_in_order(calls: &[String], want: &[String]) {
    let mut at = 0;
    for w in want {
        match calls[at..].iter().position(|c| c.starts_with(w.as_str())) {
            Some(i) => at += i + 1,
            None => panic!(
                "lca-cli did not call `{w}` (in this order); its calls:\n{}",
                calls.join("\n")
            ),
        }
    }
}

/// The commands lca-cli of `l` must have run for the lab's config, in order (prefixes): the disk
/// cleanup, RHCOS, the extra partition as that line makes it, the seed pull and restore, the
/// precache, the drop of coreos-installer's deployment, the power-off.
/// With `post`, `var/tmp/post.sh` (a one-shot ISO's) runs after the precache.
pub fn expected_calls(l: &LcaRef, seed_image: &str, post: bool) -> Vec<String> {
    let disk = "/dev/disk/by-id/virtio-ibi-lab-host";
    let os = format!("rhcos_{}", l.seed_version.replace('-', "_"));
    let mut want = vec![
        "vgs --noheadings -o vg_name,pv_name".to_string(),
        "pvs --noheadings -o pv_name".to_string(),
        "dmsetup ls".to_string(),
        "mdadm -v --query --detail --scan".to_string(),
        format!("wipefs --all --force {disk}"),
        format!("coreos-installer install {disk} --append-karg ibi.test=1"),
    ];
    if l.branch == "release-4.18" {
        want.push(format!("bash -c echo write | sfdisk {disk}"));
        want.push(format!(
            "sgdisk --new 5:-1G --change-name 5:var-lib-containers {disk}"
        ));
    } else {
        want.push(format!("bash -c blockdev --getsize64 {disk}"));
        want.push(format!("bash -c blockdev --getss {disk}"));
        want.push("bash -c printf 'start=%s,name=%s\\n'".to_string());
    }
    want.extend([
        format!("bash -c lsblk {disk} --json -O | jq .blockdevices[0].children[4].path -r"),
        "mkfs.xfs -f /dev/vda5".to_string(),
        format!("growpart {disk} 4"),
        "mount /dev/disk/by-partlabel/root /mnt".to_string(),
        "mount /dev/disk/by-partlabel/boot /mnt/boot".to_string(),
        "xfs_growfs /dev/disk/by-partlabel/root".to_string(),
        "mount /dev/disk/by-partlabel/var-lib-containers /var/lib/containers".to_string(),
        "restorecon -R /var/lib/containers".to_string(),
        format!("podman pull --authfile var/tmp/pull-secret.json {seed_image}"),
        format!("podman image mount {seed_image}"),
        "chcon -t install_exec_t /var/tmp/tar-".to_string(),
        "ostree pull-local --repo /mnt/ostree/repo /var/tmp/".to_string(),
        format!("ostree admin os-init --sysroot /mnt {os}"),
        format!("bash -c ostree admin deploy --os {os} --no-prune --sysroot /mnt"),
        "ostree admin status --sysroot /mnt/".to_string(),
        // No `podman image umount` here: lca-cli unmounts only when one of the names `podman image
        // mount --format json` lists equals the reference, and none equalled the digest-pinned one
        // ibi writes (podman 4.3); `podman rmi` removes the image all the same (check_disk).
        "podman image mount --format json --log-level error".to_string(),
        format!("podman image exists {seed_image}"),
        format!("podman rmi {seed_image}"),
        format!("precache pulled {REGISTRY}/"),
    ]);
    if post {
        want.push("bash -c var/tmp/post.sh".to_string());
    }
    want.extend([
        "ostree admin undeploy --sysroot /mnt 1".to_string(),
        "bash -c rm -rf /mnt/ostree/deploy/rhcos".to_string(),
        "shutdown now".to_string(),
    ]);
    want
}

/// The seed reference lca-cli pulled (`seedImage` of ibi-configuration.json as `create image`
/// wrote it): the first `podman pull --authfile` of its calls.
pub fn seed_image(calls: &[String]) -> String {
    let pull = "podman pull --authfile var/tmp/pull-secret.json ";
    let seed = calls
        .iter()
        .find_map(|c| c.strip_prefix(pull))
        .unwrap_or_else(|| panic!("lca-cli pulled no seed:\n{}", calls.join("\n")));
    seed.to_string()
}

/// What lca-cli left on the VM's disk, read here: the GPT (partition 5 `var-lib-containers` in the
/// last GiB, root grown up to it), XFS on it, the new stateroot with the seed's commit deployed and
/// coreos-installer's deployment gone, the seed's origin and kernel arguments, /etc and /var
/// restored from the seed (with the xattr tar carried, etc.deletions applied), the precached images
/// in the containers partition (each the registry's by digest), the seed image removed from it.
/// Returns a summary for the log.
pub fn check_disk(rig: &InstallRig, l: &LcaRef, dir: &Path) -> String {
    use common::agent::{DISK_SIZE, KARGS, Mounted, Target, bls_options, gpt_dump, run, s};
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    let stateroot = format!("rhcos_{}", l.seed_version);
    let seed_files = dir.join("seed-files");
    common::registry::extract_layer(&rig.seed, &seed_files);
    let t = Target::adopt(&dir.join("check"), &rig.host_disk, "overlay");
    let gpt = gpt_dump(&t);
    let table = ibi::agent::disk::read_table(t.disk()).unwrap();
    let extra = table.get(5).expect("partition 5").clone();
    assert_eq!(extra.name, "var-lib-containers", "{gpt}");
    assert_eq!(extra.offset_bytes() % MIB, 0, "aligned to 1 MiB: {extra}");
    // release-4.18's `sgdisk --new 5:-1G` starts 1 GiB + 1 MiB before the end and runs to the last
    // usable sector; main's `sfdisk --append` starts at exactly 1 GiB before the end and sfdisk
    // aligns the end down to 1 MiB. Either way: the last GiB, give or take the alignment.
    let last_usable = table.last_usable_lba(DISK_SIZE, 512).unwrap();
    let (start, end) = if l.branch == "release-4.18" {
        (DISK_SIZE - GIB - MIB, last_usable)
    } else {
        (DISK_SIZE - GIB, (last_usable + 1) / 2048 * 2048 - 1)
    };
    assert_eq!(extra.offset_bytes(), start, "{gpt}");
    assert_eq!(extra.last_lba, end, "{gpt}");
    let root_part = table.get(4).expect("partition 4").clone();
    assert_eq!(root_part.name, "root", "{gpt}");
    assert_eq!(
        root_part.last_lba + 1,
        extra.first_lba,
        "root not grown up to the extra partition: {gpt}"
    );

    let root_at = t.path("check-root");
    let containers_at = t.path("check-containers");
    let root = Mounted::new(&t, "root", &root_at, Some("ro"));
    let boot = Mounted::new(&t, "boot", &root_at.join("boot"), Some("ro"));
    let containers = Mounted::new(&t, "var-lib-containers", &containers_at, None);
    let fstype = run(
        "findmnt",
        &["-n", "-o", "FSTYPE", "--target", s(&containers_at)],
    );
    assert_eq!(fstype.trim(), "xfs");

    let status = run("ostree", &["admin", "status", "--sysroot", s(&root_at)]);
    let rpm_ostree = std::fs::read_to_string(seed_files.join("rpm-ostree.json")).unwrap();
    let (checksum, seed_deployment) =
        ibi::agent::ostree_restore::booted_deployment(&rpm_ostree).unwrap();
    assert!(
        status.contains(&format!("{stateroot} {checksum}.0")),
        "{status}"
    );
    assert!(
        !status.contains("rhcos "),
        "coreos-installer's deployment still listed: {status}"
    );
    assert!(!root_at.join("ostree/deploy/rhcos").exists());
    let deploy_dir = root_at.join(format!("ostree/deploy/{stateroot}/deploy/{checksum}.0"));
    assert_eq!(
        std::fs::read(deploy_dir.with_extension("0.origin")).unwrap(),
        std::fs::read(seed_files.join(format!("ostree-{seed_deployment}.origin"))).unwrap(),
        "the origin file is not the seed's"
    );
    let options = bls_options(&root_at.join("boot/loader/entries"));
    assert_eq!(options.len(), 1, "one boot entry, the seed's: {options:?}");
    for karg in KARGS {
        assert!(
            options[0].split(' ').any(|o| o == karg),
            "{karg} not in {options:?}"
        );
    }

    common::agent::check_restored_etc(&deploy_dir.join("etc"));
    let var = root_at.join(format!("ostree/deploy/{stateroot}/var"));
    assert!(var.join("lib/etcd/member/wal").is_dir());
    // make-real-seed.sh reads LCA_CLI with $(cat), which drops the final newline.
    assert_eq!(
        std::fs::read_to_string(var.join("usrlocal/bin/lca-cli")).unwrap(),
        POST_PIVOT_SCRIPT.trim_end(),
        "var.tgz's lca-cli"
    );

    let reg = rig.registry.as_ref().unwrap();
    let tsv = std::fs::read_to_string(rig.precache.as_ref().unwrap().join("images.tsv")).unwrap();
    let named: Vec<(String, String)> = tsv
        .lines()
        .map(|row| {
            let cols: Vec<&str> = row.split(' ').collect();
            let (repo, reference) = (cols[1], cols[2]);
            (
                format!("{REGISTRY}/{repo}{reference}"),
                format!("{}/{repo}{reference}", reg.addr),
            )
        })
        .collect();
    let images = common::agent::check_images_named(&named, &t, &containers_at);
    let seed_left = Command::new("skopeo")
        .args([
            "inspect",
            &common::agent::storage_reference(
                &t,
                &containers_at,
                &format!("{REGISTRY}/ibi/seed:{}", l.seed_version),
            ),
        ])
        .output()
        .unwrap();
    assert!(
        !seed_left.status.success(),
        "the seed image is still in the containers partition"
    );
    drop((containers, boot, root, t));
    format!("{gpt}\n{status}\nprecached:\n{}", images.join("\n"))
}

/// The race is told by lca-cli's own last calls, as a failed run of release-4.18 in this lab logged
/// them (serial lines as they came, trimmed); a run that found partition 5, or failed elsewhere, is
/// not the race.
#[test]
fn the_4x_partition_race_is_told_from_other_ends() {
    let line = |t: &str, msg: &str| {
        format!(
            "[  {t}] install-rhcos-and-restore-seed.sh[532]: time=\"2026-12-07 18:01:43\" level=info msg=\"{msg}\"\n"
        )
    };
    let sgdisk = line(
        "214.98",
        "Executing sgdisk with args [--new 5:-1G --change-name 5:var-lib-containers /dev/disk/by-id/virtio-ibi-lab-host]",
    );
    let lsblk = line(
        "217.22",
        "Executing bash with args [-c lsblk /dev/disk/by-id/virtio-ibi-lab-host --json -O | jq .blockdevices[0].children[4].path -r]",
    );
    let fatal = "[  220.87] install-rhcos-and-restore-seed.sh[532]: time=\"2026-12-07 18:01:50\" level=fatal msg=\"failed to prepare disk: failed to create extra partition: failed to grow root partition: failed to run mkfs.xfs with args [-f null]: Error accessing specified device null\"\n";
    let lost = [
        sgdisk.clone(),
        "[  215.27]  vda: vda1 vda2 vda3 vda4\n".to_string(),
        lsblk.clone(),
        line("220.63", "Executing mkfs.xfs with args [-f null]"),
        fatal.to_string(),
    ]
    .concat();
    assert!(lost_partition_race(&lost));
    let found = [
        sgdisk.clone(),
        "[  168.90]  vda: vda1 vda2 vda3 vda4 vda5\n".to_string(),
        lsblk.clone(),
        line("170.28", "Executing mkfs.xfs with args [-f /dev/vda5]"),
        line(
            "170.50",
            "Executing growpart with args [/dev/disk/by-id/virtio-ibi-lab-host 4]",
        ),
    ]
    .concat();
    assert!(!lost_partition_race(&found));
    // mkfs of the partition it found, then a failure of its own: not the race.
    let other = [
        sgdisk,
        lsblk,
        line("170.28", "Executing mkfs.xfs with args [-f /dev/vda5]"),
    ]
    .concat();
    assert!(!lost_partition_race(&other));
    assert!(!lost_partition_race(""));
}
