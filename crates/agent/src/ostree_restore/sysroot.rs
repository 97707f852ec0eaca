//! The libostree calls behind the restore, each the library form of one `ostree` command lca-cli
//! runs: the sysroot opened and locked as every `ostree admin` command does, `pull-local` as a pull
//! from a `file://` URL, `admin os-init` and `admin deploy --no-prune`. All of them exist in the
//! bindings at `v2022_7`; no `ostree` process is started.

use std::path::{Path, PathBuf};
use std::sync::Once;

use anyhow::{Context, Result};
use ostree::gio::prelude::FileExt;
use ostree::{gio, glib};
use tracing::{debug, info};

/// An ostree sysroot, loaded and holding the sysroot lock (`<sysroot>/ostree/lock`, the one
/// `ostree admin` and rpm-ostree take) until dropped.
pub(super) struct LockedSysroot {
    pub(super) sysroot: ostree::Sysroot,
    pub(super) path: PathBuf,
}

impl LockedSysroot {
    /// Loads the sysroot at `path` (it must already be one: coreos-installer made it) and locks it.
    pub(super) fn open(path: &Path) -> Result<LockedSysroot> {
        route_glib_prints();
        let sysroot = ostree::Sysroot::new(Some(&gio::File::for_path(path)));
        sysroot
            .load(gio::Cancellable::NONE)
            .with_context(|| format!("loading the ostree sysroot at {}", path.display()))?;
        sysroot
            .lock()
            .with_context(|| format!("locking the ostree sysroot at {}", path.display()))?;
        Ok(LockedSysroot {
            sysroot,
            path: path.to_path_buf(),
        })
    }

    /// Re-reads the deployment list from the boot loader entries, after writing it.
    pub(super) fn reload(&self) -> Result<()> {
        self.sysroot
            .load(gio::Cancellable::NONE)
            .with_context(|| format!("reloading the ostree sysroot at {}", self.path.display()))
    }

    /// The deployment of `checksum` in `stateroot`, with its index in the deployment list.
    pub(super) fn find(
        &self,
        stateroot: &str,
        checksum: &str,
    ) -> Option<(usize, ostree::Deployment)> {
        self.sysroot
            .deployments()
            .into_iter()
            .enumerate()
            .find(|(_, d)| d.osname() == stateroot && d.csum() == checksum)
    }

    /// `<sysroot>/ostree/deploy/<stateroot>/deploy/<checksum>.<serial>`.
    pub(super) fn deployment_dir(&self, deployment: &ostree::Deployment) -> PathBuf {
        self.path
            .join(self.sysroot.deployment_dirpath(deployment).as_str())
    }

    /// `<sysroot>/ostree/deploy/<stateroot>`.
    pub(super) fn stateroot_dir(&self, stateroot: &str) -> PathBuf {
        self.path.join("ostree/deploy").join(stateroot)
    }

    /// `ostree pull-local --repo <sysroot>/ostree/repo <seed_repo> <checksum>`: imports the commit
    /// and every object it reaches. Local pulls are trusted (objects are not re-hashed) and
    /// hardlinked when both repos share a filesystem. Unlike lca-cli, which pulls every ref of the
    /// seed repo, only the booted commit is pulled: a rollback deployment's commit in the seed
    /// would only waste space on the target.
    ///
    /// Objects of a bare seed repo are first moved in by rename ([`super::adopt`]); the pull then
    /// only imports the commit and checks the tree is complete.
    pub(super) fn pull_commit(&self, seed_repo: &Path, checksum: &str) -> Result<()> {
        let url = gio::File::for_path(seed_repo).uri();
        let repo = self.sysroot.repo();
        super::adopt::adopt_objects(seed_repo, &repo, &self.path.join("ostree/repo"))?;
        info!(target: "ibi::agent::ostree_restore::sysroot",
            seed_repo = %seed_repo.display(), checksum, "pulling the seed commit");
        repo.pull_with_options(&url, &pull_options(checksum), None, gio::Cancellable::NONE)
            .with_context(|| {
                format!(
                    "pulling commit {checksum} from the seed repo {} into {}",
                    seed_repo.display(),
                    self.path.join("ostree/repo").display()
                )
            })
    }

    /// `ostree admin os-init <stateroot>`, unless an earlier run already did it. os-init makes
    /// `var`, `var/tmp`, `var/lib`, `var/log`, then the `var/run` and `var/lock` symlinks, one after
    /// the other; a stateroot it left without the last of them (and with nothing deployed) is redone.
    pub(super) fn ensure_stateroot(&self, stateroot: &str) -> Result<()> {
        let dir = self.stateroot_dir(stateroot);
        if dir.join("var/lock").symlink_metadata().is_ok() {
            debug!(target: "ibi::agent::ostree_restore::sysroot",
                stateroot, "stateroot already initialized");
            return Ok(());
        }
        if dir.exists() && !dir.join("deploy").exists() {
            std::fs::remove_dir_all(&dir)
                .with_context(|| format!("removing the half-made stateroot {}", dir.display()))?;
        }
        self.sysroot
            .init_osname(stateroot, gio::Cancellable::NONE)
            .with_context(|| {
                format!(
                    "initializing stateroot {stateroot} in {}",
                    self.path.display()
                )
            })
    }

    /// `ostree admin deploy --os <stateroot> --no-prune [--karg-append K]… <checksum>`: the new
    /// deployment goes first in the list (the default on next boot); deployments of other
    /// stateroots are kept behind it. No merge deployment: the stateroot is new, so `/etc` starts
    /// from the commit's `/usr/etc`, and the kernel arguments are exactly `kargs`.
    pub(super) fn deploy(
        &self,
        stateroot: &str,
        checksum: &str,
        kargs: &[String],
        origin: &glib::KeyFile,
    ) -> Result<()> {
        let sysroot = &self.sysroot;
        let context = || format!("deploying {checksum} to stateroot {stateroot}");
        // Leftovers of an earlier run that failed half way (the CLI does the same first).
        sysroot
            .prepare_cleanup(gio::Cancellable::NONE)
            .with_context(context)?;
        let kargs: Vec<&str> = kargs.iter().map(String::as_str).collect();
        let deployment = sysroot
            .deploy_tree(
                Some(stateroot),
                checksum,
                Some(origin),
                None,
                &kargs,
                gio::Cancellable::NONE,
            )
            .with_context(context)?;
        sysroot
            .simple_write_deployment(
                Some(stateroot),
                &deployment,
                None,
                ostree::SysrootSimpleWriteDeploymentFlags::NO_CLEAN,
                gio::Cancellable::NONE,
            )
            .with_context(context)?;
        // --no-prune: clean up old boot and deployment dirs and write the deployment refs that keep
        // the commit alive, but leave the repo unpruned.
        sysroot
            .prepare_cleanup(gio::Cancellable::NONE)
            .with_context(context)
    }

    /// The origin the deployment is made with: the seed's origin file when given (checked to
    /// parse), otherwise `[origin] refspec=<checksum>` as `ostree admin deploy` writes.
    pub(super) fn origin(
        &self,
        checksum: &str,
        seed_origin: Option<&[u8]>,
    ) -> Result<glib::KeyFile> {
        let Some(bytes) = seed_origin else {
            return Ok(self.sysroot.origin_new_from_refspec(checksum));
        };
        let keyfile = glib::KeyFile::new();
        keyfile
            .load_from_bytes(&glib::Bytes::from(bytes), glib::KeyFileFlags::KEEP_COMMENTS)
            .context("parsing the seed's origin file")?;
        Ok(keyfile)
    }
}

impl Drop for LockedSysroot {
    fn drop(&mut self) {
        self.sysroot.unlock();
    }
}

/// Sends what libostree `g_print`s (e.g. "Relabeling /var" while deploying) to the log: stdout
/// holds the agent's results only.
fn route_glib_prints() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        glib::set_print_handler(|text| info!(target: "libostree", "{}", text.trim_end()))
    });
}

/// The options `ostree pull-local` passes for one commit: no GPG or signature checks (a local
/// pull trusts its source), no history beyond the commit.
fn pull_options(checksum: &str) -> glib::Variant {
    let options = glib::VariantDict::new(None);
    options.insert("refs", vec![checksum.to_string()]);
    options.insert("flags", ostree::RepoPullFlags::NONE.bits() as i32);
    options.insert("depth", 0i32);
    options.insert("gpg-verify", false);
    options.insert("gpg-verify-summary", false);
    options.insert("disable-sign-verify", true);
    options.insert("disable-sign-verify-summary", true);
    options.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_options_name_only_the_commit() {
        let c = "ab".repeat(32);
        let options = glib::VariantDict::new(Some(&pull_options(&c)));
        let refs: Vec<String> = options.lookup("refs").unwrap().unwrap();
        assert_eq!(refs, vec![c]);
        assert_eq!(options.lookup::<i32>("depth").unwrap(), Some(0));
        assert_eq!(options.lookup::<bool>("gpg-verify").unwrap(), Some(false));
        assert_eq!(
            options.lookup::<bool>("disable-sign-verify").unwrap(),
            Some(true)
        );
    }
}
