//! What holds of every finding: all are collected at once, warnings apart, and none repeats a secret.

use super::fixtures::*;

#[test]
fn every_finding_is_collected() {
    let (f, _) =
        run("{seedImage: null, seedVersion: null, architecture: x, extraPartitionStart: ''}");
    assert_eq!(f.len(), 4, "{f:?}");
}

#[test]
fn precache_warning() {
    assert_eq!(
        run("{precacheDisabled: true, precacheBestEffort: true}").1,
        [
            "image-based-installation-config.yaml: precacheBestEffort: has no effect: precacheDisabled is true, so lca-cli ibi does not precache"
        ]
    );
    assert_eq!(
        run("{precacheDisabled: false, precacheBestEffort: true}").1,
        Vec::<String>::new()
    );
}

#[test]
fn findings_never_repeat_secrets() {
    let cases = [
        (
            "pullSecret: '{\"auths\":{\"quay.io\":{\"auth\":\"c2VjcmV0\"}}}'",
            "c2VjcmV0",
        ),
        (
            "pullSecret: '{\"auths\":{\"quay.io\":{\"auth\":\"c2VjcmV0\",\"x\":[hunter2]}}}'",
            "hunter2",
        ),
        ("pullSecret: '{\"auths\": hunter2}'", "hunter2"),
        ("ignitionConfigOverride: '{\"passwd\": hunter2}'", "hunter2"),
        ("proxy: {httpProxy: 'ftp://user:hunter2@p:21'}", "hunter2"),
    ];
    for (patch, secret) in cases {
        let (f, w) = run(patch);
        assert!(!f.is_empty() || !w.is_empty(), "{patch}");
        assert!(
            !f.iter().chain(&w).any(|m| m.contains(secret)),
            "{f:?} {w:?}"
        );
    }
}
