//! Putting the configuration tree in place atomically: everything is written into a sibling
//! temp dir `<target>.tmp-XXXX` (0700), checked, fsynced and renamed onto the target, so
//! post-pivot (which treats an existing `cluster-configuration` as "configuration present") never
//! sees half a tree, and a bad device leaves the target exactly as it was.

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use tempfile::TempDir;

use contract::config_iso::{MANIFEST_PATH, MANIFESTS_DIR, SEED_RECONFIGURATION_VERSION};
use util::fs::{SECRET_DIR_MODE, SECRET_FILE_MODE};

/// The only `api_version` of SeedReconfiguration post-pivot accepts.
const API_VERSION: u64 = SEED_RECONFIGURATION_VERSION as u64;

/// A temp dir beside the target that the tree is written into.
pub(crate) struct Staging {
    dir: TempDir,
}

impl Staging {
    /// The staging root; callers write through [`Staging::write_file`] and [`Staging::create_dir`].
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Creates `rel` (a relative path from the device) with a mode derived from `source_mode`.
    pub(crate) fn create_dir(&self, rel: &str, source_mode: Option<u32>) -> Result<()> {
        let path = self.path().join(safe_relative(rel)?);
        fs::create_dir_all(&path).with_context(|| format!("creating {rel}"))?;
        fs::set_permissions(&path, Permissions::from_mode(dir_mode(source_mode)))
            .with_context(|| format!("setting the mode of {rel}"))
    }

    /// Writes `data` to `rel` (parents created) with its final mode set before any byte lands.
    pub(crate) fn write_file(
        &self,
        rel: &str,
        data: &[u8],
        source_mode: Option<u32>,
    ) -> Result<()> {
        let path = self.path().join(safe_relative(rel)?);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating the parent of {rel}"))?;
        }
        let mode = file_mode(rel, source_mode);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
            .with_context(|| format!("creating {rel}"))?;
        f.set_permissions(Permissions::from_mode(mode))
            .with_context(|| format!("setting the mode of {rel}"))?;
        f.write_all(data)
            .with_context(|| format!("writing {rel}"))?;
        f.sync_all().with_context(|| format!("syncing {rel}"))
    }
}

/// Rejects absolute paths and `..`: names come from an untrusted device.
pub(crate) fn safe_relative(rel: &str) -> Result<PathBuf> {
    let path = Path::new(rel);
    let ok = !rel.is_empty()
        && !rel.contains('\0')
        && path.components().all(|c| matches!(c, Component::Normal(_)));
    if !ok {
        bail!("unsafe path {rel:?} on the device");
    }
    Ok(path.to_path_buf())
}

/// manifest.json holds private keys and the pull secret: 0600 whatever the device says. Other files
/// keep their read and execute bits, lose group/other write and set-id bits, stay owner-writable.
pub(crate) fn file_mode(rel: &str, source_mode: Option<u32>) -> u32 {
    if rel == MANIFEST_PATH {
        return SECRET_FILE_MODE;
    }
    source_mode.map_or(0o644, |m| (m & 0o755) | 0o600)
}

/// Directories stay traversable by their owner whatever the device says.
pub(crate) fn dir_mode(source_mode: Option<u32>) -> u32 {
    source_mode.map_or(0o755, |m| (m & 0o755) | 0o700)
}

/// Checks the manifest post-pivot will read: JSON with `api_version` 1. Parse errors carry only a
/// line and column, never the content (it holds secrets).
pub(crate) fn check_manifest(data: &[u8]) -> Result<()> {
    let v: serde_json::Value = serde_json::from_slice(data).context("is not valid JSON")?;
    match v.get("api_version") {
        Some(n) if n.as_u64() == Some(API_VERSION) => Ok(()),
        Some(other) => bail!("api_version is {other}, expected {API_VERSION}"),
        None => bail!("has no api_version (expected {API_VERSION})"),
    }
}

/// The tree in `dir` is what post-pivot needs: a valid manifest and a `manifests/` directory (it
/// lists that directory unconditionally).
pub(crate) fn validate_tree(dir: &Path) -> Result<()> {
    let manifest = dir.join(MANIFEST_PATH);
    let data = fs::read(&manifest).with_context(|| format!("{MANIFEST_PATH} is missing"))?;
    check_manifest(&data).with_context(|| MANIFEST_PATH.to_string())?;
    if !dir.join(MANIFESTS_DIR).is_dir() {
        bail!("{MANIFESTS_DIR}/ is missing (post-pivot needs it, even empty)");
    }
    Ok(())
}

/// Builds the tree with `fill`, checks it and renames it onto `target`. On any error the staging
/// dir is removed and `target` is untouched.
pub(crate) fn install_atomically<F>(target: &Path, fill: F) -> Result<()>
where
    F: FnOnce(&Staging) -> Result<()>,
{
    let (parent, name) = split_target(target)?;
    fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let staging = Staging {
        dir: sibling_dir(parent, name, "tmp")?,
    };
    fill(&staging)?;
    validate_tree(staging.path())?;
    sync_tree(staging.path())?;
    let staged = staging.dir.keep();
    let placed = place(&staged, target, parent, name);
    if placed.is_err() {
        let _ = fs::remove_dir_all(&staged);
    }
    placed?;
    sync_dir(parent)
}

fn split_target(target: &Path) -> Result<(&Path, &OsStr)> {
    let name = target
        .file_name()
        .with_context(|| format!("{} has no final component", target.display()))?;
    let parent = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((parent, name))
}

/// A fresh 0700 dir `<parent>/<name>.<tag>-XXXX`, removed on drop unless kept.
fn sibling_dir(parent: &Path, name: &OsStr, tag: &str) -> Result<TempDir> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("{}.{tag}-", name.to_string_lossy()))
        .permissions(Permissions::from_mode(SECRET_DIR_MODE))
        .tempdir_in(parent)
        .with_context(|| format!("creating a temp dir in {}", parent.display()))?;
    fs::set_permissions(dir.path(), Permissions::from_mode(SECRET_DIR_MODE))
        .with_context(|| format!("setting the mode of {}", dir.path().display()))?;
    Ok(dir)
}

/// Renames `staged` onto `target`. An existing target (a directory without a manifest, e.g. an
/// empty one) is first moved aside and put back if the second rename fails.
fn place(staged: &Path, target: &Path, parent: &Path, name: &OsStr) -> Result<()> {
    let rename_in = || {
        fs::rename(staged, target)
            .with_context(|| format!("renaming {} to {}", staged.display(), target.display()))
    };
    let Ok(meta) = target.symlink_metadata() else {
        return rename_in();
    };
    if !meta.is_dir() {
        bail!(
            "{} exists and is not a directory; not replacing it",
            target.display()
        );
    }
    // rename(2) may replace an empty directory, so the aside name is a fresh empty dir.
    let aside = sibling_dir(parent, name, "old")?.keep();
    fs::rename(target, &aside)
        .with_context(|| format!("moving the old {} aside", target.display()))?;
    if let Err(e) = rename_in() {
        let _ = fs::rename(&aside, target);
        return Err(e);
    }
    if let Err(e) = fs::remove_dir_all(&aside) {
        tracing::warn!(target: "ibi::agent::fetch_config::stage",
            "could not remove the old tree {}: {e}", aside.display());
    }
    Ok(())
}

/// An exclusive `flock` on the target's parent directory: two runs (the unit and someone running
/// the command by hand) never stage, clean up or rename at the same time. Released on drop.
pub(crate) struct ParentLock {
    _dir: File,
}

/// Takes the lock, creating the parent if needed; blocks while another run holds it.
pub(crate) fn lock_parent(target: &Path) -> Result<ParentLock> {
    let (parent, _) = split_target(target)?;
    fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let dir = File::open(parent).with_context(|| format!("opening {}", parent.display()))?;
    rustix::fs::flock(&dir, rustix::fs::FlockOperation::LockExclusive)
        .with_context(|| format!("locking {}", parent.display()))?;
    Ok(ParentLock { _dir: dir })
}

/// Removes `<name>.tmp-*` and `<name>.old-*` left by a run that died before renaming.
pub(crate) fn remove_leftovers(target: &Path) -> Result<()> {
    let (parent, name) = split_target(target)?;
    let Ok(entries) = fs::read_dir(parent) else {
        return Ok(());
    };
    let name = name.to_string_lossy();
    let prefixes = [format!("{name}.tmp-"), format!("{name}.old-")];
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && prefixes.iter().any(|p| file_name.starts_with(p.as_str())) {
            tracing::info!(target: "ibi::agent::fetch_config::stage",
                "removing leftover {}", entry.path().display());
            fs::remove_dir_all(entry.path())
                .with_context(|| format!("removing {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// fsyncs every directory of the tree (files were synced as they were written), deepest first.
fn sync_tree(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            sync_tree(&entry.path())?;
        }
    }
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing directory {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use util::fs::sorted_names as names;

    const GOOD: &[u8] = br#"{"api_version":1,"pull_secret":"s3cret"}"#;

    fn good_tree(s: &Staging) -> Result<()> {
        s.write_file(MANIFEST_PATH, GOOD, Some(0o100644))?;
        s.create_dir(MANIFESTS_DIR, Some(0o40755))?;
        s.write_file("extra-manifests/a.yaml", b"kind: A\n", Some(0o100666))
    }

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn manifest_checks_render_clear_errors() {
        let cases: &[(&[u8], Option<&str>)] = &[
            (GOOD, None),
            (b"{\"api_version\":2}", Some("api_version is 2, expected 1")),
            (
                b"{\"api_version\":\"1\"}",
                Some("api_version is \"1\", expected 1"),
            ),
            (b"{}", Some("has no api_version (expected 1)")),
            (b"[1]", Some("has no api_version (expected 1)")),
            (
                b"{\"pull_secret\":\"s3cret\"",
                Some("is not valid JSON: EOF"),
            ),
        ];
        for (data, want) in cases {
            let got = check_manifest(data).err().map(|e| format!("{e:#}"));
            match (want, &got) {
                (None, None) => {}
                (Some(w), Some(g)) => assert!(g.starts_with(w), "{g:?} vs {w:?}"),
                _ => panic!("{data:?}: got {got:?}, want {want:?}"),
            }
            assert!(!got.unwrap_or_default().contains("s3cret"));
        }
    }

    #[test]
    fn installs_with_modes_and_no_leftovers() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("opt/openshift");
        install_atomically(&target, good_tree).unwrap();
        assert_eq!(mode(&target), 0o700);
        assert_eq!(mode(&target.join(MANIFEST_PATH)), 0o600);
        assert_eq!(mode(&target.join("extra-manifests/a.yaml")), 0o644);
        assert_eq!(mode(&target.join(MANIFESTS_DIR)), 0o755);
        assert_eq!(fs::read(target.join(MANIFEST_PATH)).unwrap(), GOOD);
        assert_eq!(names(&d.path().join("opt")), ["openshift"]);
    }

    #[test]
    fn failure_mid_copy_leaves_target_untouched() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("openshift");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("keep"), b"old").unwrap();
        let err = install_atomically(&target, |s| {
            good_tree(s)?;
            bail!("device read error at block 42")
        })
        .unwrap_err();
        assert_eq!(format!("{err:#}"), "device read error at block 42");
        assert_eq!(names(&target), ["keep"]);
        assert_eq!(names(d.path()), ["openshift"], "staging removed");
    }

    #[test]
    fn invalid_trees_are_rejected_before_the_rename() {
        type Fill = fn(&Staging) -> Result<()>;
        let cases: Vec<(&str, Fill)> = vec![
            ("api_version is 2, expected 1", |s| {
                s.write_file(MANIFEST_PATH, b"{\"api_version\":2}", None)?;
                s.create_dir(MANIFESTS_DIR, None)
            }),
            ("cluster-configuration/manifests/ is missing", |s| {
                s.write_file(MANIFEST_PATH, GOOD, None)
            }),
            ("cluster-configuration/manifest.json is missing", |s| {
                s.create_dir(MANIFESTS_DIR, None)
            }),
            ("is not valid JSON", |s| {
                s.write_file(MANIFEST_PATH, b"api_version: 1", None)?;
                s.create_dir(MANIFESTS_DIR, None)
            }),
        ];
        for (want, fill) in cases {
            let d = tempfile::tempdir().unwrap();
            let target = d.path().join("openshift");
            let err = install_atomically(&target, fill).unwrap_err();
            assert!(format!("{err:#}").contains(want), "{err:#} vs {want}");
            assert!(names(d.path()).is_empty(), "{want}: nothing left behind");
        }
    }

    #[test]
    fn replaces_an_empty_target_and_refuses_a_file() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("openshift");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("stray"), b"x").unwrap();
        install_atomically(&target, good_tree).unwrap();
        assert_eq!(names(&target), ["cluster-configuration", "extra-manifests"]);
        assert_eq!(names(d.path()), ["openshift"]);

        let file = d.path().join("file");
        fs::write(&file, b"x").unwrap();
        let err = install_atomically(&file, good_tree).unwrap_err();
        assert!(format!("{err:#}").contains("is not a directory"), "{err:#}");
        assert_eq!(fs::read(&file).unwrap(), b"x");
    }

    #[test]
    fn rejects_unsafe_names_and_cleans_leftovers() {
        for bad in ["", "/etc/passwd", "a/../../b", "./x", "a\0b"] {
            assert!(safe_relative(bad).is_err(), "{bad:?}");
        }
        let d = tempfile::tempdir().unwrap();
        for n in [
            "openshift.tmp-abc",
            "openshift.old-x",
            "openshift.other",
            "openshift",
        ] {
            fs::create_dir(d.path().join(n)).unwrap();
        }
        remove_leftovers(&d.path().join("openshift")).unwrap();
        assert_eq!(names(d.path()), ["openshift", "openshift.other"]);
    }

    #[test]
    fn the_parent_lock_serialises_runs() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("opt/openshift");
        let first = lock_parent(&target).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let t2 = target.clone();
        let second = std::thread::spawn(move || {
            let _lock = lock_parent(&t2).unwrap();
            tx.send(()).unwrap();
        });
        let short = std::time::Duration::from_millis(200);
        assert!(rx.recv_timeout(short).is_err(), "second run must wait");
        drop(first);
        rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap();
        second.join().unwrap();
    }

    #[test]
    fn modes_are_sensible() {
        assert_eq!(file_mode(MANIFEST_PATH, Some(0o100644)), 0o600);
        assert_eq!(file_mode("a", Some(0o104777)), 0o755);
        assert_eq!(file_mode("a", Some(0o100444)), 0o644);
        assert_eq!(file_mode("a", None), 0o644);
        assert_eq!(dir_mode(Some(0o40000)), 0o700);
        assert_eq!(dir_mode(None), 0o755);
    }
}
