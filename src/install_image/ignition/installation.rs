//! The installation ISO's Ignition config: what `openshift-install image-based create image` embeds, so
//! that on boot the live ISO pulls `lca-cli` out of the seed and runs `lca-cli ibi`, which writes RHCOS to
//! the disk, restores the seed into a new stateroot and precaches the release images.
//!
//! Build order (the installer's, which fixes the override's precedence): the `core` user; the optional
//! files registries.conf, trust bundle and post.sh; then `ignitionConfigOverride` merged over that
//! ([`crate::ignition::merge`], override wins); then the template files (install script, ibi-configuration.json,
//! network-config.yaml, pull-secret.json), each replacing an entry with the same path or appended, so
//! they win over the override; then the two units.
//!
//! `networkConfig` arrives already validated (the installer runs `nmstatectl gc` and renders the
//! NetworkManager keyfiles only to check it; `config` does the same in-process with the `nmstate` crate).
//! No keyfile goes into this config: the live ISO applies the YAML itself with `nmstatectl apply`.
//!
//! Unit texts follow the reference's line-by-line description of the installer's; the install script is
//! ibi's own, with the documented behaviour. The script and lca-cli use
//! relative `var/tmp/…` paths, so they must run with CWD `/`: the unit sets no `WorkingDirectory=` and
//! systemd's default for system services is `/`; the tests pin both facts.
//!
//! With `--site` (a one-shot ISO) the site's configuration tree follows the template files, and with
//! `hostAgent: lca` ibi's `post.sh` takes `/var/tmp/post.sh` and the user's moves aside
//! ([`super::one_shot`]).
//!
//! With `hostAgent: ibi` ([`InstallationIgnitionInputs::host_agent_image`]) the install script and unit
//! are swapped for [`super::host_agent`]'s fetch script and `ibi-agent-install.service`, at the same
//! places in the build order; everything else is unchanged.

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::super::site_tree::SiteTree;
use super::host_agent::{FETCH_IBI_SCRIPT, FETCH_IBI_SCRIPT_PATH, ibi_agent_unit};
use super::one_shot::carry_site;
use super::registries::registries_conf;
use super::status_report::{
    StatusReportInputs, add_failure_dropin, report_config_file, report_script_file, report_units,
};
use super::units::{check_unit_value, proxy_environment};
use crate::config::{ImageDigestSource, Proxy};
use crate::contract::ibi_configuration::{
    self, IBI_CONFIGURATION_PATH, IbiConfigurationFile, POST_SCRIPT_PATH, PULL_SECRET_PATH,
};
use crate::ignition::merge::{merge_configs, parse_override};
use crate::ignition::types::{Config, File, IGNITION_VERSION, Ignition, Passwd, PasswdUser, Unit};
use crate::util::secret::Secret;

/// The live ISO's login user (RHCOS), given the SSH key.
pub const CORE_USER: &str = "core";
/// Mirrors for podman and lca-cli's precache on the live ISO.
pub const REGISTRIES_CONF_PATH: &str = "/etc/containers/registries.conf";
/// Picked up by the live ISO's CA trust (update-ca-trust) for registry TLS.
pub const TRUST_BUNDLE_PATH: &str = "/etc/pki/ca-trust/source/anchors/additional-trust-bundle.pem";
/// `ExecStart=` of [`INSTALL_UNIT`]; relabelled `install_exec_t` by its `ExecStartPre=`.
pub use crate::contract::ibi_configuration::INSTALL_SCRIPT_PATH;
/// The oneshot unit that runs [`INSTALL_SCRIPT_PATH`]; always enabled.
pub const INSTALL_UNIT: &str = "install-rhcos-and-restore-seed.service";
pub use super::units::{NETWORK_CONFIG_PATH, NETWORK_CONFIG_UNIT, PRIVATE_MODE};

/// The installer's mode rule for template files: parent dir `bin` gives 0555 (systemd executes it),
/// everything else [`PRIVATE_MODE`].
pub const SCRIPT_MODE: u32 = 0o555;
/// registries.conf is world-readable, as podman run by any user reads it.
pub const REGISTRIES_CONF_MODE: u32 = 0o644;
pub use crate::contract::ibi_configuration::POST_SCRIPT_MODE;

/// The live ISO's install script, written for ibi from the behaviour the reference documents
/// (openshift-installer-ibi.md §3.3): same inputs (`$1` or `SEED_IMAGE`, `PULL_SECRET_FILE`,
/// `IBI_CONFIGURATION_FILE` with the same defaults), same steps: copy `lca-cli` out of the seed
/// image, retrying every 10 s until the registry answers, then run `lca-cli ibi -f <config>`.
pub const INSTALL_SCRIPT: &str = r#"#!/bin/bash
# Written by ibi. Copies lca-cli out of the seed image and runs `lca-cli ibi`, which installs RHCOS,
# restores the seed into a new stateroot and precaches the release images. lca-cli resolves
# var/tmp/... relative to its working directory, which systemd sets to / for this service.
set -e

seed_image="${1:-${SEED_IMAGE}}"
authfile="${PULL_SECRET_FILE:-/var/tmp/pull-secret.json}"
ibi_config="${IBI_CONFIGURATION_FILE:-/var/tmp/ibi-configuration.json}"

# The network or the registry may not be ready yet: keep trying until the container exists.
while ! podman create --authfile "${authfile}" --name lca-cli "${seed_image}" lca-cli; do
    echo "could not create a container from ${seed_image}; retrying in 10 seconds" >&2
    sleep 10
done
podman cp lca-cli:lca-cli /usr/local/bin/lca-cli
podman rm lca-cli

/usr/local/bin/lca-cli ibi -f "${ibi_config}"
"#;

/// `network-config.service`, line for line as the reference lists it (§3.3), for the install unit
/// `install_unit`: applies the nmstate YAML before the install starts, retrying until NetworkManager
/// accepts it. Its `Before=` names the install unit the ISO carries ([`INSTALL_UNIT`], as the
/// installer's, or with `hostAgent: ibi` the ibi unit), never one it lacks.
pub fn network_config_service(install_unit: &str) -> String {
    format!(
        r#"[Unit]
Description=Pre Network Manager Config
After=NetworkManager.service
Before={install_unit}

[Service]
Type=oneshot
RemainAfterExit=yes
TimeoutSec=60
ExecStart=bash -c "until /usr/bin/nmstatectl apply /var/tmp/network-config.yaml; do sleep 1; done"

[Install]
WantedBy=multi-user.target
"#
    )
}

/// What the installation ISO's config is built from; `ibi create image` fills it from the validated
/// `image-based-installation-config.yaml` (defaults applied) and `DIR/post.sh`.
#[derive(Debug, Clone, Default)]
pub struct InstallationIgnitionInputs {
    pub seed_image: String,
    pub seed_version: String,
    pub installation_disk: String,
    /// Written to [`PULL_SECRET_PATH`] with a newline added, as the installer's template does.
    pub pull_secret: Secret<String>,
    /// The `core` user's only key; empty gives `[""]`, as with the installer.
    pub ssh_key: String,
    /// The three `extraPartition*` keys are omitted from ibi-configuration.json when `None`, empty or 0
    /// (lca-cli then applies its defaults); the command passes the installer's defaults explicitly.
    pub extra_partition_start: Option<String>,
    pub extra_partition_label: Option<String>,
    pub extra_partition_number: Option<u32>,
    pub shutdown: bool,
    pub skip_disk_cleanup: bool,
    pub coreos_installer_args: Vec<String>,
    pub release_registry: String,
    /// Beyond the installer: written to ibi-configuration.json when `Some`, for lca-cli's precache.
    pub precache_best_effort: Option<bool>,
    pub precache_disabled: Option<bool>,
    /// Canonical nmstate YAML (sorted keys), as `config` renders it.
    pub network_config: Option<String>,
    pub proxy: Option<Proxy>,
    pub image_digest_sources: Vec<ImageDigestSource>,
    pub additional_trust_bundle: String,
    /// The bytes of `DIR/post.sh`, when present.
    pub post_sh: Option<Vec<u8>>,
    /// Ignition JSON (spec 3.0.0–3.4.0); `None` or empty: no override.
    pub ignition_config_override: Option<String>,
    /// `hostAgent: ibi`: the image holding `/usr/local/bin/ibi`, which the live ISO copies out and runs
    /// as `ibi agent install`; `None` (`hostAgent: lca`): the seed's lca-cli, as the installer does.
    pub host_agent_image: Option<String>,
    /// `statusURL`: the host reports its progress to `ibi serve` ([`super::status_report`]).
    pub status_report: Option<StatusReportInputs>,
    /// `--site`: the site's configuration tree, carried for a one-shot install ([`super::one_shot`]).
    pub site: Option<SiteTree>,
}

/// Builds the installation ISO's Ignition config (module doc for the order and precedence).
///
/// Errors: an override that does not parse (`failed to override ignition config: failed to parse ignition
/// config override: …`), or a value that would break a unit file line.
pub fn build_installation_ignition(i: &InstallationIgnitionInputs) -> Result<Config> {
    let mut config = base_config(i);
    if let Some(text) = i
        .ignition_config_override
        .as_deref()
        .filter(|t| !t.is_empty())
    {
        config = apply_override(&config, text).context("failed to override ignition config")?;
    }
    for file in template_files(i)? {
        replace_or_append(&mut config.storage.files, file);
    }
    for unit in units(i)? {
        add_unit(&mut config.systemd.units, unit);
    }
    // Last: it lays the site over the whole fleet config, as deploy's streamed variants do.
    if let Some(tree) = &i.site {
        carry_site(&mut config, tree)?;
    }
    check_duplicates(&config)?;
    Ok(config)
}

/// Ignition rejects a config where a path is given twice among files, directories and links, or a unit
/// name twice ("duplicate entry defined"), and the live ISO would stop in its emergency shell. Only an
/// override can cause that (e.g. a link at one of our file paths), so it is refused here, at build time.
fn check_duplicates(c: &Config) -> Result<()> {
    let extra_paths = |list: &str| -> Vec<String> {
        let items = c.storage.extra.get(list).and_then(|v| v.as_array());
        let paths = items
            .into_iter()
            .flatten()
            .filter_map(|i| i.get("path")?.as_str());
        paths.map(str::to_string).collect()
    };
    let files = c.storage.files.iter().map(|f| ("file", f.path.clone()));
    let dirs = extra_paths("directories")
        .into_iter()
        .map(|p| ("directory", p));
    let links = extra_paths("links").into_iter().map(|p| ("link", p));
    let mut seen: Vec<(&str, String)> = Vec::new();
    for (kind, path) in files.chain(dirs).chain(links) {
        if let Some((first, _)) = seen.iter().find(|(_, p)| *p == path) {
            bail!(
                "ignitionConfigOverride: {path} is given as a {first} and as a {kind}; Ignition would reject the config at boot"
            );
        }
        seen.push((kind, path));
    }
    for (n, u) in c.systemd.units.iter().enumerate() {
        if c.systemd.units[..n].iter().any(|o| o.name == u.name) {
            bail!(
                "ignitionConfigOverride: unit {} is given twice; Ignition would reject the config at boot",
                u.name
            );
        }
    }
    Ok(())
}

fn apply_override(config: &Config, text: &str) -> Result<Config> {
    merge_configs(config, &parse_override(text)?)
}

/// The config before the override: user `core` and the optional files, in the installer's order.
fn base_config(i: &InstallationIgnitionInputs) -> Config {
    let mut c = Config {
        ignition: Ignition {
            version: IGNITION_VERSION.to_string(),
            ..Default::default()
        },
        passwd: Passwd {
            // One entry even without a key: the installer writes `[""]`.
            users: vec![PasswdUser {
                name: CORE_USER.to_string(),
                ssh_authorized_keys: vec![i.ssh_key.clone()],
                ..Default::default()
            }],
            ..Default::default()
        },
        ..Default::default()
    };
    let files = &mut c.storage.files;
    if let Some(text) = registries_conf(&i.image_digest_sources) {
        files.push(File::from_bytes(
            REGISTRIES_CONF_PATH,
            REGISTRIES_CONF_MODE,
            text.as_bytes(),
        ));
    }
    if !i.additional_trust_bundle.is_empty() {
        let pem = i.additional_trust_bundle.as_bytes();
        files.push(File::from_bytes(TRUST_BUNDLE_PATH, PRIVATE_MODE, pem));
    }
    if let Some(post) = &i.post_sh {
        // A one-shot ISO with lca-cli moves it aside for ibi's (`one_shot::carry_site`).
        files.push(File::from_bytes(POST_SCRIPT_PATH, POST_SCRIPT_MODE, post));
    }
    c
}

/// The template files, in the installer's directory-walk order (`usr/` before `var/`, then by name).
fn template_files(i: &InstallationIgnitionInputs) -> Result<Vec<File>> {
    let network = format!("{}\n", i.network_config.as_deref().unwrap_or(""));
    let pull_secret = format!("{}\n", i.pull_secret.expose());
    let (script_path, script) = match i.host_agent_image {
        None => (INSTALL_SCRIPT_PATH, INSTALL_SCRIPT),
        Some(_) => (FETCH_IBI_SCRIPT_PATH, FETCH_IBI_SCRIPT),
    };
    let mut files = vec![
        File::from_bytes(script_path, SCRIPT_MODE, script.as_bytes()),
        File::from_bytes(
            IBI_CONFIGURATION_PATH,
            PRIVATE_MODE,
            &ibi_configuration_json(i)?,
        ),
        File::from_bytes(NETWORK_CONFIG_PATH, PRIVATE_MODE, network.as_bytes()),
        File::from_bytes(PULL_SECRET_PATH, PRIVATE_MODE, pull_secret.as_bytes()),
    ];
    if let Some(report) = &i.status_report {
        files.push(report_config_file(report)?);
        if i.host_agent_image.is_none() {
            files.push(report_script_file());
        }
    }
    Ok(files)
}

/// `hostAgent: lca` with `statusURL`: lca-cli's own reports are the units of [`super::status_report`].
fn lca_reports(i: &InstallationIgnitionInputs) -> bool {
    i.status_report.is_some() && i.host_agent_image.is_none()
}

fn replace_or_append(files: &mut Vec<File>, file: File) {
    match files.iter_mut().find(|f| f.path == file.path) {
        Some(slot) => *slot = file,
        None => files.push(file),
    }
}

/// Adds a generated unit. The installer appends without looking, so an override unit of the same name
/// gives a duplicate that Ignition rejects at boot. Choice: merge ours over the override's entry with
/// Ignition's rules, so our `contents`/`enabled` win (as our files do) and the override's drop-ins and
/// other fields stay: a user can extend our units with drop-ins.
fn add_unit(units: &mut Vec<Unit>, unit: Unit) {
    match units.iter_mut().find(|u| u.name == unit.name) {
        Some(slot) => {
            tracing::info!(
                "ignitionConfigOverride unit {} merged under the generated one",
                unit.name
            );
            if let Some(v) = unit.contents {
                slot.contents = Some(v);
            }
            if let Some(v) = unit.enabled {
                slot.enabled = Some(v);
            }
            if let Some(Value::Array(ours)) = unit.extra.get("dropins") {
                merge_dropins(slot, ours);
            }
        }
        None => units.push(unit),
    }
}

/// Our drop-ins replace the override's of the same name (as our files do) and the others stay.
fn merge_dropins(slot: &mut Unit, ours: &[Value]) {
    let entry = slot
        .extra
        .entry("dropins")
        .or_insert_with(|| Value::Array(Vec::new()));
    if !entry.is_array() {
        *entry = Value::Array(Vec::new());
    }
    let Value::Array(theirs) = entry else { return };
    for dropin in ours {
        match theirs
            .iter_mut()
            .find(|d| d.get("name") == dropin.get("name"))
        {
            Some(same) => *same = dropin.clone(),
            None => theirs.push(dropin.clone()),
        }
    }
}

/// `install-rhcos-and-restore-seed.service` (or, with `hostAgent: ibi`, `ibi-agent-install.service`)
/// then `network-config.service`, the installer's order.
fn units(i: &InstallationIgnitionInputs) -> Result<Vec<Unit>> {
    let has_network = i.network_config.as_deref().is_some_and(|n| !n.is_empty());
    let mut install = match &i.host_agent_image {
        None => Unit {
            contents: Some(install_service(&i.seed_image, i.proxy.as_ref())?),
            enabled: Some(true),
            name: INSTALL_UNIT.to_string(),
            ..Default::default()
        },
        Some(image) => ibi_agent_unit(image, i.proxy.as_ref())?,
    };
    if lca_reports(i) {
        add_failure_dropin(&mut install);
    }
    let network = network_config_service(&install.name);
    let mut units = vec![
        install,
        Unit {
            contents: Some(network),
            // The installer leaves `enabled` unset, not false, without a network config.
            enabled: has_network.then_some(true),
            name: NETWORK_CONFIG_UNIT.to_string(),
            ..Default::default()
        },
    ];
    if lca_reports(i) {
        units.extend(report_units(i.shutdown));
    }
    Ok(units)
}

/// The text of `install-rhcos-and-restore-seed.service.template` rendered for `seed_image` and `proxy`.
pub fn install_service(seed_image: &str, proxy: Option<&Proxy>) -> Result<String> {
    check_unit_value("seedImage", seed_image)?;
    let mut s = String::from(
        "[Unit]\nWants=network-online.target\nAfter=network-online.target\n\
         Description=SNO Image-based Installation\n\n[Service]\n",
    );
    s.push_str(&format!("Environment=SEED_IMAGE={seed_image}\n"));
    s.push_str(&format!(
        "Environment=IBI_CONFIGURATION_FILE={IBI_CONFIGURATION_PATH}\n"
    ));
    s.push_str(&format!(
        "Environment=PULL_SECRET_FILE={PULL_SECRET_PATH}\n"
    ));
    s.push_str(&proxy_environment(proxy)?);
    // The reference lists `Type=oneshot` right after the environment, in the same [Service] section:
    // no blank line between them.
    s.push_str(&format!(
        "Type=oneshot\nRemainAfterExit=yes\nExecStartPre=/usr/bin/chcon -t install_exec_t \
         {INSTALL_SCRIPT_PATH}\nExecStart={INSTALL_SCRIPT_PATH}\n\n[Install]\nWantedBy=multi-user.target\n"
    ));
    Ok(s)
}

/// The file's bytes for these inputs (see [`crate::contract::ibi_configuration::encode`]).
pub fn ibi_configuration_json(i: &InstallationIgnitionInputs) -> Result<Vec<u8>> {
    ibi_configuration::encode(&IbiConfigurationFile {
        extra_partition_label: i.extra_partition_label.as_deref().unwrap_or(""),
        extra_partition_number: i.extra_partition_number.unwrap_or(0),
        extra_partition_start: i.extra_partition_start.as_deref().unwrap_or(""),
        installation_disk: &i.installation_disk,
        release_registry: &i.release_registry,
        seed_image: &i.seed_image,
        seed_version: &i.seed_version,
        // With lca-cli's reports, the success report's unit powers the host off instead (after it).
        shutdown: i.shutdown && !lca_reports(i),
        skip_disk_cleanup: i.skip_disk_cleanup,
        coreos_installer_args: &i.coreos_installer_args,
        precache_best_effort: i.precache_best_effort,
        precache_disabled: i.precache_disabled,
    })
}

#[cfg(test)]
mod tests;
