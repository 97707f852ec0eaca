//! What `serve` serves and under which URL: the images ibi builds under DIR, each behind its own
//! unguessable token (128 random bits from OpenSSL, hex), kept in `DIR/.ibi/serve-tokens.json` so
//! URLs survive restarts, and the map written to `DIR/.ibi/served.json` for people and scripts.
//! Both files are 0600: a URL is a capability to the pull secret and the cluster's keys.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use tracing::warn;

use super::source::Source;
use crate::install_image::variant::RECIPE_FILE;
use crate::util::fs::{
    Clobber, SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir, read_input_file, write_atomic,
};
use crate::util::secret::Secret;
use crate::util::token::{is_strong_token, new_token};

/// The outputs of `create image` and `create config-image` (single site and batch).
pub const INSTALLATION_ISO: &str = "rhcos-ibi.iso";
pub const CONFIG_ISO: &str = "imagebasedconfig.iso";
const SITES_DIR: &str = "sites";
pub const SERVED_FILE: &str = ".ibi/served.json";
pub const TOKENS_FILE: &str = ".ibi/serve-tokens.json";
const MAX_TOKENS_FILE: u64 = 1 << 20;

/// One image: its name in served.json (a path under DIR), where its bytes come from, its token.
#[derive(Debug)]
pub struct Image {
    pub name: String,
    pub source: Source,
    pub token: Secret,
    /// The file name at the end of the URL (some BMCs want the URL to end in `.iso`).
    pub file_name: String,
    /// Bytes of it sent so far by this server.
    pub sent: Arc<AtomicU64>,
}

/// An image served under a name of its own (so with its own token and byte count): `ibi deploy`
/// gives each host its own URL, also for the installation ISO they all share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// The name in the map and the tokens file, e.g. `deploy/a17/rhcos-ibi.iso`.
    pub name: String,
    /// The discovered image it serves, e.g. `rhcos-ibi.iso`.
    pub of: String,
    /// For the installation ISO: the host's own report token, which its variant carries and which
    /// makes its reports the site's.
    pub host: Option<HostToken>,
    /// For the installation ISO, a one-shot install: the site directory whose configuration tree the
    /// host's variant carries (`deploy --phase oneshot`).
    pub site: Option<PathBuf>,
}

/// A site's own report token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostToken {
    pub site: String,
    pub token: Secret,
}

/// The images `aliases` name, under their own names, from what [`discover`] found in `dir`.
pub fn select(
    dir: &Path,
    found: Vec<(String, Source)>,
    aliases: &[Alias],
) -> Result<Vec<(String, Source)>> {
    aliases
        .iter()
        .map(|a| match found.iter().find(|(n, _)| *n == a.of) {
            Some((_, src)) if a.host.is_none() && a.site.is_none() => {
                Ok((a.name.clone(), src.clone()))
            }
            Some((_, src)) => Ok((
                a.name.clone(),
                Source::Host {
                    of: Box::new(src.clone()),
                    token: a.host.as_ref().map(|h| h.token.clone()),
                    site: a.site.clone(),
                },
            )),
            None => bail!("{} has no {}", dir.display(), a.of),
        })
        .collect()
}

/// served.json's entries; `url` holds the token, so the struct is never logged.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServedEntry {
    pub name: String,
    pub file: String,
    pub url: String,
    /// Absent for a host's own variant of the installation ISO, which is never hashed whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    pub size: u64,
}

#[derive(Serialize, Deserialize)]
struct ServedMap {
    images: Vec<ServedEntry>,
}

#[derive(Default, Serialize, Deserialize)]
struct Tokens {
    tokens: BTreeMap<String, String>,
}

/// The images under `dir`, in a fixed order: the installation ISO, the site's configuration ISO,
/// then every batch site's.
pub fn discover(dir: &Path) -> Result<Vec<(String, Source)>> {
    let mut found = Vec::new();
    if let Some(src) = installation_source(dir)? {
        found.push((INSTALLATION_ISO.to_string(), src));
    }
    if dir.join(CONFIG_ISO).is_file() {
        found.push((CONFIG_ISO.to_string(), Source::File(dir.join(CONFIG_ISO))));
    }
    let sites = dir.join(SITES_DIR);
    if sites.is_dir() {
        let mut names: Vec<String> = std::fs::read_dir(&sites)
            .with_context(|| format!("listing {}", sites.display()))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().join(CONFIG_ISO).is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        for site in names {
            let path = sites.join(&site).join(CONFIG_ISO);
            found.push((
                format!("{SITES_DIR}/{site}/{CONFIG_ISO}"),
                Source::File(path),
            ));
        }
    }
    if found.is_empty() {
        bail!(
            "nothing to serve in {}: no {INSTALLATION_ISO}, {RECIPE_FILE}, {CONFIG_ISO} or {SITES_DIR}/<site>/{CONFIG_ISO}",
            dir.display()
        );
    }
    Ok(found)
}

/// `ibi serve --one-shot`: for every built site (`sites/<site>/imagebasedconfig.iso`), its one-shot
/// installation ISO `sites/<site>/rhcos-ibi.iso`: the installation ISO with the site's configuration
/// laid over it as it streams (nothing is stored per site), under a token of its own.
pub fn add_one_shot(dir: &Path, found: &mut Vec<(String, Source)>) -> Result<()> {
    let Some(of) = found
        .iter()
        .find(|(n, _)| n == INSTALLATION_ISO)
        .map(|(_, s)| s.clone())
    else {
        bail!(
            "--one-shot: {} has no installation ISO ({INSTALLATION_ISO} or {RECIPE_FILE}) to lay the sites' configurations over: build it with `ibi create image --dir {}`",
            dir.display(),
            dir.display()
        );
    };
    let prefix = format!("{SITES_DIR}/");
    let suffix = format!("/{CONFIG_ISO}");
    let sites: Vec<String> = found
        .iter()
        .filter_map(|(n, _)| n.strip_prefix(&prefix)?.strip_suffix(&suffix))
        .map(str::to_string)
        .collect();
    if sites.is_empty() {
        bail!(
            "--one-shot: no built site in {} ({SITES_DIR}/<site>/{CONFIG_ISO}): build them with `ibi create config-image --sites`",
            dir.display()
        );
    }
    warn!(
        "--one-shot: serving {} site(s)' one-shot installation ISOs: each carries its site's private keys and pull secret, behind its own URL",
        sites.len()
    );
    for site in sites {
        found.push((
            format!("{SITES_DIR}/{site}/{INSTALLATION_ISO}"),
            Source::Host {
                of: Box::new(of.clone()),
                token: None,
                site: Some(dir.join(SITES_DIR).join(&site)),
            },
        ));
    }
    Ok(())
}

/// `rhcos-ibi.iso` as a file or as a patch (`create image --patch-only`); with both, the newer.
pub fn installation_source(dir: &Path) -> Result<Option<Source>> {
    let (file, recipe) = (dir.join(INSTALLATION_ISO), dir.join(RECIPE_FILE));
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    Ok(match (file.is_file(), recipe.is_file()) {
        (false, false) => None,
        (true, false) => Some(Source::File(file)),
        (false, true) => Some(Source::Variant(recipe)),
        (true, true) => {
            let src = if mtime(&recipe) > mtime(&file) {
                Source::Variant(recipe.clone())
            } else {
                Source::File(file.clone())
            };
            warn!(
                "both {} and {} exist: serving the newer, {}",
                file.display(),
                recipe.display(),
                src.path().display()
            );
            Some(src)
        }
    })
}

/// Gives every image a token: the one kept from an earlier run unless `rotate`, else a new one.
/// Saves the tokens (0600) before anything is served, so a crash cannot lose a URL handed out.
pub fn assign_tokens(dir: &Path, found: Vec<(String, Source)>, rotate: bool) -> Result<Vec<Image>> {
    let path = dir.join(TOKENS_FILE);
    let mut kept = if rotate {
        Tokens::default()
    } else {
        load_tokens(&path)?
    };
    let mut images = Vec::new();
    for (name, source) in found {
        let token = match kept.tokens.get(&name) {
            Some(t) if is_strong_token(t) => t.clone(),
            _ => new_token()?,
        };
        kept.tokens.insert(name.clone(), token.clone());
        let file_name = name.rsplit('/').next().unwrap_or(&name).to_string();
        images.push(Image {
            name,
            source,
            token: Secret::new(token),
            file_name,
            sent: Arc::default(),
        });
    }
    ensure_dir(&dir.join(".ibi"), SECRET_DIR_MODE)?;
    let json = serde_json::to_vec_pretty(&kept).context("encoding the tokens")?;
    write_atomic(&path, &json, SECRET_FILE_MODE, Clobber::Replace)?;
    Ok(images)
}

fn load_tokens(path: &Path) -> Result<Tokens> {
    if !path.exists() {
        return Ok(Tokens::default());
    }
    let bytes = read_input_file(path, MAX_TOKENS_FILE)
        .with_context(|| format!("reading {}", path.display()))?;
    // No serde message: it would quote a token.
    serde_json::from_slice(&bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a token file (line {}); remove it or pass --rotate-tokens",
            path.display(),
            e.line()
        )
    })
}

/// `public` + `/TOKEN/FILE`.
pub fn url_for(public: &str, image: &Image) -> String {
    format!(
        "{}/{}/{}",
        public.trim_end_matches('/'),
        image.token.expose_str(),
        image.file_name
    )
}

/// The served map: written at start and again whenever a rebuilt image gets a new hash.
pub struct ServedFile {
    path: PathBuf,
    entries: Mutex<Vec<ServedEntry>>,
}

impl ServedFile {
    pub fn create(dir: &Path, entries: Vec<ServedEntry>) -> Result<Self> {
        Self::create_at(dir.join(SERVED_FILE), entries)
    }

    /// The map at `path` rather than `DIR/.ibi/served.json` (`ibi deploy` keeps its own).
    pub fn create_at(path: PathBuf, entries: Vec<ServedEntry>) -> Result<Self> {
        let f = Self {
            path,
            entries: Mutex::new(entries),
        };
        let entries = f.lock().clone();
        f.write(&entries)?;
        Ok(f)
    }

    pub fn entries(&self) -> Vec<ServedEntry> {
        self.lock().clone()
    }

    /// Records a new version of image `index`; rewrites the file when something changed.
    pub fn update(&self, index: usize, sha256: Option<&str>, size: u64) {
        let snapshot = {
            let mut entries = self.lock();
            let Some(e) = entries.get_mut(index) else {
                return;
            };
            if e.sha256.as_deref() == sha256 && e.size == size {
                return;
            }
            e.sha256 = sha256.map(str::to_string);
            e.size = size;
            entries.clone()
        };
        if let Err(e) = self.write(&snapshot) {
            warn!("updating {}: {e:#}", self.path.display());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<ServedEntry>> {
        // A panic elsewhere cannot leave the entries half-updated: each update is one assignment.
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self, entries: &[ServedEntry]) -> Result<()> {
        let json = serde_json::to_vec_pretty(&ServedMap {
            images: entries.to_vec(),
        })
        .context("encoding served.json")?;
        write_atomic(&self.path, &json, SECRET_FILE_MODE, Clobber::Replace)
    }
}

/// The map as a table for stdout: name, size, the sha256's first 12 digits, URL.
pub fn table(entries: &[ServedEntry]) -> String {
    let width = entries
        .iter()
        .map(|e| e.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mut out = format!(
        "{:<width$}  {:>12}  {:<12}  URL\n",
        "NAME", "SIZE", "SHA256"
    );
    for e in entries {
        let sha = e.sha256.as_deref().unwrap_or("-");
        let short = sha.get(..12).unwrap_or(sha);
        out.push_str(&format!(
            "{:<width$}  {:>12}  {short:<12}  {}\n",
            e.name, e.size, e.url
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }

    #[test]
    fn discovers_the_images_ibi_builds_in_a_fixed_order() {
        let d = tempfile::tempdir().unwrap();
        for p in [
            "sites/b/imagebasedconfig.iso",
            "sites/a/imagebasedconfig.iso",
            "imagebasedconfig.iso",
            "rhcos-ibi.iso",
            "other.iso",
            "sites/c/x.iso",
        ] {
            touch(&d.path().join(p));
        }
        let names: Vec<String> = discover(d.path())
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            names,
            [
                "rhcos-ibi.iso",
                "imagebasedconfig.iso",
                "sites/a/imagebasedconfig.iso",
                "sites/b/imagebasedconfig.iso"
            ]
        );
    }

    #[test]
    fn an_empty_dir_says_what_it_looked_for() {
        let d = tempfile::tempdir().unwrap();
        let err = discover(d.path()).unwrap_err().to_string();
        assert!(
            err.contains("nothing to serve") && err.contains("rhcos-ibi.iso"),
            "{err}"
        );
    }

    #[test]
    fn tokens_are_long_random_stable_and_rotatable() {
        let d = tempfile::tempdir().unwrap();
        touch(&d.path().join("imagebasedconfig.iso"));
        let first = assign_tokens(d.path(), discover(d.path()).unwrap(), false).unwrap();
        let again = assign_tokens(d.path(), discover(d.path()).unwrap(), false).unwrap();
        let rotated = assign_tokens(d.path(), discover(d.path()).unwrap(), true).unwrap();
        let t = first[0].token.expose_str();
        assert_eq!(t.len(), 32);
        assert!(is_strong_token(t));
        assert_eq!(again[0].token, first[0].token);
        assert_ne!(rotated[0].token, first[0].token);
        let mode = std::fs::metadata(d.path().join(TOKENS_FILE)).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o600
        );
    }

    #[test]
    fn weak_kept_tokens_are_replaced() {
        assert!(!is_strong_token("abc"));
        assert!(!is_strong_token(&"z".repeat(32)));
        assert!(is_strong_token(&"0f".repeat(16)));
    }

    #[test]
    fn aliases_serve_a_found_image_under_their_own_name() {
        let d = tempfile::tempdir().unwrap();
        touch(&d.path().join("rhcos-ibi.iso"));
        let alias = |name: &str, of: &str| Alias {
            name: name.into(),
            of: of.into(),
            host: None,
            site: None,
        };
        let got = select(
            d.path(),
            discover(d.path()).unwrap(),
            &[
                alias("deploy/a/rhcos-ibi.iso", "rhcos-ibi.iso"),
                alias("deploy/b/rhcos-ibi.iso", "rhcos-ibi.iso"),
            ],
        )
        .unwrap();
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["deploy/a/rhcos-ibi.iso", "deploy/b/rhcos-ibi.iso"]);
        assert_eq!(got[1].1.path(), d.path().join("rhcos-ibi.iso"));
        let err = select(
            d.path(),
            discover(d.path()).unwrap(),
            &[alias("x", "sites/a/imagebasedconfig.iso")],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.ends_with("has no sites/a/imagebasedconfig.iso"),
            "{err}"
        );
    }

    #[test]
    fn urls_end_in_the_file_name() {
        let img = Image {
            name: "sites/a/imagebasedconfig.iso".into(),
            source: Source::File("/x".into()),
            token: Secret::new("t0k"),
            file_name: "imagebasedconfig.iso".into(),
            sent: Arc::default(),
        };
        assert_eq!(
            url_for("https://h:1/", &img),
            "https://h:1/t0k/imagebasedconfig.iso"
        );
    }
}
