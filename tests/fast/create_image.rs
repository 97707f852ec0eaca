//! End-to-end tests of `ibi create image` and `ibi inspect`: synthetic live ISOs of every layout
//! round-tripped through coreos-installer, the seed checked through the bundled OCI layout and a
//! real local registry, and the refusals (existing config, too large, not CoreOS, bad seed).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs;

use crate::common::*;
use ibi::live_iso::synthetic::{IgnitionLayout, SyntheticIso};

use crate::common::create_image::*;

#[test]
fn only_the_embed_area_changes() {
    let (site, base) = default_site(IgnitionLayout::InsideFile, true);
    assert_ok(&create_image(site.path(), &base, &[]));
    let (a, b) = (
        fs::read(&base).unwrap(),
        fs::read(site.path().join("rhcos-ibi.iso")).unwrap(),
    );
    let first = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .expect("something changed");
    let last = a.len()
        - 1
        - a.iter()
            .rev()
            .zip(b.iter().rev())
            .position(|(x, y)| x != y)
            .unwrap();
    assert!(
        last - first < 256 * 1024,
        "changes span {first}..={last}, more than the embed area"
    );
}

#[test]
fn seed_mismatch_is_an_error_and_skip_makes_it_a_warning() {
    let site = site(|t| t.replace("seedVersion: 4.16.0", "seedVersion: 4.16.1"));
    let base = base_iso(
        site.path(),
        &SyntheticIso::new(IgnitionLayout::WholeFile, true),
    );
    let res = create_image(site.path(), &base, &[]);
    assert_eq!(res.status.code(), Some(1));
    let err = String::from_utf8_lossy(&res.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("error: image-based-installation-config.yaml: seedVersion: "));
    let line = line.unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains("4.16.0") && line.contains("4.16.1"),
        "names both values: {line}"
    );
    assert!(!site.path().join("rhcos-ibi.iso").exists());
    let res = create_image(site.path(), &base, &["--skip-seed-checks"]);
    assert_ok(&res);
    assert!(
        String::from_utf8_lossy(&res.stderr).contains("4.16.1"),
        "warned"
    );
}

#[test]
fn an_iso_with_a_config_is_refused_unless_forced() {
    let (site, base) = default_site(IgnitionLayout::Legacy, false);
    assert_ok(&create_image(site.path(), &base, &[]));
    let used = site.path().join("used.iso");
    fs::rename(site.path().join("rhcos-ibi.iso"), &used).unwrap();
    let res = create_image(site.path(), &used, &[]);
    assert_eq!(res.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&res.stderr).contains("already carries an Ignition config"));
    assert!(!site.path().join("rhcos-ibi.iso").exists());
    assert_ok(&create_image(site.path(), &used, &["--force"]));
}

/// Issue 33 item 8: a fleet's site built by a batch, whose shared inputs in BASE change afterwards
/// (a shared extra manifest): `create image --site` compares the batch record's fingerprint of the
/// site's inputs with the inputs as they are now, and warns; unchanged, it says nothing of it.
#[test]
fn a_fleet_site_whose_shared_inputs_changed_is_named_by_create_image_site() {
    let (dir, base) = default_site(IgnitionLayout::WholeFile, true);
    let fleet =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/example-fleet");
    for f in [
        "install-config.yaml",
        "image-based-config.yaml",
        "sites.yaml",
    ] {
        fs::copy(fleet.join(f), dir.path().join(f)).unwrap();
    }
    common::copy_tree(
        &fleet.join("extra-manifests"),
        &dir.path().join("extra-manifests"),
    );
    let inventory = dir.path().join("sites.yaml");
    let batch = ibi(
        &[
            "create",
            "config-image",
            "--dir",
            dir.path().to_str().unwrap(),
            "--sites",
            inventory.to_str().unwrap(),
        ],
        &[],
    );
    assert_ok(&batch);
    let site = dir.path().join("sites/a17");
    let changed = "the fleet's inputs of site a17 changed since";
    let out = create_image(dir.path(), &base, &["--site", site.to_str().unwrap()]);
    assert_ok(&out);
    assert!(!String::from_utf8_lossy(&out.stderr).contains(changed));
    let shared = dir.path().join("extra-manifests/50-fleet-configmap.yaml");
    let text = fs::read_to_string(&shared).unwrap();
    fs::write(&shared, text.replace("data:", "data:\n  added: \"yes\"")).unwrap();
    let out = create_image(
        dir.path(),
        &base,
        &["--site", site.to_str().unwrap(), "--force"],
    );
    assert_ok(&out);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains(changed), "{log}");
    assert!(
        log.contains(&format!(
            "run `ibi create config-image --dir {} --sites {}` first",
            dir.path().display(),
            inventory.display()
        )),
        "{log}"
    );
}

/// Issue 33 item 9: a site too large for the embed area was refused only after the seed checks and
/// the base ISO (155 s and 651 MB in a user's walk), saying a fetch at install time was "not done
/// yet". It is refused first, in a second: here before the base ISO is even opened (the path given
/// does not exist), with the documented way out.
#[test]
fn a_site_too_large_for_the_embed_area_is_refused_first_with_the_way_out() {
    let (dir, _) = default_site(IgnitionLayout::WholeFile, true);
    let site = copy_example();
    let mut noise = vec![0u8; 400 * 1024];
    openssl::rand::rand_bytes(&mut noise).unwrap();
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: noise\n  namespace: default\ndata:\n  noise: {}\n",
        openssl::base64::encode_block(&noise).replace('\n', "")
    );
    fs::write(site.path().join("extra-manifests/noise.yaml"), manifest).unwrap();
    assert_ok(&config_image(site.path(), &[]));
    let missing_base = dir.path().join("not-there.iso");
    let res = create_image(
        dir.path(),
        &missing_base,
        &["--site", site.path().to_str().unwrap()],
    );
    assert_eq!(res.status.code(), Some(1));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains(&format!(
            "error: --site {}: the site's configuration is ",
            site.path().display()
        )) && err.contains("does not fit the 262144-byte Ignition embed area of a CoreOS live ISO even without the rest of the installation config; a site this large is installed by `ibi deploy --phase oneshot`, whose host fetches its configuration ISO at install time (which needs hostAgent: ibi and statusURL in image-based-installation-config.yaml), or in two phases"),
        "{err}"
    );
    assert!(!err.contains("not done yet"), "{err}");
    assert!(!site.path().join("rhcos-ibi.iso").exists());
}

#[test]
fn too_large_names_sizes_and_biggest_files() {
    let site = site(|t| t);
    let mut noise = vec![0u8; 400 * 1024];
    openssl::rand::rand_bytes(&mut noise).unwrap();
    let script = format!("#!/bin/bash\n# {}\n", openssl::base64::encode_block(&noise));
    fs::write(site.path().join("post.sh"), script).unwrap();
    let base = base_iso(
        site.path(),
        &SyntheticIso::new(IgnitionLayout::WholeFile, true),
    );
    let res = create_image(site.path(), &base, &[]);
    assert_eq!(res.status.code(), Some(1));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("262144-byte Ignition embed area"), "{err}");
    assert!(err.contains("biggest files: /var/tmp/post.sh ("), "{err}");
    assert!(!site.path().join("rhcos-ibi.iso").exists());
}

#[test]
fn a_plain_iso_is_not_a_base() {
    let site = site(|t| t);
    let plain = site.path().join("plain.iso");
    let mut b = ibi::iso9660::IsoBuilder::new();
    b.add_file("readme.txt", b"hello".to_vec(), 0o644).unwrap();
    let opts = ibi::iso9660::WriteOptions {
        volume_id: "PLAIN".into(),
        timestamp: 0,
    };
    b.write(&opts, fs::File::create(&plain).unwrap()).unwrap();
    let res = create_image(site.path(), &plain, &[]);
    assert_eq!(res.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&res.stderr).contains("Unrecognized CoreOS ISO image."));
    let report = ibi(&["inspect", plain.to_str().unwrap()], &[]);
    assert_ok(&report);
    assert!(String::from_utf8_lossy(&report.stdout).contains("Kind: other ISO 9660 image"));
}

#[test]
fn missing_required_fields_are_all_reported() {
    let site = site(|t| {
        t.lines()
            .filter(|l| !l.starts_with("seedImage:") && !l.starts_with("installationDisk:"))
            .map(|l| format!("{l}\n"))
            .collect()
    });
    let base = base_iso(
        site.path(),
        &SyntheticIso::new(IgnitionLayout::WholeFile, true),
    );
    let res = create_image(site.path(), &base, &[]);
    assert_eq!(res.status.code(), Some(1));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains("error: image-based-installation-config.yaml: seedImage: required"),
        "{err}"
    );
    assert!(
        err.contains("error: image-based-installation-config.yaml: installationDisk: required"),
        "{err}"
    );
}

#[test]
fn inspect_shows_kinds_and_hides_secrets() {
    let (site, base) = default_site(IgnitionLayout::WholeFile, true);
    assert_ok(&create_image(site.path(), &base, &[]));
    let out = ibi(
        &[
            "inspect",
            site.path().join("rhcos-ibi.iso").to_str().unwrap(),
        ],
        &[],
    );
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Kind: installation ISO"), "{text}");
    assert!(
        text.contains("Unit: install-rhcos-and-restore-seed.service (enabled)"),
        "{text}"
    );
    assert!(
        text.contains("Host agent: lca (lca-cli from the seed image)\n"),
        "{text}"
    );
    assert!(
        text.contains("File: /var/tmp/pull-secret.json mode 0600"),
        "{text}"
    );
    assert!(
        !text.contains("ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk"),
        "pull secret leaked: {text}"
    );
    let plain = ibi(&["inspect", base.to_str().unwrap()], &[]);
    assert!(String::from_utf8_lossy(&plain.stdout).contains("Kind: plain CoreOS live ISO"));
}

#[test]
fn host_agent_ibi_without_an_image_is_a_finding() {
    let site = site(|t| format!("{t}hostAgent: ibi\n"));
    let base = base_iso(
        site.path(),
        &SyntheticIso::new(IgnitionLayout::WholeFile, true),
    );
    let res = create_image(site.path(), &base, &[]);
    assert_eq!(res.status.code(), Some(1));
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(
        err.contains("error: image-based-installation-config.yaml: hostAgentImage: required"),
        "{err}"
    );
    assert!(!site.path().join("rhcos-ibi.iso").exists());
}
