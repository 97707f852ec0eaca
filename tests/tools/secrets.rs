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

use crate::common::registry::{TestRegistry, fixture_seed};

use crate::common::secrets::*;

#[test]
fn registry_credentials_stay_out_of_the_output() {
    let test = "registry_credentials_stay_out_of_the_output";
    let mut rand = [0u8; 12];
    openssl::rand::rand_bytes(&mut rand).unwrap();
    let password: String = rand.iter().map(|b| format!("{b:02x}")).collect();
    let password = format!("IBI-REGISTRY-MARKER-{password}");
    let Some(reg) = TestRegistry::start_with_auth(test, "ibi-secrets-test", &password) else {
        return;
    };
    let reference = reg.push(&fixture_seed(), "4.16.0", "ibi/seed");
    let base_iso =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/coreos-live-synthetic.iso");
    for (right, code) in [(true, 0), (false, 1)] {
        let pass = if right {
            password.clone()
        } else {
            format!("{password}-wrong")
        };
        let auth = openssl::base64::encode_block(format!("ibi-secrets-test:{pass}").as_bytes());
        let root = Root::new();
        write_inputs(&root);
        let config = root.path(INSTALL).join(INSTALL_CONFIG);
        let text = fs::read_to_string(&config).unwrap();
        let seed_line = text
            .lines()
            .find(|l| l.starts_with("seedImage: "))
            .expect("seedImage line");
        let secret_line = text
            .lines()
            .find(|l| l.starts_with("pullSecret: "))
            .expect("pullSecret line");
        let pull_secret = format!(r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#, reg.addr);
        let text = text
            .replace(seed_line, &format!("seedImage: {reference}"))
            .replace(secret_line, &format!("pullSecret: '{pull_secret}'"));
        fs::write(&config, text).unwrap();
        let args = trace(&[
            "create",
            "image",
            "--dir",
            &root.arg(INSTALL),
            "--base-iso",
            base_iso.to_str().unwrap(),
            "--insecure-registry",
            &reg.addr,
        ]);
        let out = root.ibi("022", &args);
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(code),
            "right password {right}: {log}"
        );
        assert!(
            log.lines().count() >= 2,
            "trace logging said almost nothing:\n{log}"
        );
        let secret = Secret {
            name: "registry password".into(),
            needles: [needles(pass.as_bytes()), needles(auth.as_bytes())].concat(),
            allowed: vec![
                format!("{INSTALL}/{INSTALL_CONFIG}"),
                format!("{INSTALL}/rhcos-ibi.iso"),
            ],
            home: format!("{INSTALL}/{INSTALL_CONFIG}"),
        };
        assert!(!holds(&out.stdout, &secret), "in stdout");
        assert!(
            !holds(&out.stderr, &secret),
            "right password {right}: in stderr:\n{log}"
        );
        let mut files = BTreeMap::new();
        files_under(root.dir.path(), root.dir.path(), &mut files);
        let mut found = Vec::new();
        for (rel, path) in &files {
            if holds(&fs::read(path).unwrap(), &secret) {
                found.push(rel.clone());
            }
        }
        assert!(
            found.contains(&secret.home),
            "the search is broken: {found:?}"
        );
        found.retain(|f| !secret.allowed.contains(f));
        assert!(found.is_empty(), "right password {right}: in {found:?}");
        assert_eq!(
            root.path(INSTALL).join("rhcos-ibi.iso").exists(),
            right,
            "an ISO only when the seed could be read"
        );
    }
}
