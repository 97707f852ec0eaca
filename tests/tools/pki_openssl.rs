//! Cross-checks `ibi::config_image::pki` output with the real `openssl` command line, an implementation independent of
//! the crate's own parsing: chain verification, printed subjects and extensions, key checks and moduli.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::SystemTime;

use ibi::config_image::pki::{CertKey, SiteCrypto, generate_site_crypto};

/// Runs `openssl` with `args` in `dir`, asserts success and returns stdout.
fn openssl(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("running openssl");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "openssl {args:?} failed: {stderr}");
    String::from_utf8(out.stdout).expect("openssl output is UTF-8")
}

/// File stem, pair and the subject as `openssl x509 -subject` prints it.
fn objects(c: &SiteCrypto) -> Vec<(&'static str, &CertKey, String)> {
    vec![
        (
            "admin_ca",
            &c.admin_kubeconfig_signer,
            "subject=OU = openshift, CN = admin-kubeconfig-signer".into(),
        ),
        (
            "client",
            &c.admin_kubeconfig_client,
            "subject=O = system:masters, CN = system:admin".into(),
        ),
        (
            "localhost",
            &c.kube_apiserver_localhost_signer,
            "subject=OU = openshift, CN = kube-apiserver-localhost-signer".into(),
        ),
        (
            "service_network",
            &c.kube_apiserver_service_network_signer,
            "subject=OU = openshift, CN = kube-apiserver-service-network-signer".into(),
        ),
        (
            "lb",
            &c.kube_apiserver_lb_signer,
            "subject=OU = openshift, CN = kube-apiserver-lb-signer".into(),
        ),
        (
            "ingress",
            &c.ingress_operator_signer,
            format!("subject=CN = {}", c.ingress_certificate_cn),
        ),
    ]
}

/// Extension and algorithm lines as `openssl x509 -text` prints them.
fn check_text(d: &Path) {
    let ca = openssl(d, &["x509", "-noout", "-text", "-in", "admin_ca.crt"]);
    let client = openssl(d, &["x509", "-noout", "-text", "-in", "client.crt"]);
    for (text, needle) in [
        (&ca, "Signature Algorithm: sha256WithRSAEncryption"),
        (&ca, "Public-Key: (2048 bit)"),
        (&ca, "Exponent: 65537 (0x10001)"),
        (
            &ca,
            "X509v3 Key Usage: critical\n                Digital Signature, Key Encipherment, Certificate Sign",
        ),
        (
            &ca,
            "X509v3 Basic Constraints: critical\n                CA:TRUE",
        ),
        (&ca, "X509v3 Subject Key Identifier"),
        (&client, "Signature Algorithm: sha256WithRSAEncryption"),
        (
            &client,
            "X509v3 Key Usage: critical\n                Digital Signature, Key Encipherment",
        ),
        (
            &client,
            "X509v3 Extended Key Usage: \n                TLS Web Server Authentication, TLS Web Client Authentication",
        ),
        (
            &client,
            "X509v3 Basic Constraints: critical\n                CA:FALSE",
        ),
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    assert!(
        !ca.contains("Authority Key Identifier"),
        "self-signed CA has an AKI:\n{ca}"
    );
    let ski = section_value(&ca, "X509v3 Subject Key Identifier");
    assert_eq!(
        section_value(&client, "X509v3 Authority Key Identifier"),
        ski,
        "client AKI != signer SKI"
    );
}

/// The first line after `header` in `-text` output, trimmed (and without OpenSSL 1.x's `keyid:` prefix).
fn section_value(text: &str, header: &str) -> String {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(header));
    lines
        .next()
        .unwrap_or_else(|| panic!("no {header} in\n{text}"));
    let value = lines.next().unwrap_or_default().trim();
    value.strip_prefix("keyid:").unwrap_or(value).to_owned()
}

#[test]
fn openssl_cli_accepts_the_site_crypto() {
    if !common::tool("openssl", "openssl_cli_accepts_the_site_crypto") {
        return;
    }
    let c = generate_site_crypto(SystemTime::now()).expect("generating site crypto");
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    for (stem, pair, subject) in objects(&c) {
        let (crt, key) = (format!("{stem}.crt"), format!("{stem}.key"));
        std::fs::write(d.join(&crt), &pair.cert_pem).unwrap();
        std::fs::write(d.join(&key), &pair.key_pem).unwrap();
        assert_eq!(
            openssl(d, &["x509", "-noout", "-subject", "-in", &crt]).trim_end(),
            subject,
            "{stem}"
        );
        assert_eq!(
            openssl(d, &["rsa", "-check", "-noout", "-in", &key]).trim_end(),
            "RSA key ok",
            "{stem}"
        );
        let key_modulus = openssl(d, &["rsa", "-noout", "-modulus", "-in", &key]);
        let cert_modulus = openssl(d, &["x509", "-noout", "-modulus", "-in", &crt]);
        assert!(key_modulus.starts_with("Modulus="), "{stem}: {key_modulus}");
        assert_eq!(
            key_modulus, cert_modulus,
            "{stem}: key and certificate moduli differ"
        );
        if stem != "client" {
            let verified = openssl(d, &["verify", "-CAfile", &crt, &crt]);
            assert_eq!(
                verified.trim_end(),
                format!("{crt}: OK"),
                "{stem} is not a valid self-signed CA"
            );
        }
    }
    let verified = openssl(
        d,
        &[
            "verify",
            "-CAfile",
            "admin_ca.crt",
            "-purpose",
            "sslclient",
            "client.crt",
        ],
    );
    assert_eq!(verified.trim_end(), "client.crt: OK");
    // The same client must not verify against a serving signer.
    let out = Command::new("openssl")
        .args(["verify", "-CAfile", "lb.crt", "client.crt"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "client.crt verified against the LB signer"
    );
    check_text(d);
}
