//! What the tests of tests/fast/release_base_iso.rs and tests/tools/release_base_iso.rs share: one
//! file of tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common;
use crate::common::*;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Output;

pub(crate) const ISO_NAME: &str = "rhcos-live.x86_64.iso";

/// Serves `body` to every GET on 127.0.0.1 until the test process ends; returns the base URL.
pub(crate) fn serve(body: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(&body);
        }
    });
    format!("http://{addr}")
}

/// An OCI layout `dir` holding a one-layer release payload tagged `tag` whose one file is the
/// coreos-bootimages ConfigMap `yaml`.
pub(crate) fn bootimages_layout(dir: &Path, tag: &str, yaml: &str) {
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(yaml.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    tar.append_data(
        &mut h,
        "release-manifests/0000_50_installer_coreos-bootimages.yaml",
        yaml.as_bytes(),
    )
    .unwrap();
    common::registry::one_layer_layout(dir, tag, &tar.into_inner().unwrap());
}

/// An OCI layout `dir` holding a one-layer release payload tagged `tag` whose coreos-bootimages
/// ConfigMap carries `stream`.
pub(crate) fn release_layout(dir: &Path, tag: &str, stream: &str) {
    let indented: String = stream.lines().map(|l| format!("    {l}\n")).collect();
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coreos-bootimages\n  namespace: openshift-machine-config-operator\ndata:\n  stream: |\n{indented}"
    );
    bootimages_layout(dir, tag, &yaml);
}

/// An OCI layout `dir` holding a release payload of `version` whose coreos-bootimages ConfigMap is
/// shaped as installer `hack/build-coreos-manifest.go` writes it with several streams: `data.stream`
/// the rhel-9 one, `data.streams` a JSON object of every stream by name.
pub(crate) fn multi_stream_release_layout(
    dir: &Path,
    tag: &str,
    version: &str,
    streams: &[(&str, String)],
) {
    let indent = |text: &str| -> String { text.lines().map(|l| format!("    {l}\n")).collect() };
    let default = &streams.iter().find(|(n, _)| *n == "rhel-9").unwrap().1;
    let all: serde_json::Map<String, serde_json::Value> = streams
        .iter()
        .map(|(n, j)| (n.to_string(), serde_json::from_str(j).unwrap()))
        .collect();
    let all = serde_json::to_string_pretty(&all).unwrap();
    let yaml = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coreos-bootimages\n  namespace: openshift-machine-config-operator\ndata:\n  releaseVersion: {version}\n  stream: |\n{}  streams: |\n{}",
        indent(default),
        indent(&all)
    );
    bootimages_layout(dir, tag, &yaml);
}

/// The stream metadata naming the ISO at `url` with `sha256`.
pub(crate) fn stream(url: &str, sha256: &str) -> String {
    format!(
        r#"{{"stream":"rhcos-test","architectures":{{"x86_64":{{"artifacts":{{"metal":{{"formats":{{"iso":{{"disk":{{"location":"{url}","sha256":"{sha256}"}}}}}}}}}}}}}}}}"#
    )
}

/// `create image` in `dir` (seed `seed`) with a cache of its own and `extra` options.
pub(crate) fn create_image(dir: &Path, seed: &str, cache: &Path, extra: &[&str]) -> Output {
    create_image_of(dir, seed, "4.16.0", cache, extra)
}

/// `create image` for a seed of `version`.
pub(crate) fn create_image_of(
    dir: &Path,
    seed: &str,
    version: &str,
    cache: &Path,
    extra: &[&str],
) -> Output {
    let text = write_example_install(dir);
    let line = text.lines().find(|l| l.starts_with("seedImage:")).unwrap();
    let text = text.replace(line, &format!("seedImage: {seed}"));
    let line = text
        .lines()
        .find(|l| l.starts_with("seedVersion:"))
        .unwrap();
    let text = text.replace(line, &format!("seedVersion: {version}"));
    fs::write(dir.join("image-based-installation-config.yaml"), text).unwrap();
    let mut args = vec!["create", "image", "--dir", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    ibi(&args, &[("XDG_CACHE_HOME", cache.to_str().unwrap())])
}
