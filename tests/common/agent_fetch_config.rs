//! What the tests of tests/fast/agent_fetch_config.rs and tests/root/agent_fetch_config.rs share:
//! one file of tests, split by what each test needs (docs/architecture.md, "Tests").

#![cfg(feature = "agent")]
use crate::common;
use ibi::agent::fetch_config::FetchConfigOptions;
use ibi::iso9660::{IsoBuilder, WriteOptions};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub(crate) const MANIFEST: &str = "cluster-configuration/manifest.json";
pub(crate) const GOOD_MANIFEST: &[u8] =
    br#"{"api_version":1,"cluster_name":"sno","pull_secret":"x"}"#;

/// A loop device over an image, detached on drop (also when the test panics).
pub(crate) struct LoopDev {
    pub(crate) dev: PathBuf,
}

impl LoopDev {
    /// `losetup -f --show -r IMAGE`; None when loop devices are unavailable here.
    pub(crate) fn attach(image: &Path) -> Result<Self, String> {
        let out = Command::new("losetup")
            .args(["-f", "--show", "-r"])
            .arg(image)
            .output()
            .map_err(|e| format!("running losetup: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "losetup failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let dev = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Ok(Self { dev })
    }

    pub(crate) fn name(&self) -> String {
        self.dev.file_name().unwrap().to_string_lossy().into_owned()
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

pub(crate) fn attach_or_skip(test: &str, image: &Path) -> Option<LoopDev> {
    if !common::require_root(test) {
        return None;
    }
    match LoopDev::attach(image) {
        Ok(l) => Some(l),
        Err(e) => {
            common::missing(test, &format!("no loop device: {e}"));
            None
        }
    }
}

/// Fetch options scanning the real `/sys/class/block`, limited to one device.
pub(crate) fn options(target: &Path, device: &str) -> FetchConfigOptions {
    FetchConfigOptions {
        target: target.to_path_buf(),
        timeout: Some(Duration::from_secs(10)),
        poll: Duration::from_millis(100),
        devices: vec![device.to_string()],
        ..FetchConfigOptions::new("/")
    }
}

/// The configuration tree as (relative path, content, mode) triples.
pub(crate) fn tree(manifest: &[u8]) -> Vec<(&'static str, Vec<u8>, u32)> {
    vec![
        (MANIFEST, manifest.to_vec(), 0o600),
        (
            "cluster-configuration/manifests/image-digest-mirror-set.json",
            b"{\"kind\":\"ImageDigestMirrorSet\"}".to_vec(),
            0o644,
        ),
        (
            "extra-manifests/cm.yaml",
            b"kind: ConfigMap\n".to_vec(),
            0o644,
        ),
    ]
}

pub(crate) fn iso_image(dir: &Path, label: &str, manifest: &[u8]) -> PathBuf {
    let mut b = IsoBuilder::new();
    b.add_dir("cluster-configuration/manifests", 0o755).unwrap();
    for (path, data, mode) in tree(manifest) {
        b.add_file(path, data, mode).unwrap();
    }
    let opts = WriteOptions {
        volume_id: label.to_string(),
        timestamp: 1_700_000_000,
    };
    let path = dir.join("config.iso");
    b.write(&opts, fs::File::create(&path).unwrap()).unwrap();
    path
}

pub(crate) fn assert_tree_copied(target: &Path) {
    for (path, data, _) in tree(GOOD_MANIFEST) {
        assert_eq!(fs::read(target.join(path)).unwrap(), data, "{path}");
    }
    let mode = |p: &str| fs::metadata(target.join(p)).unwrap().mode() & 0o777;
    assert_eq!(mode(MANIFEST), 0o600);
    assert_eq!(fs::metadata(target).unwrap().mode() & 0o777, 0o700);
}

pub(crate) fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
