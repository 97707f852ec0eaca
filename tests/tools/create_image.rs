//! End-to-end tests of `ibi create image` and `ibi inspect`: synthetic live ISOs of every layout
//! round-tripped through coreos-installer, the seed checked through the bundled OCI layout and a
//! real local registry, and the refusals (existing config, too large, not CoreOS, bad seed).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs;

use crate::common::registry::{TestRegistry, fixture_seed, versioned_seed};
use crate::common::*;
use ibi::live_iso::synthetic::{IgnitionLayout, SyntheticIso};
use serde_json::Value;

use crate::common::create_image::*;

#[test]
fn example_builds_a_valid_installation_iso() {
    let test = "example_builds_a_valid_installation_iso";
    let (site, base) = default_site(IgnitionLayout::WholeFile, true);
    assert_ok(&create_image(site.path(), &base, &[]));
    let out = site.path().join("rhcos-ibi.iso");
    assert_eq!(mode(&out), 0o600, "holds the pull secret");
    let (a, b) = (fs::read(&base).unwrap(), fs::read(&out).unwrap());
    assert_eq!(a.len(), b.len(), "ISO size unchanged");
    let config = our_ignition(&out);
    let cfg = ibi_configuration(&config);
    assert_eq!(cfg["seedVersion"], "4.16.0");
    assert_eq!(
        cfg["installationDisk"],
        "/dev/disk/by-id/wwn-0x5000c500a0b1c2d3"
    );
    assert_eq!(cfg["extraPartitionLabel"], "var-lib-containers");
    assert_eq!(cfg["precacheBestEffort"], true);
    assert!(
        cfg["seedImage"].as_str().unwrap().starts_with("oci:"),
        "a layout is not pinned: {cfg}"
    );
    if tool("coreos-installer", test) {
        assert_eq!(
            show_ignition(&out),
            config,
            "coreos-installer reads our config byte for byte"
        );
    }
    if tool("ignition-validate", test) {
        let f = site.path().join("config.ign");
        fs::write(&f, &config).unwrap();
        run_tool("ignition-validate", &[f.to_str().unwrap()]);
    }
}

#[test]
fn every_layout_round_trips_with_live_kargs() {
    let test = "every_layout_round_trips_with_live_kargs";
    if !tool("coreos-installer", test) {
        return;
    }
    for iso in SyntheticIso::all() {
        let site = site(|t| format!("{t}liveKernelArgs:\n  - console=ttyS0,115200\n"));
        let base = base_iso(site.path(), &iso);
        let res = create_image(site.path(), &base, &[]);
        if !iso.kargs {
            assert_eq!(res.status.code(), Some(1), "{}", iso.name());
            let err = String::from_utf8_lossy(&res.stderr);
            assert!(
                err.contains("liveKernelArgs") && err.contains("no kernel-argument"),
                "{err}"
            );
            assert!(!site.path().join("rhcos-ibi.iso").exists());
            continue;
        }
        assert_ok(&res);
        let out = site.path().join("rhcos-ibi.iso");
        assert_eq!(show_ignition(&out), our_ignition(&out), "{}", iso.name());
        let kargs = run_tool(
            "coreos-installer",
            &["iso", "kargs", "show", out.to_str().unwrap()],
        );
        let default = run_tool(
            "coreos-installer",
            &["iso", "kargs", "show", "--default", out.to_str().unwrap()],
        );
        assert_eq!(
            kargs.trim_end(),
            format!("{} console=ttyS0,115200", default.trim_end()),
            "{}",
            iso.name()
        );
        let report = ibi(&["inspect", out.to_str().unwrap()], &[]);
        assert!(
            String::from_utf8_lossy(&report.stdout).contains(kargs.trim_end()),
            "{}",
            iso.name()
        );
    }
}

#[test]
fn registry_seed_is_pinned_by_digest_unless_asked_not_to() {
    let test = "registry_seed_is_pinned_by_digest_unless_asked_not_to";
    if !common::require_tools(test, &["docker-registry", "skopeo"]) {
        return;
    }
    let Some(reg) = TestRegistry::start(test) else {
        return;
    };
    let pushed = reg.push(&fixture_seed(), "4.16.0", "edge/seed");
    let site = site(|t| t.replace(&format!("oci:{}:4.16.0", fixture_seed().display()), &pushed));
    let base = base_iso(
        site.path(),
        &SyntheticIso::new(IgnitionLayout::WholeFile, true),
    );
    let insecure = ["--insecure-registry", reg.addr.as_str()];
    assert_ok(&create_image(site.path(), &base, &insecure));
    let config = our_ignition(&site.path().join("rhcos-ibi.iso"));
    let seed = ibi_configuration(&config)["seedImage"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        seed.starts_with(&format!("{}/edge/seed@sha256:", reg.addr)),
        "{seed}"
    );
    let unit = file_in(&config, "/usr/local/bin/install-rhcos-and-restore-seed.sh");
    assert!(unit.contains("SEED_IMAGE"), "the script reads SEED_IMAGE");
    let v: Value = serde_json::from_slice(&config).unwrap();
    let install = v["systemd"]["units"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "install-rhcos-and-restore-seed.service")
        .unwrap();
    assert!(
        install["contents"]
            .as_str()
            .unwrap()
            .contains(&format!("SEED_IMAGE={seed}"))
    );

    let flags = ["--insecure-registry", reg.addr.as_str(), "--no-pin-seed"];
    assert_ok(&create_image(site.path(), &base, &flags));
    let config = our_ignition(&site.path().join("rhcos-ibi.iso"));
    assert_eq!(ibi_configuration(&config)["seedImage"], pushed.as_str());
}

#[test]
fn host_agent_ibi_fetches_and_runs_ibi_instead_of_lca_cli() {
    let test = "host_agent_ibi_fetches_and_runs_ibi_instead_of_lca_cli";
    let image = "quay.io/openshift-kni/ibi:4.16.0";
    let site = site(|t| format!("{t}hostAgent: ibi\nhostAgentImage: {image}\n"));
    let base = base_iso(
        site.path(),
        &SyntheticIso::new(IgnitionLayout::WholeFile, true),
    );
    assert_ok(&create_image(site.path(), &base, &[]));
    let out = site.path().join("rhcos-ibi.iso");
    let config = our_ignition(&out);
    let v: Value = serde_json::from_slice(&config).unwrap();
    let units = v["systemd"]["units"].as_array().unwrap();
    let names: Vec<&str> = units.iter().map(|u| u["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["ibi-agent-install.service", "network-config.service"]
    );
    assert_eq!(units[0]["enabled"], true);
    assert!(
        units[0]["contents"].as_str().unwrap().contains(
            "ExecStart=/usr/local/bin/ibi agent install -f /var/tmp/ibi-configuration.json"
        )
    );
    let dropin = units[0]["dropins"][0]["contents"].as_str().unwrap();
    assert!(
        dropin.contains(&format!("Environment=HOST_AGENT_IMAGE={image}\n")),
        "{dropin}"
    );
    let script = file_in(&config, "/usr/local/bin/fetch-ibi.sh");
    assert!(script.contains("podman cp ibi-agent:/usr/local/bin/ibi /usr/local/bin/ibi"));
    assert!(!String::from_utf8_lossy(&config).contains("lca-cli"));
    assert_eq!(ibi_configuration(&config)["seedVersion"], "4.16.0");
    if tool("coreos-installer", test) {
        let shown = show_ignition(&out);
        assert_eq!(
            shown, config,
            "coreos-installer reads our config byte for byte"
        );
        assert!(String::from_utf8_lossy(&shown).contains("\"name\":\"ibi-agent-install.service\""));
    }
    let report = ibi(&["inspect", out.to_str().unwrap()], &[]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("Kind: installation ISO"), "{text}");
    assert!(
        text.contains(&format!(
            "Host agent: ibi (/usr/local/bin/ibi from {image})"
        )),
        "{text}"
    );
}

/// coreosInstallerArgs (first in lifecycle-agent 4.18) and releaseRegistry (4.17) against seeds of
/// 4.16, 4.17, 4.18 and 4.20 from the generator: with hostAgent: lca the keys a seed's lca-cli would
/// drop are refused, naming the field, the seed's version and the first version; nothing is written.
/// With hostAgent: ibi both reach ibi-configuration.json whatever the seed.
#[test]
fn keys_the_seeds_lca_cli_predates_are_refused() {
    const KEYS: &str =
        "coreosInstallerArgs: [--save-partindex, '6']\nreleaseRegistry: mirror.example.com:5000\n";
    let cases: [(&str, &[&str]); 4] = [
        ("4.16.0", &["releaseRegistry", "coreosInstallerArgs"]),
        ("4.17.0", &["coreosInstallerArgs"]),
        ("4.18.0", &[]),
        ("4.20.0", &[]),
    ];
    for (version, refused) in cases {
        let seed = versioned_seed(version, &[]);
        let layout = seed.path().join("seed");
        for agent in [
            "",
            "hostAgent: ibi\nhostAgentImage: quay.io/openshift-kni/ibi:4.20\n",
        ] {
            let site = versioned_site(&layout, version, &format!("{KEYS}{agent}"));
            let base = base_iso(
                site.path(),
                &SyntheticIso::new(IgnitionLayout::WholeFile, true),
            );
            let out = create_image(site.path(), &base, &[]);
            let err = String::from_utf8_lossy(&out.stderr);
            let iso = site.path().join("rhcos-ibi.iso");
            if agent.is_empty() && !refused.is_empty() {
                assert_eq!(out.status.code(), Some(1), "{version}: {err}");
                for field in refused {
                    let since = if *field == "releaseRegistry" {
                        "4.17"
                    } else {
                        "4.18"
                    };
                    let want = format!(
                        "error: {CONFIG}: {field}: the seed is {version} (seedVersion), whose lca-cli ignores this key"
                    );
                    assert!(err.contains(&want), "{version}: {err}");
                    assert!(
                        err.contains(&format!("lca-cli honours it from {since} on")),
                        "{err}"
                    );
                }
                assert_eq!(err.matches("error: ").count(), refused.len(), "{err}");
                assert!(!iso.exists(), "{version}: nothing is written");
                continue;
            }
            assert_ok(&out);
            let cfg = ibi_configuration(&our_ignition(&iso));
            assert_eq!(cfg["seedVersion"], version);
            assert_eq!(
                cfg["coreosInstallerArgs"],
                serde_json::json!(["--save-partindex", "6"])
            );
            assert_eq!(cfg["releaseRegistry"], "mirror.example.com:5000");
        }
    }
}

/// `--site`: the installation ISO carries exactly the files and bytes of the site's configuration
/// ISO, in the Ignition embed area, and is written into the site directory, private.
#[test]
fn site_makes_a_one_shot_iso_carrying_the_sites_configuration() {
    let test = "site_makes_a_one_shot_iso_carrying_the_sites_configuration";
    let (dir, base) = default_site(IgnitionLayout::WholeFile, true);
    fs::write(dir.path().join("post.sh"), "#!/bin/bash\necho user\n").unwrap();
    let site = copy_example();
    let missing = create_image(
        dir.path(),
        &base,
        &["--site", site.path().to_str().unwrap()],
    );
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        err.contains("build the site's configuration ISO first"),
        "{err}"
    );

    assert_ok(&config_image(site.path(), &[]));
    // An input edited after the configuration ISO was built: the ISO is carried as built, with a warning.
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let built = fs::File::options()
        .write(true)
        .open(site.path().join("imagebasedconfig.iso"))
        .unwrap();
    built.set_modified(hour_ago).unwrap();
    // An extra manifest edited in place (issue 33 item 8): its directory's time stays older than
    // the ISO, the file's does not.
    let two_hours_ago = hour_ago - std::time::Duration::from_secs(3600);
    fs::File::open(site.path().join("extra-manifests"))
        .unwrap()
        .set_modified(two_hours_ago)
        .unwrap();
    let out = create_image(
        dir.path(),
        &base,
        &["--site", site.path().to_str().unwrap()],
    );
    assert_ok(&out);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("image-based-config.yaml is newer than")
            && log.contains("the one-shot ISO carries the configuration ISO as built"),
        "{log}"
    );
    assert!(
        log.contains("extra-manifests/50-site-a17-configmap-with-a-name-longer-than-thirty-characters.yaml is newer than"),
        "{log}"
    );
    assert!(
        log.contains("the compressed Ignition config takes"),
        "{log}"
    );
    assert!(
        log.contains("-byte embed area,") && log.contains(" bytes left"),
        "{log}"
    );
    let iso = site.path().join("rhcos-ibi.iso");
    assert_eq!(mode(&iso), 0o600, "holds the site's private keys");
    assert!(
        !dir.path().join("rhcos-ibi.iso").exists(),
        "the shared ISO is not touched"
    );

    let config = our_ignition(&iso);
    let v: Value = serde_json::from_slice(&config).unwrap();
    let files = v["storage"]["files"].as_array().unwrap();
    let dirs = v["storage"]["directories"].as_array().unwrap();
    let prefix = "/var/tmp/ibi-site-configuration/";
    let expected = iso_files(&site.path().join("imagebasedconfig.iso"));
    let mut carried = 0;
    for (path, is_dir, data) in &expected {
        let at = format!("{prefix}{path}");
        if *is_dir {
            let d = dirs
                .iter()
                .find(|d| d["path"] == at.as_str())
                .unwrap_or_else(|| panic!("{at}"));
            assert_eq!(d["mode"], 0o700, "{at}");
            continue;
        }
        let f = files
            .iter()
            .find(|f| f["path"] == at.as_str())
            .unwrap_or_else(|| panic!("{at}"));
        assert_eq!(f["mode"], 0o600, "{at}");
        assert_eq!(
            file_in(&config, &at).as_bytes(),
            data.as_slice(),
            "{at} byte for byte"
        );
        carried += 1;
    }
    let in_tree = files
        .iter()
        .filter(|f| f["path"].as_str().unwrap().starts_with(prefix))
        .count();
    assert_eq!(
        in_tree, carried,
        "nothing but the configuration ISO's files"
    );
    assert!(
        expected
            .iter()
            .any(|(p, _, _)| p == "cluster-configuration/manifests")
    );
    assert!(file_in(&config, "/var/tmp/post.sh").contains("ibi-site-configuration"));
    assert_eq!(
        file_in(&config, "/var/tmp/ibi-user-post.sh"),
        "#!/bin/bash\necho user\n"
    );

    let report = ibi(&["inspect", iso.to_str().unwrap()], &[]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("  site: carries the configuration and secrets of site "),
        "{text}"
    );
    assert!(!text.contains("BEGIN RSA PRIVATE KEY"), "{text}");
    // Issue 33 item 7: the example site's static network is applied on the live system too.
    assert!(text.contains("  networkConfig: true"), "{text}");
    assert!(
        text.contains("Unit: network-config.service (enabled)"),
        "{text}"
    );
    if tool("coreos-installer", test) {
        assert_eq!(
            show_ignition(&iso),
            config,
            "coreos-installer reads it byte for byte"
        );
    }
    if tool("ignition-validate", test) {
        let f = dir.path().join("config.ign");
        fs::write(&f, &config).unwrap();
        run_tool("ignition-validate", &[f.to_str().unwrap()]);
    }
    let patch = create_image(
        dir.path(),
        &base,
        &["--site", site.path().to_str().unwrap(), "--patch-only"],
    );
    assert!(
        !patch.status.success(),
        "a one-shot ISO is not streamed yet"
    );
}
