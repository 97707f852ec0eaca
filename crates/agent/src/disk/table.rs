//! Reading and changing the GPT of the target disk with the `gpt` crate: finding partitions by
//! name, adding the extra partition and growing root. Every change first moves the backup table
//! to the real end of the disk (coreos-installer copies an image smaller than the disk, so the
//! backup header sits where the image ended), keeps the protective MBR's boot code, writes both
//! headers and fsyncs. A change that is already on disk is not written again, so a resumed run
//! leaves the table byte-identical.
//!
//! Writes survive a kill at any point ([`super::overlay`]): the new backup table first (synced), then
//! the new primary (synced), then the protective MBR. A run killed in between finds one valid table —
//! the old primary, or the new backup — and a writable open repairs the other from it.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use gpt::disk::LogicalBlockSize;
use gpt::mbr::ProtectiveMBR;
use gpt::partition::Partition;
use gpt::{GptConfig, GptDisk, partition_types};
use tracing::{info, warn};

use super::overlay::Overlay;
use super::{GrowPlan, PartitionInfo, StartSpec, TableLayout, extra_partition_range, grow_plan};
use crate::cmd;

/// GPT header signature, at LBA 1.
const GPT_SIGNATURE: &[u8; 8] = b"EFI PART";
/// Offset of the entry-size field in the GPT header.
const ENTRY_SIZE_OFFSET: usize = 84;
/// The only entry size the `gpt` crate reads (it panics on others).
const ENTRY_SIZE: u32 = 128;
/// Longest GPT partition name, in UTF-16 code units.
const MAX_NAME_UNITS: usize = 36;
/// MBR partition type of the protective entry.
const PROTECTIVE_MBR_TYPE: u8 = 0xEE;

/// An open GPT disk and the facts the arithmetic needs.
struct OpenTable {
    path: PathBuf,
    gpt: GptDisk<Overlay>,
    sector_size: u64,
    disk_bytes: u64,
    /// Where the backup header was when the table was read.
    original_backup_lba: u64,
}

/// Reads the partition table of `disk` (a block device or an image file).
pub fn read_table(disk: &Path) -> Result<TableLayout> {
    Ok(open_table(disk, false)?.layout())
}

/// The partition named `label`, read from the table itself (no udev, no by-partlabel links).
pub fn find_partition_by_label(disk: &Path, label: &str) -> Result<PartitionInfo> {
    let table = read_table(disk)?;
    let found: Vec<&PartitionInfo> = table
        .partitions
        .iter()
        .filter(|p| p.name == label)
        .collect();
    match found.as_slice() {
        [one] => Ok((*one).clone()),
        [] => bail!(
            "no partition named {label:?} on {} (it has: {})",
            disk.display(),
            list(&table.partitions)
        ),
        many => bail!(
            "{} partitions are named {label:?} on {}: {}",
            many.len(),
            disk.display(),
            list(&table.partitions)
        ),
    }
}

/// Partition `number` of `disk`.
pub fn find_partition(disk: &Path, number: u32) -> Result<PartitionInfo> {
    let table = read_table(disk)?;
    table.get(number).cloned().with_context(|| {
        format!(
            "no partition {number} on {} (it has: {})",
            disk.display(),
            list(&table.partitions)
        )
    })
}

/// Adds a Linux-filesystem partition named `label` as number `number`, placed by `spec` and
/// running to the end of the disk. Does nothing when that partition is already there.
pub fn add_partition(
    disk: &Path,
    number: u32,
    label: &str,
    spec: StartSpec,
) -> Result<PartitionInfo> {
    check_label(label)?;
    let mut t = open_table(disk, true)?;
    let layout = t.layout();
    let (first, last) =
        extra_partition_range(t.disk_bytes, t.sector_size, &layout.without(number), spec)
            .with_context(|| {
                format!(
                    "placing partition {number} ({label:?}) on {}",
                    disk.display()
                )
            })?;
    let wanted = PartitionInfo {
        number,
        first_lba: first,
        last_lba: last,
        sector_size: t.sector_size,
        name: label.to_string(),
    };
    if let Some(existing) = layout.get(number) {
        ensure!(
            *existing == wanted,
            "{existing} already exists on {} and differs from the requested {wanted}",
            disk.display()
        );
        info!(target: "ibi::agent::disk::table",
            disk = %disk.display(), "{wanted} already present");
        return Ok(wanted);
    }
    check_numbering(disk, &layout, number)?;
    t.add(&wanted)?;
    info!(target: "ibi::agent::disk::table", disk = %disk.display(), "added {wanted}");
    notify_kernel(disk, number, "--add");
    Ok(wanted)
}

/// Grows partition `number` to end at `up_to_lba` (root into the free space before the extra
/// partition). Does nothing when it already ends there.
pub fn grow_partition(disk: &Path, number: u32, up_to_lba: u64) -> Result<PartitionInfo> {
    let mut t = open_table(disk, true)?;
    let layout = t.layout();
    let plan = grow_plan(t.disk_bytes, &layout, number, up_to_lba)
        .with_context(|| format!("growing partition {number} on {}", disk.display()))?;
    let (part, new_last) = match plan {
        GrowPlan::AlreadyGrown(part) => {
            info!(target: "ibi::agent::disk::table",
                disk = %disk.display(), "{part} already grown");
            return Ok(part);
        }
        GrowPlan::Grow { part, new_last } => (part, new_last),
    };
    let mut parts = t.gpt.take_partitions();
    if let Some(p) = parts.get_mut(&number) {
        p.last_lba = new_last;
    }
    t.replace_partitions(parts)?;
    t.write()?;
    let grown = PartitionInfo {
        last_lba: new_last,
        ..part
    };
    info!(target: "ibi::agent::disk::table", disk = %disk.display(), "grew {grown}");
    notify_kernel(disk, number, "--update");
    Ok(grown)
}

/// Grows partition `number` to the last usable LBA of the disk (with `useContainersFolder` there is
/// no extra partition to stop at).
pub(crate) fn grow_partition_to_end(disk: &Path, number: u32) -> Result<PartitionInfo> {
    let t = open_table(disk, false)?;
    let last = t
        .layout()
        .last_usable_lba(t.disk_bytes, t.sector_size)
        .with_context(|| format!("{} is too small for a partition table", disk.display()))?;
    drop(t);
    grow_partition(disk, number, last)
}

/// Opens the GPT of `disk`, detecting its sector size from where the header is.
fn open_table(disk: &Path, writable: bool) -> Result<OpenTable> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(writable)
        .open(disk)
        .with_context(|| format!("opening {}", disk.display()))?;
    let disk_bytes = file
        .seek(SeekFrom::End(0))
        .with_context(|| format!("finding the size of {}", disk.display()))?;
    let mut head = vec![0u8; 8192];
    let n = read_at_most(&mut file, &mut head)
        .with_context(|| format!("reading {}", disk.display()))?;
    let sector_size =
        probe_gpt(&head[..n]).with_context(|| format!("reading the GPT of {}", disk.display()))?;
    let lb = LogicalBlockSize::try_from(sector_size)?;
    let gpt = match open_gpt(&file, lb, writable, false) {
        Ok(gpt) => gpt,
        Err(e) => match open_gpt(&file, lb, writable, true) {
            Ok(gpt) => {
                warn!(target: "ibi::agent::disk::table",
                    disk = %disk.display(), "the primary GPT does not read ({e}); using the backup");
                gpt
            }
            Err(_) => {
                return Err(e).with_context(|| format!("reading the GPT of {}", disk.display()));
            }
        },
    };
    // Where the backup header is: the primary names it; a backup read alone names the primary in that
    // field (its alternate), and is itself at `current_lba`.
    let original_backup_lba = match gpt.primary_header() {
        Ok(h) => h.backup_lba,
        Err(_) => gpt.header().current_lba,
    };
    let mut t = OpenTable {
        path: disk.to_path_buf(),
        gpt,
        sector_size,
        disk_bytes,
        original_backup_lba,
    };
    if writable {
        t.check_writable()?;
        t.repair()?;
    }
    Ok(t)
}

/// The GPT of `file` through a write overlay; with `hide_primary`, as if the primary header were
/// missing, so the `gpt` crate reads the backup (it falls back on a bad header, not on a primary entry
/// array that fails its checksum, which is what a write cut short between the two leaves).
fn open_gpt(
    file: &File,
    lb: LogicalBlockSize,
    writable: bool,
    hide_primary: bool,
) -> Result<GptDisk<Overlay>> {
    let sector = u64::from(lb);
    let len = file.metadata().context("reading the disk's size")?.len();
    let len = if len == 0 {
        block_device_len(file)?
    } else {
        len
    };
    let mut overlay = Overlay::new(file.try_clone().context("reopening the disk")?, sector, len);
    if hide_primary {
        overlay.seek(SeekFrom::Start(sector))?;
        overlay.write_all(&vec![0u8; sector as usize])?;
    }
    Ok(GptConfig::new()
        .writable(writable)
        .logical_block_size(lb)
        .only_valid_headers(false)
        .open_from_device(overlay)?)
}

/// The size of a block device (its metadata says 0).
fn block_device_len(file: &File) -> Result<u64> {
    let mut f = file.try_clone().context("reopening the disk")?;
    f.seek(SeekFrom::End(0))
        .context("finding the size of the disk")
}

/// Reads from the start of `file` into `buf` until it is full or the file ends.
fn read_at_most(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    file.seek(SeekFrom::Start(0))?;
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The sector size of a disk whose first bytes are `head`: where the primary GPT header is.
/// Also refuses entry sizes the `gpt` crate cannot read.
pub(super) fn probe_gpt(head: &[u8]) -> Result<u64> {
    for sector in [512usize, 4096] {
        if head.get(sector..sector + 8) != Some(GPT_SIGNATURE.as_slice()) {
            continue;
        }
        let field = sector + ENTRY_SIZE_OFFSET;
        let bytes: [u8; 4] = head
            .get(field..field + 4)
            .and_then(|b| b.try_into().ok())
            .context("truncated GPT header")?;
        let entry = u32::from_le_bytes(bytes);
        ensure!(
            entry == ENTRY_SIZE,
            "GPT entry size {entry} is not supported (only {ENTRY_SIZE})"
        );
        return Ok(sector as u64);
    }
    bail!("no GPT header at byte 512 or 4096")
}

impl OpenTable {
    /// Refuses to rewrite a table that claims a bigger disk than this one.
    fn check_writable(&self) -> Result<()> {
        let disk_sectors = self.disk_bytes / self.sector_size;
        let backup_lba = self.gpt.header().backup_lba;
        ensure!(
            backup_lba < disk_sectors,
            "the GPT of {} puts its backup header at LBA {backup_lba}, beyond the disk's {disk_sectors} sectors",
            self.path.display()
        );
        Ok(())
    }

    /// A table one of whose headers is invalid, or whose protective MBR stops short of a moved backup
    /// (an earlier run killed while it wrote the table; see the module comment), is written again from
    /// the valid header before anything else changes.
    fn repair(&mut self) -> Result<()> {
        let primary_ok = self.gpt.primary_header().is_ok();
        let backup_ok = self.gpt.backup_header().is_ok();
        let end = self.disk_bytes / self.sector_size - 1;
        let backup_at_end = self.original_backup_lba == end;
        let mbr_ok = !backup_at_end || self.protective_mbr_ends_at(end);
        if primary_ok && (backup_ok || !backup_at_end) && mbr_ok {
            return Ok(());
        }
        warn!(target: "ibi::agent::disk::table",
            disk = %self.path.display(),
            primary_ok, backup_ok, mbr_ok, "rewriting a GPT an interrupted write left half updated"
        );
        let parts = self.gpt.take_partitions();
        self.replace_partitions(parts)?;
        self.write()
    }

    fn layout(&self) -> TableLayout {
        let h = self.gpt.header();
        TableLayout {
            first_usable_lba: h.first_usable,
            entry_array_bytes: u64::from(h.num_parts) * u64::from(h.part_size),
            partitions: self
                .gpt
                .partitions()
                .iter()
                .filter(|(_, p)| p.is_used())
                .map(|(n, p)| info_of(*n, p, self.sector_size))
                .collect(),
        }
    }

    /// Sets the entries; the `gpt` crate recomputes both headers for the current disk size, which
    /// moves the backup table to the end of the disk.
    fn replace_partitions(&mut self, parts: BTreeMap<u32, Partition>) -> Result<()> {
        let num_parts = self.gpt.header().num_parts;
        ensure!(
            num_parts <= 128,
            "{} has {num_parts} GPT entries; only tables of up to 128 can be rewritten",
            self.path.display()
        );
        self.gpt
            .update_partitions(parts)
            .with_context(|| format!("updating the GPT of {}", self.path.display()))
    }

    /// Adds `p` as a Linux-filesystem partition and writes the table.
    fn add(&mut self, p: &PartitionInfo) -> Result<()> {
        let parts = self.gpt.take_partitions();
        self.replace_partitions(parts)?;
        let linux = partition_types::LINUX_FS;
        self.gpt
            .add_partition_at(&p.name, p.number, p.first_lba, p.sectors(), linux, 0)
            .with_context(|| format!("adding {p} to {}", self.path.display()))?;
        self.write()
    }

    /// Writes both headers and entry arrays and the protective MBR, in the crash-safe order of the
    /// module comment: the backup side (and the erased stale backup header), then the primary side,
    /// then the MBR, each synced before the next.
    fn write(&mut self) -> Result<()> {
        self.write_first(usize::MAX).map(drop)
    }

    /// [`Self::write`], stopping after `limit` sectors (a kill, in the tests); true when complete.
    fn write_first(&mut self, limit: usize) -> Result<bool> {
        let old_backup = self.original_backup_lba;
        let first_usable = self.gpt.header().first_usable;
        self.gpt
            .write_inplace()
            .with_context(|| format!("writing the GPT of {}", self.path.display()))?;
        let end = self.disk_bytes / self.sector_size - 1;
        if old_backup != end {
            info!(target: "ibi::agent::disk::table",
                disk = %self.path.display(), old_backup, new_backup = end, "moved the backup GPT to the end of the disk");
            self.erase_sector(old_backup)?;
            self.original_backup_lba = end;
        }
        self.fix_protective_mbr(end)?;
        let group = |lba: u64| match lba {
            0 => 2,
            l if l < first_usable => 1,
            _ => 0,
        };
        self.gpt
            .device_mut()
            .apply_first(group, limit)
            .with_context(|| format!("writing the GPT of {}", self.path.display()))
    }

    /// Makes the protective MBR entry cover the whole disk again (tools warn about the mismatch
    /// otherwise), rewriting only the partition records so the BIOS boot code stays.
    fn fix_protective_mbr(&mut self, last_lba: u64) -> Result<()> {
        let lb = LogicalBlockSize::try_from(self.sector_size)?;
        let dev = self.gpt.device_mut();
        let mut mbr = match ProtectiveMBR::from_disk(dev, lb) {
            Ok(mbr) => mbr,
            Err(e) => {
                warn!(target: "ibi::agent::disk::table",
                    disk = %self.path.display(), "no protective MBR to update: {e}");
                return Ok(());
            }
        };
        let Some(mut rec) = mbr
            .partition(0)
            .filter(|r| r.os_type == PROTECTIVE_MBR_TYPE)
        else {
            warn!(target: "ibi::agent::disk::table",
                disk = %self.path.display(), "the MBR has no protective entry first; left as is");
            return Ok(());
        };
        rec.lb_size = u32::try_from(last_lba).unwrap_or(u32::MAX);
        mbr.set_partition(0, rec);
        mbr.update_conservative(dev)
            .with_context(|| format!("updating the protective MBR of {}", self.path.display()))?;
        Ok(())
    }

    /// Whether the protective MBR's entry ends at `last_lba` (true when there is no protective entry to
    /// fix: [`Self::fix_protective_mbr`] leaves such an MBR alone too).
    fn protective_mbr_ends_at(&mut self, last_lba: u64) -> bool {
        let Ok(lb) = LogicalBlockSize::try_from(self.sector_size) else {
            return true;
        };
        let Ok(mbr) = ProtectiveMBR::from_disk(self.gpt.device_mut(), lb) else {
            return true;
        };
        match mbr
            .partition(0)
            .filter(|r| r.os_type == PROTECTIVE_MBR_TYPE)
        {
            Some(rec) => rec.lb_size == u32::try_from(last_lba).unwrap_or(u32::MAX),
            None => true,
        }
    }

    /// Zeroes the sector of the stale backup header so no tool mistakes it for a table.
    fn erase_sector(&mut self, lba: u64) -> Result<()> {
        let zeros = vec![0u8; self.sector_size as usize];
        let dev = self.gpt.device_mut();
        dev.seek(SeekFrom::Start(lba * self.sector_size))
            .and_then(|_| dev.write_all(&zeros))
            .with_context(|| {
                format!(
                    "erasing the old backup GPT header of {} at LBA {lba}",
                    self.path.display()
                )
            })
    }
}

fn info_of(number: u32, p: &Partition, sector_size: u64) -> PartitionInfo {
    PartitionInfo {
        number,
        first_lba: p.first_lba,
        last_lba: p.last_lba,
        sector_size,
        name: p.name.clone(),
    }
}

/// `1 "BIOS-BOOT", 2 "EFI-SYSTEM", …` for error messages.
fn list(parts: &[PartitionInfo]) -> String {
    if parts.is_empty() {
        return "no partitions".to_string();
    }
    parts
        .iter()
        .map(|p| format!("{} {:?}", p.number, p.name))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A GPT name holds at most 36 UTF-16 code units.
fn check_label(label: &str) -> Result<()> {
    let units = label.encode_utf16().count();
    ensure!(
        (1..=MAX_NAME_UNITS).contains(&units),
        "partition name {label:?} must have 1 to {MAX_NAME_UNITS} characters, not {units}"
    );
    Ok(())
}

/// The `gpt` crate writes used entries packed at the start of the entry array, so a table with a
/// gap in its numbering would come back renumbered. Refuse rather than renumber the partitions.
pub(super) fn check_numbering(disk: &Path, table: &TableLayout, number: u32) -> Result<()> {
    let mut numbers: Vec<u32> = table.partitions.iter().map(|p| p.number).collect();
    numbers.push(number);
    numbers.sort_unstable();
    let contiguous = numbers.iter().zip(1u32..).all(|(n, want)| *n == want);
    ensure!(
        contiguous,
        "cannot add partition {number} to {}: partition numbers {numbers:?} would not run from 1 \
         without a gap, and the gpt crate writes entries without gaps (it would renumber them)",
        disk.display()
    );
    Ok(())
}

/// `partx ACTION --nr N DISK`: tells the kernel about one added or resized partition.
pub(super) fn partx_args(disk: &Path, number: u32, action: &str) -> Vec<std::ffi::OsString> {
    let nr = number.to_string();
    cmd::argv(
        "partx",
        &[
            action.as_ref(),
            "--nr".as_ref(),
            nr.as_ref(),
            disk.as_os_str(),
        ],
    )
}

/// Best effort: when `disk` is a block device, asks the kernel to pick up partition `number`.
/// Where it cannot (a loop device without partition scanning), the partition is reached through
/// a loop device over its range instead, so a failure is only logged.
fn notify_kernel(disk: &Path, number: u32, action: &str) {
    let is_block = std::fs::metadata(disk).is_ok_and(|m| m.file_type().is_block_device());
    if !is_block {
        return;
    }
    if let Err(e) = cmd::run(&partx_args(disk, number, action)) {
        warn!(target: "ibi::agent::disk::table",
            disk = %disk.display(), "the kernel was not told about partition {number}: {e:#}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header_at(sector: usize, entry_size: u32) -> Vec<u8> {
        let mut head = vec![0u8; 8192];
        head[sector..sector + 8].copy_from_slice(GPT_SIGNATURE);
        head[sector + 84..sector + 88].copy_from_slice(&entry_size.to_le_bytes());
        head
    }

    #[test]
    fn probes_sector_size() {
        assert_eq!(probe_gpt(&header_at(512, 128)).unwrap(), 512);
        assert_eq!(probe_gpt(&header_at(4096, 128)).unwrap(), 4096);
        assert_eq!(
            probe_gpt(&vec![0u8; 8192]).unwrap_err().to_string(),
            "no GPT header at byte 512 or 4096"
        );
        assert_eq!(
            probe_gpt(&header_at(512, 256)).unwrap_err().to_string(),
            "GPT entry size 256 is not supported (only 128)"
        );
        assert_eq!(
            probe_gpt(&header_at(512, 128)[..530])
                .unwrap_err()
                .to_string(),
            "truncated GPT header"
        );
    }

    fn layout(numbers: &[u32]) -> TableLayout {
        TableLayout {
            first_usable_lba: 34,
            entry_array_bytes: 16384,
            partitions: numbers
                .iter()
                .map(|n| PartitionInfo {
                    number: *n,
                    first_lba: 2048 * u64::from(*n),
                    last_lba: 2048 * u64::from(*n) + 2047,
                    sector_size: 512,
                    name: format!("p{n}"),
                })
                .collect(),
        }
    }

    #[test]
    fn numbering_must_stay_contiguous() {
        let disk = Path::new("/dev/vda");
        assert!(check_numbering(disk, &layout(&[1, 2, 3, 4]), 5).is_ok());
        assert!(check_numbering(disk, &layout(&[]), 1).is_ok());
        assert_eq!(
            check_numbering(disk, &layout(&[1, 2, 3, 4]), 7)
                .unwrap_err()
                .to_string(),
            "cannot add partition 7 to /dev/vda: partition numbers [1, 2, 3, 4, 7] would not run \
             from 1 without a gap, and the gpt crate writes entries without gaps (it would \
             renumber them)"
        );
        assert!(check_numbering(disk, &layout(&[1, 2, 4]), 5).is_err());
    }

    #[test]
    fn labels_fit_a_gpt_name() {
        assert!(check_label("var-lib-containers").is_ok());
        assert!(check_label(&"x".repeat(36)).is_ok());
        assert_eq!(
            check_label(&"x".repeat(37)).unwrap_err().to_string(),
            format!(
                "partition name {:?} must have 1 to 36 characters, not 37",
                "x".repeat(37)
            )
        );
        assert!(check_label("").is_err());
    }

    #[test]
    fn partx_argv() {
        let argv = partx_args(Path::new("/dev/vda"), 5, "--add");
        assert_eq!(argv, ["partx", "--add", "--nr", "5", "/dev/vda"]);
    }

    #[test]
    fn lists_partitions_for_errors() {
        assert_eq!(list(&layout(&[1, 2]).partitions), "1 \"p1\", 2 \"p2\"");
        assert_eq!(list(&[]), "no partitions");
    }

    /// A disk image as coreos-installer leaves one: protective MBR, partitions 1-4, the backup table
    /// where a 32 MiB image ended, on a 64 MiB file.
    fn rhcos_like_image(dir: &Path) -> PathBuf {
        let img = dir.join("pristine.img");
        let small: u64 = 32 << 20;
        let f = File::create(&img).unwrap();
        f.set_len(small).unwrap();
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&img)
            .unwrap();
        ProtectiveMBR::with_lb_size(u32::try_from(small / 512 - 1).unwrap())
            .overwrite_lba0(&mut f)
            .unwrap();
        let mut g = GptConfig::new()
            .writable(true)
            .logical_block_size(LogicalBlockSize::Lb512)
            .create_from_device(f, None)
            .unwrap();
        for (name, mib) in [
            ("BIOS-BOOT", 1),
            ("EFI-SYSTEM", 4),
            ("boot", 4),
            ("root", 8),
        ] {
            g.add_partition(name, mib << 20, partition_types::LINUX_FS, 0, None)
                .unwrap();
        }
        let f = g.write().unwrap();
        f.set_len(64 << 20).unwrap();
        img
    }

    /// A kill after every possible number of written sectors of the extra partition's table write:
    /// the next run reads one valid table, finishes the change, and leaves both headers valid, the
    /// protective MBR covering the disk and partition 5 in place.
    #[test]
    fn a_table_write_cut_anywhere_is_finished_by_the_next_run() {
        let tmp = tempfile::tempdir().unwrap();
        let pristine = rhcos_like_image(tmp.path());
        let disk = tmp.path().join("disk.img");
        let spec = crate::disk::parse_partition_start("-16M").unwrap();
        let mut cut = 0;
        loop {
            std::fs::copy(&pristine, &disk).unwrap();
            let complete = {
                let mut t = open_table(&disk, true).unwrap();
                let layout = t.layout();
                let (first, last) =
                    extra_partition_range(t.disk_bytes, 512, &layout.without(5), spec).unwrap();
                let parts = t.gpt.take_partitions();
                t.replace_partitions(parts).unwrap();
                t.gpt
                    .add_partition_at(
                        "var-lib-containers",
                        5,
                        first,
                        last - first + 1,
                        partition_types::LINUX_FS,
                        0,
                    )
                    .unwrap();
                t.write_first(cut).unwrap()
            };
            let before = read_table(&disk).unwrap_or_else(|e| panic!("cut {cut}: {e:#}"));
            assert!(before.get(4).is_some(), "cut {cut}: {before:?}");
            let part = add_partition(&disk, 5, "var-lib-containers", spec)
                .unwrap_or_else(|e| panic!("cut {cut}: {e:#}"));
            let strict = GptConfig::new()
                .only_valid_headers(true)
                .logical_block_size(LogicalBlockSize::Lb512)
                .open(&disk)
                .unwrap_or_else(|e| panic!("cut {cut}: a header is still invalid: {e}"));
            assert_eq!(
                strict.header().backup_lba,
                (64 << 20) / 512 - 1,
                "cut {cut}"
            );
            assert_eq!(
                strict.partitions().get(&5).map(|p| p.name.clone()),
                Some(part.name)
            );
            let mut f = File::open(&disk).unwrap();
            let mbr = ProtectiveMBR::from_disk(&mut f, LogicalBlockSize::Lb512).unwrap();
            assert_eq!(
                mbr.partition(0).unwrap().lb_size,
                (64 << 20) / 512 - 1,
                "cut {cut}"
            );
            let mut old_backup = [0u8; 8];
            f.seek(SeekFrom::Start((32 << 20) - 512)).unwrap();
            f.read_exact(&mut old_backup).unwrap();
            assert_ne!(
                &old_backup, GPT_SIGNATURE,
                "cut {cut}: the stale backup header is still there"
            );
            if complete {
                break;
            }
            cut += 1;
        }
        assert!(cut > 30, "the write should span many sectors, not {cut}");
    }
}
