//! What the tests of tests/fast/config_image.rs and tests/tools/config_image.rs share: one file of
//! tests, split by what each test needs (docs/architecture.md, "Tests").

use ibi::iso9660::IsoReader;
use serde_json::Value;
use std::fs;
use std::path::Path;

pub(crate) const LONG_NAME_LEN: usize = 100;

pub(crate) fn long_manifest_name() -> String {
    let stem = "a".repeat(LONG_NAME_LEN - "-long-name.yaml".len());
    format!("{stem}-long-name.yaml")
}

pub(crate) fn read_iso(path: &Path) -> IsoReader<fs::File> {
    IsoReader::open(fs::File::open(path).expect("open iso")).expect("parse iso")
}

pub(crate) fn manifest_of(dir: &Path) -> Value {
    let mut iso = read_iso(&dir.join("imagebasedconfig.iso"));
    let bytes = iso
        .read_file("cluster-configuration/manifest.json")
        .expect("manifest.json");
    serde_json::from_slice(&bytes).expect("manifest.json is JSON")
}
