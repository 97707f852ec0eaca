//! One-shot site install (`ibi create image --site`): the live system carries the site's configuration
//! tree at [`LIVE_SITE_TREE`] (placed by Ignition); the step `write-site-config` copies it into the new
//! stateroot's `var/opt/openshift` ([`STATEROOT_TARGET`]), where post-pivot finds
//! `cluster-configuration` on the first boot and needs no device. The copy is `fetch-config`'s:
//! staged beside the target, checked, fsynced and renamed, so a kill mid-write leaves a temp dir the
//! next run removes, never a partial `cluster-configuration` post-pivot would take as complete.

use std::path::{Path, PathBuf};

use anyhow::Result;
use tracing::info;

use crate::agent::fetch_config::{DirOutcome, install_tree_from_dir};
use crate::contract::config_iso::{LIVE_SITE_TREE, STATEROOT_TARGET};

/// The site's tree on the live system below `root`, when this ISO carries one.
pub fn site_tree_source(root: &Path) -> Option<PathBuf> {
    let dir = root.join(LIVE_SITE_TREE.trim_start_matches('/'));
    dir.is_dir().then_some(dir)
}

/// Writes the tree in `src` into `<stateroot_dir>/var/opt/openshift`; see the module comment.
pub fn write_site_config(src: &Path, stateroot_dir: &Path) -> Result<()> {
    let target = stateroot_dir.join(STATEROOT_TARGET);
    match install_tree_from_dir(src, &target)? {
        DirOutcome::AlreadyInPlace => info!("the site's configuration is already in place"),
        DirOutcome::Written => info!(target = %target.display(), "site configuration written"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::fs::sorted_names as names;
    use std::fs;
    use std::os::unix::fs::MetadataExt;

    const MANIFEST: &[u8] = br#"{"api_version":1,"pull_secret":"s3cret"}"#;

    /// A live root holding the site's tree as Ignition writes it (files 0600, directories 0700).
    fn live_root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let tree = root.path().join(LIVE_SITE_TREE.trim_start_matches('/'));
        fs::create_dir_all(tree.join("cluster-configuration/manifests")).unwrap();
        fs::create_dir_all(tree.join("extra-manifests")).unwrap();
        fs::write(tree.join("cluster-configuration/manifest.json"), MANIFEST).unwrap();
        fs::write(
            tree.join("extra-manifests/ibi-reconfiguration.yaml"),
            b"kind: ConfigMap\n",
        )
        .unwrap();
        root
    }

    fn assert_same(src: &Path, target: &Path) {
        assert_eq!(names(target), ["cluster-configuration", "extra-manifests"]);
        for rel in [
            "cluster-configuration/manifest.json",
            "extra-manifests/ibi-reconfiguration.yaml",
        ] {
            assert_eq!(
                fs::read(src.join(rel)).unwrap(),
                fs::read(target.join(rel)).unwrap(),
                "{rel}"
            );
        }
        assert!(target.join("cluster-configuration/manifests").is_dir());
        let mode = fs::metadata(target.join("cluster-configuration/manifest.json"))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn no_tree_on_the_live_system_means_no_step() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(site_tree_source(root.path()), None);
    }

    #[test]
    fn writes_the_tree_and_a_rerun_changes_nothing() {
        let root = live_root();
        let src = site_tree_source(root.path()).unwrap();
        let stateroot = tempfile::tempdir().unwrap();
        write_site_config(&src, stateroot.path()).unwrap();
        let target = stateroot.path().join(STATEROOT_TARGET);
        assert_same(&src, &target);
        assert_eq!(names(&stateroot.path().join("var/opt")), ["openshift"]);

        let inode = fs::metadata(&target).unwrap().ino();
        write_site_config(&src, stateroot.path()).unwrap();
        assert_eq!(fs::metadata(&target).unwrap().ino(), inode, "not rewritten");
    }

    /// A run killed mid-write leaves `openshift.tmp-*` holding part of the tree and no target; the
    /// next run removes it and writes the whole tree.
    #[test]
    fn resumes_after_a_kill_mid_write() {
        let root = live_root();
        let src = site_tree_source(root.path()).unwrap();
        let stateroot = tempfile::tempdir().unwrap();
        let opt = stateroot.path().join("var/opt");
        let partial = opt.join("openshift.tmp-killed/cluster-configuration");
        fs::create_dir_all(&partial).unwrap();
        fs::write(partial.join("manifest.json"), &MANIFEST[..10]).unwrap();
        assert!(!opt.join("openshift/cluster-configuration").exists());

        write_site_config(&src, stateroot.path()).unwrap();
        assert_eq!(names(&opt), ["openshift"], "the leftover is gone");
        assert_same(&src, &opt.join("openshift"));
    }

    /// What the seed's `/var` brought (or a stale tree) is replaced by the site's, not merged.
    #[test]
    fn replaces_another_tree() {
        let root = live_root();
        let src = site_tree_source(root.path()).unwrap();
        let stateroot = tempfile::tempdir().unwrap();
        let target = stateroot.path().join(STATEROOT_TARGET);
        fs::create_dir_all(target.join("cluster-configuration")).unwrap();
        fs::write(target.join("cluster-configuration/manifest.json"), b"{}").unwrap();
        fs::write(target.join("stray"), b"x").unwrap();
        write_site_config(&src, stateroot.path()).unwrap();
        assert_same(&src, &target);
    }

    /// An incomplete tree on the live system (no `manifests/`) is refused before anything lands.
    #[test]
    fn refuses_an_incomplete_tree_and_writes_nothing() {
        let root = live_root();
        let src = site_tree_source(root.path()).unwrap();
        fs::remove_dir(src.join("cluster-configuration/manifests")).unwrap();
        let stateroot = tempfile::tempdir().unwrap();
        let err = write_site_config(&src, stateroot.path()).unwrap_err();
        assert!(
            format!("{err:#}").contains("manifests/ is missing"),
            "{err:#}"
        );
        assert_eq!(
            names(&stateroot.path().join("var/opt")),
            Vec::<String>::new()
        );
    }
}
