//! One-shot site install (`ibi create image --site SITE`): the site's configuration tree, taken from
//! the configuration ISO `ibi create config-image` already built for it (`SITE/imagebasedconfig.iso`),
//! read in userspace, and carried in the installation ISO's Ignition config under
//! [`LIVE_SITE_TREE`] (files 0600, directories 0700).
//!
//! Why the built ISO and not a second rendering: the ISO is what the site's identity, kubeconfig and
//! kubeadmin password were handed out with, and a rendering is not reproducible byte for byte (the
//! watch marker carries the build time, the kubeadmin hash a fresh bcrypt salt). Reading it gives
//! exactly the files and bytes the configuration ISO holds, by construction.

use std::fs;
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tracing::warn;

use crate::config::{IMAGE_BASED_CONFIG_FILE, INSTALL_CONFIG_FILE};
use crate::contract::config_iso::{
    EXTRA_MANIFESTS_DIR, ISO_FILE_NAME, LEGACY_VOLUME_LABEL, LIVE_SITE_TREE, MANIFEST_PATH,
    MANIFESTS_DIR, VOLUME_LABEL,
};
use crate::ignition::types::{FILE_OWNER, File as IgnFile};
use crate::iso9660::IsoReader;
use crate::util::fs::check_input_file;

/// Every file of the tree on the live system: it holds private keys and the pull secret.
pub const SITE_FILE_MODE: u32 = 0o600;
/// Every directory of the tree on the live system, the root included.
pub const SITE_DIR_MODE: u32 = 0o700;
/// A configuration ISO is kilobytes; anything near this is not one.
const MAX_SITE_ISO: u64 = 64 << 20;
/// The site's inputs that a newer configuration ISO must have been built from.
const SITE_INPUTS: [&str; 3] = [
    IMAGE_BASED_CONFIG_FILE,
    INSTALL_CONFIG_FILE,
    EXTRA_MANIFESTS_DIR,
];

/// One site's configuration tree, as its configuration ISO holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SiteTree {
    /// The site directory (`--site`).
    pub site: PathBuf,
    /// Relative paths of the directories, parents first.
    pub dirs: Vec<String>,
    /// Relative paths and contents of the files.
    pub files: Vec<(String, Vec<u8>)>,
    /// The configuration ISO it was read from: its size and SHA-256 (hex), for a host that fetches
    /// the ISO instead of carrying the tree ([`crate::contract::config_iso::SiteFetch`]).
    pub iso_size: u64,
    pub iso_sha256: String,
}

impl SiteTree {
    /// The bytes of all files.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|(_, d)| d.len() as u64).sum()
    }

    /// The Ignition entries that place the tree: the files (0600) and, for `storage.directories`,
    /// every directory (0700) from the root down, so empty ones (`manifests/`) exist too.
    pub fn ignition_entries(&self) -> (Vec<IgnFile>, Vec<Value>) {
        let at = |rel: &str| format!("{LIVE_SITE_TREE}/{rel}");
        // No `overwrite`: with it Ignition deletes what is at the path first, and a directory
        // handled after its files would take them along; without it an existing directory only
        // gets its mode and owner set.
        let dir = |path: String| json!({"path": path, "user": {"name": FILE_OWNER}, "mode": SITE_DIR_MODE});
        let mut dirs = vec![dir(LIVE_SITE_TREE.to_string())];
        dirs.extend(self.dirs.iter().map(|d| dir(at(d))));
        let files = self.files.iter();
        let files = files.map(|(rel, data)| IgnFile::from_bytes(&at(rel), SITE_FILE_MODE, data));
        (files.collect(), dirs)
    }
}

/// Reads `SITE/imagebasedconfig.iso`: its volume must be the configuration ISO's, and it must hold
/// what post-pivot needs (manifest.json and `manifests/`). Warns when a site input is newer than the
/// ISO (the ISO would carry an older configuration than the directory shows).
pub fn read_site_tree(site: &Path) -> Result<SiteTree> {
    let iso_path = site.join(ISO_FILE_NAME);
    check_input_file(&iso_path, MAX_SITE_ISO).with_context(|| {
        format!(
            "--site {}: build the site's configuration ISO first (`ibi create config-image --dir {}`)",
            site.display(),
            site.display()
        )
    })?;
    warn_if_stale(site, &iso_path);
    read_tree(site)
}

/// [`read_site_tree`] without its warnings: the tree the site's configuration ISO holds now.
pub fn read_tree(site: &Path) -> Result<SiteTree> {
    let iso_path = site.join(ISO_FILE_NAME);
    check_input_file(&iso_path, MAX_SITE_ISO).with_context(|| {
        format!(
            "reading the site's configuration ISO {}",
            iso_path.display()
        )
    })?;
    let shown = iso_path.display().to_string();
    let bytes = fs::read(&iso_path).with_context(|| format!("reading {shown}"))?;
    let iso_size = bytes.len() as u64;
    let iso_sha256 = crate::util::digest::hex(&openssl::sha::sha256(&bytes));
    let mut iso = IsoReader::open(std::io::Cursor::new(bytes))
        .with_context(|| format!("{shown} is not an ISO 9660 image"))?;
    let label = iso.volume_id().to_string();
    if label != VOLUME_LABEL && label != LEGACY_VOLUME_LABEL {
        bail!(
            "{shown} has the volume id {:?}, not {VOLUME_LABEL:?}: not a configuration ISO",
            crate::util::text::escape_control(&label)
        );
    }
    let mut tree = SiteTree {
        site: site.to_path_buf(),
        iso_size,
        iso_sha256,
        ..SiteTree::default()
    };
    for entry in iso.walk().with_context(|| format!("listing {shown}"))? {
        check_relative(&entry.path).with_context(|| shown.clone())?;
        if entry.is_dir {
            tree.dirs.push(entry.path);
            continue;
        }
        let data = iso
            .read_entry(&entry)
            .with_context(|| format!("reading {} from {shown}", entry.path))?;
        tree.files.push((entry.path, data));
    }
    if !tree.files.iter().any(|(p, _)| p == MANIFEST_PATH) {
        bail!("{shown} holds no {MANIFEST_PATH}");
    }
    if !tree.dirs.iter().any(|d| d == MANIFESTS_DIR) {
        bail!("{shown} holds no {MANIFESTS_DIR}/ (post-pivot needs it, even empty)");
    }
    Ok(tree)
}

/// A name from the image, made into an Ignition path below [`LIVE_SITE_TREE`]: relative, plain
/// components only, and no byte a path may not carry.
fn check_relative(rel: &str) -> Result<()> {
    let ok = !rel.is_empty()
        && !rel.contains(['\0', '\n'])
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if !ok {
        bail!("unsafe path {rel:?} in the image");
    }
    Ok(())
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn warn_if_stale(site: &Path, iso: &Path) {
    let Some(built) = modified(iso) else { return };
    // Each extra manifest too: one edited in place leaves its directory's time as it was.
    let manifests = fs::read_dir(site.join(EXTRA_MANIFESTS_DIR))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path());
    let inputs = SITE_INPUTS.iter().map(|i| site.join(i)).chain(manifests);
    for input in inputs {
        if modified(&input).is_some_and(|t| t > built) {
            warn!(
                "{} is newer than {}: the one-shot ISO carries the configuration ISO as built; run \
                 `ibi create config-image --dir {}` first if the change should go to the site",
                input.display(),
                iso.display(),
                site.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iso9660::test_image;

    const MANIFEST: &[u8] = br#"{"api_version":1,"pull_secret":"s3cret"}"#;

    /// A site directory whose configuration ISO is written by ibi's ISO writer with `label`.
    fn site_with_iso(label: &str, with_manifests_dir: bool) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let dirs: &[&str] = if with_manifests_dir {
            &[MANIFESTS_DIR]
        } else {
            &[]
        };
        let files: &[(&str, &[u8], u32)] = &[
            (MANIFEST_PATH, MANIFEST, 0o600),
            ("extra-manifests/a.yaml", b"kind: A\n", 0o644),
        ];
        fs::write(d.path().join(ISO_FILE_NAME), test_image(label, dirs, files)).unwrap();
        d
    }

    #[test]
    fn reads_every_file_and_directory_of_the_iso() {
        let site = site_with_iso(VOLUME_LABEL, true);
        let tree = read_site_tree(site.path()).unwrap();
        assert_eq!(
            tree.dirs,
            ["cluster-configuration", MANIFESTS_DIR, "extra-manifests"]
        );
        let files: Vec<_> = tree
            .files
            .iter()
            .map(|(p, d)| (p.as_str(), d.as_slice()))
            .collect();
        assert_eq!(
            files,
            [
                (MANIFEST_PATH, MANIFEST),
                ("extra-manifests/a.yaml", b"kind: A\n".as_slice())
            ]
        );
        assert_eq!(tree.bytes(), (MANIFEST.len() + 8) as u64);
    }

    #[test]
    fn ignition_entries_are_private() {
        let site = site_with_iso(VOLUME_LABEL, true);
        let (files, dirs) = read_site_tree(site.path()).unwrap().ignition_entries();
        let paths: Vec<_> = files.iter().map(|f| (f.path.as_str(), f.mode)).collect();
        assert_eq!(
            paths,
            [
                (
                    "/var/tmp/ibi-site-configuration/cluster-configuration/manifest.json",
                    Some(0o600)
                ),
                (
                    "/var/tmp/ibi-site-configuration/extra-manifests/a.yaml",
                    Some(0o600)
                ),
            ]
        );
        assert_eq!(files[0].data().unwrap(), MANIFEST);
        let dirs: Vec<_> = dirs
            .iter()
            .map(|d| (d["path"].as_str().unwrap(), d["mode"].as_u64()))
            .collect();
        assert_eq!(
            dirs,
            [
                ("/var/tmp/ibi-site-configuration", Some(0o700)),
                (
                    "/var/tmp/ibi-site-configuration/cluster-configuration",
                    Some(0o700)
                ),
                (
                    "/var/tmp/ibi-site-configuration/cluster-configuration/manifests",
                    Some(0o700)
                ),
                (
                    "/var/tmp/ibi-site-configuration/extra-manifests",
                    Some(0o700)
                ),
            ]
        );
    }

    #[test]
    fn refuses_what_is_not_a_site_configuration() {
        let empty = tempfile::tempdir().unwrap();
        let err = format!("{:#}", read_site_tree(empty.path()).unwrap_err());
        assert!(
            err.contains("build the site's configuration ISO first"),
            "{err}"
        );

        let live = site_with_iso("rhcos-9.6", true);
        let err = format!("{:#}", read_site_tree(live.path()).unwrap_err());
        assert!(err.contains("not a configuration ISO"), "{err}");

        let no_dir = site_with_iso(VOLUME_LABEL, false);
        let err = format!("{:#}", read_site_tree(no_dir.path()).unwrap_err());
        assert!(
            err.contains("holds no cluster-configuration/manifests/"),
            "{err}"
        );
        assert!(!err.contains("s3cret"));
    }

    #[test]
    fn unsafe_names_are_refused() {
        for bad in ["", "/etc/x", "a/../b", "./a", "a\nb"] {
            assert!(check_relative(bad).is_err(), "{bad:?}");
        }
        check_relative("cluster-configuration/manifest.json").unwrap();
    }
}
