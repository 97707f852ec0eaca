//! Secrets stay where they belong. Every command runs at `--log-level trace` on the bundled examples
//! with a pull secret whose auth carries a unique marker; then stdout, stderr and every file under the
//! test's root (the site and install dirs, HOME, XDG_CACHE_HOME, TMPDIR) are searched for the pull
//! secret, the kubeadmin password and its hash, and every generated private key. Each secret may only
//! appear in the files listed for it below, in any form: raw, inside JSON, or base64-encoded at any
//! offset (Ignition data URLs, kubeconfig `*-data`). Each must also be found where it belongs, so the
//! search is known to work. A second test runs the writers under umask 000, 022 and 077 and checks
//! that every output holding a secret is private; a third reads the seed from a registry that asks
//! for the pull secret (right and wrong), where HTTP-level tracing could show it.
//!
//! The fleet commands run on a fleet of one (`fleet/`: the same inputs, one inventory entry `s`
//! whose BMC password carries a marker too) whose site takes the single site's identity, so the same
//! needles find its keys: `create config-image --sites`, then `create hub-manifests` with its
//! Secrets and as templates (which must hold no secret at all).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use crate::common::*;

use crate::common::secrets::*;

#[test]
fn secrets_stay_in_their_files_at_trace_level() {
    let root = Root::new();
    let auth = write_inputs(&root);
    let ran = run_all(&root);
    let config_log = String::from_utf8_lossy(&ran[2].out.stderr);
    assert!(
        config_log.lines().count() >= 2,
        "trace logging said almost nothing, so this test would prove little:\n{config_log}"
    );
    let secrets = secrets(&root, &auth);
    let mut files = BTreeMap::new();
    files_under(root.dir.path(), root.dir.path(), &mut files);
    let mut leaks = Vec::new();
    let mut found: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (rel, path) in &files {
        assert!(
            !(rel.ends_with(".tmp") && rel.contains("/.")),
            "temp file left behind: {rel}"
        );
        let data = fs::read(path).unwrap();
        for s in &secrets {
            if holds(&data, s) {
                found.entry(&s.name).or_default().push(rel.clone());
                if !s.allowed.contains(rel) {
                    leaks.push(format!("{} in {rel}", s.name));
                }
            }
        }
    }
    for r in &ran {
        for (stream, data) in [("stdout", &r.out.stdout), ("stderr", &r.out.stderr)] {
            let place = format!("{stream} of {}", r.label);
            for s in &secrets {
                if holds(data, s) {
                    found.entry(&s.name).or_default().push(place.clone());
                    if !s.allowed.contains(&place) {
                        leaks.push(format!("{} in {place}", s.name));
                    }
                }
            }
        }
    }
    eprintln!("where each secret was found: {found:#?}");
    assert!(
        leaks.is_empty(),
        "secrets where they must not be:\n{}",
        leaks.join("\n")
    );
    for s in &secrets {
        let at = found.get(s.name.as_str()).cloned().unwrap_or_default();
        assert!(
            at.contains(&s.home),
            "{} not found in {} (found in {at:?}): the search is broken",
            s.name,
            s.home
        );
    }
    // The installation ISO carries the pull secret by design: `inspect --ignition` shows it.
    let shown = found["pull secret auth"].clone();
    assert!(
        shown.contains(&"stdout of inspect --ignition installation ISO".to_string()),
        "{shown:?}"
    );
    // Every output file holding a secret is private (the inputs are the test's own files).
    let inputs = [
        "fleet/install-config.yaml",
        "fleet/bmc-password",
        "site/install-config.yaml",
        "install/image-based-installation-config.yaml",
        "agent/pull-secret.json",
    ];
    for (name, places) in &found {
        for rel in places.iter().filter(|p| files.contains_key(*p)) {
            if !inputs.contains(&rel.as_str()) {
                let m = mode(&files[rel]);
                assert_eq!(m & 0o077, 0, "{rel} holds the {name} with mode {m:o}");
            }
        }
    }
}

#[test]
fn secret_outputs_are_private_under_any_umask() {
    let base_iso =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/coreos-live-synthetic.iso");
    for umask in ["000", "022", "077"] {
        let root = Root::new();
        write_inputs(&root);
        let (site, install) = (root.arg(SITE), root.arg(INSTALL));
        let (tmpl_site, tmpl_install) = (root.arg("tmpl-site"), root.arg("tmpl-install"));
        let runs: [Vec<&str>; 6] = [
            vec!["create", "config-image", "--dir", &site],
            // The rebuild replaces every output: the modes must survive it.
            vec!["create", "config-image", "--dir", &site],
            vec!["create", "config-image", "--dir", &site, "--rotate-crypto"],
            vec![
                "create",
                "image",
                "--dir",
                &install,
                "--base-iso",
                base_iso.to_str().unwrap(),
            ],
            vec!["create", "config-template", "--dir", &tmpl_site],
            vec!["create", "image-config-template", "--dir", &tmpl_install],
        ];
        for args in runs {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            let out = root.ibi(umask, &args);
            assert_ok(&out);
        }
        for (rel, want) in PRIVATE_OUTPUTS {
            let got = mode(&root.path(rel));
            assert_eq!(
                got, want,
                "umask {umask}: {rel} has mode {got:o}, want {want:o}"
            );
        }
        let mut files = BTreeMap::new();
        files_under(root.dir.path(), root.dir.path(), &mut files);
        let stray: Vec<&String> = files
            .keys()
            .filter(|k| k.starts_with("home/") || k.starts_with("cache/") || k.starts_with("tmp/"))
            .collect();
        assert!(
            stray.is_empty(),
            "umask {umask}: files outside the dirs: {stray:?}"
        );
        for f in files.keys() {
            assert!(
                !f.ends_with(".tmp"),
                "umask {umask}: temp file left behind: {f}"
            );
        }
    }
}
