//! Where a request's bytes come from, fixed when the request starts: the descriptor opened then is
//! read to the end, so a rebuild that renames a new file into place cannot mix versions into one
//! answer. The sha256 (the ETag) is computed once per file version (device, inode, size, mtime)
//! and cached; concurrent first requests wait for one hash rather than each computing it.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openssl::sha::Sha256;

use crate::contract::config_iso::ISO_FILE_NAME;
use crate::install_image::per_host;
use crate::install_image::site_tree::read_site_tree;
use crate::install_image::variant::{BaseIso, Recipe, hash_base_and_patched, load_recipe};
use crate::util::digest::hex;
use crate::util::file_version::FileVersion;
use crate::util::secret::Secret;

/// An image's bytes: a file, or a base ISO with patches (`create image --patch-only`), or one
/// host's own installation ISO made from either.
#[derive(Debug, Clone)]
pub enum Source {
    File(PathBuf),
    /// The path of the patch file.
    Variant(PathBuf),
    /// The installation ISO `of` made one host's own (`install_image::per_host`): its report settings
    /// carrying the host's own report token, and for a one-shot install the configuration tree of
    /// the site directory `site` (read from its configuration ISO). One patch more, computed once
    /// per version of `of` and of the site's configuration ISO.
    Host {
        of: Box<Source>,
        token: Option<Secret>,
        site: Option<PathBuf>,
    },
}

impl Source {
    pub fn path(&self) -> &Path {
        match self {
            Source::File(p) | Source::Variant(p) => p,
            Source::Host { of, .. } => of.path(),
        }
    }
}

/// An image opened for one request.
pub struct Opened {
    pub file: File,
    /// The version of `file` when opened; the body stops if it changes underneath.
    pub version: FileVersion,
    /// The patches laid over `file`'s bytes, for a variant.
    pub recipe: Option<Arc<Recipe>>,
    pub size: u64,
    /// The strong entity tag: the bytes' sha256, or for a host's variant the sha256 of what makes
    /// it (the installation ISO's sha256 and the host's patch).
    pub etag: String,
    /// The bytes' sha256 when known: a host's variant is never hashed whole (a full read of the
    /// ISO per host).
    pub sha256: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0} does not exist (any more)")]
    Missing(String),
    /// The base ISO of a variant is not the one its patch was made for.
    #[error("{0}")]
    Stale(String),
    #[error("{path}: {err}")]
    Io { path: String, err: io::Error },
}

type Slot<T> = Arc<Mutex<Option<T>>>;

/// Hashes and parsed patch files, by file version; only the latest version of a path is kept.
#[derive(Default)]
pub struct Cache {
    hashes: Mutex<HashMap<PathBuf, (FileVersion, Slot<String>)>>,
    recipes: Mutex<HashMap<PathBuf, (FileVersion, Arc<Recipe>)>>,
    /// Hosts' variants, by the digest of the host's token and site, with the versions of the ISO and
    /// of the site's configuration ISO they were made from.
    hosts: Mutex<HashMap<String, (String, Arc<Recipe>)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a lookup or one insert: a panic cannot leave a half-made entry.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Cache {
    /// The sha256 of `file` (which is `path` at `version`), computed at most once per version.
    pub fn sha256(&self, path: &Path, file: &File, version: FileVersion) -> io::Result<String> {
        let slot = {
            let mut map = lock(&self.hashes);
            match map.get(path) {
                Some((v, slot)) if *v == version => slot.clone(),
                _ => {
                    let slot: Slot<String> = Arc::default();
                    map.insert(path.to_path_buf(), (version, slot.clone()));
                    slot
                }
            }
        };
        let mut done = lock(&slot);
        if let Some(h) = done.as_ref() {
            return Ok(h.clone());
        }
        let (h, _) = hash_base_and_patched(file, &[], version.size)?;
        *done = Some(h.clone());
        Ok(h)
    }

    fn recipe(&self, path: &Path, version: FileVersion) -> Result<Arc<Recipe>, OpenError> {
        if let Some((_, r)) = lock(&self.recipes).get(path).filter(|(v, _)| *v == version) {
            return Ok(r.clone());
        }
        let r = Arc::new(load_recipe(path).map_err(|e| OpenError::Stale(format!("{e:#}")))?);
        lock(&self.recipes).insert(path.to_path_buf(), (version, r.clone()));
        Ok(r)
    }
}

/// Opens `source` for one request (blocking: it may hash a new version).
pub fn open(source: &Source, cache: &Cache) -> Result<Opened, OpenError> {
    match source {
        Source::File(path) => {
            let (file, version) = open_file(path)?;
            let sha256 = cache
                .sha256(path, &file, version)
                .map_err(|err| io_err(path, err))?;
            Ok(Opened {
                file,
                version,
                recipe: None,
                size: version.size,
                etag: sha256.clone(),
                sha256: Some(sha256),
            })
        }
        Source::Variant(path) => open_variant(path, cache),
        Source::Host { of, token, site } => open_host(of, token.as_ref(), site.as_deref(), cache),
    }
}

/// A host's variant: `of` opened as usual, then its patches with the host's Ignition patch in place
/// of the fleet's. Made at the first request per version of `of` (a decode and an xz of a few KiB).
fn open_host(
    of: &Source,
    token: Option<&Secret>,
    site: Option<&Path>,
    cache: &Cache,
) -> Result<Opened, OpenError> {
    let inner = open(of, cache)?;
    let mut key = Sha256::new();
    key.update(token.map_or(&b""[..], |t| t.expose_str().as_bytes()));
    key.update(b"\0");
    key.update(site.map_or(&b""[..], |s| s.as_os_str().as_encoded_bytes()));
    let key = hex(&key.finish());
    // The site's configuration ISO is part of what the variant is made from: a rebuild of it is a
    // new variant.
    let made_from = match site {
        None => inner.etag.clone(),
        Some(dir) => {
            let iso = dir.join(ISO_FILE_NAME);
            let meta = std::fs::metadata(&iso).map_err(|err| match err.kind() {
                io::ErrorKind::NotFound => OpenError::Missing(iso.display().to_string()),
                _ => io_err(&iso, err),
            })?;
            format!("{} {:?}", inner.etag, FileVersion::of(&meta))
        }
    };
    let kept = lock(&cache.hosts)
        .get(&key)
        .filter(|(v, _)| *v == made_from)
        .map(|(_, r)| r.clone());
    let recipe = match kept {
        Some(r) => r,
        None => {
            let r = Arc::new(host_recipe(of, &inner, token, site)?);
            lock(&cache.hosts).insert(key, (made_from, r.clone()));
            r
        }
    };
    Ok(Opened {
        file: inner.file,
        version: inner.version,
        size: inner.size,
        etag: recipe.sha256.clone(),
        sha256: None,
        recipe: Some(recipe),
    })
}

fn host_recipe(
    of: &Source,
    inner: &Opened,
    token: Option<&Secret>,
    site: Option<&Path>,
) -> Result<Recipe, OpenError> {
    let fleet_patches = inner.recipe.as_ref().map_or(&[][..], |r| &r.patches[..]);
    let failed = |e: anyhow::Error| {
        OpenError::Stale(format!(
            "making the host's variant of {}: {e:#}",
            of.path().display()
        ))
    };
    let tree = site.map(read_site_tree).transpose().map_err(failed)?;
    let embedded = per_host::read(&inner.file, fleet_patches).map_err(failed)?;
    let patch = embedded.patch_for(token, tree.as_ref()).map_err(failed)?;
    let mut tag = Sha256::new();
    tag.update(inner.etag.as_bytes());
    tag.update(&patch.offset.to_be_bytes());
    tag.update(&patch.data);
    Ok(Recipe {
        base: BaseIso {
            path: of.path().to_path_buf(),
            version: inner.version,
            sha256: inner.etag.clone(),
        },
        size: inner.size,
        sha256: hex(&tag.finish()),
        patches: per_host::with_host_patch(fleet_patches, embedded.area(), patch),
    })
}

fn open_variant(path: &Path, cache: &Cache) -> Result<Opened, OpenError> {
    let (_, recipe_version) = open_file(path)?;
    let recipe = cache.recipe(path, recipe_version)?;
    let base_path = &recipe.base.path;
    let (file, version) = open_file(base_path).map_err(|e| match e {
        OpenError::Missing(p) => {
            OpenError::Stale(format!("the base ISO {p} is gone; run create image again"))
        }
        e => e,
    })?;
    if !version.same_content_stamp(&recipe.base.version) {
        // Touched or copied: the same bytes are fine, other bytes are not.
        let sha = cache
            .sha256(base_path, &file, version)
            .map_err(|err| io_err(base_path, err))?;
        if sha != recipe.base.sha256 {
            return Err(OpenError::Stale(format!(
                "the base ISO {} changed since its patch {} was made; run create image --patch-only again",
                base_path.display(),
                path.display()
            )));
        }
    }
    Ok(Opened {
        file,
        version,
        size: recipe.size,
        etag: recipe.sha256.clone(),
        sha256: Some(recipe.sha256.clone()),
        recipe: Some(recipe),
    })
}

fn open_file(path: &Path) -> Result<(File, FileVersion), OpenError> {
    let file = File::open(path).map_err(|err| match err.kind() {
        io::ErrorKind::NotFound => OpenError::Missing(path.display().to_string()),
        _ => io_err(path, err),
    })?;
    let meta = file.metadata().map_err(|err| io_err(path, err))?;
    if !meta.is_file() {
        return Err(OpenError::Missing(path.display().to_string()));
    }
    Ok((file, FileVersion::of(&meta)))
}

fn io_err(path: &Path, err: io::Error) -> OpenError {
    OpenError::Io {
        path: path.display().to_string(),
        err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renamed_rebuild_gets_a_new_hash_and_the_old_descriptor_keeps_its_bytes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.iso");
        std::fs::write(&p, b"first").unwrap();
        let cache = Cache::default();
        let one = open(&Source::File(p.clone()), &cache).unwrap();
        let tmp = d.path().join("a.iso.tmp");
        std::fs::write(&tmp, b"second!").unwrap();
        std::fs::rename(&tmp, &p).unwrap();
        let two = open(&Source::File(p.clone()), &cache).unwrap();
        assert_ne!(one.etag, two.etag);
        assert_eq!((one.size, two.size), (5, 7));
        let mut buf = [0u8; 5];
        std::os::unix::fs::FileExt::read_exact_at(&one.file, &mut buf, 0).unwrap();
        assert_eq!(&buf, b"first");
        // sha256("first")
        assert_eq!(
            one.sha256.as_deref(),
            Some("a7937b64b8caa58f03721bb6bacf5c78cb235febe0e70b1b84cd99541461a08e")
        );
        assert_eq!(one.sha256.as_deref(), Some(one.etag.as_str()));
    }

    #[test]
    fn a_missing_file_is_missing() {
        let d = tempfile::tempdir().unwrap();
        let err = open(&Source::File(d.path().join("no.iso")), &Cache::default())
            .err()
            .unwrap();
        assert!(matches!(err, OpenError::Missing(_)), "{err}");
    }
}
