//! Where an archive member or a deletion may land: names reduced to plain components, and parents
//! resolved one component at a time so that no `..`, absolute name or symlink leads out of the
//! destination. Symlinks inside the destination that stay inside it are followed, as GNU tar does.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The destination-relative form of a member or deletion name: `.` components dropped, a leading
/// `/` refused unless `allow_absolute` (deletions are written as `/etc/...`), `..` always refused.
/// `None` for a name that is the destination itself (`./`).
pub(super) fn relative(name: &Path, allow_absolute: bool) -> Result<Option<PathBuf>> {
    let mut rel = PathBuf::new();
    for component in name.components() {
        match component {
            Component::Normal(part) => rel.push(part),
            Component::CurDir => {}
            Component::RootDir if allow_absolute => {}
            Component::RootDir | Component::Prefix(_) => {
                bail!("refusing an absolute path: it would land outside the destination")
            }
            Component::ParentDir => {
                bail!("refusing a path with `..`: it could climb out of the destination")
            }
        }
    }
    Ok((!rel.as_os_str().is_empty()).then_some(rel))
}

/// Checks that `rel` starts with the directory `top` (`var`, `etc`) an archive is made of.
pub(super) fn check_top(rel: &Path, top: Option<&str>) -> Result<()> {
    match top {
        Some(top) if !rel.starts_with(top) => {
            bail!("refusing a member outside `{top}/`: this archive only restores `{top}`")
        }
        _ => Ok(()),
    }
}

/// Whether missing parent directories are created (extraction) or reported (deletion).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Parents {
    Create,
    MustExist,
}

/// Resolves the parent directories of `rel` under `dest` (canonical) and returns the full path of
/// `rel`, or `None` when a parent is missing and `parents` is `MustExist`.
pub(super) fn resolve(dest: &Path, rel: &Path, parents: Parents) -> Result<Option<PathBuf>> {
    let mut current = dest.to_path_buf();
    let Some(name) = rel.file_name() else {
        bail!("empty path")
    };
    for component in rel.parent().into_iter().flat_map(Path::components) {
        current.push(component);
        if parent_ready(dest, &current, parents)? == Parent::Missing {
            return Ok(None);
        }
    }
    current.push(name);
    Ok(Some(current))
}

/// Where a member lands, as [`resolve`] with [`Parents::Create`] finds it.
#[derive(Debug)]
pub(super) struct Landing {
    pub(crate) path: PathBuf,
    /// No symlink on the way: the parents are plain directories of `dest`.
    pub(crate) plain: bool,
}

/// [`resolve`] creating parents, for an extraction: directories in `known` are not checked again,
/// and every parent checked and reached without a symlink is added to it. `known` must only ever
/// hold such directories, with their ancestors below `dest` (what this function puts there); the
/// caller removes a path and what is under it once something else may have landed there.
pub(super) fn resolve_known(
    dest: &Path,
    rel: &Path,
    known: &mut HashSet<PathBuf>,
) -> Result<Landing> {
    let mut current = dest.to_path_buf();
    let Some(name) = rel.file_name() else {
        bail!("empty path")
    };
    let mut plain = true;
    for component in rel.parent().into_iter().flat_map(Path::components) {
        current.push(component);
        if plain && known.contains(&current) {
            continue;
        }
        match parent_ready(dest, &current, Parents::Create)? {
            Parent::Dir if plain => {
                known.insert(current.clone());
            }
            Parent::Dir => {}
            Parent::Symlink => plain = false,
            Parent::Missing => bail!("parent directory missing"),
        }
    }
    current.push(name);
    Ok(Landing {
        path: current,
        plain,
    })
}

/// What [`parent_ready`] found on the way to a member.
#[derive(Debug, PartialEq, Eq)]
enum Parent {
    Dir,
    /// A symlink to a directory inside the destination.
    Symlink,
    Missing,
}

/// Makes sure `dir` is a directory inside `dest`, creating it if allowed; `Missing` if it is not
/// there (for deletions, a parent that is not a directory or a dangling symlink also means missing).
fn parent_ready(dest: &Path, dir: &Path, parents: Parents) -> Result<Parent> {
    let must_exist = parents == Parents::MustExist;
    match fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(Parent::Dir),
        Ok(meta) if meta.file_type().is_symlink() => match symlink_inside(dest, dir)? {
            Some(true) => Ok(Parent::Symlink),
            Some(false) if must_exist => Ok(Parent::Missing),
            Some(false) => bail!(
                "`{}` is a symlink to something that is not a directory",
                shown(dest, dir)
            ),
            None if must_exist => Ok(Parent::Missing),
            None => bail!("`{}` is a dangling symlink", shown(dest, dir)),
        },
        Ok(_) if must_exist => Ok(Parent::Missing),
        Ok(_) => bail!("`{}` is not a directory", shown(dest, dir)),
        Err(err) if err.kind() == io::ErrorKind::NotFound && must_exist => Ok(Parent::Missing),
        Err(err) if err.kind() == io::ErrorKind::NotFound => fs::create_dir(dir)
            .map(|()| Parent::Dir)
            .with_context(|| format!("creating directory {}", dir.display())),
        Err(err) => Err(err).with_context(|| format!("inspecting {}", dir.display())),
    }
}

/// A symlink on the way to a member is followed only when it resolves inside `dest`: otherwise
/// writing (or deleting) through it would touch the host. Returns whether it leads to a
/// directory, or `None` when it leads nowhere.
fn symlink_inside(dest: &Path, link: &Path) -> Result<Option<bool>> {
    let target =
        fs::read_link(link).with_context(|| format!("reading symlink {}", link.display()))?;
    match link.canonicalize() {
        Ok(resolved) if resolved.starts_with(dest) => Ok(Some(resolved.is_dir())),
        Err(err) if err.kind() == io::ErrorKind::NotFound && target.is_relative() => Ok(None),
        _ => bail!(
            "`{}` is a symlink to `{}`, which leads outside the destination",
            shown(dest, link),
            target.display()
        ),
    }
}

/// Clears `path` for a new member: a non-directory is unlinked (never written through, so a
/// symlink there cannot redirect the write); a directory is kept when `keep_dir`, else it must be
/// empty and is removed. Returns whether a directory remains.
pub(super) fn clear(path: &Path, keep_dir: bool) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() && keep_dir => Ok(true),
        Ok(meta) if meta.is_dir() => fs::remove_dir(path)
            .map(|()| false)
            .with_context(|| format!("replacing directory {} (it must be empty)", path.display())),
        Ok(_) => fs::remove_file(path)
            .map(|()| false)
            .with_context(|| format!("replacing {}", path.display())),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err).with_context(|| format!("inspecting {}", path.display())),
    }
}

/// `path` relative to `dest`, for messages that name what the archive names.
pub(super) fn shown(dest: &Path, path: &Path) -> String {
    path.strip_prefix(dest)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_names_keep_only_plain_components() {
        let cases: &[(&str, bool, Option<&str>)] = &[
            ("var/lib/x", false, Some("var/lib/x")),
            ("./etc/./hosts", false, Some("etc/hosts")),
            ("./", false, None),
            ("/etc/foo", true, Some("etc/foo")),
            ("etc//foo/", false, Some("etc/foo")),
        ];
        for (name, absolute, want) in cases {
            let got = relative(Path::new(name), *absolute).unwrap();
            assert_eq!(got.as_deref(), want.map(Path::new), "{name}");
        }
    }

    #[test]
    fn escaping_names_are_refused_with_a_reason() {
        let cases: &[(&str, bool, &str)] = &[
            ("../x", false, "`..`"),
            ("etc/../../x", true, "`..`"),
            ("/abs", false, "absolute"),
        ];
        for (name, absolute, reason) in cases {
            let err = relative(Path::new(name), *absolute)
                .unwrap_err()
                .to_string();
            assert!(err.contains(reason), "{name}: {err}");
        }
    }

    #[test]
    fn members_outside_the_top_directory_are_refused() {
        assert!(check_top(Path::new("var/lib"), Some("var")).is_ok());
        assert!(check_top(Path::new("var"), Some("var")).is_ok());
        assert!(check_top(Path::new("x"), None).is_ok());
        let err = check_top(Path::new("deploy/x"), Some("var")).unwrap_err();
        assert!(err.to_string().contains("outside `var/`"), "{err}");
        assert!(check_top(Path::new("variable"), Some("var")).is_err());
    }

    #[test]
    fn resolve_creates_parents_or_reports_them_missing() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().canonicalize().unwrap();
        let rel = Path::new("a/b/c");
        assert_eq!(resolve(&dest, rel, Parents::MustExist).unwrap(), None);
        assert!(!dest.join("a").exists());
        let full = resolve(&dest, rel, Parents::Create).unwrap().unwrap();
        assert_eq!(full, dest.join("a/b/c"));
        assert!(dest.join("a/b").is_dir());
    }

    #[test]
    fn resolve_known_remembers_plain_parents_only() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().canonicalize().unwrap();
        fs::create_dir_all(dest.join("real/sub")).unwrap();
        std::os::unix::fs::symlink("real", dest.join("link")).unwrap();
        let mut known = HashSet::new();
        let plain = resolve_known(&dest, Path::new("a/b/f"), &mut known).unwrap();
        assert!(plain.plain && plain.path == dest.join("a/b/f"));
        assert!(dest.join("a/b").is_dir());
        let via = resolve_known(&dest, Path::new("link/sub/f"), &mut known).unwrap();
        assert!(!via.plain && via.path == dest.join("link/sub/f"));
        let mut got: Vec<_> = known.iter().map(|p| shown(&dest, p)).collect();
        got.sort();
        assert_eq!(got, ["a", "a/b"]);
        // A known parent is trusted without a look: the caller must forget what it replaces.
        fs::remove_dir(dest.join("a/b")).unwrap();
        fs::write(dest.join("a/b"), "").unwrap();
        let stale = resolve_known(&dest, Path::new("a/b/g"), &mut known).unwrap();
        assert_eq!(stale.path, dest.join("a/b/g"));
        known.clear();
        let err = resolve_known(&dest, Path::new("a/b/g"), &mut known).unwrap_err();
        assert!(
            err.to_string().contains("`a/b` is not a directory"),
            "{err}"
        );
    }

    #[test]
    fn resolve_follows_symlinks_only_inside_the_destination() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().canonicalize().unwrap();
        fs::create_dir(dest.join("real")).unwrap();
        std::os::unix::fs::symlink("real", dest.join("inside")).unwrap();
        std::os::unix::fs::symlink("/tmp", dest.join("outside")).unwrap();
        let inside = resolve(&dest, Path::new("inside/f"), Parents::Create).unwrap();
        assert_eq!(inside, Some(dest.join("inside/f")));
        let err = resolve(&dest, Path::new("outside/f"), Parents::Create).unwrap_err();
        assert!(
            err.to_string().contains("`outside` is a symlink to `/tmp`"),
            "{err}"
        );
    }
}
