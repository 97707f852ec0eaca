//! Tests of the batch inventory (YAML and CSV decoding, the inventory-only rules with their rendered
//! findings) and of rendering a site's effective files from the shared base.

use super::{Locator, parse_inventory};
use crate::config::tests::{BASE_IMAGE_BASED_CONFIG, base_install_config, render};
use crate::config::*;

const FILE: &str = "sites.yaml";

fn findings_yaml(text: &str) -> Vec<String> {
    render(&parse_inventory(FILE, text, false).unwrap_err().findings)
}

fn findings_csv(text: &str) -> Vec<String> {
    render(
        &parse_inventory("sites.csv", text, true)
            .unwrap_err()
            .findings,
    )
}

const NIC_SITE: &str = "sites:
- name: a17
  hostname: sno-a17
  clusterName: sno-a17
  machineNetwork: [192.168.17.0/24]
  nic:
    interface: eth0
    macAddress: 52:54:00:aa:17:01
    address: 192.168.17.10/24
    gateway: 192.168.17.1
    dns: [192.168.17.1]
  nodeLabels: {site: a17}
";

#[test]
fn yaml_inventory_decodes_with_locators() {
    let inv = parse_inventory(FILE, NIC_SITE, false).unwrap();
    assert_eq!(inv.sites.len(), 1);
    let s = &inv.sites[0];
    assert_eq!(s.at, Locator::Yaml(0));
    assert_eq!(s.cluster_name.as_deref(), Some("sno-a17"));
    let nic = s.nic.as_ref().unwrap();
    assert_eq!(nic.address, "192.168.17.10/24");
    assert_eq!(s.field("nic.address"), "sites[0].nic.address (site a17)");
}

#[test]
fn yaml_decode_errors_name_the_site_index_and_key() {
    let got = findings_yaml(
        "sites:\n- name: a\n  hostname: h\n  nic: {interface: eth0, adress: 10.0.0.1/24}\n",
    );
    assert_eq!(
        got,
        [
            "sites.yaml:4: sites[0].nic (site a): unknown field `adress`, expected one of `interface`, `macAddress`, `address`, `gateway`, `dns`"
        ]
    );
    assert_eq!(
        findings_yaml("# nothing\n"),
        ["sites.yaml: the file is empty"]
    );
    assert_eq!(
        findings_yaml("sites: []\n"),
        ["sites.yaml: sites: no sites: list at least one"]
    );
}

#[test]
fn inventory_rules_report_every_finding() {
    let text = "sites:
- name: ../etc
  hostname: h1
- name: ''
- name: ok
  hostname: h3
  clusterName: ''
  machineNetwork: [10.0.0.1/24]
  nic: {interface: eth0/1, macAddress: 52-54-00, address: 10.0.0.300/24, gateway: 10.0.0.1, dns: [x]}
  networkConfig: {interfaces: []}
- name: ok
  hostname: h4
  nic: {interface: eth0, address: 2001:db8::5/64, gateway: 10.0.0.1}
- name: .hidden
  hostname: h5
- name: a b
  hostname: h6
- name: c1
  hostname: h7
  cluster_id: 6e6b5d0e-1b1a-4d3b-9b0a-0d7c2b1c1a11
- name: c2
  hostname: h8
  cluster_id: 6e6b5d0e-1b1a-4d3b-9b0a-0d7c2b1c1a11
";
    assert_eq!(
        findings_yaml(text),
        [
            "sites.yaml:2: sites[0].name: invalid value \"../etc\": must be a plain directory name (no '/', no '..', not starting with '.')",
            "sites.yaml:4: sites[1].name: required: the site's directory name under sites/",
            "sites.yaml:4: sites[1].hostname: required: the host name of the node",
            "sites.yaml:7: sites[2].clusterName (site ok): empty: leave the key out to keep the base's value",
            "sites.yaml:8: sites[2].machineNetwork[0] (site ok): invalid network address \"10.0.0.1/24\": expected 10.0.0.0/24",
            "sites.yaml:9: sites[2].nic (site ok): nic and networkConfig are exclusive: give the one NIC's settings or a whole nmstate document",
            "sites.yaml:9: sites[2].nic.interface (site ok): invalid value \"eth0/1\": an interface name is 1-15 characters without '/', ':' or spaces",
            "sites.yaml:9: sites[2].nic.macAddress (site ok): invalid value \"52-54-00\": expected six hex pairs separated by ':' (52:54:00:aa:17:01)",
            "sites.yaml:9: sites[2].nic.address (site ok): invalid value \"10.0.0.300/24\": \"10.0.0.300\" is not an IP address",
            "sites.yaml:9: sites[2].nic.dns[0] (site ok): invalid value \"x\": not an IP address",
            "sites.yaml:11: sites[3].name (site ok): duplicate site name \"ok\": already used at sites[2].name (site ok)",
            "sites.yaml:13: sites[3].nic.gateway (site ok): 10.0.0.1 is not of the address's IP family",
            "sites.yaml:14: sites[4].name: invalid value \".hidden\": must be a plain directory name (no '/', no '..', not starting with '.')",
            "sites.yaml:16: sites[5].name: invalid value \"a b\": 1-63 characters of letters, digits, '.', '_' and '-', starting with a letter or digit",
            "sites.yaml:23: sites[7].cluster_id (site c2): duplicate cluster_id \"6e6b5d0e-1b1a-4d3b-9b0a-0d7c2b1c1a11\": already used at sites[6].cluster_id (site c1); every cluster needs its own",
        ]
    );
}

/// A key that does not decode hides nothing: the other sites' and the other keys' findings come too,
/// each with its line.
#[test]
fn an_unknown_key_hides_no_other_finding() {
    let text = "sites:
- name: a
  hostname: h1
  hostnme: typo
- name: a
  hostname: h2
  machineNetwork: 10.0.0.0/24
  nic: {interface: eth0, address: 10.0.0.5}
fleet: x
";
    assert_eq!(
        findings_yaml(text),
        [
            "sites.yaml:9: fleet: unknown field `fleet`, expected `sites`",
            "sites.yaml:4: sites[0].hostnme (site a): unknown field `hostnme`, expected one of `name`, `hostname`, `clusterName`, `baseDomain`, `sshKey`, `machineNetwork`, `nic`, `networkConfig`, `additionalNTPSources`, `releaseRegistry`, `nodeLabels`, `cluster_id`, `infra_id`, `bmc`, `bootMACAddress`, `bootMode`, `rootDeviceHints`",
            "sites.yaml:7: sites[1].machineNetwork (site a): invalid type: string (value not shown), expected a sequence",
            "sites.yaml:5: sites[1].name (site a): duplicate site name \"a\": already used at sites[0].name (site a)",
            "sites.yaml:8: sites[1].nic.address (site a): invalid value \"10.0.0.5\": not in CIDR notation (address/prefix)",
        ]
    );
}

#[test]
fn csv_inventory_decodes_like_yaml() {
    let csv = "# fleet\nname,hostname,clusterName,machineNetwork,interface,macAddress,address,gateway,dns,nodeLabels\n\
               a17, sno-a17 ,sno-a17,192.168.17.0/24,eth0,52:54:00:aa:17:01,192.168.17.10/24,192.168.17.1,192.168.17.1,site=a17\n\n";
    let from_csv = parse_inventory("sites.csv", csv, true).unwrap();
    let mut from_yaml = parse_inventory(FILE, NIC_SITE, false).unwrap();
    from_yaml.sites[0].at = Locator::Csv(3);
    from_yaml.sites[0].lines = None;
    assert_eq!(from_csv, from_yaml);
    assert_eq!(
        from_csv.sites[0].field("nic.address"),
        "line 3 column address (site a17)"
    );
}

#[test]
fn csv_root_device_hints_are_key_value_items() {
    let inv = parse_inventory(
        "sites.csv",
        "name,hostname,rootDeviceHints\na,h,deviceName=/dev/sda;minSizeGigabytes=100;rotational=false\n",
        true,
    )
    .unwrap();
    assert_eq!(
        inv.sites[0].root_device_hints,
        Some(RootDeviceHints {
            device_name: Some("/dev/sda".into()),
            min_size_gigabytes: Some(100),
            rotational: Some(false),
            ..RootDeviceHints::default()
        })
    );
    let f = findings_csv(
        "name,hostname,rootDeviceHints\na,h,minSizeGigabytes=big;rotational=yes;disk\nb,h,diskName=sda\n",
    );
    assert_eq!(f.len(), 4, "{f:?}");
    assert!(
        f[0].contains("line 2 column rootDeviceHints: minSizeGigabytes: invalid value \"big\""),
        "{f:?}"
    );
    assert!(f[1].contains("rotational: invalid value \"yes\""), "{f:?}");
    assert!(f[2].contains("invalid item \"disk\""), "{f:?}");
    assert!(
        f[3].contains("line 3 column rootDeviceHints: diskName: unknown field `diskName`"),
        "{f:?}"
    );
}

#[test]
fn csv_errors_name_line_and_column() {
    assert_eq!(
        findings_csv("name,hostnme\na,b\n"),
        [
            "sites.csv: line 1 column 2: unknown column \"hostnme\", expected one of name, hostname, clusterName, baseDomain, sshKey, machineNetwork, interface, macAddress, address, gateway, dns, additionalNTPSources, releaseRegistry, nodeLabels, cluster_id, infra_id, bootMACAddress, bootMode, rootDeviceHints, bmcAddress, bmcSystem, bmcUser, bmcPasswordFile, bmcPasswordEnv, bmcCaFile, bmcInsecure"
        ]
    );
    assert_eq!(
        findings_csv("hostname\nh\n"),
        ["sites.csv: line 1: missing column \"name\""]
    );
    assert_eq!(
        findings_csv("name,hostname\na,b,c\n\"q\",h\nc,h\nd,h,\n"),
        [
            "sites.csv: line 2: 3 cells, but the header has 2 columns",
            "sites.csv: line 3: quoted cells are not supported: no cell needs a comma or a quote",
            "sites.csv: line 5: 3 cells, but the header has 2 columns",
        ]
    );
    assert_eq!(
        findings_csv("name,hostname,address\na,h,10.0.0.1/24\n"),
        ["sites.csv: line 2 column interface (site a): required: the interface name, e.g. eth0"]
    );
    assert_eq!(
        findings_csv("name,hostname,nodeLabels\na,h,x=1;y\n"),
        ["sites.csv: line 2 column nodeLabels: invalid item \"y\": expected key=value"]
    );
    assert_eq!(
        findings_csv("\n# only comments\n"),
        ["sites.csv: empty: expected a header line (name,hostname,...) and one line per site"]
    );
}

fn base() -> FleetBase {
    FleetBase::parse(
        &base_install_config(),
        Some("hostname: base\nnodeLabels: {role: edge, site: base}\nreleaseRegistry: r.example.com\n"),
    )
    .unwrap()
}

fn site_inputs(files: &SiteFiles) -> SiteInputs {
    parse_site_inputs(&files.install_config, &files.image_based_config, Vec::new()).unwrap()
}

#[test]
fn render_applies_overrides_and_keeps_the_rest() {
    let inv = parse_inventory(FILE, NIC_SITE, false).unwrap();
    let files = base().render(&inv.sites[0]).unwrap();
    let inputs = site_inputs(&files);
    let ic = &inputs.install_config;
    assert_eq!(ic.metadata.name, "sno-a17");
    assert_eq!(ic.base_domain, "example.com", "kept from the base");
    assert_eq!(ic.machine_network_cidrs(), ["192.168.17.0/24"]);
    let ibc = &inputs.image_based_config;
    assert_eq!(ibc.hostname, "sno-a17");
    assert_eq!(ibc.release_registry, "r.example.com");
    let labels: Vec<_> = ibc
        .node_labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    assert_eq!(labels, ["role=edge", "site=a17"], "merged, the site wins");
    assert_eq!(
        ibc.canonical_network_config().unwrap().unwrap(),
        "dns-resolver:
  config:
    server:
    - 192.168.17.1
interfaces:
- ipv4:
    address:
    - ip: 192.168.17.10
      prefix-length: 24
    dhcp: false
    enabled: true
  ipv6:
    enabled: false
  mac-address: 52:54:00:aa:17:01
  name: eth0
  state: up
  type: ethernet
routes:
  config:
  - destination: 0.0.0.0/0
    next-hop-address: 192.168.17.1
    next-hop-interface: eth0
"
    );
    assert!(
        check_site(
            FILE,
            &inv.sites[0],
            &inputs.install_config,
            &inputs.image_based_config
        )
        .is_empty()
    );
    // Rendering is deterministic: the fingerprint depends on it.
    assert_eq!(files, base().render(&inv.sites[0]).unwrap());
}

#[test]
fn ipv6_nic_renders_and_validates() {
    let inv = parse_inventory(
        FILE,
        "sites:\n- name: v6\n  hostname: h\n  machineNetwork: ['2001:db8::/64']\n  nic: {interface: eth0, address: '2001:db8::5/64', gateway: '2001:db8::1'}\n",
        false,
    )
    .unwrap();
    let inputs = site_inputs(&base().render(&inv.sites[0]).unwrap());
    let nm = inputs
        .image_based_config
        .canonical_network_config()
        .unwrap()
        .unwrap();
    assert!(nm.contains("autoconf: false"), "{nm}");
    assert!(nm.contains("destination: ::/0"), "{nm}");
    assert!(
        check_site(
            FILE,
            &inv.sites[0],
            &inputs.install_config,
            &inputs.image_based_config
        )
        .is_empty()
    );
}

#[test]
fn nic_outside_the_machine_network_is_a_site_finding() {
    let inv = parse_inventory(
        FILE,
        "sites:\n- name: a\n  hostname: h\n  nic: {interface: eth0, address: 10.9.0.5/24}\n",
        false,
    )
    .unwrap();
    let inputs = site_inputs(&base().render(&inv.sites[0]).unwrap());
    assert_eq!(
        render(&check_site(
            FILE,
            &inv.sites[0],
            &inputs.install_config,
            &inputs.image_based_config
        )),
        [
            "sites.yaml:4: sites[0].nic.address (site a): 10.9.0.5 is outside every networking.machineNetwork CIDR (192.168.122.0/23): set machineNetwork for this site"
        ]
    );
}

#[test]
fn full_network_config_passes_through() {
    let inv = parse_inventory(
        FILE,
        "sites:\n- name: a\n  hostname: h\n  networkConfig:\n    interfaces:\n    - {name: eth1, type: ethernet, state: up}\n",
        false,
    )
    .unwrap();
    let inputs = site_inputs(&base().render(&inv.sites[0]).unwrap());
    assert_eq!(
        inputs
            .image_based_config
            .canonical_network_config()
            .unwrap()
            .unwrap(),
        "interfaces:\n- name: eth1\n  state: up\n  type: ethernet\n"
    );
}

#[test]
fn base_may_not_share_cluster_identity_and_must_decode() {
    let err = FleetBase::parse(
        &base_install_config(),
        Some(
            "hostname: x\ncluster_id: 6e6b5d0e-1b1a-4d3b-9b0a-0d7c2b1c1a11\ninfra_id: sno-abcde\n",
        ),
    )
    .unwrap_err();
    assert_eq!(
        render(&err.findings),
        [
            "image-based-config.yaml: cluster_id: must not be in the shared base: every site is its own cluster (set it per site in the inventory)",
            "image-based-config.yaml: infra_id: must not be in the shared base: every site is its own cluster (set it per site in the inventory)",
        ]
    );
    let err = FleetBase::parse("apiVersion: v1\nbogus: 1\n", Some("hostnam: x\n")).unwrap_err();
    let got = render(&err.findings);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].starts_with("install-config.yaml: unknown field `bogus`"),
        "{got:?}"
    );
    assert!(
        got[1].starts_with("image-based-config.yaml: unknown field `hostnam`"),
        "{got:?}"
    );
    // The shared image-based-config is optional.
    assert!(FleetBase::parse(&base_install_config(), None).is_ok());
    assert!(FleetBase::parse(&base_install_config(), Some(BASE_IMAGE_BASED_CONFIG)).is_ok());
}

#[test]
fn site_validation_uses_the_single_site_rules() {
    let inv = parse_inventory(
        FILE,
        "sites:\n- name: a\n  hostname: localhost\n  additionalNTPSources: ['bad host']\n",
        false,
    )
    .unwrap();
    let files = base().render(&inv.sites[0]).unwrap();
    let err = parse_site_inputs(&files.install_config, &files.image_based_config, Vec::new())
        .unwrap_err();
    assert_eq!(
        render(&err.findings),
        [
            "image-based-config.yaml: hostname: \"localhost\" is not allowed: lifecycle-agent rejects it",
            "image-based-config.yaml: additionalNTPSources[0]: invalid value \"bad host\": NTP server is not a valid IP or domain name",
        ]
    );
}

#[test]
fn hub_keys_decode_and_are_checked() {
    let inv = parse_inventory(
        FILE,
        "sites:
- name: a17
  hostname: sno-a17
  bootMACAddress: 52:54:00:AA:17:01
  bootMode: UEFISecureBoot
  rootDeviceHints: {deviceName: /dev/sda, minSizeGigabytes: 100, rotational: false}
",
        false,
    )
    .unwrap();
    let s = &inv.sites[0];
    assert_eq!(s.boot_mac_address.as_deref(), Some("52:54:00:AA:17:01"));
    assert_eq!(s.boot_mode.as_deref(), Some("UEFISecureBoot"));
    let hints = s.root_device_hints.as_ref().unwrap();
    assert_eq!(hints.device_name.as_deref(), Some("/dev/sda"));
    assert_eq!(hints.min_size_gigabytes, Some(100));
    assert_eq!(hints.rotational, Some(false));
    let found = findings_yaml(
        "sites:
- name: a17
  hostname: sno-a17
  bootMACAddress: 52-54-00-aa-17-01
  bootMode: BIOS
  rootDeviceHints: {}
- name: a18
  hostname: sno-a18
  rootDeviceHints: {disk: /dev/sda}
",
    );
    let joined = found.join("\n");
    for want in [
        "sites[0].bootMACAddress (site a17): invalid value \"52-54-00-aa-17-01\"",
        "sites[0].bootMode (site a17): invalid value \"BIOS\": expected one of UEFI, UEFISecureBoot, legacy",
        "sites[0].rootDeviceHints (site a17): empty",
        "unknown field `disk`",
    ] {
        assert!(joined.contains(want), "no {want:?} in:\n{joined}");
    }
    let inv = parse_inventory(
        "sites.csv",
        "name,hostname,bootMACAddress,bootMode\na17,sno-a17,52:54:00:aa:17:01,legacy\n",
        true,
    )
    .unwrap();
    assert_eq!(
        inv.sites[0].boot_mac_address.as_deref(),
        Some("52:54:00:aa:17:01")
    );
    assert_eq!(inv.sites[0].boot_mode.as_deref(), Some("legacy"));
    assert!(
        findings_csv("name,hostname,bootMode\na17,sno-a17,bios\n")[0]
            .contains("line 2 column bootMode")
    );
}
