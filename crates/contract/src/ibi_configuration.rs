//! `ibi-configuration.json`, the contract between the installation ISO and the program that installs the
//! host from it: `create image` writes it into the ISO's Ignition config at [`IBI_CONFIGURATION_PATH`];
//! on the live system `lca-cli ibi -f` (lifecycle-agent's `IBIPrepareConfig`) or `ibi agent install` reads
//! it. Here: where it and its companions live, its keys, the defaults lca-cli applies, the GPT limits the
//! extra partition must respect, the stateroot it names, and the exact bytes the installer writes.

use anyhow::{Context, Result};
use serde::Serialize;

/// `lca-cli ibi -f` reads it (the unit passes it as `IBI_CONFIGURATION_FILE`).
pub const IBI_CONFIGURATION_PATH: &str = "/var/tmp/ibi-configuration.json";
/// Auth file of the script's `podman create` (`PULL_SECRET_FILE`) and of lca-cli's pulls, which open
/// it as `var/tmp/pull-secret.json` relative to CWD `/`.
pub const PULL_SECRET_PATH: &str = "/var/tmp/pull-secret.json";
/// Run by lca-cli (`bash -c var/tmp/post.sh`, relative to CWD `/`) after precache; needs the exec bit.
pub const POST_SCRIPT_PATH: &str = "/var/tmp/post.sh";
/// post.sh needs the exec bit: lca-cli runs it as `bash -c var/tmp/post.sh`, i.e. executes the path.
pub const POST_SCRIPT_MODE: u32 = 0o755;
/// The installer's script on the live ISO that installs RHCOS and runs `lca-cli ibi` (`hostAgent: lca`).
pub const INSTALL_SCRIPT_PATH: &str = "/usr/local/bin/install-rhcos-and-restore-seed.sh";

/// Every key of `IBIPrepareConfig`; readers ignore any other key, as Go's decoder does.
pub const KEYS: [&str; 13] = [
    "seedImage",
    "seedVersion",
    "installationDisk",
    "releaseRegistry",
    "precacheBestEffort",
    "precacheDisabled",
    "shutdown",
    "useContainersFolder",
    "extraPartitionStart",
    "extraPartitionLabel",
    "extraPartitionNumber",
    "skipDiskCleanup",
    "coreosInstallerArgs",
];

/// Default `extraPartitionStart` (lca-cli `SetDefaultValues`): the last 40 GiB of the disk.
pub const DEFAULT_EXTRA_PARTITION_START: &str = "-40G";
/// Default `extraPartitionLabel` since MGMT-19292; it must match the seed's `var-lib-containers.mount`.
pub const DEFAULT_EXTRA_PARTITION_LABEL: &str = "var-lib-containers";
/// Default `extraPartitionNumber` (lca-cli `SetDefaultValues`).
pub const DEFAULT_EXTRA_PARTITION_NUMBER: u32 = 5;
/// RHCOS's own partitions are 1–4 (BIOS-BOOT, EFI-SYSTEM, boot, root).
pub const RHCOS_PARTITIONS: u32 = 4;
/// The extra partition must come after RHCOS's.
pub const FIRST_FREE_PARTITION_NUMBER: u32 = RHCOS_PARTITIONS + 1;
/// A GPT entry array has room for 128 partitions.
pub const MAX_GPT_PARTITION_NUMBER: u32 = 128;
/// A GPT partition name is 36 UTF-16 code units.
pub const MAX_GPT_NAME_UNITS: usize = 36;
/// lca-cli (`internal/prep`) names the stateroot `rhcos_<seedVersion with - turned into _>`.
const STATEROOT_PREFIX: &str = "rhcos_";

/// `rhcos_` + `seed_version` with `-` turned into `_`, as lca-cli names the stateroot.
pub fn stateroot_name(seed_version: &str) -> String {
    format!("{STATEROOT_PREFIX}{}", seed_version.replace('-', "_"))
}

/// `ibi-configuration.json` as lca-cli's `IBIPrepareConfig` reads it; field order and omission rules
/// are the installer's `ibiConfigurationFile`, plus the precache keys (which lca-cli honours and the
/// installer drops) after them, only when set.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IbiConfigurationFile<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    pub extra_partition_label: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    pub extra_partition_number: u32,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub extra_partition_start: &'a str,
    pub installation_disk: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub release_registry: &'a str,
    pub seed_image: &'a str,
    pub seed_version: &'a str,
    #[serde(skip_serializing_if = "is_false")]
    pub shutdown: bool,
    #[serde(skip_serializing_if = "is_false")]
    pub skip_disk_cleanup: bool,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub coreos_installer_args: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precache_best_effort: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precache_disabled: Option<bool>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !b
}

/// The file's bytes: compact JSON with Go's HTML escaping, plus the template's newline.
pub fn encode(file: &IbiConfigurationFile<'_>) -> Result<Vec<u8>> {
    let json = serde_json::to_string(file).context("serializing ibi-configuration.json")?;
    Ok(format!("{}\n", go_json_escape(&json)).into_bytes())
}

/// Go's `json.Marshal` escapes `<`, `>`, `&`, U+2028 and U+2029 inside strings; serde_json does not.
/// None of them can appear outside a string in JSON, so replacing them everywhere is safe.
fn go_json_escape(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stateroot_names() {
        assert_eq!(stateroot_name("4.16.0-rc.1"), "rhcos_4.16.0_rc.1");
        assert_eq!(stateroot_name("4.16.0"), "rhcos_4.16.0");
        assert_eq!(stateroot_name("4.17.0-ec.2-x"), "rhcos_4.17.0_ec.2_x");
    }
}
