//! One site's inputs for `create config-image`: install-config.yaml, image-based-config.yaml and the
//! extra manifests, read from a directory or (batch mode) given as rendered text, validated each on its
//! own and across files.

use std::path::Path;

use super::cross;
use super::image_based_config::{
    IMAGE_BASED_CONFIG_FILE, ImageBasedConfig, parse_image_based_config,
    validate_image_based_config,
};
use super::input::{check_input, load_input};
use super::install_config::{INSTALL_CONFIG_FILE, InstallConfig, parse_install_config};
use super::manifests::{EXTRA_MANIFESTS_DIR, ExtraManifest, load_extra_manifests};
use super::validate_ic::validate_install_config;
use crate::util::finding::{Finding, ValidationError};

/// Everything `create config-image` reads from the site directory, decoded and validated.
#[derive(Debug, Clone)]
pub struct SiteInputs {
    pub install_config: InstallConfig,
    pub image_based_config: ImageBasedConfig,
    /// Sorted by file name.
    pub extra_manifests: Vec<ExtraManifest>,
    /// Non-fatal findings, rendered like findings (`file: field: message`).
    pub warnings: Vec<String>,
}

/// Reads and validates the site directory `dir`.
///
/// Findings from both files and the extra manifests are collected and returned together as one
/// [`ValidationError`] (downcast it from the `anyhow::Error`). Other I/O errors name the path.
pub fn load_site_inputs(dir: &Path) -> anyhow::Result<SiteInputs> {
    let mut findings = Vec::new();
    let mut warnings = Vec::new();

    let install_config = load_input(
        dir,
        INSTALL_CONFIG_FILE,
        "",
        parse_install_config,
        validate_install_config,
        (&mut findings, &mut warnings),
    )?;
    let image_based_config = load_input(
        dir,
        IMAGE_BASED_CONFIG_FILE,
        " (`ibi create config-template` writes a commented one)",
        parse_image_based_config,
        validate_image_based_config,
        (&mut findings, &mut warnings),
    )?;

    let (extra_manifests, f, w) = load_extra_manifests(&dir.join(EXTRA_MANIFESTS_DIR))?;
    findings.extend(f);
    warnings.extend(w);
    tracing::debug!(
        "site {}: {} finding(s), {} warning(s), {} extra manifest(s)",
        dir.display(),
        findings.len(),
        warnings.len(),
        extra_manifests.len()
    );

    if let (Some(ic), Some(ibc)) = (&install_config, &image_based_config) {
        findings.extend(cross_check(ic, ibc));
    }
    match (install_config, image_based_config) {
        (Some(install_config), Some(image_based_config)) if findings.is_empty() => Ok(SiteInputs {
            install_config,
            image_based_config,
            extra_manifests,
            warnings,
        }),
        _ => Err(ValidationError { findings }.into()),
    }
}

/// Decodes and validates a site's two files given as text, with extra manifests already loaded and
/// checked: the batch mode renders each site's files from the shared base and the inventory.
pub fn parse_site_inputs(
    install_config: &str,
    image_based_config: &str,
    extra_manifests: Vec<ExtraManifest>,
) -> Result<SiteInputs, ValidationError> {
    let mut findings = Vec::new();
    let mut warnings = Vec::new();
    let ic = check_input(
        INSTALL_CONFIG_FILE,
        install_config,
        parse_install_config,
        validate_install_config,
        (&mut findings, &mut warnings),
    );
    let ibc = check_input(
        IMAGE_BASED_CONFIG_FILE,
        image_based_config,
        parse_image_based_config,
        validate_image_based_config,
        (&mut findings, &mut warnings),
    );
    // The cross-file rule runs in `check_site`, where a one-NIC site gets a message naming its
    // inventory field.
    match (ic, ibc) {
        (Some(install_config), Some(image_based_config)) if findings.is_empty() => Ok(SiteInputs {
            install_config,
            image_based_config,
            extra_manifests,
            warnings,
        }),
        _ => Err(ValidationError { findings }),
    }
}

/// The rules that need both files (see [`cross`]).
pub(crate) fn cross_check(ic: &InstallConfig, ibc: &ImageBasedConfig) -> Vec<Finding> {
    cross::node_ip_in_machine_network(&ic.machine_network_cidrs(), ibc.network_config.as_ref())
}

#[cfg(test)]
mod tests;
