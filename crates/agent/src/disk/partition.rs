//! One partition of a table as the agent needs it (number, LBAs, sector size, GPT name), and the size unit partitions align to.

use std::fmt;

/// Bytes per MiB: partitions start on MiB boundaries, as sfdisk and sgdisk place them.
pub(crate) const MIB: u64 = 1024 * 1024;

/// One used entry of a GPT, as the agent needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Partition number (1-based index in the entry array, as the kernel numbers it).
    pub number: u32,
    pub first_lba: u64,
    /// Inclusive.
    pub last_lba: u64,
    /// Logical sector size of the disk the LBAs count in.
    pub sector_size: u64,
    /// GPT partition name (what `/dev/disk/by-partlabel` would show).
    pub name: String,
}

impl PartitionInfo {
    /// Number of sectors.
    pub fn sectors(&self) -> u64 {
        self.last_lba - self.first_lba + 1
    }

    /// Byte offset of the partition on the disk.
    pub fn offset_bytes(&self) -> u64 {
        self.first_lba * self.sector_size
    }

    /// Length in bytes.
    pub fn len_bytes(&self) -> u64 {
        self.sectors() * self.sector_size
    }
}

impl fmt::Display for PartitionInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "partition {} ({:?}, LBAs {}-{})",
            self.number, self.name, self.first_lba, self.last_lba
        )
    }
}

/// What the range arithmetic needs to know of a partition table: where the usable area begins, how
/// big each copy of the entry array is (the backup copy sits before the backup header at the very
/// end of the disk, which fixes the last usable LBA) and the used entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableLayout {
    pub(crate) first_usable_lba: u64,
    /// Number of entries × entry size (128 × 128 = 16 KiB on nearly every disk).
    pub(crate) entry_array_bytes: u64,
    pub partitions: Vec<PartitionInfo>,
}

impl TableLayout {
    /// The partition with `number`, if used.
    pub fn get(&self, number: u32) -> Option<&PartitionInfo> {
        self.partitions.iter().find(|p| p.number == number)
    }

    /// This layout without partition `number`.
    pub(crate) fn without(&self, number: u32) -> TableLayout {
        TableLayout {
            partitions: self
                .partitions
                .iter()
                .filter(|p| p.number != number)
                .cloned()
                .collect(),
            ..self.clone()
        }
    }

    /// Last usable LBA on a disk of `disk_bytes` once the backup table sits at its end (what
    /// `sgdisk -e` would make of a table copied from a smaller image).
    pub fn last_usable_lba(&self, disk_bytes: u64, sector_size: u64) -> Option<u64> {
        let array_sectors = self.entry_array_bytes.div_ceil(sector_size);
        (disk_bytes / sector_size).checked_sub(2 + array_sectors)
    }
}
