//! Golden tests of `cluster-configuration/manifest.json`: its key set and types, the values the
//! reference pins down, and the crypto relations checked with the real openssl CLI.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;

use crate::common::*;
use serde_json::Value;

use crate::common::config_manifest::*;

#[test]
fn example_manifest_matches_golden_shape() {
    let (_site, m) = build_example(|_| {});
    let golden: Value =
        serde_json::from_str(include_str!("../golden/example-manifest-shape.json")).unwrap();
    assert_eq!(
        shape(&m),
        golden,
        "got:\n{}",
        serde_json::to_string_pretty(&shape(&m)).unwrap()
    );
}

#[test]
fn example_manifest_values() {
    let (site, m) = build_example(|_| {});
    assert_eq!(m["api_version"], 1);
    assert_eq!(m["base_domain"], "edge.example.com");
    assert_eq!(m["cluster_name"], "sno-a17");
    assert_eq!(m["hostname"], "sno-a17");
    assert_eq!(m["release_registry"], "registry.edge.example.com:5000");
    assert_eq!(
        m["machine_networks"],
        serde_json::json!(["192.168.122.0/23"])
    );
    // Seeds 4.16-4.19 read only this one (lifecycle-agent-versions.md).
    assert_eq!(m["machine_network"], "192.168.122.0/23");
    let chrony = m["chrony_config"].as_str().unwrap();
    assert!(
        chrony.starts_with("\npool 0.rhel.pool.ntp.org iburst\n"),
        "{chrony:?}"
    );
    assert!(
        chrony.ends_with("\nserver 0.rhel.pool.ntp.org iburst\nserver 192.168.122.1 iburst"),
        "{chrony:?}"
    );
    let infra = m["infra_id"].as_str().unwrap();
    assert!(
        infra.starts_with("sno-a17-") && infra.len() == "sno-a17-".len() + 5,
        "{infra}"
    );
    let id = m["cluster_id"].as_str().unwrap();
    assert_eq!(id.len(), 36);
    assert_eq!(&id[14..15], "4", "UUIDv4: {id}");
    let hash = m["kubeadmin_password_hash"].as_str().unwrap();
    assert!(hash.starts_with("$2a$10$"), "{hash}");
    let cn = m["KubeconfigCryptoRetention"]["IngresssCrypto"]["ingress_certificate_cn"]
        .as_str()
        .unwrap();
    let secs = cn.strip_prefix("ingress-operator@").expect(cn);
    assert!(secs.parse::<u64>().is_ok(), "{cn}");
    // The bundle is absent in the example: all three keys present and empty.
    assert_eq!(
        m["additionalTrustBundle"],
        serde_json::json!({"userCaBundle": "", "proxyConfigmapName": "", "proxyConfigmapBundle": ""})
    );
    assert!(m.get("proxy").is_none(), "no proxy in the example");
    // raw_nm_state_config is YAML whose keys are sorted at every level.
    let nm = m["raw_nm_state_config"].as_str().unwrap();
    let parsed: serde_yaml_ng::Value = serde_yaml_ng::from_str(nm).unwrap();
    assert_sorted(&parsed, nm);
    // The password file's hash matches.
    let pw = fs::read_to_string(site.path().join("auth/kubeadmin-password")).unwrap();
    assert!(bcrypt::verify(&pw, hash).unwrap());
}

#[test]
fn machine_network_is_the_first_cidr_of_a_dual_stack_site() {
    let (_site, m) = build_example(|d| {
        let p = d.join("install-config.yaml");
        let t = fs::read_to_string(&p).unwrap().replace(
            "    - cidr: 192.168.122.0/23\n",
            "    - cidr: fd00:122::/64\n    - cidr: 192.168.122.0/23\n",
        );
        fs::write(&p, t).unwrap();
    });
    assert_eq!(
        m["machine_networks"],
        serde_json::json!(["fd00:122::/64", "192.168.122.0/23"])
    );
    assert_eq!(m["machine_network"], "fd00:122::/64");
}

#[test]
fn proxy_and_trust_bundle_policy_reach_the_manifest() {
    let ca = self_signed_ca_pem("test-ca");
    let (_site, m) = build_example(|d| {
        let p = d.join("install-config.yaml");
        let mut t = fs::read_to_string(&p).unwrap();
        t.push_str("proxy:\n  httpProxy: http://proxy.example.com:3128\n  noProxy: .example.com,10.0.0.0/8\n");
        t.push_str("additionalTrustBundlePolicy: Proxyonly\nadditionalTrustBundle: |\n");
        for l in ca.lines() {
            t.push_str(&format!("  {l}\n"));
        }
        fs::write(&p, t).unwrap();
    });
    assert_eq!(
        m["proxy"],
        serde_json::json!({"httpProxy": "http://proxy.example.com:3128", "noProxy": ".example.com,10.0.0.0/8"})
    );
    let tb = &m["additionalTrustBundle"];
    assert_eq!(
        tb["userCaBundle"].as_str().unwrap().trim_end(),
        ca.trim_end()
    );
    assert_eq!(tb["proxyConfigmapName"], "user-ca-bundle");
    assert_eq!(tb["proxyConfigmapBundle"], tb["userCaBundle"]);
}
