//! Moving a bare seed repo's objects into the sysroot's repo by rename, before the pull.
//!
//! A real seed's `ostree.tgz` is the seed host's `/ostree/repo`, a bare repo (lifecycle-agent
//! reference §1.3), and the agent extracts it on the target's root filesystem. A bare object is the
//! same file in both repos (content, mode, owner, extended attributes, named by its checksum), so
//! `ostree pull-local` would hardlink each one into a staging directory and rename it into place:
//! per object a lookup, a link and a rename, about three quarters of the deploy step on a seed of
//! tens of thousands of files. Renaming each object straight into the sysroot's repo does the same
//! in one call. The pull then finds the objects present, imports only the commit, and still checks
//! that everything the commit reaches is there.
//!
//! Only `.file`, `.dirtree` and `.dirmeta` objects move: the commit is written by the pull, last, as
//! libostree writes it, so a commit in the repo keeps meaning a complete tree. Nothing moves unless
//! both repos are mode `bare` on one filesystem; an object the sysroot already has stays where it
//! is (`RENAME_NOREPLACE`); a missing `objects/XX` directory is made as libostree makes it (mode
//! 0777 less the umask). A run cut short leaves each object whole in one repo or the other, and
//! the next run's pull takes the rest.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{Context, Result};
use ostree::gio;
use rustix::fs::{Mode, RenameFlags};
use rustix::io::Errno;
use tracing::{debug, info};

/// Object kinds that move; the commit (and its detached metadata) is left to the pull.
const MOVED_SUFFIXES: [&str; 3] = [".file", ".dirtree", ".dirmeta"];

/// What [`adopt_objects`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Adopted {
    /// Objects renamed into the sysroot's repo.
    pub(crate) moved: u64,
    /// Objects the sysroot's repo already had, left for the pull to skip.
    pub(crate) present: u64,
}

/// Moves the objects of the repo at `seed_repo` into `target` (the repo at `target_path`) when both
/// are bare repos on one filesystem; otherwise does nothing and says why at debug level.
pub(super) fn adopt_objects(
    seed_repo: &Path,
    target: &ostree::Repo,
    target_path: &Path,
) -> Result<Adopted> {
    let seed = ostree::Repo::new(&gio::File::for_path(seed_repo));
    seed.open(gio::Cancellable::NONE)
        .with_context(|| format!("opening the seed repo {}", seed_repo.display()))?;
    let modes = (seed.mode(), target.mode());
    if modes != (ostree::RepoMode::Bare, ostree::RepoMode::Bare) {
        debug!(target: "ibi::agent::ostree_restore::adopt",
            ?modes, "objects are pulled, not moved: not two bare repos");
        return Ok(Adopted::default());
    }
    let from = seed_repo.join("objects");
    let to = target_path.join("objects");
    if device(&from)? != device(&to)? {
        debug!(target: "ibi::agent::ostree_restore::adopt",
            "objects are pulled, not moved: the repos are on different filesystems");
        return Ok(Adopted::default());
    }
    let objects = File::open(&to).with_context(|| format!("opening {}", to.display()))?;
    let mut adopted = Adopted::default();
    for entry in std::fs::read_dir(&from).with_context(|| format!("listing {}", from.display()))? {
        let entry = entry.with_context(|| format!("listing {}", from.display()))?;
        let name = entry.file_name();
        let Some(prefix) = name.to_str().filter(|n| is_prefix_dir(n)) else {
            continue;
        };
        match rustix::fs::mkdirat(&objects, prefix, Mode::from_raw_mode(0o777)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => {
                return Err(e).with_context(|| format!("creating {}", to.join(prefix).display()));
            }
        }
        if !move_dir(&from.join(prefix), &to.join(prefix), &mut adopted)? {
            break;
        }
    }
    info!(target: "ibi::agent::ostree_restore::adopt",
        moved = adopted.moved,
        present = adopted.present,
        "seed objects moved into the sysroot repo"
    );
    Ok(adopted)
}

/// Moves the objects of one `objects/XX` directory; false when renaming is not possible on this
/// filesystem (the pull then does the rest).
fn move_dir(from: &Path, to: &Path, adopted: &mut Adopted) -> Result<bool> {
    let target = File::open(to).with_context(|| format!("opening {}", to.display()))?;
    let source = File::open(from).with_context(|| format!("opening {}", from.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("listing {}", from.display()))? {
        let entry = entry.with_context(|| format!("listing {}", from.display()))?;
        let name = entry.file_name();
        if !name.to_str().is_some_and(is_moved_object) {
            continue;
        }
        match rustix::fs::renameat_with(&source, &name, &target, &name, RenameFlags::NOREPLACE) {
            Ok(()) => adopted.moved += 1,
            Err(Errno::EXIST) => adopted.present += 1,
            // No RENAME_NOREPLACE here: leave everything to the pull.
            Err(Errno::INVAL | Errno::NOSYS | Errno::XDEV) => return Ok(false),
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "moving object {} into {}",
                        from.join(&name).display(),
                        to.display()
                    )
                });
            }
        }
    }
    Ok(true)
}

fn device(path: &Path) -> Result<u64> {
    Ok(std::fs::metadata(path)
        .with_context(|| format!("inspecting {}", path.display()))?
        .dev())
}

/// `objects/XX`: two lower-case hex digits.
fn is_prefix_dir(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(is_hex)
}

/// `<62 hex digits>.file|.dirtree|.dirmeta`: the rest of the checksum and a moved kind.
fn is_moved_object(name: &str) -> bool {
    MOVED_SUFFIXES.iter().any(|suffix| {
        name.strip_suffix(suffix)
            .is_some_and(|rest| rest.len() == 62 && rest.bytes().all(is_hex))
    })
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_content_and_tree_objects_move() {
        let rest = "0".repeat(62);
        for (name, moved) in [
            (format!("{rest}.file"), true),
            (format!("{rest}.dirtree"), true),
            (format!("{rest}.dirmeta"), true),
            (format!("{rest}.commit"), false),
            (format!("{rest}.commitmeta"), false),
            (format!("{rest}.filez"), false),
            (format!("{}.file", "0".repeat(61)), false),
            (format!("{}.file", "A".repeat(62)), false),
            ("tmp-123.file".to_string(), false),
        ] {
            assert_eq!(is_moved_object(&name), moved, "{name}");
        }
        assert!(is_prefix_dir("0a") && !is_prefix_dir("0A") && !is_prefix_dir("abc"));
    }
}
