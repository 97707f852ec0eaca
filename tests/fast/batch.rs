//! End-to-end tests of the batch mode, `ibi create config-image --dir BASE --sites INVENTORY`, on the
//! bundled example fleet: every site's ISO read back (our reader; blkid and xorriso when installed),
//! per-site differences, identity reuse, rebuilding only the sites that changed, a failing site among
//! good ones, inventory errors that write nothing, and the CSV form.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::collections::BTreeMap;
use std::fs;

use crate::common::*;
use ibi::iso9660::IsoReader;
use serde_json::Value;

use crate::common::batch::*;

#[test]
fn three_sites_end_to_end_with_isos_read_back() {
    let base = copy_fleet();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_ok(&out);
    expect_results(
        &out,
        &[("a17", "created"), ("a18", "created"), ("a19", "created")],
    );
    let text = stdout(&out);
    assert!(text.starts_with("SITE  RESULT     OUTPUT\n"), "{text}");
    let iso17 = base.path().join("sites/a17/imagebasedconfig.iso");
    assert!(
        text.contains(&format!("a17   created    {}\n", iso17.display())),
        "{text}"
    );
    assert!(
        text.ends_with("3 sites: 3 created, 0 updated, 0 unchanged, 0 failed\n"),
        "{text}"
    );
    assert_eq!(
        stderr(&out),
        "",
        "no warnings, and no progress bar off a TTY"
    );

    let m: BTreeMap<&str, Value> = SITES
        .iter()
        .map(|s| (*s, manifest(&base.path().join("sites").join(s))))
        .collect();
    for (site, v) in &m {
        assert_eq!(v["hostname"], format!("sno-{site}"));
        assert_eq!(v["cluster_name"], format!("sno-{site}"));
        assert_eq!(v["release_registry"], "registry.edge.example.com:5000");
        assert_eq!(v["node_labels"]["site.example.com/id"], *site);
        assert_eq!(v["node_labels"]["node-role.kubernetes.io/edge"], "");
        let dir = base.path().join("sites").join(site);
        for rel in OUTPUTS.iter().chain(&[".ibi/batch.json"]) {
            assert_eq!(mode(&dir.join(rel)), 0o600, "{site}/{rel}");
        }
    }
    assert_eq!(m["a17"]["base_domain"], "edge.example.com");
    assert_eq!(m["a18"]["base_domain"], "edge2.example.com");
    assert_eq!(
        m["a17"]["machine_networks"],
        serde_json::json!(["192.168.122.0/23"])
    );
    assert_eq!(
        m["a18"]["machine_networks"],
        serde_json::json!(["10.18.0.0/24"])
    );
    assert_eq!(m["a18"]["machine_network"], "10.18.0.0/24");
    let nm = |s: &str| m[s]["raw_nm_state_config"].as_str().unwrap().to_string();
    assert!(
        nm("a17").contains("ip: 192.168.122.17") && nm("a17").contains("name: eth0"),
        "{}",
        nm("a17")
    );
    assert!(
        nm("a18").contains("ip: 10.18.0.10") && nm("a18").contains("- 10.18.0.2"),
        "{}",
        nm("a18")
    );
    assert!(
        nm("a19").contains("base-iface: eth0") && nm("a19").contains("id: 19"),
        "{}",
        nm("a19")
    );
    let chrony = |s: &str| m[s]["chrony_config"].as_str().unwrap().to_string();
    assert!(
        chrony("a17").ends_with("server 0.rhel.pool.ntp.org iburst"),
        "{}",
        chrony("a17")
    );
    assert!(
        chrony("a18").ends_with("server 10.18.0.1 iburst"),
        "site override: {}",
        chrony("a18")
    );
    // Three clusters: every identity differs.
    let ids: std::collections::BTreeSet<_> =
        m.values().map(|v| v["cluster_id"].to_string()).collect();
    assert_eq!(ids.len(), 3);
    let pw = |s: &str| {
        fs::read(
            base.path()
                .join("sites")
                .join(s)
                .join("auth/kubeadmin-password"),
        )
        .unwrap()
    };
    assert_ne!(pw("a17"), pw("a18"));
    let kubeconfig = fs::read_to_string(base.path().join("sites/a18/auth/kubeconfig")).unwrap();
    assert!(
        kubeconfig.contains("server: https://api.sno-a18.edge2.example.com:6443"),
        "{kubeconfig}"
    );

    // The shared extra manifest is in every ISO.
    let file = fs::File::open(&iso17).unwrap();
    let mut iso = IsoReader::open(file).unwrap();
    let cm = iso
        .read_file("extra-manifests/50-fleet-configmap.yaml")
        .unwrap();
    assert_eq!(
        cm,
        fs::read(example_fleet().join("extra-manifests/50-fleet-configmap.yaml")).unwrap()
    );
}

#[test]
fn rerun_rebuilds_only_changed_sites_and_keeps_identities() {
    let base = copy_fleet();
    assert_ok(&batch(base.path(), "sites.yaml", &[]));
    let before = snapshot(base.path());

    let out = batch(base.path(), "sites.yaml", &[]);
    assert_ok(&out);
    expect_results(
        &out,
        &[
            ("a17", "unchanged"),
            ("a18", "unchanged"),
            ("a19", "unchanged"),
        ],
    );
    assert_eq!(
        snapshot(base.path()),
        before,
        "an unchanged run touches nothing"
    );

    // Change a18's DNS servers only.
    let inv = base.path().join("sites.yaml");
    let text = fs::read_to_string(&inv).unwrap();
    fs::write(
        &inv,
        text.replace("dns: [10.18.0.1, 10.18.0.2]", "dns: [10.18.0.3]"),
    )
    .unwrap();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_ok(&out);
    expect_results(
        &out,
        &[
            ("a17", "unchanged"),
            ("a18", "updated"),
            ("a19", "unchanged"),
        ],
    );
    let after = snapshot(base.path());
    for (key, old) in &before {
        let new = &after[key];
        if key.starts_with("a18/imagebasedconfig.iso") {
            assert_ne!(new.1, old.1, "{key}: rebuilt with the new DNS");
        } else if key.starts_with("a18/") {
            // Same identity, so the same kubeconfig and password (rewritten, same bytes).
            assert_eq!(new.1, old.1, "{key}: identity reused");
        } else {
            assert_eq!(new, old, "{key}: other sites untouched (mtime and bytes)");
        }
    }
    assert!(
        manifest(&base.path().join("sites/a18"))["raw_nm_state_config"]
            .as_str()
            .unwrap()
            .contains("- 10.18.0.3")
    );

    // A damaged or missing output is rebuilt, with the identity kept.
    let kc = base.path().join("sites/a19/auth/kubeconfig");
    fs::remove_file(&kc).unwrap();
    fs::write(base.path().join("sites/a17/imagebasedconfig.iso"), b"junk").unwrap();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_ok(&out);
    expect_results(
        &out,
        &[("a17", "updated"), ("a18", "unchanged"), ("a19", "updated")],
    );
    assert_eq!(fs::read(&kc).unwrap(), before["a19/auth/kubeconfig"].1);
    assert_eq!(
        fs::read(base.path().join("sites/a17/imagebasedconfig.iso")).unwrap(),
        before["a17/imagebasedconfig.iso"].1,
        "same identity, inputs and SOURCE_DATE_EPOCH: the same ISO"
    );

    // A change to the shared base reaches every site; its warning is shown once, not per site.
    let ibc = base.path().join("image-based-config.yaml");
    let text = fs::read_to_string(&ibc).unwrap();
    fs::write(
        &ibc,
        text.replace("registry.edge.example.com:5000", "registry2.example.com"),
    )
    .unwrap();
    let ic = base.path().join("install-config.yaml");
    let text = fs::read_to_string(&ic).unwrap();
    fs::write(&ic, format!("{text}fips: true\n")).unwrap();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_ok(&out);
    expect_results(
        &out,
        &[("a17", "updated"), ("a18", "updated"), ("a19", "updated")],
    );
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("install-config.yaml: fips: is ignored")
            && err.contains("a warning is shown once"),
        "{err}"
    );
    for s in SITES {
        assert_eq!(
            manifest(&base.path().join("sites").join(s))["release_registry"],
            "registry2.example.com"
        );
    }
}

#[test]
fn a_failing_site_is_reported_and_the_others_finish() {
    let base = copy_fleet();
    let inv = base.path().join("sites.yaml");
    let text = fs::read_to_string(&inv).unwrap();
    fs::write(
        &inv,
        text.replace("hostname: sno-a19", "hostname: localhost"),
    )
    .unwrap();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    expect_results(
        &out,
        &[("a17", "created"), ("a18", "created"), ("a19", "failed")],
    );
    assert!(
        stdout(&out).contains("a19   failed     -\n"),
        "{}",
        stdout(&out)
    );
    assert_eq!(
        stderr(&out),
        format!(
            "error: site a19: {}:{}: sites[2].hostname (site a19): \"localhost\" is not allowed: lifecycle-agent rejects it\n\
             error: 1 of 3 sites failed (the others are built)\n",
            inv.display(),
            line_of(&inv, "hostname: localhost")
        )
    );
    assert!(
        !base.path().join("sites/a19").exists(),
        "nothing written for the failed site"
    );
    for s in ["a17", "a18"] {
        manifest(&base.path().join("sites").join(s));
    }

    // A runtime failure (a damaged identity) is a site failure too, with its context.
    fs::write(&inv, text).unwrap();
    fs::write(base.path().join("sites/a17/.ibi/identity.json"), "{").unwrap();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_eq!(out.status.code(), Some(1));
    expect_results(
        &out,
        &[("a17", "failed"), ("a18", "unchanged"), ("a19", "created")],
    );
    let err = stderr(&out);
    assert!(
        err.starts_with("error: site a17: ")
            && err.contains("identity.json: not a valid ibi identity file"),
        "{err}"
    );
}

#[test]
fn a_nic_outside_the_machine_network_fails_its_site() {
    let base = copy_fleet();
    let inv = base.path().join("sites.yaml");
    let text = fs::read_to_string(&inv).unwrap();
    fs::write(
        &inv,
        text.replace("address: 192.168.122.17/23", "address: 10.99.0.5/24"),
    )
    .unwrap();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_eq!(out.status.code(), Some(1));
    let sites_yaml = inv.display();
    assert_eq!(
        stderr(&out),
        format!(
            "error: site a17: {sites_yaml}:{}: sites[0].nic.address (site a17): 10.99.0.5 is outside every \
             networking.machineNetwork CIDR (192.168.122.0/23): set machineNetwork for this site\n\
             error: 1 of 3 sites failed (the others are built)\n",
            line_of(&inv, "address: 10.99.0.5/24")
        )
    );
}

#[test]
fn inventory_and_base_errors_are_reported_together_and_write_nothing() {
    let base = copy_fleet();
    let inv = base.path().join("sites.yaml");
    fs::write(
        &inv,
        "sites:\n- name: ../up\n  hostname: h\n- name: a\n  hostname: h\n- name: a\n  hostname: h2\n  nic: {interface: eth0, address: 10.0.0.5}\n",
    )
    .unwrap();
    let ic = base.path().join("install-config.yaml");
    let text = fs::read_to_string(&ic).unwrap();
    fs::write(&ic, format!("{text}bogusKey: 1\n")).unwrap();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "", "no summary: nothing was attempted");
    let inv_s = inv.display();
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[..3],
        [
            format!(
                "error: {inv_s}:2: sites[0].name: invalid value \"../up\": must be a plain directory name (no '/', no '..', not starting with '.')"
            ),
            format!(
                "error: {inv_s}:6: sites[2].name (site a): duplicate site name \"a\": already used at sites[1].name (site a)"
            ),
            format!(
                "error: {inv_s}:8: sites[2].nic.address (site a): invalid value \"10.0.0.5\": not in CIDR notation (address/prefix)"
            ),
        ],
        "{err}"
    );
    assert_eq!(lines.len(), 4, "{err}");
    assert!(
        lines[3].starts_with(&format!(
            "error: {}: unknown field `bogusKey`",
            ic.display()
        )),
        "{err}"
    );
    assert!(!base.path().join("sites").exists(), "nothing written");

    // Unknown keys in a site name the index and the key, with the line.
    fs::write(&ic, text).unwrap();
    fs::write(&inv, "sites:\n- name: a\n  hostname: h\n  hostnme: x\n").unwrap();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!(
            "error: {inv_s}:4: sites[0].hostnme (site a): unknown field `hostnme`"
        )),
        "{err}"
    );
    assert!(!base.path().join("sites").exists(), "nothing written");

    // Issue 33 item 13: a broken fleet extra manifest is named under BASE as given, as the
    // inventory is (it was `extra-manifests/…`, relative to nothing the user gave).
    fs::write(&inv, "sites:\n- name: a\n  hostname: h\n").unwrap();
    fs::write(base.path().join("extra-manifests/bad.yaml"), "kind: [\n").unwrap();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!(
            "error: {}: document 1: not valid YAML",
            base.path().join("extra-manifests/bad.yaml").display()
        )),
        "{err}"
    );
    fs::remove_file(base.path().join("extra-manifests/bad.yaml")).unwrap();

    // A missing inventory names the path.
    let out = batch(base.path(), "nope.yaml", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("nope.yaml: file not found"),
        "{}",
        stderr(&out)
    );
}

/// One run shows every problem of every site, each at its inventory line: an unknown key does not
/// hide a duplicate name, one site's hostname error neither its own NIC error nor another site's,
/// and a value the base gives names the base file.
#[test]
fn every_finding_of_every_site_comes_at_once() {
    let base = copy_fleet();
    let inv = base.path().join("sites.yaml");
    let text = fs::read_to_string(&inv)
        .unwrap()
        .replace(
            "hostname: sno-a17",
            "hostname: localhost\n    hostnme: typo",
        )
        .replace("address: 192.168.122.17/23", "address: 10.99.0.5/24")
        .replace("name: a18", "name: a17")
        .replace("hostname: sno-a19", "hostname: Not_A_Hostname");
    fs::write(&inv, &text).unwrap();
    let ibc = base.path().join("image-based-config.yaml");
    let base_text = fs::read_to_string(&ibc).unwrap();
    fs::write(
        &ibc,
        base_text.replace("  - 0.rhel.pool.ntp.org", "  - not a server!"),
    )
    .unwrap();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "", "nothing attempted");
    let (i, b) = (inv.display(), ibc.display());
    let at = |needle: &str| line_of(&inv, needle);
    let want = [
        format!(
            "error: {i}:{}: sites[0].hostnme (site a17): unknown field `hostnme`",
            at("hostnme")
        ),
        format!(
            "error: {i}:{}: sites[1].name (site a17): duplicate site name \"a17\": already used at sites[0].name (site a17)",
            at("hostname: sno-a18") - 1
        ),
        format!(
            "error: {i}:{}: sites[0].hostname (site a17): \"localhost\" is not allowed",
            at("hostname: localhost")
        ),
        format!(
            "error: {b}:{}: additionalNTPSources[0]: invalid value \"not a server!\"",
            line_of(&ibc, "not a server!")
        ),
        format!(
            "error: {i}:{}: sites[0].nic.address (site a17): 10.99.0.5 is outside every networking.machineNetwork CIDR",
            at("address: 10.99.0.5/24")
        ),
        format!(
            "error: {i}:{}: sites[2].hostname (site a19): invalid value \"Not_A_Hostname\"",
            at("hostname: Not_A_Hostname")
        ),
    ];
    let err = stderr(&out);
    for w in &want {
        assert_eq!(
            err.lines().filter(|l| l.starts_with(w.as_str())).count(),
            1,
            "want once: {w}\n{err}"
        );
    }
    assert!(!base.path().join("sites").exists(), "nothing written");
}

#[test]
fn csv_inventory_gives_the_same_sites_as_yaml() {
    let base = copy_fleet();
    assert_ok(&batch(base.path(), "sites.yaml", &[]));
    let out = batch(base.path(), "sites.csv", &[]);
    assert_ok(&out);
    expect_results(&out, &[("a17", "unchanged"), ("a18", "unchanged")]);

    let csv = base.path().join("sites.csv");
    fs::write(&csv, "name,hostname,address\nok,h,10.0.0.1/24\n").unwrap();
    let out = batch(base.path(), "sites.csv", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "error: {0}: line 2 column interface (site ok): required: the interface name, e.g. eth0\n\
             error: {0}: line 2 column address (site ok): 10.0.0.1 is outside every networking.machineNetwork \
             CIDR (192.168.122.0/23): set machineNetwork for this site\n",
            csv.display()
        )
    );
}

#[test]
fn rotate_crypto_is_refused_with_sites() {
    let base = copy_fleet();
    let out = batch(base.path(), "sites.yaml", &["--rotate-crypto"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
    assert!(!base.path().join("sites").exists());
}

#[test]
fn secrets_stay_out_of_the_debug_log() {
    let base = copy_fleet();
    let b = base.path().to_str().unwrap();
    let inv = base.path().join("sites.yaml");
    let out = ibi(
        &[
            "--log-level",
            "debug",
            "create",
            "config-image",
            "--dir",
            b,
            "--sites",
            inv.to_str().unwrap(),
        ],
        &[],
    );
    assert_ok(&out);
    let log = stderr(&out);
    assert!(log.contains("site{name=a18}"), "per-site spans: {log}");
    for s in SITES {
        let pw = fs::read_to_string(
            base.path()
                .join("sites")
                .join(s)
                .join("auth/kubeadmin-password"),
        )
        .unwrap();
        assert!(!log.contains(&pw), "password of {s} logged");
    }
    for needle in [
        "PRIVATE KEY",
        "ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk",
        "$2a$10$",
    ] {
        assert!(!log.contains(needle), "{needle} logged");
    }
}

/// Issue 34 items 8, 9 and 10, all in one run: an extra manifest the API server would refuse (a
/// ConfigMap over 1 MiB, a `metadata.name` that is not a DNS-1123 name), two sites whose clusters
/// would share one API name, and every bad `rootDeviceHints` key, each named.
#[test]
fn what_a_cluster_would_refuse_later_is_found_now() {
    let base = copy_fleet();
    let big = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  namespace: default\ndata:\n  blob: \"{}\"\n",
        "x".repeat(1100 * 1024)
    );
    fs::write(base.path().join("extra-manifests/big.yaml"), big).unwrap();
    fs::write(
        base.path().join("extra-manifests/name.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"ü\"\n  namespace: default\ndata: {}\n",
    )
    .unwrap();
    fs::write(
        base.path().join("sites.yaml"),
        "sites:\n- name: a\n  hostname: h-a\n  clusterName: twin\n- name: b\n  hostname: h-b\n  clusterName: twin\n  rootDeviceHints:\n    diskName: sda\n    sizeGB: 3\n    minSizeGigabytes: big\n",
    )
    .unwrap();
    let out = batch(base.path(), "sites.yaml", &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let inv = base.path().join("sites.yaml").display().to_string();
    for want in [
        "big.yaml: document 1: the ConfigMap's data is ".to_string(),
        "over the 1048576 bytes the API server takes".to_string(),
        "name.yaml: document 1: metadata.name \"ü\" is not a name the API server takes for a ConfigMap".to_string(),
        format!("{inv}:7: sites[1].clusterName (site b): the cluster name and base domain \"twin.edge.example.com\" are also site \"a\"'s"),
        format!("{inv}:9: sites[1].rootDeviceHints.diskName (site b): unknown field `diskName`"),
        format!("{inv}:10: sites[1].rootDeviceHints.sizeGB (site b): unknown field `sizeGB`"),
        format!("{inv}:11: sites[1].rootDeviceHints.minSizeGigabytes (site b): invalid type"),
    ] {
        assert!(err.contains(&want), "{want:?} not in:\n{err}");
    }
    assert!(!base.path().join("sites").exists(), "nothing written");
}
