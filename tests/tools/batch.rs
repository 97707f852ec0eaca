//! End-to-end tests of the batch mode, `ibi create config-image --dir BASE --sites INVENTORY`, on the
//! bundled example fleet: every site's ISO read back (our reader; blkid and xorriso when installed),
//! per-site differences, identity reuse, rebuilding only the sites that changed, a failing site among
//! good ones, inventory errors that write nothing, and the CSV form.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;

use crate::common::registry::versioned_seed;
use crate::common::*;
use serde_json::Value;

use crate::common::batch::*;

#[test]
fn blkid_and_xorriso_read_a_batch_iso() {
    let test = "blkid_and_xorriso_read_a_batch_iso";
    if !(tool("xorriso", test) && tool("blkid", test)) {
        return;
    }
    let base = copy_fleet();
    assert_ok(&batch(base.path(), "sites.yaml", &[]));
    let iso = base.path().join("sites/a19/imagebasedconfig.iso");
    let iso_s = iso.to_str().unwrap();
    let label = run_tool("blkid", &["-p", "-o", "value", "-s", "LABEL", iso_s]);
    assert_eq!(label.trim_end(), "cluster-config");
    let out = tempfile::tempdir().unwrap();
    run_tool(
        "xorriso",
        &[
            "-osirrox",
            "on",
            "-indev",
            iso_s,
            "-extract",
            "/",
            out.path().to_str().unwrap(),
        ],
    );
    let v: Value = serde_json::from_slice(
        &fs::read(out.path().join("cluster-configuration/manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(v["hostname"], "sno-a19");
    assert!(out.path().join("cluster-configuration/manifests").is_dir());
    assert!(
        out.path()
            .join("extra-manifests/50-fleet-configmap.yaml")
            .is_file()
    );
}

/// `--seed` applies to every site: against a seed with a proxy every site of the proxy-less fleet is
/// refused with the seed's value and nothing of theirs is written; against a fitting seed they build,
/// a re-run is unchanged, and another seed re-checks (and rebuilds) every site.
#[test]
fn seed_preflight_applies_to_every_site() {
    let base = copy_fleet();
    // Runs the fleet against a generated seed; every site must end with `result`.
    let run = |seed: &tempfile::TempDir, version: &str, result: &str| {
        let reference = format!("oci:{}:{version}", seed.path().join("seed").display());
        let out = batch(base.path(), "sites.yaml", &["--seed", &reference]);
        let want: Vec<(&str, &str)> = SITES.iter().map(|s| (*s, result)).collect();
        expect_results(&out, &want);
        out
    };
    let out = run(
        &versioned_seed("4.18.0", &[("SEED_HAS_PROXY", "true")]),
        "4.18.0",
        "failed",
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    for site in SITES {
        let want = format!(
            "error: site {site}: {}: proxy: is not set, but the seed has a proxy (seed_cluster_info has_proxy: true)",
            base.path().join("install-config.yaml").display()
        );
        assert!(stderr(&out).contains(&want), "{}", stderr(&out));
        let dir = base.path().join("sites").join(site);
        assert!(!dir.join("imagebasedconfig.iso").exists() && !dir.join(".ibi").exists());
    }
    let seed = versioned_seed("4.18.0", &[]);
    run(&seed, "4.18.0", "created");
    run(&seed, "4.18.0", "unchanged");
    run(&versioned_seed("4.20.0", &[]), "4.20.0", "updated");
}
