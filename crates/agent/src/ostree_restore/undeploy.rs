//! Removing the RHCOS deployment coreos-installer wrote (lifecycle-agent reference §4.8): the
//! deployment list is rewritten without it and the sysroot cleaned up as `ostree admin undeploy`
//! does (its deployment and boot dirs deleted, the repo pruned of what only it used), then its
//! stateroot directory goes with `rm -rf`. ostree marks deployment directories immutable, so any
//! one left behind by an interrupted cleanup gets its flag cleared first.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::path::Path;

use anyhow::{Context, Result, bail};
use ostree::gio;
use rustix::fs::IFlags;
use rustix::io::Errno;
use tracing::{info, warn};

use super::sysroot::LockedSysroot;

/// Rewrites the deployment list keeping only the deployments of `keep`; returns the removed ones as
/// `<stateroot> <checksum>.<serial>`. Refuses to remove every deployment.
pub(super) fn undeploy_others(sysroot: &LockedSysroot, keep: &str) -> Result<Vec<String>> {
    let (kept, removed): (Vec<_>, Vec<_>) = sysroot
        .sysroot
        .deployments()
        .into_iter()
        .partition(|d| d.osname() == keep);
    if kept.is_empty() {
        bail!(
            "stateroot {keep} has no deployment in {}: refusing to remove all {} deployments",
            sysroot.path.display(),
            removed.len()
        );
    }
    let names: Vec<String> = removed.iter().map(describe).collect();
    let context = || format!("removing deployments [{}]", names.join(", "));
    if !removed.is_empty() {
        // Like `ostree admin undeploy`, but with the cleanup done below: libostree's own
        // post-clean prints "Freed objects" on stdout, which holds the agent's results only.
        let opts = ostree::SysrootWriteDeploymentsOpts {
            do_postclean: false,
        };
        sysroot
            .sysroot
            .write_deployments_with_options(&kept, &opts, gio::Cancellable::NONE)
            .with_context(context)?;
        info!(target: "ibi::agent::ostree_restore::undeploy",
            removed = %names.join(", "), "undeployed");
    }
    // Also on a re-run with nothing left to remove: the run before may have died before this.
    cleanup_and_prune(sysroot).with_context(context)?;
    Ok(names)
}

/// What `ostree admin undeploy` does after writing the list: remove the dirs of deployments no
/// longer listed and stale boot dirs, rewrite the `ostree/<bootversion>/…` refs that keep the
/// deployed commits alive, then prune the repo to what those refs reach (the removed deployment's
/// commit goes). libostree's `ostree_sysroot_cleanup_prune_repo` is not in the bindings; a
/// refs-only prune without history does the same once the deployment refs are written.
fn cleanup_and_prune(sysroot: &LockedSysroot) -> Result<()> {
    sysroot.sysroot.prepare_cleanup(gio::Cancellable::NONE)?;
    let (total, pruned, bytes) = sysroot.sysroot.repo().prune(
        ostree::RepoPruneFlags::REFS_ONLY,
        0,
        gio::Cancellable::NONE,
    )?;
    info!(target: "ibi::agent::ostree_restore::undeploy",
        objects = total,
        pruned,
        freed_bytes = bytes,
        "pruned the ostree repo"
    );
    Ok(())
}

/// The stateroots of `removed` (as [`undeploy_others`] names them) plus `always`, without `keep`.
pub(super) fn stateroots_to_remove(removed: &[String], always: &str, keep: &str) -> Vec<String> {
    let mut set: BTreeSet<&str> = removed
        .iter()
        .filter_map(|r| r.split_once(' ').map(|(os, _)| os))
        .collect();
    set.insert(always);
    set.remove(keep);
    set.into_iter().map(str::to_string).collect()
}

/// `rm -rf <stateroot_dir>`, after clearing the immutable flag of whatever is left in its
/// `deploy/`. A missing directory is only reported to the caller (`false`).
pub(super) fn remove_stateroot_dir(dir: &Path) -> Result<bool> {
    if fs::symlink_metadata(dir).is_err() {
        return Ok(false);
    }
    let deploy = dir.join("deploy");
    if let Ok(entries) = fs::read_dir(&deploy) {
        for entry in entries.flatten() {
            clear_immutable(&entry.path())?;
        }
    }
    fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    Ok(true)
}

/// `chattr -i DIR` (ostree sets the flag on deployment directories only; anything else is left
/// alone). A filesystem without inode flags has nothing to clear.
pub(super) fn clear_immutable(path: &Path) -> Result<()> {
    let meta = fs::symlink_metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_dir() {
        return Ok(());
    }
    let dir = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let context = || format!("clearing the immutable flag of {}", path.display());
    let flags = match rustix::fs::ioctl_getflags(&dir) {
        Ok(flags) => flags,
        Err(e) if e == Errno::NOTTY || e == Errno::OPNOTSUPP => return Ok(()),
        Err(e) => return Err(e).with_context(context),
    };
    if flags.contains(IFlags::IMMUTABLE) {
        rustix::fs::ioctl_setflags(&dir, flags - IFlags::IMMUTABLE).with_context(context)?;
    }
    Ok(())
}

/// Removes the stateroot dirs named by `stateroots`, warning for a missing one.
pub(super) fn remove_stateroot_dirs(sysroot: &LockedSysroot, stateroots: &[String]) -> Result<()> {
    for stateroot in stateroots {
        let dir = sysroot.stateroot_dir(stateroot);
        if remove_stateroot_dir(&dir)? {
            info!(target: "ibi::agent::ostree_restore::undeploy",
                dir = %dir.display(), "removed stateroot");
        } else {
            warn!(target: "ibi::agent::ostree_restore::undeploy",
                dir = %dir.display(), "stateroot to remove does not exist");
        }
    }
    Ok(())
}

fn describe(d: &ostree::Deployment) -> String {
    format!("{} {}.{}", d.osname(), d.csum(), d.deployserial())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stateroots_to_remove_cases() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let cases: &[(&[&str], &[&str])] = &[
            (&[], &["rhcos"]),
            (&["rhcos abc.0"], &["rhcos"]),
            (
                &["rhcos abc.0", "rhcos def.1", "other abc.0"],
                &["other", "rhcos"],
            ),
            (&["new abc.0"], &["rhcos"]),
        ];
        for (removed, want) in cases {
            assert_eq!(
                stateroots_to_remove(&s(removed), "rhcos", "new"),
                s(want),
                "{removed:?}"
            );
        }
        assert!(stateroots_to_remove(&[], "rhcos", "rhcos").is_empty());
    }

    #[test]
    fn missing_dir_is_reported_not_an_error() {
        let d = tempfile::tempdir().unwrap();
        assert!(!remove_stateroot_dir(&d.path().join("rhcos")).unwrap());
    }

    #[test]
    fn removes_a_stateroot_tree() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("rhcos");
        fs::create_dir_all(root.join("deploy/abc.0/usr")).unwrap();
        fs::create_dir_all(root.join("var/tmp")).unwrap();
        fs::write(root.join("deploy/abc.0.origin"), "[origin]\n").unwrap();
        assert!(remove_stateroot_dir(&root).unwrap());
        assert!(!root.exists());
    }
}
