#![cfg(feature = "agent")]
//! Restoring the seed's `var.tgz` / `etc.tgz` and applying `etc.deletions`
//! (`ibi::agent::restore_files`), against archives built here with the `tar` crate or GNU tar.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use flate2::Compression;
use ibi::agent::restore_files::{apply_deletions, extract_tgz, restore_etc, restore_var};
use tar::EntryType;

use crate::common::agent_restore_files::*;

#[test]
fn files_dirs_links_modes_xattrs_and_mtimes_are_restored() {
    let (_dir, dest) = dest();
    let report = extract(&sample_archive(), &dest).unwrap();
    let etc = dest.join("etc");
    assert_eq!(fs::read(etc.join("sub/secret")).unwrap(), b"s3cret");
    assert_eq!(
        fs::read(etc.join("sub/deeper/auto")).unwrap(),
        b"parent made on the fly"
    );
    assert_eq!(
        (mode(&etc.join("sub/secret")), mode(&etc.join("tool"))),
        (0o600, 0o755)
    );
    assert_eq!((mode(&etc), mode(&etc.join("sub"))), (0o755, 0o700));
    assert_eq!(
        fs::read_link(etc.join("link")).unwrap(),
        Path::new("sub/secret")
    );
    assert_eq!(
        fs::read_link(etc.join("dangling")).unwrap(),
        Path::new("/nowhere/at/all")
    );
    let (tool, hard) = (
        fs::metadata(etc.join("tool")).unwrap(),
        fs::metadata(etc.join("hard")).unwrap(),
    );
    assert_eq!((tool.ino(), tool.nlink()), (hard.ino(), 2));
    assert_eq!(
        xattr(&etc.join("sub/secret"), "user.ibi").as_deref(),
        Some(&b"test"[..])
    );
    // Directory mtimes are the archive's even though their contents were written afterwards.
    assert_eq!(mtime(&etc.join("sub")), at(MTIME + 100));
    assert_eq!(mtime(&etc), at(MTIME));
    assert_eq!(mtime(&etc.join("sub/secret")), at(MTIME + 7));
    assert_eq!(mtime(&etc.join("link")), at(MTIME + 9));
    assert_eq!((report.entries, report.bytes), (9, 6 + 22 + 10 + 1));
    match selinux_labels_supported(&dest) {
        Ok(()) => {
            // `RHT.security.selinux` (GNU tar --selinux) is read, and it wins over a second copy.
            assert_eq!(
                xattr(&etc.join("labelled"), "security.selinux").as_deref(),
                Some(LABEL)
            );
            assert_eq!((report.xattrs, report.xattr_failures), (2, 0));
        }
        Err(reason) => {
            println!("skipping the security.selinux check: this filesystem refuses it ({reason})")
        }
    }
}

#[test]
fn an_archive_overlays_an_existing_tree() {
    let (dir, dest) = dest();
    let etc = dest.join("etc");
    fs::create_dir(&etc).unwrap();
    fs::write(etc.join("keep"), b"untouched").unwrap();
    fs::write(etc.join("over"), b"old content that is longer").unwrap();
    let outside = dir.path().join("outside-file");
    fs::write(&outside, b"host file").unwrap();
    std::os::unix::fs::symlink(&outside, etc.join("was-link")).unwrap();
    let archive = Tgz::new()
        .file("etc/over", 0o644, b"new", &[])
        .file("etc/was-link", 0o644, b"a file now", &[])
        .finish();
    extract(&archive, &dest).unwrap();
    assert_eq!(fs::read(etc.join("keep")).unwrap(), b"untouched");
    assert_eq!(fs::read(etc.join("over")).unwrap(), b"new");
    assert!(
        fs::symlink_metadata(etc.join("was-link"))
            .unwrap()
            .is_file()
    );
    assert_eq!(fs::read(etc.join("was-link")).unwrap(), b"a file now");
    assert_eq!(
        fs::read(&outside).unwrap(),
        b"host file",
        "the write went through the old symlink"
    );
}

#[test]
fn escaping_members_are_refused_naming_the_member() {
    let (dir, dest) = dest();
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let cases = [
        (
            "etc/../../x",
            Tgz::new().file("etc/../../x", 0o644, b"x", &[]).finish(),
            "`..`",
        ),
        (
            "/abs",
            Tgz::new().file("/abs", 0o644, b"x", &[]).finish(),
            "absolute",
        ),
        (
            "etc/evil/file",
            Tgz::new()
                .link(EntryType::Symlink, "etc/evil", outside.to_str().unwrap())
                .file("etc/evil/file", 0o644, b"x", &[])
                .finish(),
            "leads outside the destination",
        ),
        (
            "etc/evil/new/file",
            Tgz::new()
                .link(EntryType::Symlink, "etc/evil", outside.to_str().unwrap())
                .file("etc/evil/new/file", 0o644, b"x", &[])
                .finish(),
            "leads outside the destination",
        ),
        (
            "etc/hard",
            Tgz::new()
                .link(EntryType::Link, "etc/hard", "../outside")
                .finish(),
            "`..`",
        ),
    ];
    for (member, archive, reason) in cases {
        let err = format!("{:#}", extract(&archive, &dest).unwrap_err());
        assert!(
            err.contains(&format!("extracting `{member}`")),
            "{member}: {err}"
        );
        assert!(err.contains(reason), "{member}: {err}");
    }
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "something was written outside"
    );
    assert!(!dir.path().join("x").exists() && !Path::new("/abs").exists());
}

#[test]
fn restore_var_and_etc_refuse_members_outside_their_directory() {
    let (_dir, dest) = dest();
    let archive = Tgz::new()
        .file("var/ok", 0o644, b"x", &[])
        .file("deploy/x", 0o644, b"x", &[])
        .finish();
    let err = format!(
        "{:#}",
        restore_var(&archive[..], &dest, &mut |_| {}).unwrap_err()
    );
    assert!(err.contains("restoring var.tgz into"), "{err}");
    assert!(
        err.contains("extracting `deploy/x`: refusing a member outside `var/`"),
        "{err}"
    );
    assert!(!dest.join("deploy").exists());
    let err = format!(
        "{:#}",
        restore_etc(&archive[..], &dest, &mut |_| {}).unwrap_err()
    );
    assert!(
        err.contains("extracting `var/ok`: refusing a member outside `etc/`"),
        "{err}"
    );
    let archive = Tgz::new()
        .dir("etc/", 0o755, MTIME)
        .file("etc/a", 0o644, b"x", &[])
        .finish();
    let report = restore_etc(&archive[..], &dest, &mut |_| {}).unwrap();
    assert_eq!(
        (report.entries, fs::read(dest.join("etc/a")).unwrap()),
        (2, b"x".to_vec())
    );
}

#[test]
fn truncated_or_corrupt_archives_fail() {
    let (_dir, dest) = dest();
    let archive = Tgz::new().file("etc/a", 0o644, &[7; 100_000], &[]).finish();
    let err = format!(
        "{:#}",
        extract(&archive[..archive.len() / 2], &dest).unwrap_err()
    );
    assert!(err.contains("etc/a"), "{err}");
    let mut corrupt = archive.clone();
    let crc = corrupt.len() - 8;
    corrupt[crc] ^= 0xff;
    let err = format!("{:#}", extract(&corrupt, &dest).unwrap_err());
    assert!(err.contains("gzip trailer"), "{err}");
}

#[test]
fn deletions_remove_files_dirs_and_symlinks_and_report_missing_ones() {
    let (dir, root) = dest();
    let etc = root.join("etc");
    fs::create_dir_all(etc.join("dir/sub")).unwrap();
    fs::write(etc.join("dir/sub/f"), b"").unwrap();
    fs::write(etc.join("file"), b"").unwrap();
    fs::write(etc.join("kept"), b"").unwrap();
    let outside = dir.path().join("outside-file");
    fs::write(&outside, b"host").unwrap();
    std::os::unix::fs::symlink(&outside, etc.join("link")).unwrap();
    std::os::unix::fs::symlink("nowhere", etc.join("dangling")).unwrap();
    let list = "/etc/file\n/etc/dir\n\n  /etc/link  \n/etc/missing\n/etc/gone/below\n\
                /etc/kept/below\n/etc/dangling/below";
    let (deleted, missing) = apply_deletions(list, &root).unwrap();
    let missing_lines = [
        "/etc/missing",
        "/etc/gone/below",
        "/etc/kept/below",
        "/etc/dangling/below",
    ];
    assert_eq!(
        (deleted, missing),
        (3, missing_lines.map(String::from).to_vec())
    );
    assert!(!etc.join("file").exists() && !etc.join("dir").exists());
    assert!(fs::symlink_metadata(etc.join("link")).is_err());
    assert!(etc.join("kept").exists());
    assert_eq!(
        fs::read(&outside).unwrap(),
        b"host",
        "the symlink's target was deleted"
    );
}

#[test]
fn deletions_escaping_the_root_fail_before_deleting_anything() {
    let (dir, root) = dest();
    let outside = dir.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("x"), b"host").unwrap();
    fs::create_dir(root.join("etc")).unwrap();
    fs::write(root.join("etc/first"), b"").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("etc/evil")).unwrap();
    for (list, reason) in [
        (
            "/etc/first\n/etc/../../outside/x",
            "deletion `/etc/../../outside/x`",
        ),
        ("/etc/first\n/etc/evil/x", "`etc/evil` is a symlink to"),
    ] {
        let err = format!("{:#}", apply_deletions(list, &root).unwrap_err());
        assert!(err.contains(reason), "{err}");
        assert!(err.contains("applying etc.deletions under"), "{err}");
    }
    assert!(outside.join("x").exists() && root.join("etc/first").exists());
}

#[test]
fn a_large_archive_streams_through_a_small_window() {
    const SIZE: u64 = 200 << 20;
    let mut header = Tgz::header(EntryType::Regular, "var/big", 0o644, MTIME);
    header.set_size(SIZE);
    header.set_cksum();
    // Shared with the gunzip thread, which is where the extractor reads the generator.
    let produced = Arc::new(AtomicU64::new(0));
    let generator = TarGenerator {
        header: header.as_bytes().to_vec(),
        size: SIZE,
        produced: produced.clone(),
    };
    // Stored (level 0) deflate blocks: a real gzip stream the extractor must inflate, in which a
    // compressed byte stands for one archive byte. With compressible data the decoder's 32 KiB
    // input buffer would stand for megabytes and the check would measure the ratio, not buffering.
    let gzip = flate2::read::GzEncoder::new(generator, Compression::none());
    let (_dir, dest) = dest();
    let (mut widest, mut calls) = (0, 0);
    let report = extract_tgz(gzip, &dest, &mut |written| {
        calls += 1;
        // Everything the generator produced but the extractor has not yet written is buffered
        // somewhere between them (gzip, gunzip, tar, our copy buffer).
        widest = widest.max(produced.load(Ordering::Relaxed) - 512 - written);
    })
    .unwrap();
    assert_eq!(report.bytes, SIZE);
    assert_eq!(fs::metadata(dest.join("var/big")).unwrap().len(), SIZE);
    println!("widest window between the generator and the disk: {widest} bytes");
    // The gunzip thread reads ahead by at most 4 blocks of 256 KiB plus the one being untarred;
    // with the decoders' and the copy buffer's share, the window stays under 2 MiB.
    assert!(widest < 2 << 20, "{widest} bytes were buffered");
    assert!(
        calls >= SIZE / (128 << 10),
        "progress was reported only {calls} times"
    );
    let mut tail = vec![0; 4096];
    let mut file = fs::File::open(dest.join("var/big")).unwrap();
    io::Seek::seek(&mut file, io::SeekFrom::End(-4096)).unwrap();
    file.read_exact(&mut tail).unwrap();
    assert!(tail.iter().all(|&b| b == pattern(SIZE - 4096)));
}
