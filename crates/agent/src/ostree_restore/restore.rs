//! Restoring the seed's commit into a new stateroot and finding or removing deployments.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use tracing::info;

use super::seed::is_checksum;
use super::sysroot::LockedSysroot;
use util::fs::{Clobber, write_atomic};

/// The stateroot coreos-installer deploys RHCOS into; lca-cli removes `ostree/deploy/rhcos` by this
/// name once the seed is deployed.
pub(crate) const RHCOS_STATEROOT: &str = "rhcos";
/// Mode of a deployment's `.origin` file, as libostree writes it.
const ORIGIN_MODE: u32 = 0o644;

/// The deployment [`restore_ostree`] made (or found).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deployed {
    /// `<sysroot>/ostree/deploy/<stateroot>/deploy/<checksum>.<serial>`: where `etc.tgz` goes.
    pub deploy_dir: PathBuf,
    /// The commit deployed.
    pub checksum: String,
    /// Position in the sysroot's deployment list; 0 is the default on the next boot.
    pub index: usize,
}

/// Deploys commit `checksum` of `seed_repo` (an extracted `ostree.tgz`) into a new `stateroot` of
/// the ostree sysroot mounted at `sysroot`, as the default deployment, with exactly `kargs`, and
/// writes `origin` (the seed's `ostree-<deployment>.origin`) byte for byte as its `.origin` file
/// (without one the origin names the checksum, as `ostree admin deploy` does). Pulling into the
/// sysroot's repo hardlinks objects when `seed_repo` is on the same filesystem. Does nothing but
/// rewrite the origin when `stateroot` already has a deployment of `checksum`.
pub fn restore_ostree(
    seed_repo: &Path,
    checksum: &str,
    sysroot: &Path,
    stateroot: &str,
    kargs: &[String],
    origin: Option<&[u8]>,
) -> Result<Deployed> {
    ensure!(
        is_checksum(checksum),
        "{checksum:?} is not an ostree commit checksum"
    );
    check_stateroot_name(stateroot)?;
    let target = LockedSysroot::open(sysroot)?;
    if target.find(stateroot, checksum).is_some() {
        info!(target: "ibi::agent::ostree_restore::restore",
            stateroot, checksum, "seed already deployed");
    } else {
        target.pull_commit(seed_repo, checksum)?;
        target.ensure_stateroot(stateroot)?;
        let keyfile = target.origin(checksum, origin)?;
        target.deploy(stateroot, checksum, kargs, &keyfile)?;
        target.reload()?;
    }
    let deployed = found(&target, stateroot, checksum)?;
    if let Some(bytes) = origin {
        write_origin(&deployed.deploy_dir, bytes)?;
    }
    info!(target: "ibi::agent::ostree_restore::restore",
        deploy_dir = %deployed.deploy_dir.display(), index = deployed.index, "seed deployed");
    Ok(deployed)
}

/// `ostree admin os-init <stateroot>` on the sysroot mounted at `sysroot` (nothing when done before);
/// returns the stateroot dir, where `var.tgz` goes. The seed streams `var.tgz` before its commit can
/// be deployed, so the stateroot is made first.
pub(crate) fn init_stateroot(sysroot: &Path, stateroot: &str) -> Result<PathBuf> {
    check_stateroot_name(stateroot)?;
    let target = LockedSysroot::open(sysroot)?;
    target.ensure_stateroot(stateroot)?;
    Ok(target.stateroot_dir(stateroot))
}

/// The deployment of `stateroot` an earlier [`restore_ostree`] made, for the steps after it when a
/// resumed run skips the deploy. Fails unless the stateroot has exactly one deployment.
pub(crate) fn deployment_of(sysroot: &Path, stateroot: &str) -> Result<Deployed> {
    check_stateroot_name(stateroot)?;
    let target = LockedSysroot::open(sysroot)?;
    let mine: Vec<(usize, ostree::Deployment)> = target
        .sysroot
        .deployments()
        .into_iter()
        .enumerate()
        .filter(|(_, d)| d.osname() == stateroot)
        .collect();
    match mine.as_slice() {
        [(index, deployment)] => Ok(Deployed {
            deploy_dir: target.deployment_dir(deployment),
            checksum: deployment.csum().to_string(),
            index: *index,
        }),
        other => anyhow::bail!(
            "stateroot {stateroot} in {} has {} deployments, expected the one the seed made",
            sysroot.display(),
            other.len()
        ),
    }
}

/// Removes every deployment outside `keep_stateroot` from the sysroot mounted at `sysroot`, then
/// the directories of their stateroots and `ostree/deploy/rhcos` (a missing one is a warning).
/// Returns the removed deployments as `<stateroot> <checksum>.<serial>`. Fails, removing nothing,
/// when `keep_stateroot` has no deployment.
pub fn undeploy_other(sysroot: &Path, keep_stateroot: &str) -> Result<Vec<String>> {
    check_stateroot_name(keep_stateroot)?;
    let target = LockedSysroot::open(sysroot)?;
    let removed = super::undeploy::undeploy_others(&target, keep_stateroot)?;
    let dirs = super::undeploy::stateroots_to_remove(&removed, RHCOS_STATEROOT, keep_stateroot);
    super::undeploy::remove_stateroot_dirs(&target, &dirs)?;
    Ok(removed)
}

/// The deployment of `checksum` in `stateroot`, which must now exist.
fn found(target: &LockedSysroot, stateroot: &str, checksum: &str) -> Result<Deployed> {
    let (index, deployment) = target.find(stateroot, checksum).with_context(|| {
        format!(
            "no deployment of {checksum} in stateroot {stateroot} after deploying it in {}",
            target.path.display()
        )
    })?;
    Ok(Deployed {
        deploy_dir: target.deployment_dir(&deployment),
        checksum: checksum.to_string(),
        index,
    })
}

/// `<deploy_dir>.origin`, written atomically.
fn write_origin(deploy_dir: &Path, bytes: &[u8]) -> Result<()> {
    let mut path = deploy_dir.as_os_str().to_owned();
    path.push(".origin");
    write_atomic(Path::new(&path), bytes, ORIGIN_MODE, Clobber::Replace)
        .context("writing the deployment's origin file")
}

/// A stateroot names a directory under `ostree/deploy`: one plain path component.
fn check_stateroot_name(name: &str) -> Result<()> {
    ensure!(
        !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains(['/', '\0'])
            && !name.starts_with('-'),
        "{name:?} cannot name an ostree stateroot"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stateroot_names() {
        for ok in ["rhcos_4.16.0_rc.1", "rhcos", "a-b"] {
            check_stateroot_name(ok).unwrap();
        }
        for bad in ["", ".", "..", "a/b", "-x", "a\0b"] {
            let err = check_stateroot_name(bad).unwrap_err();
            assert_eq!(
                format!("{err:#}"),
                format!("{bad:?} cannot name an ostree stateroot")
            );
        }
    }

    #[test]
    fn bad_checksum_fails_before_touching_the_sysroot() {
        let err = restore_ostree(
            Path::new("/nonexistent/seed"),
            "abc",
            Path::new("/nonexistent/sysroot"),
            "rhcos_4.16.0",
            &[],
            None,
        )
        .unwrap_err();
        assert_eq!(
            format!("{err:#}"),
            "\"abc\" is not an ostree commit checksum"
        );
    }

    #[test]
    fn missing_sysroot_is_named() {
        let d = tempfile::tempdir().unwrap();
        let err = undeploy_other(&d.path().join("none"), "rhcos_4.16.0").unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.starts_with(&format!(
                "loading the ostree sysroot at {}: ",
                d.path().join("none").display()
            )),
            "{text}"
        );
    }
}
