//! Where the base ISO comes from (a path, a URL, the CoreOS stream) and getting it into the cache, checked.

use super::stream::{normalize_sha256, parse_coreos_stream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use reqwest::Url;

/// The installer's escape hatch for the OS image; honoured so existing factory scripts keep working.
pub const OS_IMAGE_OVERRIDE_ENV: &str = "OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE";
/// The installer's wording, kept so people grepping build logs for it find ours too.
const OVERRIDE_WARNING: &str =
    "Found override for OS Image. Please be warned, this is not advised.";
/// Query parameter the installer reads the expected checksum from (`...iso?sha256=<hex>`).
const SHA256_QUERY: &str = "sha256";
/// Pause before the first retry; later ones double it.
const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(2);

/// Where the base ISO comes from, once the flags, the environment and the stream metadata are resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaseIsoSource {
    /// A local file, used in place (verified against `--base-iso-sha256` when given).
    Path(PathBuf),
    /// An `http`, `https` or `file` URL with the expected sha256 of the (decompressed) ISO, when known.
    Url { url: String, sha256: Option<String> },
}

/// The inputs of base-ISO resolution, as the CLI gives them.
#[derive(Clone, Debug)]
pub struct BaseIsoOptions {
    /// `--base-iso PATH|URL`.
    pub base_iso: Option<String>,
    /// `--base-iso-sha256 HEX`.
    pub base_iso_sha256: Option<String>,
    /// `--coreos-stream FILE|URL`: CoreOS stream metadata JSON.
    pub coreos_stream: Option<String>,
    /// `architecture` of image-based-installation-config.yaml: `amd64` or `arm64`.
    pub architecture: String,
    /// CoreOS stream metadata already read, and where from (the seed's release payload).
    pub stream_json: Option<(String, String)>,
    /// The image cache directory itself (files land directly in it), replacing `~/.cache/ibi/image_cache`.
    pub cache_dir: Option<PathBuf>,
    /// Pause before the first download retry (later ones double it); `None` means 2 s. Tests shorten it.
    pub retry_backoff: Option<Duration>,
}

impl Default for BaseIsoOptions {
    fn default() -> Self {
        BaseIsoOptions {
            base_iso: None,
            base_iso_sha256: None,
            coreos_stream: None,
            stream_json: None,
            architecture: "amd64".to_string(),
            cache_dir: None,
            retry_backoff: None,
        }
    }
}

impl BaseIsoOptions {
    fn backoff(&self) -> Duration {
        self.retry_backoff.unwrap_or(DEFAULT_RETRY_BACKOFF)
    }

    fn flag_sha256(&self) -> Result<Option<String>> {
        let Some(s) = &self.base_iso_sha256 else {
            return Ok(None);
        };
        normalize_sha256(s).context("--base-iso-sha256").map(Some)
    }
}

/// Where a base ISO can come from, for the error that says none could be found.
pub const THREE_WAYS: &str = "give it one of three ways: --base-iso PATH|URL (a CoreOS live ISO of the \
seed's RHCOS, e.g. from https://mirror.openshift.com/pub/openshift-v4/<arch>/dependencies/rhcos/), \
OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE=URL (as the installer takes it), or --coreos-stream FILE|URL (the CoreOS \
stream metadata; `openshift-install coreos print-stream-json` of the seed's OpenShift version prints it)";

/// Checks the base-ISO options without touching the network, so a mistake in them is reported before
/// the seed check (which may wait on an unreachable registry): checksums parse, URLs parse with a
/// supported scheme, and local files exist.
pub fn check_options(o: &BaseIsoOptions) -> Result<()> {
    check_options_with(o, os_image_override().as_deref())
}

/// Whether the options name a source; without one the seed's release payload is asked.
pub fn has_source(o: &BaseIsoOptions) -> bool {
    o.base_iso.is_some() || o.coreos_stream.is_some() || os_image_override().is_some()
}

fn os_image_override() -> Option<String> {
    std::env::var(OS_IMAGE_OVERRIDE_ENV)
        .ok()
        .filter(|v| !v.is_empty())
}

fn check_options_with(o: &BaseIsoOptions, env_override: Option<&str>) -> Result<()> {
    let flag_sha = o.flag_sha256()?;
    let (spec, what) = match (&o.base_iso, env_override, &o.coreos_stream) {
        (Some(spec), _, _) => (spec.as_str(), "--base-iso"),
        (None, Some(spec), _) => (spec, OS_IMAGE_OVERRIDE_ENV),
        (None, None, Some(stream)) => {
            return local_file_exists(stream).context("--coreos-stream");
        }
        // The seed's release payload is asked later, after the seed check.
        (None, None, None) => return Ok(()),
    };
    match source_from_spec(spec, flag_sha).context(what)? {
        BaseIsoSource::Path(p) => local_file_exists(&p.to_string_lossy()).context(what),
        BaseIsoSource::Url { .. } => Ok(()),
    }
}

/// A spec without `://` names a local file, which must be there.
fn local_file_exists(spec: &str) -> Result<()> {
    if spec.contains("://") {
        return Ok(());
    }
    match std::fs::metadata(spec) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => bail!("{spec} is not a regular file"),
        Err(e) => Err(e).with_context(|| format!("reading {spec}")),
    }
}

/// Picks the base ISO source: `--base-iso`, then `OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE`, then `--coreos-stream`.
pub fn resolve_source(o: &BaseIsoOptions) -> Result<BaseIsoSource> {
    let env = std::env::var(OS_IMAGE_OVERRIDE_ENV)
        .ok()
        .filter(|v| !v.is_empty());
    resolve_source_with(o, env.as_deref())
}

fn resolve_source_with(o: &BaseIsoOptions, env_override: Option<&str>) -> Result<BaseIsoSource> {
    let flag_sha = o.flag_sha256()?;
    if let Some(spec) = &o.base_iso {
        return source_from_spec(spec, flag_sha).context("--base-iso");
    }
    if let Some(spec) = env_override {
        tracing::warn!("{OVERRIDE_WARNING}");
        return source_from_spec(spec, flag_sha).context(OS_IMAGE_OVERRIDE_ENV);
    }
    if let Some(stream) = &o.coreos_stream {
        let json = super::stream::load(stream, o.backoff())?;
        return source_from_stream(&json, stream, &o.architecture, flag_sha);
    }
    if let Some((origin, json)) = &o.stream_json {
        return source_from_stream(json, origin, &o.architecture, flag_sha);
    }
    bail!("no base ISO given; {THREE_WAYS}")
}

/// The live ISO of `architecture` in the stream metadata `json` (read from `origin`).
fn source_from_stream(
    json: &str,
    origin: &str,
    architecture: &str,
    flag_sha: Option<String>,
) -> Result<BaseIsoSource> {
    let (location, sha) = parse_coreos_stream(json, architecture)
        .with_context(|| format!("reading CoreOS stream metadata {origin}"))?;
    let url = Url::parse(&location)
        .with_context(|| format!("CoreOS stream metadata {origin}: bad ISO location {location}"))?;
    let sha256 = merge_sha256(Some(sha), flag_sha, "the stream metadata")?;
    Ok(BaseIsoSource::Url {
        url: url.into(),
        sha256,
    })
}

/// Reads `PATH|URL`: `http`, `https` and `file` URLs (the `?sha256=` query taken out), anything else a path.
fn source_from_spec(spec: &str, flag_sha: Option<String>) -> Result<BaseIsoSource> {
    if !spec.contains("://") {
        return Ok(BaseIsoSource::Path(PathBuf::from(spec)));
    }
    let mut url = Url::parse(spec).with_context(|| format!("parsing URL {spec}"))?;
    if !matches!(url.scheme(), "http" | "https" | "file") {
        bail!(
            "unsupported URL scheme {:?} in {spec} (use http, https or file)",
            url.scheme()
        );
    }
    let query_sha = take_sha256_query(&mut url)?;
    let sha256 = merge_sha256(query_sha, flag_sha, "the URL's ?sha256=")?;
    Ok(BaseIsoSource::Url {
        url: url.into(),
        sha256,
    })
}

/// Removes `sha256=<hex>` from the query (it is ours, not the server's) and returns it normalized.
fn take_sha256_query(url: &mut Url) -> Result<Option<String>> {
    let mut sha = None;
    let mut rest = Vec::new();
    for (k, v) in url.query_pairs() {
        if k == SHA256_QUERY {
            sha = Some(normalize_sha256(&v).context("the URL's ?sha256= query")?);
        } else {
            rest.push((k.into_owned(), v.into_owned()));
        }
    }
    if rest.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(rest);
    }
    Ok(sha)
}

fn merge_sha256(a: Option<String>, flag: Option<String>, a_name: &str) -> Result<Option<String>> {
    match (a, flag) {
        (Some(a), Some(f)) if a != f => {
            bail!("conflicting checksums: {a_name} says {a}, --base-iso-sha256 says {f}")
        }
        (a, f) => Ok(a.or(f)),
    }
}

/// Makes the base ISO available locally and returns its path: downloaded URLs land in the image cache.
pub fn fetch(src: &BaseIsoSource, o: &BaseIsoOptions) -> Result<PathBuf> {
    match src {
        BaseIsoSource::Path(path) => local_file(path, o.flag_sha256()?.as_deref(), o),
        BaseIsoSource::Url { url, sha256 } => {
            let parsed = Url::parse(url).with_context(|| format!("parsing URL {url}"))?;
            if parsed.scheme() == "file" {
                let path = parsed
                    .to_file_path()
                    .map_err(|()| anyhow::anyhow!("{url} does not name a local file"))?;
                return local_file(&path, sha256.as_deref(), o);
            }
            let dir = super::cache::cache_dir(o.cache_dir.as_deref())?;
            super::cache::fetch_cached(&parsed, sha256.as_deref(), &dir, o.backoff())
                .with_context(|| format!("downloading base ISO {url}"))
        }
    }
}

/// A local ISO is used in place; a compressed one is decompressed into the cache first.
fn local_file(path: &Path, sha256: Option<&str>, o: &BaseIsoOptions) -> Result<PathBuf> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("reading base ISO {}", path.display()))?;
    if !meta.is_file() {
        bail!("base ISO {} is not a regular file", path.display());
    }
    if super::cache::is_compressed(path)? {
        let dir = super::cache::cache_dir(o.cache_dir.as_deref())?;
        return super::cache::decompress_local(path, sha256, &dir);
    }
    if let Some(expected) = sha256 {
        super::cache::verify(path, expected)?;
    }
    Ok(path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA_A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const SHA_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    // No test here sets the process environment (the test threads share it, and a setenv beside
    // another thread's getenv is undefined behaviour): reading OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE
    // is tested through the binary (tests/fast/release_base_iso.rs).

    fn opts(base_iso: Option<&str>, stream: Option<&str>) -> BaseIsoOptions {
        BaseIsoOptions {
            base_iso: base_iso.map(str::to_string),
            coreos_stream: stream.map(str::to_string),
            ..BaseIsoOptions::default()
        }
    }

    fn url(u: &str, sha: Option<&str>) -> BaseIsoSource {
        BaseIsoSource::Url {
            url: u.to_string(),
            sha256: sha.map(str::to_string),
        }
    }

    #[test]
    fn specs_become_paths_or_urls_with_the_query_checksum_taken_out() {
        let upper = SHA_A.to_uppercase();
        let cases = [
            (
                "/isos/rhcos.iso",
                BaseIsoSource::Path("/isos/rhcos.iso".into()),
            ),
            ("rhcos.iso", BaseIsoSource::Path("rhcos.iso".into())),
            ("https://h/r.iso", url("https://h/r.iso", None)),
            (
                &format!("https://h/r.iso?sha256={upper}"),
                url("https://h/r.iso", Some(SHA_A)),
            ),
            (
                &format!("http://h/r.iso?a=1&sha256={SHA_A}&b=2"),
                url("http://h/r.iso?a=1&b=2", Some(SHA_A)),
            ),
            (
                &format!("file:///i/r.iso?sha256={SHA_A}"),
                url("file:///i/r.iso", Some(SHA_A)),
            ),
        ];
        for (spec, want) in cases {
            assert_eq!(source_from_spec(spec, None).unwrap(), want, "{spec}");
        }
    }

    #[test]
    fn bad_specs_and_checksums_are_rejected_with_the_reason() {
        let cases = [
            ("ftp://h/r.iso", None, "unsupported URL scheme \"ftp\""),
            (
                "https://h/r.iso?sha256=abc",
                None,
                "\"abc\" is not a sha256",
            ),
            (
                &format!("https://h/r.iso?sha256={SHA_A}"),
                Some(SHA_B),
                "conflicting checksums",
            ),
        ];
        for (spec, flag, want) in cases {
            let err = source_from_spec(spec, flag.map(str::to_string)).unwrap_err();
            assert!(format!("{err:#}").contains(want), "{spec}: {err:#}");
        }
    }

    #[test]
    fn flag_checksum_applies_to_a_url_without_query() {
        let got = source_from_spec("https://h/r.iso", Some(SHA_B.into())).unwrap();
        assert_eq!(got, url("https://h/r.iso", Some(SHA_B)));
    }

    #[test]
    fn base_iso_wins_over_env_which_wins_over_stream() {
        let o = opts(Some("/a.iso"), Some("/nonexistent/stream.json"));
        let got = resolve_source_with(&o, Some("https://h/env.iso")).unwrap();
        assert_eq!(got, BaseIsoSource::Path("/a.iso".into()));
        let o = opts(None, Some("/nonexistent/stream.json"));
        let got = resolve_source_with(&o, Some("https://h/env.iso")).unwrap();
        assert_eq!(got, url("https://h/env.iso", None));
    }

    #[test]
    fn stream_file_gives_the_url_and_checksum_for_the_architecture() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("coreos-rhel-9.json");
        std::fs::write(&p, super::super::stream::tests::sample_stream()).unwrap();
        let mut o = opts(None, Some(p.to_str().unwrap()));
        o.architecture = "arm64".into();
        let got = resolve_source_with(&o, None).unwrap();
        assert_eq!(got, url("https://m/rhcos-aarch64.iso", Some(SHA_B)));
        o.base_iso_sha256 = Some(SHA_A.into());
        let err = resolve_source_with(&o, None).unwrap_err();
        assert!(
            format!("{err:#}").contains("conflicting checksums"),
            "{err:#}"
        );
    }

    #[test]
    fn nothing_given_names_the_flags_to_pass() {
        let err = resolve_source_with(&opts(None, None), None).unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains("--base-iso PATH|URL") && msg.contains("--coreos-stream"),
            "{msg}"
        );
    }

    #[test]
    fn sha256_is_normalized_to_lower_case() {
        assert_eq!(
            normalize_sha256(&format!(" {} ", SHA_A.to_uppercase())).unwrap(),
            SHA_A
        );
        assert!(normalize_sha256(&SHA_A[1..]).is_err());
        assert!(normalize_sha256(&format!("{}g", &SHA_A[1..])).is_err());
    }

    #[test]
    fn local_path_with_wrong_checksum_fails_and_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.iso");
        std::fs::write(&p, b"not the iso").unwrap();
        let o = BaseIsoOptions {
            base_iso_sha256: Some(SHA_A.into()),
            ..BaseIsoOptions::default()
        };
        let err = fetch(&BaseIsoSource::Path(p.clone()), &o).unwrap_err();
        let want = format!(
            "checksum mismatch for {}: expected {SHA_A}, found ",
            p.display()
        );
        assert!(format!("{err:#}").contains(&want), "{err:#}");
        assert!(p.exists(), "a user's file is never removed");
    }
}
