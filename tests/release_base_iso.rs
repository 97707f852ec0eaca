//! A base ISO without hunting (issue 15, Deliver 8): `create image` with no base ISO finds the live ISO
//! through the seed's release payload. The test builds a release payload (one layer holding
//! `release-manifests/0000_50_installer_coreos-bootimages.yaml`, whose stream names an ISO served on
//! 127.0.0.1) and pushes it to a local docker-registry; a seed whose `containers.list` names it is
//! found automatically, and `--release-image` names it directly. With the payload unreachable the error
//! lists the three ways to give a base ISO. A 5.x payload (issue 23) carries both the rhel-9 and the
//! rhel-10 stream (`data.streams`, with rhel-9 the default `data.stream`, as the installer's
//! generator writes it): a 5.0 seed gets the RHEL 10 live ISO.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;

use common::registry::{TestRegistry, make_seed};
use common::*;
use ibi::live_iso::synthetic::{IgnitionLayout, SyntheticIso};

const ISO_NAME: &str = "rhcos-live.x86_64.iso";

/// Serves `body` to every GET on 127.0.0.1 until the test process ends; returns the base URL.
fn serve(body: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(&body);
        }
    });
    format!("http://{addr}")
}

/// An OCI layout `dir` holding a one-layer release payload tagged `tag` whose one file is the
/// coreos-bootimages ConfigMap `yaml`.
fn bootimages_layout(dir: &Path, tag: &str, yaml: &str) {
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(yaml.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append_data(
        &mut h,
        "release-manifests/0000_50_installer_coreos-bootimages.yaml",
        yaml.as_bytes(),
    )
    .unwrap();
    common::registry::one_layer_layout(dir, tag, &tar.into_inner().unwrap());
}

/// An OCI layout `dir` holding a one-layer release payload tagged `tag` whose coreos-bootimages
/// ConfigMap carries `stream`.
fn release_layout(dir: &Path, tag: &str, stream: &str) {
    let indented: String = stream.lines().map(|l| format!("    {l}\n")).collect();
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coreos-bootimages\n  namespace: openshift-machine-config-operator\ndata:\n  stream: |\n{indented}"
    );
    bootimages_layout(dir, tag, &yaml);
}

/// An OCI layout `dir` holding a release payload of `version` whose coreos-bootimages ConfigMap is
/// shaped as installer `hack/build-coreos-manifest.go` writes it with several streams: `data.stream`
/// the rhel-9 one, `data.streams` a JSON object of every stream by name.
fn multi_stream_release_layout(dir: &Path, tag: &str, version: &str, streams: &[(&str, String)]) {
    let indent = |text: &str| -> String { text.lines().map(|l| format!("    {l}\n")).collect() };
    let default = &streams.iter().find(|(n, _)| *n == "rhel-9").unwrap().1;
    let all: serde_json::Map<String, serde_json::Value> = streams
        .iter()
        .map(|(n, j)| (n.to_string(), serde_json::from_str(j).unwrap()))
        .collect();
    let all = serde_json::to_string_pretty(&all).unwrap();
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coreos-bootimages\n  namespace: openshift-machine-config-operator\ndata:\n  releaseVersion: {version}\n  stream: |\n{}  streams: |\n{}",
        indent(default),
        indent(&all)
    );
    bootimages_layout(dir, tag, &yaml);
}

/// The stream metadata naming the ISO at `url` with `sha256`.
fn stream(url: &str, sha256: &str) -> String {
    format!(
        r#"{{"stream":"rhcos-test","architectures":{{"x86_64":{{"artifacts":{{"metal":{{"formats":{{"iso":{{"disk":{{"location":"{url}","sha256":"{sha256}"}}}}}}}}}}}}}}}}"#
    )
}

/// `create image` in `dir` (seed `seed`) with a cache of its own and `extra` options.
fn create_image(dir: &Path, seed: &str, cache: &Path, extra: &[&str]) -> Output {
    create_image_of(dir, seed, "4.16.0", cache, extra)
}

/// `create image` for a seed of `version`.
fn create_image_of(dir: &Path, seed: &str, version: &str, cache: &Path, extra: &[&str]) -> Output {
    let text = write_example_install(dir);
    let line = text.lines().find(|l| l.starts_with("seedImage:")).unwrap();
    let text = text.replace(line, &format!("seedImage: {seed}"));
    let line = text
        .lines()
        .find(|l| l.starts_with("seedVersion:"))
        .unwrap();
    let text = text.replace(line, &format!("seedVersion: {version}"));
    fs::write(dir.join("image-based-installation-config.yaml"), text).unwrap();
    let mut args = vec!["create", "image", "--dir", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    ibi(&args, &[("XDG_CACHE_HOME", cache.to_str().unwrap())])
}

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

#[test]
fn an_unreachable_release_payload_lists_the_three_ways() {
    let site = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let fixture = format!("oci:{}:4.16.0", registry::fixture_seed().display());
    let args = ["--release-image", "127.0.0.1:1/ocp/release:4.16.0"];
    let out = create_image(site.path(), &fixture, cache.path(), &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no base ISO given, and the seed's release payload gave none (reading the release payload 127.0.0.1:1/ocp/release:4.16.0"),
        "{err}"
    );
    for way in [
        "--base-iso PATH|URL",
        "OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE=URL",
        "--coreos-stream FILE|URL",
        "--release-image REF",
    ] {
        assert!(err.contains(way), "{way}: {err}");
    }
    assert!(!site.path().join("rhcos-ibi.iso").exists());
}

#[test]
fn a_bad_release_image_reference_is_refused_before_any_network() {
    let site = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    // The seed's registry does not answer: the option is checked before it is asked.
    let out = create_image(
        site.path(),
        "127.0.0.1:1/s/seed:4.16.0",
        cache.path(),
        &["--release-image", "Not A Ref"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("error: --release-image: "), "{err}");
}
