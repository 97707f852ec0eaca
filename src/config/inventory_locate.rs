//! Where a batch site's finding is fixed. The single-site rules judge a site's rendered
//! `install-config.yaml` and `image-based-config.yaml`, files that exist nowhere on disk; each of
//! their findings is moved to the place its value came from: the site's inventory entry (file, line,
//! site) when the site sets that key, the shared base's file and line otherwise.
//!
//! [`site_inputs`] validates one site completely: the rendered files and the rules that need the
//! inventory entry run even when another of them fails, so one problem hides no other.

use super::inventory::SiteEntry;
use super::inventory_render::{BaseFile, FleetBase, SiteFiles, check_site};
use super::{
    ExtraManifest, IMAGE_BASED_CONFIG_FILE, INSTALL_CONFIG_FILE, SiteInputs,
    parse_image_based_config, parse_install_config, parse_site_inputs,
};
use crate::util::finding::{Finding, ValidationError};

/// The site's effective inputs, validated with every rule; every finding names where to fix it.
pub fn site_inputs(
    base: &FleetBase,
    inventory_file: &str,
    site: &SiteEntry,
    files: &SiteFiles,
    manifests: Vec<ExtraManifest>,
) -> Result<SiteInputs, ValidationError> {
    let parsed = parse_site_inputs(&files.install_config, &files.image_based_config, manifests);
    let (inputs, mut findings) = match parsed {
        Ok(inputs) => (Some(inputs), Vec::new()),
        Err(e) => (None, e.findings),
    };
    // The rendered files decode even when their values fail the rules: the cross-file rules still run.
    let decoded = parse_install_config(&files.install_config)
        .ok()
        .zip(parse_image_based_config(&files.image_based_config).ok());
    if let Some((ic, ibc)) = &decoded {
        findings.extend(check_site(inventory_file, site, ic, ibc));
    }
    let findings: Vec<Finding> = findings
        .into_iter()
        .map(|f| locate(base, inventory_file, site, f))
        .collect();
    match inputs {
        Some(inputs) if findings.is_empty() => Ok(inputs),
        _ => Err(ValidationError { findings }),
    }
}

/// `f` (about a site's rendered file) named where its value came from; other findings unchanged.
pub fn locate(base: &FleetBase, inventory_file: &str, site: &SiteEntry, f: Finding) -> Finding {
    let (base_file, key) = if f.file == IMAGE_BASED_CONFIG_FILE {
        (
            &base.image_based_config_file,
            image_based_config_key(site, &f.field),
        )
    } else if f.file == INSTALL_CONFIG_FILE {
        (
            &base.install_config_file,
            install_config_key(site, &f.field),
        )
    } else {
        return f;
    };
    match key {
        Some(key) => Finding {
            file: inventory_file.to_string(),
            line: site.line(&key),
            field: site.field(&key),
            ..f
        },
        None => in_base(base_file, f),
    }
}

/// A finding about a value the site takes from the base: the base file and its line.
fn in_base(file: &BaseFile, f: Finding) -> Finding {
    let line = nearest_line(file, &f.field);
    Finding {
        file: file.name.clone(),
        line,
        ..f
    }
}

/// The line of `field` in `file`, or of the nearest enclosing key that is there.
fn nearest_line(file: &BaseFile, field: &str) -> Option<usize> {
    let mut path = field.to_string();
    while !path.is_empty() {
        if let Some(line) = file.lines.line(&path) {
            return Some(line);
        }
        path.truncate(path.rfind(['.', '[']).unwrap_or(0));
    }
    None
}

/// The inventory key (YAML path in the entry) behind `field` of the rendered image-based-config,
/// when the site sets it.
fn image_based_config_key(site: &SiteEntry, field: &str) -> Option<String> {
    if field == "hostname" {
        return Some(field.to_string());
    }
    if let Some(rest) = field.strip_prefix("networkConfig") {
        if site.nic.is_some() {
            return Some(nic_key(rest).to_string());
        }
        return site.network_config.is_some().then(|| field.to_string());
    }
    let (top, _) = split_top(field);
    let set = match top {
        "additionalNTPSources" => site.additional_ntp_sources.is_some(),
        "releaseRegistry" => site.release_registry.is_some(),
        "cluster_id" => site.cluster_id.is_some(),
        "infra_id" => site.infra_id.is_some(),
        "nodeLabels" => field
            .strip_prefix("nodeLabels.")
            .is_some_and(|k| site.node_labels.contains_key(k)),
        _ => false,
    };
    set.then(|| field.to_string())
}

/// The `nic` key a finding about the nmstate document rendered from it is about.
fn nic_key(network_config_rest: &str) -> &'static str {
    let rest = network_config_rest
        .strip_prefix(".interfaces[0]")
        .unwrap_or_default();
    if rest.starts_with(".mac-address") {
        "nic.macAddress"
    } else if rest.starts_with(".name") {
        "nic.interface"
    } else if rest.starts_with(".ipv4") || rest.starts_with(".ipv6") {
        "nic.address"
    } else if network_config_rest.starts_with(".routes") {
        "nic.gateway"
    } else if network_config_rest.starts_with(".dns-resolver") {
        "nic.dns"
    } else {
        "nic"
    }
}

/// The inventory key behind `field` of the rendered install-config, when the site sets it.
fn install_config_key(site: &SiteEntry, field: &str) -> Option<String> {
    if field == "metadata.name" {
        return site.cluster_name.is_some().then(|| "clusterName".into());
    }
    if field == "baseDomain" || field == "sshKey" {
        let set = match field {
            "baseDomain" => site.base_domain.is_some(),
            _ => site.ssh_key.is_some(),
        };
        return set.then(|| field.to_string());
    }
    let rest = field.strip_prefix("networking.machineNetwork")?;
    site.machine_network.is_some().then(|| {
        let index = rest.strip_suffix(".cidr").unwrap_or(rest);
        format!("machineNetwork{index}")
    })
}

/// `("nodeLabels", ".a/b")` for `nodeLabels.a/b`; `("x", "[1]")` for `x[1]`.
fn split_top(field: &str) -> (&str, &str) {
    let cut = field.find(['.', '[']).unwrap_or(field.len());
    field.split_at(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::FleetBase;
    use crate::config::inventory::parse_inventory;
    use crate::config::tests::{base_install_config, render};

    const INVENTORY: &str = "sites:
- name: a
  hostname: localhost
  machineNetwork: [10.0.0.0/24]
  nic:
    interface: eth0
    macAddress: 00:00:00:00:00:00
    address: 10.99.0.5/24
  nodeLabels: {'bad key!': x}
";

    #[test]
    fn each_finding_names_the_inventory_line_or_the_base_line() {
        let ibc = "hostname: change-to-hostname\nnodeLabels:\n  'also bad!': y\n";
        let base = FleetBase::parse(&base_install_config(), Some(ibc)).unwrap();
        let inv = parse_inventory("sites.yaml", INVENTORY, false).unwrap();
        let site = &inv.sites[0];
        let files = base.render(site).unwrap();
        let err = site_inputs(&base, "sites.yaml", site, &files, Vec::new()).unwrap_err();
        let mut got = render(&err.findings);
        got.sort();
        assert_eq!(
            got,
            [
                "image-based-config.yaml:3: nodeLabels.also bad!: invalid label key \"also bad!\": the name must be 1-63 characters: alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
                "sites.yaml:3: sites[0].hostname (site a): \"localhost\" is not allowed: lifecycle-agent rejects it",
                "sites.yaml:7: sites[0].nic.macAddress (site a): still the template's placeholder \"00:00:00:00:00:00\": replace it with this site's value",
                "sites.yaml:8: sites[0].nic.address (site a): 10.99.0.5 is outside every networking.machineNetwork CIDR (10.0.0.0/24): set machineNetwork for this site",
                "sites.yaml:9: sites[0].nodeLabels.bad key! (site a): invalid label key \"bad key!\": the name must be 1-63 characters: alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
            ]
        );
    }

    #[test]
    fn rendered_fields_map_to_inventory_keys() {
        let inv = parse_inventory("sites.yaml", INVENTORY, false).unwrap();
        let site = &inv.sites[0];
        let cases = [
            ("networkConfig.interfaces[0].name", "nic.interface"),
            ("networkConfig.routes.config[0]", "nic.gateway"),
            ("networkConfig", "nic"),
        ];
        for (field, want) in cases {
            assert_eq!(
                image_based_config_key(site, field).as_deref(),
                Some(want),
                "{field}"
            );
        }
        assert_eq!(image_based_config_key(site, "releaseRegistry"), None);
        assert_eq!(
            install_config_key(site, "networking.machineNetwork[0].cidr").as_deref(),
            Some("machineNetwork[0]")
        );
        assert_eq!(install_config_key(site, "baseDomain"), None);
    }
}
