//! What the batch mode (`create config-image --sites`) remembers of each site, in
//! `SITE/.ibi/batch.json`: a fingerprint of the site's effective inputs and the sha256 of every output
//! made from them. A re-run skips a site whose fingerprint is unchanged and whose outputs still hash as
//! recorded, so a fleet of a thousand sites where one changed rebuilds one.
//!
//! The record is written last, after every output: a run interrupted halfway through a site leaves the
//! old record (whose fingerprint or hashes no longer match) or none, and the next run redoes the site.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use openssl::sha::Sha256;
use serde::{Deserialize, Serialize};

use crate::config_image::site::STATE_DIR;
use crate::util::digest::hex;
use crate::util::fs::{Clobber, SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir, write_atomic};

/// Under `SITE/.ibi/`, beside the identity.
pub const STATE_FILE: &str = "batch.json";
const RECORD_VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Record {
    version: u32,
    /// The `ibi` version that wrote the outputs (also part of the fingerprint).
    ibi_version: String,
    inputs_sha256: String,
    /// Output path relative to the site directory → its sha256.
    outputs: BTreeMap<String, String>,
    /// The inventory the site was built from (absolute), and the fingerprint of the site's inputs
    /// alone (its rendered files and the shared extra manifests, without SOURCE_DATE_EPOCH or a
    /// seed): what `create image --site` compares with the inputs as they are now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inventory: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    site_inputs_sha256: Option<String>,
}

/// What a site's record says it was built from: the inventory and the fingerprint of its inputs.
pub struct BuiltFrom {
    pub inventory: PathBuf,
    pub site_inputs_sha256: String,
}

/// [`BuiltFrom`] of the site's record, when it has one that says so (records from before it did
/// not).
pub fn built_from(site_dir: &Path) -> Option<BuiltFrom> {
    let text = fs::read_to_string(site_dir.join(STATE_DIR).join(STATE_FILE)).ok()?;
    let record: Record = serde_json::from_str(&text).ok()?;
    Some(BuiltFrom {
        inventory: PathBuf::from(record.inventory?),
        site_inputs_sha256: record.site_inputs_sha256?,
    })
}

/// A sha256 over named parts, each length-prefixed so no two different part lists hash alike.
pub struct Fingerprint(Sha256);

impl Default for Fingerprint {
    fn default() -> Self {
        Self::new()
    }
}

impl Fingerprint {
    /// Starts with the ibi version: a new ibi may render the same inputs differently.
    pub fn new() -> Self {
        let mut f = Fingerprint(Sha256::new());
        f.add("ibi", env!("CARGO_PKG_VERSION").as_bytes());
        f
    }

    pub fn add(&mut self, name: &str, data: &[u8]) -> &mut Self {
        for part in [name.as_bytes(), data] {
            self.0.update(&(part.len() as u64).to_le_bytes());
            self.0.update(part);
        }
        self
    }

    pub fn hex(self) -> String {
        hex(&self.0.finish())
    }
}

fn file_sha256(path: &Path) -> Result<String> {
    let mut f = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            return Ok(hex(&h.finish()));
        }
        h.update(&buf[..n]);
    }
}

/// True when `site_dir` holds a record with this fingerprint and every output in `outputs` (paths
/// relative to `site_dir`) still has the recorded hash. Anything unreadable or missing means "no".
pub fn is_current(site_dir: &Path, fingerprint: &str, outputs: &[&str]) -> bool {
    let path = site_dir.join(STATE_DIR).join(STATE_FILE);
    let Ok(text) = fs::read_to_string(&path) else {
        return false;
    };
    let record: Record = match serde_json::from_str(&text) {
        Ok(r) => r,
        Err(e) => {
            tracing::info!("{}: unreadable ({e}); rebuilding the site", path.display());
            return false;
        }
    };
    if record.version != RECORD_VERSION
        || record.inputs_sha256 != fingerprint
        || record.outputs.len() != outputs.len()
    {
        return false;
    }
    outputs.iter().all(|rel| {
        let recorded = record.outputs.get(*rel);
        let intact = recorded
            .is_some_and(|want| file_sha256(&site_dir.join(rel)).is_ok_and(|got| &got == want));
        if !intact {
            tracing::info!(
                "{}: missing or changed since the last run",
                site_dir.join(rel).display()
            );
        }
        intact
    })
}

/// Records the fingerprint and the hashes of `outputs` (relative to `site_dir`), which must exist,
/// and what the site was built from.
pub fn record(
    site_dir: &Path,
    fingerprint: &str,
    outputs: &[&str],
    built_from: &BuiltFrom,
) -> Result<()> {
    let mut hashes = BTreeMap::new();
    for rel in outputs {
        hashes.insert((*rel).to_string(), file_sha256(&site_dir.join(rel))?);
    }
    let record = Record {
        version: RECORD_VERSION,
        ibi_version: env!("CARGO_PKG_VERSION").to_string(),
        inputs_sha256: fingerprint.to_string(),
        outputs: hashes,
        inventory: Some(built_from.inventory.display().to_string()),
        site_inputs_sha256: Some(built_from.site_inputs_sha256.clone()),
    };
    let state_dir = site_dir.join(STATE_DIR);
    ensure_dir(&state_dir, SECRET_DIR_MODE)?;
    let mut json = serde_json::to_vec_pretty(&record).context("serialising the batch record")?;
    json.push(b'\n');
    write_atomic(
        &state_dir.join(STATE_FILE),
        &json,
        SECRET_FILE_MODE,
        Clobber::Replace,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_separates_parts() {
        let fp = |parts: &[(&str, &[u8])]| {
            let mut f = Fingerprint::new();
            for (n, d) in parts {
                f.add(n, d);
            }
            f.hex()
        };
        assert_eq!(fp(&[("a", b"bc")]), fp(&[("a", b"bc")]));
        assert_ne!(fp(&[("a", b"bc")]), fp(&[("ab", b"c")]));
        assert_ne!(fp(&[("a", b"")]), fp(&[]));
        assert_eq!(fp(&[]).len(), 64);
    }

    #[test]
    fn record_then_is_current_until_an_output_or_the_inputs_change() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("out.iso"), b"iso").unwrap();
        let outputs = ["out.iso"];
        assert!(!is_current(d.path(), "fp1", &outputs), "no record yet");
        let from = BuiltFrom {
            inventory: "/base/sites.yaml".into(),
            site_inputs_sha256: "in1".into(),
        };
        record(d.path(), "fp1", &outputs, &from).unwrap();
        assert!(is_current(d.path(), "fp1", &outputs));
        let got = built_from(d.path()).unwrap();
        assert_eq!(
            (got.inventory, got.site_inputs_sha256),
            (PathBuf::from("/base/sites.yaml"), "in1".to_string())
        );
        assert!(!is_current(d.path(), "fp2", &outputs), "inputs changed");
        assert!(
            !is_current(d.path(), "fp1", &["out.iso", "other"]),
            "output set changed"
        );
        fs::write(d.path().join("out.iso"), b"isx").unwrap();
        assert!(!is_current(d.path(), "fp1", &outputs), "output damaged");
        fs::remove_file(d.path().join("out.iso")).unwrap();
        assert!(!is_current(d.path(), "fp1", &outputs), "output gone");
        let state = d.path().join(STATE_DIR).join(STATE_FILE);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&state).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
