//! The base-ISO image cache: where a downloaded ISO lives, the lock that serializes downloads of one file
//! across processes, reuse of a complete file, checksum verification and the final rename.
//!
//! Layout: `$XDG_CACHE_HOME` (or `~/.cache`) `/ibi/image_cache/<name>`, `<name>` being the last segment of the
//! URL path minus `.gz`/`.xz`. The installer uses `.../imagebased/image_cache/<name>` with the same naming; we
//! keep our own directory because our entries differ: a resumable `<name>.part` sits beside them, and a cached
//! file is re-verified when its sha256 is known (the installer trusts any file it finds). One `.lock` file,
//! reused by every download, serializes writers; nothing else is left behind.
//!
//! A cached file is never removed for failing a checksum: the checksum may be the typo, and the file the
//! only good copy on a disconnected machine. A new download replaces it only once it has verified.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use reqwest::Url;

use super::download;
use crate::util::fs::{Clobber, ensure_dir, write_atomic_with};

/// Cached ISOs are read-only, as the installer makes them: nothing should edit a base ISO in place.
const CACHED_FILE_MODE: u32 = 0o444;
const CACHE_DIR_MODE: u32 = 0o755;
/// Suffixes of compressed downloads; the cache entry is the decompressed file without them.
const COMPRESSED_SUFFIXES: [&str; 2] = [".gz", ".xz"];
const GZIP_MAGIC: &[u8] = &[0x1f, 0x8b];
const XZ_MAGIC: &[u8] = &[0xfd, b'7', b'z', b'X', b'Z', 0x00];
/// The one lock of the cache directory. One file for every entry, so a failed URL leaves no lock of its
/// own behind; it is never removed, as unlinking a lock another process waits on would split the lock.
pub const LOCK_FILE: &str = ".lock";

/// The image cache directory: `overridden` when given, else the user cache dir's `ibi/image_cache`.
pub(super) fn cache_dir(overridden: Option<&Path>) -> Result<PathBuf> {
    match overridden {
        Some(d) => Ok(d.to_path_buf()),
        None => default_cache_dir(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")),
    }
}

/// Go's `os.UserCacheDir` on Linux, as the installer uses it; a relative `XDG_CACHE_HOME` is ignored, as
/// the XDG base-directory spec says.
fn default_cache_dir(xdg: Option<OsString>, home: Option<OsString>) -> Result<PathBuf> {
    let root = match (xdg.map(PathBuf::from), home) {
        (Some(x), _) if x.is_absolute() => x,
        (_, Some(h)) if !h.is_empty() => PathBuf::from(h).join(".cache"),
        _ => bail!("cannot find a cache directory: neither $XDG_CACHE_HOME nor $HOME is set"),
    };
    Ok(root.join("ibi").join("image_cache"))
}

/// The cache entry name for `url`: the last path segment, minus one `.gz`/`.xz` suffix.
pub(super) fn cache_file_name(url: &Url) -> Result<String> {
    let last = url
        .path_segments()
        .and_then(|mut s| s.next_back())
        .unwrap_or_default();
    let name = entry_name(last).with_context(|| {
        format!("cannot name a cache file after {url}: its path has no file name")
    })?;
    Ok(name.to_string())
}

/// `file_name` minus one `.gz`/`.xz` suffix; `None` when nothing usable is left.
fn entry_name(file_name: &str) -> Option<&str> {
    let name = COMPRESSED_SUFFIXES
        .iter()
        .find_map(|sfx| file_name.strip_suffix(sfx))
        .unwrap_or(file_name);
    (!matches!(name, "" | "." | "..") && !name.contains('/')).then_some(name)
}

/// Returns the cached copy of `url`, downloading it first unless a complete, verified copy is there.
pub(super) fn fetch_cached(
    url: &Url,
    sha256: Option<&str>,
    dir: &Path,
    backoff: Duration,
) -> Result<PathBuf> {
    ensure_dir(dir, CACHE_DIR_MODE)?;
    let name = cache_file_name(url)?;
    let final_path = dir.join(&name);
    let _lock = lock(&dir.join(LOCK_FILE))?;
    if reuse_cached(&final_path, sha256)? {
        return Ok(final_path);
    }
    let part = dir.join(format!("{name}.part"));
    download::download(url, &part, backoff)?;
    finalize(&part, &final_path, sha256)?;
    tracing::info!("cached base ISO {}", final_path.display());
    Ok(final_path)
}

/// Takes the cache's lock exclusively; a second process waits here and then finds the finished file. The
/// lock is released when the returned handle is dropped, on success or error alike.
fn lock(path: &Path) -> Result<File> {
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("opening lock file {}", path.display()))?;
    match f.try_lock() {
        Ok(()) => return Ok(f),
        Err(fs::TryLockError::WouldBlock) => {
            tracing::info!(
                "waiting for another ibi process to finish with {}",
                path.display()
            );
        }
        Err(fs::TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("locking {}", path.display()));
        }
    }
    f.lock()
        .with_context(|| format!("locking {}", path.display()))?;
    Ok(f)
}

/// True when `path` can be used as is. A cached file whose checksum does not match is kept: the download
/// that follows replaces it only if it verifies.
fn reuse_cached(path: &Path, sha256: Option<&str>) -> Result<bool> {
    if !path.exists() {
        return Ok(false);
    }
    let Some(expected) = sha256 else {
        tracing::info!(
            "using cached base ISO {} (no checksum to verify it against)",
            path.display()
        );
        return Ok(true);
    };
    let found =
        sha256_of(&mut open(path)?).with_context(|| format!("hashing {}", path.display()))?;
    if found == expected {
        tracing::info!("using cached base ISO {}", path.display());
        return Ok(true);
    }
    tracing::warn!(
        "cached {} has sha256 {found}, expected {expected}; downloading it again (the cached file \
         stays until the download verifies)",
        path.display()
    );
    Ok(false)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Xz,
}

/// Sniffs the first bytes, as the installer does, rather than trusting the URL's suffix.
fn sniff(head: &[u8]) -> Compression {
    if head.starts_with(XZ_MAGIC) {
        Compression::Xz
    } else if head.starts_with(GZIP_MAGIC) {
        Compression::Gzip
    } else {
        Compression::None
    }
}

fn compression_of(path: &Path) -> Result<Compression> {
    let mut head = Vec::with_capacity(XZ_MAGIC.len());
    open(path)?
        .take(XZ_MAGIC.len() as u64)
        .read_to_end(&mut head)
        .with_context(|| format!("reading {}", path.display()))?;
    Ok(sniff(&head))
}

pub(super) fn is_compressed(path: &Path) -> Result<bool> {
    Ok(compression_of(path)? != Compression::None)
}

/// Turns a complete download into the cache entry: verified, read-only, renamed into place. A download
/// that fails verification or decompression is removed, so the next run starts afresh.
fn finalize(part: &Path, final_path: &Path, sha256: Option<&str>) -> Result<()> {
    let result = match compression_of(part)? {
        Compression::None => install_plain(part, final_path, sha256),
        c => decompress_into(part, c, final_path, sha256),
    };
    let cleanup = remove_if_exists(part);
    result?;
    cleanup
}

fn install_plain(part: &Path, final_path: &Path, sha256: Option<&str>) -> Result<()> {
    if let Some(expected) = sha256 {
        verify_as(part, final_path, expected)?;
    }
    let f = open(part)?;
    f.set_permissions(Permissions::from_mode(CACHED_FILE_MODE))
        .and_then(|()| f.sync_all())
        .with_context(|| format!("syncing {}", part.display()))?;
    fs::rename(part, final_path)
        .with_context(|| format!("renaming {} to {}", part.display(), final_path.display()))?;
    let dir = final_path.parent().unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing directory {}", dir.display()))
}

/// Decompresses `src` into `final_path` atomically, verifying the sha256 of the decompressed bytes.
fn decompress_into(
    src: &Path,
    c: Compression,
    final_path: &Path,
    sha256: Option<&str>,
) -> Result<()> {
    write_atomic_with(final_path, CACHED_FILE_MODE, Clobber::Replace, |f| {
        let input = BufReader::new(open(src)?);
        let mut reader: Box<dyn Read> = match c {
            Compression::Xz => Box::new(liblzma::read::XzDecoder::new_multi_decoder(input)),
            _ => Box::new(flate2::read::MultiGzDecoder::new(input)),
        };
        let mut out = HashingWriter::new(f);
        io::copy(&mut reader, &mut out)
            .with_context(|| format!("decompressing {}", src.display()))?;
        let found = out.finish();
        match sha256 {
            Some(expected) if found != expected => Err(mismatch(final_path, expected, &found)),
            _ => Ok(()),
        }
    })
}

/// A compressed local ISO cannot be used in place; its decompressed copy goes into the cache.
pub(super) fn decompress_local(src: &Path, sha256: Option<&str>, dir: &Path) -> Result<PathBuf> {
    let file_name = src
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let name = entry_name(&file_name)
        .with_context(|| format!("cannot name a cache file after {}", src.display()))?;
    ensure_dir(dir, CACHE_DIR_MODE)?;
    let final_path = dir.join(name);
    let _lock = lock(&dir.join(LOCK_FILE))?;
    decompress_into(src, compression_of(src)?, &final_path, sha256)?;
    Ok(final_path)
}

/// Checks a file the user gave against `expected`; the file is theirs, so it is kept on a mismatch.
pub(super) fn verify(path: &Path, expected: &str) -> Result<()> {
    verify_as(path, path, expected)
}

fn verify_as(path: &Path, shown: &Path, expected: &str) -> Result<()> {
    let found =
        sha256_of(&mut open(path)?).with_context(|| format!("hashing {}", path.display()))?;
    if found != expected {
        return Err(mismatch(shown, expected, &found));
    }
    Ok(())
}

fn mismatch(path: &Path, expected: &str, found: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "checksum mismatch for {}: expected {expected}, found {found}",
        path.display()
    )
}

fn open(path: &Path) -> Result<File> {
    File::open(path).with_context(|| format!("opening {}", path.display()))
}

fn remove_if_exists(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(()),
    }
}

fn sha256_of(r: &mut impl Read) -> io::Result<String> {
    let mut w = HashingWriter::new(io::sink());
    io::copy(r, &mut w)?;
    Ok(w.finish())
}

/// Passes bytes through to `inner` and hashes them, so decompression and verification take one pass.
struct HashingWriter<W> {
    inner: W,
    hasher: openssl::sha::Sha256,
}

impl<W: Write> HashingWriter<W> {
    fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: openssl::sha::Sha256::new(),
        }
    }

    fn finish(self) -> String {
        crate::util::digest::hex(&self.hasher.finish())
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_file_name_is_the_basename_without_compression_suffix() {
        let cases = [
            (
                "https://m/pub/rhcos-9.6-live.x86_64.iso",
                "rhcos-9.6-live.x86_64.iso",
            ),
            ("https://m/pub/rhcos.iso.xz", "rhcos.iso"),
            ("https://m/pub/rhcos.iso.gz?x=1", "rhcos.iso"),
            ("https://m/a/../b/r.iso#frag", "r.iso"),
            ("https://m/r.iso.xz.gz", "r.iso.xz"),
            ("file:///isos/r%20x.iso", "r%20x.iso"),
        ];
        for (u, want) in cases {
            assert_eq!(
                cache_file_name(&Url::parse(u).unwrap()).unwrap(),
                want,
                "{u}"
            );
        }
        for u in ["https://m/", "https://m/dir/", "https://m/.gz"] {
            let err = cache_file_name(&Url::parse(u).unwrap()).unwrap_err();
            assert!(
                format!("{err:#}").contains("has no file name"),
                "{u}: {err:#}"
            );
        }
    }

    #[test]
    fn default_cache_dir_follows_xdg_then_home() {
        let cases = [
            (Some("/x"), Some("/h"), Some("/x/ibi/image_cache")),
            (Some("rel"), Some("/h"), Some("/h/.cache/ibi/image_cache")),
            (None, Some("/h"), Some("/h/.cache/ibi/image_cache")),
            (None, None, None),
        ];
        for (xdg, home, want) in cases {
            let got = default_cache_dir(xdg.map(OsString::from), home.map(OsString::from));
            assert_eq!(got.ok(), want.map(PathBuf::from), "{xdg:?} {home:?}");
        }
    }

    #[test]
    fn sniffs_compression_from_magic_bytes() {
        assert_eq!(sniff(b"\xfd7zXZ\0rest"), Compression::Xz);
        assert_eq!(sniff(b"\x1f\x8b\x08"), Compression::Gzip);
        assert_eq!(sniff(b"CD001"), Compression::None);
        assert_eq!(sniff(b""), Compression::None);
    }

    #[test]
    fn sha256_matches_a_known_vector() {
        let got = sha256_of(&mut &b"abc"[..]).unwrap();
        assert_eq!(
            got,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn stale_cached_file_is_kept_and_a_good_one_reused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.iso");
        fs::write(&p, b"abc").unwrap();
        let good = sha256_of(&mut &b"abc"[..]).unwrap();
        assert!(reuse_cached(&p, Some(&good)).unwrap());
        assert!(reuse_cached(&p, None).unwrap());
        assert!(!reuse_cached(&p, Some(&"0".repeat(64))).unwrap());
        assert_eq!(
            fs::read(&p).unwrap(),
            b"abc",
            "kept until a download verifies"
        );
    }

    #[test]
    fn gzip_part_is_decompressed_verified_and_removed() {
        let d = tempfile::tempdir().unwrap();
        let (part, fin) = (d.path().join("r.iso.part"), d.path().join("r.iso"));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"live iso bytes").unwrap();
        fs::write(&part, gz.finish().unwrap()).unwrap();
        let sha = sha256_of(&mut &b"live iso bytes"[..]).unwrap();
        finalize(&part, &fin, Some(&sha)).unwrap();
        assert_eq!(fs::read(&fin).unwrap(), b"live iso bytes");
        assert!(!part.exists());
    }

    #[test]
    fn compressed_local_iso_is_decompressed_into_the_cache() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("r.iso.xz");
        let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
        xz.write_all(b"live iso bytes").unwrap();
        fs::write(&src, xz.finish().unwrap()).unwrap();
        assert!(is_compressed(&src).unwrap());
        let cache = d.path().join("cache");
        let got = decompress_local(&src, None, &cache).unwrap();
        assert_eq!(got, cache.join("r.iso"));
        assert_eq!(fs::read(&got).unwrap(), b"live iso bytes");
        let err = decompress_local(&src, Some(&"0".repeat(64)), &cache).unwrap_err();
        assert!(
            format!("{err:#}").contains("checksum mismatch for"),
            "{err:#}"
        );
        assert!(src.exists(), "the user's file is kept");
    }
}
