//! A base ISO without hunting (issue 15, Deliver 8): `create image` with no base ISO finds the live ISO
//! through the seed's release payload. The test builds a release payload (one layer holding
//! `release-manifests/0000_50_installer_coreos-bootimages.yaml`, whose stream names an ISO served on
//! 127.0.0.1) and pushes it to a local docker-registry; a seed whose `containers.list` names it is
//! found automatically, and `--release-image` names it directly. With the payload unreachable the error
//! lists the three ways to give a base ISO. A 5.x payload (issue 23) carries both the rhel-9 and the
//! rhel-10 stream (`data.streams`, with rhel-9 the default `data.stream`, as the installer's
//! generator writes it): a 5.0 seed gets the RHEL 10 live ISO.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs;

use crate::common::registry::{TestRegistry, make_seed};
use crate::common::*;
use ibi::live_iso::synthetic::{IgnitionLayout, SyntheticIso};

use crate::common::release_base_iso::*;

#[test]
fn the_base_iso_comes_from_the_seeds_release_payload() {
    let Some(registry) = TestRegistry::start("the_base_iso_comes_from_the_seeds_release_payload")
    else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let iso = work.path().join("live.iso");
    SyntheticIso::new(IgnitionLayout::WholeFile, true)
        .write(fs::File::create(&iso).unwrap())
        .unwrap();
    let iso_bytes = fs::read(&iso).unwrap();
    let url = format!("{}/{ISO_NAME}", serve(iso_bytes.clone()));
    let layout = work.path().join("release");
    release_layout(
        &layout,
        "4.16.0-x86_64",
        &stream(&url, &deliver::sha256(&iso_bytes)),
    );
    let release = registry.push(&layout, "4.16.0-x86_64", "ocp/release");
    let insecure = registry.addr.clone();

    // Found through the seed's containers.list.
    let list = format!(
        "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:{}\n{release}\n",
        "1".repeat(64)
    );
    let seed = make_seed(&[("SEED_CONTAINERS_LIST", list.as_str())]);
    let seed_ref = format!("oci:{}:4.16.0", seed.path().join("seed").display());
    let site = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = create_image(
        site.path(),
        &seed_ref,
        cache.path(),
        &["--insecure-registry", &insecure],
    );
    assert_ok(&out);
    assert!(site.path().join("rhcos-ibi.iso").exists());
    let cached = cache.path().join("ibi/image_cache").join(ISO_NAME);
    assert_eq!(
        fs::read(&cached).unwrap(),
        iso_bytes,
        "downloaded with its sha256 into the cache"
    );

    // Named with --release-image (the seed's list names nothing reachable).
    let site = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let fixture = format!("oci:{}:4.16.0", registry::fixture_seed().display());
    let args = [
        "--insecure-registry",
        &insecure,
        "--release-image",
        &release,
    ];
    assert_ok(&create_image(site.path(), &fixture, cache.path(), &args));
    assert!(site.path().join("rhcos-ibi.iso").exists());
}

#[test]
fn a_5_0_seed_gets_the_rhel_10_stream_of_its_release_payload() {
    let Some(registry) =
        TestRegistry::start("a_5_0_seed_gets_the_rhel_10_stream_of_its_release_payload")
    else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    // One RHCOS-shaped live ISO per stream, each served on its own port under the installer's name.
    let mut streams = Vec::new();
    let mut isos = Vec::new();
    for (name, release) in [("rhel-9", "9.8.20260428-0"), ("rhel-10", "10.2.20260715-0")] {
        let bytes = SyntheticIso::rhcos(IgnitionLayout::WholeFile, true, release)
            .to_vec()
            .unwrap();
        let file = format!("rhcos-{release}-live-iso.x86_64.iso");
        let url = format!("{}/{file}", serve(bytes.clone()));
        streams.push((name, stream(&url, &deliver::sha256(&bytes))));
        isos.push((file, bytes));
    }
    let layout = work.path().join("release");
    multi_stream_release_layout(&layout, "5.0.0-x86_64", "5.0.0", &streams);
    let release = registry.push(&layout, "5.0.0-x86_64", "ocp/release");
    let list = format!("{release}\n");
    let seed = common::registry::versioned_seed(
        "5.0.0",
        &[
            ("SEED_CONTAINERS_LIST", list.as_str()),
            ("SEED_CREATED", "2026-08-10T12:00:00Z"),
            ("SEED_CA_TRUST_AFTER", "1"),
        ],
    );
    let seed_ref = format!("oci:{}:5.0.0", seed.path().join("seed").display());
    let site = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let insecure = registry.addr.clone();
    let out = create_image_of(
        site.path(),
        &seed_ref,
        "5.0.0",
        cache.path(),
        &["--insecure-registry", &insecure, "--log-level", "info"],
    );
    assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "base ISO from the CoreOS stream rhel-10 of {release}"
        )),
        "{err}"
    );
    let cache_dir = cache.path().join("ibi/image_cache");
    let (rhel9, _) = &isos[0];
    let (rhel10, rhel10_bytes) = &isos[1];
    assert_eq!(
        fs::read(cache_dir.join(rhel10)).ok().as_ref(),
        Some(rhel10_bytes),
        "the RHEL 10 live ISO was downloaded"
    );
    assert!(
        !cache_dir.join(rhel9).exists(),
        "not the default rhel-9 one"
    );
    assert!(site.path().join("rhcos-ibi.iso").exists());
}
