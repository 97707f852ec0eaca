#![cfg(feature = "agent")]
//! Precache against a real `docker-registry` on 127.0.0.1: tiny images (the synthetic seed and a variant)
//! pushed with skopeo, a `containers.list` naming them under another "seed release registry" that the
//! rewrite maps to the local one, and the real skopeo puller copying them into a temporary
//! containers-storage, checked afterwards with `skopeo inspect containers-storage:…`.
//!
//! The storage uses the `vfs` driver: `overlay` works on the host, but containers-storage leaves a private
//! bind mount on `<graphroot>/overlay` behind, which a test's temp dir cannot be removed through.
//! Needs root (containers-storage as another user re-executes itself in a user namespace). Tools or root
//! missing: the test fails, naming them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::registry::{TestRegistry, fixture_seed, make_seed};
use ibi::agent::precache::{
    PrecacheOptions, SkopeoPuller, Storage, image_list, insecure_hosts_from_registries_conf,
    precache, registry_sources_from_registries_conf, should_override,
};
use ibi::agent::state::{Progress, Step};

const SEED_REGISTRY: &str = "quay.example.com";
const RELEASE: &str = "openshift-release-dev/ocp-release";
const ART: &str = "openshift-release-dev/ocp-v4.0-art-dev";
const VARIANT: &str = "edge/variant";

/// A registry holding the seed fixture as `RELEASE:4.16.0` and `ART` (referenced by digest), and a
/// 4.17.0 variant as `VARIANT:4.17.0`; the `containers.list` naming them under `SEED_REGISTRY`.
struct Setup {
    reg: TestRegistry,
    containers_list: String,
    _variant: tempfile::TempDir,
}

fn setup(test: &str) -> Option<Setup> {
    setup_with(test, None)
}

/// Same, with a registry that requires `creds` (user, password) when given.
fn setup_with(test: &str, creds: Option<(&str, &str)>) -> Option<Setup> {
    if !common::require_tools(test, &["docker-registry", "skopeo"]) || !common::require_root(test) {
        return None;
    }
    let reg = match creds {
        Some((user, password)) => TestRegistry::start_with_auth(test, user, password)?,
        None => TestRegistry::start(test)?,
    };
    reg.push(&fixture_seed(), "4.16.0", RELEASE);
    reg.push(&fixture_seed(), "4.16.0", ART);
    let variant = make_seed(&[("SEED_OCP_VERSION", "4.17.0")]);
    reg.push(&variant.path().join("seed"), "4.17.0", VARIANT);
    // `push` copies with `--all`, so the registry's digest is the layout's.
    let index = std::fs::read(fixture_seed().join("index.json")).expect("index.json");
    let index: serde_json::Value = serde_json::from_slice(&index).expect("index JSON");
    let digest = index["manifests"][0]["digest"].as_str().expect("digest");
    let containers_list = format!(
        "{SEED_REGISTRY}/{RELEASE}:4.16.0\n\n{SEED_REGISTRY}/{ART}@{digest}\n{SEED_REGISTRY}/{VARIANT}:4.17.0\n"
    );
    Some(Setup {
        reg,
        containers_list,
        _variant: variant,
    })
}

/// The live host's registries.conf: the local registry is a mirror source and insecure (plain HTTP).
fn registries_conf(reg: &TestRegistry) -> String {
    format!(
        "[[registry]]\nlocation = \"{}\"\ninsecure = true\n",
        reg.addr
    )
}

/// The images to pull, through the same rule the install uses (the seed had mirrors configured).
fn images(setup: &Setup, extra: &str) -> Vec<String> {
    let conf = registries_conf(&setup.reg);
    let sources = registry_sources_from_registries_conf(&conf);
    assert_eq!(sources, std::slice::from_ref(&setup.reg.addr));
    let over = should_override(SEED_REGISTRY, true, &sources);
    assert!(over);
    let list = format!("{}{extra}", setup.containers_list);
    image_list(&list, SEED_REGISTRY, &setup.reg.addr, over)
}

fn vfs_storage(dir: &Path) -> Storage {
    Storage {
        driver: "vfs".to_string(),
        graphroot: dir.join("graph"),
        runroot: dir.join("run"),
    }
}

fn puller(setup: &Setup, dir: &Path) -> SkopeoPuller {
    let auth = dir.join("pull-secret.json");
    std::fs::write(&auth, r#"{"auths":{}}"#).expect("write authfile");
    let insecure = insecure_hosts_from_registries_conf(&registries_conf(&setup.reg));
    SkopeoPuller::new(Some(&auth), vfs_storage(dir), insecure)
}

/// A pull secret for the registry at `addr`.
fn write_authfile(path: &Path, addr: &str, user: &str, password: &str) {
    let auth = openssl::base64::encode_block(format!("{user}:{password}").as_bytes());
    let json = serde_json::json!({"auths": {addr: {"auth": auth}}});
    std::fs::write(path, json.to_string()).expect("write authfile");
}

fn options(best_effort: bool) -> PrecacheOptions {
    PrecacheOptions {
        parallelism: 2,
        attempts: 2,
        backoff: Duration::from_millis(10),
        best_effort,
    }
}

fn progress(dir: &Path) -> Progress {
    let p = Progress::with_intervals(&dir.join("status.json"), Duration::ZERO, Duration::ZERO);
    p.begin(Step::Precache);
    p
}

fn inspect(reference: &str) -> serde_json::Value {
    let out = Command::new("skopeo")
        .args(["inspect", "--tls-verify=false", reference])
        .output()
        .expect("running skopeo inspect");
    assert!(
        out.status.success(),
        "skopeo inspect {reference}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("inspect JSON")
}

/// Every image is in the storage, under its rewritten name, with the registry's digest.
fn assert_stored(storage: &Storage, images: &[String], reg: &TestRegistry) {
    for image in images {
        assert!(image.starts_with(&format!("{}/", reg.addr)), "{image}");
        let reference = storage.reference(image);
        let local = inspect(&reference.to_string_lossy());
        let remote = inspect(&format!("docker://{image}"));
        assert_eq!(local["Digest"], remote["Digest"], "{image}");
    }
}

#[test]
fn precache_pulls_rewritten_images_into_storage() {
    let test = "precache_pulls_rewritten_images_into_storage";
    let Some(setup) = setup(test) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let images = images(&setup, "");
    assert_eq!(images.len(), 3);
    let puller = puller(&setup, dir.path());
    let progress = progress(dir.path());
    let report = precache(&images, &puller, &options(false), &progress).expect("precache");
    assert_eq!(
        (report.total, report.pulled, report.failed.len()),
        (3, 3, 0)
    );
    assert_stored(&puller.storage, &images, &setup.reg);
    let counts = progress.snapshot().images;
    assert_eq!((counts.total, counts.pulled, counts.failed), (3, 3, 0));
}

#[test]
fn precache_missing_image_fails_unless_best_effort() {
    let test = "precache_missing_image_fails_unless_best_effort";
    let Some(setup) = setup(test) else { return };
    let missing = format!("{}/{RELEASE}:9.9.9", setup.reg.addr);
    let images = images(&setup, &format!("{SEED_REGISTRY}/{RELEASE}:9.9.9\n"));
    for best_effort in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let puller = puller(&setup, dir.path());
        let progress = progress(dir.path());
        let result = precache(&images, &puller, &options(best_effort), &progress);
        let counts = progress.snapshot().images;
        assert_eq!((counts.total, counts.pulled, counts.failed), (4, 3, 1));
        assert_stored(&puller.storage, &images[..3], &setup.reg);
        if !best_effort {
            let err = format!("{:#}", result.expect_err("a missing image fails"));
            assert!(
                err.starts_with(&format!(
                    "precache: 1 of 4 images could not be pulled: {missing} (pulling {missing}: `skopeo copy"
                )),
                "{err}"
            );
            assert!(err.contains("manifest unknown"), "{err}");
            continue;
        }
        let report = result.expect("best effort");
        assert_eq!((report.total, report.pulled), (4, 3));
        assert_eq!(report.failed.len(), 1);
        assert_eq!(report.failed[0].0, missing);
    }
}

#[test]
fn precache_verifies_tls_unless_the_host_is_insecure() {
    let test = "precache_verifies_tls_unless_the_host_is_insecure";
    let Some(setup) = setup(test) else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let images = images(&setup, "");
    let mut puller = puller(&setup, dir.path());
    puller.insecure_hosts.clear();
    let progress = progress(dir.path());
    let err = precache(&images[..1], &puller, &options(false), &progress).expect_err("TLS");
    let err = format!("{err:#}");
    assert!(!err.contains("--src-tls-verify=false"), "{err}");
    assert!(
        err.contains("server gave HTTP response to HTTPS client"),
        "{err}"
    );
}

#[test]
fn precache_uses_the_pull_secret() {
    let test = "precache_uses_the_pull_secret";
    let Some(setup) = setup_with(test, Some(("ibi", "s3cret"))) else {
        return;
    };
    let images = images(&setup, "");
    for (password, want_ok) in [("wrong", false), ("s3cret", true)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let puller = puller(&setup, dir.path());
        let authfile = puller.authfile.clone().expect("authfile");
        write_authfile(&authfile, &setup.reg.addr, "ibi", password);
        let progress = progress(dir.path());
        let result = precache(&images, &puller, &options(false), &progress);
        match result {
            Ok(report) => {
                assert!(want_ok, "pulled with a wrong password: {report:?}");
                assert_eq!(report.pulled, 3);
            }
            Err(e) => {
                let e = format!("{e:#}");
                assert!(!want_ok && e.contains("unauthorized"), "{e}");
            }
        }
    }
}
