//! `ibi create hub-manifests` on the bundled example fleet: the layout, the secrets' modes, no secret
//! in the output (at trace level), the ClusterInstance's fields, the identity Secrets of sites
//! `create config-image --sites` built (byte for byte the kubeconfig, password and manifest.json the
//! site was given; manifest.json as xorriso extracts it from the site's ISO), the mirrors as an
//! extra manifest, every object taken by Debian's kubectl (`kubectl apply --dry-run=client`, against
//! a stand-in for a hub's API discovery), Secret templates without data, and the findings of an
//! inventory without what the hub needs or with what a hub refuses (all at once, nothing written).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;
use std::path::PathBuf;

use crate::common::*;
use serde_json::{Value, json};

use crate::common::hub_manifests::*;

#[test]
fn example_fleet_renders_for_a_hub() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    build_sites(base.path(), &inventory);
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!stderr.contains("not built"), "{stderr}");
    // Issue 34 item 2: what the hub path drops is said, per site.
    for site in SITES {
        assert!(
            stderr.contains(&format!("site {site}: its node labels (node-role.kubernetes.io/edge=, site.example.com/id={site}) are not carried over by the hub")),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!("site {site}: releaseRegistry registry.edge.example.com:5000 is not carried over: the hub's image-based-install-operator takes the registry of --release-image, quay.io;")),
            "{stderr}"
        );
    }
    let hub_dir = base.path().join("hub");
    // Nothing secret on the terminal: not the BMC password, not the pull secret, not the kubeadmin
    // password, not their base64.
    let b64 = |s: &str| openssl::base64::encode_block(s.as_bytes());
    let kubeadmin =
        fs::read_to_string(base.path().join("sites/a17/auth/kubeadmin-password")).unwrap();
    for secret in [
        BMC_PASSWORD,
        PULL_AUTH,
        &b64(BMC_PASSWORD),
        &kubeadmin,
        &b64(&kubeadmin),
    ] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} shown"
        );
    }
    // Nor in any file outside secrets/ (the harness of tests/{fast,tools}/secrets.rs runs single sites).
    for dir in ["shared", "sites"] {
        let mut files = std::collections::BTreeMap::new();
        walk(&hub_dir.join(dir), &mut files);
        for (path, body) in files {
            for secret in [
                BMC_PASSWORD,
                PULL_AUTH,
                &b64(BMC_PASSWORD),
                &kubeadmin,
                &b64(&kubeadmin),
                "PRIVATE KEY",
            ] {
                assert!(!body.contains(secret), "{} holds a secret", path.display());
            }
        }
    }
    let mut want = vec![hub_dir.join("shared/cluster-image-set.yaml")];
    for site in SITES {
        for f in [
            "namespace.yaml",
            "extra-manifests.yaml",
            "cluster-instance.yaml",
        ] {
            want.push(hub_dir.join("sites").join(site).join(f));
        }
        for f in IDENTITY_AND_OTHER_SECRETS {
            want.push(hub_dir.join("secrets").join(site).join(f));
        }
    }
    let listed: Vec<PathBuf> = stdout.lines().map(PathBuf::from).collect();
    let (kustomizations, objects): (Vec<PathBuf>, Vec<PathBuf>) = listed
        .into_iter()
        .partition(|p| p.ends_with("kustomization.yaml"));
    assert_eq!(objects, want);
    kustomize_applies_in_one_step(&hub_dir, &kustomizations, want.len());
    assert_eq!(mode(&hub_dir.join("secrets")), 0o700);
    for site in SITES {
        let dir = hub_dir.join("secrets").join(site);
        assert_eq!(mode(&dir), 0o700);
        for f in IDENTITY_AND_OTHER_SECRETS {
            assert_eq!(mode(&dir.join(f)), 0o600, "{site}/{f}");
        }
        identity_is_the_sites(base.path(), &dir, site);
        assert_eq!(
            mode(
                &hub_dir
                    .join("sites")
                    .join(site)
                    .join("cluster-instance.yaml")
            ),
            0o644
        );
    }

    let cis = yaml(&hub_dir.join("shared/cluster-image-set.yaml"));
    assert_eq!(cis["kind"], "ClusterImageSet");
    let image_set = cis["metadata"]["name"].as_str().unwrap().to_string();
    assert!(image_set.starts_with("ibi-4.18.0-x86-64-"), "{image_set}");
    assert_eq!(cis["spec"]["releaseImage"], RELEASE);

    let ci = yaml(&hub_dir.join("sites/a17/cluster-instance.yaml"));
    assert_eq!(
        ci["apiVersion"],
        "siteconfig.open-cluster-management.io/v1alpha1"
    );
    assert_eq!(
        ci["metadata"],
        json!({"name": "sno-a17", "namespace": "sno-a17",
            "annotations": {"argocd.argoproj.io/sync-wave": "2"}})
    );
    let s = &ci["spec"];
    assert_eq!(s["clusterName"], "sno-a17");
    assert_eq!(s["baseDomain"], "edge.example.com");
    assert_eq!(s["clusterType"], "SNO");
    assert_eq!(s["clusterImageSetNameRef"], image_set.as_str());
    assert_eq!(s["pullSecretRef"]["name"], "pull-secret");
    assert_eq!(
        s["templateRefs"],
        json!([{"name": "ibi-cluster-templates-v1", "namespace": "open-cluster-management"}])
    );
    assert_eq!(s["machineNetwork"], json!([{"cidr": "192.168.122.0/23"}]));
    assert_eq!(s["additionalNTPSources"], json!(["0.rhel.pool.ntp.org"]));
    assert_eq!(
        s["extraManifestsRefs"],
        json!([{"name": "extra-manifests"}])
    );
    assert!(
        s["sshPublicKey"]
            .as_str()
            .unwrap()
            .starts_with("ssh-ed25519 ")
    );
    let node = &s["nodes"][0];
    assert_eq!(node["hostName"], "sno-a17");
    assert_eq!(node["role"], "master");
    assert_eq!(
        node["bmcAddress"],
        "redfish-virtualmedia+https://10.0.0.9:8000/redfish/v1/Systems/host-0"
    );
    assert_eq!(node["bmcCredentialsName"]["name"], "sno-a17-bmc-secret");
    assert_eq!(node["bootMACAddress"], "52:54:00:aa:17:01");
    assert_eq!(node["bootMode"], "UEFISecureBoot");
    assert_eq!(
        node["rootDeviceHints"],
        json!({"deviceName": "/dev/sda", "minSizeGigabytes": 100})
    );
    assert_eq!(
        node["nodeNetwork"]["interfaces"],
        json!([{"name": "eth0", "macAddress": "52:54:00:aa:17:01"}])
    );
    assert!(node["nodeNetwork"]["config"]["interfaces"].is_array());

    // a18 overrides the domain and network; a19's whole nmstate (a VLAN) is the node's network.
    let s18 = &yaml(&hub_dir.join("sites/a18/cluster-instance.yaml"))["spec"];
    assert_eq!(s18["baseDomain"], "edge2.example.com");
    assert_eq!(s18["machineNetwork"], json!([{"cidr": "10.18.0.0/24"}]));
    assert!(s18["nodes"][0].get("bootMode").is_none());
    let n19 = &yaml(&hub_dir.join("sites/a19/cluster-instance.yaml"))["spec"]["nodes"][0];
    assert_eq!(
        n19["nodeNetwork"]["config"]["interfaces"][1]["name"],
        "eth0.19"
    );
    assert_eq!(
        n19["nodeNetwork"]["interfaces"],
        json!([{"name": "eth0", "macAddress": "52:54:00:aa:19:01"}])
    );

    let bmc = yaml(&hub_dir.join("secrets/a17/bmc-credentials.yaml"));
    assert_eq!(
        bmc["metadata"],
        json!({"name": "sno-a17-bmc-secret", "namespace": "sno-a17",
        "labels": {"cluster.open-cluster-management.io/backup": "true"},
        "annotations": {"argocd.argoproj.io/sync-wave": "1"}})
    );
    assert_eq!(bmc["data"]["username"], b64("admin"));
    assert_eq!(bmc["data"]["password"], b64(BMC_PASSWORD));
    let ps = yaml(&hub_dir.join("secrets/a17/pull-secret.yaml"));
    assert_eq!(ps["type"], "kubernetes.io/dockerconfigjson");
    let dockerconfig =
        openssl::base64::decode_block(ps["data"][".dockerconfigjson"].as_str().unwrap()).unwrap();
    let dockerconfig: Value = serde_json::from_slice(&dockerconfig).unwrap();
    assert_eq!(
        dockerconfig["auths"]["registry.edge.example.com:5000"]["auth"],
        PULL_AUTH
    );
    let em = yaml(&hub_dir.join("sites/a17/extra-manifests.yaml"));
    assert!(
        em["data"]["50-fleet-configmap.yaml"]
            .as_str()
            .unwrap()
            .contains("kind: ConfigMap")
    );
    // The mirrors of install-config's imageDigestSources, as the extra manifest IBIO takes them.
    let idms: Value =
        serde_json::from_str(em["data"]["image-digest-mirror-set.json"].as_str().unwrap()).unwrap();
    assert_eq!(idms["kind"], "ImageDigestMirrorSet");
    assert_eq!(
        idms["spec"]["imageDigestMirrors"][0]["mirrors"][0],
        "registry.edge.example.com:5000/openshift-release-dev/ocp-release"
    );

    kubectl_takes_every_object(&hub_dir, &want);
}
