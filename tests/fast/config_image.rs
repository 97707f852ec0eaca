//! End-to-end tests of `ibi create config-image` on the bundled example: the ISO read back with our
//! own reader and with xorriso, bsdtar and blkid; file modes; determinism; identity reuse; and the
//! crypto relations checked with the openssl CLI.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;

use crate::common::*;
use serde_json::Value;

use crate::common::config_image::*;

#[test]
fn example_builds_all_outputs_with_secret_modes() {
    let site = copy_example();
    let out = config_image(site.path(), &[]);
    assert_ok(&out);
    let d = site.path();
    for f in [
        "imagebasedconfig.iso",
        "auth/kubeconfig",
        "auth/kubeadmin-password",
        ".ibi/identity.json",
    ] {
        assert_eq!(mode(&d.join(f)), 0o600, "{f}");
    }
    for dir in ["auth", ".ibi"] {
        assert_eq!(mode(&d.join(dir)), 0o700, "{dir}");
    }
    // Inputs are never consumed.
    for f in ["install-config.yaml", "image-based-config.yaml"] {
        assert!(d.join(f).exists(), "{f} was deleted");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("imagebasedconfig.iso"), "{stdout}");
    let pw = fs::read_to_string(d.join("auth/kubeadmin-password")).unwrap();
    assert_eq!(pw.len(), 23, "no trailing newline: {pw:?}");
}

#[test]
fn iso_tree_label_and_long_name_with_own_reader() {
    let site = copy_example();
    let long = long_manifest_name();
    fs::write(
        site.path().join("extra-manifests").join(&long),
        "kind: ConfigMap\napiVersion: v1\n",
    )
    .unwrap();
    assert_ok(&config_image(site.path(), &[]));
    let mut iso = read_iso(&site.path().join("imagebasedconfig.iso"));
    assert_eq!(iso.volume_id(), "cluster-config");
    let entries = iso.walk().expect("walk");
    let paths: Vec<(String, bool)> = entries.iter().map(|e| (e.path.clone(), e.is_dir)).collect();
    let want_dirs = [
        "cluster-configuration",
        "cluster-configuration/manifests",
        "extra-manifests",
    ];
    for d in want_dirs {
        assert!(
            paths.contains(&(d.to_string(), true)),
            "missing dir {d}: {paths:?}"
        );
    }
    let want_files = [
        "cluster-configuration/manifest.json".to_string(),
        "cluster-configuration/manifests/image-digest-mirror-set.json".to_string(),
        format!("extra-manifests/{long}"),
        "extra-manifests/50-site-a17-configmap-with-a-name-longer-than-thirty-characters.yaml"
            .to_string(),
        // ibi's own: the ConfigMap `ibi watch` reads back from the cluster (docs/deliver.md).
        "extra-manifests/ibi-reconfiguration.yaml".to_string(),
    ];
    for f in &want_files {
        assert!(
            paths.contains(&(f.clone(), false)),
            "missing file {f}: {paths:?}"
        );
    }
    assert_eq!(
        paths.len(),
        want_dirs.len() + want_files.len(),
        "unexpected entries: {paths:?}"
    );
    let data = iso.read_file(&format!("extra-manifests/{long}")).unwrap();
    assert_eq!(data, b"kind: ConfigMap\napiVersion: v1\n");
    let manifest_mode = entries
        .iter()
        .find(|e| e.path.ends_with("manifest.json"))
        .and_then(|e| e.mode);
    assert_eq!(manifest_mode.map(|m| m & 0o777), Some(0o600));
}

/// The watch marker: a ConfigMap stamped with the build time (SOURCE_DATE_EPOCH here), which
/// `ibi watch` reads back from the cluster; a user file of its name is refused before anything is
/// written.
#[test]
fn the_watch_marker_is_stamped_with_the_build_time_and_its_name_is_reserved() {
    let site = copy_example();
    assert_ok(&config_image(site.path(), &[]));
    let mut iso = read_iso(&site.path().join("imagebasedconfig.iso"));
    let yaml = iso
        .read_file("extra-manifests/ibi-reconfiguration.yaml")
        .expect("the marker");
    let cm: Value = serde_yaml_ng::from_slice(&yaml).unwrap();
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["namespace"], "openshift-config");
    assert_eq!(cm["metadata"]["name"], "ibi-reconfiguration");
    // SOURCE_DATE_EPOCH=1700000000 (common::config_image).
    assert_eq!(cm["data"]["builtAt"], "2023-11-14T22:13:20Z");

    let fresh = copy_example();
    fs::write(
        fresh
            .path()
            .join("extra-manifests/ibi-reconfiguration.yaml"),
        "apiVersion: v1\nkind: ConfigMap\n",
    )
    .unwrap();
    let out = config_image(fresh.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("extra-manifests/ibi-reconfiguration.yaml: this name is ibi's own"),
        "{stderr}"
    );
    for f in ["imagebasedconfig.iso", "auth", ".ibi"] {
        assert!(!fresh.path().join(f).exists(), "{f} was written");
    }
}

#[test]
fn manifests_dir_exists_without_mirrors_and_idms_is_absent() {
    let site = copy_example();
    let ic = site.path().join("install-config.yaml");
    let text = fs::read_to_string(&ic).unwrap();
    let start = text.find("imageDigestSources:").unwrap();
    let end = text.find("pullSecret:").unwrap();
    fs::write(&ic, format!("{}{}", &text[..start], &text[end..])).unwrap();
    fs::remove_dir_all(site.path().join("extra-manifests")).unwrap();
    assert_ok(&config_image(site.path(), &[]));
    let mut iso = read_iso(&site.path().join("imagebasedconfig.iso"));
    let entries = iso.walk().unwrap();
    let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
    assert!(
        paths.contains(&"cluster-configuration/manifests"),
        "{paths:?}"
    );
    assert!(
        !paths
            .iter()
            .any(|p| p.ends_with("image-digest-mirror-set.json")),
        "{paths:?}"
    );
}

#[test]
fn same_inputs_identity_and_epoch_give_identical_iso() {
    let a = copy_example();
    assert_ok(&config_image(a.path(), &[]));
    let first = fs::read(a.path().join("imagebasedconfig.iso")).unwrap();
    assert_ok(&config_image(a.path(), &[]));
    let second = fs::read(a.path().join("imagebasedconfig.iso")).unwrap();
    assert!(first == second, "rebuild in place differs");
    // A copy of the site, identity included, elsewhere: same bytes.
    let b = tempfile::tempdir().unwrap();
    copy_tree(a.path(), b.path());
    fs::remove_file(b.path().join("imagebasedconfig.iso")).unwrap();
    assert_ok(&config_image(b.path(), &[]));
    assert!(
        first == fs::read(b.path().join("imagebasedconfig.iso")).unwrap(),
        "copied site differs"
    );
    // A different epoch changes the image, so the test above is not vacuous.
    let d = a.path().to_str().unwrap();
    let out = ibi(
        &["create", "config-image", "--dir", d],
        &[("SOURCE_DATE_EPOCH", "1700000999")],
    );
    assert_ok(&out);
    assert!(first != fs::read(a.path().join("imagebasedconfig.iso")).unwrap());
    // The watch marker follows the epoch, so a fixed epoch is what keeps it (and the ISO) stable.
    let mut iso = read_iso(&a.path().join("imagebasedconfig.iso"));
    let marker: Value = serde_yaml_ng::from_slice(
        &iso.read_file("extra-manifests/ibi-reconfiguration.yaml")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(marker["data"]["builtAt"], "2023-11-14T22:29:59Z");
}

#[test]
fn identity_is_reused_and_rotated_on_request() {
    let site = copy_example();
    let d = site.path();
    assert_ok(&config_image(d, &[]));
    let kc1 = fs::read(d.join("auth/kubeconfig")).unwrap();
    let pw1 = fs::read(d.join("auth/kubeadmin-password")).unwrap();
    let m1 = manifest_of(d);
    // Fix an NTP server and rebuild: kubeconfig, password, ids and keys stay.
    let ibc = d.join("image-based-config.yaml");
    let text = fs::read_to_string(&ibc).unwrap().replace(
        "  - 192.168.122.1\nnodeLabels",
        "  - 192.168.122.2\nnodeLabels",
    );
    fs::write(&ibc, text).unwrap();
    assert_ok(&config_image(d, &[]));
    let m2 = manifest_of(d);
    assert_eq!(fs::read(d.join("auth/kubeconfig")).unwrap(), kc1);
    assert_eq!(fs::read(d.join("auth/kubeadmin-password")).unwrap(), pw1);
    for k in [
        "cluster_id",
        "infra_id",
        "kubeadmin_password_hash",
        "KubeconfigCryptoRetention",
    ] {
        assert_eq!(m1[k], m2[k], "{k} changed on rebuild");
    }
    assert_ne!(
        m1["chrony_config"], m2["chrony_config"],
        "the edit took effect"
    );
    assert_ok(&config_image(d, &["--rotate-crypto"]));
    let m3 = manifest_of(d);
    assert_ne!(fs::read(d.join("auth/kubeconfig")).unwrap(), kc1);
    assert_ne!(fs::read(d.join("auth/kubeadmin-password")).unwrap(), pw1);
    assert_ne!(
        m1["KubeconfigCryptoRetention"],
        m3["KubeconfigCryptoRetention"]
    );
    assert_eq!(
        m1["cluster_id"], m3["cluster_id"],
        "rotation keeps the cluster identity"
    );
}

#[test]
fn given_cluster_and_infra_ids_win() {
    let site = copy_example();
    let ibc = site.path().join("image-based-config.yaml");
    let mut text = fs::read_to_string(&ibc).unwrap();
    text.push_str("cluster_id: 3f1c7a4e-2b8d-4c6f-9e0a-5d7b1c2e3f40\ninfra_id: sno-a17-given\n");
    fs::write(&ibc, text).unwrap();
    assert_ok(&config_image(site.path(), &[]));
    let m = manifest_of(site.path());
    assert_eq!(m["cluster_id"], "3f1c7a4e-2b8d-4c6f-9e0a-5d7b1c2e3f40");
    assert_eq!(m["infra_id"], "sno-a17-given");
}

#[test]
fn bad_inputs_report_every_finding_and_write_nothing() {
    let site = copy_example();
    let d = site.path();
    let ic = d.join("install-config.yaml");
    let text = fs::read_to_string(&ic)
        .unwrap()
        .replace("  replicas: 1\n", "  replicas: 3\n");
    fs::write(&ic, text).unwrap();
    let ibc = d.join("image-based-config.yaml");
    let text = fs::read_to_string(&ibc)
        .unwrap()
        .replace("  - 192.168.122.1\n", "  - not_a_host!\n");
    fs::write(&ibc, text).unwrap();
    let out = config_image(d, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
    assert!(
        lines.iter().any(
            |l| l.starts_with("error: install-config.yaml: controlPlane.replicas: ")
                && l.contains('3')
        ),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("error: image-based-config.yaml: additionalNTPSources")),
        "{err}"
    );
    for f in ["imagebasedconfig.iso", "auth", ".ibi"] {
        assert!(!d.join(f).exists(), "{f} written despite bad input");
    }
}

#[test]
fn unknown_key_is_rejected_with_line_and_column() {
    let site = copy_example();
    let ibc = site.path().join("image-based-config.yaml");
    let mut text = fs::read_to_string(&ibc).unwrap();
    text.push_str("hostnme: typo\n");
    fs::write(&ibc, text).unwrap();
    let out = config_image(site.path(), &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("image-based-config.yaml") && err.contains("hostnme"),
        "{err}"
    );
    assert!(err.contains("line") && err.contains("column"), "{err}");
}

#[test]
fn secrets_never_reach_the_log() {
    let site = copy_example();
    let d = site.path().to_str().unwrap();
    let out = ibi(
        &["--log-level", "trace", "create", "config-image", "--dir", d],
        &[],
    );
    assert_ok(&out);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        !log.is_empty(),
        "trace logging produced nothing, so this test would prove nothing"
    );
    let pw = fs::read_to_string(site.path().join("auth/kubeadmin-password")).unwrap();
    for secret in [
        pw.as_str(),
        "PRIVATE KEY",
        "ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk",
        "$2a$10$",
    ] {
        assert!(!log.contains(secret), "secret {secret:?} in log:\n{log}");
    }
}

/// The installer's own fixture auth ("super-secret\n", not user:password) is accepted, as the installer
/// accepts it, with a warning that names the registry and never the value; the value still reaches
/// the manifest untouched.
#[test]
fn token_style_auth_is_accepted_with_a_warning_that_hides_it() {
    let site = copy_example();
    let ic = site.path().join("install-config.yaml");
    let token = "c3VwZXItc2VjcmV0Cg==";
    let text = fs::read_to_string(&ic)
        .unwrap()
        .replace("ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk", token);
    fs::write(&ic, text).unwrap();
    let out = config_image(site.path(), &["--log-level", "trace"]);
    assert_ok(&out);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains(r#"pullSecret: the auth of "registry.edge.example.com:5000" is not base64 of "user:password""#),
        "{log}"
    );
    assert!(!log.contains(token), "{log}");
    let m = manifest_of(site.path());
    assert!(m["pull_secret"].as_str().unwrap().contains(token));
}

#[test]
fn config_template_is_private_and_not_clobbered() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    assert_ok(&ibi(&["create", "config-template", "--dir", d], &[]));
    let p = dir.path().join("image-based-config.yaml");
    assert_eq!(mode(&p), 0o600);
    let text = fs::read_to_string(&p).unwrap();
    assert!(text.contains("kind: ImageBasedConfig"), "{text}");
    fs::write(&p, "edited").unwrap();
    let out = ibi(&["create", "config-template", "--dir", d], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    assert_eq!(fs::read_to_string(&p).unwrap(), "edited");
    assert_ok(&ibi(
        &["create", "config-template", "--dir", d, "--force"],
        &[],
    ));
    assert_eq!(fs::read_to_string(&p).unwrap(), text);
}

#[test]
fn version_and_completions() {
    let out = ibi(&["--version"], &[]);
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("ibi "));
    let out = ibi(&["completion", "bash"], &[]);
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("config-image"));
}

#[test]
fn damaged_identity_is_refused_and_left_alone() {
    let site = copy_example();
    let d = site.path();
    assert_ok(&config_image(d, &[]));
    let id_path = d.join(".ibi/identity.json");
    let mut id: Value = serde_json::from_slice(&fs::read(&id_path).unwrap()).unwrap();
    // Swap two signers' keys: each key then no longer matches its certificate.
    let lb = id["crypto"]["kube_apiserver_lb_signer"]["key_pem"].clone();
    id["crypto"]["kube_apiserver_lb_signer"]["key_pem"] =
        id["crypto"]["kube_apiserver_localhost_signer"]["key_pem"].clone();
    id["crypto"]["kube_apiserver_localhost_signer"]["key_pem"] = lb;
    let damaged = serde_json::to_vec(&id).unwrap();
    fs::write(&id_path, &damaged).unwrap();
    let iso_before = fs::read(d.join("imagebasedconfig.iso")).unwrap();
    let out = config_image(d, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(".ibi/identity.json") && err.contains("--rotate-crypto"),
        "{err}"
    );
    assert!(
        err.contains("localhost-signer") || err.contains("lb-signer"),
        "names the object: {err}"
    );
    assert_eq!(fs::read(&id_path).unwrap(), damaged, "identity untouched");
    assert_eq!(
        fs::read(d.join("imagebasedconfig.iso")).unwrap(),
        iso_before,
        "ISO untouched"
    );
    // The way out the message names works, and keeps the cluster's IDs.
    assert_ok(&config_image(d, &["--rotate-crypto"]));
    let rotated: Value = serde_json::from_slice(&fs::read(&id_path).unwrap()).unwrap();
    assert_eq!(rotated["cluster_id"], id["cluster_id"]);
    assert_ok(&config_image(d, &[]));
}
