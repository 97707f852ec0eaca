//! `create config-image --seed`: the example site checked against seeds of 4.16, 4.17, 4.18 and 4.20
//! made by `seed-fixtures/make-seed.sh` (labels in each release's shape), before anything is written;
//! and a registry seed read with the site's pull secret and digest mirrors from a local registry.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common::*;

use crate::common::config_image_seed::*;

#[test]
fn a_bad_reference_or_an_unreadable_seed_is_an_error() {
    let site = copy_example();
    let out = config_image(site.path(), &["--seed", "oci:"]);
    let errors = refused(site.path(), &out);
    assert!(
        errors[0].contains("--seed: invalid seed image \"oci:\""),
        "{errors:?}"
    );
    let out = config_image(site.path(), &["--seed", "oci:/nonexistent/ibi-seed:4.20.0"]);
    let errors = refused(site.path(), &out);
    assert!(
        errors[0].contains("reading the seed image oci:/nonexistent/ibi-seed:4.20.0 (--seed)"),
        "{errors:?}"
    );
}
