//! The one-shot entries and lca's `post.sh`, run with bash against a fake `/` laid out as lca-cli
//! leaves it when it runs `post.sh`: the live system's `/var/tmp` as Ignition wrote it (from the
//! generated config itself) and the target's root filesystem at `mnt/` holding the new stateroot.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use super::*;
use crate::install_image::ignition::installation::{
    InstallationIgnitionInputs, build_installation_ignition,
};
use crate::util::fs::sorted_names as names;

const SEED_VERSION: &str = "4.18.0-rc.1";
const STATEROOT: &str = "mnt/ostree/deploy/rhcos_4.18.0_rc.1";
const MANIFEST: &[u8] = br#"{"api_version":1,"pull_secret":"s3cret"}"#;

fn tree() -> SiteTree {
    SiteTree {
        site: "site-a".into(),
        dirs: vec![
            "cluster-configuration".into(),
            MANIFESTS_DIR.into(),
            "extra-manifests".into(),
        ],
        files: vec![
            (MANIFEST_PATH.into(), MANIFEST.to_vec()),
            (
                "extra-manifests/ibi-reconfiguration.yaml".into(),
                b"kind: ConfigMap\n".to_vec(),
            ),
        ],
        ..SiteTree::default()
    }
}

fn inputs(post_sh: Option<&str>, host_agent_image: Option<&str>) -> InstallationIgnitionInputs {
    InstallationIgnitionInputs {
        seed_image: "quay.io/example/seed@sha256:00".into(),
        seed_version: SEED_VERSION.into(),
        installation_disk: "/dev/vda".into(),
        post_sh: post_sh.map(|s| s.as_bytes().to_vec()),
        host_agent_image: host_agent_image.map(str::to_string),
        site: Some(tree()),
        ..Default::default()
    }
}

/// Writes the config's directories and files under `root` with their modes, as Ignition would.
fn apply(config: &Config, root: &Path) {
    let dirs = config.storage.extra["directories"].as_array().unwrap();
    for d in dirs {
        let p = root.join(d["path"].as_str().unwrap().trim_start_matches('/'));
        fs::create_dir_all(&p).unwrap();
        let mode = d["mode"].as_u64().unwrap() as u32;
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
    }
    for f in &config.storage.files {
        let p = root.join(f.path.trim_start_matches('/'));
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, f.data().unwrap()).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(f.mode.unwrap())).unwrap();
    }
}

/// A fake `/` for lca-cli's `post.sh`: Ignition's files and the mounted stateroot's `var`.
fn layout(post_sh: Option<&str>) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let config = build_installation_ignition(&inputs(post_sh, None)).unwrap();
    apply(&config, root.path());
    fs::create_dir_all(root.path().join(STATEROOT).join("var/lib")).unwrap();
    root
}

/// lca-cli's invocation: `bash -c var/tmp/post.sh` with `/` (here the fake root) as working directory.
fn run_post(root: &Path) -> (i32, String) {
    let out = Command::new("bash")
        .args(["-c", "var/tmp/post.sh"])
        .current_dir(root)
        .env("IBI_POST_ROOT", root)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn target(root: &Path) -> std::path::PathBuf {
    root.join(STATEROOT).join(STATEROOT_TARGET)
}

/// The target holds exactly the site's files and bytes, private.
fn assert_tree(root: &Path) {
    let t = target(root);
    assert_eq!(names(&t), ["cluster-configuration", "extra-manifests"]);
    assert_eq!(
        names(&t.join("cluster-configuration")),
        ["manifest.json", "manifests"]
    );
    assert!(names(&t.join(MANIFESTS_DIR)).is_empty());
    for (rel, data) in &tree().files {
        assert_eq!(&fs::read(t.join(rel)).unwrap(), data, "{rel}");
        assert_eq!(
            fs::metadata(t.join(rel)).unwrap().mode() & 0o777,
            0o600,
            "{rel}"
        );
    }
    assert_eq!(fs::metadata(&t).unwrap().mode() & 0o777, 0o700);
}

#[test]
fn lca_config_swaps_post_sh_and_carries_the_tree() {
    let config =
        build_installation_ignition(&inputs(Some("#!/bin/bash\necho user\n"), None)).unwrap();
    let file = |p: &str| config.storage.files.iter().find(|f| f.path == p).cloned();
    let post = file("/var/tmp/post.sh").unwrap();
    assert_eq!(
        post.data().unwrap(),
        lca_post_script(SEED_VERSION).as_bytes()
    );
    assert_eq!(post.mode, Some(0o755));
    let user = file(USER_POST_SCRIPT_PATH).unwrap();
    assert_eq!(user.data().unwrap(), b"#!/bin/bash\necho user\n");
    assert_eq!(user.mode, Some(0o755));
    let manifest = file("/var/tmp/ibi-site-configuration/cluster-configuration/manifest.json");
    assert_eq!(manifest.unwrap().data().unwrap(), MANIFEST);
    assert!(lca_post_script(SEED_VERSION).contains("/mnt/ostree/deploy/rhcos_4.18.0_rc.1\""));
}

#[test]
fn ibi_config_keeps_the_users_post_sh_and_carries_the_tree() {
    let config =
        build_installation_ignition(&inputs(Some("#!/bin/bash\n"), Some("quay.io/x/ibi:1")))
            .unwrap();
    let file = |p: &str| config.storage.files.iter().find(|f| f.path == p).cloned();
    assert_eq!(
        file("/var/tmp/post.sh").unwrap().data().unwrap(),
        b"#!/bin/bash\n"
    );
    assert!(file(USER_POST_SCRIPT_PATH).is_none());
    assert!(
        file("/var/tmp/ibi-site-configuration/extra-manifests/ibi-reconfiguration.yaml").is_some()
    );
    let without = InstallationIgnitionInputs {
        site: None,
        ..inputs(Some("#!/bin/bash\n"), None)
    };
    let plain = build_installation_ignition(&without).unwrap();
    assert!(
        plain.storage.extra.get("directories").is_none(),
        "no site, no change"
    );
}

#[test]
fn post_sh_writes_the_tree_then_runs_the_users_script_from_root() {
    let root = layout(Some(
        "#!/bin/bash\npwd > \"$IBI_POST_ROOT/user-ran\"\nls \"$IBI_POST_ROOT/mnt/ostree/deploy/rhcos_4.18.0_rc.1/var/opt/openshift\" >> \"$IBI_POST_ROOT/user-ran\"\n",
    ));
    let (code, out) = run_post(root.path());
    assert_eq!(code, 0, "{out}");
    assert_tree(root.path());
    let ran = fs::read_to_string(root.path().join("user-ran")).unwrap();
    let cwd = root.path().canonicalize().unwrap();
    assert_eq!(
        ran,
        format!(
            "{}\ncluster-configuration\nextra-manifests\n",
            cwd.display()
        )
    );
    assert_eq!(
        names(&root.path().join(STATEROOT).join("var/opt")),
        ["openshift"]
    );
    assert!(!out.contains("s3cret"), "{out}");
}

#[test]
fn post_sh_without_a_users_script() {
    let root = layout(None);
    let (code, out) = run_post(root.path());
    assert_eq!(code, 0, "{out}");
    assert_tree(root.path());
}

/// A killed earlier attempt left a partial staging dir; a stale tree is in the target: both go.
#[test]
fn post_sh_removes_leftovers_and_replaces_a_stale_tree() {
    let root = layout(None);
    let opt = root.path().join(STATEROOT).join("var/opt");
    fs::create_dir_all(opt.join("openshift.tmp-abc123/cluster-configuration")).unwrap();
    fs::create_dir_all(opt.join("openshift/cluster-configuration")).unwrap();
    fs::write(
        opt.join("openshift/cluster-configuration/manifest.json"),
        b"{}",
    )
    .unwrap();
    fs::write(opt.join("openshift/stray"), b"x").unwrap();
    let (code, out) = run_post(root.path());
    assert_eq!(code, 0, "{out}");
    assert_eq!(names(&opt), ["openshift"]);
    assert_tree(root.path());
}

#[test]
fn the_users_failure_is_lca_clis() {
    let root = layout(Some("#!/bin/bash\nexit 3\n"));
    let (code, out) = run_post(root.path());
    assert_eq!(code, 3, "{out}");
    assert_tree(root.path());
}

#[test]
fn an_incomplete_tree_or_no_stateroot_writes_nothing() {
    let root = layout(Some("#!/bin/bash\ntouch \"$IBI_POST_ROOT/user-ran\"\n"));
    let src = root.path().join(LIVE_SITE_TREE.trim_start_matches('/'));
    fs::remove_dir(src.join(MANIFESTS_DIR)).unwrap();
    let (code, out) = run_post(root.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("cluster-configuration/manifests is missing"),
        "{out}"
    );
    assert!(!target(root.path()).exists());
    assert!(!root.path().join("user-ran").exists());

    let root = layout(None);
    fs::remove_dir_all(root.path().join("mnt")).unwrap();
    let (code, out) = run_post(root.path());
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("is the stateroot rhcos_4.18.0_rc.1 mounted?"),
        "{out}"
    );
}

#[test]
fn an_override_directory_of_the_same_path_is_replaced() {
    let mut config = Config::default();
    config.storage.extra.insert(
        "directories".into(),
        serde_json::json!([{"path": LIVE_SITE_TREE, "mode": 0o755}, {"path": "/etc/x"}]),
    );
    add_site_tree(&mut config, &tree());
    let dirs = config.storage.extra["directories"].as_array().unwrap();
    let paths: Vec<_> = dirs.iter().map(|d| d["path"].as_str().unwrap()).collect();
    assert_eq!(paths[0], "/etc/x");
    assert_eq!(paths.iter().filter(|p| **p == LIVE_SITE_TREE).count(), 1);
    assert_eq!(dirs[1]["mode"], 0o700);
}

/// What `ibi serve`/`deploy` lay over the fleet's ISO per site is what `create image --site` builds:
/// the fleet's config (built without `--site`) made one-shot afterwards equals the one built with it,
/// for both host agents.
#[test]
fn carrying_a_site_over_the_fleets_config_equals_building_with_site() {
    for agent in [None, Some("quay.io/x/ibi:1")] {
        let with_site = build_installation_ignition(&inputs(Some("#!/bin/bash\n"), agent)).unwrap();
        let fleet = InstallationIgnitionInputs {
            site: None,
            ..inputs(Some("#!/bin/bash\n"), agent)
        };
        let mut streamed = build_installation_ignition(&fleet).unwrap();
        carry_site(&mut streamed, &tree()).unwrap();
        assert_eq!(
            serde_json::to_string(&streamed).unwrap(),
            serde_json::to_string(&with_site).unwrap(),
            "host agent {agent:?}"
        );
    }
}

#[test]
fn a_site_is_carried_once_and_only_over_a_seed_of_4_16_or_later() {
    let mut twice = build_installation_ignition(&inputs(None, None)).unwrap();
    let err = format!("{:#}", carry_site(&mut twice, &tree()).unwrap_err());
    assert!(
        err.contains("already carries a site's configuration"),
        "{err}"
    );
    let old = InstallationIgnitionInputs {
        site: None,
        seed_version: "4.15.3".into(),
        ..inputs(None, None)
    };
    let mut config = build_installation_ignition(&old).unwrap();
    let before = config.clone();
    let err = format!("{:#}", carry_site(&mut config, &tree()).unwrap_err());
    assert!(err.contains("seedVersion \"4.15.3\" is not 4.16"), "{err}");
    assert_eq!(config, before, "refused before any change");
    let mut foreign = Config::default();
    let err = format!("{:#}", carry_site(&mut foreign, &tree()).unwrap_err());
    assert!(err.contains("not an ISO `ibi create image` built"), "{err}");
}

/// Issue 33 item 7: a static-IP site's one-shot ISO had no network on the live system (the site's
/// nmstate was carried only for after the install). The live system applies it now, as the
/// installation ISO's own `networkConfig`; a site on DHCP keeps the fleet's.
#[test]
fn a_static_sites_network_is_applied_on_the_live_system_too() {
    let nmstate = "interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n  ipv4:\n    enabled: true\n    address:\n    - ip: 192.0.2.17\n      prefix-length: 24\n";
    let manifest = serde_json::json!({"api_version": 1, MANIFEST_NMSTATE_KEY: nmstate});
    let mut static_tree = tree();
    static_tree.files[0].1 = serde_json::to_vec(&manifest).unwrap();
    for agent in [None, Some("quay.io/x/ibi:1")] {
        let mut fleet = inputs(None, agent);
        fleet.site = None;
        let fleet = build_installation_ignition(&fleet).unwrap();
        let network = |c: &Config| {
            let file = c
                .storage
                .files
                .iter()
                .find(|f| f.path == NETWORK_CONFIG_PATH)
                .unwrap();
            let unit = c
                .systemd
                .units
                .iter()
                .find(|u| u.name == NETWORK_CONFIG_UNIT)
                .unwrap();
            (
                String::from_utf8(file.data().unwrap()).unwrap(),
                unit.enabled,
            )
        };
        assert_eq!(
            network(&fleet),
            ("\n".to_string(), None),
            "the fleet's: none"
        );
        let mut one_shot = fleet.clone();
        carry_site(&mut one_shot, &static_tree).unwrap();
        assert_eq!(network(&one_shot), (format!("{nmstate}\n"), Some(true)));
        // The same as the installation ISO built with that networkConfig.
        let mut with_network = inputs(None, agent);
        with_network.site = None;
        with_network.network_config = Some(nmstate.to_string());
        let built = build_installation_ignition(&with_network).unwrap();
        assert_eq!(network(&one_shot), network(&built));
        // A DHCP site: the fleet's network, untouched.
        let mut dhcp = fleet.clone();
        carry_site(&mut dhcp, &tree()).unwrap();
        assert_eq!(network(&dhcp), network(&fleet));
    }
}
