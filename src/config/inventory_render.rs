//! A site's effective input files in the batch mode: the shared base (`BASE/install-config.yaml` and the
//! optional `BASE/image-based-config.yaml`) with one inventory entry's overrides applied, rendered as
//! the YAML text the single-site path decodes and validates. The same text is what the batch
//! fingerprints to tell a changed site from an unchanged one.
//!
//! Overrides work on the YAML documents, not on the typed models, so every base key the site does not
//! override passes through untouched, and the rendered file is what a user could have written.

use std::path::Path;

use anyhow::Context;
use serde_json::json;
use serde_yaml_ng::{Mapping, Value};

use super::finding::Findings;
use super::inventory::{Nic, SiteEntry, nic_address};
use super::net::Cidr;
use super::{
    IMAGE_BASED_CONFIG_FILE, INSTALL_CONFIG_FILE, ImageBasedConfig, InstallConfig,
    parse_image_based_config, parse_install_config,
};
use crate::util::finding::{Finding, ValidationError};
use crate::util::yaml_lines::YamlLines;

/// The shared base every site starts from, decoded strictly once.
#[derive(Debug, Clone)]
pub struct FleetBase {
    install_config: Mapping,
    image_based_config: Mapping,
    /// How findings name the base's files (their paths when read from a directory), and where
    /// their keys are: a site's finding about a value it does not set names the base's line.
    pub(super) install_config_file: BaseFile,
    pub(super) image_based_config_file: BaseFile,
}

/// One file of the base: its shown name and the lines of its keys.
#[derive(Debug, Clone, Default)]
pub(super) struct BaseFile {
    pub(super) name: String,
    pub(super) lines: YamlLines,
}

/// A site's rendered `install-config.yaml` and `image-based-config.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteFiles {
    pub install_config: String,
    pub image_based_config: String,
}

/// Reads `dir/install-config.yaml` (required) and `dir/image-based-config.yaml` (optional).
pub fn load_fleet_base(dir: &Path) -> anyhow::Result<FleetBase> {
    let ic_path = dir.join(INSTALL_CONFIG_FILE);
    let ic = match super::input::read_document(&ic_path) {
        Ok(Some(t)) => t,
        Ok(None) => {
            return Err(super::input::file_finding(
                INSTALL_CONFIG_FILE,
                format!(
                    "file not found: {} is required (the base every site starts from)",
                    ic_path.display()
                ),
            ));
        }
        Err(e) => {
            return Err(super::input::document_error(
                &ic_path,
                INSTALL_CONFIG_FILE,
                e,
            ));
        }
    };
    let ibc_path = dir.join(IMAGE_BASED_CONFIG_FILE);
    let ibc = super::input::read_document(&ibc_path)
        .map_err(|e| super::input::document_error(&ibc_path, IMAGE_BASED_CONFIG_FILE, e))?;
    let names = [&ic_path, &ibc_path].map(|p| p.display().to_string());
    Ok(FleetBase::parse(&ic, ibc.as_deref())
        .map_err(|mut e| {
            // The base's findings name the files where they are, not the names a site's files take.
            for f in &mut e.findings {
                if f.file == INSTALL_CONFIG_FILE {
                    f.file = names[0].clone();
                } else if f.file == IMAGE_BASED_CONFIG_FILE {
                    f.file = names[1].clone();
                }
            }
            e
        })?
        .named(&names[0], &names[1]))
}

impl FleetBase {
    /// Decodes the base strictly (unknown keys and type errors are findings). Values are not validated
    /// here: a site may override them, so each site's effective files are validated instead.
    pub fn parse(
        install_config: &str,
        image_based_config: Option<&str>,
    ) -> Result<Self, ValidationError> {
        let mut findings = Vec::new();
        let ic = parse_install_config(install_config)
            .map_err(|e| findings.extend(e.findings))
            .ok();
        let ibc = image_based_config.map(|text| {
            parse_image_based_config(text)
                .map_err(|e| findings.extend(e.findings))
                .ok()
        });
        if let Some(Some(ibc)) = &ibc {
            let mut f = Findings::new(IMAGE_BASED_CONFIG_FILE);
            for (key, value) in [("cluster_id", &ibc.cluster_id), ("infra_id", &ibc.infra_id)] {
                if !value.is_empty() {
                    f.add(
                        key,
                        "must not be in the shared base: every site is its own cluster (set it per site in the inventory)",
                    );
                }
            }
            findings.extend(f.into_vec());
        }
        if ic.is_none() || matches!(ibc, Some(None)) || !findings.is_empty() {
            return Err(ValidationError { findings });
        }
        // Both decoded as typed structs, so both are mappings (or, for the optional file, empty).
        let as_mapping = |text: &str| match serde_yaml_ng::from_str::<Value>(text) {
            Ok(Value::Mapping(m)) => m,
            _ => Mapping::new(),
        };
        let file = |name: &str, text: &str| BaseFile {
            name: name.to_string(),
            lines: YamlLines::parse(text),
        };
        Ok(FleetBase {
            install_config: as_mapping(install_config),
            image_based_config: image_based_config.map(as_mapping).unwrap_or_default(),
            install_config_file: file(INSTALL_CONFIG_FILE, install_config),
            image_based_config_file: file(
                IMAGE_BASED_CONFIG_FILE,
                image_based_config.unwrap_or_default(),
            ),
        })
    }

    /// The base with its files shown as `install_config` and `image_based_config` in findings.
    fn named(mut self, install_config: &str, image_based_config: &str) -> Self {
        self.install_config_file.name = install_config.to_string();
        self.image_based_config_file.name = image_based_config.to_string();
        self
    }

    /// The base install-config.yaml, typed (it decoded strictly in [`FleetBase::parse`]): the pull
    /// secret, mirrors and trust bundle every site shares, which `--seed` reads the seed with.
    pub fn install_config(&self) -> anyhow::Result<InstallConfig> {
        let text = serde_yaml_ng::to_string(&self.install_config)
            .context("rendering the base install-config.yaml")?;
        Ok(parse_install_config(&text)?)
    }

    /// The site's cluster API name, `<clusterName>.<baseDomain>` (its `api.` and `*.apps.` names
    /// hang below it), from the entry's overrides or the base; `None` when neither sets both.
    pub fn api_name(&self, site: &SiteEntry) -> Option<String> {
        let base = |path: &[&str]| {
            path.iter()
                .try_fold(&Value::Mapping(self.install_config.clone()), |v, k| {
                    v.get(*k)
                })
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let name = site
            .cluster_name
            .clone()
            .or_else(|| base(&["metadata", "name"]))?;
        let domain = site.base_domain.clone().or_else(|| base(&["baseDomain"]))?;
        Some(format!("{name}.{domain}").to_ascii_lowercase())
    }

    /// The site's effective files: the base with the entry's overrides.
    pub fn render(&self, site: &SiteEntry) -> anyhow::Result<SiteFiles> {
        let mut ic = self.install_config.clone();
        let text = |s: &str| Value::String(s.to_string());
        if let Some(name) = &site.cluster_name {
            set(&mut ic, &["metadata", "name"], text(name));
        }
        if let Some(domain) = &site.base_domain {
            set(&mut ic, &["baseDomain"], text(domain));
        }
        if let Some(key) = &site.ssh_key {
            set(&mut ic, &["sshKey"], text(key));
        }
        if let Some(cidrs) = &site.machine_network {
            let list = cidrs
                .iter()
                .map(|c| Value::Mapping(Mapping::from_iter([(text("cidr"), text(c))])))
                .collect();
            set(
                &mut ic,
                &["networking", "machineNetwork"],
                Value::Sequence(list),
            );
            // The deprecated spelling would contradict the override.
            if let Some(Value::Mapping(n)) = ic.get_mut("networking") {
                n.remove("machineCIDR");
            }
        }
        let ibc = self.render_image_based_config(site)?;
        Ok(SiteFiles {
            install_config: serde_yaml_ng::to_string(&ic)
                .context("rendering the site's install-config.yaml")?,
            image_based_config: serde_yaml_ng::to_string(&ibc)
                .context("rendering the site's image-based-config.yaml")?,
        })
    }

    fn render_image_based_config(&self, site: &SiteEntry) -> anyhow::Result<Mapping> {
        let mut ibc = self.image_based_config.clone();
        let text = |s: &str| Value::String(s.to_string());
        set(&mut ibc, &["hostname"], text(&site.hostname));
        if let Some(nic) = &site.nic {
            set(&mut ibc, &["networkConfig"], nic_network_config(nic)?);
        } else if let Some(nc) = &site.network_config {
            set(&mut ibc, &["networkConfig"], nc.clone());
        }
        if let Some(sources) = &site.additional_ntp_sources {
            let list = sources.iter().map(|s| text(s)).collect();
            set(&mut ibc, &["additionalNTPSources"], Value::Sequence(list));
        }
        if let Some(registry) = &site.release_registry {
            set(&mut ibc, &["releaseRegistry"], text(registry));
        }
        for (k, v) in &site.node_labels {
            set(&mut ibc, &["nodeLabels", k], text(v));
        }
        for (key, value) in [
            ("cluster_id", &site.cluster_id),
            ("infra_id", &site.infra_id),
        ] {
            if let Some(v) = value {
                set(&mut ibc, &[key], text(v));
            }
        }
        Ok(ibc)
    }
}

/// Sets `path` in `doc`, creating (or replacing non-mapping) intermediate mappings.
fn set(doc: &mut Mapping, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = doc;
    for key in parents {
        let slot = cur
            .entry(Value::String((*key).to_string()))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        if !slot.is_mapping() {
            *slot = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(m) = slot else { return };
        cur = m;
    }
    cur.insert(Value::String((*last).to_string()), value);
}

/// The nmstate document for one static NIC: the address, the other IP family off, a default route
/// through the gateway and the DNS servers, when given. The inventory check has vetted the fields.
fn nic_network_config(nic: &Nic) -> anyhow::Result<Value> {
    let addr = nic_address(nic).map_err(|e| anyhow::anyhow!("nic.address: {e}"))?;
    let (family, other, default_route) = if addr.addr.is_ipv4() {
        ("ipv4", "ipv6", "0.0.0.0/0")
    } else {
        ("ipv6", "ipv4", "::/0")
    };
    let mut iface = json!({
        "name": nic.interface,
        "type": "ethernet",
        "state": "up",
    });
    if let Some(mac) = &nic.mac_address {
        iface["mac-address"] = json!(mac);
    }
    let mut ip = json!({
        "enabled": true,
        "dhcp": false,
        "address": [{"ip": addr.addr.to_string(), "prefix-length": addr.prefix}],
    });
    if family == "ipv6" {
        ip["autoconf"] = json!(false);
    }
    iface[family] = ip;
    iface[other] = json!({"enabled": false});
    let mut doc = json!({ "interfaces": [iface] });
    if !nic.dns.is_empty() {
        doc["dns-resolver"] = json!({"config": {"server": nic.dns}});
    }
    if let Some(gw) = &nic.gateway {
        doc["routes"] = json!({"config": [{
            "destination": default_route,
            "next-hop-address": gw,
            "next-hop-interface": nic.interface,
        }]});
    }
    serde_yaml_ng::to_value(&doc).context("rendering the NIC as nmstate")
}

/// Rules that need the site's effective inputs and the inventory entry together: a NIC's address must
/// be inside a machine network (OVN-Kubernetes picks the node IP from it). Findings name the inventory.
pub fn check_site(
    inventory_file: &str,
    site: &SiteEntry,
    install_config: &InstallConfig,
    image_based_config: &ImageBasedConfig,
) -> Vec<Finding> {
    let mut f = Findings::new(inventory_file);
    let Some(Ok(addr)) = site.nic.as_ref().map(nic_address) else {
        // A full networkConfig (or none): the general rule, naming the files the site renders to.
        return super::site::cross_check(install_config, image_based_config);
    };
    let cidrs = install_config.machine_network_cidrs();
    let host = Cidr {
        addr: addr.addr,
        prefix: if addr.addr.is_ipv4() { 32 } else { 128 },
    };
    let inside = cidrs
        .iter()
        .filter_map(|c| Cidr::parse(c).ok())
        .any(|c| c.overlaps(&host));
    if !inside {
        f.add_at(
            site.field("nic.address"),
            site.line("nic.address"),
            format!(
                "{} is outside every networking.machineNetwork CIDR ({}): set machineNetwork for this site",
                addr.addr,
                if cidrs.is_empty() { "none".to_string() } else { cidrs.join(", ") }
            ),
        );
    }
    f.into_vec()
}
