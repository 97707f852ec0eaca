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
pub use device::{
    LoopDevice, PartitionDevice, kernel_partition_device, losetup_attach_args, release_loop,
};
#[cfg(any(test, feature = "test-support"))]
pub use fs::Mount;
pub use fs::{
    mkfs_xfs, mkfs_xfs_args, mount, mount_args, umount_args, xfs_growfs, xfs_growfs_args,
};
pub use spec::{
    GrowPlan, RangeError, StartSpec, extra_partition_range, grow_plan, parse_partition_start,
};
pub use table::{
    add_partition, find_partition, find_partition_by_label, grow_partition, grow_partition_to_end,
    read_table,
};

pub use partition::{MIB, PartitionInfo, TableLayout};
