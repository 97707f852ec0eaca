//! A base ISO without hunting (issue 15, Deliver 8): `create image` with no base ISO finds the live ISO
//! through the seed's release payload. The test builds a release payload (one layer holding
//! `release-manifests/0000_50_installer_coreos-bootimages.yaml`, whose stream names an ISO served on
//! 127.0.0.1) and pushes it to a local docker-registry; a seed whose `containers.list` names it is
//! found automatically, and `--release-image` names it directly. With the payload unreachable the error
//! lists the three ways to give a base ISO. A 5.x payload (issue 23) carries both the rhel-9 and the
//! rhel-10 stream (`data.streams`, with rhel-9 the default `data.stream`, as the installer's
//! generator writes it): a 5.0 seed gets the RHEL 10 live ISO.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common::*;

use crate::common::release_base_iso::*;

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

/// `OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE` is read from the environment of `create image` (set on the
/// child: no test sets its own process's environment) and checked before the seed is: a missing file
/// it names is the error, naming the variable.
#[test]
fn the_os_image_override_is_read_from_the_environment() {
    let site = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let missing = site.path().join("no-such-live.iso");
    write_example_install(site.path());
    let dir = site.path().to_str().unwrap();
    let out = ibi(
        &["create", "image", "--dir", dir],
        &[
            ("XDG_CACHE_HOME", cache.path().to_str().unwrap()),
            (
                "OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE",
                missing.to_str().unwrap(),
            ),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("error: OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE: ")
            && err.contains("no-such-live.iso"),
        "{err}"
    );
    assert!(!site.path().join("rhcos-ibi.iso").exists());
}
