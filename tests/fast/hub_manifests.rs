//! `ibi create hub-manifests` on the bundled example fleet: the layout, the secrets' modes, no secret
//! in the output (at trace level), the ClusterInstance's fields, the identity Secrets of sites
//! `create config-image --sites` built (byte for byte the kubeconfig, password and manifest.json the
//! site was given; manifest.json as xorriso extracts it from the site's ISO), the mirrors as an
//! extra manifest, every object taken by Debian's kubectl (`kubectl apply --dry-run=client`, against
//! a stand-in for a hub's API discovery), Secret templates without data, and the findings of an
//! inventory without what the hub needs or with what a hub refuses (all at once, nothing written).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs;
use std::path::Path;

use crate::common::*;
use serde_json::{Value, json};

use crate::common::hub_manifests::*;

#[test]
fn missing_hub_keys_are_all_reported_and_nothing_is_written() {
    let (base, _) = example_base();
    let inventory =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/example-fleet/sites.yaml");
    let out = hub(base.path(), &inventory, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: command line: --release-image: required"),
        "{stderr}"
    );
    for (i, site) in SITES.iter().enumerate() {
        for key in ["bootMACAddress", "bmc"] {
            let field = format!("sites[{i}].{key} (site {site}): required by the hub");
            assert!(stderr.contains(&field), "no {field:?} in:\n{stderr}");
        }
    }
    assert!(!base.path().join("hub").exists());
    assert!(text(&out.stdout).is_empty());
}

#[test]
fn a_bmc_without_a_system_or_password_and_a_bad_boot_mode_are_findings() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    let mut inv: Value = serde_yaml_ng::from_slice(&fs::read(&inventory).unwrap()).unwrap();
    inv["sites"][1]["bmc"]["address"] = json!("https://10.0.0.10:8000");
    inv["sites"][2]["bmc"]["passwordFile"] = json!("no-such-file");
    inv["sites"][0]["bootMode"] = json!("BIOS");
    fs::write(&inventory, serde_yaml_ng::to_string(&inv).unwrap()).unwrap();
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    assert_refused(
        &out,
        base.path(),
        &[
            "sites[0].bootMode (site a17): invalid value \"BIOS\"",
            "sites[1].bmc.address (site a18): the hub's BareMetalHost needs one System",
            "sites[2].bmc (site a19): ",
            "no-such-file",
        ],
    );
}

#[test]
fn only_writes_the_named_sites_and_refuses_unknown_ones() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    let out_dir = base.path().join("gitops");
    let o = out_dir.to_str().unwrap();
    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--only", "a18", "--out", o],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out_dir.join("sites/a18/cluster-instance.yaml").is_file());
    assert!(!out_dir.join("sites/a17").exists());
    assert!(!base.path().join("hub").exists());
    // A site gone from the inventory keeps its folders; the next full run names them.
    fs::create_dir_all(out_dir.join("sites/a99")).unwrap();
    let full = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--out", o],
    );
    let stderr = text(&full.stderr);
    assert!(full.status.success(), "{stderr}");
    assert!(
        stderr.contains("gitops/sites/a99: not a site of this run's inventory"),
        "{stderr}"
    );
    assert!(out_dir.join("sites/a99").is_dir());
    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--only", "a99"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--only: no site named \"a99\""), "{stderr}");
}

#[test]
fn a_site_not_built_gets_no_identity_and_is_named() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--only", "a17"],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("site a17: not built by `ibi create config-image --sites`"),
        "{stderr}"
    );
    let secrets = base.path().join("hub/secrets/a17");
    assert!(secrets.join("pull-secret.yaml").is_file());
    assert!(!secrets.join("admin-kubeconfig.yaml").exists());
}

#[test]
fn an_identity_that_no_longer_fits_the_inventory_is_refused() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    build_sites(base.path(), &inventory);
    // a18 moves to another base domain after it was built; a19's password file is from another
    // build; a17 lost its kubeconfig.
    let mut inv: Value = serde_yaml_ng::from_slice(&fs::read(&inventory).unwrap()).unwrap();
    inv["sites"][1]["baseDomain"] = json!("edge3.example.com");
    fs::write(&inventory, serde_yaml_ng::to_string(&inv).unwrap()).unwrap();
    fs::write(
        base.path().join("sites/a19/auth/kubeadmin-password"),
        "abcde-fghij-kmnop-qrstu",
    )
    .unwrap();
    fs::remove_file(base.path().join("sites/a17/auth/kubeconfig")).unwrap();
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let stderr = assert_refused(
        &out,
        base.path(),
        &[
            "sites/a17/auth/kubeconfig: missing",
            "sites/a18/imagebasedconfig.iso: cluster-configuration/manifest.json: base_domain: the site was built for \"edge2.example.com\", the inventory now says \"edge3.example.com\"",
            "sites/a19/auth/kubeadmin-password: does not match the kubeadmin_password_hash",
        ],
    );
    assert!(!stderr.contains("abcde-fghij-kmnop-qrstu"));
}

#[test]
fn secret_templates_keep_the_keys_and_leave_the_data_out() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    build_sites(base.path(), &inventory);
    // No BMC password on this workstation: the secrets come from elsewhere.
    fs::remove_file(base.path().join("bmc-password")).unwrap();
    let out = hub(
        base.path(),
        &inventory,
        &[
            "--release-image",
            RELEASE,
            "--secret-templates",
            "--only",
            "a17",
        ],
    );
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("secret templates without data"), "{stderr}");
    let secrets = base.path().join("hub/secrets/a17");
    for f in IDENTITY_AND_OTHER_SECRETS {
        let p = secrets.join(f);
        assert_eq!(mode(&p), 0o600);
        let body = fs::read_to_string(&p).unwrap();
        assert!(body.starts_with("# A template"), "{f}:\n{body}");
        let doc = yaml(&p);
        assert_eq!(doc["kind"], "Secret");
        let data = doc["data"].as_object().unwrap();
        assert!(!data.is_empty());
        for (k, v) in data {
            assert_eq!(v, "", "{f}: {k} has data");
            assert!(
                body.contains(&format!("#   {k}: ")),
                "{f}: no fill comment for {k}"
            );
        }
    }
    let kc = fs::read_to_string(secrets.join("admin-kubeconfig.yaml")).unwrap();
    assert!(kc.contains("sites/a17/auth/kubeconfig"), "{kc}");
}

#[test]
fn what_a_hub_refuses_is_reported_before_anything_is_written() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    fs::write(
        base.path()
            .join("extra-manifests/99-a-name-far-too-long-for-a-hub.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n",
    )
    .unwrap();
    fs::write(
        base.path().join("extra-manifests/invoker-cm.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: y\n",
    )
    .unwrap();
    // A pull-secret entry without auth (a credsStore), which ibi accepts and IBIO does not.
    let ic = base.path().join("install-config.yaml");
    let text_ic = fs::read_to_string(&ic).unwrap().replace(
        r#"{"auths":{"registry.edge.example.com:5000":{"auth":"ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk"}}}"#,
        r#"{"auths":{"registry.edge.example.com:5000":{"auth":"ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk"},"quay.io":{"credsStore":"desktop"}}}"#,
    );
    fs::write(&ic, text_ic).unwrap();
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let stderr = assert_refused(
        &out,
        base.path(),
        &[
            "extra-manifests/99-a-name-far-too-long-for-a-hub.yaml: the name has 37 characters",
            "extra-manifests/invoker-cm.yaml: the name is one the hub writes itself",
            "install-config.yaml:28: pullSecret: the entry for \"quay.io\" has no auth",
        ],
    );
    // A value every site takes from the base is one finding, not one per site.
    assert_eq!(stderr.matches("has no auth").count(), 1, "{stderr}");
}

/// Issue 34 item 1: a site whose nmstate names no `mac-address` got `nodeNetwork.interfaces: []`,
/// which the ClusterInstance CRD refuses (`minItems: 1`, siteconfig ecff291f,
/// config/crd/bases/siteconfig.open-cluster-management.io_clusterinstances.yaml): the list is left
/// out, the nmstate config kept.
#[test]
fn a_network_that_names_no_mac_gets_no_interfaces_list() {
    let (base, mut inv) = example_base();
    let config = &mut inv["sites"][2]["networkConfig"]["interfaces"][0];
    config.as_object_mut().unwrap().remove("mac-address");
    let inventory = hub_inventory(base.path(), inv);
    let out = hub(
        base.path(),
        &inventory,
        &[
            "--release-image",
            "quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ci = yaml(&base.path().join("hub/sites/a19/cluster-instance.yaml"));
    let nn = &ci["spec"]["nodes"][0]["nodeNetwork"];
    assert!(nn.get("interfaces").is_none(), "{nn}");
    assert!(nn["config"]["interfaces"].is_array(), "{nn}");
}

/// Issue 34 item 8: an extra-manifests ConfigMap over 256 KiB (here a 300 KB manifest, within the
/// API server's 1 MiB) cannot be applied client-side (its last-applied annotation is bounded): the
/// run says to apply it server-side.
#[test]
fn a_config_map_too_big_for_client_side_apply_is_named() {
    let (base, inv) = example_base();
    let big = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  namespace: default\ndata:\n  blob: \"{}\"\n",
        "x".repeat(300 * 1024)
    );
    fs::write(base.path().join("extra-manifests/big.yaml"), big).unwrap();
    let inventory = hub_inventory(base.path(), inv);
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("a19/extra-manifests.yaml: ")
            && err.contains(
                "apply it with `kubectl apply --server-side` (Argo CD: ServerSideApply=true)"
            ),
        "{err}"
    );
}

/// Issue 34 item 3: through the hub a site's manifest.json carries only `machine_networks` (IBIO
/// bc1ddc61, its installer's clusterconfiguration.go), which a 4.16–4.19 seed does not read: a
/// proxied site of such a seed fails post-pivot. The seed from BASE's installation config (or
/// `--seed`, the bundled 4.16.0 OCI seed here) makes it a finding naming the site and the seed;
/// without one, every proxied site is a warning.
#[test]
fn a_proxied_site_of_a_pre_4_20_seed_is_refused_and_unknown_seeds_warn() {
    let (base, inv) = example_base();
    let ic = base.path().join("install-config.yaml");
    let base_ic = fs::read_to_string(&ic).unwrap();
    fs::write(
        &ic,
        format!(
            "{base_ic}proxy:\n  httpProxy: http://proxy.example.com:3128\n  noProxy: .cluster.local\n"
        ),
    )
    .unwrap();
    let inventory = hub_inventory(base.path(), inv);
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    for site in SITES {
        assert!(
            err.contains(&format!("site {site} has a proxy: through the hub its manifest.json carries only machine_networks, which a seed before 4.20 does not read")),
            "{err}"
        );
    }
    common::write_example_install(base.path());
    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("sites[0].name (site a17): has a proxy, and its seed 4.16.0 (seedVersion in ")
            && err.contains("reads only machine_network, which the hub's image-based-install-operator does not write"),
        "{err}"
    );
    fs::remove_file(base.path().join("image-based-installation-config.yaml")).unwrap();
    let seed = format!(
        "oci:{}:4.16.0",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("seed-fixtures/seed")
            .display()
    );
    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--seed", &seed],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("its seed 4.16.0 (--seed {seed})")),
        "{err}"
    );
}

/// Issue 34 item 4: a site whose site phase deploy ran (its record written as deploy writes it) is
/// a running cluster: a ClusterInstance would make the hub attach media and reboot it. Refused by
/// default; `--adopt` imports it into ACM (ManagedCluster, its auto-import Secret holding the site's
/// kubeconfig, KlusterletAddonConfig, as SiteConfig's templates write them); `--reinstall` asks for
/// the ClusterInstance all the same.
#[test]
fn a_running_cluster_is_refused_adopted_or_reinstalled_as_asked() {
    let (base, inv) = example_base();
    let inventory = hub_inventory(base.path(), inv);
    build_sites(base.path(), &inventory);
    let t = 1_790_000_000u64;
    let record = json!({"version": 1, "site": "a17", "phases": {
        "factory": {"state": "done", "step": "eject", "started": t, "updated": t + 900, "finished": t + 900, "booted": t + 10},
        "site": {"state": "done", "step": "eject", "started": t + 1000, "updated": t + 2000, "finished": t + 2000, "booted": t + 1010}}});
    fs::create_dir_all(base.path().join(".ibi/deploy")).unwrap();
    fs::write(base.path().join(".ibi/deploy/a17.json"), record.to_string()).unwrap();

    let out = hub(base.path(), &inventory, &["--release-image", RELEASE]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("sites[0].name (site a17): its cluster runs already (deploy's site phase done): a ClusterInstance would make the hub attach media and reboot it"),
        "{err}"
    );
    assert!(!base.path().join("hub").exists(), "nothing written");

    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--adopt"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let a17 = base.path().join("hub/sites/a17");
    assert!(!a17.join("cluster-instance.yaml").exists());
    let mc = yaml(&a17.join("managed-cluster.yaml"));
    assert_eq!(
        (
            &mc["kind"],
            &mc["metadata"]["name"],
            &mc["spec"]["hubAcceptsClient"]
        ),
        (&json!("ManagedCluster"), &json!("sno-a17"), &json!(true))
    );
    let kac = yaml(&a17.join("klusterlet-addon-config.yaml"));
    assert_eq!(kac["spec"]["clusterNamespace"], "sno-a17");
    let import = base.path().join("hub/secrets/a17/auto-import-secret.yaml");
    assert_eq!(yaml(&import)["metadata"]["name"], "auto-import-secret");
    assert_eq!(
        secret_data(&import, "kubeconfig"),
        fs::read(base.path().join("sites/a17/auth/kubeconfig")).unwrap()
    );
    assert_eq!(mode(&import), 0o600);
    assert!(
        base.path()
            .join("hub/sites/a18/cluster-instance.yaml")
            .exists()
    );

    let out = hub(
        base.path(),
        &inventory,
        &["--release-image", RELEASE, "--reinstall", "a17"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(a17.join("cluster-instance.yaml").exists());
}
