//! One-shot site install (`ibi create image --site`): the live system carries the site's configuration
//! tree at [`LIVE_SITE_TREE`] (placed by Ignition); the step `write-site-config` copies it into the new
//! stateroot's `var/opt/openshift` ([`STATEROOT_TARGET`]), where post-pivot finds
//! `cluster-configuration` on the first boot and needs no device. The copy is `fetch-config`'s:
//! staged beside the target, checked, fsynced and renamed, so a kill mid-write leaves a temp dir the
//! next run removes, never a partial `cluster-configuration` post-pivot would take as complete.
//!
//! A tree too large for the ISO (`ibi deploy --phase oneshot`) is not carried: the live system holds
//! [`SITE_FETCH_PATH`] instead (the site's configuration ISO by size and SHA-256), and the step
//! fetches that ISO from `statusURL` with the host's own report token and `statusCA`, checks it,
//! keeps it on the live system (so a resumed run does not fetch again) and copies its tree the same
//! way.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tracing::{info, warn};

use crate::fetch_config::{DirOutcome, install_tree_from_dir, install_tree_from_iso};
use crate::report::{innermost, load_report_config};
use contract::config_iso::{
    LIVE_SITE_TREE, ONE_SHOT_PATH, OneShot, OneShotTree, SITE_FETCH_ENDPOINT, SITE_FETCH_PATH,
    STATEROOT_TARGET, SiteFetch,
};
use contract::host_report::ReportConfig;
use util::digest::hex;
use util::fs::{Clobber, SECRET_FILE_MODE, read_input_file, write_atomic};

/// Where a fetched configuration ISO is kept on the live system (0600), so a resumed run does not
/// fetch it again.
const FETCHED_ISO: &str = "var/tmp/ibi-site-configuration.iso";
/// A configuration ISO is kilobytes; a site's with large extra manifests megabytes.
const MAX_FETCHED_ISO: u64 = 64 << 20;
/// One fetch's bound (the download included).
const FETCH_TIMEOUT: Duration = Duration::from_secs(300);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Where a one-shot install's site configuration comes from on the live system below `root`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SiteSource {
    /// The tree the ISO carries.
    Tree(PathBuf),
    /// The fetch settings of a tree too large to carry.
    Fetch(PathBuf),
}

/// This ISO's site configuration, if it is a one-shot install: the tree it carries, else its fetch
/// settings. An ISO that says it is one ([`ONE_SHOT_PATH`]) with neither is an error: the host
/// would otherwise be installed and wait for a configuration device forever.
pub(crate) fn site_source(root: &Path) -> Result<Option<SiteSource>> {
    let dir = root.join(LIVE_SITE_TREE.trim_start_matches('/'));
    if dir.is_dir() {
        return Ok(Some(SiteSource::Tree(dir)));
    }
    let fetch = root.join(SITE_FETCH_PATH.trim_start_matches('/'));
    if fetch.is_file() {
        return Ok(Some(SiteSource::Fetch(fetch)));
    }
    let marker = root.join(ONE_SHOT_PATH.trim_start_matches('/'));
    if !marker.exists() {
        return Ok(None);
    }
    let said = read_input_file(&marker, 4096)
        .ok()
        .and_then(|b| serde_json::from_slice::<OneShot>(&b).ok());
    let (site, missing) = match &said {
        Some(o) if o.tree == OneShotTree::Fetched => (o.site.as_str(), SITE_FETCH_PATH),
        Some(o) => (o.site.as_str(), LIVE_SITE_TREE),
        None => ("?", LIVE_SITE_TREE),
    };
    bail!(
        "this is a one-shot install of site {} ({ONE_SHOT_PATH}) but {missing} is missing on the live system: installed without it the host would wait for a configuration device forever; check the ISO (ibi inspect) and build it again",
        util::text::escape_control(site)
    )
}

/// A tree too large for the ISO: fetches the site's configuration ISO from `statusURL` with the
/// host's own report token (its settings at `report_config`), checks its size and SHA-256 against
/// `fetch_file`'s, keeps it on the live system, and writes its tree into
/// `<stateroot_dir>/var/opt/openshift` as [`write_site_config`] does. A resumed run whose ISO is
/// already there (same SHA-256) does not fetch again.
pub(crate) fn fetch_site_config(
    root: &Path,
    fetch_file: &Path,
    report_config: &Path,
    stateroot_dir: &Path,
) -> Result<()> {
    let bytes = read_input_file(fetch_file, 4096)
        .with_context(|| format!("reading {}", fetch_file.display()))?;
    let want: SiteFetch = serde_json::from_slice(&bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} is not ibi's site fetch settings: {e}",
            fetch_file.display()
        )
    })?;
    if want.size > MAX_FETCHED_ISO {
        bail!(
            "{}: the configuration ISO is {} bytes, over the {MAX_FETCHED_ISO}-byte bound",
            fetch_file.display(),
            want.size
        );
    }
    let kept = root.join(FETCHED_ISO);
    let have = std::fs::read(&kept).ok().filter(|b| matches(b, &want));
    if have.is_none() {
        let Some(settings) = load_report_config(report_config)? else {
            bail!(
                "{} is missing: the site's configuration is fetched with the host's report settings",
                report_config.display()
            );
        };
        let iso = download(&settings, &want)?;
        write_atomic(&kept, &iso, SECRET_FILE_MODE, Clobber::Replace).with_context(|| {
            format!(
                "keeping the fetched configuration ISO at {}",
                kept.display()
            )
        })?;
        info!(target: "ibi::agent::install::site_config",
            bytes = iso.len(), "site configuration ISO fetched");
    }
    let target = stateroot_dir.join(STATEROOT_TARGET);
    install_tree_from_iso(&kept, &target)?;
    info!(target: "ibi::agent::install::site_config",
        target = %target.display(), "site configuration written");
    Ok(())
}

fn matches(bytes: &[u8], want: &SiteFetch) -> bool {
    bytes.len() as u64 == want.size && hex(&openssl::sha::sha256(bytes)) == want.sha256
}

/// `GET statusURL/site-configuration`, tried `attempts` times while the server is unreachable or
/// busy; the answer must be the ISO the settings name.
fn download(settings: &ReportConfig, want: &SiteFetch) -> Result<Vec<u8>> {
    let mut builder = reqwest::blocking::Client::builder()
        .user_agent(concat!("ibi/", env!("CARGO_PKG_VERSION")))
        .timeout(FETCH_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT);
    if let Some(pem) = &settings.ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem.as_bytes())
            .context("reading the report CA (statusCA)")?;
        builder = builder.tls_certs_only(certs);
    }
    let client = builder.build().context("setting up the fetch client")?;
    let url = format!(
        "{}/{SITE_FETCH_ENDPOINT}",
        settings.url.trim_end_matches('/')
    );
    let attempts = settings.attempts.max(1);
    let mut last = String::new();
    for attempt in 1..=attempts {
        if attempt > 1 {
            std::thread::sleep(Duration::from_secs(settings.delay_seconds));
        }
        let answer = client
            .get(&url)
            .bearer_auth(settings.token.expose_str())
            .send();
        let response = match answer {
            Ok(r) => r,
            Err(e) => {
                last = innermost(&e);
                warn!(target: "ibi::agent::install::site_config",
                    "fetching the site's configuration (try {attempt} of {attempts}): {last}");
                continue;
            }
        };
        let status = response.status().as_u16();
        match status {
            200 => {}
            408 | 429 | 500..=599 => {
                last = format!("HTTP {status}");
                warn!(target: "ibi::agent::install::site_config",
                    "fetching the site's configuration (try {attempt} of {attempts}): {last}");
                continue;
            }
            _ => bail!(
                "fetching the site's configuration from statusURL: refused with HTTP {status}"
            ),
        }
        let mut body = Vec::new();
        response
            .take(want.size + 1)
            .read_to_end(&mut body)
            .context("reading the site's configuration ISO")?;
        if !matches(&body, want) {
            bail!(
                "the site's configuration ISO from statusURL is not the one the installation ISO names ({} bytes; {} wanted)",
                body.len(),
                want.size
            );
        }
        return Ok(body);
    }
    bail!("fetching the site's configuration from statusURL: {last} ({attempts} tries)")
}

/// Writes the tree in `src` into `<stateroot_dir>/var/opt/openshift`; see the module comment.
pub(crate) fn write_site_config(src: &Path, stateroot_dir: &Path) -> Result<()> {
    let target = stateroot_dir.join(STATEROOT_TARGET);
    match install_tree_from_dir(src, &target)? {
        DirOutcome::AlreadyInPlace => {
            info!(target: "ibi::agent::install::site_config",
                "the site's configuration is already in place")
        }
        DirOutcome::Written => {
            info!(target: "ibi::agent::install::site_config",
                target = %target.display(), "site configuration written")
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::MetadataExt;
    use util::fs::sorted_names as names;

    const MANIFEST: &[u8] = br#"{"api_version":1,"pull_secret":"s3cret"}"#;

    /// A live root holding the site's tree as Ignition writes it (files 0600, directories 0700).
    fn live_root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let tree = root.path().join(LIVE_SITE_TREE.trim_start_matches('/'));
        fs::create_dir_all(tree.join("cluster-configuration/manifests")).unwrap();
        fs::create_dir_all(tree.join("extra-manifests")).unwrap();
        fs::write(tree.join("cluster-configuration/manifest.json"), MANIFEST).unwrap();
        fs::write(
            tree.join("extra-manifests/ibi-reconfiguration.yaml"),
            b"kind: ConfigMap\n",
        )
        .unwrap();
        root
    }

    fn assert_same(src: &Path, target: &Path) {
        assert_eq!(names(target), ["cluster-configuration", "extra-manifests"]);
        for rel in [
            "cluster-configuration/manifest.json",
            "extra-manifests/ibi-reconfiguration.yaml",
        ] {
            assert_eq!(
                fs::read(src.join(rel)).unwrap(),
                fs::read(target.join(rel)).unwrap(),
                "{rel}"
            );
        }
        assert!(target.join("cluster-configuration/manifests").is_dir());
        let mode = fs::metadata(target.join("cluster-configuration/manifest.json"))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    /// The tree the live system carries, which must be there.
    fn site_tree_source(root: &Path) -> PathBuf {
        match site_source(root).unwrap() {
            Some(SiteSource::Tree(dir)) => dir,
            other => panic!("no tree: {other:?}"),
        }
    }

    #[test]
    fn no_tree_on_the_live_system_means_no_step() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(site_source(root.path()).unwrap(), None);
    }

    /// Issue 33 item 8: a one-shot ISO whose tree was missing on the live system installed a host
    /// that waits for a configuration device forever. Its marker says it is a one-shot install: an
    /// error, before the disk is touched.
    #[test]
    fn a_one_shot_install_without_its_tree_is_an_error() {
        let root = tempfile::tempdir().unwrap();
        let marker = root.path().join(ONE_SHOT_PATH.trim_start_matches('/'));
        fs::create_dir_all(marker.parent().unwrap()).unwrap();
        for (tree, missing) in [("carried", LIVE_SITE_TREE), ("fetched", SITE_FETCH_PATH)] {
            fs::write(&marker, format!(r#"{{"site":"a17","tree":"{tree}"}}"#)).unwrap();
            let err = format!("{:#}", site_source(root.path()).unwrap_err());
            assert_eq!(
                err,
                format!(
                    "this is a one-shot install of site a17 ({ONE_SHOT_PATH}) but {missing} is missing on the live system: installed without it the host would wait for a configuration device forever; check the ISO (ibi inspect) and build it again"
                )
            );
        }
        // With its tree, it is the tree.
        let root = live_root();
        let marker = root.path().join(ONE_SHOT_PATH.trim_start_matches('/'));
        fs::write(&marker, r#"{"site":"a17","tree":"carried"}"#).unwrap();
        site_tree_source(root.path());
    }

    #[test]
    fn writes_the_tree_and_a_rerun_changes_nothing() {
        let root = live_root();
        let src = site_tree_source(root.path());
        let stateroot = tempfile::tempdir().unwrap();
        write_site_config(&src, stateroot.path()).unwrap();
        let target = stateroot.path().join(STATEROOT_TARGET);
        assert_same(&src, &target);
        assert_eq!(names(&stateroot.path().join("var/opt")), ["openshift"]);

        let inode = fs::metadata(&target).unwrap().ino();
        write_site_config(&src, stateroot.path()).unwrap();
        assert_eq!(fs::metadata(&target).unwrap().ino(), inode, "not rewritten");
    }

    /// A run killed mid-write leaves `openshift.tmp-*` holding part of the tree and no target; the
    /// next run removes it and writes the whole tree.
    #[test]
    fn resumes_after_a_kill_mid_write() {
        let root = live_root();
        let src = site_tree_source(root.path());
        let stateroot = tempfile::tempdir().unwrap();
        let opt = stateroot.path().join("var/opt");
        let partial = opt.join("openshift.tmp-killed/cluster-configuration");
        fs::create_dir_all(&partial).unwrap();
        fs::write(partial.join("manifest.json"), &MANIFEST[..10]).unwrap();
        assert!(!opt.join("openshift/cluster-configuration").exists());

        write_site_config(&src, stateroot.path()).unwrap();
        assert_eq!(names(&opt), ["openshift"], "the leftover is gone");
        assert_same(&src, &opt.join("openshift"));
    }

    /// What the seed's `/var` brought (or a stale tree) is replaced by the site's, not merged.
    #[test]
    fn replaces_another_tree() {
        let root = live_root();
        let src = site_tree_source(root.path());
        let stateroot = tempfile::tempdir().unwrap();
        let target = stateroot.path().join(STATEROOT_TARGET);
        fs::create_dir_all(target.join("cluster-configuration")).unwrap();
        fs::write(target.join("cluster-configuration/manifest.json"), b"{}").unwrap();
        fs::write(target.join("stray"), b"x").unwrap();
        write_site_config(&src, stateroot.path()).unwrap();
        assert_same(&src, &target);
    }

    /// An incomplete tree on the live system (no `manifests/`) is refused before anything lands.
    #[test]
    fn refuses_an_incomplete_tree_and_writes_nothing() {
        let root = live_root();
        let src = site_tree_source(root.path());
        fs::remove_dir(src.join("cluster-configuration/manifests")).unwrap();
        let stateroot = tempfile::tempdir().unwrap();
        let err = write_site_config(&src, stateroot.path()).unwrap_err();
        assert!(
            format!("{err:#}").contains("manifests/ is missing"),
            "{err:#}"
        );
        assert_eq!(
            names(&stateroot.path().join("var/opt")),
            Vec::<String>::new()
        );
    }

    /// A one-request HTTP server on 127.0.0.1 standing in for `ibi serve`'s fetch route: answers
    /// `status` and `body` to a request carrying `Bearer TOKEN`, 403 to any other; returns its URL.
    fn one_answer(status: u16, body: Vec<u8>) -> (String, std::thread::JoinHandle<String>) {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut head = String::new();
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let authorized = head.contains(&format!("authorization: Bearer {TOKEN}"))
                || head.contains(&format!("Authorization: Bearer {TOKEN}"));
            let (status, body) = if authorized {
                (status, body)
            } else {
                (403, Vec::new())
            };
            let mut out = stream;
            write!(
                out,
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            )
            .unwrap();
            out.write_all(&body).unwrap();
            head
        });
        (url, handle)
    }

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    /// A live root with the fetch settings for `iso` and report settings naming `url`.
    fn fetching_root(iso: &[u8], url: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let tmp = root.path().join("var/tmp");
        fs::create_dir_all(&tmp).unwrap();
        let fetch = tmp.join("ibi-site-fetch.json");
        let want = SiteFetch {
            size: iso.len() as u64,
            sha256: hex(&openssl::sha::sha256(iso)),
        };
        fs::write(&fetch, serde_json::to_vec(&want).unwrap()).unwrap();
        let report = tmp.join("ibi-report.json");
        let settings = ReportConfig {
            url: url.to_string(),
            token: util::secret::Secret::new(TOKEN),
            ca_pem: None,
            attempts: 1,
            delay_seconds: 0,
        };
        fs::write(&report, serde_json::to_vec(&settings).unwrap()).unwrap();
        (root, fetch, report)
    }

    fn config_iso() -> Vec<u8> {
        iso9660::test_image(
            "cluster-config",
            &["cluster-configuration/manifests"],
            &[
                ("cluster-configuration/manifest.json", MANIFEST, 0o600),
                (
                    "extra-manifests/ibi-reconfiguration.yaml",
                    b"kind: ConfigMap\n",
                    0o600,
                ),
            ],
        )
    }

    #[test]
    fn a_fetched_iso_is_checked_kept_and_its_tree_written_and_a_rerun_fetches_nothing() {
        let iso = config_iso();
        let (url, server) = one_answer(200, iso.clone());
        let (root, fetch, report) = fetching_root(&iso, &url);
        assert_eq!(
            site_source(root.path()).unwrap(),
            Some(SiteSource::Fetch(fetch.clone()))
        );
        let stateroot = tempfile::tempdir().unwrap();
        fetch_site_config(root.path(), &fetch, &report, stateroot.path()).unwrap();
        let head = server.join().unwrap();
        assert!(
            head.starts_with("GET /site-configuration HTTP/1.1"),
            "{head}"
        );
        let target = stateroot.path().join(STATEROOT_TARGET);
        assert_eq!(
            fs::read(target.join("cluster-configuration/manifest.json")).unwrap(),
            MANIFEST
        );
        assert!(target.join("cluster-configuration/manifests").is_dir());
        let kept = root.path().join(FETCHED_ISO);
        assert_eq!(fs::read(&kept).unwrap(), iso);
        assert_eq!(fs::metadata(&kept).unwrap().mode() & 0o777, 0o600);
        // Resumed with no server at all: the kept ISO is used, the tree written again whole.
        fs::remove_dir_all(&target).unwrap();
        fetch_site_config(root.path(), &fetch, &report, stateroot.path()).unwrap();
        assert!(
            target
                .join("extra-manifests/ibi-reconfiguration.yaml")
                .is_file()
        );
    }

    #[test]
    fn another_iso_or_a_refusal_writes_nothing() {
        let iso = config_iso();
        let mut other = iso.clone();
        let last = other.len() - 1;
        other[last] ^= 1;
        let (url, server) = one_answer(200, other);
        let (root, fetch, report) = fetching_root(&iso, &url);
        let stateroot = tempfile::tempdir().unwrap();
        let err = fetch_site_config(root.path(), &fetch, &report, stateroot.path()).unwrap_err();
        server.join().unwrap();
        assert!(
            format!("{err:#}").contains("not the one the installation ISO names"),
            "{err:#}"
        );
        assert!(!stateroot.path().join("var").exists(), "nothing written");
        assert!(!root.path().join(FETCHED_ISO).exists());

        let (url, server) = one_answer(200, iso.clone());
        let (root, fetch, report) = fetching_root(&iso, &url);
        // Another host's token: the server refuses it.
        let mut settings: ReportConfig =
            serde_json::from_slice(&fs::read(&report).unwrap()).unwrap();
        settings.token = util::secret::Secret::new("f".repeat(32));
        fs::write(&report, serde_json::to_vec(&settings).unwrap()).unwrap();
        let err = fetch_site_config(root.path(), &fetch, &report, stateroot.path()).unwrap_err();
        server.join().unwrap();
        let text = format!("{err:#}");
        assert!(text.contains("refused with HTTP 403"), "{text}");
        assert!(
            !text.contains(&"f".repeat(32)),
            "the token is not shown: {text}"
        );
        assert!(!stateroot.path().join("var").exists(), "nothing written");
    }
}
