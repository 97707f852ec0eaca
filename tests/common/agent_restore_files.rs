//! What the tests of tests/fast/agent_restore_files.rs, tests/root/agent_restore_files.rs and
//! tests/tools/agent_restore_files.rs share: one file of tests, split by what each test needs
//! (docs/architecture.md, "Tests").

#![cfg(feature = "agent")]
use flate2::Compression;
use flate2::write::GzEncoder;
use ibi::agent::restore_files::{RestoreReport, extract_tgz};
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};
use tar::{EntryType, Header};

pub(crate) const MTIME: u64 = 1_600_000_000;

/// Builds a tar.gz in memory, member by member.
pub(crate) struct Tgz(pub(crate) tar::Builder<GzEncoder<Vec<u8>>>);

impl Tgz {
    pub(crate) fn new() -> Self {
        Tgz(tar::Builder::new(GzEncoder::new(
            Vec::new(),
            Compression::fast(),
        )))
    }

    pub(crate) fn header(kind: EntryType, name: &str, mode: u32, mtime: u64) -> Header {
        let mut header = Header::new_gnu();
        header.set_entry_type(kind);
        // Written raw: `set_path` would refuse the escaping names the tests need.
        let raw = &mut header.as_gnu_mut().unwrap().name;
        raw[..name.len()].copy_from_slice(name.as_bytes());
        header.set_mode(mode);
        header.set_mtime(mtime);
        header.set_uid(0);
        header.set_gid(0);
        header.set_size(0);
        header
    }

    pub(crate) fn add(mut self, mut header: Header, data: &[u8], pax: &[(&str, &[u8])]) -> Self {
        if !pax.is_empty() {
            self.0.append_pax_extensions(pax.iter().copied()).unwrap();
        }
        header.set_size(data.len() as u64);
        header.set_cksum();
        self.0.append(&header, data).unwrap();
        self
    }

    pub(crate) fn dir(self, name: &str, mode: u32, mtime: u64) -> Self {
        let header = Self::header(EntryType::Directory, name, mode, mtime);
        self.add(header, b"", &[])
    }

    pub(crate) fn file(self, name: &str, mode: u32, data: &[u8], pax: &[(&str, &[u8])]) -> Self {
        let header = Self::header(EntryType::Regular, name, mode, MTIME + 7);
        self.add(header, data, pax)
    }

    pub(crate) fn link(self, kind: EntryType, name: &str, target: &str) -> Self {
        let mut header = Self::header(kind, name, 0o777, MTIME + 9);
        header.set_link_name(target).unwrap();
        self.add(header, b"", &[])
    }

    pub(crate) fn finish(self) -> Vec<u8> {
        self.0.into_inner().unwrap().finish().unwrap()
    }
}

pub(crate) fn dest() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("dest");
    fs::create_dir(&dest).unwrap();
    (dir, dest)
}

pub(crate) fn extract(archive: &[u8], dest: &Path) -> anyhow::Result<RestoreReport> {
    extract_tgz(archive, dest, &mut |_| {})
}

pub(crate) fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    let mut buf = vec![0; 1024];
    let len = rustix::fs::lgetxattr(path, name, &mut buf).ok()?;
    buf.truncate(len);
    Some(buf)
}

pub(crate) fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
}

pub(crate) fn mtime(path: &Path) -> SystemTime {
    fs::symlink_metadata(path).unwrap().modified().unwrap()
}

pub(crate) fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

pub(crate) const LABEL: &[u8] = b"system_u:object_r:etc_t:s0";

/// Whether this filesystem and kernel take a `security.selinux` label at all.
pub(crate) fn selinux_labels_supported(dir: &Path) -> Result<(), String> {
    let probe = dir.join("probe");
    fs::write(&probe, b"").unwrap();
    let set = rustix::fs::setxattr(
        &probe,
        "security.selinux",
        LABEL,
        rustix::fs::XattrFlags::empty(),
    );
    fs::remove_file(&probe).unwrap();
    set.map_err(|err| err.to_string())
}

pub(crate) fn sample_archive() -> Vec<u8> {
    Tgz::new()
        .dir("etc/", 0o755, MTIME)
        .dir("etc/sub/", 0o700, MTIME + 100)
        .file(
            "etc/sub/secret",
            0o600,
            b"s3cret",
            &[("SCHILY.xattr.user.ibi", b"test")],
        )
        .file("etc/sub/deeper/auto", 0o644, b"parent made on the fly", &[])
        .file("etc/tool", 0o755, b"#!/bin/sh\n", &[])
        .link(EntryType::Symlink, "etc/link", "sub/secret")
        .link(EntryType::Symlink, "etc/dangling", "/nowhere/at/all")
        .link(EntryType::Link, "etc/hard", "etc/tool")
        .file(
            "etc/labelled",
            0o644,
            b"x",
            &[
                ("RHT.security.selinux", LABEL),
                ("SCHILY.xattr.security.selinux", b"other"),
            ],
        )
        .finish()
}

/// Produces, on demand, an uncompressed tar stream holding one file of `size` patterned bytes,
/// counting what it has handed out.
pub(crate) struct TarGenerator {
    pub(crate) header: Vec<u8>,
    pub(crate) size: u64,
    pub(crate) produced: Arc<AtomicU64>,
}

impl TarGenerator {
    /// The byte at `pos` and how many bytes from there on are the same.
    pub(crate) fn run_at(&self, pos: u64) -> (u8, u64) {
        match pos {
            0..512 => (self.header[pos as usize], 1),
            _ if pos - 512 < self.size => {
                let offset = pos - 512;
                (
                    pattern(offset),
                    (4096 - offset % 4096).min(self.size - offset),
                )
            }
            _ => (0, u64::MAX),
        }
    }
}

pub(crate) fn pattern(offset: u64) -> u8 {
    (offset / 4096 % 251) as u8
}

impl Read for TarGenerator {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let total = 512 + self.size.next_multiple_of(512) + 1024;
        let mut filled = 0;
        while filled < buf.len() && self.produced.load(Ordering::Relaxed) < total {
            let pos = self.produced.load(Ordering::Relaxed);
            let (byte, run) = self.run_at(pos);
            let len = (buf.len() - filled).min(usize::try_from(run.min(total - pos)).unwrap());
            buf[filled..filled + len].fill(byte);
            filled += len;
            self.produced.store(pos + len as u64, Ordering::Relaxed);
        }
        Ok(filled)
    }
}
