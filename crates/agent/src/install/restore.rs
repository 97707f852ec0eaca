//! The seed's part of the install (lifecycle-agent reference §4.4–4.5): one streaming pass over the
//! seed image, then the deploy, then `/etc`.
//!
//! The seed's root files stream in name order (`etc.tgz` before `ostree.tgz`, `var.tgz` last), but
//! `/etc` can only be restored into a deployment, which needs the commit. So the pass extracts
//! `ostree.tgz` into a work repo and `etc.tgz` into a staging tree, both on the target's root
//! filesystem, and `var.tgz` straight into the new stateroot; the small documents go beside the state
//! file, where the later steps (and a resumed run) read them. After the pass, the commit is deployed
//! and the staged `/etc` is moved over the deployment's with renames. No archive is held in memory or
//! written to disk; what lands on disk is the extracted content, each byte written once.

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use tracing::{info, warn};

use crate::ostree_restore::{
    booted_deployment, deployment_of, init_stateroot, kernel_args, restore_ostree,
};
use crate::restore_files::{
    apply_deletions, extract_tgz, merge_tree, restore_etc, restore_var, sync_filesystem,
    syncing_in_background,
};
use crate::seed_fetch::{
    CONTAINERS_LIST, ETC_DELETIONS, ETC_TGZ, LCA_CLI, MANIFEST_JSON, MCO_CURRENTCONFIG_JSON,
    ORIGIN_PATTERN, OSTREE_TGZ, Presence, RECERT_CONFIG_JSON, RPM_OSTREE_JSON, SMALL_FILE_MAX,
    SeedFiles, SeedSource, VAR_TGZ, collect_small, walk_seed_files,
};
use crate::state::Progress;
use contract::seed_image::parse_seed_cluster_info;
use util::fs::{Clobber, write_atomic};

/// The work directory on the target's root filesystem (beside the sysroot repo, so the pull can
/// hardlink and the staged `/etc` can be renamed into the deployment).
const WORK_DIR: &str = "ostree/ibi-work";
/// How often the extracted data is pushed to the disk while the seed streams: the step must end
/// with it durable, and writing it as it comes overlaps the disk with the inflating instead of
/// adding a long sync at the end (about 0.9 s for a 1 GiB seed on the benchmark's loop disk).
const BACKGROUND_SYNC: Duration = Duration::from_millis(500);
/// Mode of the saved seed documents: `manifest.json` names the seed cluster, nothing secret, but the
/// whole state directory is private.
const DOC_MODE: u32 = 0o600;

/// Where the restore keeps its intermediate results.
#[derive(Debug, Clone)]
pub(crate) struct RestorePaths {
    /// The target root, mounted (the ostree sysroot).
    pub(crate) sysroot: PathBuf,
    /// The seed's small documents, kept until the install ends.
    pub(crate) docs: PathBuf,
}

impl RestorePaths {
    fn work(&self) -> PathBuf {
        self.sysroot.join(WORK_DIR)
    }
    fn repo(&self) -> PathBuf {
        self.work().join("repo")
    }
    /// `etc.tgz` is extracted here; its `etc/…` members land in `staged/etc`.
    fn staged(&self) -> PathBuf {
        self.work().join("staged")
    }
    fn doc(&self, name: &str) -> PathBuf {
        self.docs.join(name)
    }
    fn read_doc(&self, name: &str) -> Result<String> {
        let path = self.doc(name);
        fs::read_to_string(&path)
            .with_context(|| format!("reading the seed's {name} ({})", path.display()))
    }
}

/// The `fetch-seed` step: streams the seed once (see the module comment). A re-run starts the pass
/// over: the work tree is removed first and `var.tgz` is extracted over what is there.
pub(crate) fn fetch_seed(
    source: &SeedSource,
    seed_version: &str,
    stateroot: &str,
    paths: &RestorePaths,
    progress: &Progress,
) -> Result<()> {
    let work = paths.work();
    if work.exists() {
        fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    for dir in [paths.repo(), paths.staged(), paths.docs.clone()] {
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let stateroot_dir = init_stateroot(&paths.sysroot, stateroot)?;

    let mut files = SeedFiles::new();
    files.stream(MANIFEST_JSON, Presence::Required, |name, r, size| {
        let bytes = collect_small(name, r, size, SMALL_FILE_MAX)?;
        check_seed_version(&bytes, seed_version)?;
        save_doc(paths, name, &bytes)
    });
    for name in [
        CONTAINERS_LIST,
        RPM_OSTREE_JSON,
        MCO_CURRENTCONFIG_JSON,
        ETC_DELETIONS,
    ] {
        files.stream(name, Presence::Required, |name, r, size| {
            save_doc(paths, name, &collect_small(name, r, size, SMALL_FILE_MAX)?)
        });
    }
    files.stream(ORIGIN_PATTERN, Presence::Optional, |name, r, size| {
        save_doc(paths, name, &collect_small(name, r, size, SMALL_FILE_MAX)?)
    });
    files.stream(OSTREE_TGZ, Presence::Required, |_, r, _| {
        let report = extract_tgz(r, &paths.repo(), &mut deltas(progress))?;
        info!(target: "ibi::agent::install::restore",
            entries = report.entries,
            bytes = report.bytes,
            "ostree.tgz extracted"
        );
        Ok(())
    });
    files.stream(ETC_TGZ, Presence::Required, |_, r, _| {
        let report = restore_etc(r, &paths.staged(), &mut deltas(progress))?;
        info!(target: "ibi::agent::install::restore", entries = report.entries, "etc.tgz staged");
        Ok(())
    });
    files.stream(VAR_TGZ, Presence::Required, |_, r, _| {
        let report = restore_var(r, &stateroot_dir, &mut deltas(progress))?;
        info!(target: "ibi::agent::install::restore",
            entries = report.entries,
            bytes = report.bytes,
            "var.tgz restored"
        );
        Ok(())
    });
    files.ignore(LCA_CLI).ignore(RECERT_CONFIG_JSON);

    let (report, outcome) = syncing_in_background(&paths.sysroot, BACKGROUND_SYNC, || {
        walk_seed_files(source, files)
    })?;
    for (name, size) in &outcome.unexpected {
        warn!(target: "ibi::agent::install::restore",
            "the seed has an unexpected file {name} ({size} bytes); ignored");
    }
    sync_filesystem(&paths.sysroot)?;
    info!(target: "ibi::agent::install::restore",
        seed = %report.reference, digest = %report.digest, "seed fetched");
    Ok(())
}

/// The `deploy` step: the seed's booted commit into the target repo, deployed into `stateroot`
/// with the seed's kernel arguments and origin. The work repo is removed afterwards.
pub(crate) fn deploy(paths: &RestorePaths, stateroot: &str) -> Result<()> {
    let (checksum, seed_deployment) = booted_deployment(&paths.read_doc(RPM_OSTREE_JSON)?)?;
    let kargs = kernel_args(&paths.read_doc(MCO_CURRENTCONFIG_JSON)?)?;
    let origin_name = format!("ostree-{seed_deployment}.origin");
    let origin = match fs::read(paths.doc(&origin_name)) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            warn!(target: "ibi::agent::install::restore",
                "the seed has no {origin_name}; the deployment's origin names the commit");
            None
        }
        Err(e) => return Err(e).with_context(|| format!("reading {origin_name}")),
    };
    let deployed = restore_ostree(
        &paths.repo(),
        &checksum,
        &paths.sysroot,
        stateroot,
        &kargs,
        origin.as_deref(),
    )?;
    info!(target: "ibi::agent::install::restore",
        deploy_dir = %deployed.deploy_dir.display(), kargs = kargs.len(), "seed deployed");
    let repo = paths.repo();
    if repo.exists() {
        fs::remove_dir_all(&repo).with_context(|| format!("removing {}", repo.display()))?;
    }
    Ok(())
}

/// The `restore-etc` step: the staged `etc.tgz` over the deployment's `/etc`, then `etc.deletions`
/// (a path already gone is a warning). Removes the work tree.
pub(crate) fn restore_etc_step(paths: &RestorePaths, stateroot: &str) -> Result<()> {
    let deployed = deployment_of(&paths.sysroot, stateroot)?;
    let staged = paths.staged();
    if staged.exists() {
        let moved = merge_tree(&staged, &deployed.deploy_dir).with_context(|| {
            format!(
                "moving the seed's /etc into {}",
                deployed.deploy_dir.display()
            )
        })?;
        info!(target: "ibi::agent::install::restore", entries = moved, "seed /etc in place");
    }
    let (deleted, missing) =
        apply_deletions(&paths.read_doc(ETC_DELETIONS)?, &deployed.deploy_dir)?;
    info!(target: "ibi::agent::install::restore",
        deleted, missing = missing.len(), "etc.deletions applied");
    let work = paths.work();
    if work.exists() {
        fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    }
    sync_filesystem(&paths.sysroot)
}

/// The seed's `containers.list` and release registry facts, for the precache step.
pub(crate) fn precache_inputs(paths: &RestorePaths) -> Result<(String, String, bool)> {
    let list = paths.read_doc(CONTAINERS_LIST)?;
    let manifest = paths.read_doc(MANIFEST_JSON)?;
    let info = parse_seed_cluster_info(&manifest)
        .map_err(anyhow::Error::msg)
        .context("parsing the seed's manifest.json")?;
    Ok((list, info.release_registry, info.mirror_registry_configured))
}

/// lca-cli's check: the seed's `seed_cluster_ocp_version` is the configuration's `seedVersion`.
fn check_seed_version(manifest: &[u8], seed_version: &str) -> Result<()> {
    let text = std::str::from_utf8(manifest).context("the seed's manifest.json is not UTF-8")?;
    let info = parse_seed_cluster_info(text)
        .map_err(anyhow::Error::msg)
        .context("parsing the seed's manifest.json")?;
    ensure!(
        info.seed_cluster_ocp_version == seed_version,
        "the seed's manifest.json has seed_cluster_ocp_version {:?}, the configuration's seedVersion is {seed_version:?}",
        info.seed_cluster_ocp_version
    );
    Ok(())
}

fn save_doc(paths: &RestorePaths, name: &str, bytes: &[u8]) -> Result<()> {
    ensure!(
        !name.contains('/') && name != ".." && name != ".",
        "unexpected seed file name {name:?}"
    );
    write_atomic(&paths.doc(name), bytes, DOC_MODE, Clobber::Replace)
        .with_context(|| format!("saving the seed's {name}"))
}

/// A progress callback for one extraction: it gets running totals, the status counts every byte once.
fn deltas(progress: &Progress) -> impl FnMut(u64) + '_ {
    let mut last = 0;
    move |total| {
        progress.add_bytes(total.saturating_sub(last));
        last = total;
    }
}
