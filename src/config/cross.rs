//! Checks across the two input files: the node's static addresses (image-based-config.yaml's
//! `networkConfig`) against the machine networks (install-config.yaml). lifecycle-agent picks the node
//! IP from the machine networks on the host; a site whose static addresses all lie outside them builds
//! a valid-looking ISO that fails there, after the install.

use std::net::IpAddr;

use serde_json::Value;

use super::finding::Findings;
use super::install_config::INSTALL_CONFIG_FILE;
use super::net::Cidr;
use crate::util::finding::Finding;

/// For each IP family with both machine networks and static addresses, at least one address must be
/// in a machine network. Only that: other addresses may belong to other networks (storage, a second
/// NIC), and DHCP-only configurations have nothing to check.
pub(crate) fn node_ip_in_machine_network(
    machine_networks: &[String],
    network_config: Option<&Value>,
) -> Vec<Finding> {
    let networks: Vec<Cidr> = machine_networks
        .iter()
        .filter_map(|c| Cidr::parse(c).ok())
        .collect();
    let addresses = static_addresses(network_config);
    let mut f = Findings::new(INSTALL_CONFIG_FILE);
    for v4 in [true, false] {
        let nets: Vec<&Cidr> = networks.iter().filter(|n| n.addr.is_ipv4() == v4).collect();
        let ips: Vec<IpAddr> = addresses
            .iter()
            .copied()
            .filter(|a| a.is_ipv4() == v4)
            .collect();
        if nets.is_empty() || ips.is_empty() {
            continue;
        }
        if !ips.iter().any(|ip| nets.iter().any(|n| contains(n, *ip))) {
            let shown: Vec<String> = ips.iter().map(IpAddr::to_string).collect();
            f.add(
                "networking.machineNetwork",
                format!(
                    "no machine network contains the node's static address {} (image-based-config.yaml networkConfig); lifecycle-agent finds the node IP through the machine networks",
                    shown.join(", ")
                ),
            );
        }
    }
    f.into_vec()
}

fn contains(net: &Cidr, ip: IpAddr) -> bool {
    let host = Cidr {
        addr: ip,
        prefix: if ip.is_ipv4() { 32 } else { 128 },
    };
    net.overlaps(&host)
}

/// `interfaces[].ipv4|ipv6.address[].ip` of an nmstate document.
fn static_addresses(config: Option<&Value>) -> Vec<IpAddr> {
    let Some(interfaces) = config
        .and_then(|c| c.get("interfaces"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    interfaces
        .iter()
        .flat_map(|i| ["ipv4", "ipv6"].map(|fam| i.get(fam)))
        .flatten()
        .filter_map(|fam| fam.get("address").and_then(Value::as_array))
        .flatten()
        .filter_map(|a| a.get("ip").and_then(Value::as_str))
        .filter_map(|ip| ip.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nmstate(yaml: &str) -> Value {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    const TWO_NICS: &str = "interfaces:\n- name: eth0\n  ipv4: {enabled: true, address: [{ip: 192.168.122.17, prefix-length: 23}]}\n- name: eth1\n  ipv4: {enabled: true, address: [{ip: 10.9.0.5, prefix-length: 24}]}\n";

    #[test]
    fn one_address_per_family_must_be_in_a_machine_network() {
        let cfg = nmstate(TWO_NICS);
        let nets = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(node_ip_in_machine_network(&nets(&["192.168.122.0/23"]), Some(&cfg)).is_empty());
        assert!(node_ip_in_machine_network(&nets(&["10.9.0.0/16"]), Some(&cfg)).is_empty());
        let f = node_ip_in_machine_network(&nets(&["10.0.0.0/16"]), Some(&cfg));
        assert_eq!(f.len(), 1);
        assert_eq!(
            f[0].to_string(),
            "install-config.yaml: networking.machineNetwork: no machine network contains the node's static address 192.168.122.17, 10.9.0.5 (image-based-config.yaml networkConfig); lifecycle-agent finds the node IP through the machine networks"
        );
        // No IPv6 address: an IPv6 machine network has nothing to match.
        assert!(
            node_ip_in_machine_network(&nets(&["192.168.122.0/23", "fd00::/64"]), Some(&cfg))
                .is_empty()
        );
        // DHCP only, or no networkConfig: nothing to check.
        let dhcp = nmstate("interfaces:\n- name: eth0\n  ipv4: {enabled: true, dhcp: true}\n");
        assert!(node_ip_in_machine_network(&nets(&["10.0.0.0/16"]), Some(&dhcp)).is_empty());
        assert!(node_ip_in_machine_network(&nets(&["10.0.0.0/16"]), None).is_empty());
    }
}
