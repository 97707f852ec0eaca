//! The site inputs of `ibi create config-image`: `install-config.yaml`, `image-based-config.yaml` and the
//! optional `extra-manifests/` directory; and the inputs of `ibi create image`:
//! `image-based-installation-config.yaml` and the optional `post.sh`.
//!
//! This module owns the input models, their strict decoding (unknown keys are errors, with line and column),
//! the validation rules (every finding is collected so the user fixes all of them in one pass), the
//! templates, and loading extra manifests and `post.sh`; and the site inventory of the batch mode
//! (`create config-image --sites`) with the shared base it applies to. Parsers are pure (`parse_*` take
//! `&str`); only the `load_*` functions touch the filesystem.

mod cross;
mod finding;
mod image_based_config;
mod install_config;
mod installation;
mod installation_template;
mod inventory;
mod inventory_render;
mod lca_versions;
mod manifests;
mod net;
mod nmstate_check;
mod rules;
mod sshkey;
mod template;
mod validate_ic;
mod yaml11;

use std::path::Path;

use anyhow::Context;

pub use finding::{Finding, ValidationError};
pub use image_based_config::{
    ImageBasedConfig, parse_image_based_config, validate_image_based_config,
};
pub use install_config::{
    ImageContentSource, ImageDigestSource, InstallConfig, MachinePool, Metadata, Networking, Proxy,
    parse_install_config,
};
pub use installation::{
    ARCHITECTURES, COREOS_INSTALLER_FLAGS, DEFAULT_ARCHITECTURE, DEFAULT_HOST_AGENT,
    HOST_AGENT_BINARY_IN_IMAGE, HOST_AGENTS, HostAgent, IMAGE_BASED_INSTALLATION_CONFIG_FILE,
    InstallationConfig, InstallationInputs, POST_SH_FILE, load_installation_inputs,
    parse_installation_config, validate_installation_config,
};
pub use installation_template::IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE;
pub use inventory::{Inventory, Nic, SiteEntry, load_inventory, parse_inventory};
pub use inventory_render::{FleetBase, SiteFiles, check_site, load_fleet_base};
pub use lca_versions::{
    MinorVersion, VERSIONED_KEYS, VersionedKey, markdown_table as versioned_keys_table,
    parse_minor_version,
};
pub use manifests::{ExtraManifest, load_extra_manifests};
pub use template::IMAGE_BASED_CONFIG_TEMPLATE;
pub use validate_ic::validate_install_config;

use finding::Findings;

/// The cluster-wide input, in the format `openshift-install` reads.
pub const INSTALL_CONFIG_FILE: &str = "install-config.yaml";
/// The per-host input of `openshift-install image-based create config-image`.
pub const IMAGE_BASED_CONFIG_FILE: &str = "image-based-config.yaml";
/// User manifests copied to `/extra-manifests/` of the config ISO; lifecycle-agent applies them after the
/// cluster manifests.
pub const EXTRA_MANIFESTS_DIR: &str = "extra-manifests";

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
        parse_install_config,
        validate_install_config,
        (&mut findings, &mut warnings),
    )?;
    let image_based_config = load_input(
        dir,
        IMAGE_BASED_CONFIG_FILE,
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

/// Reads, decodes and validates one input file, adding its findings and warnings to `out`;
/// `None` when the file is missing or does not decode.
fn load_input<T>(
    dir: &Path,
    name: &str,
    parse: fn(&str) -> Result<T, ValidationError>,
    validate: fn(&T) -> (Vec<Finding>, Vec<String>),
    out: (&mut Vec<Finding>, &mut Vec<String>),
) -> anyhow::Result<Option<T>> {
    let text = read_input(dir, name, out.0)?;
    Ok(text.and_then(|text| check_input(&text, parse, validate, out)))
}

/// Decodes and validates one input file's text, adding its findings and warnings to `out`; `None`
/// when it does not decode.
fn check_input<T>(
    text: &str,
    parse: fn(&str) -> Result<T, ValidationError>,
    validate: fn(&T) -> (Vec<Finding>, Vec<String>),
    out: (&mut Vec<Finding>, &mut Vec<String>),
) -> Option<T> {
    let (findings, warnings) = out;
    let config = collect(parse(text), findings);
    if let Some(c) = &config {
        let (f, w) = validate(c);
        findings.extend(f);
        warnings.extend(w);
    }
    config
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
        install_config,
        parse_install_config,
        validate_install_config,
        (&mut findings, &mut warnings),
    );
    let ibc = check_input(
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

/// Reads `dir/name`; a missing file becomes a finding, any other I/O error an error naming the path.
fn read_input(
    dir: &Path,
    name: &str,
    findings: &mut Vec<Finding>,
) -> anyhow::Result<Option<String>> {
    let path = dir.join(name);
    match read_document(&path) {
        Ok(Some(text)) => Ok(Some(text)),
        Ok(None) => {
            let mut f = Findings::new(name);
            let hint = match name {
                IMAGE_BASED_CONFIG_FILE => " (`ibi create config-template` writes a commented one)",
                IMAGE_BASED_INSTALLATION_CONFIG_FILE => {
                    " (`ibi create image-config-template` writes a commented one)"
                }
                _ => "",
            };
            f.file_error(format!(
                "file not found: {} is required{hint}",
                path.display()
            ));
            findings.extend(f.into_vec());
            Ok(None)
        }
        Err(DocumentError::Unreadable(e)) => {
            Err(e).with_context(|| format!("reading {}", path.display()))
        }
        Err(problem) => {
            let mut f = Findings::new(name);
            f.file_error(problem.to_string());
            findings.extend(f.into_vec());
            Ok(None)
        }
    }
}

/// Why an input document cannot be used; all but `Unreadable` are findings about the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DocumentError {
    #[error(transparent)]
    Refused(crate::util::fs::InputError),
    #[error("not valid UTF-8 text")]
    NotUtf8,
    #[error("cannot be read")]
    Unreadable(#[source] std::io::Error),
}

/// Reads an input document (YAML or JSON): `None` when missing; otherwise a regular file of at most
/// [`crate::util::fs::MAX_INPUT_BYTES`] and UTF-8.
pub(crate) fn read_document(path: &Path) -> Result<Option<String>, DocumentError> {
    use crate::util::fs::{InputError, MAX_INPUT_BYTES, read_input_file};
    let bytes = match read_input_file(path, MAX_INPUT_BYTES) {
        Ok(b) => b,
        Err(e) if e.io_kind() == Some(std::io::ErrorKind::NotFound) => return Ok(None),
        Err(InputError::Io { source, .. }) => return Err(DocumentError::Unreadable(source)),
        Err(e) => return Err(DocumentError::Refused(e)),
    };
    // Flow nesting is bounded where the text is decoded (util::yaml, through decode_strict).
    let text = String::from_utf8(bytes).map_err(|_| DocumentError::NotUtf8)?;
    Ok(Some(text))
}

/// [`read_document`] for a file that must exist: a missing, refused or undecodable file is a
/// finding about `shown` (how findings name the file); an I/O error names the path.
pub(crate) fn read_document_or_finding(path: &Path, shown: &str) -> anyhow::Result<String> {
    match read_document(path) {
        Ok(Some(text)) => Ok(text),
        Ok(None) => Err(file_finding(
            shown,
            format!("file not found: {}", path.display()),
        )),
        Err(e) => Err(document_error(path, shown, e)),
    }
}

/// A [`DocumentError`] as the caller reports it: a finding about `shown`, or, when the file could not
/// be read at all, an I/O error naming the path.
pub(crate) fn document_error(path: &Path, shown: &str, e: DocumentError) -> anyhow::Error {
    match e {
        DocumentError::Unreadable(io) => {
            anyhow::Error::new(io).context(format!("reading {}", path.display()))
        }
        e => file_finding(shown, e.to_string()),
    }
}

/// One finding about a whole file, as an error.
pub(crate) fn file_finding(shown: &str, message: String) -> anyhow::Error {
    let mut f = Findings::new(shown);
    f.file_error(message);
    ValidationError {
        findings: f.into_vec(),
    }
    .into()
}

fn collect<T>(r: Result<T, ValidationError>, findings: &mut Vec<Finding>) -> Option<T> {
    r.map_err(|e| findings.extend(e.findings)).ok()
}

#[cfg(test)]
mod inventory_tests;
#[cfg(test)]
mod site_tests;
#[cfg(test)]
mod tests;
