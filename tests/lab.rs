//! The lab (tests/common/lab.rs): ibi's delivery on a libvirt VM whose BMC is sushy-tools'
//! emulator with its libvirt driver, under QEMU (TCG here), as upstream IBI CI runs it.
//!
//! Site phase: the VM's disk stands in for a host after the factory phase (RHCOS with the seed
//! restored): a Debian 12 guest with systemd and udev (tests/lab/guest-disk.sh) carrying ibi's
//! binary and `ibi-fetch-config.service` installed and enabled as `ibi agent install` places them,
//! and a stand-in for the seed's `installation-configuration.service` (lifecycle-agent's
//! post-pivot: it waits for `/opt/openshift/cluster-configuration` as post-pivot does, records what
//! it found, and powers the VM off). `ibi deploy --phase site` inserts the site's configuration ISO
//! through the emulator and boots the disk; the cluster's API is a stand-in on this side
//! (tests/common/kubeapi.rs) turned ready when the guest says the configuration arrived, so deploy's
//! watch and eject run for real.
//!
//! Factory phase: an installation ISO made by `ibi create image` from the lab's live ISO
//! (tests/lab/live-iso.sh, standing in for the RHCOS live ISO) boots in a VM through `ibi deploy
//! --phase factory`; `ibi agent install` installs the seed onto the VM's disk, which is then
//! checked as the loop-device e2e test checks its own; then the site phase runs on that disk, which
//! boots the seed's deployment (a Debian tree, tests/lab/seed-tree.sh).
//!
//! One-shot: `ibi deploy --phase oneshot` serves the VM the site's own variant of the installation
//! ISO (carrying the site's configuration), waits for the install, boots the disk with no medium and
//! watches the cluster; the post-pivot stand-in finds the configuration already on the disk.
//!
//! With `hostAgent: lca` (tests/lab/lca.rs): the same factory phase (then the site phase) and
//! one-shot, run by lifecycle-agent's own lca-cli (release-4.18 and main) from the seed image.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

// Every tier builds with all of ibi's features (tests/run passes --all-features): without `agent`,
// `test-support` or `fault-injection` some tests would silently vanish, so refuse to build instead.
#[cfg(not(all(
    feature = "agent",
    feature = "test-support",
    feature = "fault-injection"
)))]
compile_error!("ibi's test tiers need every feature: run tests/run, or cargo test --all-features");

mod common;
#[cfg(feature = "agent")]
#[path = "lab/lca.rs"]
mod lca;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::deliver::emulator::USER;
use common::deliver::fleet::{DeployRun, example_fleet_base, spawn_deploy};
use common::deliver::free_port;
use common::deliver::host::{ok, test_tls};
use common::kubeapi::{BuiltSite, StandIn};
use common::lab::{self, Disk, Lab, SeedEnv};
use serde_json::Value;

const TEST: &str = "lab";
/// Boot to "configuration arrived" under TCG is about a minute; bounded well above.
const GUEST_WAIT: Duration = Duration::from_secs(600);
const SITE: &str = "a17";
const ARRIVED: &str = "IBI-LAB: configuration arrived";

/// Stand-in for lifecycle-agent's `installation-configuration.service` (the seed's unit running
/// `lca-cli post-pivot`): waits for the configuration as post-pivot does, then records what ibi's
/// unit did and powers the VM off.
const POST_PIVOT_UNIT: &str = "[Unit]
Description=Stand-in for lifecycle-agent's post-pivot (ibi lab)
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/lab-post-pivot
[Install]
WantedBy=multi-user.target
";

/// Also the lab seed's `lca-cli` (the seed's `installation-configuration.service` runs `lca-cli
/// post-pivot`; its `lca-init-monitor.service` runs `lca-cli init-monitor`, which does nothing here).
const POST_PIVOT_SCRIPT: &str = r#"#!/bin/sh
# Waits for the configuration folder as post-pivot does (bounded here), then records.
[ $# -eq 0 ] || [ "$1" = post-pivot ] || exit 0
i=0
while [ ! -e /opt/openshift/cluster-configuration/manifest.json ] && [ $i -lt 900 ]; do
    sleep 1; i=$((i+1))
done
mkdir -p /var/lib/lab
{
    echo "waited=$i"
    echo "cmdline=$(cat /proc/cmdline)"
    systemctl show ibi-fetch-config.service -p NRestarts -p Result -p ExecMainStatus \
        -p ExecMainExitTimestampMonotonic -p ActiveState
    systemctl show installation-configuration.service -p ExecMainStartTimestampMonotonic
} > /var/lib/lab/result
sync
echo "IBI-LAB: configuration arrived" > /dev/ttyS0
systemctl --no-block poweroff
"#;

/// ibi on the disk as `ibi agent install` places it on an installed host (binary in
/// /usr/local/bin, the unit enabled for multi-user.target and for post-pivot's unit), and the
/// post-pivot stand-in enabled.
fn install_host_side(root: &Path) {
    let put = |rel: &str, bytes: &[u8], mode: u32| {
        use std::os::unix::fs::PermissionsExt;
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    put(
        "usr/local/bin/ibi",
        &std::fs::read(env!("CARGO_BIN_EXE_ibi")).unwrap(),
        0o755,
    );
    put(
        "etc/systemd/system/ibi-fetch-config.service",
        include_bytes!("../units/ibi-fetch-config.service"),
        0o644,
    );
    put(
        "etc/systemd/system/installation-configuration.service",
        POST_PIVOT_UNIT.as_bytes(),
        0o644,
    );
    put(
        "usr/local/sbin/lab-post-pivot",
        POST_PIVOT_SCRIPT.as_bytes(),
        0o755,
    );
    for (wants, unit) in [
        ("multi-user.target.wants", "ibi-fetch-config.service"),
        (
            "installation-configuration.service.wants",
            "ibi-fetch-config.service",
        ),
        (
            "multi-user.target.wants",
            "installation-configuration.service",
        ),
    ] {
        let dir = root.join("etc/systemd/system").join(wants);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(Path::new("/etc/systemd/system").join(unit), dir.join(unit))
            .unwrap();
    }
}

/// Every regular file under `dir`, by relative path, with its bytes.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                todo.push(p);
            } else if t.is_file() {
                out.insert(
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

/// The ISO's files, extracted by xorriso (a reader other than ibi's).
fn iso_tree(iso: &Path, into: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    lab::run(
        Command::new("xorriso")
            .args(["-osirrox", "on", "-indev"])
            .arg(iso)
            .args(["-extract", "/"])
            .arg(into),
        Duration::from_secs(60),
    )
    .expect("xorriso -extract");
    tree(into)
}

/// Journal entries of the guest (its journal folder `dir`, read from its disk) for `unit`, as JSON
/// objects.
fn journal(dir: &Path, unit: &str) -> Vec<Value> {
    let out = lab::run(
        Command::new("journalctl")
            .arg("-D")
            .arg(dir)
            .args(["-o", "json", "--no-pager"])
            .arg(format!("UNIT={unit}")),
        Duration::from_secs(60),
    )
    .unwrap_or_default();
    out.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `ibi agent fetch-config` is in the `agent` build only.
/// `ibi boot` of the lab's VM through its emulator (`IBI_ISO_URL` = `iso` when given); what it
/// printed, after checking it succeeded.
fn ibi_boot(
    emu: &common::deliver::emulator::Emulator,
    vm: &lab::Domain,
    extra: &[&str],
    iso: Option<&str>,
) -> String {
    let mut args = vec![
        "boot",
        "--bmc",
        &emu.url,
        "--system",
        &vm.uuid,
        "--bmc-user",
        USER,
        "--bmc-password-file",
        emu.password_file.to_str().unwrap(),
        "--bmc-ca",
        emu.cert.to_str().unwrap(),
        "--timeout",
        "300",
    ];
    args.extend_from_slice(extra);
    let envs: Vec<(&str, &str)> = iso.map(|u| ("IBI_ISO_URL", u)).into_iter().collect();
    let out = common::deliver::ibi_env(&args, &envs);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}\nemulator:\n{}", emu.log());
    text
}

#[cfg(not(feature = "agent"))]
#[test]
fn a_site_configuration_arrives_through_a_real_kernel_udev_and_systemd() {
    common::missing(TEST, "the host's ibi needs the agent feature");
}

#[cfg(feature = "agent")]
#[test]
fn a_site_configuration_arrives_through_a_real_kernel_udev_and_systemd() {
    let _one = lab::lock();
    let Some(mut lab) = Lab::start(TEST) else {
        return;
    };
    let started = Instant::now();
    let base_disk = lab::guest_disk().expect("the guest disk");
    let disk = Disk::copy_of(&base_disk, &lab.dir.path().join("host.raw"));
    disk.with_root(&lab.dir.path().join("mnt"), false, install_host_side);
    let vm = lab.define("site", &disk.path);
    let emu_url = lab.start_emulator(&vm).url.clone();
    eprintln!(
        "lab: up in {:.1?} ({emu_url}, VM {})",
        started.elapsed(),
        vm.name
    );
    let phase = run_site_phase(&lab, &vm);
    eprintln!("lab: site phase done in {:.1?}", started.elapsed());
    disk.with_root(&lab.dir.path().join("mnt"), true, |root| {
        check_arrival(
            &phase.iso(),
            &phase.work.path().join("iso"),
            &root.join("opt/openshift"),
            &root.join("var"),
        );
    });
}

/// What a site phase leaves for the checks: its base folder (the site's ISO) and deploy's output.
#[cfg(feature = "agent")]
struct SitePhase {
    base: tempfile::TempDir,
    work: tempfile::TempDir,
}

#[cfg(feature = "agent")]
impl SitePhase {
    fn iso(&self) -> PathBuf {
        self.base
            .path()
            .join("sites")
            .join(SITE)
            .join("imagebasedconfig.iso")
    }
}

/// The example fleet, its first site's BMC the lab's emulator of `vm`, built with `create
/// config-image --sites` (BASE/sites/a17/); BASE and its inventory.
#[cfg(feature = "agent")]
fn built_example_fleet(lab: &Lab, vm: &lab::Domain) -> (tempfile::TempDir, PathBuf) {
    let emu = lab.emulator.as_ref().unwrap();
    let (base, names) = example_fleet_base(&[(emu, Some(&vm.uuid))]);
    assert_eq!(names, [SITE], "the example fleet's first site");
    common::deliver::fleet::build_sites(base.path());
    let inventory = base.path().join("sites.yaml");
    (base, inventory)
}

/// `ibi deploy --phase site` of the example fleet's first site, whose BMC is the lab's emulator of
/// `vm`: the site's configuration ISO built, inserted through the emulator, the VM booted from its
/// disk. The cluster's API is a stand-in (tests/common/kubeapi.rs) turned ready when the guest says
/// the configuration arrived, so deploy's watch and eject run for real; deploy must end with the
/// site done, the CD ejected and the VM off.
#[cfg(feature = "agent")]
fn run_site_phase(lab: &Lab, vm: &lab::Domain) -> SitePhase {
    let emu = lab.emulator.as_ref().unwrap();
    let (base, inventory) = built_example_fleet(lab, vm);
    let b = base.path();
    let site = BuiltSite::read(&b.join("sites").join(SITE));
    let api = StandIn::start(&site.cluster_tls(), site.seed_state());
    site.point_at(&api.url());

    let work = tempfile::tempdir().unwrap();
    let tls = test_tls(work.path());
    let port = free_port();
    let mut deploy = spawn_deploy(
        &DeployRun {
            base: b,
            inventory: &inventory,
            phase: "site",
            port,
            tls: &tls,
            out: work.path(),
        },
        "run",
        &[
            "--parallel",
            "1",
            "--poll",
            "2",
            "--watch-timeout",
            "900",
            "--bmc-timeout",
            "300",
        ],
    );
    let booted = Instant::now();
    let arrived = lab::wait_serial(vm, ARRIVED, GUEST_WAIT);
    let read =
        |s: &str| std::fs::read_to_string(work.path().join(format!("run.{s}"))).unwrap_or_default();
    if !arrived {
        common::deliver::stop_child(&mut deploy);
        panic!(
            "no '{ARRIVED}' within {GUEST_WAIT:?}; VM {}; serial:\n{}\ndeploy:\n{}\nemulator:\n{}",
            lab.state(vm),
            lab::serial(vm),
            read("stderr"),
            emu.log()
        );
    }
    eprintln!(
        "lab: configuration arrived {:.1?} after deploy started",
        booted.elapsed()
    );
    api.set(|c| *c = site.ready());
    let status = common::deliver::fleet::wait_exit(&mut deploy);
    let (stdout, stderr) = (read("stdout"), read("stderr"));
    eprintln!("deploy stdout:\n{stdout}\ndeploy stderr:\n{stderr}");
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        lab.wait_off(vm, Duration::from_secs(180)),
        "the guest did not power off: {}",
        lab.state(vm)
    );
    // deploy ejected: sushy's eject removes the CD drive from the definition.
    let definition = lab.definition(vm);
    assert!(!definition.contains("device='cdrom'"), "{definition}");
    // The ISO went through the emulator into the storage pool from deploy's server.
    assert!(stderr.contains("site a17: done"), "{stderr}");
    SitePhase { base, work }
}

/// `opt` (the guest's /opt/openshift, read from its disk) holds the ISO's tree byte for byte;
/// returns the post-pivot stand-in's record from `var` (its /var).
#[cfg(feature = "agent")]
fn check_tree(iso: &Path, scratch: &Path, opt: &Path, var: &Path) -> String {
    let want = iso_tree(iso, scratch);
    assert!(
        want.contains_key(Path::new("cluster-configuration/manifest.json")),
        "{:?}",
        want.keys()
    );
    let got = tree(opt);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "the copied tree's files"
    );
    for (path, bytes) in &want {
        assert!(
            got[path] == *bytes,
            "{} differs from the ISO's",
            path.display()
        );
    }
    let result = std::fs::read_to_string(var.join("lib/lab/result")).unwrap();
    eprintln!("guest's record:\n{result}");
    result
}

/// `key=value` of the post-pivot stand-in's record.
#[cfg(feature = "agent")]
fn record_field(record: &str, key: &str) -> String {
    record
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("{key} not in {record}"))
        .to_string()
}

/// The live system of a one-shot install applied the site's static network before the install
/// (`network-config.service`, which the site's medium enables): the lab's nmstatectl stand-in said
/// the SHA-256 of the state it was given, which is the site's nmstate from the manifest of its
/// configuration ISO (extracted under `iso_tree`) with the newline the installation ISO adds.
#[cfg(feature = "agent")]
fn assert_site_network_applied(serial: &str, iso_tree: &Path) {
    let manifest: Value = serde_json::from_slice(
        &std::fs::read(iso_tree.join("cluster-configuration/manifest.json")).unwrap(),
    )
    .unwrap();
    let nmstate = manifest[ibi::contract::config_iso::MANIFEST_NMSTATE_KEY]
        .as_str()
        .expect("the example fleet's site a17 has a static network");
    let want = format!(
        "IBI-LAB: nmstatectl apply /var/tmp/network-config.yaml sha256={}",
        common::deliver::sha256(format!("{nmstate}\n").as_bytes())
    );
    let said: Vec<&str> = serial
        .lines()
        .filter(|l| l.contains("IBI-LAB: nmstatectl"))
        .collect();
    assert_eq!(said, [want.as_str()], "the site's network, applied once");
}

/// The guest's side of a site phase, read from its disk after power-off: `opt` (its
/// /opt/openshift) holds the ISO's tree byte for byte; its record in `var` (its /var) says ibi's
/// unit ran once, at boot, successfully, and ended before post-pivot's stand-in started. Returns
/// the record.
#[cfg(feature = "agent")]
fn check_arrival(iso: &Path, scratch: &Path, opt: &Path, var: &Path) -> String {
    let result = check_tree(iso, scratch, opt, var);
    let field = |k: &str| record_field(&result, k);
    assert_eq!(field("NRestarts"), "0", "ibi-fetch-config ran once");
    assert_eq!(field("Result"), "success");
    assert_eq!(field("ExecMainStatus"), "0");
    let fetched: u64 = field("ExecMainExitTimestampMonotonic").parse().unwrap();
    let post_pivot: u64 = field("ExecMainStartTimestampMonotonic").parse().unwrap();
    assert!(
        fetched > 0 && fetched <= post_pivot,
        "post-pivot started ({post_pivot} µs) before ibi's copy ended ({fetched} µs)"
    );
    // At boot, once: one start job for the unit in this boot's journal.
    let entries = journal(&var.join("log/journal"), "ibi-fetch-config.service");
    let starts: Vec<&Value> = entries
        .iter()
        .filter(|e| e["JOB_TYPE"] == "start" && e["JOB_RESULT"] == "done")
        .collect();
    assert_eq!(starts.len(), 1, "{entries:#?}");
    let boots: std::collections::HashSet<&Value> = entries.iter().map(|e| &e["_BOOT_ID"]).collect();
    assert_eq!(boots.len(), 1, "one boot");
    result
}

/// `ibi boot --boot cd` against the libvirt driver, which keeps every boot override continuous
/// (`Once` is ignored): ibi reads the override back and says so, since the host then boots the CD
/// at every power-on until the media is ejected; `ibi boot --eject` takes it out (the driver
/// removes the CD drive from the domain). The image is random bytes: nothing boots from it, the
/// VM sits in its firmware until the lab destroys it.
#[test]
fn ibi_boot_says_when_the_bmc_keeps_the_cd_override_continuous() {
    let _one = lab::lock();
    let Some(mut lab) = Lab::start(TEST) else {
        return;
    };
    let base_disk = lab::guest_disk().expect("the guest disk");
    let disk = Disk::copy_of(&base_disk, &lab.dir.path().join("boot.raw"));
    let vm = lab.define("boot", &disk.path);
    lab.start_emulator(&vm);
    let emu = lab.emulator.as_ref().unwrap();
    let images = tempfile::tempdir().unwrap();
    common::deliver::write_random(&images.path().join("rhcos-ibi.iso"), 1 << 20, 7);
    let serve = common::deliver::Served::start(images.path(), &[]);
    let url = serve.url("rhcos-ibi.iso");
    let boot = |extra: &[&str]| {
        let iso = if extra.contains(&"--eject") {
            None
        } else {
            Some(url.as_str())
        };
        ibi_boot(emu, &vm, extra, iso)
    };
    let said = boot(&["--boot", "cd"]);
    eprintln!("ibi boot --boot cd:\n{said}");
    assert!(
        said.contains(ibi::deliver::boot::CD_CONTINUOUS),
        "ibi boot did not say the override stays continuous:\n{said}"
    );
    let sys = emu
        .get(&format!("/redfish/v1/Systems/{}", vm.uuid))
        .unwrap();
    assert_eq!(sys["Boot"]["BootSourceOverrideTarget"], "Cd", "{sys}");
    assert_eq!(
        sys["Boot"]["BootSourceOverrideEnabled"], "Continuous",
        "{sys}"
    );
    assert_eq!(sys["PowerState"], "On", "{sys}");
    assert!(lab.definition(&vm).contains("device='cdrom'"));

    let said = boot(&["--eject"]);
    eprintln!("ibi boot --eject:\n{said}");
    let definition = lab.definition(&vm);
    assert!(!definition.contains("device='cdrom'"), "{definition}");
}

/// The lab's live ISO (tests/lab/live-iso.sh: Debian's kernel, a dracut initramfs with Debian's own
/// Ignition stage, a squashfs live root) stands in for the RHCOS live ISO: it has the CoreOS live
/// layout, so `ibi create image --base-iso` takes it as a base; with a config embedded by
/// coreos-installer, it boots from the emulator's virtual CD (`ibi boot --boot cd`, UEFI) and
/// Ignition applies the config (a file the live system then reports on the serial console).
#[test]
fn a_live_iso_of_the_coreos_layout_boots_and_ignition_applies_its_embedded_config() {
    let _one = lab::lock();
    let Some(mut lab) = Lab::start(TEST) else {
        return;
    };
    let live = lab::live_iso().expect("the live ISO");

    // ibi takes it as a base ISO.
    let base = tempfile::tempdir().unwrap();
    common::deliver::example_install(base.path());
    ok(
        &common::deliver::ibi_env(
            &[
                "create",
                "image",
                "--dir",
                base.path().to_str().unwrap(),
                "--base-iso",
                live.to_str().unwrap(),
            ],
            &[],
        ),
        "ibi create image --base-iso <the lab's live ISO>",
    );

    // A config embedded by coreos-installer, the ISO served by ibi, booted through the emulator.
    let images = tempfile::tempdir().unwrap();
    let iso = images.path().join("rhcos-ibi.iso");
    std::fs::copy(&live, &iso).unwrap();
    let config = images.path().join("config.ign");
    std::fs::write(
        &config,
        r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/ibi-lab-ignition","mode":420,"contents":{"source":"data:,applied-by-ignition"}}]}}"#,
    )
    .unwrap();
    lab::run(
        Command::new("coreos-installer")
            .args(["iso", "ignition", "embed", "-i"])
            .arg(&config)
            .arg(&iso),
        Duration::from_secs(60),
    )
    .expect("coreos-installer iso ignition embed");
    std::fs::remove_file(&config).unwrap();
    let disk = lab.dir.path().join("blank.raw");
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    // UEFI firmware, as the hosts of an image-based install have: `ibi boot` keeps the mode.
    let vm = lab.define_uefi(
        "live",
        &[lab::VmDisk {
            path: &disk,
            serial: None,
            read_only: false,
        }],
    );
    lab.start_emulator(&vm);
    let emu = lab.emulator.as_ref().unwrap();
    let serve = common::deliver::Served::start(images.path(), &[]);
    let url = serve.url("rhcos-ibi.iso");
    ibi_boot(emu, &vm, &["--boot", "cd"], Some(&url));
    let booted = Instant::now();
    let want = "IBI-LAB: live up; ignition: applied-by-ignition";
    assert!(
        lab::wait_serial(&vm, want, GUEST_WAIT),
        "no '{want}' within {GUEST_WAIT:?}; VM {}; serial:\n{}",
        lab.state(&vm),
        lab::serial(&vm)
    );
    eprintln!(
        "lab: live ISO up, Ignition applied, {:.1?} after the boot",
        booted.elapsed()
    );
    assert_uefi_boot(&lab::serial(&vm));
}

/// The VM's firmware was OVMF (UEFI): its boot manager names what it started on the serial console.
fn assert_uefi_boot(serial: &str) {
    assert!(
        serial.contains("BdsDxe: starting"),
        "not booted by UEFI firmware:\n{serial}"
    );
}

/// The host-agent image of `hostAgent: ibi` as the `Containerfile` makes it: one layer holding
/// `/usr/local/bin/ibi` (this build's, debug sections stripped to keep the VM's tmpfs small), as
/// an OCI layout tagged `tag`.
#[cfg(feature = "agent")]
fn host_agent_layout(dir: &Path, tag: &str, binary: &Path) {
    let mut tar = tar::Builder::new(Vec::new());
    for d in ["usr/", "usr/local/", "usr/local/bin/"] {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        h.set_cksum();
        tar.append_data(&mut h, d, std::io::empty()).unwrap();
    }
    let bytes = std::fs::read(binary).unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_size(bytes.len() as u64);
    h.set_mode(0o755);
    h.set_cksum();
    tar.append_data(&mut h, "usr/local/bin/ibi", bytes.as_slice())
        .unwrap();
    common::registry::one_layer_layout(dir, tag, &tar.into_inner().unwrap());
}

/// The installation ISO's config for the lab: the seed from an OCI layout on the VM's second
/// disk (a path relative to `/`, where the agent runs, and to the directory `ibi create image`
/// runs in), ibi fetched from the lab's registry on the VM's loopback, the VM's virtio disk by
/// its serial, no precache (no release registry here), power off at the end.
#[cfg(feature = "agent")]
const FACTORY_CONFIG: &str = r#"apiVersion: v1beta1
kind: ImageBasedInstallationConfig
metadata:
  name: ibi-lab-factory
seedImage: oci:srv/ibi-lab/seed:4.16.0
seedVersion: 4.16.0
installationDisk: /dev/disk/by-id/virtio-ibi-lab-host
pullSecret: '{"auths":{"registry.edge.example.com:5000":{"auth":"ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk"}}}'
sshKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBtzJA7zEa76v2rl4hgeLwFAXBzQeW4q3kbmvgJNYl70 edge-ops@example.com
extraPartitionStart: -1G
extraPartitionLabel: var-lib-containers
extraPartitionNumber: 5
coreosInstallerArgs: ["--append-karg", "ibi.test=1"]
hostAgent: ibi
hostAgentImage: localhost:5000/ibi/agent:lab
precacheDisabled: true
shutdown: true
"#;

/// What it says once multi-user.target is reached, which waits for ibi's oneshot unit (with how that
/// ended: a dependency that failed is said only here).
#[cfg(feature = "agent")]
const LIVE_UP: &str = "IBI-LAB: live up;";

#[cfg(not(feature = "agent"))]
#[test]
fn the_factory_phase_installs_a_vm_from_an_installation_iso_ibi_built() {
    common::missing(TEST, "the installation ISO's ibi needs the agent feature");
}

/// Factory phase on a VM. The lab's live ISO stands in for the RHCOS live ISO; `ibi create image`
/// makes the installation ISO from it (`hostAgent: ibi`, `shutdown: true`); `ibi deploy --phase
/// factory` serves it, and through the emulator the VM boots it: Ignition applies ibi's config,
/// `ibi-agent-install.service` fetches ibi with podman from the lab's registry (on the VM's
/// loopback, standing in for the site's; its storage and the seed's OCI layout are on a second,
/// read-only virtual disk) and runs `ibi agent install` onto the VM's virtio disk; the VM powers
/// off, deploy sees it, ejects and records the host done. The disk is then read on this side with
/// the loop-device e2e test's checks (`common::agent::check_disk`), and must read exactly as the
/// disk of the same install run here on a loop device does. Then the site phase runs on that disk:
/// the VM boots it (UEFI, the metal image's boot loader following ostree's entry into the seed's
/// deployment) and the site's configuration arrives as in the site phase test above. Stand-ins:
/// RHCOS (the live root and the seed's tree are Debian, `tests/lab/seed-tree.sh`; coreos-installer
/// writes the fake metal image of `make-metal-image.sh` with a GRUB script for a boot loader;
/// nmstatectl says what state it was given and configures nothing, as the VM has no NIC; there
/// is no SELinux) and the seed's lca-cli (the
/// post-pivot stand-in).
/// The inputs of an install in the lab, shared by the factory and one-shot tests.
#[cfg(feature = "agent")]
struct InstallRig {
    /// `hostAgent: lca` with this lca-cli; `None`: `hostAgent: ibi`.
    lca: Option<&'static lca::LcaRef>,
    /// With `lca`: the registry at 127.0.0.1:5000 holding the seed and the precache images, alive
    /// for `create image`'s seed check and the disk check (the VM's serves a copy of its storage).
    registry: Option<common::registry::TestRegistry>,
    /// With `lca`: the precache images' OCI layout (`make-real-seed.sh`'s PRECACHE_DIR).
    precache: Option<PathBuf>,
    w: PathBuf,
    /// The working directory of `ibi create image` (the seed path is relative to it).
    stage: PathBuf,
    /// `srv/ibi-lab` on the seed disk: the seed, the metal image, the registry's storage.
    media: PathBuf,
    seed: PathBuf,
    binary: PathBuf,
    /// BASE: image-based-installation-config.yaml, later rhcos-ibi.iso and sites.yaml.
    base: PathBuf,
    live: PathBuf,
    host_disk: PathBuf,
    vm: lab::Domain,
}

/// The seed disk (/srv/ibi-lab in the VM): a seed whose deployment boots (a Debian tree with an
/// initramfs that pivots into it) and whose lca-cli is the lab's post-pivot stand-in, a metal image
/// whose EFI-SYSTEM has a boot loader that follows ostree's entry (so the disk boots after the
/// install), and the registry's storage with ibi's host-agent image; BASE with the lab's
/// installation config; a UEFI VM with a blank host disk and the seed disk, its emulator started.
///
/// With `lca` (`hostAgent: lca`, [`lca`]): the seed of that line's version carries lifecycle-agent's
/// lca-cli at its root (the post-pivot stand-in of [`lca::POST_PIVOT_SCRIPT`] in its /var), its
/// precache images name the VM's registry, and the registry holds the seed and those images
/// instead of ibi's host-agent image.
#[cfg(feature = "agent")]
fn install_rig(lab: &mut Lab, name: &str, lca: Option<&'static lca::LcaRef>) -> InstallRig {
    let live = lab::live_iso().expect("the live ISO");
    let w = lab.dir.path().to_path_buf();
    let limit = Duration::from_secs(300);
    let stage = w.join("stage");
    let media = stage.join("srv/ibi-lab");
    std::fs::create_dir_all(&media).unwrap();
    let seed = media.join("seed");
    let lca_cli = w.join("lca-cli");
    let version = lca.map_or("4.16.0", |l| l.seed_version);
    let seed_tree = lab::seed_tree().expect("the seed tree");
    let mut env = vec![
        ("SEED_TREE_TAR", SeedEnv::File(&seed_tree)),
        ("LCA_CLI", SeedEnv::File(&lca_cli)),
    ];
    let lca_root = lca.map(|l| lca::binary(l, &w));
    let precache = lca.map(|_| w.join("precache"));
    std::fs::write(
        &lca_cli,
        lca.map_or(POST_PIVOT_SCRIPT, |_| lca::POST_PIVOT_SCRIPT),
    )
    .unwrap();
    if let Some(root) = &lca_root {
        env.extend([
            ("LCA_CLI_ROOT", SeedEnv::File(root)),
            ("FAKE_REGISTRY", SeedEnv::Text(lca::REGISTRY)),
            ("ETC_DELETIONS", SeedEnv::Text(lca::ETC_DELETIONS)),
        ]);
    }
    lab::real_seed(&seed, version, precache.as_deref(), &env).expect("make-real-seed.sh");
    lab::run(
        Command::new(common::agent::fixture("make-metal-image.sh"))
            .arg(media.join("metal.img"))
            .env("GRUB_EFI", "1"),
        limit,
    )
    .expect("make-metal-image.sh");
    let binary = w.join("ibi-stripped");
    lab::run(
        Command::new("objcopy")
            .arg("--strip-debug")
            .arg(env!("CARGO_BIN_EXE_ibi"))
            .arg(&binary),
        limit,
    )
    .expect("objcopy --strip-debug");
    let reg = match (lca, &precache) {
        (Some(_), Some(precache)) => {
            let reg = common::registry::TestRegistry::start_at(TEST, lca::REGISTRY_HERE)
                .expect("docker-registry");
            reg.push(&seed, version, "ibi/seed");
            common::agent::push_precache(&reg, precache);
            reg
        }
        _ => {
            let agent_image = w.join("host-agent");
            host_agent_layout(&agent_image, "lab", &binary);
            let reg = common::registry::TestRegistry::start(TEST).expect("docker-registry");
            reg.push(&agent_image, "lab", "ibi/agent");
            reg
        }
    };
    lab::run(
        Command::new("cp")
            .arg("-a")
            .arg(reg.storage())
            .arg(media.join("registry")),
        limit,
    )
    .expect("copying the registry's storage");
    let registry = lca.map(|_| reg);
    let seed_disk = w.join("seed.raw");
    lab::run(
        Command::new("mkfs.ext4")
            .args(["-q", "-L", "IBILABSEED", "-d"])
            .arg(&media)
            .arg(&seed_disk)
            .arg("2G"),
        limit,
    )
    .expect("mkfs.ext4 -d");
    let base = w.join("base");
    std::fs::create_dir_all(&base).unwrap();
    let config = lca.map_or_else(|| FACTORY_CONFIG.to_string(), lca::config);
    std::fs::write(base.join("image-based-installation-config.yaml"), config).unwrap();
    let host_disk = w.join("host.raw");
    std::fs::File::create(&host_disk)
        .unwrap()
        .set_len(common::agent::DISK_SIZE)
        .unwrap();
    let vm = lab.define_uefi(
        name,
        &[
            common::lab::VmDisk {
                path: &host_disk,
                serial: Some("ibi-lab-host"),
                read_only: false,
            },
            common::lab::VmDisk {
                path: &seed_disk,
                serial: Some("ibi-lab-seed"),
                read_only: true,
            },
        ],
    );
    lab.start_emulator(&vm);
    InstallRig {
        lca,
        registry,
        precache,
        w,
        stage,
        media,
        seed,
        binary,
        base,
        live,
        host_disk,
        vm,
    }
}

#[cfg(feature = "agent")]
impl InstallRig {
    /// The live system's install unit, without `.service`.
    fn install_unit(&self) -> &'static str {
        match self.lca {
            Some(_) => "install-rhcos-and-restore-seed",
            None => "ibi-agent-install",
        }
    }

    /// `ibi create image --dir BASE --base-iso <the lab's live ISO>` and `extra` arguments.
    fn create_image(&self, extra: &[&Path]) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibi"));
        cmd.args(["create", "image", "--dir"])
            .arg(&self.base)
            .arg("--base-iso")
            .arg(&self.live);
        if self.lca.is_some() {
            // The seed is checked where the host pulls it from: this side's registry at the address
            // the VM's has (plain HTTP, as there).
            cmd.args(["--insecure-registry", lca::REGISTRY]);
        }
        for a in extra {
            cmd.arg(a);
        }
        let built = cmd
            .current_dir(&self.stage)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        ok(&built, "ibi create image --base-iso <the lab's live ISO>");
    }

    /// `ibi deploy --phase factory` of BASE's installation ISO to the rig's VM (site `f1`): the VM
    /// boots it, installs, powers off; deploy ends with the site done and the CD ejected. Returns the
    /// serial console.
    fn deploy_factory(&self, lab: &Lab) -> String {
        self.try_deploy_factory(lab)
            .unwrap_or_else(|serial| panic!("the install failed:\n{serial}"))
    }

    /// [`deploy_factory`], but an install that lifecycle-agent's 4.x partition race
    /// ([`lca::lost_partition_race`]) failed is `Err(its serial console)` instead of a panic.
    ///
    /// [`deploy_factory`]: InstallRig::deploy_factory
    fn try_deploy_factory(&self, lab: &Lab) -> Result<String, String> {
        let emu = lab.emulator.as_ref().unwrap();
        let inventory = self.base.join("sites.yaml");
        std::fs::write(
            &inventory,
            format!(
                "sites:\n{}",
                common::deliver::fleet::inventory_entry("f1", emu, Some(&self.vm.uuid))
            ),
        )
        .unwrap();
        self.deploy(lab, "factory", &inventory, "f1", None)
    }

    /// The example fleet's site a17 built and moved beside BASE's installation ISO (BASE holds
    /// both), the cluster's API stand-in for it, and `ibi deploy --phase oneshot` of it ([`deploy`]);
    /// returns the serial console, a17's folder and the stand-in. `started`: when the test began.
    ///
    /// [`deploy`]: InstallRig::deploy
    fn deploy_one_shot(&self, lab: &Lab, started: Instant) -> (String, PathBuf, StandIn) {
        let (fleet, inventory) = built_example_fleet(lab, &self.vm);
        std::fs::rename(fleet.path().join("sites"), self.base.join("sites")).unwrap();
        let site = self.base.join("sites").join(SITE);
        let built = BuiltSite::read(&site);
        let api = StandIn::start(&built.cluster_tls(), built.seed_state());
        built.point_at(&api.url());
        eprintln!("lab: one-shot inputs ready in {:.1?}", started.elapsed());
        let serial = self
            .deploy(lab, "oneshot", &inventory, SITE, Some((&api, &built)))
            .unwrap_or_else(|serial| panic!("the install failed:\n{serial}"));
        (serial, site, api)
    }

    /// `ibi deploy --phase PHASE` of BASE to the rig's VM, the inventory's only site `site`: ends
    /// with the site done and no CD drive left. With `api` (one-shot), the cluster's stand-in is
    /// turned ready once the guest says its configuration arrived. Returns the serial console;
    /// `Err(the serial console)` when lifecycle-agent's 4.x partition race failed the install
    /// ([`lca::lost_partition_race`]), any other failure panics.
    fn deploy(
        &self,
        lab: &Lab,
        phase: &str,
        inventory: &Path,
        site: &str,
        api: Option<(&StandIn, &BuiltSite)>,
    ) -> Result<String, String> {
        let emu = lab.emulator.as_ref().unwrap();
        let work = tempfile::tempdir().unwrap();
        let tls = test_tls(work.path());
        let mut deploy = spawn_deploy(
            &DeployRun {
                base: &self.base,
                inventory,
                phase,
                port: free_port(),
                tls: &tls,
                out: work.path(),
            },
            "run",
            &[
                "--parallel",
                "1",
                "--poll",
                "2",
                "--bmc-timeout",
                "300",
                "--report-timeout",
                "1800",
                "--watch-timeout",
                "900",
            ],
        );
        let mut ready = api.is_none();
        let booted = Instant::now();
        let read = |s: &str| {
            std::fs::read_to_string(work.path().join(format!("run.{s}"))).unwrap_or_default()
        };
        let deadline = Instant::now() + Duration::from_secs(1800);
        let vm = &self.vm;
        let status = loop {
            if let Some(status) = deploy.try_wait().unwrap() {
                break status;
            }
            let serial = lab::serial(vm);
            if !ready && serial.contains(ARRIVED) {
                let (api, built) = api.unwrap();
                eprintln!(
                    "lab: configuration arrived {:.1?} after deploy started",
                    booted.elapsed()
                );
                api.set(|c| *c = built.ready());
                ready = true;
            }
            // The agent's own `shutdown` stops its unit (`signal`): only an exit status or a failed
            // dependency is a failure here; whether the install finished, the disk says.
            let unit = self.install_unit();
            let (ended, up) = (
                format!("IBI-LAB: {unit}.service ended:"),
                format!("{unit}: active/success"),
            );
            let failed = serial.lines().any(|l| {
                (l.contains(&ended)
                    && !l.contains("ended: success")
                    && !l.contains("ended: signal"))
                    || (l.contains(LIVE_UP) && !l.contains(&up))
            });
            if failed && self.lca.is_some() && lca::lost_partition_race(&serial) {
                common::deliver::stop_child(&mut deploy);
                return Err(serial);
            }
            if failed || Instant::now() > deadline {
                common::deliver::stop_child(&mut deploy);
                panic!(
                    "the install failed or ran over; VM {}; serial:\n{serial}\ndeploy:\n{}\nemulator:\n{}",
                    lab.state(vm),
                    read("stderr"),
                    emu.log()
                );
            }
            std::thread::sleep(Duration::from_secs(2));
        };
        let (stdout, stderr) = (read("stdout"), read("stderr"));
        let serial = lab::serial(vm);
        eprintln!(
            "lab: {phase} deploy ended {:.1?} after it started\ndeploy stdout:\n{stdout}\ndeploy stderr:\n{stderr}",
            booted.elapsed()
        );
        assert_eq!(status.code(), Some(0), "{stderr}\nserial:\n{serial}");
        assert!(stderr.contains(&format!("site {site}: done")), "{stderr}");
        assert_uefi_boot(&serial);
        assert!(
            lab.wait_off(vm, Duration::from_secs(60)),
            "{}",
            lab.state(vm)
        );
        // deploy ejected: sushy's eject removes the CD drive from the definition.
        let definition = lab.definition(vm);
        assert!(!definition.contains("device='cdrom'"), "{definition}");
        Ok(serial)
    }
}

#[cfg(feature = "agent")]
#[test]
fn the_factory_phase_installs_a_vm_from_an_installation_iso_ibi_built() {
    use common::agent::{Expected, Target, check_disk, metal_image_lock};

    let _one = lab::lock();
    let Some(mut lab) = Lab::start(TEST) else {
        return;
    };
    // The metal image's filesystems have fixed UUIDs: one mounter at a time on this machine.
    let _metal = metal_image_lock();
    let started = Instant::now();
    let rig = install_rig(&mut lab, "factory", None);
    let (w, vm) = (&rig.w, &rig.vm);
    rig.create_image(&[]);
    eprintln!("lab: factory inputs ready in {:.1?}", started.elapsed());
    let serial = rig.deploy_factory(&lab);
    // What the live system said: coreos-installer called once, with the config's arguments, on the
    // device the config names by its serial (the agent resolves the by-id link).
    let calls: Vec<&str> = serial
        .lines()
        .filter(|l| l.starts_with("IBI-LAB: coreos-installer"))
        .collect();
    assert_eq!(
        calls,
        ["IBI-LAB: coreos-installer install /dev/vda --append-karg ibi.test=1"],
        "{serial}"
    );

    // The disk, read here with the loop-device e2e test's checks.
    let seed_files = w.join("seed-files");
    common::registry::extract_layer(&rig.seed, &seed_files);
    let t = Target::adopt(&w.join("check"), &rig.host_disk, "overlay");
    let report = check_disk(
        &Expected {
            seed_files: &seed_files,
            images: &[],
            binary: &rig.binary,
        },
        &t,
    );
    drop(t);
    eprintln!(
        "lab: factory phase done in {:.1?}; the disk:\n{}\n{}\n{}",
        started.elapsed(),
        report.gpt,
        report.blkid.join("\n"),
        report.ostree_status
    );

    // The same install on this side, as the loop-device e2e test runs it (same seed, metal image,
    // disk size, arguments and binary; no shutdown, of course): the two disks read the same.
    let reference = reference_install(
        &w.join("reference"),
        &rig.seed,
        &rig.media.join("metal.img"),
        &rig.binary,
    );
    let want = check_disk(
        &Expected {
            seed_files: &seed_files,
            images: &[],
            binary: &rig.binary,
        },
        &reference,
    );
    assert_eq!(
        report, want,
        "the VM's disk differs from the loop-device install's"
    );
    drop(reference);
    eprintln!("lab: the VM's disk reads as the loop-device install's");

    // The site phase on that disk: the VM boots the seed's deployment from it (ostree's boot entry,
    // the seed's kernel and initramfs), ibi's unit copies the site's configuration, the seed's own
    // installation-configuration.service (lca-cli post-pivot, the lab's stand-in) finds it.
    let site_started = Instant::now();
    let phase = run_site_phase(&lab, vm);
    eprintln!(
        "lab: site phase on the factory's disk done in {:.1?}",
        site_started.elapsed()
    );
    let serial = lab::serial(vm);
    assert_uefi_boot(&serial);
    // GRUB wraps its own lines at 80 columns; the kernel's are whole.
    assert!(
        serial.contains("IBI-LAB: booting")
            && serial.contains("Command line: BOOT_IMAGE=/ostree/rhcos_4.16.0-"),
        "the metal image's boot loader did not boot the seed's deployment:\n{serial}"
    );
    let t = Target::adopt(&w.join("check-site"), &rig.host_disk, "overlay");
    let root_at = w.join("check-site/root");
    let root = common::agent::Mounted::new(&t, "root", &root_at, Some("ro"));
    let var = root_at.join("ostree/deploy/rhcos_4.16.0/var");
    let record = check_arrival(
        &phase.iso(),
        &phase.work.path().join("iso"),
        &var.join("opt/openshift"),
        &var,
    );
    // It booted the deployment the agent made, through its boot entry: the entry's options (the
    // seed's kernel arguments and ostree's) are the kernel's.
    let cmdline = record
        .lines()
        .find_map(|l| l.strip_prefix("cmdline="))
        .unwrap_or_default();
    for karg in report.bls_options[0].split(' ') {
        assert!(
            cmdline.split(' ').any(|a| a == karg),
            "{karg} of the boot entry not in the guest's /proc/cmdline: {cmdline}"
        );
    }
    drop((root, t));
    eprintln!(
        "lab: factory and site phase done in {:.1?}",
        started.elapsed()
    );
}

#[cfg(not(feature = "agent"))]
#[test]
fn a_one_shot_medium_installs_the_host_and_carries_its_configuration() {
    common::missing(TEST, "the installation ISO's ibi needs the agent feature");
}

/// One-shot site install (issue 25) on a VM, driven by `ibi deploy --phase oneshot`: the example
/// fleet's site a17 is built (`create config-image --sites`) beside the fleet's installation ISO
/// (built once, without `--site`); deploy serves the VM's BMC (the emulator) a17's own variant of
/// it, made as it streams, carrying a17's configuration; the VM boots it once from CD, installs and
/// powers off; deploy ejects and boots the disk with no medium; the seed's post-pivot stand-in finds
/// `/opt/openshift/cluster-configuration` already there, byte for byte the tree of a17's
/// configuration ISO, ibi's fetch unit finds it present and reads no device, and deploy's watch sees
/// the cluster's stand-in turn ready. Stand-ins as in the factory test, and the cluster's API
/// (tests/common/kubeapi.rs), turned ready when the guest says the configuration arrived.
#[cfg(feature = "agent")]
#[test]
fn a_one_shot_medium_installs_the_host_and_carries_its_configuration() {
    use common::agent::{Target, metal_image_lock};

    let _one = lab::lock();
    let Some(mut lab) = Lab::start(TEST) else {
        return;
    };
    let _metal = metal_image_lock();
    let started = Instant::now();
    let rig = install_rig(&mut lab, "oneshot", None);
    let (w, vm) = (&rig.w, &rig.vm);
    rig.create_image(&[]);
    let (serial, site, api) = rig.deploy_one_shot(&lab, started);
    assert!(
        !site.join("rhcos-ibi.iso").exists(),
        "nothing stored per site"
    );
    assert!(api.count("/readyz") > 0, "the cluster was not watched");
    // The disk booted with no medium: deploy's disk boot left no CD drive.
    let definition = lab.definition(vm);
    assert!(!definition.contains("device='cdrom'"), "{definition}");
    assert!(serial.contains(ARRIVED), "{serial}");
    assert!(
        serial.contains("Command line: BOOT_IMAGE=/ostree/rhcos_4.16.0-"),
        "the disk did not boot the seed's deployment:\n{serial}"
    );
    let t = Target::adopt(&w.join("check-oneshot"), &rig.host_disk, "overlay");
    let root_at = w.join("check-oneshot/root");
    let root = common::agent::Mounted::new(&t, "root", &root_at, Some("ro"));
    let var = root_at.join("ostree/deploy/rhcos_4.16.0/var");
    let record = check_tree(
        &site.join("imagebasedconfig.iso"),
        &w.join("iso"),
        &var.join("opt/openshift"),
        &var,
    );
    // The tree was complete before post-pivot's stand-in first looked (it waited 0 s), and ibi's
    // fetch unit never ran: systemd skipped it on its condition (the manifest already there), so
    // nothing was read from any device.
    assert_eq!(record_field(&record, "waited"), "0");
    assert_eq!(record_field(&record, "ExecMainExitTimestampMonotonic"), "0");
    assert_site_network_applied(&serial, &w.join("iso"));
    let said: Vec<String> = journal(&var.join("log/journal"), "ibi-fetch-config.service")
        .iter()
        .filter_map(|e| match &e["MESSAGE"] {
            Value::String(m) => Some(m.clone()),
            // journald's JSON gives a message with control characters as its bytes.
            Value::Array(b) => {
                let bytes: Vec<u8> = b
                    .iter()
                    .filter_map(Value::as_u64)
                    .map(|x| x as u8)
                    .collect();
                Some(String::from_utf8_lossy(&bytes).into_owned())
            }
            _ => None,
        })
        .collect();
    assert!(
        said.iter().any(|m| m.contains("unmet condition")
            && m.contains("!/opt/openshift/cluster-configuration/manifest.json")),
        "ibi-fetch-config was not skipped on the tree already there: {said:#?}"
    );
    drop((root, t));
    eprintln!("lab: one-shot install done in {:.1?}", started.elapsed());
}

#[cfg(not(feature = "agent"))]
#[test]
fn lca_cli_of_release_4_18_installs_a_vm_from_an_installation_iso_ibi_built() {
    common::missing(TEST, "the disk checks read it with ibi's agent code");
}

/// Factory phase with `hostAgent: lca` (issue 35) on a VM: the installation ISO `ibi create image`
/// builds from the lab's live ISO runs the seed's own lca-cli, lifecycle-agent's release-4.18 build
/// (`../shared/fixtures/lca-cli/`), carried at the seed image's root; `ibi deploy --phase factory`
/// boots it once through the emulator, lca-cli runs to its end (its log on the serial console: every
/// command it ran, checked in order) and powers the VM off. The disk is then read here
/// ([`lca::check_disk`]): the extra partition, the new stateroot with the seed's deployment, /etc
/// and /var restored, the precached images. Then the site phase runs on that disk: it boots the
/// seed's deployment, whose post-pivot stand-in (as lifecycle-agent's: an lca-installed host has no
/// ibi unit) copies the configuration ISO's tree. Stand-ins: those of the factory test above for
/// RHCOS (`coreos-installer`, `chcon`, `nmstatectl`, the Debian live root and seed tree) and the
/// seed's post-pivot; every other tool lca-cli calls is Debian's.
#[cfg(feature = "agent")]
#[test]
fn lca_cli_of_release_4_18_installs_a_vm_from_an_installation_iso_ibi_built() {
    use common::agent::metal_image_lock;

    let l = &lca::LCA_4_18;
    let _one = lab::lock();
    let _metal = metal_image_lock();
    // lca-cli 4.x's own race for its extra partition (lca::lost_partition_race: not ibi's, and
    // not what this test is about) may fail an install: then the test starts over once, on a new
    // VM and disk, and says so. Any other failure, or that race twice, fails the test.
    for attempt in 1..=2 {
        let Some(mut lab) = Lab::start(TEST) else {
            return;
        };
        let started = Instant::now();
        let rig = install_rig(&mut lab, "lca-factory", Some(l));
        rig.create_image(&[]);
        eprintln!("lab: lca factory inputs ready in {:.1?}", started.elapsed());
        match rig.try_deploy_factory(&lab) {
            Ok(serial) => return lca_4_18_after_the_factory(&lab, &rig, l, &serial, started),
            Err(_) if attempt == 1 => eprintln!(
                "lab: lca-cli {} lost its own race for partition 5 (sgdisk's table not re-read: \
                 lca::lost_partition_race); once more, on a new VM",
                l.branch
            ),
            Err(serial) => panic!(
                "lca-cli {} lost its race for partition 5 twice; serial:\n{serial}",
                l.branch
            ),
        }
    }
}

/// The rest of the release-4.18 test once its factory phase installed the VM: the disk lca-cli
/// left, then the site phase on it.
#[cfg(feature = "agent")]
fn lca_4_18_after_the_factory(
    lab: &Lab,
    rig: &InstallRig,
    l: &lca::LcaRef,
    serial: &str,
    started: Instant,
) {
    let calls = lca_ran(serial, l, false);
    eprintln!(
        "lab: lca-cli {} made {} calls in the factory phase",
        l.branch,
        calls.len()
    );
    let disk = lca::check_disk(rig, l, &rig.w.join("disk"));
    eprintln!("lab: the disk lca-cli {} left:\n{disk}", l.branch);

    let site_started = Instant::now();
    let phase = run_site_phase(lab, &rig.vm);
    eprintln!(
        "lab: site phase on lca-cli's disk done in {:.1?}",
        site_started.elapsed()
    );
    let serial = lab::serial(&rig.vm);
    assert!(
        serial.contains(&format!(
            "Command line: BOOT_IMAGE=/ostree/rhcos_{}-",
            l.seed_version
        )),
        "the disk did not boot the seed's deployment:\n{serial}"
    );
    let t = common::agent::Target::adopt(&rig.w.join("check-site"), &rig.host_disk, "overlay");
    let root_at = rig.w.join("check-site/root");
    let root = common::agent::Mounted::new(&t, "root", &root_at, Some("ro"));
    let var = root_at.join(format!("ostree/deploy/rhcos_{}/var", l.seed_version));
    let record = check_tree(
        &phase.iso(),
        &phase.work.path().join("iso"),
        &var.join("opt/openshift"),
        &var,
    );
    assert!(
        record_field(&record, "source").starts_with("device /dev/sr"),
        "{record}"
    );
    drop((root, t));
    eprintln!(
        "lab: lca factory and site phase done in {:.1?}",
        started.elapsed()
    );
}

#[cfg(not(feature = "agent"))]
#[test]
fn lca_cli_of_main_installs_a_one_shot_medium_and_runs_post_sh() {
    common::missing(TEST, "the disk checks read it with ibi's agent code");
}

/// One-shot with `hostAgent: lca` (issue 35) on a VM: lifecycle-agent's main build (the 5.0 line)
/// runs from the site's own variant of the installation ISO that `ibi deploy --phase oneshot` serves
/// (the fleet's ISO, built once, with BASE/post.sh, the user's); lca-cli runs ibi's generated
/// `post.sh`, which writes the site's tree into the new stateroot's `var/opt/openshift` and then
/// runs the user's `post.sh`; the VM powers off; deploy boots the disk with no medium, the seed's
/// post-pivot stand-in finds the tree already there (it waited 0 s and read no device), and deploy
/// sees the cluster's stand-in turn ready. The disk is read as in the factory test. Stand-ins as
/// there, and the cluster's API (tests/common/kubeapi.rs).
#[cfg(feature = "agent")]
#[test]
fn lca_cli_of_main_installs_a_one_shot_medium_and_runs_post_sh() {
    use common::agent::metal_image_lock;

    let l = &lca::LCA_MAIN;
    let _one = lab::lock();
    let Some(mut lab) = Lab::start(TEST) else {
        return;
    };
    let _metal = metal_image_lock();
    let started = Instant::now();
    let rig = install_rig(&mut lab, "lca-oneshot", Some(l));
    std::fs::write(rig.base.join("post.sh"), lca::user_post_sh(l)).unwrap();
    rig.create_image(&[]);
    let (serial, site, api) = rig.deploy_one_shot(&lab, started);
    assert!(api.count("/readyz") > 0, "the cluster was not watched");
    let calls = lca_ran(&serial, l, true);
    eprintln!(
        "lab: lca-cli {} made {} calls in the one-shot install",
        l.branch,
        calls.len()
    );
    // lca-cli keeps what post.sh prints to itself (it logs a command's output only when it fails):
    // ibi's post.sh is seen by what it left on the disk, the user's also by its line on the console.
    assert!(
        serial.contains("IBI-LAB: the user's post.sh ran in /"),
        "the user's post.sh did not run:\n{serial}"
    );
    assert!(
        serial.contains("Command line: BOOT_IMAGE=/ostree/rhcos_5.0.0-"),
        "the disk did not boot the seed's deployment:\n{serial}"
    );
    let disk = lca::check_disk(&rig, l, &rig.w.join("disk"));
    eprintln!("lab: the disk lca-cli {} left:\n{disk}", l.branch);
    let t = common::agent::Target::adopt(&rig.w.join("check-oneshot"), &rig.host_disk, "overlay");
    let root_at = rig.w.join("check-oneshot/root");
    let root = common::agent::Mounted::new(&t, "root", &root_at, Some("ro"));
    let var = root_at.join("ostree/deploy/rhcos_5.0.0/var");
    let record = check_tree(
        &site.join("imagebasedconfig.iso"),
        &rig.w.join("iso"),
        &var.join("opt/openshift"),
        &var,
    );
    // The tree was there before post-pivot's stand-in first looked, from no device.
    assert_eq!(record_field(&record, "waited"), "0");
    assert_eq!(record_field(&record, "source"), "folder");
    assert_site_network_applied(&serial, &rig.w.join("iso"));
    // The user's post.sh ran after ibi's had written the tree.
    let user = std::fs::read_to_string(var.join("lib/ibi-lab-user-post")).unwrap();
    assert_eq!(
        user.trim(),
        "/mnt/ostree/deploy/rhcos_5.0.0/var/opt/openshift/cluster-configuration/manifest.json"
    );
    drop((root, t));
    eprintln!(
        "lab: lca one-shot install done in {:.1?}",
        started.elapsed()
    );
}

/// lca-cli's calls on `serial`, printed; asserts it finished, ran what `l` runs for the lab's
/// config in order, and that coreos-installer (the stand-in) was called once, as lca-cli says.
#[cfg(feature = "agent")]
fn lca_ran(serial: &str, l: &lca::LcaRef, post: bool) -> Vec<String> {
    let calls = lca::calls(serial);
    eprintln!(
        "lab: lca-cli {} calls, in order:\n{}",
        l.branch,
        calls.join("\n")
    );
    // lca-cli says it finished only after it has called `shutdown now`, so the shutdown's SIGTERM
    // may stop it before it says so (the lab's live system powers off within seconds): its last
    // call being that shutdown, and its unit stopped by the signal, is the same end.
    let said_so = serial.contains("IBI preparation process finished successfully!");
    let stopped_by_its_shutdown = calls.last().is_some_and(|c| c == "shutdown now")
        && serial.contains("IBI-LAB: install-rhcos-and-restore-seed.service ended: signal");
    assert!(
        said_so || stopped_by_its_shutdown,
        "lca-cli did not finish:\n{serial}"
    );
    let seed = lca::seed_image(&calls);
    assert!(
        seed.starts_with(&format!("{}/ibi/seed", lca::REGISTRY)),
        "{seed}"
    );
    lca::assert_in_order(&calls, &lca::expected_calls(l, &seed, post));
    let precached = calls
        .iter()
        .filter(|c| c.starts_with("precache pulled "))
        .count();
    assert_eq!(precached, 3, "the seed's containers.list has 3 images");
    let installs: Vec<&str> = serial
        .lines()
        .filter(|l| l.starts_with("IBI-LAB: coreos-installer"))
        .collect();
    assert_eq!(
        installs,
        [
            "IBI-LAB: coreos-installer install /dev/disk/by-id/virtio-ibi-lab-host --append-karg ibi.test=1"
        ],
        "{serial}"
    );
    calls
}

/// `ibi agent install` of `seed` onto a blank loop disk of the e2e test's size, here: the
/// `coreos-installer` stand-in of the e2e test writing `metal`, `binary` as the agent, the lab
/// config's values but for the disk and the seed's path.
#[cfg(feature = "agent")]
fn reference_install(
    dir: &Path,
    seed: &Path,
    metal: &Path,
    binary: &Path,
) -> common::agent::Target {
    use common::agent::{DISK_SIZE, Target, log_of, write_stand_in};
    std::fs::create_dir_all(dir.join("live/var/tmp")).unwrap();
    let img = dir.join("disk.img");
    std::fs::File::create(&img)
        .unwrap()
        .set_len(DISK_SIZE)
        .unwrap();
    let mut t = Target::adopt(dir, &img, "overlay");
    t.run_as(binary);
    write_stand_in(&t, metal);
    std::fs::write(t.path("live/var/tmp/pull-secret.json"), r#"{"auths":{}}"#).unwrap();
    std::fs::write(t.path("registries.conf"), "").unwrap();
    let config = serde_json::json!({
        "seedImage": format!("oci:{}:4.16.0", seed.display()),
        "seedVersion": "4.16.0",
        "installationDisk": t.disk(),
        "extraPartitionStart": "-1G",
        "extraPartitionLabel": "var-lib-containers",
        "extraPartitionNumber": 5,
        "coreosInstallerArgs": ["--append-karg", "ibi.test=1"],
        "precacheDisabled": true,
    });
    std::fs::write(t.path("ibi-configuration.json"), config.to_string()).unwrap();
    let out = t.run_agent(&[]);
    assert!(
        out.status.success(),
        "the loop-device install: {}",
        log_of(&out)
    );
    t
}
