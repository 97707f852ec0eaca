//! Restoring the seed's file archives onto the target (lifecycle-agent reference §4.5 steps 13–15):
//! `var.tgz` into the new stateroot, `etc.tgz` over the new deployment's `/etc`, then `etc.deletions`.
//!
//! Archives are streamed from any reader: gunzip, untar and write happen in one pass through fixed
//! buffers, so a multi-gigabyte `var.tgz` is never held in memory nor staged in a temp file (issue 4).
//! Gunzip runs on a thread of its own, a few blocks ahead of the untar and the writes: inflating is
//! about a third of an extraction's CPU and the file system calls most of the rest, so the two
//! overlap on two cores instead of taking turns (issue 10).
//! Every entry must land inside the destination: `..`, absolute names and paths that pass through a
//! symlink leading out are refused with an error naming the entry. Extended attributes (including
//! `security.selinux`) are restored best effort: a filesystem that refuses one is counted and warned
//! about, not fatal, because a restore without labels can still be relabelled on first boot.

mod apply;
mod deletions;
mod extract;
mod merge;
mod paths;
pub use apply::RestoreReport;
pub(crate) use merge::merge_tree;

pub use extract::{apply_deletions, extract_tgz, restore_etc, restore_var};
pub(crate) use extract::{sync_filesystem, syncing_in_background};
