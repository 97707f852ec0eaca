//! The report token of an installation ISO built with `statusURL`: drawn once per asset directory,
//! kept in `DIR/.ibi/status-token` (0600), baked into every ISO built there, and read back by
//! `ibi serve --dir DIR` to accept that ISO's reports. Rebuilding the ISO keeps the token, so a host
//! still installing from the previous build is still heard; deleting the file draws a new one at the
//! next build (and the older ISOs' reports are then refused).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::util::fs::{
    Clobber, SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir, read_input_file, write_atomic,
};
use crate::util::secret::Secret;
use crate::util::token::{is_strong_token, new_token};

/// Under the asset directory.
pub const STATUS_TOKEN_FILE: &str = ".ibi/status-token";
const MAX_TOKEN_FILE: u64 = 4096;

fn path_in(dir: &Path) -> PathBuf {
    dir.join(STATUS_TOKEN_FILE)
}

/// The directory's token, if a build with `statusURL` made one. A file that does not hold a token is
/// an error naming it (never quoting it).
pub fn load(dir: &Path) -> Result<Option<Secret>> {
    let path = path_in(dir);
    if !path.exists() {
        return Ok(None);
    }
    let bytes = read_input_file(&path, MAX_TOKEN_FILE)
        .with_context(|| format!("reading {}", path.display()))?;
    let text = String::from_utf8(bytes).unwrap_or_default();
    let token = text.trim();
    if !is_strong_token(token) {
        bail!(
            "{} does not hold a report token (32 or more hex characters); remove it and run `ibi create image` again",
            path.display()
        );
    }
    Ok(Some(Secret::new(token)))
}

/// The directory's token, drawn and saved first if there is none (or only a weak one).
pub fn load_or_create(dir: &Path) -> Result<Secret> {
    if let Ok(Some(token)) = load(dir) {
        return Ok(token);
    }
    let token = new_token()?;
    ensure_dir(&dir.join(".ibi"), SECRET_DIR_MODE)?;
    let path = path_in(dir);
    write_atomic(
        &path,
        format!("{token}\n").as_bytes(),
        SECRET_FILE_MODE,
        Clobber::Replace,
    )
    .with_context(|| format!("saving the report token to {}", path.display()))?;
    Ok(Secret::new(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drawn_once_kept_private_and_reused() {
        let d = tempfile::tempdir().unwrap();
        assert!(load(d.path()).unwrap().is_none());
        let first = load_or_create(d.path()).unwrap();
        assert_eq!(first.expose_str().len(), 32);
        assert_eq!(load_or_create(d.path()).unwrap(), first);
        assert_eq!(load(d.path()).unwrap(), Some(first.clone()));
        use std::os::unix::fs::MetadataExt;
        let mode = std::fs::metadata(d.path().join(STATUS_TOKEN_FILE))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_damaged_file_is_named_and_replaced_at_the_next_build() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".ibi")).unwrap();
        std::fs::write(d.path().join(STATUS_TOKEN_FILE), "MARKER-short\n").unwrap();
        let err = format!("{:#}", load(d.path()).unwrap_err());
        assert!(err.contains("does not hold a report token"), "{err}");
        assert!(!err.contains("MARKER"), "{err}");
        let new = load_or_create(d.path()).unwrap();
        assert!(is_strong_token(new.expose_str()));
    }
}
