//! What the tests of tests/fast/batch.rs and tests/tools/batch.rs share: one file of tests, split
//! by what each test needs (docs/architecture.md, "Tests").

use crate::common::*;
use ibi::iso9660::IsoReader;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

pub(crate) const SITES: [&str; 3] = ["a17", "a18", "a19"];
pub(crate) const OUTPUTS: [&str; 4] = [
    "imagebasedconfig.iso",
    "auth/kubeconfig",
    "auth/kubeadmin-password",
    ".ibi/identity.json",
];

pub(crate) fn example_fleet() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/example-fleet")
}

/// A copy of the example fleet's inputs (not any `sites/` a quick-start run left there).
pub(crate) fn copy_fleet() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = example_fleet();
    for f in [
        "install-config.yaml",
        "image-based-config.yaml",
        "sites.yaml",
        "sites.csv",
    ] {
        fs::copy(src.join(f), tmp.path().join(f)).expect("copy input");
    }
    copy_tree(
        &src.join("extra-manifests"),
        &tmp.path().join("extra-manifests"),
    );
    tmp
}

pub(crate) fn batch(base: &Path, inventory: &str, extra: &[&str]) -> Output {
    let b = base.to_str().expect("utf-8 path");
    let inv = base.join(inventory);
    let mut args = vec!["create", "config-image", "--dir", b, "--sites"];
    args.push(inv.to_str().expect("utf-8 path"));
    args.extend_from_slice(extra);
    ibi(&args, &[("SOURCE_DATE_EPOCH", "1700000000")])
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The RESULT column of the summary, by site.
pub(crate) fn results(out: &Output) -> BTreeMap<String, String> {
    stdout(out)
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            let site = cols.next()?;
            let result = cols.next()?;
            SITES
                .contains(&site)
                .then(|| (site.to_string(), result.to_string()))
        })
        .collect()
}

pub(crate) fn expect_results(out: &Output, want: &[(&str, &str)]) {
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(s, r)| (s.to_string(), r.to_string()))
        .collect();
    assert_eq!(results(out), want, "{}\n{}", stdout(out), stderr(out));
}

pub(crate) fn manifest(site_dir: &Path) -> Value {
    let file = fs::File::open(site_dir.join("imagebasedconfig.iso")).expect("open iso");
    let mut iso = IsoReader::open(file).expect("parse iso");
    assert_eq!(iso.volume_id(), "cluster-config");
    let bytes = iso
        .read_file("cluster-configuration/manifest.json")
        .expect("manifest.json");
    serde_json::from_slice(&bytes).expect("manifest.json is JSON")
}

/// (mtime in ns, bytes) of every output of every site.
pub(crate) fn snapshot(base: &Path) -> BTreeMap<String, (i64, Vec<u8>)> {
    let mut snap = BTreeMap::new();
    for site in SITES {
        for rel in OUTPUTS {
            let p = base.join("sites").join(site).join(rel);
            let md = fs::metadata(&p).expect("output exists");
            let mtime = md.mtime() * 1_000_000_000 + md.mtime_nsec();
            snap.insert(
                format!("{site}/{rel}"),
                (mtime, fs::read(&p).expect("read output")),
            );
        }
    }
    snap
}

/// The 1-based line of the first line of `file` containing `needle`.
pub(crate) fn line_of(file: &Path, needle: &str) -> usize {
    let text = fs::read_to_string(file).unwrap();
    text.lines().position(|l| l.contains(needle)).expect(needle) + 1
}
