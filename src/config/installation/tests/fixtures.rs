//! What the tests of `image-based-installation-config.yaml` share: a base config that every case
//! patches, the rendered findings and warnings of a patch, and the files of a directory to load.

use std::path::Path;

use crate::config::installation::*;
use crate::config::tests::{patched, render};

const PULL_SECRET: &str = r#"{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}"#;

/// A 4.20 seed's lca-cli honours every key, so each field rule is tested alone; older seeds are in
/// `seed_version_rules`.
pub fn base() -> String {
    format!(
        "seedImage: quay.io/openshift-kni/seed-image:4.20.0\nseedVersion: 4.20.0\n\
         installationDisk: /dev/vda\npullSecret: '{PULL_SECRET}'\n"
    )
}

/// The findings and warnings of the base config with `patch` applied (`key: null` removes a key).
pub fn run(patch: &str) -> (Vec<String>, Vec<String>) {
    let text = patched(&base(), patch);
    let c = parse_installation_config(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (f, w) = validate_installation_config(&c);
    (render(&f), w)
}

pub fn check(cases: &[(&str, &[&str])]) {
    for (patch, want) in cases {
        let want: Vec<String> = want
            .iter()
            .map(|w| format!("{IMAGE_BASED_INSTALLATION_CONFIG_FILE}: {w}"))
            .collect();
        assert_eq!(run(patch).0, want, "patch: {patch}");
    }
}

pub fn write(dir: &Path, name: &str, content: &[u8]) {
    std::fs::write(dir.join(name), content).unwrap();
}

pub fn load_findings(dir: &Path) -> Vec<String> {
    let err = load_installation_inputs(dir).unwrap_err();
    render(&err.downcast_ref::<ValidationError>().unwrap().findings)
}
