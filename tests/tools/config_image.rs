//! End-to-end tests of `ibi create config-image` on the bundled example: the ISO read back with our
//! own reader and with xorriso, bsdtar and blkid; file modes; determinism; identity reuse; and the
//! crypto relations checked with the openssl CLI.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;

use crate::common::*;
use serde_json::Value;

use crate::common::config_image::*;

#[test]
fn xorriso_bsdtar_and_blkid_agree() {
    let test = "xorriso_bsdtar_and_blkid_agree";
    if !(tool("xorriso", test) && tool("bsdtar", test) && tool("blkid", test)) {
        return;
    }
    let site = copy_example();
    let long = long_manifest_name();
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"long"}}"#;
    fs::write(site.path().join("extra-manifests").join(&long), cm).unwrap();
    assert_ok(&config_image(site.path(), &[]));
    let iso = site.path().join("imagebasedconfig.iso");
    let iso_s = iso.to_str().unwrap();

    let label = run_tool("blkid", &["-p", "-o", "value", "-s", "LABEL", iso_s]);
    assert_eq!(label.trim_end(), "cluster-config");
    let kind = run_tool("blkid", &["-p", "-o", "value", "-s", "TYPE", iso_s]);
    assert_eq!(kind.trim_end(), "iso9660");

    let listing = run_tool("bsdtar", &["-tf", iso_s]);
    assert!(
        listing
            .lines()
            .any(|l| l.trim_end_matches('/') == format!("extra-manifests/{long}")),
        "{listing}"
    );
    assert!(
        listing
            .lines()
            .any(|l| l.trim_end_matches('/') == "cluster-configuration/manifests"),
        "{listing}"
    );

    let out = tempfile::tempdir().unwrap();
    let out_s = out.path().to_str().unwrap();
    run_tool(
        "xorriso",
        &["-osirrox", "on", "-indev", iso_s, "-extract", "/", out_s],
    );
    let extracted =
        fs::read(out.path().join("extra-manifests").join(&long)).expect("long name via xorriso");
    assert_eq!(extracted, cm.as_bytes());
    assert!(out.path().join("cluster-configuration/manifests").is_dir());
    let manifest = fs::read(out.path().join("cluster-configuration/manifest.json")).unwrap();
    let v: Value = serde_json::from_slice(&manifest).unwrap();
    assert_eq!(v["api_version"], 1);

    let pvd = run_tool("xorriso", &["-indev", iso_s, "-pvd_info"]);
    assert!(pvd.contains("Volume Id    : cluster-config"), "{pvd}");
}
