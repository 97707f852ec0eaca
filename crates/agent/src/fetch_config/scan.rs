//! Finding the configuration device: every block device the kernel lists in
//! `/sys/class/block` (whole disks and partitions alike, unlike post-pivot's `lsblk` which sees
//! only top-level devices), probed read-only for its label. Waiting is event-driven where the
//! kernel offers it (inotify on `/dev` wakes us when a device node appears) and bounded polling
//! otherwise: a medium inserted into an existing `sr0` creates no node, so the poll stays.

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::inotify;

use super::label::{PROBE_LEN, Probe, parse_label};

/// Every block device the kernel knows, disks and partitions alike, relative to the root.
pub(crate) const SYS_CLASS_BLOCK: &str = "sys/class/block";
/// devtmpfs: the kernel creates a node here for each device (DEVNAME), with or without udev.
pub(crate) const DEV_DIR: &str = "dev";

/// How often the journal hears that we are still waiting.
pub(crate) const NOTE_EVERY: Duration = Duration::from_secs(30);

/// A block device carrying one of the wanted labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// Kernel name (`sr0`, `sda2`, `loop3`).
    pub(crate) name: String,
    /// The device node we read or mount.
    pub(crate) dev: PathBuf,
    pub(crate) probe: Probe,
}

/// One entry of `/sys/class/block` worth probing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub(crate) name: String,
    pub(crate) dev: PathBuf,
}

/// What to look for and where.
pub(crate) struct ScanSpec<'a> {
    /// `/` in production; sysfs and device nodes are found below it.
    pub(crate) root: &'a Path,
    /// Accepted labels in order of preference, compared exactly (post-pivot does the same).
    pub(crate) labels: &'a [String],
    /// When non-empty, only these kernel names are probed (tests restrict the scan to their own
    /// loop devices so the host's disks are never opened).
    pub(crate) only: &'a [String],
}

/// Block devices worth probing, sorted by kernel name. Detached loop devices report size 0 and
/// are skipped without being opened.
pub(crate) fn list_candidates(root: &Path, only: &[String]) -> Result<Vec<Candidate>> {
    let class = root.join(SYS_CLASS_BLOCK);
    let entries =
        std::fs::read_dir(&class).with_context(|| format!("listing {}", class.display()))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", class.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !only.is_empty() && !only.contains(&name) {
            continue;
        }
        let sys = entry.path();
        if !worth_probing(&sys) {
            continue;
        }
        let devname = read_trimmed(&sys.join("uevent"))
            .and_then(|u| devname_from_uevent(&u))
            .unwrap_or_else(|| name.clone());
        let dev = root.join(DEV_DIR).join(devname);
        out.push(Candidate { name, dev });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// A device with a size, or a removable one: without udisks nobody polls an optical drive, so
/// its size stays 0 until someone opens it; opening it (read-only) makes the kernel look for a
/// medium, and fails quietly with ENOMEDIUM when there is none.
fn worth_probing(sys: &Path) -> bool {
    let sized = read_trimmed(&sys.join("size")).is_some_and(|s| s != "0");
    sized || read_trimmed(&sys.join("removable")).as_deref() == Some("1")
}

/// `DEVNAME=` from a sysfs `uevent` file: the node name devtmpfs created under `/dev`.
pub(crate) fn devname_from_uevent(uevent: &str) -> Option<String> {
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .filter(|n| !n.is_empty() && !n.split('/').any(|c| c == ".."))
        .map(str::to_string)
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Reads the first bytes of a device (opened read-only) and recognises its filesystem.
pub(crate) fn probe_device(dev: &Path) -> Result<Option<Probe>> {
    let file = File::open(dev).with_context(|| format!("opening {}", dev.display()))?;
    let mut head = Vec::with_capacity(PROBE_LEN);
    file.take(PROBE_LEN as u64)
        .read_to_end(&mut head)
        .with_context(|| format!("reading {}", dev.display()))?;
    Ok(parse_label(&head))
}

/// One pass over the devices. Unreadable devices (no medium, permission) are skipped: they may
/// become readable later, and one bad disk must not hide the configuration device.
pub(crate) fn find_labelled(spec: &ScanSpec<'_>) -> Result<Option<Found>> {
    let mut hits = Vec::new();
    for c in list_candidates(spec.root, spec.only)? {
        match probe_device(&c.dev) {
            Ok(Some(probe)) if spec.labels.contains(&probe.label) => hits.push(Found {
                name: c.name,
                dev: c.dev,
                probe,
            }),
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(target: "ibi::agent::fetch_config::scan",
                    "skipping {}: {e:#}", c.name)
            }
        }
    }
    Ok(choose(hits, spec.labels))
}

/// The first device by label preference, then kernel name; more than one is worth a warning.
fn choose(hits: Vec<Found>, labels: &[String]) -> Option<Found> {
    let rank = |f: &Found| labels.iter().position(|l| *l == f.probe.label);
    let best = hits
        .iter()
        .min_by_key(|f| (rank(f), f.name.clone()))?
        .clone();
    if hits.len() > 1 {
        let names: Vec<&str> = hits.iter().map(|f| f.name.as_str()).collect();
        tracing::warn!(target: "ibi::agent::fetch_config::scan",
            "several configuration devices found ({}); using {}",
            names.join(", "),
            best.name
        );
    }
    Some(best)
}

/// Waits until a labelled device appears, or `timeout` (None: forever, like post-pivot) passes.
pub(crate) fn wait_for_device(
    spec: &ScanSpec<'_>,
    timeout: Option<Duration>,
    poll_every: Duration,
) -> Result<Found> {
    let start = Instant::now();
    let mut noted = start;
    let watch = DevWatch::new(&spec.root.join(DEV_DIR));
    let wanted = spec.labels.join(" or ");
    loop {
        if let Some(found) = find_labelled(spec)? {
            return Ok(found);
        }
        let waited = start.elapsed();
        if start == noted || noted.elapsed() >= NOTE_EVERY {
            tracing::info!(target: "ibi::agent::fetch_config::scan",
                "waiting for a block device labelled {wanted} ({}s so far)",
                waited.as_secs()
            );
            noted = Instant::now();
        }
        let nap = match timeout {
            Some(t) if waited >= t => {
                bail!("no block device labelled {wanted} appeared within {t:?}")
            }
            Some(t) => poll_every.min(t - waited),
            None => poll_every,
        };
        watch.wait(nap);
    }
}

/// inotify on `/dev`: a new device node ends the nap early. Without it (no `/dev`, inotify
/// unavailable) the nap is a plain sleep.
struct DevWatch {
    fd: Option<OwnedFd>,
}

impl DevWatch {
    fn new(dev: &Path) -> Self {
        let flags = inotify::WatchFlags::CREATE | inotify::WatchFlags::MOVED_TO;
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)
            .and_then(|fd| inotify::add_watch(&fd, dev, flags).map(|_| fd));
        match fd {
            Ok(fd) => Self { fd: Some(fd) },
            Err(e) => {
                tracing::debug!(target: "ibi::agent::fetch_config::scan",
                    "no inotify on {}: {e}; polling only", dev.display());
                Self { fd: None }
            }
        }
    }

    fn wait(&self, nap: Duration) {
        let Some(fd) = &self.fd else {
            std::thread::sleep(nap);
            return;
        };
        let Ok(ts) = Timespec::try_from(nap) else {
            std::thread::sleep(nap);
            return;
        };
        let mut fds = [PollFd::new(fd, PollFlags::IN)];
        match poll(&mut fds, Some(&ts)) {
            // Give the new node a moment to get its final owner and mode before we open it.
            Ok(n) if n > 0 => std::thread::sleep(Duration::from_millis(100).min(nap)),
            Ok(_) => {}
            Err(_) => std::thread::sleep(nap),
        }
        drain(fd);
    }
}

/// Empties the queue so the next poll sleeps until a new event.
fn drain(fd: &OwnedFd) {
    let mut buf = [0u8; 4096];
    while matches!(rustix::io::read(fd, &mut buf), Ok(n) if n > 0) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A fake root with `/sys/class/block/<name>/{size,uevent}` and `/dev/<devname>` files.
    fn fake_root(devices: &[(&str, &str, Option<&str>, &[u8])]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (name, size, devname, content) in devices {
            let sys = root.path().join("sys/class/block").join(name);
            fs::create_dir_all(&sys).unwrap();
            fs::write(sys.join("size"), format!("{size}\n")).unwrap();
            let node = devname.unwrap_or(name);
            let uevent = format!("MAJOR=7\nMINOR=0\nDEVNAME={node}\nDEVTYPE=disk\n");
            fs::write(sys.join("uevent"), uevent).unwrap();
            let dev = root.path().join("dev").join(node);
            fs::create_dir_all(dev.parent().unwrap()).unwrap();
            fs::write(dev, content).unwrap();
        }
        root
    }

    fn ext4(label: &str) -> Vec<u8> {
        let mut head = vec![0u8; 4096];
        head[1024 + 56..1024 + 58].copy_from_slice(&0xEF53u16.to_le_bytes());
        head[1024 + 120..1024 + 120 + label.len()].copy_from_slice(label.as_bytes());
        head
    }

    fn labels() -> Vec<String> {
        vec!["cluster-config".into(), "relocation-config".into()]
    }

    #[test]
    fn lists_sized_devices_sorted_with_devnames() {
        let root = fake_root(&[
            ("sdb", "100", None, b""),
            ("loop0", "0", None, b""),
            ("nvme0n1p2", "8", Some("nvme0n1p2"), b""),
            ("dm-0", "8", Some("mapper/odd"), b""),
            ("sr0", "0", None, b""),
            ("sr1", "0", None, b""),
        ]);
        fs::write(root.path().join("sys/class/block/sr0/removable"), "1\n").unwrap();
        fs::write(root.path().join("sys/class/block/sr1/removable"), "0\n").unwrap();
        let got = list_candidates(root.path(), &[]).unwrap();
        let names: Vec<_> = got.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["dm-0", "nvme0n1p2", "sdb", "sr0"]);
        assert_eq!(got[0].dev, root.path().join("dev/mapper/odd"));
        let only = list_candidates(root.path(), &["sdb".to_string()]).unwrap();
        assert_eq!(only.len(), 1);
    }

    #[test]
    fn finds_partitions_prefers_cluster_config_and_skips_unreadable() {
        let root = fake_root(&[
            ("sda", "100", None, &ext4("root")),
            ("sda4", "100", None, &ext4("legacy-cfg")),
            ("sdb1", "100", None, &ext4("cluster-config")),
            ("sdc", "100", None, &ext4("Cluster-Config")),
        ]);
        fs::remove_file(root.path().join("dev/sda")).unwrap();
        // ext labels hold 16 bytes: "relocation-config" cannot be one, so a short stand-in.
        let labels = vec!["cluster-config".to_string(), "legacy-cfg".to_string()];
        let spec = ScanSpec {
            root: root.path(),
            labels: &labels,
            only: &[],
        };
        let found = find_labelled(&spec).unwrap().unwrap();
        assert_eq!(found.name, "sdb1");
        assert_eq!(found.dev, root.path().join("dev/sdb1"));
        let only = ["sda4".to_string()];
        let spec = ScanSpec {
            only: &only,
            ..spec
        };
        assert_eq!(find_labelled(&spec).unwrap().unwrap().name, "sda4");
    }

    #[test]
    fn times_out_with_a_clear_message() {
        let root = fake_root(&[("sda", "100", None, &ext4("root"))]);
        let labels = labels();
        let spec = ScanSpec {
            root: root.path(),
            labels: &labels,
            only: &[],
        };
        let t = Duration::from_millis(50);
        let err = wait_for_device(&spec, Some(t), Duration::from_millis(10)).unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "no block device labelled cluster-config or relocation-config appeared within 50ms"
        );
    }

    #[test]
    fn wakes_when_a_device_appears() {
        let root = fake_root(&[("sda", "100", None, &ext4("root"))]);
        let path = root.path().to_path_buf();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let sys = path.join("sys/class/block/sr0");
            fs::create_dir_all(&sys).unwrap();
            fs::write(path.join("dev/sr0"), ext4("cluster-config")).unwrap();
            fs::write(sys.join("uevent"), "DEVNAME=sr0\n").unwrap();
            fs::write(sys.join("size"), "100\n").unwrap();
        });
        let labels = labels();
        let spec = ScanSpec {
            root: root.path(),
            labels: &labels,
            only: &[],
        };
        let found = wait_for_device(
            &spec,
            Some(Duration::from_secs(10)),
            Duration::from_millis(20),
        );
        writer.join().unwrap();
        assert_eq!(found.unwrap().name, "sr0");
    }

    #[test]
    fn devname_ignores_traversal() {
        assert_eq!(devname_from_uevent("DEVNAME=sr0"), Some("sr0".into()));
        assert_eq!(devname_from_uevent("DEVNAME=../etc/x"), None);
        assert_eq!(devname_from_uevent("MAJOR=1"), None);
    }
}
