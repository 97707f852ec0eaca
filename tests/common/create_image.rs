//! What the tests of tests/fast/create_image.rs and tests/tools/create_image.rs share: one file of
//! tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common::registry::fixture_seed;
use crate::common::*;
use ibi::live_iso::synthetic::{IgnitionLayout, SyntheticIso};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

pub(crate) const CONFIG: &str = "image-based-installation-config.yaml";

/// A site with the bundled example config, its seed pointing at the fixture by absolute path.
pub(crate) fn site(edit: impl FnOnce(String) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seed-fixtures/example-install")
        .join(CONFIG);
    let text = fs::read_to_string(example).unwrap().replace(
        "oci:seed-fixtures/seed:4.16.0",
        &format!("oci:{}:4.16.0", fixture_seed().display()),
    );
    fs::write(dir.path().join(CONFIG), edit(text)).unwrap();
    dir
}

/// The example site with a fresh synthetic base ISO of `layout` beside it.
pub(crate) fn default_site(layout: IgnitionLayout, kargs: bool) -> (tempfile::TempDir, PathBuf) {
    let site = site(|t| t);
    let base = base_iso(site.path(), &SyntheticIso::new(layout, kargs));
    (site, base)
}

pub(crate) fn base_iso(dir: &Path, iso: &SyntheticIso) -> PathBuf {
    let p = dir.join(format!("{}.iso", iso.name()));
    iso.write(fs::File::create(&p).unwrap()).unwrap();
    p
}

pub(crate) fn create_image(site: &Path, base: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "create",
        "image",
        "--dir",
        site.to_str().unwrap(),
        "--base-iso",
        base.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    ibi(&args, &[])
}

pub(crate) fn show_ignition(iso: &Path) -> Vec<u8> {
    let out = std::process::Command::new("coreos-installer")
        .args(["iso", "ignition", "show"])
        .arg(iso)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

pub(crate) fn our_ignition(iso: &Path) -> Vec<u8> {
    let out = ibi(&["inspect", "--ignition", iso.to_str().unwrap()], &[]);
    assert_ok(&out);
    out.stdout
}

/// The decoded contents of one `storage.files` entry.
pub(crate) fn file_in(config: &[u8], path: &str) -> String {
    let v: Value = serde_json::from_slice(config).unwrap();
    let files = v["storage"]["files"].as_array().unwrap();
    let f = files
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("{path} missing"));
    let src = f["contents"]["source"].as_str().unwrap();
    let b64 = src.split_once(";base64,").unwrap().1;
    String::from_utf8(openssl::base64::decode_block(b64).unwrap()).unwrap()
}

pub(crate) fn ibi_configuration(config: &[u8]) -> Value {
    serde_json::from_str(&file_in(config, "/var/tmp/ibi-configuration.json")).unwrap()
}

/// The example config on a generated seed of `version` (its seedImage and seedVersion), plus `extra`.
pub(crate) fn versioned_site(seed: &Path, version: &str, extra: &str) -> tempfile::TempDir {
    site(|t| {
        let t = t
            .replace(
                &format!("oci:{}:4.16.0", fixture_seed().display()),
                &format!("oci:{}:{version}", seed.display()),
            )
            .replace("seedVersion: 4.16.0", &format!("seedVersion: {version}"));
        format!("{t}{extra}")
    })
}

/// The files of a configuration ISO, read with ibi's reader: (path, is a directory, contents).
pub(crate) fn iso_files(iso: &Path) -> Vec<(String, bool, Vec<u8>)> {
    let mut r = ibi::iso9660::IsoReader::open(fs::File::open(iso).unwrap()).unwrap();
    let entries = r.walk().unwrap();
    entries
        .into_iter()
        .map(|e| {
            let data = if e.is_dir {
                Vec::new()
            } else {
                r.read_entry(&e).unwrap()
            };
            (e.path, e.is_dir, data)
        })
        .collect()
}
