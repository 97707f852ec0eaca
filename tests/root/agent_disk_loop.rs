//! The disk layer against real loop devices, as root: a small RHCOS-like metal image (BIOS-BOOT,
//! EFI-SYSTEM, boot, root) written by sfdisk into a file, then grown to a bigger "disk" the way
//! coreos-installer leaves a disk (backup GPT where the image ended) and attached as a loop device.
//! The extra partition is added and root grown through the agent's code; sfdisk and sgdisk check
//! the result read-only. The partition is reached through a loop device over its byte range (this
//! kernel exposes no partitions of loop devices), formatted, mounted and written. Re-runs must
//! leave the table byte-identical. Every loop device the test attaches is detached, also when it
//! fails. Needs root, loop devices, sfdisk, sgdisk and mkfs.xfs; without them the test fails, naming
//! what is missing.

#![cfg(all(feature = "agent", target_os = "linux"))]
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::Path;
use std::process::Command;

use ibi::agent::disk::{
    LoopDevice, Mount, PartitionDevice, PartitionInfo, add_partition, find_partition,
    find_partition_by_label, grow_partition, mkfs_xfs, parse_partition_start,
};

const MIB: u64 = 1024 * 1024;
const IMAGE_BYTES: u64 = 1024 * MIB;
const DISK_BYTES: u64 = 2048 * MIB;
const LINUX_FS: &str = "0FC63DAF-8483-4772-8E79-3D69D8477DE4";
const EXTRA: &str = "var-lib-containers";
const BOOT_CODE: &[u8] = b"IBI-TEST-BOOT-CODE";

/// The RHCOS metal layout, scaled down; root fills the image.
const LAYOUT: &str = "label: gpt
first-lba: 34
start=2048, size=2048, type=21686148-6449-6E6F-744E-656564454649, name=\"BIOS-BOOT\"
start=4096, size=260096, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=\"EFI-SYSTEM\"
start=264192, size=786432, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=\"boot\"
start=1050624, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=\"root\"
";

/// False, or the test fails ([`common::missing`]), without root, loop devices or the tools.
fn should_skip(test: &str) -> bool {
    !(common::require_root(test)
        && common::require_tools(test, &["losetup", "sfdisk", "sgdisk", "mkfs.xfs"])
        && loop_devices(test))
}

fn loop_devices(test: &str) -> bool {
    let loop_ok = Command::new("losetup")
        .arg("-f")
        .output()
        .is_ok_and(|o| o.status.success());
    if Path::new("/dev/loop-control").exists() && loop_ok {
        return true;
    }
    common::missing(test, "no loop devices (/dev/loop-control, losetup -f)");
    false
}

fn run(program: &str, args: &[&str], stdin: Option<&str>) -> String {
    let mut child = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {program}: {e}"));
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{program} {args:?}: {stderr}");
    format!("{stdout}{stderr}")
}

/// Writes the metal image into `img` and grows the file to the disk size.
fn make_metal_image(img: &Path) {
    File::create(img).unwrap().set_len(IMAGE_BYTES).unwrap();
    run("sfdisk", &["-q", img.to_str().unwrap()], Some(LAYOUT));
    let mut f = OpenOptions::new().write(true).open(img).unwrap();
    f.write_all(BOOT_CODE).unwrap();
    f.set_len(DISK_BYTES).unwrap();
}

fn read_bytes(img: &Path, offset: u64, len: usize) -> Vec<u8> {
    let mut f = File::open(img).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    let mut buf = vec![0u8; len];
    f.read_exact(&mut buf).unwrap();
    buf
}

/// Both GPT copies and the MBR: what a re-run must leave byte-identical.
fn table_bytes(img: &Path) -> Vec<u8> {
    let mut b = read_bytes(img, 0, 34 * 512);
    b.extend(read_bytes(img, DISK_BYTES - 33 * 512, 33 * 512));
    b
}

/// `sfdisk --json` of the image, as checked values.
fn sfdisk_json(img: &Path) -> serde_json::Value {
    let out = Command::new("sfdisk")
        .arg("--json")
        .arg(img)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sfdisk --json: {stderr}");
    assert!(stderr.trim().is_empty(), "sfdisk complains: {stderr}");
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["partitiontable"].clone()
}

fn assert_sfdisk_partition(table: &serde_json::Value, info: &PartitionInfo) {
    let parts = table["partitions"].as_array().unwrap();
    let p = parts
        .iter()
        .find(|p| {
            p["node"]
                .as_str()
                .unwrap()
                .ends_with(&info.number.to_string())
        })
        .unwrap_or_else(|| panic!("sfdisk shows no partition {}: {table}", info.number));
    assert_eq!(p["start"], info.first_lba, "{p}");
    assert_eq!(p["size"], info.sectors(), "{p}");
    assert_eq!(p["name"], info.name.as_str(), "{p}");
    assert_eq!(p["type"], LINUX_FS, "{p}");
}

/// Loop devices still backed by `paths`, and kernel partitions left on the whole-disk device,
/// after giving the kernel a moment: `losetup -d` on a device another process has open (a
/// parallel `losetup -a` or `blkid` scanning devices) only marks it for detaching on last close.
fn leftovers(paths: &[&Path], whole: Option<&Path>) -> Vec<String> {
    let mut left = leftovers_now(paths, whole);
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        left = leftovers_now(paths, whole);
    }
    left
}

fn leftovers_now(paths: &[&Path], whole: Option<&Path>) -> Vec<String> {
    let all = run("losetup", &["-a"], None);
    let mut left: Vec<String> = all
        .lines()
        .filter(|l| {
            paths
                .iter()
                .any(|p| l.contains(&format!("({})", p.display())))
        })
        .map(str::to_string)
        .collect();
    if let Some(name) = whole.and_then(|w| w.file_name()).and_then(|n| n.to_str()) {
        let sys = Path::new("/sys/class/block").join(name);
        for e in fs::read_dir(sys).into_iter().flatten().flatten() {
            if e.path().join("partition").is_file() {
                left.push(format!(
                    "kernel partition {}",
                    e.file_name().to_string_lossy()
                ));
            }
        }
    }
    left
}

fn exercise(dir: &Path, img: &Path, whole: &std::sync::Mutex<Option<std::path::PathBuf>>) {
    let disk_dev = LoopDevice::attach(img).unwrap();
    let disk = disk_dev.path().to_path_buf();
    *whole.lock().unwrap() = Some(disk.clone());

    let root = find_partition_by_label(&disk, "root").unwrap();
    assert_eq!(
        (root.number, root.first_lba, root.last_lba),
        (4, 1_050_624, 2_095_103)
    );

    let extra = add_extra(&disk, img);
    let table = sfdisk_json(img);
    assert_eq!(
        table["lastlba"],
        DISK_BYTES / 512 - 34,
        "backup GPT moved to the end"
    );
    assert_sfdisk_partition(&table, &extra);
    check_table_repairs(img);

    format_and_fill(dir, img, &extra);
    check_filesystem(dir, img, &disk, &extra);

    let before = table_bytes(img);
    assert_eq!(
        add_partition(&disk, 5, EXTRA, parse_partition_start("-512M").unwrap()).unwrap(),
        extra
    );
    assert_eq!(table_bytes(img), before, "a re-run rewrote the table");

    grow_root(&disk, img, &extra);
    check_errors(&disk);
    disk_dev.detach().unwrap();
}

fn add_extra(disk: &Path, img: &Path) -> PartitionInfo {
    let spec = parse_partition_start("-512M").unwrap();
    let extra = add_partition(disk, 5, EXTRA, spec).unwrap();
    // (2 GiB - 512 MiB) / 512, already on a MiB boundary; the end is the last usable LBA.
    assert_eq!((extra.first_lba, extra.last_lba), (3_145_728, 4_194_270));
    assert_eq!(extra.first_lba % 2048, 0);
    assert_eq!(find_partition_by_label(disk, EXTRA).unwrap(), extra);
    assert_eq!(find_partition_by_label(img, EXTRA).unwrap(), extra);
    extra
}

/// sgdisk finds nothing to fix, the MBR boot code is kept, the PMBR covers the disk, the stale
/// backup header is gone.
fn check_table_repairs(img: &Path) {
    let verify = run("sgdisk", &["-v", img.to_str().unwrap()], None);
    assert!(verify.contains("No problems found"), "{verify}");
    assert_eq!(read_bytes(img, 0, BOOT_CODE.len()), BOOT_CODE);
    let size = read_bytes(img, 446 + 12, 4);
    assert_eq!(
        u32::from_le_bytes(size.try_into().unwrap()),
        (DISK_BYTES / 512 - 1) as u32
    );
    assert_ne!(read_bytes(img, IMAGE_BYTES - 512, 8), b"EFI PART");
}

/// Through the loop-range path (the disk here is the image file, which has no kernel partitions).
fn format_and_fill(dir: &Path, img: &Path, extra: &PartitionInfo) {
    let dev = PartitionDevice::open(img, extra).unwrap();
    assert!(
        dev.is_loop(),
        "expected a loop device over the range, got {}",
        dev.path().display()
    );
    let size = run(
        "blockdev",
        &["--getsize64", dev.path().to_str().unwrap()],
        None,
    );
    assert_eq!(size.trim().parse::<u64>().unwrap(), extra.len_bytes());
    mkfs_xfs(dev.path(), Some("containers")).unwrap();
    let mnt = dir.join("mnt");
    fs::create_dir(&mnt).unwrap();
    let m = Mount::new(dev.path(), &mnt, Some("xfs"), None).unwrap();
    fs::write(mnt.join("hello"), "from ibi\n").unwrap();
    m.unmount().unwrap();
    dev.close().unwrap();
}

/// The filesystem starts exactly at the partition's offset in the image, and the file is there
/// when the partition is reached through the whole-disk device (the kernel's partition device if
/// `partx` could add it, else a loop device over the range of the loop disk).
fn check_filesystem(dir: &Path, img: &Path, disk: &Path, extra: &PartitionInfo) {
    assert_eq!(read_bytes(img, extra.offset_bytes(), 4), b"XFSB");
    let dev = PartitionDevice::open(disk, extra).unwrap();
    eprintln!(
        "partition 5 of {} reached as {} (loop: {})",
        disk.display(),
        dev.path().display(),
        dev.is_loop()
    );
    let mnt = dir.join("mnt");
    let label = run(
        "blkid",
        &["-s", "LABEL", "-o", "value", dev.path().to_str().unwrap()],
        None,
    );
    assert_eq!(label.trim(), "containers");
    let m = Mount::new(dev.path(), &mnt, None, Some("ro")).unwrap();
    assert_eq!(fs::read_to_string(mnt.join("hello")).unwrap(), "from ibi\n");
    drop(m);
    drop(dev);
}

fn grow_root(disk: &Path, img: &Path, extra: &PartitionInfo) {
    let grown = grow_partition(disk, 4, extra.first_lba - 1).unwrap();
    assert_eq!((grown.first_lba, grown.last_lba), (1_050_624, 3_145_727));
    assert_eq!(find_partition(disk, 4).unwrap(), grown);
    // Whichever way root is reached, the device covers the grown range.
    let dev = PartitionDevice::open(disk, &grown).unwrap();
    let size = run(
        "blockdev",
        &["--getsize64", dev.path().to_str().unwrap()],
        None,
    );
    assert_eq!(size.trim().parse::<u64>().unwrap(), grown.len_bytes());
    drop(dev);
    assert_sfdisk_partition(&sfdisk_json(img), &grown);
    let verify = run("sgdisk", &["-v", img.to_str().unwrap()], None);
    assert!(verify.contains("No problems found"), "{verify}");
    let before = table_bytes(img);
    assert_eq!(grow_partition(disk, 4, extra.first_lba - 1).unwrap(), grown);
    assert_eq!(
        table_bytes(img),
        before,
        "a re-run of grow rewrote the table"
    );
}

fn check_errors(disk: &Path) {
    let d = disk.display();
    let err = add_partition(disk, 5, EXTRA, parse_partition_start("-256M").unwrap()).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        format!(
            "partition 5 (\"var-lib-containers\", LBAs 3145728-4194270) already exists on {d} and \
             differs from the requested partition 5 (\"var-lib-containers\", LBAs 3670016-4194270)"
        )
    );
    let err = add_partition(disk, 6, "other", parse_partition_start("-1G").unwrap()).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        format!(
            "placing partition 6 (\"other\") on {d}: LBAs 2097152-4194270 overlap partition 4 \
             (\"root\", LBAs 1050624-3145727)"
        )
    );
    let err = add_partition(disk, 6, "other", parse_partition_start("0").unwrap()).unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        format!(
            "placing partition 6 (\"other\") on {d}: the partition would start at LBA 4194304, \
             outside the usable area (LBAs 34-4194270)"
        )
    );
    let err = find_partition_by_label(disk, "nope").unwrap_err();
    assert_eq!(
        format!("{err:#}"),
        format!(
            "no partition named \"nope\" on {d} (it has: 1 \"BIOS-BOOT\", 2 \"EFI-SYSTEM\", \
             3 \"boot\", 4 \"root\", 5 \"var-lib-containers\")"
        )
    );
}

/// A loop device with 4096-byte sectors, detached (with any kernel partitions) when dropped.
struct Loop4k(String);

impl Loop4k {
    fn attach(file: &Path) -> Loop4k {
        let out = run(
            "losetup",
            &["-f", "--show", "-b", "4096", file.to_str().unwrap()],
            None,
        );
        Loop4k(out.lines().next().unwrap().trim().to_string())
    }
}

impl Drop for Loop4k {
    fn drop(&mut self) {
        let _ = Command::new("partx").args(["--delete", &self.0]).output();
        let _ = Command::new("losetup").args(["-d", &self.0]).output();
    }
}

#[test]
fn disk_layer_on_loop_devices_needs_root() {
    if should_skip("disk_layer_on_loop_devices_needs_root") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let img = tmp.path().join("disk.raw");
    make_metal_image(&img);
    let whole = std::sync::Mutex::new(None::<std::path::PathBuf>);
    let result = catch_unwind(AssertUnwindSafe(|| exercise(tmp.path(), &img, &whole)));
    let mut ours: Vec<&Path> = vec![&img];
    let whole = whole.into_inner().unwrap();
    if let Some(w) = &whole {
        ours.push(w);
    }
    let leaked = leftovers(&ours, whole.as_deref());
    if let Err(panic) = result {
        if !leaked.is_empty() {
            eprintln!("also left attached after the failure: {leaked:?}");
        }
        resume_unwind(panic);
    }
    assert!(leaked.is_empty(), "loop devices left attached: {leaked:?}");
}

/// The guards undo themselves when the code holding them panics: the mount goes, then the loop
/// devices over the range and over the whole file.
#[test]
fn guards_undo_on_panic_needs_root() {
    if should_skip("guards_undo_on_panic_needs_root") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let img = tmp.path().join("fs.raw");
    File::create(&img).unwrap().set_len(400 * MIB).unwrap();
    let mnt = tmp.path().join("mnt");
    fs::create_dir(&mnt).unwrap();
    let whole = std::sync::Mutex::new(None::<std::path::PathBuf>);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let dev = LoopDevice::attach(&img).unwrap();
        *whole.lock().unwrap() = Some(dev.path().to_path_buf());
        let range = LoopDevice::attach_range(dev.path(), MIB, 350 * MIB).unwrap();
        mkfs_xfs(range.path(), None).unwrap();
        let _m = Mount::new(range.path(), &mnt, Some("xfs"), None).unwrap();
        fs::write(mnt.join("busy"), "x").unwrap();
        panic!("failing on purpose with everything attached");
    }));
    assert!(result.is_err());
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts.contains(mnt.to_str().unwrap()),
        "still mounted: {mounts}"
    );
    let whole = whole.into_inner().unwrap();
    let leaked = leftovers(&[&img], whole.as_deref());
    assert!(leaked.is_empty(), "left attached: {leaked:?}");
    if let Some(w) = whole {
        let all = run("losetup", &["-a"], None);
        assert!(!all.contains(&format!("({})", w.display())), "{all}");
    }
}

/// 4Kn: the header at byte 4096, 1 MiB = 256 sectors, a 4-sector entry array; `0` places the
/// partition right after root.
#[test]
fn extra_partition_on_4k_sectors_needs_root() {
    if should_skip("extra_partition_on_4k_sectors_needs_root") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let img = tmp.path().join("4k.raw");
    File::create(&img).unwrap().set_len(512 * MIB).unwrap();
    let layout = "label: gpt\nfirst-lba: 6\n\
        start=256, size=2560, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=\"EFI-SYSTEM\"\n\
        start=2816, size=25600, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=\"boot\"\n\
        start=28416, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name=\"root\"\n";
    drop({
        let dev = Loop4k::attach(&img);
        run("sfdisk", &["-q", &dev.0], Some(layout));
        dev
    });
    OpenOptions::new()
        .write(true)
        .open(&img)
        .unwrap()
        .set_len(DISK_BYTES / 2)
        .unwrap();
    let dev = Loop4k::attach(&img);
    let disk = Path::new(&dev.0);
    let root = find_partition_by_label(disk, "root").unwrap();
    assert_eq!((root.sector_size, root.number), (4096, 3));
    let extra = add_partition(disk, 4, EXTRA, parse_partition_start("0").unwrap()).unwrap();
    let first = (root.last_lba + 1).div_ceil(256) * 256;
    assert_eq!((extra.first_lba, extra.last_lba), (first, 262_138));
    let table = sfdisk_json(disk);
    assert_eq!(
        (table["sectorsize"].as_u64(), table["lastlba"].as_u64()),
        (Some(4096), Some(262_138))
    );
    assert_sfdisk_partition(&table, &extra);
    let verify = run("sgdisk", &["-v", &dev.0], None);
    assert!(verify.contains("No problems found"), "{verify}");
    let pmbr = read_bytes(&img, 446 + 12, 4);
    assert_eq!(u32::from_le_bytes(pmbr.try_into().unwrap()), 262_143);

    let part = PartitionDevice::open(disk, &extra).unwrap();
    let size = run(
        "blockdev",
        &["--getsize64", part.path().to_str().unwrap()],
        None,
    );
    assert_eq!(size.trim().parse::<u64>().unwrap(), extra.len_bytes());
    let mut f = OpenOptions::new().write(true).open(part.path()).unwrap();
    f.write_all(&[b'4'; 4096]).unwrap();
    f.sync_all().unwrap();
    drop(f);
    part.close().unwrap();
    assert_eq!(read_bytes(&img, extra.offset_bytes(), 4096), [b'4'; 4096]);
    drop(dev);
    assert!(leftovers(&[&img], None).is_empty());
}
