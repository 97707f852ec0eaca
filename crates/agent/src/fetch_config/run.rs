//! `ibi agent fetch-config`: wait for the labelled device, read it, check the manifest, copy the tree to /opt/openshift.

use super::scan::Found;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use contract::config_iso::{HOST_TARGET, LEGACY_VOLUME_LABEL, MANIFEST_PATH, VOLUME_LABEL};

/// post-pivot polls every second; so do we when no event wakes us earlier.
pub(crate) const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// What `fetch_config` does and where.
#[derive(Debug, Clone)]
pub struct FetchConfigOptions {
    /// `/` in production; a temp dir in tests. `sys/class/block` and `dev` are found below it.
    pub root: PathBuf,
    /// Where the tree goes; `<root>/opt/openshift` by default.
    pub target: PathBuf,
    /// Accepted volume labels in order of preference.
    pub labels: Vec<String>,
    /// How long to wait for the device; `None` waits forever, like post-pivot.
    pub timeout: Option<Duration>,
    /// Longest pause between two scans.
    pub poll: Duration,
    /// When non-empty, only these kernel device names (`loop3`, `sr0`) are probed.
    pub devices: Vec<String>,
}

impl FetchConfigOptions {
    /// Production defaults below `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        Self {
            target: root.join(HOST_TARGET),
            root,
            labels: vec![VOLUME_LABEL.to_string(), LEGACY_VOLUME_LABEL.to_string()],
            timeout: None,
            poll: DEFAULT_POLL,
            devices: Vec::new(),
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `<target>/cluster-configuration/manifest.json` was already there; nothing was read.
    AlreadyPresent,
    /// The tree was copied from this device node.
    Copied { device: PathBuf },
}

/// Waits for the configuration device and copies it into `o.target`; see the module docs.
pub fn fetch_config(o: &FetchConfigOptions) -> Result<Outcome> {
    if already_present(&o.target) {
        return Ok(Outcome::AlreadyPresent);
    }
    let spec = super::scan::ScanSpec {
        root: &o.root,
        labels: &o.labels,
        only: &o.devices,
    };
    let found = super::scan::wait_for_device(&spec, o.timeout, o.poll)?;
    tracing::info!(target: "ibi::agent::fetch_config::run",
        "found {} ({:?}, label {:?})",
        found.dev.display(),
        found.probe.kind,
        found.probe.label
    );
    let _lock = super::stage::lock_parent(&o.target)?;
    // Another run may have finished while we waited.
    if already_present(&o.target) {
        return Ok(Outcome::AlreadyPresent);
    }
    super::stage::remove_leftovers(&o.target)?;
    copy_from(&found, &o.target).with_context(|| {
        format!(
            "configuration device {} (label {:?}); {} left untouched",
            found.dev.display(),
            found.probe.label,
            o.target.display()
        )
    })?;
    tracing::info!(target: "ibi::agent::fetch_config::run",
        "copied the configuration to {}", o.target.display());
    Ok(Outcome::Copied { device: found.dev })
}

fn already_present(target: &Path) -> bool {
    let manifest = target.join(MANIFEST_PATH);
    let present = manifest.exists();
    if present {
        tracing::info!(target: "ibi::agent::fetch_config::run",
            "{} exists; nothing to do", manifest.display());
    }
    present
}

/// What [`install_tree_from_dir`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DirOutcome {
    /// The target already held the same files and bytes; nothing was written.
    AlreadyInPlace,
    /// The tree was staged beside the target and renamed onto it.
    Written,
}

/// Copies the configuration tree in the directory `src` to `target` the way a device is copied:
/// under the parent's lock, after removing the `<name>.tmp-*`/`<name>.old-*` a killed run left,
/// staged in a sibling temp dir, checked (manifest, `manifests/`), fsynced and renamed, so post-pivot
/// never sees half a tree. A target that already holds exactly `src`'s files and bytes is left alone
/// (a re-run after a kill between the rename and the state record); any other target is replaced.
pub(crate) fn install_tree_from_dir(src: &Path, target: &Path) -> Result<DirOutcome> {
    let _lock = super::stage::lock_parent(target)?;
    super::stage::remove_leftovers(target)?;
    if super::source::same_tree(src, target)? {
        tracing::info!(target: "ibi::agent::fetch_config::run",
            "{} already holds {}", target.display(), src.display());
        return Ok(DirOutcome::AlreadyInPlace);
    }
    super::stage::install_atomically(target, |staging| super::source::copy_tree(src, staging))
        .with_context(|| {
            format!(
                "copying {} to {} ({} left as it was)",
                src.display(),
                target.display(),
                target.display()
            )
        })?;
    Ok(DirOutcome::Written)
}

/// Copies the tree of the configuration ISO in the file `iso` to `target` as a device is copied
/// (leftovers of a killed run removed, staged, checked, fsynced, renamed): a one-shot host's
/// fetched site configuration.
pub(crate) fn install_tree_from_iso(iso: &Path, target: &Path) -> Result<()> {
    let _lock = super::stage::lock_parent(target)?;
    super::stage::remove_leftovers(target)?;
    super::stage::install_atomically(target, |staging| {
        super::source::copy_device(iso, super::FsKind::Iso9660, staging)
    })
    .with_context(|| {
        format!(
            "copying {} to {} ({} left as it was)",
            iso.display(),
            target.display(),
            target.display()
        )
    })
}

fn copy_from(found: &Found, target: &Path) -> Result<()> {
    super::stage::install_atomically(target, |staging| {
        super::source::copy_device(&found.dev, found.probe.kind, staging)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use iso9660::test_image;
    use std::fs;

    /// A fake root whose `sr0` is an ISO built by our writer.
    fn root_with_iso(manifest: &[u8], label: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let iso = test_image(
            label,
            &["cluster-configuration/manifests"],
            &[
                (MANIFEST_PATH, manifest, 0o600),
                ("extra-manifests/x.yaml", b"kind: X\n", 0o644),
            ],
        );
        let sys = root.path().join("sys/class/block/sr0");
        fs::create_dir_all(&sys).unwrap();
        fs::write(sys.join("size"), format!("{}\n", iso.len() / 512)).unwrap();
        fs::write(sys.join("uevent"), "DEVNAME=sr0\n").unwrap();
        fs::create_dir_all(root.path().join("dev")).unwrap();
        fs::write(root.path().join("dev/sr0"), iso).unwrap();
        root
    }

    fn opts(root: &Path) -> FetchConfigOptions {
        FetchConfigOptions {
            timeout: Some(Duration::from_millis(200)),
            poll: Duration::from_millis(20),
            ..FetchConfigOptions::new(root)
        }
    }

    #[test]
    fn copies_an_iso_through_the_userspace_reader() {
        let root = root_with_iso(br#"{"api_version":1}"#, "cluster-config");
        let o = opts(root.path());
        let got = fetch_config(&o).unwrap();
        let device = root.path().join("dev/sr0");
        assert_eq!(got, Outcome::Copied { device });
        let t = root.path().join("opt/openshift");
        assert_eq!(
            fs::read(t.join("extra-manifests/x.yaml")).unwrap(),
            b"kind: X\n"
        );
        assert!(t.join("cluster-configuration/manifests").is_dir());
        assert_eq!(fetch_config(&o).unwrap(), Outcome::AlreadyPresent);
    }

    #[test]
    fn a_bad_iso_names_the_device_and_leaves_the_target_alone() {
        let root = root_with_iso(br#"{"api_version":2}"#, "relocation-config");
        let err = fetch_config(&opts(root.path())).unwrap_err();
        let dev = root.path().join("dev/sr0");
        let t = root.path().join("opt/openshift");
        assert_eq!(
            format!("{err:#}"),
            format!(
                "configuration device {} (label \"relocation-config\"); {} left untouched: \
                 cluster-configuration/manifest.json: api_version is 2, expected 1",
                dev.display(),
                t.display()
            )
        );
        assert!(!t.exists());
    }

    #[test]
    fn ignores_other_labels_until_the_timeout() {
        let root = root_with_iso(br#"{"api_version":1}"#, "CLUSTER-CONFIG");
        let err = fetch_config(&opts(root.path())).unwrap_err();
        assert!(
            format!("{err:#}").contains("appeared within 200ms"),
            "{err:#}"
        );
    }
}
