//! Golden tests of `cluster-configuration/manifest.json`: its key set and types, the values the
//! reference pins down, and the crypto relations checked with the real openssl CLI.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

mod common;

use std::fs;
use std::path::Path;

use common::*;
use ibi::iso9660::IsoReader;
use serde_json::{Map, Value};

fn build_example(edit: impl FnOnce(&Path)) -> (tempfile::TempDir, Value) {
    let site = copy_example();
    edit(site.path());
    assert_ok(&config_image(site.path(), &[]));
    let f = fs::File::open(site.path().join("imagebasedconfig.iso")).unwrap();
    let mut iso = IsoReader::open(f).unwrap();
    let raw = iso
        .read_file("cluster-configuration/manifest.json")
        .unwrap();
    assert_ne!(
        raw.last(),
        Some(&b'\n'),
        "compact JSON without trailing newline, as json.Marshal"
    );
    (site, serde_json::from_slice(&raw).unwrap())
}

/// Replaces every leaf with its JSON type name, keeping keys (sorted) and array shapes.
fn shape(v: &Value) -> Value {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(a) => Value::Array(a.iter().take(1).map(shape).collect()),
        Value::Object(o) => {
            let mut sorted: Vec<_> = o.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                sorted
                    .into_iter()
                    .map(|(k, v)| (k.clone(), shape(v)))
                    .collect::<Map<_, _>>(),
            )
        }
    }
}

#[test]
fn example_manifest_matches_golden_shape() {
    let (_site, m) = build_example(|_| {});
    let golden: Value =
        serde_json::from_str(include_str!("golden/example-manifest-shape.json")).unwrap();
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

fn assert_sorted(v: &serde_yaml_ng::Value, text: &str) {
    match v {
        serde_yaml_ng::Value::Mapping(m) => {
            let keys: Vec<String> = m
                .keys()
                .map(|k| k.as_str().unwrap_or_default().to_string())
                .collect();
            let mut sorted = keys.clone();
            sorted.sort();
            assert_eq!(keys, sorted, "unsorted keys in:\n{text}");
            m.values().for_each(|x| assert_sorted(x, text));
        }
        serde_yaml_ng::Value::Sequence(s) => s.iter().for_each(|x| assert_sorted(x, text)),
        _ => {}
    }
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

/// Splits concatenated PEM certificates.
fn split_pems(bundle: &str) -> Vec<String> {
    let end = "-----END CERTIFICATE-----";
    bundle
        .split_inclusive(end)
        .map(str::trim)
        .filter(|s| s.contains("BEGIN CERTIFICATE"))
        .map(|s| format!("{s}\n"))
        .collect()
}

fn kubeconfig_field(kc: &serde_yaml_ng::Value, path: &[&str]) -> String {
    let mut v = kc;
    for p in path {
        v = match p.parse::<usize>() {
            Ok(i) => &v[i],
            Err(_) => &v[*p],
        };
    }
    v.as_str()
        .unwrap_or_else(|| panic!("{path:?} missing"))
        .to_string()
}

fn b64(s: &str) -> String {
    String::from_utf8(openssl::base64::decode_block(s).unwrap()).unwrap()
}

/// Public key of a cert or a private key, as the openssl CLI prints it.
fn pubkey(dir: &Path, name: &str, pem: &str, is_cert: bool) -> String {
    let p = dir.join(name);
    fs::write(&p, pem).unwrap();
    let p = p.to_str().unwrap();
    if is_cert {
        run_tool("openssl", &["x509", "-in", p, "-noout", "-pubkey"])
    } else {
        run_tool("openssl", &["pkey", "-in", p, "-pubout"])
    }
}

#[test]
fn crypto_relations_hold_under_openssl() {
    let test = "crypto_relations_hold_under_openssl";
    if !tool("openssl", test) {
        return;
    }
    let (site, m) = build_example(|_| {});
    let kc: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&fs::read_to_string(site.path().join("auth/kubeconfig")).unwrap())
            .unwrap();
    assert_eq!(
        kubeconfig_field(&kc, &["clusters", "0", "cluster", "server"]),
        "https://api.sno-a17.edge.example.com:6443"
    );
    let bundle = b64(&kubeconfig_field(
        &kc,
        &["clusters", "0", "cluster", "certificate-authority-data"],
    ));
    let certs = split_pems(&bundle);
    assert_eq!(
        certs.len(),
        4,
        "localhost, service-network, lb and ingress signers"
    );
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let cert_keys: Vec<String> = certs
        .iter()
        .enumerate()
        .map(|(i, c)| pubkey(w, &format!("ca{i}.crt"), c, true))
        .collect();
    let crypto = &m["KubeconfigCryptoRetention"];
    let serving = &crypto["KubeAPICrypto"]["ServingCrypto"];
    // Reference order of the CA bundle: localhost, service network, lb, ingress.
    let keys = [
        &serving["localhost_signer_private_key"],
        &serving["service_network_signer_private_key"],
        &serving["loadbalancer_external_signer_private_key"],
        &crypto["IngresssCrypto"]["ingress_ca"],
    ];
    for (i, k) in keys.iter().enumerate() {
        let pem = k.as_str().unwrap();
        assert!(
            pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"),
            "PKCS#1 expected"
        );
        assert_eq!(
            pubkey(w, &format!("k{i}.key"), pem, false),
            cert_keys[i],
            "key {i} does not match CA cert {i}"
        );
    }
    // The ingress cert's subject is the CN in the manifest.
    let ingress_crt = w.join("ca3.crt");
    let subject = run_tool(
        "openssl",
        &[
            "x509",
            "-in",
            ingress_crt.to_str().unwrap(),
            "-noout",
            "-subject",
        ],
    );
    let cn = crypto["IngresssCrypto"]["ingress_certificate_cn"]
        .as_str()
        .unwrap();
    assert!(
        subject.contains(&format!("CN = {cn}")) || subject.contains(&format!("CN={cn}")),
        "{subject}"
    );
    // The client cert verifies against admin_ca_certificate, and its key matches it.
    let ca = w.join("admin-ca.crt");
    fs::write(
        &ca,
        crypto["KubeAPICrypto"]["ClientAuthCrypto"]["admin_ca_certificate"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let client = w.join("client.crt");
    let client_pem = b64(&kubeconfig_field(
        &kc,
        &["users", "0", "user", "client-certificate-data"],
    ));
    fs::write(&client, &client_pem).unwrap();
    let verify = run_tool(
        "openssl",
        &[
            "verify",
            "-CAfile",
            ca.to_str().unwrap(),
            client.to_str().unwrap(),
        ],
    );
    assert!(verify.trim_end().ends_with(": OK"), "{verify}");
    let client_key = b64(&kubeconfig_field(
        &kc,
        &["users", "0", "user", "client-key-data"],
    ));
    assert_eq!(
        pubkey(w, "client.key", &client_key, false),
        pubkey(w, "client2.crt", &client_pem, true)
    );
    let subj = run_tool(
        "openssl",
        &[
            "x509",
            "-in",
            client.to_str().unwrap(),
            "-noout",
            "-subject",
        ],
    );
    assert!(
        subj.contains("system:masters") && subj.contains("system:admin"),
        "{subj}"
    );
}
