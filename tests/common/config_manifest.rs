//! What the tests of tests/fast/config_manifest.rs and tests/tools/config_manifest.rs share: one
//! file of tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common::*;
use ibi::iso9660::IsoReader;
use serde_json::{Map, Value};
use std::fs;
use std::path::Path;

pub(crate) fn build_example(edit: impl FnOnce(&Path)) -> (tempfile::TempDir, Value) {
    let site = copy_example();
    edit(site.path());
    assert_ok(&config_image(site.path(), &[]));
    let f = fs::File::open(site.path().join("imagebasedconfig.iso")).unwrap();
    let mut iso = IsoReader::open(f).unwrap();
    let raw = iso
        .read_file("cluster-configuration/manifest.json")
        .unwrap();
    assert_ne!(
        raw.last(),
        Some(&b'\n'),
        "compact JSON without trailing newline, as json.Marshal"
    );
    (site, serde_json::from_slice(&raw).unwrap())
}

/// Replaces every leaf with its JSON type name, keeping keys (sorted) and array shapes.
pub(crate) fn shape(v: &Value) -> Value {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "boolean".into(),
        Value::Number(n) if n.is_u64() || n.is_i64() => "integer".into(),
        Value::Number(_) => "number".into(),
        Value::String(_) => "string".into(),
        Value::Array(a) => Value::Array(a.iter().take(1).map(shape).collect()),
        Value::Object(o) => {
            let mut sorted: Vec<_> = o.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                sorted
                    .into_iter()
                    .map(|(k, v)| (k.clone(), shape(v)))
                    .collect::<Map<_, _>>(),
            )
        }
    }
}

pub(crate) fn assert_sorted(v: &serde_yaml_ng::Value, text: &str) {
    match v {
        serde_yaml_ng::Value::Mapping(m) => {
            let keys: Vec<String> = m
                .keys()
                .map(|k| k.as_str().unwrap_or_default().to_string())
                .collect();
            let mut sorted = keys.clone();
            sorted.sort();
            assert_eq!(keys, sorted, "unsorted keys in:\n{text}");
            m.values().for_each(|x| assert_sorted(x, text));
        }
        serde_yaml_ng::Value::Sequence(s) => s.iter().for_each(|x| assert_sorted(x, text)),
        _ => {}
    }
}

/// Splits concatenated PEM certificates.
pub(crate) fn split_pems(bundle: &str) -> Vec<String> {
    let end = "-----END CERTIFICATE-----";
    bundle
        .split_inclusive(end)
        .map(str::trim)
        .filter(|s| s.contains("BEGIN CERTIFICATE"))
        .map(|s| format!("{s}\n"))
        .collect()
}

pub(crate) fn kubeconfig_field(kc: &serde_yaml_ng::Value, path: &[&str]) -> String {
    let mut v = kc;
    for p in path {
        v = match p.parse::<usize>() {
            Ok(i) => &v[i],
            Err(_) => &v[*p],
        };
    }
    v.as_str()
        .unwrap_or_else(|| panic!("{path:?} missing"))
        .to_string()
}

pub(crate) fn b64(s: &str) -> String {
    String::from_utf8(openssl::base64::decode_block(s).unwrap()).unwrap()
}

/// Public key of a cert or a private key, as the openssl CLI prints it.
pub(crate) fn pubkey(dir: &Path, name: &str, pem: &str, is_cert: bool) -> String {
    let p = dir.join(name);
    fs::write(&p, pem).unwrap();
    let p = p.to_str().unwrap();
    if is_cert {
        run_tool("openssl", &["x509", "-in", p, "-noout", "-pubkey"])
    } else {
        run_tool("openssl", &["pkey", "-in", p, "-pubout"])
    }
}
