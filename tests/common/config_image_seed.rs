//! What the tests of tests/fast/config_image_seed.rs and tests/tools/config_image_seed.rs share:
//! one file of tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common::*;
use std::fs;
use std::path::Path;

pub(crate) const VERSIONS: [&str; 4] = ["4.16.0", "4.17.0", "4.18.0", "4.20.0"];
pub(crate) const IC: &str = "install-config.yaml";
pub(crate) const EXAMPLE_AUTH: &str = "ZXhhbXBsZTpub3QtYS1yZWFsLXBhc3N3b3Jk";

/// `oci:<layout>:<version>` for a generated seed.
pub(crate) fn oci(seed: &tempfile::TempDir, version: &str) -> String {
    format!("oci:{}:{version}", seed.path().join("seed").display())
}

pub(crate) fn edit(dir: &Path, file: &str, f: impl FnOnce(String) -> String) {
    let p = dir.join(file);
    let text = fs::read_to_string(&p).unwrap();
    fs::write(&p, f(text)).unwrap();
}

/// `create config-image --dir SITE --seed oci:<seed>:<version>`.
pub(crate) fn against(
    site: &Path,
    seed: &tempfile::TempDir,
    version: &str,
) -> std::process::Output {
    config_image(site, &["--seed", &oci(seed, version)])
}

/// Makes the site dual-stack, IPv6 listed first.
pub(crate) fn dual_stack_v6_first(site: &Path) {
    edit(site, IC, |t| {
        t.replace(
            "    - cidr: 192.168.122.0/23\n",
            "    - cidr: fd00:122::/64\n    - cidr: 192.168.122.0/23\n",
        )
    });
}

/// The example site's install-config.yaml with `extra` appended.
pub(crate) fn site_with(extra: &str) -> tempfile::TempDir {
    let site = copy_example();
    edit(site.path(), IC, |t| format!("{t}{extra}"));
    site
}

/// The site's manifest.json, read back from its ISO.
pub(crate) fn manifest(site: &Path) -> serde_json::Value {
    let file = fs::File::open(site.join("imagebasedconfig.iso")).unwrap();
    let mut iso = ibi::iso9660::IsoReader::open(file).unwrap();
    serde_json::from_slice(
        &iso.read_file("cluster-configuration/manifest.json")
            .unwrap(),
    )
    .unwrap()
}

/// The error lines of a refused run, after checking it wrote nothing.
pub(crate) fn refused(site: &Path, out: &std::process::Output) -> Vec<String> {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty(), "stdout holds results only");
    for p in ["imagebasedconfig.iso", "auth", ".ibi"] {
        assert!(!site.join(p).exists(), "{p} written despite: {err}");
    }
    err.lines()
        .filter(|l| l.starts_with("error: "))
        .map(str::to_string)
        .collect()
}

pub(crate) const PROXY: &str = "proxy:\n  httpProxy: http://proxy.example.com:3128\n";
