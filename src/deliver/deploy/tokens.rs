//! Each site's own report token, so a report speaks for its own host only: drawn once per site (128
//! random bits), kept in `BASE/.ibi/deploy-tokens.json` (0600) so a host still installing from an
//! earlier run's ISO is heard by the next run, and baked by the server into that site's own variant
//! of the installation ISO. A token never ends another site's phase; the ISO's own token (shared by
//! every host booted without deploy) ends none.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::util::fs::{
    Clobber, SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir, read_input_file, write_atomic,
};
use crate::util::secret::Secret;
use crate::util::token::{is_strong_token, new_token};

pub const TOKENS_FILE: &str = ".ibi/deploy-tokens.json";
const MAX_TOKENS_FILE: u64 = 4 << 20;

#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    /// Site name to token (hex).
    sites: BTreeMap<String, Secret>,
}

/// The tokens of `sites`, drawing (and saving, before anything is served) those missing.
pub fn load_or_draw(base: &Path, sites: &[&str]) -> Result<BTreeMap<String, Secret>> {
    let path = base.join(TOKENS_FILE);
    let mut stored = load(&path)?;
    let mut drawn = false;
    for site in sites {
        let weak = stored
            .sites
            .get(*site)
            .is_none_or(|t| !is_strong_token(t.expose_str()));
        if weak {
            stored
                .sites
                .insert((*site).to_string(), Secret::new(new_token()?));
            drawn = true;
        }
    }
    if drawn {
        ensure_dir(&base.join(".ibi"), SECRET_DIR_MODE)?;
        let json = serde_json::to_vec_pretty(&stored).context("encoding the report tokens")?;
        write_atomic(&path, &json, SECRET_FILE_MODE, Clobber::Replace)
            .with_context(|| format!("saving {}", path.display()))?;
    }
    Ok(sites
        .iter()
        .filter_map(|s| stored.sites.get(*s).map(|t| (s.to_string(), t.clone())))
        .collect())
}

fn load(path: &Path) -> Result<Stored> {
    if !path.exists() {
        return Ok(Stored::default());
    }
    let bytes = read_input_file(path, MAX_TOKENS_FILE)
        .with_context(|| format!("reading {}", path.display()))?;
    // No serde message: it could quote a token.
    serde_json::from_slice(&bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} is not deploy's token file (line {}); remove it (hosts installing from ISOs served with the old tokens will no longer be heard)",
            path.display(),
            e.line()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_token_per_site_kept_across_runs_and_private() {
        let d = tempfile::tempdir().unwrap();
        let first = load_or_draw(d.path(), &["a", "b"]).unwrap();
        assert_eq!(first.len(), 2);
        assert_ne!(first["a"], first["b"]);
        let again = load_or_draw(d.path(), &["b", "c"]).unwrap();
        assert_eq!(again["b"], first["b"], "kept");
        assert!(is_strong_token(again["c"].expose_str()));
        let all = load_or_draw(d.path(), &["a"]).unwrap();
        assert_eq!(
            all["a"], first["a"],
            "a site left out of a run keeps its token"
        );
        use std::os::unix::fs::MetadataExt;
        let mode = std::fs::metadata(d.path().join(TOKENS_FILE))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(d.path().join(TOKENS_FILE), "{\"MARKER\"").unwrap();
        let err = format!("{:#}", load_or_draw(d.path(), &["a"]).err().unwrap());
        assert!(err.contains("is not deploy's token file"), "{err}");
        assert!(!err.contains("MARKER"), "{err}");
    }
}
