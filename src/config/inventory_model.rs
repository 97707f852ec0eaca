//! The site inventory's entries, as `create config-image --sites`, `ibi deploy` and `create
//! hub-manifests` read them, whichever form the file has (YAML: [`super::inventory`], CSV:
//! [`super::inventory_csv`]): each with where it is in the file, so a finding names its line.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_yaml_ng::Value;

use super::inventory_bmc::{BmcEntry, csv_column_of};
use crate::util::yaml_lines::YamlLines;

/// The inventory file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Inventory {
    pub sites: Vec<SiteEntry>,
}

/// One site. Unset overrides keep the shared base's value.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SiteEntry {
    /// The directory under `BASE/sites/`.
    pub name: String,
    /// image-based-config `hostname` (required: two hosts of a fleet never share one).
    pub hostname: String,
    /// install-config `metadata.name`.
    pub cluster_name: Option<String>,
    /// install-config `baseDomain`.
    pub base_domain: Option<String>,
    /// install-config `sshKey`.
    pub ssh_key: Option<String>,
    /// install-config `networking.machineNetwork[*].cidr`.
    pub machine_network: Option<Vec<String>>,
    /// One static NIC, rendered as image-based-config `networkConfig`.
    pub nic: Option<Nic>,
    /// image-based-config `networkConfig`, a whole nmstate document.
    pub network_config: Option<Value>,
    #[serde(rename = "additionalNTPSources")]
    pub additional_ntp_sources: Option<Vec<String>>,
    pub release_registry: Option<String>,
    /// Merged over the base's `nodeLabels` (a site's value wins).
    pub node_labels: BTreeMap<String, String>,
    #[serde(rename = "cluster_id")]
    pub cluster_id: Option<String>,
    #[serde(rename = "infra_id")]
    pub infra_id: Option<String>,
    /// The host's BMC, for `ibi deploy` ([`super::inventory_bmc`]) and the hub's BareMetalHost.
    pub bmc: Option<BmcEntry>,
    /// The MAC address of the NIC the host boots from (the hub's `bootMACAddress`; only
    /// `create hub-manifests` needs it).
    #[serde(rename = "bootMACAddress")]
    pub boot_mac_address: Option<String>,
    /// The hub's `bootMode`: one of [`BOOT_MODES`] (the hub's default is `UEFI`).
    pub boot_mode: Option<String>,
    /// The hub's `rootDeviceHints` (metal3's keys).
    pub root_device_hints: Option<RootDeviceHints>,
    /// Where the entry is in the inventory; set by the parser, not read from the file.
    #[serde(skip)]
    pub at: Locator,
    /// The lines of a YAML inventory's keys (shared by its sites); set by the parser.
    #[serde(skip)]
    pub lines: Option<Arc<YamlLines>>,
}

/// The common case of one statically addressed NIC.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Nic {
    pub interface: String,
    pub mac_address: Option<String>,
    /// `ip/prefix`, IPv4 or IPv6.
    pub address: String,
    /// Default route next hop, same family as `address`.
    pub gateway: Option<String>,
    pub dns: Vec<String>,
}

/// The hub's `bootMode` values (metal3).
pub const BOOT_MODES: &[&str] = &["UEFI", "UEFISecureBoot", "legacy"];

/// metal3's root device hints, as a BareMetalHost (and a ClusterInstance node) takes them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RootDeviceHints {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hctl: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_size_gigabytes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wwn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wwn_with_extension: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wwn_vendor_extension: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rotational: Option<bool>,
}

/// Where a site entry is: its index in a YAML `sites` list or its line in a CSV file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Locator {
    #[default]
    Unknown,
    Yaml(usize),
    Csv(usize),
}

impl SiteEntry {
    /// The finding field for `key` (YAML key path, `nic.address`): `sites[2].nic.address (site a19)`
    /// or, in CSV, `line 4 column address (site a19)`.
    pub fn field(&self, key: &str) -> String {
        let at = match self.at {
            Locator::Yaml(i) => format!("sites[{i}].{key}"),
            Locator::Csv(line) => {
                let column = key
                    .strip_prefix("nic.")
                    .map(str::to_string)
                    .or_else(|| csv_column_of(key))
                    .unwrap_or_else(|| key.to_string());
                format!("line {line} column {column}")
            }
            Locator::Unknown => key.to_string(),
        };
        if self.name.is_empty() {
            at
        } else {
            format!("{at} (site {})", self.name)
        }
    }

    /// The YAML inventory line of `key` (YAML key path, `nic.address`): its own line when the entry
    /// has it, else that of the nearest enclosing key, else the entry's. `None` in CSV, whose
    /// [`SiteEntry::field`] already names the line.
    pub fn line(&self, key: &str) -> Option<usize> {
        let Locator::Yaml(i) = self.at else {
            return None;
        };
        let lines = self.lines.as_deref()?;
        let mut path = format!("sites[{i}].{key}");
        loop {
            if let Some(line) = lines.line(&path) {
                return Some(line);
            }
            match path.rfind(['.', '[']) {
                Some(cut) => path.truncate(cut),
                None => return None,
            }
        }
    }
}

impl SiteEntry {
    /// This site's BMC password, when its `bmc:` names one ([`BmcEntry::password`]); errors name
    /// `inventory`, the site's field and the file or variable.
    pub fn bmc_password(
        &self,
        inventory: &std::path::Path,
    ) -> anyhow::Result<Option<crate::util::secret::Secret>> {
        match &self.bmc {
            Some(bmc) => bmc.password(inventory, &|k| self.bmc_field(inventory, k)),
            None => Ok(None),
        }
    }

    /// The PEM bytes of this site's `bmc.caFile`, when it names one ([`BmcEntry::ca`]).
    pub fn bmc_ca(&self, inventory: &std::path::Path) -> anyhow::Result<Option<Vec<u8>>> {
        match &self.bmc {
            Some(bmc) => bmc.ca(inventory, &|k| self.bmc_field(inventory, k)),
            None => Ok(None),
        }
    }

    /// `INVENTORY:LINE: sites[i].bmc.KEY (site s)` (no line in CSV, whose field names it).
    fn bmc_field(&self, inventory: &std::path::Path, key: &str) -> String {
        self.located(inventory, &format!("bmc.{key}"))
    }

    /// `INVENTORY:LINE: sites[i].KEY (site s)`: the key's line, or its nearest parent's (the
    /// site's entry for a key it lacks); no line in CSV, whose field names it.
    pub fn located(&self, inventory: &std::path::Path, key: &str) -> String {
        match self.line(key) {
            Some(line) => format!("{}:{line}: {}", inventory.display(), self.field(key)),
            None => format!("{}: {}", inventory.display(), self.field(key)),
        }
    }
}
