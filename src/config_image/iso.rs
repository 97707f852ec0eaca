//! The configuration ISO's layout: label, tree and file modes that lifecycle-agent's post-pivot
//! expects. It knows what goes where; `iso9660` knows how to write it.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use crate::config::ExtraManifest;
use crate::contract::config_iso::{
    CONFIG_DIR, EXTRA_MANIFESTS_DIR, IDMS_PATH, MANIFEST_PATH, MANIFESTS_DIR, VOLUME_LABEL,
};
use crate::iso9660::{IsoBuilder, WriteOptions};
use crate::util::fs::{Clobber, SECRET_FILE_MODE, write_atomic_with};

const DIR_MODE: u32 = 0o755;
const FILE_MODE: u32 = 0o644;

/// What goes into one site's configuration ISO.
pub struct ConfigIsoContent<'a> {
    pub manifest_json: Vec<u8>,
    pub image_digest_mirror_set: Option<Vec<u8>>,
    pub extra_manifests: &'a [ExtraManifest],
}

/// Lays out the tree. Like the installer, every directory exists even when empty.
pub fn build_tree(content: ConfigIsoContent<'_>) -> Result<IsoBuilder> {
    let mut b = IsoBuilder::new();
    b.add_dir(CONFIG_DIR, DIR_MODE)?;
    b.add_dir(MANIFESTS_DIR, DIR_MODE)?;
    // manifest.json carries private keys and the pull secret.
    b.add_file(MANIFEST_PATH, content.manifest_json, SECRET_FILE_MODE)?;
    if let Some(idms) = content.image_digest_mirror_set {
        b.add_file(IDMS_PATH, idms, FILE_MODE)?;
    }
    b.add_dir(EXTRA_MANIFESTS_DIR, DIR_MODE)?;
    for m in content.extra_manifests {
        let path = format!("{EXTRA_MANIFESTS_DIR}/{}", m.name);
        b.add_file(&path, m.data.clone(), FILE_MODE)
            .with_context(|| format!("adding {path} to the ISO"))?;
    }
    Ok(b)
}

/// Writes the ISO atomically with mode 0600 (it holds secrets).
pub fn write_iso(path: &Path, tree: &IsoBuilder, timestamp: i64) -> Result<()> {
    let opts = WriteOptions {
        volume_id: VOLUME_LABEL.to_string(),
        timestamp,
    };
    write_atomic_with(path, SECRET_FILE_MODE, Clobber::Replace, |f| {
        let mut w = std::io::BufWriter::new(f);
        tree.write(&opts, &mut w)
            .context("writing ISO 9660 image")?;
        w.flush().context("flushing ISO image")
    })
}

/// Timestamp for every date in the image: `SOURCE_DATE_EPOCH` when set (reproducible builds),
/// otherwise now.
pub fn image_timestamp() -> Result<i64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v
            .trim()
            .parse::<i64>()
            .with_context(|| format!("SOURCE_DATE_EPOCH: {v:?} is not a number of seconds")),
        Err(_) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .context("system clock is before 1970")?;
            i64::try_from(now.as_secs()).context("system clock out of range")
        }
    }
}
