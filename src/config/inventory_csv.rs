//! The inventory as CSV (a file named `*.csv`): a header line naming the columns (the YAML keys,
//! the NIC's without `nic.`, and the `bmc.` columns), then one line per site, decoded into the same
//! [`SiteEntry`]s as the YAML form, each located by its line, so the checks are the same.

use std::collections::BTreeMap;

use super::finding::Findings;
use super::inventory_bmc::{BmcEntry, CSV_BMC_COLUMNS, set_csv_cell};
use super::inventory_model::{Locator, Nic, RootDeviceHints, SiteEntry};
use crate::util::finding::ValidationError;

/// Separator of list cells in CSV (`dns`, `machineNetwork`, `additionalNTPSources`, `nodeLabels`).
const CSV_LIST_SEPARATOR: char = ';';

/// The CSV columns, named as the YAML keys (the NIC's without `nic.`).
const CSV_COLUMNS: &[&str] = &[
    "name",
    "hostname",
    "clusterName",
    "baseDomain",
    "sshKey",
    "machineNetwork",
    "interface",
    "macAddress",
    "address",
    "gateway",
    "dns",
    "additionalNTPSources",
    "releaseRegistry",
    "nodeLabels",
    "cluster_id",
    "infra_id",
    "bootMACAddress",
    "bootMode",
    "rootDeviceHints",
];

/// CSV, kept simple: a header line, then one line per site; cells separated by `,` and trimmed; lists
/// separated by `;`; an empty cell keeps the base's value; blank lines and `#` lines are skipped; no
/// quoting (no cell needs a comma).
pub(super) fn parse_csv(file: &str, text: &str) -> Result<Vec<SiteEntry>, ValidationError> {
    let mut f = Findings::new(file);
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let Some((header_line, header)) = lines.next() else {
        f.file_error("empty: expected a header line (name,hostname,...) and one line per site");
        return Err(ValidationError {
            findings: f.into_vec(),
        });
    };
    let columns = csv_header(&mut f, header_line, header);
    let mut sites = Vec::new();
    for (line, text) in lines {
        if text.contains('"') {
            f.add(
                format!("line {line}"),
                "quoted cells are not supported: no cell needs a comma or a quote",
            );
            continue;
        }
        let cells: Vec<&str> = text.split(',').map(str::trim).collect();
        if cells.len() != columns.len() {
            f.add(
                format!("line {line}"),
                format!(
                    "{} cells, but the header has {} columns",
                    cells.len(),
                    columns.len()
                ),
            );
            continue;
        }
        sites.push(csv_site(&mut f, line, &columns, &cells));
    }
    let findings = f.into_vec();
    if findings.is_empty() {
        Ok(sites)
    } else {
        Err(ValidationError { findings })
    }
}

fn csv_header<'a>(f: &mut Findings, line: usize, header: &'a str) -> Vec<&'a str> {
    let columns: Vec<&str> = header.split(',').map(str::trim).collect();
    for (i, c) in columns.iter().enumerate() {
        if !CSV_COLUMNS.contains(c) && !CSV_BMC_COLUMNS.contains(c) {
            f.add(
                format!("line {line} column {}", i + 1),
                format!(
                    "unknown column {c:?}, expected one of {}, {}",
                    CSV_COLUMNS.join(", "),
                    CSV_BMC_COLUMNS.join(", ")
                ),
            );
        } else if columns[..i].contains(c) {
            f.add(format!("line {line}"), format!("duplicate column {c:?}"));
        }
    }
    if !columns.contains(&"name") {
        f.add(format!("line {line}"), "missing column \"name\"");
    }
    columns
}

/// One CSV row as a site entry; `columns` and `cells` have the same length.
fn csv_site(f: &mut Findings, line: usize, columns: &[&str], cells: &[&str]) -> SiteEntry {
    let mut site = SiteEntry {
        at: Locator::Csv(line),
        ..SiteEntry::default()
    };
    let mut nic = Nic::default();
    let mut has_nic = false;
    let mut bmc = BmcEntry::default();
    let mut has_bmc = false;
    let text = |v: &str| Some(v.to_string());
    for (column, value) in columns.iter().zip(cells) {
        let value = *value;
        if value.is_empty() {
            continue;
        }
        has_nic |= matches!(
            *column,
            "interface" | "macAddress" | "address" | "gateway" | "dns"
        );
        match *column {
            "name" => site.name = value.to_string(),
            "hostname" => site.hostname = value.to_string(),
            "clusterName" => site.cluster_name = text(value),
            "baseDomain" => site.base_domain = text(value),
            "sshKey" => site.ssh_key = text(value),
            "machineNetwork" => site.machine_network = Some(csv_list(value)),
            "interface" => nic.interface = value.to_string(),
            "macAddress" => nic.mac_address = text(value),
            "address" => nic.address = value.to_string(),
            "gateway" => nic.gateway = text(value),
            "dns" => nic.dns = csv_list(value),
            "additionalNTPSources" => site.additional_ntp_sources = Some(csv_list(value)),
            "releaseRegistry" => site.release_registry = text(value),
            "nodeLabels" => site.node_labels = csv_labels(f, line, value),
            "cluster_id" => site.cluster_id = text(value),
            "infra_id" => site.infra_id = text(value),
            "bootMACAddress" => site.boot_mac_address = text(value),
            "bootMode" => site.boot_mode = text(value),
            "rootDeviceHints" => site.root_device_hints = csv_root_device_hints(f, line, value),
            c if CSV_BMC_COLUMNS.contains(&c) => {
                has_bmc = true;
                set_csv_cell(f, line, &mut bmc, c, value);
            }
            _ => {} // reported with the header
        }
    }
    if has_nic {
        site.nic = Some(nic);
    }
    if has_bmc {
        site.bmc = Some(bmc);
    }
    site
}

fn csv_list(value: &str) -> Vec<String> {
    value
        .split(CSV_LIST_SEPARATOR)
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
}

/// `key=value;key=value` (an empty value is fine: `node-role.kubernetes.io/edge=`).
fn csv_labels(f: &mut Findings, line: usize, value: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    for item in csv_list(value) {
        match item.split_once('=') {
            Some((k, v)) => {
                labels.insert(k.trim().to_string(), v.trim().to_string());
            }
            None => f.add(
                format!("line {line} column nodeLabels"),
                format!("invalid item {item:?}: expected key=value"),
            ),
        }
    }
    labels
}

/// `deviceName=/dev/sda;minSizeGigabytes=100`: metal3's hints as `key=value` items, a number for
/// `minSizeGigabytes`, `true`/`false` for `rotational`, text for the others.
fn csv_root_device_hints(f: &mut Findings, line: usize, value: &str) -> Option<RootDeviceHints> {
    let field = format!("line {line} column rootDeviceHints");
    let mut map = serde_json::Map::new();
    for item in csv_list(value) {
        let Some((k, v)) = item.split_once('=') else {
            f.add(&field, format!("invalid item {item:?}: expected key=value"));
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        let v = match k {
            "minSizeGigabytes" => match v.parse::<u32>() {
                Ok(n) => serde_json::Value::from(n),
                Err(_) => {
                    f.add(
                        &field,
                        format!("{k}: invalid value {v:?}: expected a whole number"),
                    );
                    continue;
                }
            },
            "rotational" => match v {
                "true" => true.into(),
                "false" => false.into(),
                _ => {
                    f.add(
                        &field,
                        format!("{k}: invalid value {v:?}: expected true or false"),
                    );
                    continue;
                }
            },
            _ => v.into(),
        };
        // Each key on its own, so every bad one is named in one run; serde names the unknown key
        // and the keys it expects (no value is secret here).
        let one = serde_json::Map::from_iter([(k.to_string(), v.clone())]);
        match serde_json::from_value::<RootDeviceHints>(serde_json::Value::Object(one)) {
            Ok(_) => {
                map.insert(k.to_string(), v);
            }
            Err(e) => f.add(&field, format!("{k}: {e}")),
        }
    }
    serde_json::from_value(serde_json::Value::Object(map)).ok()
}
