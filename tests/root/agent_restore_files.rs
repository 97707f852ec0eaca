#![cfg(feature = "agent")]
//! Restoring the seed's `var.tgz` / `etc.tgz` and applying `etc.deletions`
//! (`ibi::agent::restore_files`), against archives built here with the `tar` crate or GNU tar.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;
use std::fs;
use std::os::unix::fs::MetadataExt;

use tar::EntryType;

use crate::common::agent_restore_files::*;

#[test]
fn owners_are_restored_numerically_as_root() {
    if !common::require_root("owners_are_restored_numerically_as_root") {
        return;
    }
    let mut header = Tgz::header(EntryType::Regular, "owned", 0o640, MTIME);
    header.set_uid(1234);
    header.set_gid(5678);
    let archive = Tgz::new().add(header, b"x", &[]).finish();
    let (_dir, dest) = dest();
    extract(&archive, &dest).unwrap();
    let meta = fs::metadata(dest.join("owned")).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid(), mode(&dest.join("owned"))),
        (1234, 5678, 0o640)
    );
}

#[test]
fn device_nodes_and_fifos_are_made_as_root() {
    if !common::require_root("device_nodes_and_fifos_are_made_as_root") {
        return;
    }
    let mut null = Tgz::header(EntryType::Char, "dev/null", 0o666, MTIME);
    null.set_device_major(1).unwrap();
    null.set_device_minor(3).unwrap();
    let fifo = Tgz::header(EntryType::Fifo, "run/fifo", 0o600, MTIME);
    let archive = Tgz::new().add(null, b"", &[]).add(fifo, b"", &[]).finish();
    let (_dir, dest) = dest();
    extract(&archive, &dest).unwrap();
    use std::os::unix::fs::FileTypeExt;
    let null = fs::symlink_metadata(dest.join("dev/null")).unwrap();
    assert!(null.file_type().is_char_device());
    assert_eq!(null.rdev(), rustix::fs::makedev(1, 3));
    assert!(
        fs::symlink_metadata(dest.join("run/fifo"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert_eq!(
        (mode(&dest.join("dev/null")), mode(&dest.join("run/fifo"))),
        (0o666, 0o600)
    );
}
