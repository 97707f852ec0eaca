//! Tests of loading a whole site directory: both files, the extra manifests, and how findings from all of
//! them are collected together.

use std::path::Path;

use crate::config::tests::{BASE_IMAGE_BASED_CONFIG, base_install_config, patched, render};
use crate::config::*;

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir.join(name).parent().unwrap()).unwrap();
    std::fs::write(dir.join(name), text).unwrap();
}

fn site(dir: &Path) {
    write(dir, INSTALL_CONFIG_FILE, &base_install_config());
    write(dir, IMAGE_BASED_CONFIG_FILE, BASE_IMAGE_BASED_CONFIG);
}

fn findings_of(dir: &Path) -> Vec<String> {
    let err = load_site_inputs(dir).unwrap_err();
    render(&err.downcast_ref::<ValidationError>().unwrap().findings)
}

#[test]
fn load_site_inputs_reads_everything() {
    let tmp = tempfile::tempdir().unwrap();
    site(tmp.path());
    let long = format!("{}.yaml", "a-very-long-manifest-name-".repeat(4));
    write(
        tmp.path(),
        &format!("extra-manifests/{long}"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    );
    write(
        tmp.path(),
        "extra-manifests/10-b.yml",
        "---\napiVersion: v1\nkind: Namespace\n---\napiVersion: v1\nkind: ConfigMap\n",
    );
    write(
        tmp.path(),
        "extra-manifests/05-list.json",
        r#"{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Secret"}]}"#,
    );
    write(tmp.path(), "extra-manifests/README.txt", "notes");
    write(
        tmp.path(),
        "extra-manifests/sub/x.yaml",
        "apiVersion: v1\nkind: ConfigMap\n",
    );
    let s = load_site_inputs(tmp.path()).unwrap();
    let names: Vec<&str> = s.extra_manifests.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["05-list.json", "10-b.yml", long.as_str()]);
    assert_eq!(s.install_config.metadata.name, "sno");
    assert_eq!(s.image_based_config.hostname, "sno1.example.com");
    assert_eq!(
        s.warnings,
        [
            "extra-manifests/README.txt: ignored: only regular *.yaml, *.yml and *.json files are used",
            "extra-manifests/sub: ignored: only regular *.yaml, *.yml and *.json files are used",
        ]
    );
}

#[test]
fn load_site_inputs_without_manifests_dir() {
    let tmp = tempfile::tempdir().unwrap();
    site(tmp.path());
    let s = load_site_inputs(tmp.path()).unwrap();
    assert!(s.extra_manifests.is_empty());
    assert!(s.warnings.is_empty());
}

#[test]
fn load_site_inputs_reports_missing_files() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().display();
    assert_eq!(
        findings_of(tmp.path()),
        [
            format!("install-config.yaml: file not found: {d}/install-config.yaml is required"),
            format!(
                "image-based-config.yaml: file not found: {d}/image-based-config.yaml is required (`ibi create config-template` writes a commented one)"
            ),
        ]
    );
}

#[test]
fn load_site_inputs_collects_findings_from_all_files() {
    let tmp = tempfile::tempdir().unwrap();
    site(tmp.path());
    write(
        tmp.path(),
        INSTALL_CONFIG_FILE,
        &patched(&base_install_config(), "controlPlane: {replicas: 3}"),
    );
    write(
        tmp.path(),
        IMAGE_BASED_CONFIG_FILE,
        "hostname: a\nbogus: 1\n",
    );
    write(tmp.path(), "extra-manifests/a.yaml", "kind: ConfigMap\n");
    write(tmp.path(), "extra-manifests/b.yaml", "a: [\n");
    write(tmp.path(), "extra-manifests/c.json", "{");
    write(tmp.path(), "extra-manifests/d.yaml", "- 1\n");
    let got = findings_of(tmp.path());
    assert_eq!(
        got[0],
        "install-config.yaml: controlPlane.replicas: only single-node OpenShift is supported, found 3"
    );
    assert!(
        got[1].starts_with("image-based-config.yaml: unknown field `bogus`"),
        "{got:?}"
    );
    assert_eq!(
        got[2],
        "extra-manifests/a.yaml: document 1: not a Kubernetes object: apiVersion is missing"
    );
    assert!(
        got[3].starts_with("extra-manifests/b.yaml: document 1: not valid YAML: "),
        "{got:?}"
    );
    assert!(
        got[4].starts_with("extra-manifests/c.json: not valid JSON: EOF while parsing"),
        "{got:?}"
    );
    assert_eq!(
        got[5],
        "extra-manifests/d.yaml: document 1: not a Kubernetes object (expected a mapping)"
    );
    assert_eq!(got.len(), 6);
}

#[test]
fn load_site_inputs_names_unreadable_paths() {
    let tmp = tempfile::tempdir().unwrap();
    site(tmp.path());
    write(tmp.path(), "extra-manifests", "a file, not a directory");
    let err = load_site_inputs(tmp.path()).unwrap_err();
    assert!(format!("{err:#}").contains("extra-manifests"), "{err:#}");
    assert!(err.downcast_ref::<ValidationError>().is_none());
}

#[test]
fn a_byte_order_mark_before_the_first_key_is_not_content() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        INSTALL_CONFIG_FILE,
        &format!("\u{feff}{}", base_install_config()),
    );
    write(
        tmp.path(),
        IMAGE_BASED_CONFIG_FILE,
        &format!("\u{feff}{BASE_IMAGE_BASED_CONFIG}"),
    );
    let s = load_site_inputs(tmp.path()).unwrap();
    assert_eq!(s.install_config.metadata.name, "sno");
    assert_eq!(s.image_based_config.hostname, "sno1.example.com");
}

#[test]
fn symbolic_links_in_extra_manifests_are_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    site(tmp.path());
    let outside = tmp.path().join("outside.yaml");
    std::fs::write(&outside, "apiVersion: v1\nkind: Secret\n").unwrap();
    std::fs::create_dir(tmp.path().join("extra-manifests")).unwrap();
    std::os::unix::fs::symlink(&outside, tmp.path().join("extra-manifests/link.yaml")).unwrap();
    let s = load_site_inputs(tmp.path()).unwrap();
    assert!(s.extra_manifests.is_empty());
    assert_eq!(
        s.warnings,
        [
            "extra-manifests/link.yaml: ignored: a symbolic link (only regular files are used; copy the file here)"
        ]
    );
}

#[test]
fn the_unedited_template_is_refused_at_its_placeholders() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), INSTALL_CONFIG_FILE, &base_install_config());
    write(
        tmp.path(),
        IMAGE_BASED_CONFIG_FILE,
        IMAGE_BASED_CONFIG_TEMPLATE,
    );
    let got = findings_of(tmp.path());
    let line_of = |needle: &str| {
        IMAGE_BASED_CONFIG_TEMPLATE
            .lines()
            .position(|l| l.trim_start().starts_with(needle))
            .unwrap()
            + 1
    };
    assert_eq!(
        got,
        [
            format!(
                "image-based-config.yaml:{}: hostname: still the template's placeholder \"change-to-hostname\": replace it with this site's value",
                line_of("hostname:")
            ),
            format!(
                "image-based-config.yaml:{}: networkConfig.interfaces[0].mac-address: still the template's placeholder \"00:00:00:00:00:00\": replace it with this site's value",
                line_of("mac-address:")
            ),
        ]
    );
}

#[test]
fn decode_errors_never_quote_the_refused_value() {
    let tmp = tempfile::tempdir().unwrap();
    site(tmp.path());
    let text = patched(
        &base_install_config(),
        "proxy: 'http://user:IBI-MARKER@proxy:3128'",
    );
    write(tmp.path(), INSTALL_CONFIG_FILE, &text);
    let got = findings_of(tmp.path()).join("\n");
    assert!(!got.contains("IBI-MARKER"), "{got}");
    assert!(
        got.contains("proxy: invalid type: string (value not shown), expected struct Proxy"),
        "{got}"
    );
    assert_eq!(
        super::super::finding::hide_values(r#"a: string "x\"y", b: string "z" at line 1"#),
        "a: string (value not shown), b: string (value not shown) at line 1"
    );
}
