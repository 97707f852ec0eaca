#![cfg(feature = "agent")]
//! End-to-end test of `ibi agent install` on a loop device (issue 4 item 7): a real `docker-registry`
//! holds the real-content seed of `seed-fixtures/make-real-seed.sh` and its precache images; the agent
//! installs onto a 3 GiB loop disk; then the GPT, the ostree deployment (`ostree admin status`), the
//! restored files and deletions, the BLS kernel arguments, the precached images, the removed RHCOS
//! deployment and the enabled host unit are checked. The first run is killed (SIGKILL, whole process
//! group) while `post.sh` runs, after the seed is restored; the second run must find the state on the
//! disk (the live system's copy was moved there), skip the finished steps — the disk is written once —
//! and reach the same result.
//!
//! Stand-in: `coreos-installer install` needs the live ISO's osmet image and udev; the test passes
//! `--coreos-installer` a script that copies `seed-fixtures/make-metal-image.sh`'s fake RHCOS disk
//! image to the disk (what coreos-installer's write amounts to) and logs its arguments. Container
//! storage uses the `vfs` driver, which needs no overlayfs support from the kernel running the test.
//!
//! Needs root, loop devices and the tools below; without them: `SKIP`, a failure under `CI`.

mod common_registry;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common_registry::{TestRegistry, extract_layer, have_tools};
use ibi::agent::disk::{LoopDevice, Mount, PartitionInfo, find_partition_by_label, read_table};

const TEST: &str = "agent_install_e2e";
const MIB: u64 = 1024 * 1024;
const GIB: u64 = 1024 * MIB;
const DISK_SIZE: u64 = 3 * GIB;
const SEED_REPO: &str = "openshift-kni/seed-image";
const STATEROOT: &str = "rhcos_4.16.0";
const KARGS: [&str; 3] = [
    "systemd.unified_cgroup_hierarchy=1",
    "cgroup_no_v1=all",
    "psi=0",
];
/// How long the killed run may take to reach post.sh.
const REACH_POST_SH: Duration = Duration::from_secs(600);

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seed-fixtures")
        .join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("starting {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn is_root() -> bool {
    fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(1) == 0
}

/// Everything one install needs, in one temp dir.
struct Env {
    tmp: tempfile::TempDir,
    reg: TestRegistry,
    disk: LoopDevice,
    seed_files: PathBuf,
    images: Vec<String>,
}

impl Env {
    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }
    fn disk(&self) -> &Path {
        self.disk.path()
    }
}

/// Generates the seed, the precache images and the metal image; starts the registry and pushes;
/// attaches the blank loop disk; writes the live system's files, the stand-in and the configuration.
fn setup() -> Option<Env> {
    let tools = [
        "docker-registry",
        "skopeo",
        "ostree",
        "mkfs.xfs",
        "xfs_growfs",
        "mkfs.ext4",
        "sfdisk",
        "losetup",
        "tar",
        "gzip",
        "wipefs",
    ];
    if !have_tools(TEST, &tools) {
        return None;
    }
    if !is_root() {
        eprintln!("SKIP {TEST}: needs root for loop devices and mounts");
        return None;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let t = tmp.path();
    let (seed, precache) = (t.join("seed"), t.join("precache"));
    run(
        s(&fixture("make-real-seed.sh")),
        &[s(&seed), "4.16.0", s(&precache)],
    );
    run(
        s(&fixture("make-metal-image.sh")),
        &[s(&t.join("metal.img"))],
    );
    let seed_files = t.join("seed-files");
    extract_layer(&seed, &seed_files);

    let reg = TestRegistry::start(TEST)?;
    reg.push(&seed, "4.16.0", SEED_REPO);
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(seed.join("index.json")).unwrap()).unwrap();
    let digest = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let images = push_precache(&reg, &precache);

    let img = t.join("disk.img");
    fs::File::create(&img)
        .and_then(|f| f.set_len(DISK_SIZE))
        .expect("disk image");
    let disk = LoopDevice::attach(&img).expect("attaching the loop disk");

    let live = t.join("live/var/tmp");
    fs::create_dir_all(&live).unwrap();
    fs::write(live.join("pull-secret.json"), r#"{"auths":{}}"#).unwrap();
    // Blocks on the first run (the test kills the agent there), passes on the second.
    let post = live.join("post.sh");
    fs::write(
        &post,
        format!(
            "#!/bin/bash\nif [ ! -e {m}.first ]; then touch {m}.first; sleep 600; fi\ntouch {m}\n",
            m = s(&t.join("post-ran"))
        ),
    )
    .unwrap();
    fs::set_permissions(&post, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(
        t.join("registries.conf"),
        format!(
            "[[registry]]\nlocation = \"{}\"\ninsecure = true\n",
            reg.addr
        ),
    )
    .unwrap();
    let stand_in = t.join("coreos-installer");
    fs::write(
        &stand_in,
        format!(
            "#!/bin/bash\nset -e\necho \"$*\" >>{log}\n[ \"$1\" = install ]\ndd if={img} of=\"$2\" bs=4M conv=notrunc,fsync status=none\n",
            log = s(&t.join("coreos-installer.log")),
            img = s(&t.join("metal.img"))
        ),
    )
    .unwrap();
    fs::set_permissions(&stand_in, fs::Permissions::from_mode(0o755)).unwrap();
    let config = serde_json::json!({
        "seedImage": format!("{}/{SEED_REPO}@{digest}", reg.addr),
        "seedVersion": "4.16.0",
        "installationDisk": s(disk.path()),
        "releaseRegistry": reg.addr,
        "extraPartitionStart": "-1G",
        "extraPartitionLabel": "var-lib-containers",
        "extraPartitionNumber": 5,
        "coreosInstallerArgs": ["--append-karg", "ibi.test=1"],
    });
    fs::write(t.join("ibi-configuration.json"), config.to_string()).unwrap();
    Some(Env {
        tmp,
        reg,
        disk,
        seed_files,
        images,
    })
}

/// Pushes the precache images where `containers.list` names them, with the local registry in place
/// of the fake release registry; returns the rewritten references the agent should pull.
fn push_precache(reg: &TestRegistry, precache: &Path) -> Vec<String> {
    let tsv = fs::read_to_string(precache.join("images.tsv")).unwrap();
    let mut images = Vec::new();
    for row in tsv.lines() {
        let cols: Vec<&str> = row.split(' ').collect();
        let (tag, repo, reference) = (cols[0], cols[1], cols[2]);
        let dest_tag = reference.strip_prefix(':').unwrap_or(tag);
        run(
            "skopeo",
            &[
                "copy",
                "--quiet",
                "--all",
                "--dest-tls-verify=false",
                &format!("oci:{}:{tag}", s(precache)),
                &format!("docker://{}/{repo}:{dest_tag}", reg.addr),
            ],
        );
        images.push(format!("{}/{repo}{reference}", reg.addr));
    }
    images
}

fn agent(env: &Env, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibi"));
    cmd.args(["--log-level", "debug", "agent", "install", "-f"])
        .arg(env.path("ibi-configuration.json"))
        .arg("--root")
        .arg(env.path("live"))
        .arg("--sysroot-mount")
        .arg(env.path("mnt"))
        .arg("--containers-mount")
        .arg(env.path("containers"))
        .arg("--state-file")
        .arg(env.path("live/var/tmp/ibi-install-state.json"))
        .arg("--status-file")
        .arg(env.path("status.json"))
        .arg("--registries-conf")
        .arg(env.path("registries.conf"))
        .arg("--coreos-installer")
        .arg(env.path("coreos-installer"))
        .args(["--storage-driver", "vfs"])
        .args(extra)
        .env_remove("RUST_LOG");
    cmd
}

fn status(env: &Env) -> serde_json::Value {
    fs::read(env.path("status.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// Starts the agent in its own process group and kills the group once post.sh has started.
fn run_and_kill_in_post_sh(env: &Env) {
    let log = fs::File::create(env.path("first-run.log")).unwrap();
    let mut child: Child = agent(env, &[])
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("starting ibi");
    let started = Instant::now();
    while !env.path("post-ran.first").exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the first run ended ({status}) before post.sh: {}",
                fs::read_to_string(env.path("first-run.log")).unwrap_or_default()
            );
        }
        assert!(
            started.elapsed() < REACH_POST_SH,
            "post.sh not reached: {}",
            fs::read_to_string(env.path("first-run.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(status(env)["step"], "post-script", "{}", status(env));
    let pgid = rustix::process::Pid::from_raw(child.id() as i32).expect("a child's pid");
    rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL)
        .expect("killing the agent's process group");
    let _ = child.wait();
}

fn log_of(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn agent_install_on_a_loop_disk_with_kill_and_resume() {
    let Some(env) = setup() else { return };

    run_and_kill_in_post_sh(&env);
    assert!(
        !env.path("live/var/tmp/ibi-install-state.json").exists(),
        "the state moved onto the disk once it was mounted"
    );

    let out = agent(&env, &[]).output().expect("running ibi");
    let log = log_of(&out);
    assert!(out.status.success(), "second run failed: {log}");
    for want in [
        "found the state of an interrupted install on the disk",
        "write-rhcos: done in an earlier run, skipping",
        "fetch-seed: done in an earlier run, skipping",
        "precache: done in an earlier run, skipping",
        "mount-targets: done in an earlier run, running again",
        "post-script: done in",
        "installation finished",
    ] {
        assert!(
            log.contains(want),
            "{want:?} not in the second run's log: {log}"
        );
    }
    let calls = fs::read_to_string(env.path("coreos-installer.log")).unwrap();
    assert_eq!(
        calls,
        format!("install {} --append-karg ibi.test=1\n", s(env.disk())),
        "RHCOS written exactly once, with coreosInstallerArgs"
    );
    assert!(
        env.path("post-ran").exists(),
        "post.sh finished on the resumed run"
    );
    let st = status(&env);
    assert_eq!(
        (&st["step"], &st["state"]),
        (&"install-host-unit".into(), &"done".into()),
        "{st}"
    );
    let first = fs::read_to_string(env.path("first-run.log")).unwrap();
    let counts = format!("pulled={n} failed=0 total={n}", n = env.images.len());
    assert!(
        first.contains("precache done") && first.contains(&counts),
        "{first}"
    );

    check_nothing_left_attached(&env);
    let layout = check_gpt(&env);
    check_target(&env, &layout);

    // A third run in the same live boot finds every step done and touches nothing.
    let out = agent(&env, &[]).output().expect("running ibi");
    assert!(out.status.success(), "third run: {}", log_of(&out));
    assert_eq!(
        fs::read_to_string(env.path("coreos-installer.log"))
            .unwrap()
            .lines()
            .count(),
        1
    );
    check_nothing_left_attached(&env);
    drop(env.reg);
}

/// No mount on the agent's mount points and no loop device over the disk once it is done.
fn check_nothing_left_attached(env: &Env) {
    for point in ["mnt/boot", "mnt", "containers"] {
        assert!(
            !ibi::agent::install::is_mount_point(&env.path(point)).unwrap(),
            "{point} still mounted"
        );
    }
    let loops = run("losetup", &["-j", s(env.disk())]);
    assert!(
        loops.trim().is_empty(),
        "loop devices left over the disk: {loops}"
    );
}

/// Partitions of the final table: the extra partition at the last GiB, aligned, root grown to it.
fn check_gpt(env: &Env) -> Vec<PartitionInfo> {
    let table = read_table(env.disk()).unwrap();
    let extra = table.get(5).expect("partition 5").clone();
    assert_eq!(extra.name, "var-lib-containers");
    assert_eq!(extra.offset_bytes() % MIB, 0, "aligned to 1 MiB: {extra}");
    assert_eq!(extra.offset_bytes(), DISK_SIZE - GIB, "{extra}");
    assert_eq!(
        extra.last_lba,
        table.last_usable_lba(DISK_SIZE, 512).unwrap(),
        "{extra}"
    );
    let root = find_partition_by_label(env.disk(), "root").unwrap();
    assert_eq!(root.number, 4);
    assert_eq!(
        root.last_lba + 1,
        extra.first_lba,
        "root grown up to the extra partition"
    );
    table.partitions.clone()
}

/// A partition of the disk mounted for the checks, unmounted when dropped.
struct Mounted {
    mount: Option<Mount>,
    _dev: LoopDevice,
}

fn mount_part(env: &Env, label: &str, at: &Path, options: Option<&str>) -> Mounted {
    let part = find_partition_by_label(env.disk(), label).unwrap();
    let dev = LoopDevice::attach_range(env.disk(), part.offset_bytes(), part.len_bytes()).unwrap();
    fs::create_dir_all(at).unwrap();
    let mount = Mount::new(dev.path(), at, None, options).unwrap();
    Mounted {
        mount: Some(mount),
        _dev: dev,
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(m) = self.mount.take() {
            m.unmount().unwrap();
        }
    }
}

fn check_target(env: &Env, _parts: &[PartitionInfo]) {
    let root_at = env.path("check-root");
    let containers_at = env.path("check-containers");
    let _root = mount_part(env, "root", &root_at, Some("ro"));
    let _boot = mount_part(env, "boot", &root_at.join("boot"), Some("ro"));
    // containers-storage takes its lock files in the graph root even to read.
    let _containers = mount_part(env, "var-lib-containers", &containers_at, None);

    // The deployment and stateroot; RHCOS gone.
    let status = run("ostree", &["admin", "status", "--sysroot", s(&root_at)]);
    assert!(status.contains(STATEROOT), "{status}");
    assert!(
        !status.contains("rhcos "),
        "RHCOS deployment still listed: {status}"
    );
    assert!(!root_at.join("ostree/deploy/rhcos").exists());
    let rpm_ostree = fs::read_to_string(env.seed_files.join("rpm-ostree.json")).unwrap();
    let (checksum, seed_deployment) =
        ibi::agent::ostree_restore::booted_deployment(&rpm_ostree).unwrap();
    assert!(status.contains(&checksum), "{status}");
    let deploy_dir = root_at.join(format!("ostree/deploy/{STATEROOT}/deploy/{checksum}.0"));
    assert!(deploy_dir.is_dir(), "{}", deploy_dir.display());
    assert_eq!(
        fs::read(deploy_dir.with_extension("0.origin")).unwrap(),
        fs::read(
            env.seed_files
                .join(format!("ostree-{seed_deployment}.origin"))
        )
        .unwrap(),
        "origin file from the seed"
    );
    assert!(
        !root_at.join("ostree/ibi-work").exists(),
        "work tree removed"
    );

    // Kernel arguments in the BLS entry.
    let entries = root_at.join("boot/loader/entries");
    let bls: Vec<String> = fs::read_dir(&entries)
        .unwrap()
        .map(|e| fs::read_to_string(e.unwrap().path()).unwrap())
        .collect();
    assert_eq!(bls.len(), 1, "one boot entry, the seed's: {bls:?}");
    let options = bls[0]
        .lines()
        .find_map(|l| l.strip_prefix("options "))
        .expect("options line");
    for karg in KARGS {
        assert!(
            options.split(' ').any(|o| o == karg),
            "{karg} not in {options}"
        );
    }
    assert!(options.contains("ostree=/ostree/boot."), "{options}");

    // var.tgz, etc.tgz (with its xattr) and etc.deletions.
    let stateroot_dir = root_at.join(format!("ostree/deploy/{STATEROOT}"));
    assert!(stateroot_dir.join("var/lib/kubelet").is_dir());
    assert!(stateroot_dir.join("var/lib/etcd/member").is_dir());
    let etc = deploy_dir.join("etc");
    assert_eq!(
        fs::read_to_string(etc.join("hostname")).unwrap(),
        "seed-node\n"
    );
    let mut value = [0u8; 64];
    let n = rustix::fs::lgetxattr(
        etc.join("kubernetes/kubelet-ca.crt"),
        "user.ibi.fixture",
        &mut value,
    )
    .expect("xattr restored");
    assert_eq!(&value[..n], b"seed");
    assert!(!etc.join("ibi-fixture.d").exists(), "deleted directory");
    assert!(!etc.join("motd").exists(), "deleted file");

    // Host unit enabled, binary placed.
    let systemd = etc.join("systemd/system");
    assert!(systemd.join("ibi-fetch-config.service").is_file());
    for wants in [
        "multi-user.target.wants",
        "installation-configuration.service.wants",
    ] {
        assert_eq!(
            fs::read_link(systemd.join(wants).join("ibi-fetch-config.service")).unwrap(),
            Path::new("/etc/systemd/system/ibi-fetch-config.service")
        );
    }
    let ibi = stateroot_dir.join("var/usrlocal/bin/ibi");
    assert_eq!(fs::metadata(&ibi).unwrap().mode() & 0o777, 0o755);
    assert_eq!(
        fs::read(&ibi).unwrap(),
        fs::read(env!("CARGO_BIN_EXE_ibi")).unwrap()
    );

    // Precached images, and no install state left behind.
    assert!(
        !containers_at.join(".ibi").exists(),
        "install state removed at the end"
    );
    let run_dir = env.path("check-run");
    for image in &env.images {
        let reference = format!(
            "containers-storage:[vfs@{}+{}]{image}",
            s(&containers_at.join("storage")),
            s(&run_dir)
        );
        let local: serde_json::Value =
            serde_json::from_str(&run("skopeo", &["inspect", &reference])).unwrap();
        let remote: serde_json::Value = serde_json::from_str(&run(
            "skopeo",
            &[
                "inspect",
                "--tls-verify=false",
                &format!("docker://{image}"),
            ],
        ))
        .unwrap();
        assert_eq!(local["Digest"], remote["Digest"], "{image}");
    }
}
