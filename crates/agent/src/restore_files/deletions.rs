//! `etc.deletions`: the `/etc` files the seed deleted (from `ostree admin config-diff`), one
//! absolute path per line, removed from the new deployment. Unlike lca-cli, a path that is already
//! gone is a warning, not an abort: the goal state (absent) holds either way. Every line is checked
//! before anything is deleted, so a line that would climb out of the deployment deletes nothing.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::paths::{self, Parents};

/// The non-empty, trimmed lines of a deletions list with their deployment-relative paths.
fn parse(list: &str) -> Result<Vec<(&str, PathBuf)>> {
    let mut parsed = Vec::new();
    for line in list.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let rel = paths::relative(Path::new(line), true)
            .and_then(|rel| rel.context("it names the deployment itself"))
            .with_context(|| format!("deletion `{line}`"))?;
        parsed.push((line, rel));
    }
    Ok(parsed)
}

pub(super) fn apply(list: &str, root: &Path) -> Result<(u64, Vec<String>)> {
    let root = root
        .canonicalize()
        .with_context(|| format!("opening {}", root.display()))?;
    let mut targets = Vec::new();
    for (line, rel) in parse(list)? {
        let path = paths::resolve(&root, &rel, Parents::MustExist)
            .with_context(|| format!("deletion `{line}`"))?;
        targets.push((line, path));
    }
    let mut deleted = 0;
    let mut missing = Vec::new();
    for (line, path) in targets {
        if path.as_deref().map(delete).transpose()?.unwrap_or(false) {
            deleted += 1;
        } else {
            tracing::warn!(target: "ibi::agent::restore_files::deletions",
                "etc.deletions: {line} is not in {}; nothing to delete",
                root.display()
            );
            missing.push(line.to_string());
        }
    }
    Ok((deleted, missing))
}

/// Deletes a file, symlink (not its target) or directory tree; false if there was nothing.
fn delete(path: &Path) -> Result<bool> {
    let removed = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(err) => Err(err),
    };
    match removed {
        Ok(()) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(err).with_context(|| format!("deleting {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_trimmed_and_blank_ones_skipped() {
        let parsed = parse("/etc/a\n\n  /etc/b/c  \n\t\n/etc/d").unwrap();
        let rels: Vec<_> = parsed
            .iter()
            .map(|(_, rel)| rel.to_str().unwrap())
            .collect();
        assert_eq!(rels, ["etc/a", "etc/b/c", "etc/d"]);
        assert_eq!(parsed[1].0, "/etc/b/c");
    }

    #[test]
    fn escaping_or_empty_lines_fail_the_list_naming_the_line() {
        for (list, reason) in [("/etc/a\n/etc/../../x", "`..`"), ("/", "deployment itself")] {
            let err = format!("{:#}", parse(list).unwrap_err());
            assert!(err.contains(reason), "{err}");
        }
        let err = format!("{:#}", parse("/etc/../../x").unwrap_err());
        assert!(err.contains("deletion `/etc/../../x`"), "{err}");
    }
}
