//! Whether a one-shot installation ISO (`ibi create image --site`) still carries its site's
//! configuration. Re-running `ibi create config-image` for the site makes a new configuration (its
//! watch marker's `builtAt` at least, its keys with `--rotate-crypto`): a host installed from the
//! one-shot ISO written before gets the older one, and nothing says so unless somebody compares.
//! `create config-image`, `inspect` and `deploy` warn from here; `ibi watch` and `deploy` judge a
//! host by what its medium carried ([`Carried`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use anyhow::{Context, Result};
use tracing::warn;

use super::per_host;
use super::site_tree::read_tree;
use crate::contract::config_iso::{
    EXTRA_MANIFESTS_DIR, ISO_FILE_NAME, LIVE_SITE_TREE, MARKER_BUILT_AT_KEY, MARKER_FILE,
    SITE_FETCH_PATH, SiteFetch,
};
use crate::ignition::types::Config;
use crate::util::text::escape_control;

/// What a one-shot ISO carries of its site's configuration.
#[derive(Clone, PartialEq, Eq)]
pub enum Carried {
    /// The tree: each file by its path relative to the tree's root. No `Debug`: it holds keys.
    Tree(BTreeMap<String, Vec<u8>>),
    /// A tree too large to carry: the configuration ISO it fetches at install time.
    Fetch(SiteFetch),
}

impl std::fmt::Debug for Carried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Carried::Tree(files) => write!(f, "Tree({} files)", files.len()),
            Carried::Fetch(fetch) => write!(f, "Fetch({fetch:?})"),
        }
    }
}

impl Carried {
    /// The watch marker's `builtAt` the tree carries, when it carries one.
    pub fn built_at(&self) -> Option<String> {
        match self {
            Carried::Tree(files) => built_at(files.get(&marker_path())?),
            Carried::Fetch(_) => None,
        }
    }
}

fn marker_path() -> String {
    format!("{EXTRA_MANIFESTS_DIR}/{MARKER_FILE}")
}

/// `data.builtAt` of a watch marker's YAML.
fn built_at(marker: &[u8]) -> Option<String> {
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_slice(marker).ok()?;
    doc.get("data")?
        .get(MARKER_BUILT_AT_KEY)?
        .as_str()
        .map(str::to_string)
}

/// What the installation ISO at `iso` carries of a site's configuration; `None` for one that is not
/// a one-shot ISO.
pub fn carried(iso: &Path) -> Result<Option<Carried>> {
    let file = File::open(iso).with_context(|| format!("opening {}", iso.display()))?;
    let embedded =
        per_host::read(&file, &[]).with_context(|| format!("reading {}", iso.display()))?;
    carried_in(embedded.config())
}

/// [`carried`], from an Ignition config.
pub fn carried_in(config: &Config) -> Result<Option<Carried>> {
    let prefix = format!("{LIVE_SITE_TREE}/");
    let mut files = BTreeMap::new();
    for f in &config.storage.files {
        if f.path == SITE_FETCH_PATH {
            let data = f
                .data()
                .context("the site fetch settings are not inline data")?;
            let fetch: SiteFetch = serde_json::from_slice(&data)
                .map_err(|e| anyhow::anyhow!("{SITE_FETCH_PATH} is not JSON: {e}"))?;
            return Ok(Some(Carried::Fetch(fetch)));
        }
        if let Some(rel) = f.path.strip_prefix(&prefix) {
            let data = f
                .data()
                .with_context(|| format!("{} is not inline data", f.path))?;
            files.insert(rel.to_string(), data);
        }
    }
    Ok((!files.is_empty()).then_some(Carried::Tree(files)))
}

/// Why the one-shot ISO at `iso` no longer carries the configuration of `site` (its configuration
/// ISO as it is now), as one warning line; `None` when it still does, or when `iso` is not a
/// one-shot ISO.
pub fn mismatch(iso: &Path, site: &Path) -> Result<Option<String>> {
    let Some(carried) = carried(iso)? else {
        return Ok(None);
    };
    let now = read_tree(site)?;
    let same = match &carried {
        Carried::Tree(files) => {
            files.len() == now.files.len()
                && now
                    .files
                    .iter()
                    .all(|(rel, data)| files.get(rel).is_some_and(|d| d == data))
        }
        Carried::Fetch(fetch) => fetch.size == now.iso_size && fetch.sha256 == now.iso_sha256,
    };
    if same {
        return Ok(None);
    }
    let new = now
        .files
        .iter()
        .find(|(rel, _)| *rel == marker_path())
        .and_then(|(_, d)| built_at(d));
    let when = |b: Option<String>| {
        b.map_or("at another time".to_string(), |b| {
            format!("at {}", escape_control(&b))
        })
    };
    Ok(Some(format!(
        "{} no longer carries the configuration of site {}: it carries the one built {}, {} is the one built {}; a host installed from it gets that older configuration: build it again (ibi create image --site {}), or watch such a host with ibi watch --one-shot",
        iso.display(),
        site.display(),
        when(carried.built_at()),
        site.join(ISO_FILE_NAME).display(),
        when(new),
        site.display()
    )))
}

/// Warns (one line, [`mismatch`]'s) when the one-shot ISO at `iso` no longer carries the
/// configuration of `site`, `who` in front (`site a17: `); nothing when there is none at `iso`, or
/// `site` has no configuration ISO to compare with.
pub fn warn_if_mismatched(iso: &Path, site: &Path, who: &str) {
    if !iso.is_file() || !site.join(ISO_FILE_NAME).is_file() {
        return;
    }
    match mismatch(iso, site) {
        Ok(Some(why)) => warn!("{who}{why}"),
        Ok(None) => {}
        Err(e) => warn!(
            "{who}checking whether {} still carries the site's configuration: {e:#}",
            iso.display()
        ),
    }
}

/// The site's watch expectations as the tree carries them: its marker and its manifest.json's
/// `cluster_id`, as raw files (`config_image::marker` reads them).
pub fn tree_file<'a>(carried: &'a Carried, rel: &str) -> Option<&'a [u8]> {
    match carried {
        Carried::Tree(files) => files.get(rel).map(Vec::as_slice),
        Carried::Fetch(_) => None,
    }
}
