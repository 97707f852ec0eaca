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

use crate::common::kubeapi::{self, FRESH, MARKER_CREATED, SEED_TIME, StandIn, Tls};

use crate::common::deliver_watch::*;

/// At each state of the cluster, kubectl's verdicts (from the same kubeconfig) are ibi's: where
/// they differ, it is only ibi refusing the seed's stale answers, which kubectl cannot tell.
#[test]
fn kubectl_agrees_with_ibi_on_the_standin() {
    let Some((site, kubectl)) = site_and_kubectl("kubectl_agrees_with_ibi_on_the_standin") else {
        return;
    };
    let mut not_ready = site.ready();
    not_ready.readyz_ok = false;
    not_ready.cluster_version = Some(kubeapi::cluster_version(
        &site.cluster_id,
        &[
            ("Available", "False", FRESH),
            ("Progressing", "True", FRESH),
        ],
    ));
    not_ready.nodes = vec![kubeapi::node("sno-a17", "False", FRESH)];
    let api = StandIn::start(&site.cluster_tls(), not_ready);
    site.point_at(&api.url());

    let (code, doc) = site.look();
    assert_eq!(code, Some(2), "{doc}");
    for (m, kubectl_says) in kubectl.verdicts() {
        assert_eq!(held(&doc, m), kubectl_says, "{m}: ibi {doc}");
    }
    assert!(!kubectl.verdicts()[0].1, "kubectl: /readyz failing");

    api.set(|c| *c = site.ready());
    let (code, doc) = site.look();
    assert_eq!(code, Some(0), "{doc}");
    for (m, kubectl_says) in kubectl.verdicts() {
        assert!(
            kubectl_says && held(&doc, m),
            "{m}: kubectl {kubectl_says}, ibi {doc}"
        );
    }
    let out = kubectl.run(&[
        "get",
        "configmap",
        "-n",
        "openshift-config",
        "ibi-reconfiguration",
        "-o",
        "jsonpath={.metadata.creationTimestamp} {.data.builtAt}",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("{MARKER_CREATED} {}", site.built_at)
    );

    // The seed's status: kubectl sees Available=True and Progressing=False, as ibi reports it, and
    // ibi alone knows it is stale.
    api.set(|c| {
        c.cluster_version = Some(kubeapi::cluster_version(
            &site.cluster_id,
            &[
                ("Available", "True", SEED_TIME),
                ("Progressing", "False", SEED_TIME),
            ],
        ))
    });
    let (code, doc) = site.look();
    assert_eq!(code, Some(2));
    assert!(
        kubectl.verdicts()[2].1,
        "kubectl: the seed's Available=True"
    );
    assert!(
        detail(&doc, "clusterversion").starts_with("stale: "),
        "{doc}"
    );
}

/// The negative controls and the silent host, through kubectl: it refuses what ibi refuses.
#[test]
fn kubectl_refuses_what_ibi_refuses() {
    let Some((site, kubectl)) = site_and_kubectl("kubectl_refuses_what_ibi_refuses") else {
        return;
    };
    let (other_ca, other_key) = kubeapi::new_ca("other");
    let (cert_pem, key_pem) = kubeapi::serving_cert(&other_ca, &other_key, &site.api_name);
    let wrong_server = Tls {
        cert_pem,
        key_pem,
        client_ca_pem: site.admin_ca(),
    };
    let mut wrong_client = site.cluster_tls();
    wrong_client.client_ca_pem = other_ca;
    for (what, tls) in [("server CA", wrong_server), ("client CA", wrong_client)] {
        let api = StandIn::start(&tls, site.ready());
        site.point_at(&api.url());
        let out = kubectl.run(&["get", "--raw", "/readyz"]);
        assert!(!out.status.success(), "{what}: kubectl got through");
        let ibi = site.watch(&["--timeout", "0"]);
        assert_eq!(
            ibi.status.code(),
            Some(1),
            "{what}: ibi: {}",
            String::from_utf8_lossy(&ibi.stderr)
        );
    }
    site.point_at_silence();
    let out = kubectl.run(&["get", "--raw", "/readyz"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("was refused"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(site.look().0, Some(2));
}
