//! Shared by the `ibi agent install` end-to-end tests (`agent_install_e2e`, `agent_install_kill_resume`).
//!
//! [`Env`] holds what every install reads: the real-content seed of `seed-fixtures/make-real-seed.sh` and
//! its precache images in a real `docker-registry`, and the fake RHCOS disk of `make-metal-image.sh`.
//! [`Target`] is one host: a blank 3 GiB loop disk, the live system's `/var/tmp` (pull secret, `post.sh`,
//! the state and status files), the mount points, `ibi-configuration.json` naming that disk, and the
//! `coreos-installer` stand-in (`coreos-installer install` needs the live ISO's osmet image and udev; the
//! stand-in copies the metal image to the disk, which is what coreos-installer's write amounts to, and logs
//! each call's start and end with a timestamp).
//!
//! A target undoes exactly what it made when dropped, failures included: the process groups it started
//! (SIGKILL), every mount below its directory or from its disk (deepest first, plain `umount` bounded by
//! `timeout`), the loop devices over its disk, then the disk itself.
#![allow(dead_code)]

use std::cell::RefCell;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ibi::agent::disk::mounts::{disk_devices, read_mountinfo, unmount_order};
use ibi::agent::disk::{LoopDevice, find_partition_by_label};

use super::registry::{TestRegistry, extract_layer};
use super::{require_root, require_tools};

pub const MIB: u64 = 1024 * 1024;
pub const GIB: u64 = 1024 * MIB;
pub const DISK_SIZE: u64 = 3 * GIB;
pub const SEED_REPO: &str = "openshift-kni/seed-image";
pub const STATEROOT: &str = "rhcos_4.16.0";
pub const KARGS: [&str; 3] = [
    "systemd.unified_cgroup_hierarchy=1",
    "cgroup_no_v1=all",
    "psi=0",
];
/// Bound on any one agent run in these tests (a full install takes well under a minute here).
pub const RUN_LIMIT: Duration = Duration::from_secs(600);
/// Bound on one `umount` or `losetup -d` during cleanup.
const CLEANUP_LIMIT: &str = "60";

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seed-fixtures")
        .join(name)
}

pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

pub fn run(program: &str, args: &[&str]) -> String {
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

/// The binary under test: `IBI_AGENT_TEST_BINARY` when set (to show that these tests fail on an older
/// build), else this build's.
pub fn ibi_binary() -> PathBuf {
    std::env::var_os("IBI_AGENT_TEST_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_ibi")))
}

pub fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_nanos()
}

/// The container-storage driver the field runs (`overlay`) wherever this kernel has overlayfs; `vfs`
/// only where it does not, said on stderr.
pub fn field_driver(test: &str) -> &'static str {
    let fs_list = fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if fs_list.split_whitespace().any(|w| w == "overlay") {
        "overlay"
    } else {
        eprintln!("NOTE {test}: this kernel has no overlayfs; container storage uses vfs");
        "vfs"
    }
}

/// Machine-wide lock for whatever mounts a filesystem of `make-metal-image.sh`'s image (the image, or a
/// disk it was copied to): its UUIDs are fixed for reproducibility, and XFS refuses to mount a second
/// filesystem with the UUID of a mounted one. Held (flock, released with the file) for a whole test, so
/// tests of this and other processes, and `benches/agent-restore.sh`, take turns.
pub const METAL_IMAGE_LOCK: &str = "/tmp/ibi-metal-image.lock";
/// How long a test waits for that lock.
const METAL_IMAGE_WAIT: Duration = Duration::from_secs(1800);

pub fn metal_image_lock() -> fs::File {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(METAL_IMAGE_LOCK)
        .expect("opening the metal-image lock");
    let started = Instant::now();
    while rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err() {
        assert!(
            started.elapsed() < METAL_IMAGE_WAIT,
            "{METAL_IMAGE_LOCK} held for over {METAL_IMAGE_WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    file
}

/// The tools the agent and these tests call.
const TOOLS: [&str; 17] = [
    "docker-registry",
    "skopeo",
    "ostree",
    "mkfs.xfs",
    "xfs_growfs",
    "xfs_info",
    "mkfs.ext4",
    "sfdisk",
    "sgdisk",
    "blkid",
    "losetup",
    "partx",
    "tar",
    "gzip",
    "wipefs",
    "timeout",
    "fsfreeze",
];

/// Everything the installs of one test read.
pub struct Env {
    pub tmp: tempfile::TempDir,
    pub reg: TestRegistry,
    pub seed_files: PathBuf,
    pub seed_digest: String,
    /// Precached images as the agent pulls them (the local registry in place of the release registry).
    pub images: Vec<String>,
    test: &'static str,
    /// [`metal_image_lock`]; targets borrow the env, so they (and their mounts) are gone before it.
    _metal: fs::File,
}

impl Env {
    /// Generates the seed, the precache images and the metal image; starts the registry and pushes.
    /// Fails the test ([`crate::common::missing`]) without root or a tool.
    pub fn setup(test: &'static str) -> Option<Env> {
        if !require_tools(test, &TOOLS) || !require_root(test) {
            return None;
        }
        let metal = metal_image_lock();
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
        let reg = TestRegistry::start(test)?;
        reg.push(&seed, "4.16.0", SEED_REPO);
        let index: serde_json::Value =
            serde_json::from_slice(&fs::read(seed.join("index.json")).unwrap()).unwrap();
        let seed_digest = index["manifests"][0]["digest"]
            .as_str()
            .unwrap()
            .to_string();
        let images = push_precache(&reg, &precache);
        fs::write(
            t.join("registries.conf"),
            format!(
                "[[registry]]\nlocation = \"{}\"\ninsecure = true\n",
                reg.addr
            ),
        )
        .unwrap();
        Some(Env {
            tmp,
            reg,
            seed_files,
            seed_digest,
            images,
            test,
            _metal: metal,
        })
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// A new host named `name`: blank disk, live files, mount points, configuration and stand-in.
    /// `post_sh` is the body of the live system's `post.sh`.
    pub fn target(&self, name: &str, driver: &str, post_sh: &str) -> Target {
        let dir = self.path(name);
        let live = dir.join("live/var/tmp");
        fs::create_dir_all(&live).unwrap();
        let img = dir.join("disk.img");
        fs::File::create(&img)
            .and_then(|f| f.set_len(DISK_SIZE))
            .expect("disk image");
        let disk = LoopDevice::attach(&img).expect("attaching the loop disk");
        fs::write(live.join("pull-secret.json"), r#"{"auths":{}}"#).unwrap();
        let post = live.join("post.sh");
        fs::write(&post, format!("#!/bin/bash\nset -e\n{post_sh}\n")).unwrap();
        fs::set_permissions(&post, fs::Permissions::from_mode(0o755)).unwrap();
        let t = Target {
            dir,
            driver: driver.to_string(),
            disk: Some(disk),
            groups: RefCell::new(Vec::new()),
            registries_conf: self.path("registries.conf"),
            program: ibi_binary(),
        };
        write_stand_in(&t, &self.path("metal.img"));
        let config = serde_json::json!({
            "seedImage": format!("{}/{SEED_REPO}@{}", self.reg.addr, self.seed_digest),
            "seedVersion": "4.16.0",
            "installationDisk": s(t.disk()),
            "releaseRegistry": self.reg.addr,
            "extraPartitionStart": "-1G",
            "extraPartitionLabel": "var-lib-containers",
            "extraPartitionNumber": 5,
            "coreosInstallerArgs": ["--append-karg", "ibi.test=1"],
        });
        fs::write(t.path("ibi-configuration.json"), config.to_string()).unwrap();
        t
    }
}

/// A one-shot ISO's live system (`ibi create image --site`): the site's tree where Ignition puts it,
/// files 0600 and directories 0700, with the empty `manifests/` post-pivot needs.
pub fn place_site_tree(t: &Target) -> PathBuf {
    let tree = t.path("live/var/tmp/ibi-site-configuration");
    for d in [
        "",
        "cluster-configuration",
        "cluster-configuration/manifests",
        "extra-manifests",
    ] {
        fs::create_dir_all(tree.join(d)).unwrap();
        fs::set_permissions(tree.join(d), fs::Permissions::from_mode(0o700)).unwrap();
    }
    for (rel, data) in [
        (
            "cluster-configuration/manifest.json",
            &br#"{"api_version":1,"cluster_name":"sno-a"}"#[..],
        ),
        (
            "extra-manifests/ibi-reconfiguration.yaml",
            b"kind: ConfigMap\n",
        ),
    ] {
        fs::write(tree.join(rel), data).unwrap();
        fs::set_permissions(tree.join(rel), fs::Permissions::from_mode(0o600)).unwrap();
    }
    tree
}

/// The stand-in logs `start <ns> <args>` and `done <ns>` per call, and `restarted-after-done` when it is
/// started although the state file already records `write-rhcos` done (the one thing that must never
/// happen: RHCOS written again over a disk that holds later work).
pub fn write_stand_in(t: &Target, metal: &Path) {
    let stand_in = t.path("coreos-installer");
    fs::write(
        &stand_in,
        format!(
            "#!/bin/bash\nset -e\nlog={log}\n\
             if grep -qs '\"write-rhcos\"' {state}; then echo restarted-after-done >>$log; fi\n\
             echo \"start $(date +%s%N) $*\" >>$log\n[ \"$1\" = install ]\n\
             dd if={img} of=\"$2\" bs=4M conv=notrunc,fsync status=none\n\
             echo \"done $(date +%s%N)\" >>$log\n",
            log = s(&t.path("coreos-installer.log")),
            state = s(&t.state_file()),
            img = s(metal)
        ),
    )
    .unwrap();
    fs::set_permissions(&stand_in, fs::Permissions::from_mode(0o755)).unwrap();
}

/// Pushes the precache images where `containers.list` names them, with the local registry in place
/// of the fake release registry; returns the rewritten references the agent should pull.
pub fn push_precache(reg: &TestRegistry, precache: &Path) -> Vec<String> {
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

/// One host under test.
pub struct Target {
    pub dir: PathBuf,
    pub driver: String,
    disk: Option<LoopDevice>,
    /// Process groups started here, killed on drop in case a test failed mid-run.
    groups: RefCell<Vec<i32>>,
    registries_conf: PathBuf,
    /// The ibi the agent runs as: [`ibi_binary`] unless [`Target::run_as`] said otherwise.
    program: PathBuf,
}

impl Target {
    /// The disk image another machine installed onto (a lab VM's, read after it powered off), attached
    /// as a loop device for the checks, its check mounts under `dir`; all undone on drop.
    pub fn adopt(dir: &Path, image: &Path, driver: &str) -> Target {
        fs::create_dir_all(dir).unwrap();
        Target {
            dir: dir.to_path_buf(),
            driver: driver.to_string(),
            disk: Some(LoopDevice::attach(image).expect("attaching the installed disk")),
            groups: RefCell::new(Vec::new()),
            registries_conf: dir.join("registries.conf"),
            program: ibi_binary(),
        }
    }

    /// Runs the agent as `program` (another build of ibi) from now on.
    pub fn run_as(&mut self, program: &Path) {
        self.program = program.to_path_buf();
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    pub fn disk(&self) -> &Path {
        self.disk.as_ref().expect("attached").path()
    }

    pub fn state_file(&self) -> PathBuf {
        self.path("live/var/tmp/ibi-install-state.json")
    }

    /// `ibi agent install` for this host, every path inside its directory.
    pub fn agent(&self, extra: &[&str]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(["--log-level", "debug", "agent", "install", "-f"])
            .arg(self.path("ibi-configuration.json"))
            .arg("--root")
            .arg(self.path("live"))
            .arg("--sysroot-mount")
            .arg(self.path("mnt"))
            .arg("--containers-mount")
            .arg(self.path("containers"))
            .arg("--state-file")
            .arg(self.state_file())
            .arg("--status-file")
            .arg(self.path("status.json"))
            .arg("--registries-conf")
            .arg(&self.registries_conf)
            .arg("--coreos-installer")
            .arg(self.path("coreos-installer"))
            .args(["--storage-driver", &self.driver])
            .args(extra)
            .env_remove("RUST_LOG");
        cmd
    }

    /// Runs the agent to its end (bounded by [`RUN_LIMIT`]), in its own process group.
    pub fn run_agent(&self, extra: &[&str]) -> Output {
        let log = self.path(&format!("run-{}.log", now_ns()));
        let child = self.spawn(extra, &log);
        let started = Instant::now();
        let mut child = child;
        loop {
            if let Some(status) = child.try_wait().expect("waiting for ibi") {
                return Output {
                    status,
                    stdout: Vec::new(),
                    stderr: fs::read(&log).unwrap_or_default(),
                };
            }
            if started.elapsed() > RUN_LIMIT {
                self.kill_group(&child);
                panic!(
                    "ibi agent install ran over {RUN_LIMIT:?}: {}",
                    fs::read_to_string(&log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the agent in its own process group, stderr to `log`.
    pub fn spawn(&self, extra: &[&str], log: &Path) -> Child {
        let err = fs::File::create(log).unwrap();
        let child = self
            .agent(extra)
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("starting ibi");
        self.groups.borrow_mut().push(child.id() as i32);
        child
    }

    /// SIGKILL to the child's whole process group (as an OOM kill or `systemctl restart` would), then
    /// reaps it.
    pub fn kill_group(&self, child: &Child) {
        let pgid = rustix::process::Pid::from_raw(child.id() as i32).expect("a child's pid");
        let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
    }

    pub fn status(&self) -> serde_json::Value {
        fs::read(self.path("status.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(serde_json::Value::Null)
    }

    /// Lines of the stand-in's log.
    pub fn installer_log(&self) -> Vec<String> {
        fs::read_to_string(self.path("coreos-installer.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Mounts from this disk anywhere, and mounts below this target's directory.
    pub fn leftover_mounts(&self) -> Vec<String> {
        let devs = disk_devices(self.disk());
        read_mountinfo()
            .unwrap()
            .iter()
            .filter(|e| devs.contains(&e.dev) || e.point.starts_with(&self.dir))
            .map(|e| e.to_string())
            .collect()
    }

    /// Loop devices over this disk (the test's own mounts for checking excepted: call with none made).
    pub fn leftover_loops(&self) -> String {
        run("losetup", &["-j", s(self.disk())])
    }

    /// Kills what this target started and takes down what is mounted from or below it.
    fn clean_up(&mut self) {
        for pgid in self.groups.borrow_mut().drain(..) {
            if let Some(pid) = rustix::process::Pid::from_raw(pgid) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        }
        let Some(disk) = self.disk.as_ref().map(|d| d.path().to_path_buf()) else {
            return;
        };
        // Bounded: a mount that will not come down is reported, not waited on forever.
        for _ in 0..64 {
            let devs = disk_devices(&disk);
            let entries = read_mountinfo().unwrap_or_default();
            let order = unmount_order(&entries, |e| {
                devs.contains(&e.dev) || e.point.starts_with(&self.dir)
            });
            let Some(first) = order.first() else { break };
            // A frozen filesystem would outlive its unmount (see ibi::agent::disk::mounts::thaw).
            let _ = Command::new("timeout")
                .args([CLEANUP_LIMIT, "fsfreeze", "--unfreeze"])
                .arg(&first.point)
                .stderr(Stdio::null())
                .status();
            let ok = Command::new("timeout")
                .args([CLEANUP_LIMIT, "umount"])
                .arg(&first.point)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("cleanup: could not unmount {first}");
                break;
            }
        }
        for dev in ibi::agent::disk::mounts::loops_over(&disk) {
            rescue_frozen(Path::new(&dev));
            let _ = ibi::agent::disk::release_loop(Path::new(&dev));
        }
        if let Some(d) = self.disk.take()
            && let Err(e) = d.detach()
        {
            eprintln!("cleanup: {e:#}");
        }
    }
}

/// A filesystem unmounted while frozen stays alive holding its device (a loop device then never
/// detaches). Should the agent under test leave one, mounting the device again returns that filesystem:
/// thaw it there and unmount, so a failing test leaves nothing behind.
fn rescue_frozen(dev: &Path) {
    let Some(name) = dev.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    let alive = Path::new("/proc/fs/ext4").join(name).exists()
        || Path::new("/sys/fs/xfs").join(name).exists();
    let mounted = read_mountinfo()
        .unwrap_or_default()
        .iter()
        .any(|e| e.source == dev.to_string_lossy());
    if !alive || mounted {
        return;
    }
    let Ok(dir) = tempfile::tempdir() else { return };
    let limited = |args: &[&std::ffi::OsStr]| {
        Command::new("timeout")
            .arg(CLEANUP_LIMIT)
            .args(args)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if limited(&["mount".as_ref(), dev.as_os_str(), dir.path().as_os_str()]) {
        let thawed = limited(&[
            "fsfreeze".as_ref(),
            "--unfreeze".as_ref(),
            dir.path().as_os_str(),
        ]);
        limited(&["umount".as_ref(), dir.path().as_os_str()]);
        eprintln!(
            "cleanup: {} was left alive (thawed: {thawed})",
            dev.display()
        );
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.clean_up();
    }
}

pub fn log_of(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A partition of a target disk attached read-only (or not) over its range and mounted for checks;
/// taken down by the target's cleanup if a check panics first.
pub struct Mounted {
    point: PathBuf,
    dev: Option<LoopDevice>,
}

impl Mounted {
    pub fn new(t: &Target, label: &str, at: &Path, options: Option<&str>) -> Mounted {
        let part = find_partition_by_label(t.disk(), label).unwrap();
        let dev =
            LoopDevice::attach_range(t.disk(), part.offset_bytes(), part.len_bytes()).unwrap();
        fs::create_dir_all(at).unwrap();
        ibi::agent::disk::mount(dev.path(), at, None, options).unwrap();
        Mounted {
            point: at.to_path_buf(),
            dev: Some(dev),
        }
    }

    pub fn device(&self) -> &Path {
        self.dev.as_ref().expect("attached").path()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        // What a check mounted below (containers-storage's own bind of storage/overlay) comes down first.
        let entries = read_mountinfo().unwrap_or_default();
        for e in unmount_order(&entries, |e| e.point == self.point) {
            let _ = Command::new("timeout")
                .args([CLEANUP_LIMIT, "umount"])
                .arg(&e.point)
                .status();
        }
        if let Some(d) = self.dev.take() {
            let _ = d.detach();
        }
    }
}

/// What a finished target disk holds, read with tools other than ibi, in a form two hosts can be compared
/// by: partition table, filesystem types and labels, XFS geometry, the ostree deployment, boot entries,
/// the restored `/etc` and `/var` (path, type, mode, owner, size, sha256, link target, xattrs), and the
/// precached images' digests.
#[derive(Debug, PartialEq, Eq)]
pub struct Report {
    pub gpt: String,
    pub blkid: Vec<String>,
    pub xfs_info: Vec<String>,
    pub ostree_status: String,
    pub bls_options: Vec<String>,
    pub etc: Vec<String>,
    pub var: Vec<String>,
    pub image_digests: Vec<String>,
}

/// `sfdisk --dump` with the device name replaced, the partition GUID of the extra partition (random per
/// install) masked, and `sgdisk --verify` required clean.
pub fn gpt_dump(t: &Target) -> String {
    let verify = run("sgdisk", &["--verify", s(t.disk())]);
    assert!(
        verify.contains("No problems found"),
        "sgdisk --verify: {verify}"
    );
    let dump = run("sfdisk", &["--dump", s(t.disk())]);
    dump.lines()
        .map(|l| {
            let l = l.replace(s(t.disk()), "DISK");
            if l.starts_with("DISKp5 ") || l.starts_with("DISK5 ") {
                mask_field(&l, "uuid=")
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn mask_field(line: &str, key: &str) -> String {
    line.split(", ")
        .map(|f| match f.strip_prefix(key) {
            Some(_) => format!("{key}*"),
            None => f.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// `blkid -p` of each partition (probed at its offset): type and label; UUIDs left out (mkfs makes new
/// ones).
fn blkid_all(t: &Target) -> Vec<String> {
    let table = ibi::agent::disk::read_table(t.disk()).unwrap();
    table
        .partitions
        .iter()
        .map(|p| {
            let out = Command::new("blkid")
                .args(["-p", "-o", "export", "-O", &p.offset_bytes().to_string()])
                .args(["-S", &p.len_bytes().to_string()])
                .arg(t.disk())
                .output()
                .expect("blkid");
            let text = String::from_utf8_lossy(&out.stdout);
            let keep: Vec<&str> = text
                .lines()
                .filter(|l| l.starts_with("TYPE=") || l.starts_with("LABEL="))
                .collect();
            format!("{} {}: {}", p.number, p.name, keep.join(" "))
        })
        .collect()
}

/// `xfs_info` of a mounted XFS, without the line naming the device.
fn xfs_geometry(at: &Path) -> String {
    run("xfs_info", &[s(at)])
        .lines()
        .map(|l| match l.split_once("isize=") {
            Some((_, rest)) if l.starts_with("meta-data=") => format!("meta-data= isize={rest}"),
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A sorted listing of a tree: path, type, mode, owner, size and sha256 (files), target (links), xattrs.
pub fn tree_manifest(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        let m = fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(root).unwrap().display().to_string();
        let ft = m.file_type();
        let what = if ft.is_dir() {
            "d".to_string()
        } else if ft.is_symlink() {
            format!("l -> {}", fs::read_link(&p).unwrap().display())
        } else if ft.is_file() {
            let bytes = fs::read(&p).unwrap();
            let sum: String = openssl::sha::sha256(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            format!("f {} {sum}", bytes.len())
        } else {
            "other".to_string()
        };
        out.push(format!(
            "{rel} {what} {:o} {}:{}{}",
            m.mode() & 0o7777,
            m.uid(),
            m.gid(),
            xattrs(&p)
        ));
        if ft.is_dir() {
            walk(root, &p, out);
        }
    }
}

fn xattrs(p: &Path) -> String {
    let mut names = vec![0u8; 4096];
    let Ok(n) = rustix::fs::llistxattr(p, &mut names) else {
        return String::new();
    };
    let mut out = String::new();
    for name in names[..n].split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        let mut value = vec![0u8; 4096];
        let len = rustix::fs::lgetxattr(p, name.as_str(), &mut value).unwrap_or(0);
        out.push_str(&format!(
            " {name}={}",
            String::from_utf8_lossy(&value[..len])
        ));
    }
    out
}

/// Checks the finished target in detail and returns its [`Report`]. The GPT: partition 5 named
/// `var-lib-containers`, 1 MiB aligned, the last GiB, root grown up to it. The deployment (`ostree admin
/// status`: the seed's commit in the new stateroot, no `rhcos`), the origin file, the BLS kernel
/// arguments, var and etc content with an xattr, the deletions, the host unit and its enable links, the
/// binary, every precached image with the registry's digest, and no install state left on the disk.
pub fn check_target(env: &Env, t: &Target) -> Report {
    check_disk(
        &Expected {
            seed_files: &env.seed_files,
            images: &env.images,
            binary: &ibi_binary(),
        },
        t,
    )
}

/// What a finished install must hold, whoever ran it: the seed's files (its extracted layer), the
/// precached images (none when precache is off) and the ibi binary the agent ran.
pub struct Expected<'a> {
    pub seed_files: &'a Path,
    pub images: &'a [String],
    pub binary: &'a Path,
}

/// [`check_target`] for any install onto `t`'s disk: the loop-device tests' or a lab VM's.
pub fn check_disk(x: &Expected, t: &Target) -> Report {
    let gpt = gpt_dump(t);
    check_gpt_layout(t);
    let blkid = blkid_all(t);
    let root_at = t.path("check-root");
    let containers_at = t.path("check-containers");
    let root = Mounted::new(t, "root", &root_at, Some("ro"));
    let boot = Mounted::new(t, "boot", &root_at.join("boot"), Some("ro"));
    // containers-storage takes its lock files in the graph root even to read.
    let containers = Mounted::new(t, "var-lib-containers", &containers_at, None);
    let xfs_info = vec![xfs_geometry(&root_at), xfs_geometry(&containers_at)];

    let ostree_status = run("ostree", &["admin", "status", "--sysroot", s(&root_at)]);
    assert!(ostree_status.contains(STATEROOT), "{ostree_status}");
    assert!(
        !ostree_status.contains("rhcos "),
        "RHCOS deployment still listed: {ostree_status}"
    );
    assert!(!root_at.join("ostree/deploy/rhcos").exists());
    let rpm_ostree = fs::read_to_string(x.seed_files.join("rpm-ostree.json")).unwrap();
    let (checksum, seed_deployment) =
        ibi::agent::ostree_restore::booted_deployment(&rpm_ostree).unwrap();
    assert!(ostree_status.contains(&checksum), "{ostree_status}");
    let deploy_dir = root_at.join(format!("ostree/deploy/{STATEROOT}/deploy/{checksum}.0"));
    assert!(deploy_dir.is_dir(), "{}", deploy_dir.display());
    assert_eq!(
        fs::read(deploy_dir.with_extension("0.origin")).unwrap(),
        fs::read(
            x.seed_files
                .join(format!("ostree-{seed_deployment}.origin"))
        )
        .unwrap(),
        "origin file from the seed"
    );
    assert!(
        !root_at.join("ostree/ibi-work").exists(),
        "work tree removed"
    );

    let bls_options = bls_options(&root_at.join("boot/loader/entries"));
    assert_eq!(
        bls_options.len(),
        1,
        "one boot entry, the seed's: {bls_options:?}"
    );
    for karg in KARGS {
        assert!(
            bls_options[0].split(' ').any(|o| o == karg),
            "{karg} not in {bls_options:?}"
        );
    }
    assert!(
        bls_options[0].contains("ostree=/ostree/boot."),
        "{bls_options:?}"
    );

    let stateroot_dir = root_at.join(format!("ostree/deploy/{STATEROOT}"));
    check_restored_files(&deploy_dir.join("etc"), &stateroot_dir, x.binary);

    assert!(
        !containers_at.join(".ibi").exists(),
        "install state removed at the end"
    );
    let image_digests = check_images(x.images, t, &containers_at);
    let report = Report {
        gpt,
        blkid,
        xfs_info,
        ostree_status,
        bls_options,
        etc: tree_manifest(&deploy_dir.join("etc")),
        var: tree_manifest(&stateroot_dir.join("var")),
        image_digests,
    };
    drop((containers, boot, root));
    report
}

/// Partition 5 at the last GiB, aligned to 1 MiB, to the last usable LBA; root (4) grown up to it.
fn check_gpt_layout(t: &Target) {
    let table = ibi::agent::disk::read_table(t.disk()).unwrap();
    let extra = table.get(5).expect("partition 5").clone();
    assert_eq!(extra.name, "var-lib-containers");
    assert_eq!(extra.offset_bytes() % MIB, 0, "aligned to 1 MiB: {extra}");
    assert_eq!(extra.offset_bytes(), DISK_SIZE - GIB, "{extra}");
    assert_eq!(
        extra.last_lba,
        table.last_usable_lba(DISK_SIZE, 512).unwrap(),
        "{extra}"
    );
    let root = find_partition_by_label(t.disk(), "root").unwrap();
    assert_eq!(root.number, 4);
    assert_eq!(
        root.last_lba + 1,
        extra.first_lba,
        "root grown up to the extra partition"
    );
}

pub fn bls_options(entries: &Path) -> Vec<String> {
    let mut names: Vec<PathBuf> = fs::read_dir(entries)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| {
            fs::read_to_string(p)
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("options "))
                .expect("options line")
                .to_string()
        })
        .collect()
}

/// var.tgz, etc.tgz (with its xattr), etc.deletions, the host unit and the binary.
fn check_restored_files(etc: &Path, stateroot_dir: &Path, binary: &Path) {
    assert!(stateroot_dir.join("var/lib/kubelet").is_dir());
    assert!(stateroot_dir.join("var/lib/etcd/member").is_dir());
    check_restored_etc(etc);
    assert!(!etc.join("ibi-fixture.d").exists(), "deleted directory");

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
    assert!(
        fs::read(&ibi).unwrap() == fs::read(binary).unwrap(),
        "the installed ibi is not {}",
        binary.display()
    );
}

/// The real seed's etc.tgz restored over the deployment's `etc` (its hostname, the xattr its tar
/// carries) and its etc.deletions' file gone: what any restore of it leaves, ibi's or lca-cli's.
pub fn check_restored_etc(etc: &Path) {
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
    assert!(!etc.join("motd").exists(), "deleted file");
}

/// `skopeo inspect containers-storage:…` of every precached image (with the target's driver) against
/// the registry's digest; returns `image digest` lines.
fn check_images(images: &[String], t: &Target, containers_at: &Path) -> Vec<String> {
    let same: Vec<(String, String)> = images.iter().map(|i| (i.clone(), i.clone())).collect();
    check_images_named(&same, t, containers_at)
}

/// [`check_images`] where the storage names an image (first) otherwise than this side reaches its
/// registry (second): a VM's `localhost:5000` is here `127.0.0.1:5000`.
pub fn check_images_named(
    images: &[(String, String)],
    t: &Target,
    containers_at: &Path,
) -> Vec<String> {
    let mut digests = Vec::new();
    for (image, remote_ref) in images {
        let local: serde_json::Value = serde_json::from_str(&run(
            "skopeo",
            &["inspect", &storage_reference(t, containers_at, image)],
        ))
        .unwrap();
        let remote: serde_json::Value = serde_json::from_str(&run(
            "skopeo",
            &[
                "inspect",
                "--tls-verify=false",
                &format!("docker://{remote_ref}"),
            ],
        ))
        .unwrap();
        assert_eq!(local["Digest"], remote["Digest"], "{image}");
        digests.push(format!("{image} {}", local["Digest"]));
    }
    digests
}

/// `image` in the container storage mounted at `containers_at` (the target's driver), as skopeo
/// names it.
pub fn storage_reference(t: &Target, containers_at: &Path, image: &str) -> String {
    format!(
        "containers-storage:[{}@{}+{}]{image}",
        t.driver,
        s(&containers_at.join("storage")),
        s(&t.path("check-run"))
    )
}

/// Nothing mounted from the disk or below the target, no loop device over the disk, no state on it.
pub fn check_nothing_left(t: &Target) {
    let mounts = t.leftover_mounts();
    assert!(mounts.is_empty(), "left mounted: {mounts:?}");
    let loops = t.leftover_loops();
    assert!(
        loops.trim().is_empty(),
        "loop devices left over the disk: {loops}"
    );
}
