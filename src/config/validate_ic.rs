//! Validation of `install-config.yaml` for image-based installation of single-node OpenShift: the generic
//! installer rules for the fields we use, the SNO/platform-none restrictions `create config-image` adds, and
//! warnings for fields that have no effect because the seed image fixes them.

use super::finding::{Findings, idx};
use super::install_config::INSTALL_CONFIG_FILE;
use super::install_config::{InstallConfig, MachinePool, Networking};
use super::net::{
    Cidr, check_network_cidr, is_dns1123_label, is_dns1123_subdomain, is_domain_trailing_dot_ok,
};
use super::rules;
use crate::util::finding::Finding;

/// The replicas the installer assumes for an omitted pool or an omitted `replicas`.
const DEFAULT_REPLICAS: i64 = 3;

/// Validates an install-config; returns every finding and the warnings.
pub fn validate_install_config(c: &InstallConfig) -> (Vec<Finding>, Vec<String>) {
    let mut f = Findings::new(INSTALL_CONFIG_FILE);
    identity(&mut f, c);
    single_node(&mut f, c);
    platform(&mut f, c);
    networking(&mut f, c);
    rules::pull_secret(&mut f, "pullSecret", c.pull_secret.expose());
    rules::ssh_key(&mut f, "sshKey", &c.ssh_key);
    if let Some(p) = &c.proxy {
        rules::proxy(&mut f, "proxy", p);
    }
    rules::trust_bundle(&mut f, "additionalTrustBundle", &c.additional_trust_bundle);
    rules::trust_bundle_policy(
        &mut f,
        "additionalTrustBundlePolicy",
        &c.additional_trust_bundle_policy,
    );
    mirrors(&mut f, c);
    ignored_fields(&mut f, c);
    f.into_parts()
}

/// apiVersion, cluster name, base domain and the cluster domain they make.
fn identity(f: &mut Findings, c: &InstallConfig) {
    match c.api_version.as_str() {
        "v1" => {}
        "" => f.add("apiVersion", "required: must be \"v1\""),
        v => f.add(
            "apiVersion",
            format!("unsupported value {v:?}: must be \"v1\""),
        ),
    }
    let name = &c.metadata.name;
    let name_ok = is_dns1123_label(name);
    if name.is_empty() {
        f.add("metadata.name", "required: the cluster name");
    } else if !name_ok {
        f.add(
            "metadata.name",
            format!("invalid value {name:?}: must be a DNS-1123 label (lower-case alphanumerics and '-', at most 63 characters)"),
        );
    }
    let base = &c.base_domain;
    let base_ok = is_domain_trailing_dot_ok(base);
    if base.is_empty() {
        f.add("baseDomain", "required: the base domain of the cluster");
    } else if !base_ok {
        f.add(
            "baseDomain",
            format!("invalid value {base:?}: must be a DNS-1123 subdomain (lower-case alphanumerics, '-' and '.'; a trailing dot is allowed)"),
        );
    }
    let domain = format!("{name}.{}", base.strip_suffix('.').unwrap_or(base));
    if name_ok && base_ok && !is_dns1123_subdomain(&domain) {
        f.add(
            "metadata.name",
            format!("the cluster domain {domain:?} must be a DNS-1123 subdomain of at most 253 characters"),
        );
    }
}

/// One control-plane node, no workers.
fn single_node(f: &mut Findings, c: &InstallConfig) {
    let cp = c.control_plane.clone().unwrap_or_default();
    if !cp.name.is_empty() && cp.name != "master" {
        f.add(
            "controlPlane.name",
            format!("unsupported value {:?}: must be \"master\"", cp.name),
        );
    }
    let replicas = cp.replicas.unwrap_or(DEFAULT_REPLICAS);
    if replicas != 1 {
        f.add(
            "controlPlane.replicas",
            format!("only single-node OpenShift is supported, found {replicas}"),
        );
    }
    match c.compute.as_deref() {
        None | Some([]) => f.add(
            "compute",
            format!("compute replicas must be 0 for single-node OpenShift, found {DEFAULT_REPLICAS} (the default when compute is omitted)"),
        ),
        Some(pools) => pools.iter().enumerate().for_each(|(i, p)| compute_pool(f, i, p)),
    }
    pool_warnings(f, "controlPlane", &cp);
}

fn compute_pool(f: &mut Findings, i: usize, p: &MachinePool) {
    let field = format!("{}.replicas", idx("compute", i));
    match p.replicas {
        Some(0) => {}
        Some(n) => f.add(field, format!("must be 0 for single-node OpenShift, found {n}")),
        None => f.add(
            field,
            format!("must be 0 for single-node OpenShift, found {DEFAULT_REPLICAS} (the default when replicas is omitted)"),
        ),
    }
    pool_warnings(f, &idx("compute", i), p);
}

/// The installer warns, rather than fails, on per-pool settings image-based installation ignores.
fn pool_warnings(f: &mut Findings, field: &str, p: &MachinePool) {
    if !p.hyperthreading.is_empty() && p.hyperthreading != "Enabled" {
        f.warn(
            format!("{field}.hyperthreading"),
            format!(
                "{:?} is ignored: the seed image determines hyperthreading",
                p.hyperthreading
            ),
        );
    }
    let empty =
        |v: &serde_yaml_ng::Value| v.is_null() || v.as_mapping().is_some_and(|m| m.is_empty());
    if p.platform.as_ref().is_some_and(|v| !empty(v)) {
        f.warn(
            format!("{field}.platform"),
            "is ignored: there are no machine sets to configure",
        );
    }
}

/// Exactly `platform.none`.
fn platform(f: &mut Findings, c: &InstallConfig) {
    let names = c.platform_names();
    if names.is_empty() {
        f.add(
            "platform",
            "required: only \"none\" is supported (platform: {none: {}})",
        );
    }
    for name in names.into_iter().filter(|n| *n != "none") {
        f.add(
            "platform",
            format!("only \"none\" is supported, found {name:?}"),
        );
    }
    if !matches!(c.feature_set.as_str(), "" | "Default") {
        f.add(
            "featureSet",
            format!(
                "unsupported value {:?}: only \"Default\" is supported",
                c.feature_set
            ),
        );
    }
}

/// Network type, machine networks (1 or 2, one per IP family, which lifecycle-agent matches against the
/// node IPs) and CIDRs.
fn networking(f: &mut Findings, c: &InstallConfig) {
    let net_type = c.network_type();
    if !matches!(net_type, "" | "OVNKubernetes") {
        f.add(
            "networking.networkType",
            format!("unsupported value {net_type:?}: only \"OVNKubernetes\" is supported"),
        );
    }
    let n = c.networking.clone().unwrap_or_default();
    let machine = machine_networks(f, &n);
    let mut others = Vec::new();
    for (i, e) in n.cluster_network.iter().enumerate() {
        others.extend(cidr(
            f,
            format!("{}.cidr", idx("networking.clusterNetwork", i)),
            &e.cidr,
        ));
    }
    for (i, e) in n.cluster_networks.iter().enumerate() {
        others.extend(cidr(
            f,
            format!("{}.cidr", idx("networking.clusterNetworks", i)),
            &e.cidr,
        ));
    }
    for (i, s) in n.service_network.iter().enumerate() {
        others.extend(cidr(f, idx("networking.serviceNetwork", i), s));
    }
    if let Some(s) = &n.service_cidr {
        others.extend(cidr(f, "networking.serviceCIDR".into(), s));
    }
    for (mf, m) in &machine {
        for (of, o) in others.iter().filter(|(_, o)| o.overlaps(m)) {
            f.add(mf, format!("{m} overlaps with {of} ({o})"));
        }
    }
}

/// Checks the machine networks; returns the valid ones with their field paths.
fn machine_networks(f: &mut Findings, n: &Networking) -> Vec<(String, Cidr)> {
    let field = "networking.machineNetwork";
    if n.machine_network.is_empty() {
        if let Some(m) = &n.machine_cidr {
            f.warn(
                "networking.machineCIDR",
                "is deprecated: use networking.machineNetwork",
            );
            return cidr(f, "networking.machineCIDR".into(), m)
                .into_iter()
                .collect();
        }
        f.add(
            field,
            "at least one entry is required: lifecycle-agent needs the machine networks to match the node IPs \
             (one network per IP family)",
        );
    }
    if n.machine_network.len() > 2 {
        f.add(
            field,
            format!(
                "too many: {}: must have at most 2 items",
                n.machine_network.len()
            ),
        );
    }
    let entries = n.machine_network.iter().enumerate();
    let valid: Vec<(String, Cidr)> = entries
        .filter_map(|(i, e)| cidr(f, format!("{}.cidr", idx(field, i)), &e.cidr))
        .collect();
    // More than two is already a finding; every pair among them would only repeat it.
    if n.machine_network.len() <= 2 {
        one_per_family(f, field, &valid);
    }
    valid
}

/// lifecycle-agent 4.20+ pairs machine network i with node IP i, families matching, and a node has at
/// most one node IP per family: two networks of one family fail on the host with "machineNetworks
/// count (2) must equal node IPs count (1)" (4.16–4.19 silently use the first).
fn one_per_family(f: &mut Findings, field: &str, networks: &[(String, Cidr)]) {
    for (i, (_, a)) in networks.iter().enumerate() {
        let same = networks[i + 1..]
            .iter()
            .find(|(_, b)| b.addr.is_ipv4() == a.addr.is_ipv4());
        if let Some((_, b)) = same {
            f.add(
                field,
                format!(
                    "{a} and {b} are both {}: give at most one machine network per IP family (lifecycle-agent 4.20+ requires one per node IP, of its family)",
                    family(a)
                ),
            );
        }
    }
}

/// "IPv4" or "IPv6".
pub(crate) fn family(c: &Cidr) -> &'static str {
    if c.addr.is_ipv4() { "IPv4" } else { "IPv6" }
}

fn cidr(f: &mut Findings, field: String, value: &str) -> Option<(String, Cidr)> {
    match check_network_cidr(value) {
        Ok(c) => Some((field, c)),
        Err(e) => {
            f.add(field, e.to_string());
            None
        }
    }
}

/// `imageDigestSources` and the deprecated `imageContentSources`: not both; each entry well-formed.
fn mirrors(f: &mut Findings, c: &InstallConfig) {
    if let Some(ids) = &c.image_digest_sources {
        rules::digest_sources(f, "imageDigestSources", ids);
    }
    if c.image_content_sources.is_some() {
        if c.image_digest_sources.is_some() {
            f.add(
                "imageContentSources",
                "cannot be set together with imageDigestSources: use imageDigestSources only",
            );
        } else if let Some(ics) = c.image_digest_sources() {
            f.warn(
                "imageContentSources",
                "is deprecated: use imageDigestSources",
            );
            rules::digest_sources(f, "imageContentSources", &ics);
        }
    }
}

/// Fields an installer-made install-config may carry that image-based installation does not use.
fn ignored_fields(f: &mut Findings, c: &InstallConfig) {
    let n = c.networking.clone().unwrap_or_default();
    let seed = "is ignored: the seed image determines it";
    let checks: [(&str, bool, &str); 11] = [
        (
            "networking.clusterNetwork",
            !n.cluster_network.is_empty() || !n.cluster_networks.is_empty(),
            seed,
        ),
        (
            "networking.serviceNetwork",
            !n.service_network.is_empty() || n.service_cidr.is_some(),
            seed,
        ),
        (
            "networking.clusterNetworkMTU",
            n.cluster_network_mtu.is_some(),
            seed,
        ),
        (
            "networking.ovnKubernetesConfig",
            n.ovn_kubernetes_config.is_some(),
            seed,
        ),
        ("fips", c.fips == Some(true), seed),
        (
            "cpuPartitioningMode",
            c.cpu_partitioning_mode
                .as_ref()
                .is_some_and(|m| m != "None"),
            seed,
        ),
        ("capabilities", c.capabilities.is_some(), seed),
        (
            "featureGates",
            c.feature_gates.as_ref().is_some_and(|g| !g.is_empty()),
            seed,
        ),
        (
            "arbiter",
            c.arbiter.is_some(),
            "is ignored: single-node OpenShift has no arbiter node",
        ),
        (
            "credentialsMode",
            c.credentials_mode.as_ref().is_some_and(|m| !m.is_empty()),
            seed,
        ),
        (
            "publish",
            c.publish.as_ref().is_some_and(|p| p != "External"),
            "is ignored on platform none",
        ),
    ];
    for (field, set, why) in checks {
        if set {
            f.warn(field, why);
        }
    }
}
