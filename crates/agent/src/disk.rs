//! The target disk: the GPT (the extra partition, growing root, finding partitions by name — all in
//! pure Rust with the `gpt` crate, no sfdisk/sgdisk/growpart), the devices through which a
//! partition is reached (the kernel's partition device when sysfs shows it with the right range,
//! otherwise a loop device over the partition's byte range), and the filesystem commands on top
//! (`mkfs.xfs`, `xfs_growfs`, mounts). No udev is assumed: partitions are found in the table
//! itself, never through `/dev/disk/by-partlabel`. Loop devices and mounts are RAII guards.

mod device;
mod fs;
pub mod mounts;
mod overlay;
mod partition;
mod spec;
mod table;
pub use device::{LoopDevice, PartitionDevice, release_loop};
#[cfg(any(test, feature = "test-support"))]
pub use fs::Mount;
pub(crate) use fs::umount_args;
pub use fs::{mkfs_xfs, mount, xfs_growfs};
pub use spec::parse_partition_start;
pub(crate) use spec::{GrowPlan, StartSpec, extra_partition_range, grow_plan};
pub(crate) use table::grow_partition_to_end;
pub use table::{
    add_partition, find_partition, find_partition_by_label, grow_partition, read_table,
};

pub use partition::PartitionInfo;
pub(crate) use partition::{MIB, TableLayout};
