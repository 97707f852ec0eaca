//! Applying tar members to the filesystem: the content, then ownership (numeric, only as root),
//! mode, extended attributes and mtime, in that order so `chown` cannot clear set-id bits and
//! nothing after the mtime changes it. Directories get their mode, owner and mtime once the whole
//! archive is in, deepest first, so adding their contents neither fails on a read-only directory
//! nor moves the mtime the archive recorded.
//!
//! System calls per member are kept few, since they are most of an extraction's cost once inflating
//! runs on its own thread: parent directories are checked once per extraction, not once per member,
//! and a new file is created with `O_EXCL` straight away, the path cleared only when something is
//! already there.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::{self, File, FileTimes, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use rustix::fs::{AtFlags, CWD, FileType, Mode, Timespec, Timestamps, XattrFlags};
use tar::EntryType;

use super::paths::{self, Parents};

/// PAX keyword prefix under which GNU tar `--xattrs` (and tar-rs) store each extended attribute.
const PAX_XATTR: &str = "SCHILY.xattr.";
/// PAX keyword GNU tar `--selinux` stores the SELinux label under (lca-cli passes `--selinux`).
const PAX_SELINUX: &str = "RHT.security.selinux";
const SELINUX_XATTR: &str = "security.selinux";
/// PAX keyword prefix of GNU tar `--acls` records (text ACLs, not restored here).
const PAX_ACL: &str = "SCHILY.acl.";
/// Failures logged at warn level before the rest go to debug (a summary follows at the end).
const LOUD_FAILURES: u64 = 5;
/// Copy buffer: the only per-file memory, whatever the archive's size.
const BUFFER: usize = 128 * 1024;

/// Metadata of one member, from its header and PAX records.
struct Meta {
    mode: u32,
    uid: u64,
    gid: u64,
    mtime: Timespec,
    xattrs: Vec<(OsString, Vec<u8>)>,
}

/// State of one extraction: the destination, counters, and the directories still to finish.
pub(super) struct Extractor<'a> {
    dest: &'a Path,
    top: Option<&'a str>,
    root: bool,
    progress: &'a mut dyn FnMut(u64),
    buffer: Vec<u8>,
    dirs: Vec<(PathBuf, Meta)>,
    /// Directories checked on the way to earlier members and reached without symlinks: members
    /// under them skip the check (see `paths::resolve_known`). A directory is forgotten, with what
    /// is under it, when a member that is not a directory lands on it (which could put a symlink in
    /// the way); all are forgotten when a member is reached through a symlink, since it may land
    /// on a known directory under another name.
    known_dirs: HashSet<PathBuf>,
    last: String,
    report: RestoreReport,
}

impl<'a> Extractor<'a> {
    pub(super) fn new(
        dest: &'a Path,
        top: Option<&'a str>,
        progress: &'a mut dyn FnMut(u64),
    ) -> Self {
        Extractor {
            dest,
            top,
            root: rustix::process::geteuid().is_root(),
            progress,
            buffer: vec![0; BUFFER],
            dirs: Vec::new(),
            known_dirs: HashSet::new(),
            last: String::new(),
            report: RestoreReport::default(),
        }
    }

    /// Context for an error while reading the next member's header.
    pub(super) fn reading_context(&self) -> String {
        match self.last.as_str() {
            "" => "reading the archive's first member".to_string(),
            last => format!("reading the archive after member `{last}`"),
        }
    }

    /// Applies one member; errors name it as the archive does.
    pub(super) fn apply<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<()> {
        self.last = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        self.apply_member(entry)
            .with_context(|| format!("extracting `{}`", self.last))
    }

    fn apply_member<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<()> {
        let kind = entry.header().entry_type();
        // Global PAX records and GNU volume labels describe the archive, not a file.
        if kind == EntryType::XGlobalHeader || kind.as_byte() == b'V' {
            return Ok(());
        }
        let Some(rel) = paths::relative(&entry.path()?, false)? else {
            return Ok(()); // `./`: the destination itself, whose metadata is not the archive's to set
        };
        paths::check_top(&rel, self.top)?;
        let landing = paths::resolve_known(self.dest, &rel, &mut self.known_dirs)?;
        let path = landing.path;
        if !landing.plain {
            self.known_dirs.clear();
        } else if kind != EntryType::Directory && self.known_dirs.contains(&path) {
            self.known_dirs.retain(|known| !known.starts_with(&path));
        }
        let meta = self.read_meta(entry)?;
        match kind {
            EntryType::Directory => self.directory(path, meta)?,
            EntryType::Symlink => self.symlink(entry, &path, &meta)?,
            EntryType::Link => self.hard_link(entry, &path)?,
            EntryType::Char | EntryType::Block | EntryType::Fifo => {
                self.special(entry.header(), kind, &path, &meta)?
            }
            // POSIX: an unknown type flag is a regular file (this covers GNU sparse files too).
            _ => self.file(entry, &path, &meta)?,
        }
        self.report.entries += 1;
        Ok(())
    }

    fn read_meta<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<Meta> {
        let header = entry.header();
        let mut meta = Meta {
            mode: header.mode()? & 0o7777,
            uid: header.uid()?,
            gid: header.gid()?,
            mtime: Timespec {
                tv_sec: i64::try_from(header.mtime()?)?,
                tv_nsec: 0,
            },
            xattrs: Vec::new(),
        };
        let mut acls = false;
        for record in entry.pax_extensions()?.into_iter().flatten() {
            let record = record?;
            // Keywords are UTF-8 by the PAX standard; one that is not names nothing we restore.
            let Ok(key) = record.key() else { continue };
            let value = record.value_bytes();
            match key {
                "uid" => meta.uid = parse_pax_int(value).unwrap_or(meta.uid),
                "gid" => meta.gid = parse_pax_int(value).unwrap_or(meta.gid),
                "mtime" => meta.mtime = parse_pax_time(value).unwrap_or(meta.mtime),
                PAX_SELINUX => add_xattr(&mut meta.xattrs, SELINUX_XATTR, value),
                _ if key.starts_with(PAX_ACL) => acls = true,
                _ => {
                    if let Some(name) = key.strip_prefix(PAX_XATTR) {
                        add_xattr(&mut meta.xattrs, name, value);
                    }
                }
            }
        }
        self.report.acls_ignored += u64::from(acls);
        Ok(meta)
    }

    fn file<R: Read>(&mut self, data: &mut R, path: &Path, meta: &Meta) -> Result<()> {
        let create = || {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
        };
        // O_EXCL never follows a symlink: whatever is in the way fails the open and is cleared.
        let mut file = match create() {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                paths::clear(path, false)?;
                create()
            }
            other => other,
        }
        .with_context(|| format!("creating {}", path.display()))?;
        self.copy(data, &mut file, path)?;
        self.finish_file(&file, path, meta)
    }

    /// Streams a member's content through the fixed buffer, reporting progress per buffer.
    fn copy<R: Read>(&mut self, data: &mut R, file: &mut File, path: &Path) -> Result<()> {
        loop {
            let read = data.read(&mut self.buffer).context("reading the archive")?;
            if read == 0 {
                return Ok(());
            }
            file.write_all(&self.buffer[..read])
                .with_context(|| format!("writing {}", path.display()))?;
            self.report.bytes += read as u64;
            (self.progress)(self.report.bytes);
        }
    }

    fn finish_file(&mut self, file: &File, path: &Path, meta: &Meta) -> Result<()> {
        if self.root {
            std::os::unix::fs::fchown(file, Some(owner_id(meta.uid)?), Some(owner_id(meta.gid)?))
                .with_context(|| format!("setting the owner of {}", path.display()))?;
        }
        file.set_permissions(fs::Permissions::from_mode(meta.mode))
            .with_context(|| format!("setting the mode of {}", path.display()))?;
        self.set_xattrs_with(path, &meta.xattrs, |name, value| {
            rustix::fs::fsetxattr(file, name, value, XattrFlags::empty())
        });
        file.set_times(FileTimes::new().set_modified(system_time(meta.mtime)))
            .with_context(|| format!("setting the mtime of {}", path.display()))
    }

    fn directory(&mut self, path: PathBuf, mut meta: Meta) -> Result<()> {
        if !paths::clear(&path, true)? {
            fs::create_dir(&path)
                .with_context(|| format!("creating directory {}", path.display()))?;
        }
        // Labels go on now: new files inherit nothing from them, and they do not move the mtime.
        // Only mode, owner and mtime wait, so the pending list stays small per directory.
        self.set_xattrs(&path, &std::mem::take(&mut meta.xattrs));
        self.dirs.push((path, meta));
        Ok(())
    }

    fn symlink<R: Read>(
        &mut self,
        entry: &tar::Entry<'_, R>,
        path: &Path,
        meta: &Meta,
    ) -> Result<()> {
        let target = entry.link_name()?.context("symlink without a target")?;
        paths::clear(path, false)?;
        std::os::unix::fs::symlink(&target, path).with_context(|| {
            format!(
                "creating symlink {} -> {}",
                path.display(),
                target.display()
            )
        })?;
        self.finish_path(path, meta, false)
    }

    /// Hard links name another member of the archive, so they are held to the same rules.
    fn hard_link<R: Read>(&mut self, entry: &tar::Entry<'_, R>, path: &Path) -> Result<()> {
        let target = entry.link_name()?.context("hard link without a target")?;
        let shown = target.display().to_string();
        let source = paths::relative(&target, false)
            .and_then(|rel| rel.context("hard link to the destination itself"))
            .and_then(|rel| paths::check_top(&rel, self.top).map(|()| rel))
            .and_then(|rel| paths::resolve(self.dest, &rel, Parents::MustExist))
            .with_context(|| format!("hard link target `{shown}`"))?;
        let source =
            source.with_context(|| format!("hard link target `{shown}` does not exist"))?;
        if source == path {
            return Ok(());
        }
        paths::clear(path, false)?;
        fs::hard_link(&source, path)
            .with_context(|| format!("linking {} to {}", path.display(), source.display()))
    }

    fn special(
        &mut self,
        header: &tar::Header,
        kind: EntryType,
        path: &Path,
        meta: &Meta,
    ) -> Result<()> {
        let file_type = match kind {
            EntryType::Char => FileType::CharacterDevice,
            EntryType::Block => FileType::BlockDevice,
            _ => FileType::Fifo,
        };
        if file_type != FileType::Fifo && !self.root {
            tracing::warn!(target: "ibi::agent::restore_files::apply",
                "skipping device node {}: only root can create it",
                path.display()
            );
            self.report.specials_skipped += 1;
            return Ok(());
        }
        // A FIFO has no device number, and archivers leave the fields blank rather than zero.
        let (major, minor) = match file_type {
            FileType::Fifo => (0, 0),
            _ => (
                header.device_major()?.unwrap_or(0),
                header.device_minor()?.unwrap_or(0),
            ),
        };
        paths::clear(path, false)?;
        let mode = Mode::from_raw_mode(meta.mode);
        rustix::fs::mknodat(
            CWD,
            path,
            file_type,
            mode,
            rustix::fs::makedev(major, minor),
        )
        .with_context(|| format!("creating special file {}", path.display()))?;
        self.finish_path(path, meta, true)
    }

    /// Metadata by path, for members that cannot be opened for writing (symlinks, devices, dirs).
    fn finish_path(&mut self, path: &Path, meta: &Meta, chmod: bool) -> Result<()> {
        if self.root {
            std::os::unix::fs::lchown(path, Some(owner_id(meta.uid)?), Some(owner_id(meta.gid)?))
                .with_context(|| format!("setting the owner of {}", path.display()))?;
        }
        if chmod {
            fs::set_permissions(path, fs::Permissions::from_mode(meta.mode))
                .with_context(|| format!("setting the mode of {}", path.display()))?;
        }
        self.set_xattrs(path, &meta.xattrs);
        let times = Timestamps {
            last_access: meta.mtime,
            last_modification: meta.mtime,
        };
        rustix::fs::utimensat(CWD, path, &times, AtFlags::SYMLINK_NOFOLLOW)
            .with_context(|| format!("setting the mtime of {}", path.display()))
    }

    /// Best effort: a filesystem or security module refusing an attribute is counted and warned
    /// about; the restore goes on (lca-cli's tar only warns too).
    fn set_xattrs(&mut self, path: &Path, xattrs: &[(OsString, Vec<u8>)]) {
        self.set_xattrs_with(path, xattrs, |name, value| {
            rustix::fs::lsetxattr(path, name, value, XattrFlags::empty())
        });
    }

    /// [`Self::set_xattrs`] through `set` (by path, or on an open file: no path walk per label).
    fn set_xattrs_with(
        &mut self,
        path: &Path,
        xattrs: &[(OsString, Vec<u8>)],
        set: impl Fn(&std::ffi::OsStr, &[u8]) -> rustix::io::Result<()>,
    ) {
        for (name, value) in xattrs {
            match set(name.as_os_str(), value) {
                Ok(()) => self.report.xattrs += 1,
                Err(err) => {
                    self.report.xattr_failures += 1;
                    let name = name.to_string_lossy();
                    if self.report.xattr_failures <= LOUD_FAILURES {
                        tracing::warn!(target: "ibi::agent::restore_files::apply",
                            "cannot set {name} on {}: {err}", path.display());
                    } else {
                        tracing::debug!(target: "ibi::agent::restore_files::apply",
                            "cannot set {name} on {}: {err}", path.display());
                    }
                }
            }
        }
    }

    /// Finishes the directories, deepest first (a child sorts after its parent, so reverse order).
    pub(super) fn finish(mut self) -> Result<RestoreReport> {
        let mut dirs = std::mem::take(&mut self.dirs);
        dirs.sort_by(|a, b| b.0.cmp(&a.0));
        for (path, meta) in dirs {
            self.finish_path(&path, &meta, true).with_context(|| {
                format!("finishing directory `{}`", paths::shown(self.dest, &path))
            })?;
        }
        self.log_summary();
        Ok(self.report)
    }

    fn log_summary(&self) {
        let report = &self.report;
        if report.xattr_failures > 0 {
            tracing::warn!(target: "ibi::agent::restore_files::apply",
                "{} extended attributes could not be set under {} (first failures logged above)",
                report.xattr_failures,
                self.dest.display()
            );
        }
        if report.acls_ignored > 0 {
            tracing::warn!(target: "ibi::agent::restore_files::apply",
                "{} members carried POSIX ACLs, which are not restored",
                report.acls_ignored
            );
        }
    }
}

/// The SELinux label can come twice (`--selinux` and `--xattrs-include=*`); the first one wins.
fn add_xattr(xattrs: &mut Vec<(OsString, Vec<u8>)>, name: &str, value: &[u8]) {
    if !xattrs.iter().any(|(known, _)| known == name) {
        xattrs.push((OsString::from_vec(name.as_bytes().to_vec()), value.to_vec()));
    }
}

fn owner_id(id: u64) -> Result<u32> {
    match u32::try_from(id) {
        Ok(id) => Ok(id),
        Err(_) => bail!("owner id {id} is out of range"),
    }
}

fn parse_pax_int(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// PAX times are decimal seconds with an optional fraction (`1700000000.5`).
fn parse_pax_time(value: &[u8]) -> Option<Timespec> {
    let text = std::str::from_utf8(value).ok()?;
    let (secs, fraction) = text.split_once('.').unwrap_or((text, ""));
    if fraction.is_empty() && text.contains('.') || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = fraction
        .chars()
        .chain(std::iter::repeat('0'))
        .take(9)
        .collect();
    Some(Timespec {
        tv_sec: secs.parse().ok()?,
        tv_nsec: digits.parse().ok()?,
    })
}

fn system_time(time: Timespec) -> SystemTime {
    let nanos = Duration::from_nanos(u64::try_from(time.tv_nsec).unwrap_or(0));
    match u64::try_from(time.tv_sec) {
        Ok(secs) => SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + nanos,
        Err(_) => SystemTime::UNIX_EPOCH - Duration::from_secs(time.tv_sec.unsigned_abs()) + nanos,
    }
}

/// What one restore did; the agent's status file and closing log line are built from it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// Archive members processed (files, directories, links, special files).
    pub entries: u64,
    /// File content bytes written.
    pub bytes: u64,
    /// Extended attributes set.
    pub xattrs: u64,
    /// Extended attributes the filesystem refused (each one warned about, the first few loudly).
    pub xattr_failures: u64,
    /// Device nodes skipped because we are not root.
    pub(crate) specials_skipped: u64,
    /// Members carrying POSIX ACL records (`SCHILY.acl.*`), which are not restored.
    pub(crate) acls_ignored: u64,
    /// `etc.deletions` lines whose path was deleted.
    pub(crate) deletions_applied: u64,
    /// `etc.deletions` lines whose path did not exist (a warning, not an abort as in lca-cli).
    pub(crate) deletions_missing: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_times_keep_their_fraction() {
        let cases: &[(&str, Option<(i64, i64)>)] = &[
            ("1700000000", Some((1_700_000_000, 0))),
            ("1700000000.5", Some((1_700_000_000, 500_000_000))),
            (
                "1700000000.123456789123",
                Some((1_700_000_000, 123_456_789)),
            ),
            ("-5", Some((-5, 0))),
            ("1.", None),
            ("x", None),
        ];
        for (text, want) in cases {
            let got = parse_pax_time(text.as_bytes()).map(|t| (t.tv_sec, t.tv_nsec));
            assert_eq!(got, *want, "{text}");
        }
    }

    #[test]
    fn the_first_selinux_label_wins() {
        let mut xattrs = Vec::new();
        add_xattr(&mut xattrs, SELINUX_XATTR, b"a");
        add_xattr(&mut xattrs, SELINUX_XATTR, b"b");
        add_xattr(&mut xattrs, "user.x", b"c");
        assert_eq!(xattrs.len(), 2);
        assert_eq!(xattrs[0].1, b"a");
    }
}
