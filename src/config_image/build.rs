//! One site's configuration ISO: `imagebasedconfig.iso`, `auth/kubeconfig` and
//! `auth/kubeadmin-password` in the site's directory.
//!
//! Inputs are read and validated in full first (every finding reported at once, nothing written);
//! with `--seed`, the site is then checked against the seed's `seed_cluster_info` (`seed::preflight`),
//! again before anything is written; every output is rendered in memory next; only then are the
//! identity and the outputs written, each atomically. Inputs are never deleted.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tracing::{info, warn};

use super::iso::{self, ConfigIsoContent};
use super::marker;
use super::pki;
use super::reconfig::{self, SeedReconfiguration};
use super::site::{self, Origin};
use crate::config::{self, InstallConfig, SiteInputs, ValidationError};
use crate::contract::config_iso::ISO_FILE_NAME;
use crate::seed::preflight::{self, SiteSeed};
use crate::util::fs::{Clobber, SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir, write_atomic};

pub use crate::contract::config_iso::{AUTH_DIR, KUBEADMIN_PASSWORD_FILE, KUBECONFIG_FILE};

/// Where the outputs went.
#[derive(Debug)]
pub struct Outputs {
    pub iso: PathBuf,
    pub kubeconfig: PathBuf,
    pub kubeadmin_password: PathBuf,
    pub identity: Origin,
}

/// `--seed` and how to reach it: the seed every site is checked against before anything is written.
#[derive(Debug, Clone)]
pub struct SeedOption {
    pub reference: String,
    pub insecure_registries: Vec<String>,
}

impl SeedOption {
    /// Reads the seed with the registry access `install_config` describes.
    pub fn read(&self, install_config: &InstallConfig) -> Result<SiteSeed> {
        preflight::read_site_seed(
            &self.reference,
            install_config,
            self.insecure_registries.clone(),
        )
    }
}

/// Everything one run writes, rendered before anything touches the disk.
struct Rendered {
    iso_tree: crate::iso9660::IsoBuilder,
    timestamp: i64,
    kubeconfig: String,
}

/// Builds one site's outputs in `dir`, after checking the site against `seed` when given.
pub fn build_checked(
    dir: &Path,
    rotate_crypto: bool,
    seed: Option<&SeedOption>,
) -> Result<Outputs> {
    let inputs = config::load_site_inputs(dir)?;
    for w in &inputs.warnings {
        warn!("{w}");
    }
    if let Some(seed) = seed {
        check_against_seed(&seed.read(&inputs.install_config)?, &inputs)?;
    }
    build_from(dir, &inputs, rotate_crypto, pki::all_cores())
}

/// What the seed's post-pivot would refuse, as findings (every one at once).
fn check_against_seed(seed: &SiteSeed, inputs: &SiteInputs) -> Result<()> {
    let findings = preflight::check_site(&seed.cluster_info, &inputs.install_config);
    if findings.is_empty() {
        info!(seed = %seed.reference, "the site fits the seed");
        return Ok(());
    }
    Err(ValidationError { findings }.into())
}

/// Builds one site's outputs in `dir` from inputs already loaded and validated (the batch mode
/// renders them from a shared base and an inventory entry); new keys are generated on at most
/// `crypto_threads` threads.
pub fn build_from(
    dir: &Path,
    inputs: &SiteInputs,
    rotate_crypto: bool,
    crypto_threads: NonZeroUsize,
) -> Result<Outputs> {
    check_output_paths(dir)?;
    let timestamp = iso::image_timestamp()?;
    let cluster_name = &inputs.install_config.metadata.name;
    let state =
        site::load_or_create_with_threads(dir, cluster_name, rotate_crypto, crypto_threads)?;
    let rendered = render(inputs, &state.identity, timestamp)?;
    if state.dirty {
        site::save(dir, &state.identity)?;
    }
    write_outputs(
        dir,
        &rendered,
        state.identity.kubeadmin_password.expose(),
        state.origin,
    )
}

/// Refuses, before anything is written, a run whose outputs could not all land: a file where an
/// output directory goes, or a directory where an output file goes. Otherwise the identity and the
/// ISO would be written and the run fail half way.
fn check_output_paths(dir: &Path) -> Result<()> {
    let identity = site::identity_path(dir);
    let dirs = [
        Some(dir.join(AUTH_DIR)),
        identity.parent().map(Path::to_path_buf),
    ];
    for d in dirs.into_iter().flatten() {
        if d.symlink_metadata().is_ok() && !d.is_dir() {
            bail!(
                "{} is in the way: ibi writes a directory there",
                d.display()
            );
        }
    }
    let files = [
        dir.join(ISO_FILE_NAME),
        dir.join(AUTH_DIR).join(KUBECONFIG_FILE),
        dir.join(AUTH_DIR).join(KUBEADMIN_PASSWORD_FILE),
        identity.clone(),
    ];
    for f in files {
        if f.is_dir() {
            bail!("{} is a directory: ibi writes a file there", f.display());
        }
    }
    Ok(())
}

fn render(inputs: &SiteInputs, id: &site::Identity, timestamp: i64) -> Result<Rendered> {
    let ibc = &inputs.image_based_config;
    // A cluster_id/infra_id given in image-based-config.yaml (IBIO does this) wins over ours.
    let cluster_id = if ibc.cluster_id.is_empty() {
        &id.cluster_id
    } else {
        &ibc.cluster_id
    };
    let infra_id = if ibc.infra_id.is_empty() {
        &id.infra_id
    } else {
        &ibc.infra_id
    };
    let manifest = SeedReconfiguration::build(
        inputs,
        &reconfig::Identity {
            cluster_id,
            infra_id,
            kubeadmin_password_hash: id.kubeadmin_password_hash.expose(),
            crypto: &id.crypto,
        },
    )?
    .to_json()?;
    let idms = match inputs.install_config.image_digest_sources() {
        Some(sources) => Some(reconfig::image_digest_mirror_set(&sources)?),
        None => None,
    };
    // The marker `ibi watch` reads back to tell this reconfiguration's ClusterVersion from the seed's.
    let extra_manifests = marker::with_marker(&inputs.extra_manifests, timestamp)?;
    let iso_tree = iso::build_tree(ConfigIsoContent {
        manifest_json: manifest,
        image_digest_mirror_set: idms,
        extra_manifests: &extra_manifests,
    })?;
    let ic = &inputs.install_config;
    let kubeconfig = pki::admin_kubeconfig(&id.crypto, &ic.metadata.name, &ic.base_domain)
        .context("rendering auth/kubeconfig")?;
    Ok(Rendered {
        iso_tree,
        timestamp,
        kubeconfig,
    })
}

fn write_outputs(dir: &Path, r: &Rendered, password: &str, origin: Origin) -> Result<Outputs> {
    let iso = dir.join(ISO_FILE_NAME);
    iso::write_iso(&iso, &r.iso_tree, r.timestamp)?;
    let auth = dir.join(AUTH_DIR);
    ensure_dir(&auth, SECRET_DIR_MODE)?;
    let kubeconfig = auth.join(KUBECONFIG_FILE);
    write_atomic(
        &kubeconfig,
        r.kubeconfig.as_bytes(),
        SECRET_FILE_MODE,
        Clobber::Replace,
    )?;
    // No trailing newline, as the installer writes it (scripts read it verbatim).
    let kubeadmin_password = auth.join(KUBEADMIN_PASSWORD_FILE);
    write_atomic(
        &kubeadmin_password,
        password.as_bytes(),
        SECRET_FILE_MODE,
        Clobber::Replace,
    )?;
    Ok(Outputs {
        iso,
        kubeconfig,
        kubeadmin_password,
        identity: origin,
    })
}
