#![cfg(feature = "agent")]
//! Restoring the seed's `var.tgz` / `etc.tgz` and applying `etc.deletions`
//! (`ibi::agent::restore_files`), against archives built here with the `tar` crate or GNU tar.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;

use ibi::agent::restore_files::restore_var;

use crate::common::agent_restore_files::*;

#[test]
fn gnu_tar_archives_with_xattrs_and_labels_round_trip() {
    let (dir, dest) = dest();
    let src = dir.path().join("src");
    fs::create_dir_all(src.join("var/lib")).unwrap();
    fs::write(src.join("var/lib/data"), b"from gnu tar").unwrap();
    let flags = rustix::fs::XattrFlags::empty();
    rustix::fs::setxattr(src.join("var/lib/data"), "user.ibi", b"test", flags).unwrap();
    let labels = selinux_labels_supported(dir.path());
    if labels.is_ok() {
        rustix::fs::setxattr(src.join("var/lib/data"), "security.selinux", LABEL, flags).unwrap();
    }
    let tgz = dir.path().join("var.tgz");
    let status = std::process::Command::new("tar")
        .args([
            "czf",
            tgz.to_str().unwrap(),
            "-C",
            src.to_str().unwrap(),
            "var",
        ])
        .args(["--selinux", "--xattrs", "--xattrs-include=*", "--acls"])
        .status()
        .unwrap();
    assert!(status.success());
    let report = restore_var(fs::File::open(&tgz).unwrap(), &dest, &mut |_| {}).unwrap();
    let data = dest.join("var/lib/data");
    assert_eq!(fs::read(&data).unwrap(), b"from gnu tar");
    assert_eq!(xattr(&data, "user.ibi").as_deref(), Some(&b"test"[..]));
    match labels {
        Ok(()) => assert_eq!(xattr(&data, "security.selinux").as_deref(), Some(LABEL)),
        Err(reason) => println!("skipping the security.selinux check: {reason}"),
    }
    assert_eq!(report.xattr_failures, 0);
}
