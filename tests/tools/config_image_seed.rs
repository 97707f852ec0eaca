//! `create config-image --seed`: the example site checked against seeds of 4.16, 4.17, 4.18 and 4.20
//! made by `seed-fixtures/make-seed.sh` (labels in each release's shape), before anything is written;
//! and a registry seed read with the site's pull secret and digest mirrors from a local registry.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;

use crate::common::registry::{TestRegistry, versioned_seed};
use crate::common::*;

use crate::common::config_image_seed::*;

#[test]
fn a_matching_site_builds_against_every_version() {
    for version in VERSIONS {
        let seed = versioned_seed(version, &[]);
        let site = copy_example();
        let out = against(site.path(), &seed, version);
        assert_ok(&out);
        assert!(
            site.path().join("imagebasedconfig.iso").exists(),
            "{version}"
        );
        // A proxy site against a proxy seed fits too; its manifest names the machine network as a
        // 4.16-4.19 post-pivot reads it (without machine_network it fails on a proxy site).
        let seed = versioned_seed(version, &[("SEED_HAS_PROXY", "true")]);
        let site = site_with(PROXY);
        assert_ok(&against(site.path(), &seed, version));
        let m = manifest(site.path());
        assert_eq!(m["machine_network"], "192.168.122.0/23", "{version}");
        assert_eq!(
            m["machine_networks"],
            serde_json::json!(["192.168.122.0/23"])
        );
        assert!(m["proxy"].is_object(), "{version}");
    }
}

/// Two machine networks of one family fail every 4.20+ seed on the host (one per node IP); ibi refuses
/// them whatever the seed, before reading it.
#[test]
fn two_machine_networks_of_one_family_are_refused_for_every_version() {
    for version in VERSIONS {
        let seed = versioned_seed(version, &[]);
        let site = copy_example();
        edit(site.path(), IC, |t| {
            t.replace(
                "    - cidr: 192.168.122.0/23\n",
                "    - cidr: 192.168.122.0/23\n    - cidr: 10.0.0.0/16\n",
            )
        });
        let errors = refused(site.path(), &against(site.path(), &seed, version));
        assert_eq!(
            errors,
            [
                "error: install-config.yaml: networking.machineNetwork: 192.168.122.0/23 and 10.0.0.0/16 are both IPv4: give at most one machine network per IP family (lifecycle-agent 4.20+ requires one per node IP, of its family)"
            ],
            "{version}"
        );
    }
}

#[test]
fn proxy_presence_must_match_has_proxy_for_every_version() {
    for version in VERSIONS {
        let seed = versioned_seed(version, &[("SEED_HAS_PROXY", "true")]);
        let site = copy_example();
        let out = against(site.path(), &seed, version);
        let errors = refused(site.path(), &out);
        assert_eq!(errors.len(), 1, "{version}: {errors:?}");
        assert!(
            errors[0].starts_with("error: install-config.yaml: proxy: is not set, but the seed has a proxy (seed_cluster_info has_proxy: true)"),
            "{version}: {errors:?}"
        );
        let seed = versioned_seed(version, &[]);
        let site = site_with(PROXY);
        let out = against(site.path(), &seed, version);
        let errors = refused(site.path(), &out);
        assert!(
            errors[0].starts_with("error: install-config.yaml: proxy: is set, but the seed has no proxy (seed_cluster_info has_proxy: false)"),
            "{version}: {errors:?}"
        );
    }
}

#[test]
fn fips_must_match_has_fips_for_every_version() {
    for version in VERSIONS {
        let seed = versioned_seed(version, &[("SEED_HAS_FIPS", "true")]);
        let site = copy_example();
        let errors = refused(site.path(), &against(site.path(), &seed, version));
        assert_eq!(
            errors,
            [
                "error: install-config.yaml: fips: is false (or not set), but the seed has FIPS enabled (seed_cluster_info has_fips: true): the cluster keeps the seed's FIPS mode, so an image-based installation requires the two to match"
            ],
            "{version}"
        );
        let site = site_with("fips: true\n");
        assert_ok(&against(site.path(), &seed, version));
    }
}

/// An IPv6-first dual-stack site against IPv4 seeds: a 4.20 seed is refused on its node IPs and on
/// its machine networks (two findings), a 4.16-4.19 seed on its one node_ip.
#[test]
fn machine_network_families_must_match_the_seeds() {
    for version in VERSIONS {
        let seed = versioned_seed(version, &[]);
        let site = copy_example();
        dual_stack_v6_first(site.path());
        let errors = refused(site.path(), &against(site.path(), &seed, version));
        let prefix = "error: install-config.yaml: networking.machineNetwork: IPv6 then IPv4 (fd00:122::/64, 192.168.122.0/23), but the seed's";
        assert!(errors.iter().all(|e| e.starts_with(prefix)), "{errors:?}");
        if version == "4.20.0" {
            assert_eq!(errors.len(), 2, "{errors:?}");
            assert!(
                errors[0].contains(
                    r#"node IPs are IPv4 (seed_cluster_info node_ips ["192.168.126.10"])"#
                )
            );
            assert!(errors[1].contains(r#"machine networks are IPv4 (seed_cluster_info machine_networks ["192.168.126.0/24"])"#));
        } else {
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert!(
                errors[0].contains(&format!(r#"node IPs are IPv4 (seed_cluster_info node_ip "192.168.126.10"): the seed's lifecycle-agent ({version}) reads one machine network only"#)),
                "{errors:?}"
            );
        }
    }
    // The same site fits a dual-stack 4.20 seed listed in the same order.
    let seed = versioned_seed(
        "4.20.0",
        &[
            ("SEED_NODE_IPS", "fd00::10,192.168.126.10"),
            ("SEED_MACHINE_NETWORKS", "fd00::/64,192.168.126.0/24"),
        ],
    );
    let site = copy_example();
    dual_stack_v6_first(site.path());
    assert_ok(&against(site.path(), &seed, "4.20.0"));
}

#[test]
fn every_finding_at_once() {
    let seed = versioned_seed(
        "4.20.0",
        &[
            ("SEED_HAS_PROXY", "true"),
            ("SEED_HAS_FIPS", "true"),
            ("SEED_NODE_IPS", "fd00::10"),
            ("SEED_MACHINE_NETWORKS", "fd00::/64"),
        ],
    );
    let site = copy_example();
    let errors = refused(site.path(), &against(site.path(), &seed, "4.20.0"));
    let fields: Vec<&str> = errors
        .iter()
        .map(|e| e.split(": ").nth(2).unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "proxy",
            "fips",
            "networking.machineNetwork",
            "networking.machineNetwork"
        ],
        "{errors:?}"
    );
}

/// A registry seed is read as `create image` reads one: given by digest, through the site's
/// imageDigestSources mirror, with the site's pull secret; the credentials never reach the log.
#[test]
fn registry_seed_through_the_sites_mirror_and_pull_secret() {
    let test = "registry_seed_through_the_sites_mirror_and_pull_secret";
    let (user, password) = ("ibi-user", "s3cret-Pa55word-preflight");
    let Some(reg) = TestRegistry::start_with_auth(test, user, password) else {
        return;
    };
    let seed = versioned_seed("4.20.0", &[("SEED_HAS_PROXY", "true")]);
    let pushed = reg.push(&seed.path().join("seed"), "4.20.0", "mirror/org/seed");
    let digest = {
        let layout = seed.path().join("seed");
        let index: serde_json::Value =
            serde_json::from_slice(&fs::read(layout.join("index.json")).unwrap()).unwrap();
        index["manifests"][0]["digest"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let auth = openssl::base64::encode_block(format!("{user}:{password}").as_bytes());
    let site = copy_example();
    edit(site.path(), IC, |t| {
        let t = t.replace(
            &format!("\"registry.edge.example.com:5000\":{{\"auth\":\"{EXAMPLE_AUTH}\"}}"),
            &format!("\"{}\":{{\"auth\":\"{auth}\"}}", reg.addr),
        );
        assert!(
            !t.contains(EXAMPLE_AUTH),
            "the example's pull secret changed"
        );
        // Our source first in the example's imageDigestSources.
        t.replacen(
            "imageDigestSources:\n",
            &format!(
                "imageDigestSources:\n  - source: 127.0.0.1:1/org/seed\n    mirrors:\n      - {}/mirror/org/seed\n",
                reg.addr
            ),
            1,
        )
    });
    let reference = format!("127.0.0.1:1/org/seed@{digest}");
    let args = [
        "--log-level",
        "trace",
        "--seed",
        &reference,
        "--insecure-registry",
        &reg.addr,
    ];
    let out = config_image(site.path(), &args);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!log.contains(password) && !log.contains(&auth), "{log}");
    let errors = refused(site.path(), &out);
    assert_eq!(errors.len(), 1, "{errors:?} (pushed {pushed})\n{log}");
    assert!(
        errors[0].contains("proxy: is not set, but the seed has a proxy"),
        "{errors:?}"
    );
    // Without the credentials the registry refuses: the pull secret is what got us in.
    edit(site.path(), IC, |t| {
        t.replace(&auth, &openssl::base64::encode_block(b"ibi-user:wrong"))
    });
    let out = config_image(site.path(), &args[2..]);
    let errors = refused(site.path(), &out);
    assert!(errors[0].contains("reading the seed image"), "{errors:?}");
}
