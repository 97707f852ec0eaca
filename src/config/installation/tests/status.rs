//! Where the host reports: `statusURL`, and `statusCA` read from its file or inline.

use super::fixtures::*;
use crate::config::installation::*;

#[test]
fn status_url_rules() {
    check(&[
        ("statusURL: https://192.0.2.10:8443", &[]),
        ("statusURL: https://ibi.example/prefix/", &[]),
        (
            "statusURL: not a url",
            &[
                "statusURL: invalid value \"not a url\": not a URL (relative URL without a base); give the base URL of `ibi serve`, e.g. https://192.0.2.10:8443",
            ],
        ),
        (
            "statusURL: ftp://h",
            &["statusURL: invalid value \"ftp://h\": must be an https (or http) URL"],
        ),
        (
            "statusURL: https://u:MARKER@h",
            &[
                "statusURL: invalid value: must not carry credentials: the host sends its report token in a header",
            ],
        ),
        (
            "statusURL: https://h/?x=1",
            &[
                "statusURL: invalid value \"https://h/?x=1\": must not have a query or fragment: reports go to <statusURL>/reports",
            ],
        ),
        (
            "statusCA: ca.pem",
            &["statusCA: only used with statusURL: set statusURL or remove statusCA"],
        ),
        (
            "{statusURL: 'http://h:8080', statusCA: ca.pem}",
            &["statusCA: only used with an https statusURL: use https or remove statusCA"],
        ),
    ]);
    let (f, w) = run("statusURL: http://h:8080");
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(
        w,
        [
            "image-based-installation-config.yaml: statusURL: is plain http: the reports and their token travel unencrypted; prefer https"
        ]
    );
}

#[test]
fn status_ca_is_read_from_its_file_or_inline_and_must_hold_a_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let key = openssl::pkey::PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap()).unwrap();
    let mut name = openssl::x509::X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", "ibi serve").unwrap();
    let name = name.build();
    let mut b = openssl::x509::X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    let day = |n| openssl::asn1::Asn1Time::days_from_now(n).unwrap();
    b.set_not_before(&day(0)).unwrap();
    b.set_not_after(&day(1)).unwrap();
    b.set_pubkey(&key).unwrap();
    b.sign(&key, openssl::hash::MessageDigest::sha256())
        .unwrap();
    let pem = String::from_utf8(b.build().to_pem().unwrap()).unwrap();
    write(tmp.path(), "ca.pem", pem.as_bytes());
    let config = |ca: &str| {
        format!(
            "{}statusURL: https://192.0.2.10:8443\nstatusCA: {ca}\n",
            base()
        )
    };
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        config("ca.pem").as_bytes(),
    );
    let inputs = load_installation_inputs(tmp.path()).unwrap();
    assert_eq!(inputs.status_ca_pem.as_deref(), Some(pem.as_str()));
    let inline = config(&format!("|\n  {}", pem.trim_end().replace('\n', "\n  ")));
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        inline.as_bytes(),
    );
    let inputs = load_installation_inputs(tmp.path()).unwrap();
    assert_eq!(inputs.status_ca_pem.as_deref(), Some(pem.as_str()));
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        config("missing.pem").as_bytes(),
    );
    let f = load_findings(tmp.path());
    assert_eq!(
        f,
        [format!(
            "image-based-installation-config.yaml: statusCA: reading {}/missing.pem: No such file or directory (os error 2)",
            tmp.path().display()
        )]
    );
    write(tmp.path(), "bad.pem", b"not a certificate");
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        config("bad.pem").as_bytes(),
    );
    assert_eq!(
        load_findings(tmp.path()),
        [
            "image-based-installation-config.yaml: statusCA: holds no PEM certificate: give the CA of ibi serve's certificate, as a file path or inline PEM"
        ]
    );
}
