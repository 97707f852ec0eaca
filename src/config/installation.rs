//! The input of `ibi create image`: `image-based-installation-config.yaml` (the installer's
//! `ImageBasedInstallationConfig`) and the optional `post.sh` hook beside it.
//!
//! Decoding is strict like the installer's (unknown keys are findings with line and column), defaults are
//! applied only when a key is absent or null (an explicit empty value overrides a default, as in the
//! installer, and is then judged by the rules), and validation collects every finding. The fields end up on
//! the live ISO: most in `/var/tmp/ibi-configuration.json` for `lca-cli ibi`, the rest in the Ignition
//! config ibi builds (trust bundle, proxy, registries.conf, network config, SSH key, override) or in the
//! ISO's kernel-argument slots (`liveKernelArgs`). Inputs are read, never deleted.
//!
//! `hostAgent` (ours) chooses the program the live ISO runs to install the host: the seed's `lca-cli`
//! (the installer's behaviour and the default) or `ibi agent install` from `hostAgentImage`.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Deserializer};
use serde_yaml_ng::Value;

use super::finding::{Findings, decode_strict, idx};
use super::input::load_input;
use super::install_config::{ImageDigestSource, Proxy};
use super::{lca_versions, nmstate_check, rules};
use crate::contract::ibi_configuration::{
    DEFAULT_EXTRA_PARTITION_LABEL, DEFAULT_EXTRA_PARTITION_NUMBER, DEFAULT_EXTRA_PARTITION_START,
    MAX_GPT_NAME_UNITS, MAX_GPT_PARTITION_NUMBER, RHCOS_PARTITIONS,
};
use crate::image_ref::check_pull_spec;
use crate::image_ref::{is_registry_host, split_host_port};
use crate::util::finding::{Finding, ValidationError};
use crate::util::secret::Secret;

/// The input file of `ibi create image`, named as `openshift-install image-based create image` names it.
pub const IMAGE_BASED_INSTALLATION_CONFIG_FILE: &str = "image-based-installation-config.yaml";
/// The optional post-deployment hook; written to `/var/tmp/post.sh` (0755) on the live ISO, where
/// `lca-cli ibi` runs it with `bash -c var/tmp/post.sh` after restoring the seed.
pub const POST_SH_FILE: &str = "post.sh";

/// `architecture` when absent or empty, as in the installer.
pub const DEFAULT_ARCHITECTURE: &str = "amd64";
/// The architectures the installer builds installation ISOs for.
pub const ARCHITECTURES: &[&str] = &["amd64", "arm64"];
/// `hostAgent` values: the seed's `lca-cli ibi` (the installer's behaviour), or `ibi agent install`.
pub const HOST_AGENTS: &[&str] = &["lca", "ibi"];
/// `hostAgent` when absent: the installation ISO behaves exactly as the installer's.
pub const DEFAULT_HOST_AGENT: &str = "lca";
/// Where the live ISO's fetch script finds the binary inside `hostAgentImage` (the `Containerfile` at
/// the repository root puts it there).
pub const HOST_AGENT_BINARY_IN_IMAGE: &str = "/usr/local/bin/ibi";
/// The only flags the installer lets through to `coreos-installer install` (each takes a value, given as
/// the next element).
pub const COREOS_INSTALLER_FLAGS: &[&str] = &[
    "--append-karg",
    "--delete-karg",
    "--save-partlabel",
    "--save-partindex",
];
/// Non-flag characters the installer accepts in `coreosInstallerArgs` (besides ASCII letters and digits):
/// its class `[A-Za-z0-9@!#$%*()_+-=//.,";':{}\[\]]`, where `+-=` is the range 0x2B–0x3D.
const INSTALLER_ARG_PUNCTUATION: &str = "@!#$%*()_+,-./:;<=\"'{}[]";

/// `image-based-installation-config.yaml`, as written (defaults are applied by the accessors).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct InstallationConfig {
    /// Ignored, like the installer.
    #[serde(deserialize_with = "nullable")]
    pub api_version: String,
    /// Ignored, like the installer.
    #[serde(deserialize_with = "nullable")]
    pub kind: String,
    /// Ignored, like the installer.
    pub metadata: Option<Value>,
    /// The seed image pullspec (or `oci:/path:tag`), pulled by lca-cli ibi.
    #[serde(deserialize_with = "nullable")]
    pub seed_image: String,
    /// Must equal the seed's `seed_cluster_ocp_version`; names the stateroot.
    #[serde(deserialize_with = "nullable")]
    pub seed_version: String,
    /// The target disk of `coreos-installer install`.
    #[serde(deserialize_with = "nullable")]
    pub installation_disk: String,
    /// Auth file of the live ISO's podman pulls (`/var/tmp/pull-secret.json`).
    #[serde(deserialize_with = "nullable")]
    pub pull_secret: Secret<String>,
    /// Authorized key of the live ISO's `core` user.
    #[serde(deserialize_with = "nullable")]
    pub ssh_key: String,
    #[serde(deserialize_with = "nullable")]
    pub additional_trust_bundle: String,
    /// nmstate state applied on the live ISO by `network-config.service`.
    pub network_config: Option<serde_json::Value>,
    pub proxy: Option<Proxy>,
    /// As written; see [`InstallationConfig::image_digest_sources`].
    pub image_digest_sources: Option<Vec<ImageDigestSource>>,
    #[serde(deserialize_with = "nullable")]
    pub release_registry: String,
    /// As written; see [`InstallationConfig::extra_partition_start`].
    pub extra_partition_start: Option<String>,
    /// As written; see [`InstallationConfig::extra_partition_label`].
    pub extra_partition_label: Option<String>,
    /// As written; see [`InstallationConfig::extra_partition_number`].
    pub extra_partition_number: Option<u32>,
    #[serde(deserialize_with = "nullable")]
    pub shutdown: bool,
    #[serde(deserialize_with = "nullable")]
    pub skip_disk_cleanup: bool,
    #[serde(deserialize_with = "nullable")]
    pub coreos_installer_args: Vec<String>,
    /// As written; see [`InstallationConfig::ignition_config_override`].
    #[serde(deserialize_with = "nullable")]
    pub ignition_config_override: String,
    /// As written; see [`InstallationConfig::architecture`].
    #[serde(deserialize_with = "nullable")]
    pub architecture: String,
    /// Beyond the installer: lca-cli ibi's `precacheBestEffort`, passed through only when set.
    pub precache_best_effort: Option<bool>,
    /// Beyond the installer: lca-cli ibi's `precacheDisabled`, passed through only when set.
    pub precache_disabled: Option<bool>,
    /// Beyond the installer: kernel arguments appended to the live ISO's default ones (the live boot only;
    /// the installed system takes `coreosInstallerArgs` `--append-karg`).
    #[serde(deserialize_with = "nullable")]
    pub live_kernel_args: Vec<String>,
    /// Beyond the installer: as written; see [`InstallationConfig::host_agent`].
    pub host_agent: Option<String>,
    /// Beyond the installer: the image holding [`HOST_AGENT_BINARY_IN_IMAGE`]; only with `hostAgent: ibi`.
    #[serde(deserialize_with = "nullable")]
    pub host_agent_image: String,
    /// Beyond the installer: the base URL of `ibi serve` the host reports its progress to.
    #[serde(rename = "statusURL", deserialize_with = "nullable")]
    pub status_url: String,
    /// Beyond the installer: the CA certificates the host checks `statusURL`'s TLS against, as a PEM
    /// file path (relative to the asset directory) or inline PEM; see [`InstallationInputs::status_ca_pem`].
    #[serde(rename = "statusCA", deserialize_with = "nullable")]
    pub status_ca: String,
}

/// What installs the host from the live ISO, after validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostAgent {
    /// `lca-cli ibi`, copied out of the seed image (the installer's behaviour).
    Lca,
    /// `ibi agent install`, with the binary copied out of this image.
    Ibi { image: String },
}

/// A YAML null (`key:` with no value) decodes as the type's default, as Go's decoder leaves the field alone.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Option::<T>::deserialize(d).map(Option::unwrap_or_default)
}

/// Strictly decodes `image-based-installation-config.yaml`; unknown keys and type errors are findings with
/// line and column.
pub fn parse_installation_config(text: &str) -> Result<InstallationConfig, ValidationError> {
    decode_strict(IMAGE_BASED_INSTALLATION_CONFIG_FILE, text, false)
}

impl InstallationConfig {
    /// `extraPartitionStart` after defaults: sfdisk's `start=` (negative: that size at the end of the disk).
    pub fn extra_partition_start(&self) -> &str {
        self.extra_partition_start
            .as_deref()
            .unwrap_or(DEFAULT_EXTRA_PARTITION_START)
    }

    /// `extraPartitionLabel` after defaults: the GPT name of the partition mounted at /var/lib/containers.
    pub fn extra_partition_label(&self) -> &str {
        self.extra_partition_label
            .as_deref()
            .unwrap_or(DEFAULT_EXTRA_PARTITION_LABEL)
    }

    /// `extraPartitionNumber` after defaults.
    pub fn extra_partition_number(&self) -> u32 {
        self.extra_partition_number
            .unwrap_or(DEFAULT_EXTRA_PARTITION_NUMBER)
    }

    /// `architecture` after defaults: `amd64` when absent or empty (the installer treats both alike).
    pub fn architecture(&self) -> &str {
        match self.architecture.as_str() {
            "" => DEFAULT_ARCHITECTURE,
            a => a,
        }
    }

    /// `hostAgent` after defaults: [`HostAgent::Lca`] when absent. Meaningful only for a config without
    /// findings (an unknown value also gives `Lca`).
    pub fn host_agent(&self) -> HostAgent {
        match self.host_agent.as_deref() {
            Some("ibi") => HostAgent::Ibi {
                image: self.host_agent_image.clone(),
            },
            _ => HostAgent::Lca,
        }
    }

    /// The mirrors for the live ISO's registries.conf; empty when none are configured.
    pub fn image_digest_sources(&self) -> &[ImageDigestSource] {
        self.image_digest_sources.as_deref().unwrap_or_default()
    }

    /// The Ignition JSON to merge over the generated config, or `None` when blank.
    pub fn ignition_config_override(&self) -> Option<&str> {
        Some(self.ignition_config_override.as_str()).filter(|s| !s.trim().is_empty())
    }

    /// The network config as YAML with keys sorted at every level (the live ISO's
    /// `/var/tmp/network-config.yaml`), or `None` when there is none.
    pub fn canonical_network_config(&self) -> anyhow::Result<Option<String>> {
        nmstate_check::canonical_network_config(self.network_config.as_ref())
    }
}

/// Validates an installation config; returns every finding and the warnings. The order of the installer's
/// own checks is kept, the rules it lacks follow.
pub fn validate_installation_config(c: &InstallationConfig) -> (Vec<Finding>, Vec<String>) {
    let mut f = Findings::new(IMAGE_BASED_INSTALLATION_CONFIG_FILE);
    if c.pull_secret.expose().trim().is_empty() {
        f.add("pullSecret", "required: you must specify a pullSecret");
    } else {
        rules::pull_secret(&mut f, "pullSecret", c.pull_secret.expose());
    }
    rules::ssh_key(&mut f, "sshKey", &c.ssh_key);
    required(&mut f, "seedImage", &c.seed_image, "a seedImage");
    required(&mut f, "seedVersion", &c.seed_version, "a seedVersion");
    installation_disk(&mut f, &c.installation_disk);
    extra_partition_start(&mut f, c.extra_partition_start.as_deref());
    rules::trust_bundle(&mut f, "additionalTrustBundle", &c.additional_trust_bundle);
    if let Some(config) = c.network_config.as_ref().filter(|v| !v.is_null())
        && let Err(e) = nmstate_check::check(config)
    {
        f.add("networkConfig", e.to_string());
    }
    if let Some(sources) = &c.image_digest_sources {
        rules::digest_sources(&mut f, "imageDigestSources", sources);
    }
    if let Some(p) = &c.proxy {
        rules::proxy(&mut f, "proxy", p);
    }
    coreos_installer_args(&mut f, &c.coreos_installer_args);
    architecture(&mut f, &c.architecture);
    extra_partition_label(&mut f, c.extra_partition_label.as_deref());
    extra_partition_number(&mut f, c.extra_partition_number);
    ignition_config_override(&mut f, &c.ignition_config_override);
    release_registry(&mut f, &c.release_registry);
    live_kernel_args(&mut f, &c.live_kernel_args);
    host_agent(&mut f, c.host_agent.as_deref(), &c.host_agent_image);
    status_url(&mut f, &c.status_url, &c.status_ca);
    if c.host_agent() == HostAgent::Lca {
        lca_versions::check(&mut f, &c.seed_version, &versioned_keys_set(c));
    }
    precache(&mut f, c);
    f.into_parts()
}

fn required(f: &mut Findings, field: &str, value: &str, what: &str) {
    if value.trim().is_empty() {
        f.add(field, format!("required: you must specify {what}"));
    }
}

/// coreos-installer resolves a relative path against lca-cli's working directory (`/`), never what was meant.
fn installation_disk(f: &mut Findings, disk: &str) {
    required(f, "installationDisk", disk, "an installationDisk");
    if !disk.trim().is_empty() && !disk.starts_with('/') {
        f.add(
            "installationDisk",
            format!(
                "invalid value {disk:?}: must be an absolute device path, e.g. /dev/disk/by-id/wwn-0x…"
            ),
        );
    }
}

/// `"0"` or `^([+-])?(\d+)([KMGTP])$`, as the installer checks before lca-cli hands it to sfdisk.
fn extra_partition_start(f: &mut Findings, start: Option<&str>) {
    let field = "extraPartitionStart";
    match start {
        None => {}
        Some("") => f.add(
            field,
            format!(
                "required: partition start sector cannot be empty (omit the key for the default {DEFAULT_EXTRA_PARTITION_START:?})"
            ),
        ),
        Some(s) if is_partition_start(s) => {}
        Some(s) => f.add(
            field,
            format!(
                "invalid value {s:?}: partition start must be '0' or match pattern [+-]?<number>[KMGTP]"
            ),
        ),
    }
}

/// The installer's pattern, and (beyond it) a size that fits in 64 bits of bytes: lca-cli would
/// only fail on an overflow after wiping the disk.
fn is_partition_start(s: &str) -> bool {
    if s == "0" {
        return true;
    }
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let Some(digits) = unsigned.strip_suffix(['K', 'M', 'G', 'T', 'P']) else {
        return false;
    };
    let shift = match unsigned.as_bytes().last() {
        Some(b'K') => 10,
        Some(b'M') => 20,
        Some(b'G') => 30,
        Some(b'T') => 40,
        _ => 50,
    };
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(1u64 << shift))
            .is_some()
}

/// The label goes into sfdisk's script (`name=<label>`) and `/dev/disk/by-partlabel/<label>`, so it is
/// kept to characters neither needs to quote or escape.
fn extra_partition_label(f: &mut Findings, label: Option<&str>) {
    let field = "extraPartitionLabel";
    let Some(label) = label else { return };
    if label.is_empty() {
        f.add(
            field,
            format!(
                "required: partition label cannot be empty (omit the key for the default {DEFAULT_EXTRA_PARTITION_LABEL:?})"
            ),
        );
        return;
    }
    let ok = label.len() <= MAX_GPT_NAME_UNITS
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if !ok {
        f.add(
            field,
            format!(
                "invalid value {label:?}: a GPT partition name of at most {MAX_GPT_NAME_UNITS} characters of A-Z, a-z, 0-9, '.', '_' and '-'"
            ),
        );
    }
}

/// Bounds of a GPT partition number. The installer omits 0 from ibi-configuration.json, so lca-cli would
/// silently use 5; we reject it instead.
fn extra_partition_number(f: &mut Findings, number: Option<u32>) {
    match number {
        Some(0) => f.add(
            "extraPartitionNumber",
            "invalid value 0: partitions are numbered from 1 (omit the key for the default 5)",
        ),
        Some(n @ 1..=RHCOS_PARTITIONS) => f.add(
            "extraPartitionNumber",
            format!(
                "invalid value {n}: RHCOS uses partitions 1-{RHCOS_PARTITIONS} (BIOS-BOOT, EFI-SYSTEM, boot, root); the installation would fail after wiping the disk"
            ),
        ),
        Some(n) if n > MAX_GPT_PARTITION_NUMBER => f.add(
            "extraPartitionNumber",
            format!("invalid value {n}: a GPT disk holds at most {MAX_GPT_PARTITION_NUMBER} partitions"),
        ),
        _ => {}
    }
}

/// Each element is an allowed flag or a value of the installer's character class; beyond the installer,
/// every flag must be followed by its value and every value must follow a flag, because all four flags
/// take one and `coreos-installer install <disk>` accepts no further positional argument.
fn coreos_installer_args(f: &mut Findings, args: &[String]) {
    for (i, arg) in args.iter().enumerate() {
        let field = idx("coreosInstallerArgs", i);
        if arg.starts_with('-') {
            installer_flag(f, &field, arg, args.get(i + 1));
        } else {
            installer_value(f, &field, arg);
            let after_flag = i
                .checked_sub(1)
                .and_then(|p| args.get(p))
                .is_some_and(|p| p.starts_with('-'));
            if !after_flag {
                f.add(
                    field,
                    format!(
                        "value {arg:?} does not follow a flag: coreos-installer install takes no further positional arguments"
                    ),
                );
            }
        }
    }
}

fn installer_flag(f: &mut Findings, field: &str, flag: &str, next: Option<&String>) {
    if !COREOS_INSTALLER_FLAGS.contains(&flag) {
        f.add(
            field,
            format!(
                "found unexpected flag {flag} for coreosInstallerArgs - allowed flags are [{}]",
                COREOS_INSTALLER_FLAGS.join(" ")
            ),
        );
    } else if next.is_none_or(|n| n.starts_with('-')) {
        f.add(
            field,
            format!("flag {flag} has no value: give its value as the next element"),
        );
    }
}

fn installer_value(f: &mut Findings, field: &str, value: &str) {
    let bad: String = value
        .chars()
        .filter(|c| !c.is_ascii_alphanumeric() && !INSTALLER_ARG_PUNCTUATION.contains(*c))
        .collect();
    if value.is_empty() {
        f.add(
            field,
            "empty value: give the flag's value or remove the element",
        );
    } else if !bad.is_empty() {
        f.add(
            field,
            format!(
                "found unexpected chars {bad:?} in value {value:?} - allowed are ASCII letters, digits and {INSTALLER_ARG_PUNCTUATION}"
            ),
        );
    }
}

fn architecture(f: &mut Findings, arch: &str) {
    if !arch.is_empty() && !ARCHITECTURES.contains(&arch) {
        f.add(
            "architecture",
            format!(
                "invalid value {arch:?}: architecture must be one of [{}]",
                ARCHITECTURES.join(" ")
            ),
        );
    }
}

/// Only a parseable Ignition 3.x object is accepted here; the merge over the generated config is done where
/// the config is built.
fn ignition_config_override(f: &mut Findings, text: &str) {
    if !text.trim().is_empty()
        && let Err(e) = check_ignition(text)
    {
        f.add("ignitionConfigOverride", e.to_string());
    }
}

/// Why `ignitionConfigOverride` is refused. serde_json's messages name a position, never the
/// content (which may hold secrets).
#[derive(Debug, thiserror::Error)]
enum BadOverride {
    #[error("not valid JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("must be a JSON object (an Ignition config)")]
    NotObject,
    #[error(
        "ignition.version required: an Ignition config starts with {{\"ignition\": {{\"version\": \"3.2.0\"}}}}"
    )]
    NoVersion,
    #[error("unsupported ignition.version {0:?}: must be 3.x.y (Ignition spec 3)")]
    Version(String),
    /// The Ignition parser's reason, its values hidden.
    #[error("{0}")]
    Spec(String),
}

fn check_ignition(text: &str) -> Result<(), BadOverride> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(BadOverride::NotJson)?;
    if !json.is_object() {
        return Err(BadOverride::NotObject);
    }
    match json.pointer("/ignition/version").and_then(|v| v.as_str()) {
        None => Err(BadOverride::NoVersion),
        // The same parser the build uses: what passes here merges there.
        Some(v) if is_ignition_v3(v) => {
            crate::ignition::parse_override(text)
                .map(drop)
                .map_err(|e| {
                    BadOverride::Spec(super::finding::hide_values(&e.root_cause().to_string()))
                })
        }
        Some(v) => Err(BadOverride::Version(v.to_string())),
    }
}

fn is_ignition_v3(v: &str) -> bool {
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = v.split('.').collect();
    matches!(parts.as_slice(), ["3", minor, patch] if number(minor) && number(patch))
}

/// lca-cli puts `releaseRegistry` in place of the seed's registry at the start of each precached image
/// reference, so it must look like the start of one: `host[:port]`, optionally with a path.
fn release_registry(f: &mut Findings, value: &str) {
    if value.is_empty() {
        return;
    }
    let host_port = value.split('/').next().unwrap_or_default();
    let host_ok = split_host_port(host_port).is_ok_and(|(host, _)| is_registry_host(host));
    if !host_ok || value.contains("://") || value.chars().any(char::is_whitespace) {
        f.add(
            "releaseRegistry",
            format!(
                "invalid value {value:?}: must be a registry host[:port], optionally with a path, and no scheme"
            ),
        );
    }
}

/// Each karg is written space-separated into the ISO's karg slots, so one must be one printable token;
/// `#` pads those slots (coreos-installer strips trailing ones when reading) and starts a GRUB comment.
fn live_kernel_args(f: &mut Findings, kargs: &[String]) {
    for (i, karg) in kargs.iter().enumerate() {
        let field = idx("liveKernelArgs", i);
        if karg.is_empty() || !karg.bytes().all(|b| b.is_ascii_graphic()) {
            f.add(
                field,
                format!(
                    "invalid value {karg:?}: a kernel argument must be one non-empty token of printable ASCII, without whitespace"
                ),
            );
        } else if karg.contains('#') {
            f.add(
                field,
                format!(
                    "invalid value {karg:?}: '#' is not allowed: it pads the ISO's kernel-argument slots and starts a GRUB comment"
                ),
            );
        }
    }
}

/// `hostAgentImage` goes with `hostAgent: ibi` and only with it, so a forgotten `hostAgent` line is not
/// silently an lca-cli installation. The image lands in a unit's `Environment=` line; the pull-spec
/// grammar leaves no character that could break it.
fn host_agent(f: &mut Findings, agent: Option<&str>, image: &str) {
    let agent = agent.unwrap_or(DEFAULT_HOST_AGENT);
    if !HOST_AGENTS.contains(&agent) {
        f.add(
            "hostAgent",
            format!(
                "invalid value {agent:?}: hostAgent must be one of [{}]",
                HOST_AGENTS.join(" ")
            ),
        );
    }
    if image.is_empty() {
        if agent == "ibi" {
            f.add(
                "hostAgentImage",
                format!(
                    "required: you must specify a hostAgentImage (the image holding {HOST_AGENT_BINARY_IN_IMAGE}) with hostAgent: ibi"
                ),
            );
        }
    } else if agent == "lca" {
        f.add(
            "hostAgentImage",
            "only used with hostAgent: ibi (hostAgent is lca, which runs lca-cli from the seed): set hostAgent: ibi or remove hostAgentImage",
        );
    } else if let Err(e) = check_pull_spec(image) {
        f.add("hostAgentImage", format!("invalid value {image:?}: {e}"));
    }
}

/// `statusURL` is where the host posts its reports: an http(s) base URL without credentials (the token
/// travels in a header), query or fragment. `statusCA` goes with an https `statusURL` only.
fn status_url(f: &mut Findings, url: &str, ca: &str) {
    if url.is_empty() {
        if !ca.is_empty() {
            f.add(
                "statusCA",
                "only used with statusURL: set statusURL or remove statusCA",
            );
        }
        return;
    }
    let parsed = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(e) => {
            return f.add(
                "statusURL",
                format!("invalid value {url:?}: not a URL ({e}); give the base URL of `ibi serve`, e.g. https://192.0.2.10:8443"),
            );
        }
    };
    let problem = if !matches!(parsed.scheme(), "https" | "http") {
        Some("must be an https (or http) URL")
    } else if parsed.host_str().is_none_or(str::is_empty) {
        Some("has no host")
    } else if !parsed.username().is_empty() || parsed.password().is_some() {
        Some("must not carry credentials: the host sends its report token in a header")
    } else if parsed.query().is_some() || parsed.fragment().is_some() {
        Some("must not have a query or fragment: reports go to <statusURL>/reports")
    } else {
        None
    };
    if let Some(p) = problem {
        // A URL with credentials is not quoted: they are secrets.
        let shown = if parsed.password().is_some() {
            String::new()
        } else {
            format!(" {url:?}")
        };
        return f.add("statusURL", format!("invalid value{shown}: {p}"));
    }
    if parsed.scheme() == "http" {
        if ca.is_empty() {
            f.warn(
                "statusURL",
                "is plain http: the reports and their token travel unencrypted; prefer https",
            );
        } else {
            f.add(
                "statusCA",
                "only used with an https statusURL: use https or remove statusCA",
            );
        }
    }
}

/// Whether `statusCA` is the PEM itself rather than a path.
fn is_inline_pem(value: &str) -> bool {
    value.trim_start().starts_with("-----BEGIN")
}

/// `statusCA` as PEM text: inline, or read from a path relative to `dir`; every certificate must parse.
fn status_ca_pem(f: &mut Findings, dir: &Path, value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    let pem = if is_inline_pem(value) {
        value.to_string()
    } else {
        let path = dir.join(value);
        match crate::util::fs::read_input_file(&path, 1 << 20) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                f.add("statusCA", format!("{:#}", anyhow::Error::new(e)));
                return None;
            }
        }
    };
    match openssl::x509::X509::stack_from_pem(pem.as_bytes()) {
        Ok(certs) if !certs.is_empty() => Some(pem),
        _ => {
            f.add(
                "statusCA",
                "holds no PEM certificate: give the CA of ibi serve's certificate, as a file path or inline PEM",
            );
            None
        }
    }
}

fn precache(f: &mut Findings, c: &InstallationConfig) {
    if c.precache_disabled == Some(true) && c.precache_best_effort.is_some() {
        f.warn(
            "precacheBestEffort",
            "has no effect: precacheDisabled is true, so lca-cli ibi does not precache",
        );
    }
}

/// Everything `create image` reads from its directory, decoded and validated.
#[derive(Debug, Clone)]
pub struct InstallationInputs {
    pub config: InstallationConfig,
    /// The bytes of `DIR/post.sh`, when present.
    pub post_sh: Option<Vec<u8>>,
    /// `statusCA` as PEM (read from its file when it names one), when set.
    pub status_ca_pem: Option<String>,
    /// Non-fatal findings, rendered like findings (`file: field: message`).
    pub warnings: Vec<String>,
}

/// Reads and validates `dir/image-based-installation-config.yaml` and the optional `dir/post.sh`.
///
/// Findings from both are returned together as one [`ValidationError`] (downcast it from the
/// `anyhow::Error`). Other I/O errors name the path.
pub fn load_installation_inputs(dir: &Path) -> anyhow::Result<InstallationInputs> {
    let mut findings = Vec::new();
    let mut warnings = Vec::new();
    let config = load_input(
        dir,
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        " (`ibi create image-config-template` writes a commented one)",
        parse_installation_config,
        validate_installation_config,
        (&mut findings, &mut warnings),
    )?;
    let post_sh = read_post_sh(&dir.join(POST_SH_FILE))?;
    if let Some(content) = &post_sh {
        let (f, w) = check_post_sh(content);
        findings.extend(f);
        warnings.extend(w);
    }
    let https = |c: &&InstallationConfig| {
        reqwest::Url::parse(&c.status_url).is_ok_and(|u| u.scheme() == "https")
    };
    let status_ca_pem = config.as_ref().filter(https).and_then(|c| {
        let mut f = Findings::new(IMAGE_BASED_INSTALLATION_CONFIG_FILE);
        let pem = status_ca_pem(&mut f, dir, &c.status_ca);
        findings.extend(f.into_vec());
        pem
    });
    match config {
        Some(config) if findings.is_empty() => Ok(InstallationInputs {
            config,
            post_sh: post_sh.and_then(PostSh::into_bytes),
            status_ca_pem,
            warnings,
        }),
        _ => Err(ValidationError { findings }.into()),
    }
}

/// What was found at `post.sh`: its bytes, or something that is not a regular file.
#[derive(Debug)]
enum PostSh {
    File(Vec<u8>),
    NotAFile,
    BrokenLink,
}

impl PostSh {
    fn into_bytes(self) -> Option<Vec<u8>> {
        match self {
            PostSh::File(b) => Some(b),
            PostSh::NotAFile | PostSh::BrokenLink => None,
        }
    }
}

/// Reads `post.sh`, following a symbolic link; `None` when there is nothing at the path.
fn read_post_sh(path: &Path) -> anyhow::Result<Option<PostSh>> {
    let reading = || format!("reading {}", path.display());
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => std::fs::read(path)
            .map(|b| Some(PostSh::File(b)))
            .with_context(reading),
        Ok(_) => Ok(Some(PostSh::NotAFile)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(std::fs::symlink_metadata(path)
            .ok()
            .map(|_| PostSh::BrokenLink)),
        Err(e) => Err(e).with_context(reading),
    }
}

/// The rules for `post.sh`. lca-cli runs it with `bash -c var/tmp/post.sh`: a script without `#!` still
/// runs (bash falls back to running it itself), so that is only a warning; a `#!` line ending in CR names an
/// interpreter that does not exist, and an empty file is almost surely a failed copy, so those are
/// findings, as is anything that is not a regular file.
fn check_post_sh(content: &PostSh) -> (Vec<Finding>, Vec<String>) {
    let mut f = Findings::new(POST_SH_FILE);
    match content {
        PostSh::NotAFile => f.file_error("must be a regular file (the post-deployment script)"),
        PostSh::BrokenLink => f.file_error("is a symbolic link to nothing"),
        PostSh::File(b) if b.is_empty() => f.file_error(
            "is empty: remove it, or give the script lca-cli ibi should run after restoring the seed",
        ),
        PostSh::File(b) => post_sh_shebang(&mut f, b),
    }
    f.into_parts()
}

fn post_sh_shebang(f: &mut Findings, script: &[u8]) {
    let first_line = script.split(|b| *b == b'\n').next().unwrap_or_default();
    if !first_line.starts_with(b"#!") {
        f.warn(
            "",
            "has no #! line: lca-cli ibi runs it with `bash -c`, so it runs as a bash script",
        );
    } else if first_line.ends_with(b"\r") {
        f.file_error(
            "the #! line ends with a carriage return (CRLF line endings): the interpreter would not be found",
        );
    }
}

/// The keys of `lca_versions`' table this config sets.
fn versioned_keys_set(c: &InstallationConfig) -> Vec<&'static str> {
    let mut set = Vec::new();
    if !c.release_registry.is_empty() {
        set.push("releaseRegistry");
    }
    if !c.coreos_installer_args.is_empty() {
        set.push("coreosInstallerArgs");
    }
    set
}

#[cfg(test)]
mod tests;
