//! Golden tests of `cluster-configuration/manifest.json`: its key set and types, the values the
//! reference pins down, and the crypto relations checked with the real openssl CLI.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;

use crate::common::*;

use crate::common::config_manifest::*;

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
