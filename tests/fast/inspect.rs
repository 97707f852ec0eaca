//! `ibi inspect` shows what an operator checks before shipping (issue 15, Deliver 6), as text and as
//! `--json`, and never the pull secret: built from the bundled examples, each ISO is inspected both
//! ways and the fields are checked against the inputs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::path::Path;

use crate::common::*;
use serde_json::{Value, json};

/// The examples' fake pull secret auth: must never be shown.
const EXAMPLE_AUTH: &str = "ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk";

/// `inspect ISO` as text and as JSON.
fn inspect(iso: &Path) -> (String, Value) {
    let iso = iso.to_str().unwrap();
    let text = ibi(&["inspect", iso], &[]);
    assert_ok(&text);
    let json = ibi(&["inspect", "--json", iso], &[]);
    assert_ok(&json);
    let text = String::from_utf8(text.stdout).unwrap();
    let raw = String::from_utf8(json.stdout).unwrap();
    assert!(!text.contains(EXAMPLE_AUTH) && !raw.contains(EXAMPLE_AUTH));
    (
        text,
        serde_json::from_str(&raw).expect("--json prints JSON"),
    )
}

#[test]
fn a_configuration_iso_shows_networks_interfaces_ntp_labels_and_mirrors() {
    let site = copy_example();
    assert_ok(&config_image(site.path(), &[]));
    let (text, j) = inspect(&site.path().join("imagebasedconfig.iso"));
    assert_eq!(j["kind"], "configuration");
    assert_eq!(j["hostname"], "sno-a17");
    assert_eq!(j["machine_networks"], json!(["192.168.122.0/23"]));
    assert_eq!(
        j["interfaces"],
        json!(["eth0 52:54:00:aa:17:01: 192.168.122.17/23"])
    );
    assert_eq!(
        j["ntp_servers"],
        json!(["0.rhel.pool.ntp.org", "192.168.122.1"])
    );
    assert_eq!(j["node_labels"]["site.example.com/id"], "a17");
    assert_eq!(j["proxy"], json!({}));
    assert_eq!(j["trust_bundle_certificates"], 0);
    assert_eq!(j["mirrors"].as_array().unwrap().len(), 2, "{j}");
    for want in [
        "  hostname: sno-a17\n",
        "  machine_networks:\n    - 192.168.122.0/23\n",
        "    - eth0 52:54:00:aa:17:01: 192.168.122.17/23\n",
        "  proxy: none\n",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
}

#[test]
fn an_installation_iso_shows_the_seed_its_digest_the_disk_and_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    write_example_install(dir.path());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let base = repo.join("seed-fixtures/coreos-live-synthetic.iso");
    let d = dir.path().to_str().unwrap();
    assert_ok(&ibi(
        &[
            "create",
            "image",
            "--dir",
            d,
            "--base-iso",
            base.to_str().unwrap(),
        ],
        &[],
    ));
    let (text, j) = inspect(&dir.path().join("rhcos-ibi.iso"));
    assert_eq!(j["kind"], "installation");
    assert_eq!(
        j["installationDisk"],
        "/dev/disk/by-id/wwn-0x5000c500a0b1c2d3"
    );
    assert_eq!(j["seedVersion"], "4.16.0");
    assert_eq!(j["shutdown"], false);
    assert!(
        j["seedImage"]
            .as_str()
            .unwrap()
            .ends_with("seed-fixtures/seed:4.16.0")
    );
    // An oci: seed is never pinned: the summary says so rather than leave it out.
    assert_eq!(j["seedPinnedDigest"], Value::Null);
    assert_eq!(
        j["mirrors"],
        json!([
            "quay.io/openshift-release-dev/ocp-release → registry.edge.example.com:5000/openshift-release-dev/ocp-release"
        ])
    );
    assert_eq!(j["networkConfig"], false);
    for want in [
        "Installation:\n",
        "  installationDisk: /dev/disk/by-id/wwn-0x5000c500a0b1c2d3\n",
        "  seedPinnedDigest: none\n",
        "  shutdown: false\n",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
}
