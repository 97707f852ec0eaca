//! Seed checks against a real `docker-registry` on 127.0.0.1 with the synthetic seed pushed by skopeo: the
//! registry and the OCI layout paths agree, each mismatch gives its message, pull-secret auth, digest mirrors,
//! and the fixture regenerates byte for byte.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use crate::common::registry::{TestRegistry, fixture_seed, make_seed, versioned_seed};
use ibi::config::ImageDigestSource;
use ibi::seed::registry::{RegistryError, RegistryOptions, parse_pull_secret};
use ibi::seed::{
    SEED_CLUSTER_INFO_LABEL, SEED_FORMAT_VERSION_LABEL, SeedCheck, check_seed, inspect_seed_text,
};

use crate::common::seed_registry::*;

#[test]
fn registry_and_layout_agree() {
    let Some(reg) = TestRegistry::start("registry_and_layout_agree") else {
        return;
    };
    let reference = reg.push(&fixture_seed(), TAG, "ibi/seed");
    let remote = inspect(&reference, &insecure(&reg));
    let layout = inspect(
        &format!("oci:{}:{TAG}", fixture_seed().display()),
        &RegistryOptions::default(),
    );
    let untagged = inspect(
        &format!("oci:{}", fixture_seed().display()),
        &RegistryOptions::default(),
    );
    assert_eq!(remote.digest, layout.digest);
    assert_eq!(untagged.digest, layout.digest);
    assert_eq!(remote.labels, layout.labels);
    assert_eq!(remote.cluster_info, layout.cluster_info);
    assert_eq!(
        (remote.architecture.as_str(), layout.architecture.as_str()),
        ("amd64", "amd64")
    );
    assert_eq!(
        remote.pinned_reference,
        Some(format!("{}/ibi/seed@{}", reg.addr, remote.digest))
    );
    assert_eq!(layout.pinned_reference, None);
    assert_eq!(remote.labels[SEED_FORMAT_VERSION_LABEL], "4");
    assert!(remote.labels.contains_key(SEED_CLUSTER_INFO_LABEL));
    let ci = remote.cluster_info.as_ref().expect("cluster info");
    assert_eq!(ci.seed_cluster_ocp_version, TAG);
    assert_eq!(check_seed(&remote, &good()), []);
    assert_eq!(check_seed(&layout, &good()), []);
    // The pinned reference reads the same image.
    let pinned = inspect(
        remote.pinned_reference.as_deref().expect("pinned"),
        &insecure(&reg),
    );
    assert_eq!(pinned.digest, remote.digest);
}

#[test]
fn format_version_mismatch() {
    let Some(got) = only_finding(
        "format_version_mismatch",
        &[("SEED_FORMAT_VERSION", "3")],
        &good(),
    ) else {
        return;
    };
    assert_eq!(
        got,
        (
            SeedCheck::FormatVersion,
            r#"seed image label com.openshift.lifecycle-agent.seed_format_version is "3", but ibi requires "4""#.into()
        )
    );
}

#[test]
fn ocp_version_mismatch() {
    let want = expect("4.16.1", "amd64", "var-lib-containers");
    let Some(got) = only_finding("ocp_version_mismatch", &[], &want) else {
        return;
    };
    assert_eq!(
        got,
        (
            SeedCheck::OcpVersion,
            r#"seedVersion "4.16.1" differs from the seed image's seed_cluster_ocp_version "4.16.0""#.into()
        )
    );
}

#[test]
fn architecture_mismatch() {
    let Some(got) = only_finding("architecture_mismatch", &[("SEED_ARCH", "arm64")], &good())
    else {
        return;
    };
    assert_eq!(
        got,
        (
            SeedCheck::Architecture,
            r#"architecture "amd64" differs from the seed image's architecture "arm64""#.into()
        )
    );
}

#[test]
fn partition_label_mismatch() {
    let want = expect(TAG, "amd64", "varlibcontainers");
    let Some(got) = only_finding("partition_label_mismatch", &[], &want) else {
        return;
    };
    assert_eq!(
        got,
        (
            SeedCheck::PartitionLabel,
            r#"extraPartitionLabel "varlibcontainers" differs from the seed's partition label "var-lib-containers" (container_storage_mountpoint_target "/dev/disk/by-partlabel/var-lib-containers")"#.into()
        )
    );
}

/// The generator writes seed_cluster_info as each lifecycle-agent release does: 4.16-4.19 one node_ip
/// string and no machine_networks, 4.20 the lists; has_proxy and has_fips as asked. Read offline.
#[test]
fn generated_seeds_carry_each_versions_label_shape() {
    for version in ["4.16.0", "4.17.3", "4.18.1", "4.20.0"] {
        let vars = [("SEED_HAS_PROXY", "true"), ("SEED_HAS_FIPS", "true")];
        let seed = versioned_seed(version, &vars);
        let info = inspect(
            &format!("oci:{}:{version}", seed.path().join("seed").display()),
            &RegistryOptions::default(),
        );
        let label: serde_json::Value =
            serde_json::from_str(&info.labels[SEED_CLUSTER_INFO_LABEL]).expect("label JSON");
        let ci = info.cluster_info.expect("decoded");
        assert_eq!(ci.seed_cluster_ocp_version, version);
        assert!(ci.has_proxy && ci.has_fips, "{version}");
        if version == "4.20.0" {
            assert_eq!(label["node_ips"], serde_json::json!(["192.168.126.10"]));
            assert_eq!(
                label["machine_networks"],
                serde_json::json!(["192.168.126.0/24"])
            );
            assert!(label.get("node_ip").is_none());
        } else {
            assert_eq!(label["node_ip"], "192.168.126.10", "{version}");
            assert!(
                label.get("node_ips").is_none() && label.get("machine_networks").is_none(),
                "{version}: {label}"
            );
        }
    }
    let dual = versioned_seed(
        "4.20.0",
        &[
            ("SEED_NODE_IPS", "192.168.126.10,fd00::10"),
            ("SEED_MACHINE_NETWORKS", "192.168.126.0/24,fd00::/64"),
        ],
    );
    let info = inspect(
        &format!("oci:{}:4.20.0", dual.path().join("seed").display()),
        &RegistryOptions::default(),
    );
    let ci = info.cluster_info.expect("decoded");
    assert_eq!(ci.node_ips, ["192.168.126.10", "fd00::10"]);
    assert_eq!(ci.machine_networks, ["192.168.126.0/24", "fd00::/64"]);
}

#[test]
fn seed_without_container_mount_skips_partition_check() {
    let want = expect(TAG, "amd64", "anything");
    let Some(reg) = TestRegistry::start("seed_without_container_mount_skips_partition_check")
    else {
        return;
    };
    let seed = make_seed(&[("SEED_MOUNT_TARGET", "")]);
    let reference = reg.push(&seed.path().join("seed"), TAG, "ibi/seed");
    assert_eq!(check_seed(&inspect(&reference, &insecure(&reg)), &want), []);
}

#[test]
fn image_index_selects_the_platform() {
    let Some(reg) = TestRegistry::start("image_index_selects_the_platform") else {
        return;
    };
    let seed = make_seed(&[("SEED_INDEX", "1"), ("SEED_ARCH", "arm64")]);
    let layout = seed.path().join("seed");
    let reference = reg.push(&layout, TAG, "ibi/seed");
    let info = inspect_seed_text(&reference, "arm64", &insecure(&reg)).expect("arm64");
    let offline = inspect_seed_text(
        &format!("oci:{}:{TAG}", layout.display()),
        "arm64",
        &RegistryOptions::default(),
    )
    .expect("arm64 offline");
    assert_eq!(
        info.digest, offline.digest,
        "the pinned digest is the index's"
    );
    assert_eq!(
        check_seed(&info, &expect(TAG, "arm64", "var-lib-containers")),
        []
    );
    let e = inspect_seed_text(&reference, "amd64", &insecure(&reg)).expect_err("no amd64");
    let text = format!("{e:#}");
    assert!(
        text.contains("the image index has no linux/amd64 image (it has: linux/arm64)"),
        "{text}"
    );
    assert!(text.contains(&reg.addr), "{text}");
}

#[test]
fn missing_tag_is_not_found_naming_reference_and_registry() {
    let Some(reg) = TestRegistry::start("missing_tag_is_not_found_naming_reference_and_registry")
    else {
        return;
    };
    reg.push(&fixture_seed(), TAG, "ibi/seed");
    let reference = format!("{}/ibi/seed:4.99.0", reg.addr);
    let e = inspect_seed_text(&reference, "amd64", &insecure(&reg)).expect_err("missing");
    let re = e.downcast_ref::<RegistryError>().expect("a RegistryError");
    assert!(matches!(re, RegistryError::NotFound { .. }), "{re:?}");
    assert!(!re.is_retryable());
    let text = re.to_string();
    assert!(
        text.starts_with(&format!(
            "reading image {reference} from registry {}: not found",
            reg.addr
        )),
        "{text}"
    );
}

#[test]
fn digest_mirrors_are_tried_first_for_digests_only() {
    let Some(reg) = TestRegistry::start("digest_mirrors_are_tried_first_for_digests_only") else {
        return;
    };
    reg.push(&fixture_seed(), TAG, "mirror/org/seed");
    let digest = inspect(
        &format!("oci:{}", fixture_seed().display()),
        &RegistryOptions::default(),
    )
    .digest;
    let mut opts = insecure(&reg);
    opts.image_digest_sources = vec![ImageDigestSource {
        source: "127.0.0.1:1/org".into(),
        mirrors: vec![
            "127.0.0.1:2/dead".into(),
            format!("{}/mirror/org", reg.addr),
        ],
        source_policy: None,
    }];
    let info = inspect(&format!("127.0.0.1:1/org/seed@{digest}"), &opts);
    assert_eq!(
        info.source,
        format!("{}/mirror/org/seed@{digest}", reg.addr)
    );
    assert_eq!(
        info.pinned_reference,
        Some(format!("127.0.0.1:1/org/seed@{digest}")),
        "pinned to the source name"
    );
    // A tag goes to the source only, which is down: the error names it, not the mirrors.
    let e = inspect_seed_text("127.0.0.1:1/org/seed:4.16.0", "amd64", &opts).expect_err("tag");
    let text = e
        .downcast_ref::<RegistryError>()
        .expect("RegistryError")
        .to_string();
    assert!(
        text.contains("from registry 127.0.0.1:1:") && !text.contains("mirror"),
        "{text}"
    );
    // Every endpoint down: the source's error, with the mirrors' failures appended.
    opts.image_digest_sources[0].mirrors.pop();
    let e = inspect_seed_text(&format!("127.0.0.1:1/org/seed@{digest}"), "amd64", &opts)
        .expect_err("all down");
    let text = format!("{e:#}");
    assert!(
        text.contains("from registry 127.0.0.1:1:")
            && text.contains("mirrors also failed: 127.0.0.1:2/dead/seed@"),
        "{text}"
    );
}

#[test]
fn pull_secret_authenticates_and_never_reaches_logs() {
    let (user, password) = ("ibi-user", "s3cret-Pa55word");
    let Some(reg) = TestRegistry::start_with_auth(
        "pull_secret_authenticates_and_never_reaches_logs",
        user,
        password,
    ) else {
        return;
    };
    let reference = reg.push(&fixture_seed(), TAG, "ibi/seed");
    let auth = openssl::base64::encode_block(format!("{user}:{password}").as_bytes());
    let secret = format!(r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#, reg.addr);
    let mut opts = insecure(&reg);
    opts.pull_secret = Some(parse_pull_secret(&secret).expect("pull secret"));

    let logs = LogBuffer::default();
    let sink = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || sink.clone())
        .finish();
    let info = tracing::subscriber::with_default(subscriber, || inspect(&reference, &opts));
    assert_eq!(check_seed(&info, &good()), []);
    let logged = String::from_utf8_lossy(&logs.0.lock().expect("lock")).into_owned();
    assert!(!logged.is_empty(), "trace logging captured nothing");
    assert!(
        !logged.contains(password) && !logged.contains(&auth),
        "secret in logs:\n{logged}"
    );

    let e = inspect_seed_text(&reference, "amd64", &insecure(&reg)).expect_err("anonymous");
    let re = e.downcast_ref::<RegistryError>().expect("RegistryError");
    assert!(matches!(re, RegistryError::Unauthorized { .. }), "{re:?}");
    assert!(
        re.to_string().contains(&format!(
            "access denied (check the pull secret entry for {})",
            reg.addr
        )),
        "{re}"
    );
    let wrong = secret.replace(
        &auth,
        &openssl::base64::encode_block(format!("{user}:wrong").as_bytes()),
    );
    opts.pull_secret = Some(parse_pull_secret(&wrong).expect("pull secret"));
    let e = inspect_seed_text(&reference, "amd64", &opts).expect_err("wrong password");
    assert!(!format!("{e:#}").contains(password));
    assert!(
        matches!(
            e.downcast_ref::<RegistryError>(),
            Some(RegistryError::Unauthorized { .. })
        ),
        "{e:#}"
    );
}

#[test]
fn fixture_regenerates_byte_for_byte() {
    if !common::require_tools(
        "fixture_regenerates_byte_for_byte",
        &["bash", "tar", "gzip", "sha256sum"],
    ) {
        return;
    }
    let fresh = make_seed(&[]);
    let files = |root: &std::path::Path| -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for e in std::fs::read_dir(&dir).expect("read_dir") {
                let p = e.expect("entry").path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(root).expect("prefix").display().to_string();
                    out.push((rel, std::fs::read(&p).expect("read")));
                }
            }
        }
        out.sort();
        out
    };
    let (want, got) = (files(&fixture_seed()), files(&fresh.path().join("seed")));
    let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&got),
        names(&want),
        "run seed-fixtures/make-seed.sh and commit the result"
    );
    assert!(
        got == want,
        "seed-fixtures/seed differs from make-seed.sh output: run it and commit the result"
    );
    let total: usize = want.iter().map(|(_, b)| b.len()).sum();
    assert!(total < 100 * 1024, "fixture is {total} bytes");
}

#[test]
fn additional_trust_bundle_verifies_tls() {
    let Some((reg, ca)) = TestRegistry::start_with_tls("additional_trust_bundle_verifies_tls")
    else {
        return;
    };
    let reference = reg.push(&fixture_seed(), TAG, "ibi/seed");
    let e =
        inspect_seed_text(&reference, "amd64", &RegistryOptions::default()).expect_err("untrusted");
    let re = e.downcast_ref::<RegistryError>().expect("RegistryError");
    assert!(
        matches!(re, RegistryError::Tls { .. }) && !re.is_retryable(),
        "{re:?}"
    );
    assert!(re.to_string().contains("certificate verify failed"), "{re}");
    let bundle = format!("# a comment line\n{ca}");
    let opts = RegistryOptions {
        additional_trust_bundle: Some(bundle),
        ..Default::default()
    };
    assert_eq!(check_seed(&inspect(&reference, &opts), &good()), []);
}
