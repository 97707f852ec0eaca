//! The site inventory of `create config-image --sites`: one entry per site with its name, host name,
//! network and its overrides of the shared base (docs/batch.md). YAML (`sites: [...]`), or CSV (one row
//! per site under a header) for a file named `*.csv`.
//!
//! This module decodes the inventory and runs the checks that need nothing but the inventory: names
//! usable as directory names and unique, the one-NIC shorthand well formed. A finding names the file,
//! the entry (`sites[2]` or `line 4`), the site and the key. Turning an entry into the site's effective
//! input files, and the rules that need them, is [`super::inventory_render`]; a site's optional `bmc:`
//! (for `ibi deploy`) is [`super::inventory_bmc`]. The entries' types are [`super::inventory_model`];
//! the CSV form is decoded in [`super::inventory_csv`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use serde_yaml_ng::{Mapping, Value};

use super::finding::{Findings, hide_values};
use super::inventory_bmc::check_bmc;
pub use super::inventory_model::{BOOT_MODES, Inventory, Locator, Nic, RootDeviceHints, SiteEntry};
use super::net::{Cidr, CidrError, check_network_cidr};
use crate::util::finding::{Finding, ValidationError};
use crate::util::yaml_lines::YamlLines;

/// Longest site name: a file name on every Linux filesystem is at most 255 bytes, and the name also
/// shows in the summary; 63 is plenty and keeps it a DNS-label-sized token.
const SITE_NAME_MAX: usize = 63;
/// Linux's IFNAMSIZ less the terminating NUL.
const INTERFACE_NAME_MAX: usize = 15;

/// Records a finding about `key` of `site`, naming the entry and its line.
fn site_finding(f: &mut Findings, site: &SiteEntry, key: &str, message: impl Into<String>) {
    f.add_at(site.field(key), site.line(key), message);
}

/// Reads and checks an inventory (CSV when the file name ends in `.csv`, YAML otherwise), returning
/// the sites that decoded along with the findings, so the caller can check those sites too and
/// report everything at once; I/O errors name the path. An inventory with no sites to go through
/// is an error (a [`ValidationError`] for findings).
pub fn load_inventory_with_findings(path: &Path) -> anyhow::Result<(Inventory, Vec<Finding>)> {
    let text = super::input::read_document_or_finding(path, &path.display().to_string())?;
    let csv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    Ok(decode_and_check(&path.display().to_string(), &text, csv)?)
}

/// Decodes and checks an inventory; `file` names it in findings.
#[cfg(test)]
pub fn parse_inventory(file: &str, text: &str, csv: bool) -> Result<Inventory, ValidationError> {
    let (inventory, findings) = decode_and_check(file, text, csv)?;
    if findings.is_empty() {
        Ok(inventory)
    } else {
        Err(ValidationError { findings })
    }
}

/// The sites that decoded and every finding; an error when nothing decodes.
fn decode_and_check(
    file: &str,
    text: &str,
    csv: bool,
) -> Result<(Inventory, Vec<Finding>), ValidationError> {
    let (mut inventory, mut findings) = if csv {
        (
            Inventory {
                sites: super::inventory_csv::parse_csv(file, text)?,
            },
            Vec::new(),
        )
    } else {
        let (mut inv, findings) = decode_yaml(file, text)?;
        let lines = Arc::new(YamlLines::parse(text));
        for (i, site) in inv.sites.iter_mut().enumerate() {
            site.at = Locator::Yaml(i);
            site.lines = Some(Arc::clone(&lines));
        }
        (inv, findings)
    };
    inventory.sites.shrink_to_fit();
    findings.extend(check(file, &inventory));
    Ok((inventory, findings))
}

/// Strict decoding straight into the model. Unlike the other inputs there is no first pass through
/// a generic YAML value (as `decode_strict` makes): for a fleet of thousands of sites that pass would
/// be the run's peak memory. Only when that fails is the inventory decoded site by site and key by
/// key ([`decode_leniently`]), so one bad key hides none of the other findings.
fn decode_yaml(file: &str, text: &str) -> Result<(Inventory, Vec<Finding>), ValidationError> {
    let blank = text
        .lines()
        .map(str::trim)
        .all(|l| l.is_empty() || l.starts_with('#') || l == "---");
    let fail = |message: String| {
        let mut f = Findings::new(file);
        f.file_error(message);
        ValidationError {
            findings: f.into_vec(),
        }
    };
    if blank {
        return Err(fail("the file is empty".into()));
    }
    let strict = match serde_yaml_ng::from_str(text) {
        Ok(inv) => return Ok((inv, Vec::new())),
        Err(e) => fail(hide_values(&e.to_string())),
    };
    match serde_yaml_ng::from_str::<Value>(text) {
        Ok(Value::Mapping(doc)) => decode_leniently(file, text, &doc).ok_or(strict),
        _ => Err(strict),
    }
}

/// The inventory with every key that does not decode left out, and a finding for each (naming its
/// site and line); `None` when there is no `sites` list to go through.
fn decode_leniently(file: &str, text: &str, doc: &Mapping) -> Option<(Inventory, Vec<Finding>)> {
    let lines = YamlLines::parse(text);
    let mut f = Findings::new(file);
    for key in doc.keys().filter(|k| k.as_str() != Some("sites")) {
        let key = key.as_str().unwrap_or("?");
        f.add_at(
            key,
            lines.line(key),
            format!("unknown field `{key}`, expected `sites`"),
        );
    }
    let entries = match doc.get("sites") {
        Some(Value::Sequence(entries)) => entries,
        Some(Value::Null) | None => return Some((Inventory::default(), f.into_vec())),
        Some(_) => return None,
    };
    let sites = entries
        .iter()
        .enumerate()
        .map(|(i, entry)| decode_site(&mut f, &lines, i, entry))
        .collect();
    Some((Inventory { sites }, f.into_vec()))
}

/// One `sites[i]` entry, keeping the keys that decode; each that does not is a finding.
fn decode_site(f: &mut Findings, lines: &YamlLines, i: usize, entry: &Value) -> SiteEntry {
    let at = format!("sites[{i}]");
    let Value::Mapping(map) = entry else {
        f.add_at(&at, lines.line(&at), "must be a mapping of the site's keys");
        return SiteEntry::default();
    };
    let name = map.get("name").and_then(Value::as_str).unwrap_or_default();
    let shown = |key: &str| match name {
        "" => format!("{at}.{key}"),
        n => format!("{at}.{key} (site {n})"),
    };
    let mut kept = Mapping::new();
    for (k, v) in map {
        // A map of keys of its own (metal3's hints): each bad key is its own finding.
        if k.as_str() == Some(ROOT_DEVICE_HINTS_KEY)
            && let Value::Mapping(hints) = v
        {
            let good = decode_hints(f, lines, &at, &shown, hints);
            // All bad: their findings say so; no "empty" finding on top of them.
            if !good.is_empty() || hints.is_empty() {
                kept.insert(k.clone(), Value::Mapping(good));
            }
            continue;
        }
        let one = Mapping::from_iter([(k.clone(), v.clone())]);
        match serde_yaml_ng::from_value::<SiteEntry>(Value::Mapping(one)) {
            Ok(_) => {
                kept.insert(k.clone(), v.clone());
            }
            Err(e) => {
                let key = k.as_str().unwrap_or("?");
                let message = hide_values(&e.to_string());
                let line = unknown_field(&message)
                    .and_then(|u| lines.line(&format!("{at}.{key}.{u}")))
                    .or_else(|| lines.line(&format!("{at}.{key}")));
                f.add_at(shown(key), line, message);
            }
        }
    }
    serde_yaml_ng::from_value(Value::Mapping(kept)).unwrap_or_default()
}

const ROOT_DEVICE_HINTS_KEY: &str = "rootDeviceHints";

/// The hints of a `rootDeviceHints` map that decode, each one that does not a finding naming its key.
fn decode_hints(
    f: &mut Findings,
    lines: &YamlLines,
    at: &str,
    shown: &dyn Fn(&str) -> String,
    hints: &Mapping,
) -> Mapping {
    let mut good = Mapping::new();
    for (k, v) in hints {
        let one = Mapping::from_iter([(k.clone(), v.clone())]);
        match serde_yaml_ng::from_value::<RootDeviceHints>(Value::Mapping(one)) {
            Ok(_) => {
                good.insert(k.clone(), v.clone());
            }
            Err(e) => {
                let key = format!("{ROOT_DEVICE_HINTS_KEY}.{}", k.as_str().unwrap_or("?"));
                let line = lines
                    .line(&format!("{at}.{key}"))
                    .or_else(|| lines.line(&format!("{at}.{ROOT_DEVICE_HINTS_KEY}")));
                f.add_at(shown(&key), line, hide_values(&e.to_string()));
            }
        }
    }
    good
}

/// The key serde names in "unknown field `x`, expected …".
fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.split("unknown field `").nth(1)?;
    rest.split('`').next()
}

/// Every inventory-only rule, over all sites.
fn check(file: &str, inv: &Inventory) -> Vec<Finding> {
    let mut f = Findings::new(file);
    if inv.sites.is_empty() {
        f.add("sites", "no sites: list at least one");
    }
    let mut names: HashMap<&str, String> = HashMap::new();
    let mut cluster_ids: HashMap<&str, String> = HashMap::new();
    for site in &inv.sites {
        check_name(&mut f, site);
        if !site.name.is_empty()
            && let Some(first) = names.insert(&site.name, site.field("name"))
        {
            site_finding(
                &mut f,
                site,
                "name",
                format!(
                    "duplicate site name {:?}: already used at {first}",
                    site.name
                ),
            );
        }
        if let Some(id) = site.cluster_id.as_deref().filter(|id| !id.is_empty())
            && let Some(first) = cluster_ids.insert(id, site.field("cluster_id"))
        {
            site_finding(
                &mut f,
                site,
                "cluster_id",
                format!(
                    "duplicate cluster_id {id:?}: already used at {first}; every cluster needs its own"
                ),
            );
        }
        check_site_fields(&mut f, site);
    }
    f.into_vec()
}

/// A name is a directory under `BASE/sites/`: `[A-Za-z0-9][A-Za-z0-9._-]*`, so never empty, `.`,
/// `..`, hidden, or holding a `/`.
fn check_name(f: &mut Findings, site: &SiteEntry) {
    let name = &site.name;
    let b = name.as_bytes();
    let problem = if name.is_empty() {
        Some("required: the site's directory name under sites/".to_string())
    } else if name.contains('/') || name.contains("..") || b[0] == b'.' {
        Some(format!(
            "invalid value {name:?}: must be a plain directory name (no '/', no '..', not starting with '.')"
        ))
    } else if b.len() > SITE_NAME_MAX
        || !b[0].is_ascii_alphanumeric()
        || !b
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c))
    {
        Some(format!(
            "invalid value {name:?}: 1-{SITE_NAME_MAX} characters of letters, digits, '.', '_' and '-', starting with a letter or digit"
        ))
    } else {
        None
    };
    if let Some(message) = problem {
        // The name is what is wrong, so the field must not be annotated with it.
        let unnamed = SiteEntry {
            name: String::new(),
            at: site.at,
            ..SiteEntry::default()
        };
        f.add_at(unnamed.field("name"), site.line("name"), message);
    }
}

fn check_site_fields(f: &mut Findings, site: &SiteEntry) {
    if site.hostname.is_empty() {
        site_finding(f, site, "hostname", "required: the host name of the node");
    }
    for (key, value) in [
        ("clusterName", &site.cluster_name),
        ("baseDomain", &site.base_domain),
    ] {
        if value.as_deref() == Some("") {
            site_finding(
                f,
                site,
                key,
                "empty: leave the key out to keep the base's value",
            );
        }
    }
    for (i, cidr) in site.machine_network.iter().flatten().enumerate() {
        if let Err(e) = check_network_cidr(cidr) {
            site_finding(f, site, &format!("machineNetwork[{i}]"), e.to_string());
        }
    }
    if site.machine_network.as_ref().is_some_and(Vec::is_empty) {
        site_finding(f, site, "machineNetwork", "empty: list at least one CIDR");
    }
    if let Some(nic) = &site.nic {
        if site.network_config.is_some() {
            site_finding(
                f,
                site,
                "nic",
                "nic and networkConfig are exclusive: give the one NIC's settings or a whole nmstate document",
            );
        }
        check_nic(f, site, nic);
    }
    if let Some(bmc) = &site.bmc {
        check_bmc(f, &|k| site.field(&format!("bmc.{k}")), bmc);
    }
    if let Some(mac) = &site.boot_mac_address
        && !is_mac(mac)
    {
        site_finding(
            f,
            site,
            "bootMACAddress",
            format!(
                "invalid value {mac:?}: expected six hex pairs separated by ':' (52:54:00:aa:17:01)"
            ),
        );
    }
    if let Some(mode) = &site.boot_mode
        && !BOOT_MODES.contains(&mode.as_str())
    {
        site_finding(
            f,
            site,
            "bootMode",
            format!(
                "invalid value {mode:?}: expected one of {}",
                BOOT_MODES.join(", ")
            ),
        );
    }
    if site.root_device_hints.as_ref() == Some(&RootDeviceHints::default()) {
        site_finding(
            f,
            site,
            "rootDeviceHints",
            "empty: give at least one hint (deviceName, hctl, model, ...) or leave the key out",
        );
    }
}

fn check_nic(f: &mut Findings, site: &SiteEntry, nic: &Nic) {
    let name = &nic.interface;
    if name.is_empty() {
        site_finding(
            f,
            site,
            "nic.interface",
            "required: the interface name, e.g. eth0",
        );
    } else if name.len() > INTERFACE_NAME_MAX
        || name == "."
        || name == ".."
        || name
            .bytes()
            .any(|c| c == b'/' || c == b':' || c.is_ascii_whitespace() || c.is_ascii_control())
    {
        site_finding(
            f,
            site,
            "nic.interface",
            format!(
                "invalid value {name:?}: an interface name is 1-{INTERFACE_NAME_MAX} characters without '/', ':' or spaces"
            ),
        );
    }
    if let Some(mac) = &nic.mac_address
        && !is_mac(mac)
    {
        site_finding(
            f,
            site,
            "nic.macAddress",
            format!(
                "invalid value {mac:?}: expected six hex pairs separated by ':' (52:54:00:aa:17:01)"
            ),
        );
    }
    let address = match nic_address(nic) {
        Ok(a) => Some(a),
        Err(e) => {
            site_finding(f, site, "nic.address", e.to_string());
            None
        }
    };
    if let Some(gw) = &nic.gateway {
        match gw.parse::<IpAddr>() {
            Err(_) => site_finding(
                f,
                site,
                "nic.gateway",
                format!("invalid value {gw:?}: not an IP address"),
            ),
            Ok(gw) if address.is_some_and(|a| a.addr.is_ipv4() != gw.is_ipv4()) => site_finding(
                f,
                site,
                "nic.gateway",
                format!("{gw} is not of the address's IP family"),
            ),
            Ok(_) => {}
        }
    }
    for (i, server) in nic.dns.iter().enumerate() {
        if server.parse::<IpAddr>().is_err() {
            site_finding(
                f,
                site,
                &format!("nic.dns[{i}]"),
                format!("invalid value {server:?}: not an IP address"),
            );
        }
    }
}

/// Why a NIC's address is no usable host address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NicAddressError {
    #[error("required: the address with its prefix length, e.g. 192.168.17.10/24")]
    Missing,
    #[error("invalid value {text:?}: {why}")]
    Cidr { text: String, why: CidrError },
    #[error("invalid value {0:?}: not a host address")]
    NotHost(String),
}

/// The NIC's `ip/prefix`, which must be a usable host address.
pub(crate) fn nic_address(nic: &Nic) -> Result<Cidr, NicAddressError> {
    let a = &nic.address;
    if a.is_empty() {
        return Err(NicAddressError::Missing);
    }
    let cidr = Cidr::parse(a).map_err(|why| NicAddressError::Cidr {
        text: a.clone(),
        why,
    })?;
    if cidr.addr.is_unspecified() || cidr.addr.is_loopback() || cidr.addr.is_multicast() {
        return Err(NicAddressError::NotHost(a.clone()));
    }
    Ok(cidr)
}

/// Six pairs of hex digits separated by `:` (metal3's `bootMACAddress` pattern).
pub fn is_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests;
