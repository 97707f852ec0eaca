//! The VM lab (docs/deliver.md, "The lab"): libvirt VMs under QEMU whose BMC is sushy-tools'
//! Redfish emulator with its **libvirt** driver, as the image-based install's own CI runs them
//! (dev-scripts, IBIO's and lifecycle-agent's e2e). Facts it relies on:
//! `shared/reference/vm-lab.md`.
//!
//! [`Lab::start`] starts `virtlogd` and `libvirtd` when they are not running (and stops by PID only
//! what it started), lets `libvirt-qemu` open `/dev/kvm` (restored afterwards), defines a storage
//! pool for the emulator's media uploads, and starts one emulator (Basic auth, TLS, 127.0.0.1)
//! limited to the lab's domains. [`Lab::define`] defines a VM: q35, two vCPUs, no network interface
//! (results come back over its serial log and its disk, read after power-off), an empty SATA CD, its
//! disk a raw file. TCG unless `kvm_intel`/`kvm_amd` is loaded (the KVM here is PVM, on which stock
//! firmware fails). Everything is undone by name and PID when the lab is dropped, also when a test
//! fails. Every wait is bounded. Tests that use it take [`lock`] first: one VM at a time.
//!
//! The guest disk ([`guest_disk`]) is built once per machine by `tests/lab/guest-disk.sh` and
//! cached under `~/.cache/ibi/lab/` by the script's SHA-256; [`Disk`] is a copy a test changes and
//! reads through a loop device, unmounted and detached by path and device on drop.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::deliver::emulator::Emulator;

const VIRSH_TIMEOUT: Duration = Duration::from_secs(120);
/// `bash -c` script: closes every descriptor above 2, then runs `$0 "$@"`.
const CLOSE_INHERITED_THEN_EXEC: &str = r#"for f in /proc/$$/fd/*; do n=${f##*/}; if [ "$n" -gt 2 ]; then eval "exec $n>&-"; fi; done 2>/dev/null; exec "$0" "$@""#;
const DAEMON_TIMEOUT: Duration = Duration::from_secs(60);
const BUILD_TIMEOUT: Duration = Duration::from_secs(1200);
const URI: &str = "qemu:///system";
/// The name every lab object starts with, so a leftover of a killed run is recognisable.
pub const PREFIX: &str = "ibi-lab-";

static ONE_VM: Mutex<()> = Mutex::new(());

/// One lab test at a time in this process (2 cores: one VM at a time).
pub fn lock() -> MutexGuard<'static, ()> {
    ONE_VM.lock().unwrap_or_else(|p| p.into_inner())
}

/// A command's output within `limit`, or an error naming it.
pub fn run(cmd: &mut Command, limit: Duration) -> Result<String, String> {
    let shown = format!("{cmd:?}");
    let out_file = tempfile::tempfile().map_err(|e| e.to_string())?;
    let err_file = tempfile::tempfile().map_err(|e| e.to_string())?;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out_file.try_clone().map_err(|e| e.to_string())?)
        .stderr(err_file.try_clone().map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("{shown}: {e}"))?;
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{shown}: no end within {limit:?}"));
            }
        }
    };
    let read = |mut f: std::fs::File| {
        use std::io::{Read, Seek};
        let mut s = String::new();
        let _ = f.rewind();
        let _ = f.read_to_string(&mut s);
        s
    };
    let (out, err) = (read(out_file), read(err_file));
    if status.success() {
        Ok(out)
    } else {
        Err(format!("{shown}: {status}: {}{}", err.trim(), out.trim()))
    }
}

fn virsh(args: &[&str]) -> Result<String, String> {
    run(
        Command::new("virsh").arg("-c").arg(URI).args(args),
        VIRSH_TIMEOUT,
    )
}

/// Why the lab cannot run here, if it cannot: not root, or QEMU/libvirt/the lab venv missing.
pub fn unavailable() -> Option<String> {
    if !super::is_root() {
        return Some("the lab needs root (libvirt's system daemon, loop devices)".into());
    }
    for tool in [
        "virsh",
        "libvirtd",
        "virtlogd",
        "qemu-system-x86_64",
        "debootstrap",
        "extlinux",
    ] {
        if super::tool_path(tool).is_none() && !Path::new("/usr/sbin").join(tool).exists() {
            return Some(format!(
                "{tool} is missing (tests/run installs the lab as root)"
            ));
        }
    }
    if !sushy_bin().is_file() {
        return Some(format!(
            "{} is missing (tests/run makes the lab venv)",
            sushy_bin().display()
        ));
    }
    None
}

fn cache_dir() -> PathBuf {
    std::env::home_dir()
        .unwrap_or_else(|| PathBuf::from("/root"))
        .join(".cache/ibi")
}

fn sushy_bin() -> PathBuf {
    std::env::var_os("IBI_LAB_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join("lab-venv"))
        .join("bin/sushy-emulator")
}

/// The cached guest disk, built by `tests/lab/guest-disk.sh` if this version of the recipe has
/// none yet (about a minute and a half, once per machine).
pub fn guest_disk() -> Result<PathBuf, String> {
    cached("guest", "raw", "guest-disk.sh", &[])
}

/// The cached live ISO in the CoreOS layout (`tests/lab/live-iso.sh` with `tests/lab/live/` and
/// `tests/lab/live-root/`), built if this version of the recipe has none yet (about six minutes,
/// once per machine).
pub fn live_iso() -> Result<PathBuf, String> {
    cached("live", "iso", "live-iso.sh", &["live", "live-root"])
}

/// The cached bootable seed tree (`tests/lab/seed-tree.sh`: Debian laid out for ostree, with a
/// dracut initramfs that pivots into an ostree deployment), for `make-real-seed.sh`'s
/// `SEED_TREE_TAR`; built if this version of the recipe has none yet (about two minutes and a half,
/// once per machine).
pub fn seed_tree() -> Result<PathBuf, String> {
    cached("seed-tree", "tar", "seed-tree.sh", &[])
}

/// `~/.cache/ibi/lab/<name>-<hash>.<ext>`, made by `tests/lab/<script> OUT` when missing; the hash
/// covers the script and every file of the folders `inputs` (under `tests/lab/`), so a change to
/// the recipe builds anew. One builder per machine at a time (a lock file); older versions go.
fn cached(name: &str, ext: &str, script: &str, inputs: &[&str]) -> Result<PathBuf, String> {
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lab");
    let mut files = vec![lab.join(script)];
    for dir in inputs {
        let mut more: Vec<PathBuf> = std::fs::read_dir(lab.join(dir))
            .map_err(|e| format!("{}: {e}", lab.join(dir).display()))?
            .flatten()
            .map(|e| e.path())
            .collect();
        more.sort();
        files.extend(more);
    }
    let mut recipe = Vec::new();
    for f in &files {
        recipe.extend_from_slice(
            f.strip_prefix(&lab)
                .unwrap_or(f)
                .to_string_lossy()
                .as_bytes(),
        );
        recipe.push(0);
        recipe.extend(std::fs::read(f).map_err(|e| format!("{}: {e}", f.display()))?);
    }
    let hash = ibi_hash(&recipe);
    let dir = cache_dir().join("lab");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let product = dir.join(format!("{name}-{}.{ext}", &hash[..16]));
    let lock_file =
        std::fs::File::create(dir.join(format!("{name}.lock"))).map_err(|e| e.to_string())?;
    rustix::fs::flock(&lock_file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| e.to_string())?;
    if product.is_file() {
        return Ok(product);
    }
    eprintln!("lab: building {} (once per machine)", product.display());
    let started = Instant::now();
    run(
        Command::new("bash").arg(lab.join(script)).arg(&product),
        BUILD_TIMEOUT,
    )?;
    eprintln!(
        "lab: {} built in {:.0?}",
        product.display(),
        started.elapsed()
    );
    for e in std::fs::read_dir(&dir)
        .map_err(|e| e.to_string())?
        .flatten()
    {
        let p = e.path();
        let file = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if file.starts_with(&format!("{name}-"))
            && file.ends_with(&format!(".{ext}"))
            && p != product
        {
            let _ = std::fs::remove_file(&p);
        }
    }
    Ok(product)
}

/// `seed-fixtures/make-real-seed.sh OUT VERSION [PRECACHE]` with `env` (each value a file's path,
/// or with [`SeedEnv::Text`] a value of its own), copied into `out` (and `precache`) from
/// `~/.cache/ibi/lab/seed-<hash>/`, where it is made once per machine: the script is deterministic
/// (its header: the same tools give the same digests), so every test of a run and every later run
/// with the same script and inputs gets the same seed, bit for bit, without committing the seed
/// tree again (about 20 s of CPU each). The hash covers the script, the version, whether precache
/// images are made, and each variable's name and value (a file's by its contents).
pub fn real_seed(
    out: &Path,
    version: &str,
    precache: Option<&Path>,
    env: &[(&str, SeedEnv)],
) -> Result<(), String> {
    let script = super::agent::fixture("make-real-seed.sh");
    let mut recipe = std::fs::read(&script).map_err(|e| format!("{}: {e}", script.display()))?;
    recipe.extend_from_slice(format!("\0{version}\0{}\0", precache.is_some()).as_bytes());
    for (name, value) in env {
        recipe.extend_from_slice(name.as_bytes());
        recipe.push(0);
        match value {
            SeedEnv::File(p) => recipe.extend_from_slice(
                ibi_hash(&std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?)
                    .as_bytes(),
            ),
            SeedEnv::Text(t) => recipe.extend_from_slice(t.as_bytes()),
        }
        recipe.push(0);
    }
    let hash = ibi_hash(&recipe);
    let dir = cache_dir().join("lab");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    // seed-<the script's hash>-<the whole recipe's>: seeds of an older script go when one is made.
    let script_hash = ibi_hash(&std::fs::read(&script).map_err(|e| e.to_string())?);
    let same_script = format!("seed-{}-", &script_hash[..8]);
    let product = dir.join(format!("{same_script}{}", &hash[..16]));
    let lock_file = std::fs::File::create(dir.join("seed.lock")).map_err(|e| e.to_string())?;
    rustix::fs::flock(&lock_file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| e.to_string())?;
    if !product.join("done").is_file() {
        for e in std::fs::read_dir(&dir)
            .map_err(|e| e.to_string())?
            .flatten()
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("seed-") && !name.starts_with(&same_script) && e.path().is_dir() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let started = Instant::now();
        let _ = std::fs::remove_dir_all(&product);
        std::fs::create_dir_all(&product).map_err(|e| e.to_string())?;
        let mut make = Command::new(&script);
        make.arg(product.join("seed")).arg(version);
        if precache.is_some() {
            make.arg(product.join("precache"));
        }
        for (name, value) in env {
            match value {
                SeedEnv::File(p) => make.env(name, p),
                SeedEnv::Text(t) => make.env(name, t),
            };
        }
        run(&mut make, BUILD_TIMEOUT)?;
        std::fs::write(product.join("done"), b"").map_err(|e| e.to_string())?;
        eprintln!(
            "lab: made the seed {} in {:.0?} (kept for later tests and runs)",
            product.display(),
            started.elapsed()
        );
    }
    let copy = |from: &Path, to: &Path| {
        run(
            Command::new("cp").arg("-a").arg(from).arg(to),
            Duration::from_secs(300),
        )
        .map(|_| ())
    };
    copy(&product.join("seed"), out)?;
    if let Some(precache) = precache {
        copy(&product.join("precache"), precache)?;
    }
    Ok(())
}

/// A variable of [`real_seed`]'s `make-real-seed.sh`.
pub enum SeedEnv<'a> {
    /// A file's path: its contents are part of the seed's recipe.
    File(&'a Path),
    /// A value of its own.
    Text(&'a str),
}

fn ibi_hash(bytes: &[u8]) -> String {
    super::deliver::sha256(bytes)
}

/// Whether QEMU can use hardware virtualisation here (a real VT-x/AMD-V module, not PVM).
fn kvm_usable() -> bool {
    match std::env::var("IBI_LAB_ACCEL").as_deref() {
        Ok("kvm") => return true,
        Ok("tcg") => return false,
        _ => {}
    }
    Path::new("/sys/module/kvm_intel").exists() || Path::new("/sys/module/kvm_amd").exists()
}

/// The VMs' vCPUs: `IBI_LAB_VCPUS` (1 to 8), else 2. Under TCG QEMU runs each vCPU on a thread of
/// its own (MTTCG, its default for an x86 guest on an x86 host), so the guest's parallel work
/// (systemd's start, the agent's restore) uses both of this machine's cores; one VM runs at a time.
/// docs/performance.md, "The lab", has what the second one bought. A test may set [`Lab::vcpus`].
fn vcpus() -> u32 {
    std::env::var("IBI_LAB_VCPUS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| (1..=8).contains(n))
        .unwrap_or(2)
}

struct Daemon {
    name: &'static str,
    pid: i32,
}

/// A running lab: daemons, pool, emulator, domains.
pub struct Lab {
    pub dir: tempfile::TempDir,
    daemons: Vec<Daemon>,
    /// `/dev/kvm`'s gid and mode before the lab changed them.
    kvm: Option<(u32, u32)>,
    pool: Option<String>,
    domains: Vec<String>,
    pub emulator: Option<Emulator>,
    /// The vCPUs of the VMs defined from here on.
    pub vcpus: u32,
}

/// One virtio disk of a lab VM (see [`Lab::define_disks`]).
pub struct VmDisk<'a> {
    pub path: &'a Path,
    pub serial: Option<&'a str>,
    pub read_only: bool,
}

fn disks_xml(disks: &[VmDisk]) -> String {
    let mut xml = String::new();
    for (i, d) in disks.iter().enumerate() {
        let dev = format!("vd{}", char::from(b'a' + i as u8));
        let boot = if i == 0 {
            "\n      <boot order='1'/>"
        } else {
            ""
        };
        let serial = d
            .serial
            .map_or(String::new(), |s| format!("\n      <serial>{s}</serial>"));
        let ro = if d.read_only {
            "\n      <readonly/>"
        } else {
            ""
        };
        xml.push_str(&format!(
            "    <disk type='file' device='disk'>\n      <driver name='qemu' type='raw'/>\n      \
             <source file='{}'/>\n      <target dev='{dev}' bus='virtio'/>{serial}{ro}{boot}\n    </disk>\n",
            d.path.display()
        ));
    }
    xml
}

/// A defined VM.
pub struct Domain {
    pub name: String,
    pub uuid: String,
    pub serial: PathBuf,
}

impl Lab {
    /// The lab; fails the test ([`super::missing`]) where it cannot run.
    pub fn start(test: &str) -> Option<Lab> {
        if let Some(why) = unavailable() {
            super::missing(test, &why);
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix(PREFIX)
            .tempdir_in("/var/tmp")
            .expect("lab dir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("lab dir mode");
        let mut lab = Lab {
            dir,
            daemons: Vec::new(),
            kvm: None,
            pool: None,
            domains: Vec::new(),
            emulator: None,
            vcpus: vcpus(),
        };
        lab.open_kvm();
        lab.start_daemons();
        sweep_leftovers();
        lab.define_pool();
        Some(lab)
    }

    /// libvirt's cache check runs as `libvirt-qemu`: without udev `/dev/kvm` stays root-only and
    /// libvirtd re-probes QEMU on every call (minutes per Redfish request).
    fn open_kvm(&mut self) {
        let kvm = Path::new("/dev/kvm");
        let Ok(meta) = std::fs::metadata(kvm) else {
            return;
        };
        let Some(gid) = group_id("kvm") else { return };
        if meta.gid() == gid && meta.mode() & 0o060 == 0o060 {
            return;
        }
        self.kvm = Some((meta.gid(), meta.mode() & 0o7777));
        let _ = rustix::fs::chown(kvm, None, Some(as_gid(gid)));
        let _ = std::fs::set_permissions(kvm, std::fs::Permissions::from_mode(0o660));
    }

    fn start_daemons(&mut self) {
        // Daemons a killed lab run started (and so never stopped) are this run's to stop.
        for (name, pid) in read_started() {
            self.daemons.push(Daemon { name, pid });
        }
        // libvirt's NAT network would bring up a bridge and dnsmasq: never started (tests/run removes
        // its autostart link; this is the same guard for a machine set up by hand).
        let _ = std::fs::remove_file("/etc/libvirt/qemu/networks/autostart/default.xml");
        for (name, pid_file) in [
            ("virtlogd", "/run/virtlogd.pid"),
            ("libvirtd", "/run/libvirtd.pid"),
        ] {
            if running_pid(pid_file).is_some() {
                continue;
            }
            // Without the descriptors this process inherited (a `flock` around cargo, say): a daemon
            // that outlives the test would hold them.
            run(
                Command::new("bash")
                    .arg("-c")
                    .arg(CLOSE_INHERITED_THEN_EXEC)
                    .arg(name)
                    .arg("-d"),
                DAEMON_TIMEOUT,
            )
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
            let deadline = Instant::now() + DAEMON_TIMEOUT;
            let pid = loop {
                if let Some(pid) = running_pid(pid_file) {
                    break pid;
                }
                assert!(Instant::now() < deadline, "{name} wrote no PID file");
                std::thread::sleep(Duration::from_millis(100));
            };
            self.daemons.push(Daemon { name, pid });
            write_started(&self.daemons);
        }
        // The first call waits for QEMU's capability probe.
        let deadline = Instant::now() + DAEMON_TIMEOUT;
        while virsh(&["version"]).is_err() {
            assert!(Instant::now() < deadline, "libvirtd did not answer");
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn define_pool(&mut self) {
        let name = format!("{PREFIX}{}", std::process::id());
        let path = self.dir.path().join("pool");
        std::fs::create_dir(&path).expect("pool dir");
        let xml = self.dir.path().join("pool.xml");
        std::fs::write(
            &xml,
            format!(
                "<pool type='dir'><name>{name}</name><target><path>{}</path></target></pool>",
                path.display()
            ),
        )
        .expect("pool xml");
        virsh(&["pool-define", xml.to_str().unwrap()]).expect("pool-define");
        self.pool = Some(name.clone());
        virsh(&["pool-start", &name]).expect("pool-start");
    }

    /// Defines a VM named `PREFIX<name>` booting `disk` (raw), powered off.
    pub fn define(&mut self, name: &str, disk: &Path) -> Domain {
        self.define_disks(
            name,
            &[VmDisk {
                path: disk,
                serial: None,
                read_only: false,
            }],
        )
    }

    /// [`Lab::define`] with several virtio disks: the first (`vda`) boots, the others follow as
    /// `vdb`, `vdc`, ...; a disk's `serial` names it in the guest (`/dev/disk/by-id/virtio-SERIAL`).
    pub fn define_disks(&mut self, name: &str, disks: &[VmDisk]) -> Domain {
        self.define_with(name, disks, false)
    }

    /// [`Lab::define_disks`] with UEFI firmware (OVMF 4M, no secure boot, its variables from the
    /// template sushy-tools' boot-loader map names; ACPI, which libvirt requires with it), as the
    /// hosts of an image-based install boot: the emulator then reports `BootSourceOverrideMode:
    /// UEFI` and ibi keeps it so.
    pub fn define_uefi(&mut self, name: &str, disks: &[VmDisk]) -> Domain {
        self.define_with(name, disks, true)
    }

    fn define_with(&mut self, name: &str, disks: &[VmDisk], uefi: bool) -> Domain {
        let (firmware, features) = if uefi {
            (
                "<loader readonly='yes' type='pflash'>/usr/share/OVMF/OVMF_CODE_4M.fd</loader>\
                 <nvram template='/usr/share/OVMF/OVMF_VARS_4M.fd'/>",
                "\n  <features><acpi/></features>",
            )
        } else {
            ("", "")
        };
        let name = format!("{PREFIX}{name}-{}", std::process::id());
        let serial = self.dir.path().join(format!("{name}.serial.log"));
        let (kind, cpu) = if kvm_usable() {
            ("kvm", "<cpu mode='host-passthrough'/>")
        } else {
            ("qemu", "<cpu mode='maximum'/>")
        };
        let xml = format!(
            "<domain type='{kind}'>
  <name>{name}</name>
  <memory unit='MiB'>2048</memory>
  <vcpu>{vcpus}</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type>{firmware}</os>{features}
  {cpu}
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <devices>
{disks}    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <target dev='sda' bus='sata'/>
      <readonly/>
    </disk>
    <serial type='file'>
      <source path='{serial}' append='on'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>",
            disks = disks_xml(disks),
            serial = serial.display(),
            vcpus = self.vcpus
        );
        let file = self.dir.path().join(format!("{name}.xml"));
        std::fs::write(&file, xml).expect("domain xml");
        virsh(&["define", file.to_str().unwrap()]).expect("virsh define");
        self.domains.push(name.clone());
        let uuid = virsh(&["domuuid", &name])
            .expect("domuuid")
            .trim()
            .to_string();
        Domain { name, uuid, serial }
    }

    /// The emulator (libvirt driver) for `domain`, started once.
    pub fn start_emulator(&mut self, domain: &Domain) -> &Emulator {
        let pool = self.pool.clone().expect("pool");
        let config = format!(
            "SUSHY_EMULATOR_LIBVIRT_URI = '{URI}'\n\
             SUSHY_EMULATOR_STORAGE_POOL = '{pool}'\n\
             SUSHY_EMULATOR_VMEDIA_VERIFY_SSL = False\n\
             SUSHY_EMULATOR_ALLOWED_INSTANCES = ['{}', '{}']\n\
             SUSHY_EMULATOR_BOOT_LOADER_MAP = {{'UEFI': {{'x86_64': '/usr/share/OVMF/OVMF_CODE_4M.fd'}}, 'Legacy': {{'x86_64': None}}}}\n\
             SUSHY_EMULATOR_SECURE_BOOT_DISABLED_NVRAM = '/usr/share/OVMF/OVMF_VARS_4M.fd'\n\
             SUSHY_EMULATOR_SECURE_BOOT_ENABLED_NVRAM = '/usr/share/OVMF/OVMF_VARS_4M.ms.fd'\n",
            domain.name, domain.uuid
        );
        self.emulator = Some(Emulator::start_libvirt(&sushy_bin(), &domain.uuid, &config));
        self.emulator.as_ref().unwrap()
    }

    /// Powers the VM on as it is defined (`virsh start`): what a BMC's power-on does.
    pub fn power_on(&self, domain: &Domain) {
        virsh(&["start", &domain.name]).expect("virsh start");
    }

    /// `virsh domstate`: `running`, `shut off`, ...
    pub fn state(&self, domain: &Domain) -> String {
        virsh(&["domstate", &domain.name])
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|e| e)
    }

    /// Waits until the VM is off; false when `within` ran out.
    pub fn wait_off(&self, domain: &Domain, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.state(domain) == "shut off" {
                return true;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        false
    }

    /// The persistent definition (what sushy changed: media, boot order).
    pub fn definition(&self, domain: &Domain) -> String {
        virsh(&["dumpxml", "--inactive", &domain.name]).unwrap_or_else(|e| e)
    }
}

/// The serial log of `domain` so far: every boot's, one after the other (the file source appends,
/// so a one-shot's install is still there after deploy boots the disk).
pub fn serial(domain: &Domain) -> String {
    String::from_utf8_lossy(&std::fs::read(&domain.serial).unwrap_or_default()).into_owned()
}

/// Waits for `marker` on the VM's serial console; false when `within` ran out.
pub fn wait_serial(domain: &Domain, marker: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if serial(domain).contains(marker) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    false
}

impl Drop for Lab {
    fn drop(&mut self) {
        for name in self.domains.drain(..) {
            let _ = virsh(&["destroy", &name]);
            let _ = virsh(&["undefine", "--nvram", &name]);
        }
        self.emulator = None;
        if let Some(pool) = self.pool.take() {
            if let Ok(vols) = virsh(&["vol-list", "--pool", &pool, "--name"]) {
                for v in vols.lines().map(str::trim).filter(|v| !v.is_empty()) {
                    let _ = virsh(&["vol-delete", "--pool", &pool, v]);
                }
            }
            let _ = virsh(&["pool-destroy", &pool]);
            let _ = virsh(&["pool-undefine", &pool]);
        }
        // libvirtd before virtlogd, each by the PID it wrote, only if this lab started it.
        for d in self.daemons.drain(..).rev() {
            let pid = rustix::process::Pid::from_raw(d.pid).expect("pid");
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            let deadline = Instant::now() + DAEMON_TIMEOUT;
            while Path::new(&format!("/proc/{}", d.pid)).exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            if Path::new(&format!("/proc/{}", d.pid)).exists() {
                eprintln!("lab: {} (PID {}) did not stop; killing it", d.name, d.pid);
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        let _ = std::fs::remove_file(STARTED_FILE);
        if let Some((gid, mode)) = self.kvm.take() {
            let kvm = Path::new("/dev/kvm");
            let _ = rustix::fs::chown(kvm, None, Some(as_gid(gid)));
            let _ = std::fs::set_permissions(kvm, std::fs::Permissions::from_mode(mode));
        }
    }
}

/// The daemons the lab started, while they run: a run killed before its cleanup leaves the next
/// run this list, so what it started is still stopped by PID.
const STARTED_FILE: &str = "/run/ibi-lab-daemons";

fn write_started(daemons: &[Daemon]) {
    let text: String = daemons
        .iter()
        .map(|d| format!("{} {}\n", d.name, d.pid))
        .collect();
    let _ = std::fs::write(STARTED_FILE, text);
}

fn read_started() -> Vec<(&'static str, i32)> {
    let text = std::fs::read_to_string(STARTED_FILE).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (name, pid) = l.split_once(' ')?;
            let name = ["virtlogd", "libvirtd"].into_iter().find(|n| *n == name)?;
            let pid: i32 = pid.trim().parse().ok()?;
            // Still that daemon (a PID can be reused).
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            (comm.trim() == name).then_some((name, pid))
        })
        .collect()
}

/// Domains and pools of an earlier lab run that was killed before its cleanup (named
/// [`PREFIX`]...; never anything else).
fn sweep_leftovers() {
    if let Ok(names) = virsh(&["list", "--all", "--name"]) {
        for name in names
            .lines()
            .map(str::trim)
            .filter(|n| n.starts_with(PREFIX))
        {
            eprintln!("lab: removing domain {name} left by an earlier run");
            let _ = virsh(&["destroy", name]);
            let _ = virsh(&["undefine", "--nvram", name]);
        }
    }
    if let Ok(names) = virsh(&["pool-list", "--all", "--name"]) {
        for pool in names
            .lines()
            .map(str::trim)
            .filter(|n| n.starts_with(PREFIX))
        {
            eprintln!("lab: removing storage pool {pool} left by an earlier run");
            if let Ok(vols) = virsh(&["vol-list", "--pool", pool, "--name"]) {
                for v in vols.lines().map(str::trim).filter(|v| !v.is_empty()) {
                    let _ = virsh(&["vol-delete", "--pool", pool, v]);
                }
            }
            let _ = virsh(&["pool-destroy", pool]);
            let _ = virsh(&["pool-undefine", pool]);
        }
    }
}

/// The PID in `file` if that process runs.
fn running_pid(file: &str) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(file).ok()?.trim().parse().ok()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}

fn group_id(name: &str) -> Option<u32> {
    std::fs::read_to_string("/etc/group")
        .ok()?
        .lines()
        .find_map(|l| {
            let mut f = l.split(':');
            (f.next()? == name).then(|| f.nth(1)?.parse().ok())?
        })
}

fn as_gid(gid: u32) -> rustix::fs::Gid {
    rustix::fs::Gid::from_raw(gid)
}

/// A copy of the cached guest disk that a test changes before the boot and reads after it.
pub struct Disk {
    pub path: PathBuf,
}

impl Disk {
    /// A sparse copy of `base` at `path`.
    pub fn copy_of(base: &Path, path: &Path) -> Disk {
        run(
            Command::new("cp")
                .arg("--sparse=always")
                .arg(base)
                .arg(path),
            Duration::from_secs(300),
        )
        .expect("copying the guest disk");
        Disk {
            path: path.to_path_buf(),
        }
    }

    /// Its root filesystem mounted at `at` (read-only or not) while `f` runs; unmounted and the
    /// loop device detached afterwards, also if `f` panics.
    pub fn with_root<T>(&self, at: &Path, read_only: bool, f: impl FnOnce(&Path) -> T) -> T {
        let mounted = Mounted::new(&self.path, at, read_only);
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mounted.at)));
        drop(mounted);
        out.unwrap_or_else(|p| std::panic::resume_unwind(p))
    }
}

struct Mounted {
    device: String,
    at: PathBuf,
    mounted: bool,
}

impl Mounted {
    fn new(image: &Path, at: &Path, read_only: bool) -> Mounted {
        std::fs::create_dir_all(at).expect("mount point");
        let device = run(
            Command::new("losetup").args(["-f", "--show"]).arg(image),
            Duration::from_secs(30),
        )
        .expect("losetup")
        .trim()
        .to_string();
        let mut m = Mounted {
            device,
            at: at.to_path_buf(),
            mounted: false,
        };
        run(
            Command::new("partx").args(["-a", &m.device]),
            Duration::from_secs(30),
        )
        .expect("partx -a");
        let part = format!("{}p1", m.device);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !Path::new(&part).exists() {
            assert!(Instant::now() < deadline, "{part} never appeared");
            std::thread::sleep(Duration::from_millis(100));
        }
        let opts = if read_only { "ro,noload" } else { "rw" };
        run(
            Command::new("mount")
                .args(["-t", "ext4", "-o", opts, &part])
                .arg(at),
            Duration::from_secs(30),
        )
        .expect("mount");
        m.mounted = true;
        m
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.mounted {
            let _ = run(
                Command::new("umount").arg(&self.at),
                Duration::from_secs(60),
            );
        }
        let _ = run(
            Command::new("partx").args(["-d", &self.device]),
            Duration::from_secs(30),
        );
        let _ = run(
            Command::new("losetup").args(["-d", &self.device]),
            Duration::from_secs(30),
        );
    }
}
