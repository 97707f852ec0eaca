#![cfg(feature = "agent")]
//! The generators of the end-to-end fixtures (issue 4 item 6): `seed-fixtures/make-real-seed.sh`
//! must give an OCI layout skopeo reads, with both lifecycle-agent labels, whose `ostree.tgz` is a
//! real repo holding the commit `rpm-ostree.json` names, and the same digests on a second run;
//! `seed-fixtures/make-metal-image.sh` must give a GPT with the RHCOS partition names and an ostree
//! sysroot in `root` with an `rhcos` deployment. The metal test needs root and loop devices; both
//! need their tools (tests/root and tests/tools). Without them the test fails, naming what is missing.
//! Every mount and loop device the test makes is a guard, undone on failure too.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs;

use crate::common::registry::extract_layer;

use crate::common::seed_fixture_generators::*;

#[test]
fn real_seed_generator() {
    const TEST: &str = "real_seed_generator";
    if !common::require_tools(TEST, &["ostree", "skopeo", "tar", "gzip"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let seed = tmp.path().join("seed");
    let precache = tmp.path().join("precache");
    let printed = run(
        &script("make-real-seed.sh"),
        &[s(&seed), "4.16.0", s(&precache)],
    );
    assert!(printed.starts_with("real seed: "), "{printed}");

    let inspect: serde_json::Value = serde_json::from_str(&run(
        tool("skopeo"),
        &["inspect", &format!("oci:{}:4.16.0", s(&seed))],
    ))
    .unwrap();
    assert_eq!(inspect["Architecture"], "amd64");
    assert_eq!(inspect["Labels"][FORMAT_LABEL], "4");
    let files = tmp.path().join("files");
    extract_layer(&seed, &files);
    let manifest = fs::read_to_string(files.join("manifest.json")).unwrap();
    assert_eq!(inspect["Labels"][SEED_INFO_LABEL], manifest.as_str());
    let info: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    assert_eq!(info["seed_cluster_ocp_version"], "4.16.0");
    assert_eq!(
        info["container_storage_mountpoint_target"],
        "/dev/disk/by-partlabel/var-lib-containers"
    );
    assert_eq!(
        (&info["has_proxy"], &info["mirror_registry_configured"]),
        (&serde_json::json!(false), &serde_json::json!(false))
    );

    check_ostree(&files, tmp.path());
    check_lists(&files, &info, &precache);

    // A second run gives the same image.
    let again = tmp.path().join("again");
    run(&script("make-real-seed.sh"), &[s(&again)]);
    assert_eq!(
        fs::read(seed.join("index.json")).unwrap(),
        fs::read(again.join("index.json")).unwrap(),
        "make-real-seed.sh is not deterministic"
    );
}
