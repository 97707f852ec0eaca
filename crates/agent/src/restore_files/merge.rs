//! Moving a restored tree into place: `etc.tgz` reaches the agent before the seed's ostree commit is
//! deployed (the seed's files stream in name order, `etc.tgz` before `ostree.tgz`), so it is extracted
//! into a staging directory on the target's root filesystem and moved over the deployment's `/etc`
//! afterwards. Moving is `rename(2)`, on one filesystem: no byte is copied twice and no archive is
//! kept. Staged entries replace what is there and directories merge, as extracting over the
//! deployment would. One difference from tar: a directory present on both sides keeps the
//! deployment's metadata. Staging creates the parents an archive does not list with the staging
//! directory's label; copying those onto `/etc` or its subdirectories would relabel them wrongly,
//! while keeping the deployment's leaves the labels of the seed's own commit (`usr/etc`).
//!
//! Interrupted half way, the staged tree holds exactly what is still to move; running again finishes
//! the job.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::Path;

use anyhow::{Context, Result};

/// Moves every entry of `staged` into `dest` (an existing directory), then removes `staged`.
/// Returns how many entries were moved (a merged directory counts once).
pub(crate) fn merge_tree(staged: &Path, dest: &Path) -> Result<u64> {
    let moved = merge_dir(staged, dest)?;
    fs::remove_dir(staged).with_context(|| format!("removing {}", staged.display()))?;
    Ok(moved)
}

fn merge_dir(staged: &Path, dest: &Path) -> Result<u64> {
    let mut names: Vec<OsString> = fs::read_dir(staged)
        .with_context(|| format!("reading {}", staged.display()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<io::Result<_>>()
        .with_context(|| format!("reading {}", staged.display()))?;
    names.sort();
    let mut moved = 0;
    for name in names {
        moved += merge_entry(&staged.join(&name), &dest.join(&name))?;
    }
    Ok(moved)
}

fn merge_entry(from: &Path, to: &Path) -> Result<u64> {
    let staged =
        fs::symlink_metadata(from).with_context(|| format!("reading {}", from.display()))?;
    let existing = match fs::symlink_metadata(to) {
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("reading {}", to.display())),
    };
    match existing {
        Some(meta) if staged.is_dir() && meta.is_dir() => {
            let moved = merge_dir(from, to)?;
            fs::remove_dir(from).with_context(|| format!("removing {}", from.display()))?;
            return Ok(moved + 1);
        }
        // A directory in the way of a file (or the reverse) is replaced, as tar replaces it.
        Some(meta) if meta.is_dir() => {
            fs::remove_dir_all(to).with_context(|| format!("replacing {}", to.display()))?
        }
        Some(_) if staged.is_dir() => {
            fs::remove_file(to).with_context(|| format!("replacing {}", to.display()))?
        }
        _ => {}
    }
    fs::rename(from, to)
        .with_context(|| format!("moving {} to {}", from.display(), to.display()))?;
    Ok(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::XattrFlags;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn staged_entries_replace_merge_and_leave_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let (staged, dest) = (d.path().join("staged"), d.path().join("dest"));
        write(&staged.join("etc/hostname"), "seed-node\n");
        write(&staged.join("etc/kubernetes/kubelet.conf"), "new\n");
        write(&staged.join("etc/was-a-dir"), "file now\n");
        fs::create_dir_all(staged.join("etc/was-a-link")).unwrap();
        write(&staged.join("etc/was-a-link/x"), "x\n");
        symlink("hostname", staged.join("etc/link")).unwrap();
        fs::set_permissions(
            staged.join("etc/kubernetes"),
            fs::Permissions::from_mode(0o700),
        )
        .unwrap();

        write(&dest.join("etc/hostname"), "rhcos\n");
        write(&dest.join("etc/kubernetes/other"), "kept\n");
        write(&dest.join("etc/motd"), "kept\n");
        write(&dest.join("etc/was-a-dir/inner"), "gone\n");
        symlink("/nowhere", dest.join("etc/was-a-link")).unwrap();

        assert_eq!(merge_tree(&staged, &dest).unwrap(), 7);
        let read = |p: &str| fs::read_to_string(dest.join(p)).unwrap();
        assert_eq!(read("etc/hostname"), "seed-node\n");
        assert_eq!(read("etc/kubernetes/kubelet.conf"), "new\n");
        assert_eq!(read("etc/kubernetes/other"), "kept\n");
        assert_eq!(read("etc/motd"), "kept\n");
        assert_eq!(read("etc/was-a-dir"), "file now\n");
        assert_eq!(read("etc/was-a-link/x"), "x\n");
        assert_eq!(
            fs::read_link(dest.join("etc/link")).unwrap(),
            Path::new("hostname")
        );
        let mode = fs::metadata(dest.join("etc/kubernetes")).unwrap().mode() & 0o7777;
        assert_eq!(
            mode, 0o755,
            "a merged directory keeps the deployment's mode"
        );
        assert!(!staged.exists(), "staging removed");
    }

    #[test]
    fn an_interrupted_merge_finishes_on_the_next_run() {
        let d = tempfile::tempdir().unwrap();
        let (staged, dest) = (d.path().join("staged"), d.path().join("dest"));
        write(&staged.join("etc/a/1"), "1\n");
        write(&staged.join("etc/b"), "b\n");
        fs::create_dir_all(dest.join("etc")).unwrap();
        // As if the first run moved etc/a and died before etc/b.
        fs::create_dir_all(dest.join("etc/a")).unwrap();
        fs::rename(staged.join("etc/a/1"), dest.join("etc/a/1")).unwrap();
        merge_tree(&staged, &dest).unwrap();
        assert_eq!(fs::read_to_string(dest.join("etc/a/1")).unwrap(), "1\n");
        assert_eq!(fs::read_to_string(dest.join("etc/b")).unwrap(), "b\n");
    }

    #[test]
    fn moved_entries_keep_their_xattrs() {
        let d = tempfile::tempdir().unwrap();
        let (staged, dest) = (d.path().join("staged"), d.path().join("dest"));
        fs::create_dir_all(staged.join("etc/new.d")).unwrap();
        write(&staged.join("etc/new.d/f"), "f\n");
        fs::create_dir_all(dest.join("etc")).unwrap();
        let name = "user.ibi.test";
        for p in ["etc/new.d", "etc/new.d/f"] {
            rustix::fs::lsetxattr(staged.join(p), name, b"v", XattrFlags::empty())
                .expect("the temp dir's filesystem takes user xattrs");
        }
        merge_tree(&staged, &dest).unwrap();
        for p in ["etc/new.d", "etc/new.d/f"] {
            let mut buf = [0u8; 8];
            let n = rustix::fs::lgetxattr(dest.join(p), name, &mut buf).unwrap();
            assert_eq!(&buf[..n], b"v", "{p}");
        }
    }
}
