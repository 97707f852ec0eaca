//! `ibi watch` against a stand-in for kube-apiserver (tests/common/kubeapi.rs): a site built by
//! `ibi create config-image` from the bundled example, so the kubeconfig, its CA bundle, the admin
//! client certificate and the signers are the real ones; the stand-in serves with a certificate
//! signed by the site's load-balancer signer (manifest.json's `loadbalancer_external_signer_private_key`,
//! with the certificate of the kubeconfig's CA bundle that key belongs to) and requires client
//! certificates signed by manifest.json's `admin_ca_certificate`, as the reconfigured cluster is
//! given them. The site's kubeconfig is pointed at
//! the stand-in's address (its `server:` line only), as DNS would point `api.<cluster>.<domain>` at
//! the host. Debian's kubectl, run with the same kubeconfig, must agree with ibi's verdicts.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs;
use std::process::{Command, Stdio};

use crate::common::kubeapi::{self, MARKER_CREATED, SEED_TIME, StandIn, Tls};
use crate::common::*;
use serde_json::Value;

use crate::common::deliver_watch::*;

/// The watch follows the cluster from the seed's state to ready: one line per milestone in order,
/// the stale seed answers never counted, exit 0, and no secret in anything it printed.
#[test]
fn watch_follows_the_cluster_until_ready_part_way() {
    let site = Site::build();
    let api = StandIn::start(&site.cluster_tls(), site.seed_state());
    site.point_at(&api.url());
    let mut child = Command::new(env!("CARGO_BIN_EXE_ibi"))
        .args(["watch", "--dir", site.path().to_str().unwrap()])
        .args([
            "--timeout",
            "120",
            "--interval",
            "0.1",
            "--log-level",
            "debug",
        ])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The seed's state for a few looks: its Available ClusterVersion and Ready node must not count.
    assert!(api.wait_for("/readyz", 3, PATIENCE), "{:?}", api.log());
    api.set(|c| {
        c.readyz_ok = true;
        c.marker = Some(kubeapi::marker(&site.built_at, MARKER_CREATED));
    });
    // The marker is there, but ClusterVersion still carries the seed's ID and the node is the seed's.
    let cv_path = "/apis/config.openshift.io/v1/clusterversions/version";
    let seen = api.count(cv_path);
    assert!(api.wait_for(cv_path, seen + 3, PATIENCE));
    // Two whole looks at least saw the marker with the seed's answers: had they counted, the
    // watch would have ended ready by now.
    assert!(
        child.try_wait().unwrap().is_none(),
        "the watch ended on the seed's answers"
    );
    api.set(|c| *c = site.ready());
    let out = wait_child(child);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");

    // One line per milestone as it first held. The stand-in changes between two calls of a look
    // as it likes, so only what the rules fix is checked of the order: the API first, the marker
    // before what it vouches for.
    let firsts: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("20") && !l.contains("not yet:") && !l.contains("lost:"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    let mut sorted = firsts.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        ["api", "clusterversion", "configuration", "node", "readyz"],
        "{stdout}"
    );
    let at = |m: &str| firsts.iter().position(|f| *f == m).unwrap();
    assert_eq!(at("api"), 0, "{stdout}");
    assert!(at("configuration") < at("clusterversion"), "{stdout}");
    assert!(at("configuration") < at("node"), "{stdout}");
    assert!(
        stdout.contains("clusterversion  Available=True, Progressing=False (version 4.18.3)"),
        "{stdout}"
    );
    assert!(stdout.contains("node            sno-a17 Ready"), "{stdout}");
    assert!(stdout.contains("\nready: "), "{stdout}");
    // The summary table gives each milestone its first time.
    for m in ["api", "readyz", "configuration", "clusterversion", "node"] {
        let row = stdout
            .lines()
            .rev()
            .find(|l| l.starts_with(m))
            .unwrap_or_else(|| panic!("no row {m}: {stdout}"));
        assert!(row.contains("Z "), "{m} has no first time: {row}");
    }

    // The client key never shows, not even at debug level.
    let kubeconfig = fs::read_to_string(site.kubeconfig()).unwrap();
    let key_b64 = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("client-key-data: "))
        .unwrap();
    let (_, key_pem) = site.identity_pair("admin_kubeconfig_client");
    let key_line = String::from_utf8(key_pem)
        .unwrap()
        .lines()
        .nth(1)
        .unwrap()
        .to_string();
    for secret in [&key_b64[..40], &key_line[..40]] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "key shown"
        );
    }
}

/// A ClusterVersion whose conditions all changed before the marker's creation less an hour is the
/// seed's own status: it does not count, whatever it says; nor does another build's marker.
#[test]
fn stale_answers_do_not_count() {
    let site = Site::build();
    let mut stale = site.ready();
    stale.cluster_version = Some(kubeapi::cluster_version(
        &site.cluster_id,
        &[
            ("Available", "True", SEED_TIME),
            ("Progressing", "False", "2026-03-02T08:59:59Z"),
        ],
    ));
    let api = StandIn::start(&site.cluster_tls(), stale);
    site.point_at(&api.url());
    let (code, doc) = site.look();
    assert_eq!(code, Some(2), "{doc}");
    assert_eq!(doc["ready"], false);
    assert!(held(&doc, "configuration") && held(&doc, "node"), "{doc}");
    assert!(!held(&doc, "clusterversion"));
    assert_eq!(
        detail(&doc, "clusterversion"),
        "stale: no condition changed after 2026-03-02T09:00:00Z (the marker's creation less 60 min), so Available=True is the seed's own"
    );

    // One condition changed after the bound: fresh, so it counts.
    api.set(|c| *c = site.ready());
    let (code, doc) = site.look();
    assert_eq!(code, Some(0), "{doc}");

    // The marker of another build of the site (or the seed's): nothing after it counts.
    api.set(|c| c.marker = Some(kubeapi::marker("2020-01-01T00:00:00Z", MARKER_CREATED)));
    let (code, doc) = site.look();
    assert_eq!(code, Some(2));
    assert!(
        detail(&doc, "configuration").contains("is another build's (builtAt 2020-01-01T00:00:00Z"),
        "{doc}"
    );
    assert!(!held(&doc, "clusterversion") && !held(&doc, "node"));
}

/// A host that never answers is an outcome (exit 2, "not reachable since …"), not an error of ibi.
#[test]
fn a_host_that_never_answers_is_reported_as_such() {
    let site = Site::build();
    let port = site.point_at_silence();
    let out = site.watch(&["--timeout", "1", "--interval", "0.2"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "ibi watch: not ready after 1 s: the API at https://127.0.0.1:{port} never answered (not reachable since "
        )),
        "{stderr}"
    );
    assert!(stderr.contains("Connection refused"), "{stderr}");
    assert!(!stderr.contains("error:"), "{stderr}");
    assert!(
        stdout.contains("api             not yet: not reachable: Connection refused"),
        "{stdout}"
    );

    let (code, doc) = site.look();
    assert_eq!(code, Some(2));
    assert_eq!(doc["reached"], false);
    assert!(doc["unreachableSince"].is_string(), "{doc}");
}

/// Negative control: a server whose certificate another CA signed fails the watch at once, saying
/// the kubeconfig does not trust it (exit 1, not a wait until the timeout).
#[test]
fn a_server_signed_by_another_ca_fails_clearly() {
    let site = Site::build();
    let (other_ca, other_key) = kubeapi::new_ca("kube-apiserver-lb-signer");
    let (cert_pem, key_pem) = kubeapi::serving_cert(&other_ca, &other_key, &site.api_name);
    let tls = Tls {
        cert_pem,
        key_pem,
        client_ca_pem: site.admin_ca(),
    };
    let api = StandIn::start(&tls, site.ready());
    site.point_at(&api.url());
    let out = site.watch(&["--timeout", "30", "--interval", "0.1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "error: the server is not this site's cluster, or not yet reconfigured with its keys"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("GET /readyz: the API server's certificate is not trusted by the kubeconfig's certificate-authority-data"),
        "{stderr}"
    );
    assert!(stderr.contains("certificate verify failed"), "{stderr}");
    assert_eq!(api.count("/readyz"), 0, "no request got through");
}

/// Negative control: a cluster whose client CA is not the site's admin signer refuses the
/// kubeconfig's certificate in the handshake: the watch fails at once, saying so.
#[test]
fn a_client_ca_that_does_not_match_fails_clearly() {
    let site = Site::build();
    let mut tls = site.cluster_tls();
    tls.client_ca_pem = kubeapi::new_ca("admin-kubeconfig-signer").0;
    let api = StandIn::start(&tls, site.ready());
    site.point_at(&api.url());
    let out = site.watch(&["--timeout", "30", "--interval", "0.1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error: the cluster does not accept this site's admin certificate"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "the API server refused the kubeconfig's client certificate during the TLS handshake"
        ),
        "{stderr}"
    );
    assert!(
        api.log().iter().any(|l| l.starts_with("handshake failed")),
        "the stand-in refused it: {:?}",
        api.log()
    );
    assert_eq!(api.count("/readyz"), 0);
}

/// Issue 33 item 8: a one-shot ISO written for a site (`create image --site`, synthetic base ISO
/// standing for RHCOS's live ISO) goes stale when the site is built again (a new marker `builtAt`).
/// `create config-image` and `inspect` say so; a host installed from the old medium shows the old
/// marker (the stand-in cluster), so `ibi watch` judged by the new configuration ISO never counts it
/// ready, and says why; `ibi watch --one-shot` judges by what the one-shot ISO carried: ready.
#[test]
fn a_stale_one_shot_iso_is_named_and_watch_judges_by_what_was_shipped() {
    let site = Site::build();
    let install = tempfile::tempdir().unwrap();
    common::deliver::example_install(install.path());
    let base_iso = common::deliver::synthetic_base();
    let made = ibi(
        &[
            "create",
            "image",
            "--dir",
            install.path().to_str().unwrap(),
            "--site",
            site.path().to_str().unwrap(),
            "--base-iso",
            base_iso.to_str().unwrap(),
        ],
        &[],
    );
    assert_ok(&made);
    let one_shot = site.path().join("rhcos-ibi.iso");
    let api = StandIn::start(&site.cluster_tls(), site.ready());
    site.point_at(&api.url());
    let (code, _) = site.look();
    assert_eq!(code, Some(0), "the shipped configuration is the built one");

    // Built again an hour later: a new marker.
    let rebuilt = ibi(
        &[
            "create",
            "config-image",
            "--dir",
            site.path().to_str().unwrap(),
        ],
        &[("SOURCE_DATE_EPOCH", "1700003600")],
    );
    assert_ok(&rebuilt);
    site.point_at(&api.url());
    let stale = format!(
        "{} no longer carries the configuration of site {}: it carries the one built at {}",
        one_shot.display(),
        site.path().display(),
        site.built_at
    );
    let err = String::from_utf8_lossy(&rebuilt.stderr);
    assert!(err.contains(&stale), "{err}");
    let inspect = ibi(&["inspect", one_shot.to_str().unwrap()], &[]);
    assert!(
        String::from_utf8_lossy(&inspect.stderr).contains(&stale),
        "{}",
        String::from_utf8_lossy(&inspect.stderr)
    );
    let out = site.watch(&["--timeout", "0", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "judged by the new ISO: not ready"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!held(&doc, "configuration"), "{doc}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&stale),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = site.watch(&["--timeout", "0", "--json", "--one-shot"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "judged by what the one-shot ISO carried: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
