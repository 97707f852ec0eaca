//! The live status page (`--dashboard`): served by the same server, on the same listener and with
//! the same TLS as the images and the host reports, under a token of its own, `/TOKEN/` for the
//! page and `/TOKEN/live.js` for the script that refreshes it. Any other path under any other
//! token is the 404 a guessed image URL gets.
//!
//! The server knows nothing of what the page says: the command hands it a [`PageFn`] (deploy's and
//! serve's both draw `deliver::status`'s page of the fleet under BASE). A page made is kept for
//! [`FRESH_FOR`] and shared by every viewer, so viewers cost one read of BASE/.ibi/ a second at most
//! whatever their number.
//!
//! The token is drawn once per BASE (128 random bits) and kept in [`TOKEN_FILE`] (0600), so a
//! bookmarked page survives a new run; `ibi serve --rotate-tokens` draws a new one. It is never a
//! host's report token nor an image's.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hyper::body::Bytes;

use crate::util::fs::{
    Clobber, SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir, read_input_file, write_atomic,
};
use crate::util::secret::Secret;
use crate::util::token::{is_strong_token, new_token, token_matches};

/// The page's token, under BASE.
pub const TOKEN_FILE: &str = ".ibi/dashboard-token";
/// How long a page made is served to every viewer before it is made again.
pub const FRESH_FOR: Duration = Duration::from_secs(1);
/// The script's path under the token.
const SCRIPT: &str = "live.js";

/// Makes the page: the whole HTML document, or why it could not be made.
pub type PageFn = Arc<dyn Fn() -> Result<String> + Send + Sync>;

/// The page, its script and its token.
pub struct Dashboard {
    token: Secret,
    page: PageFn,
    script: &'static str,
    /// The page's own policy, and no frame around it (which only a header can say).
    policy: String,
    made: Mutex<Option<(Instant, Bytes)>>,
}

/// What a path under the dashboard's token names.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    Page,
    Script,
}

impl Dashboard {
    /// The dashboard of `base`, its token loaded from [`TOKEN_FILE`] or drawn and saved there
    /// (also when `rotate`); `script` is served as `live.js`; `policy` is the page's
    /// Content-Security-Policy, sent as a header too.
    pub fn new(
        base: &Path,
        rotate: bool,
        page: PageFn,
        script: &'static str,
        policy: &str,
    ) -> Result<Dashboard> {
        Ok(Dashboard {
            token: load_or_draw(base, rotate)?,
            page,
            script,
            policy: format!("{policy}; frame-ancestors 'none'"),
            made: Mutex::new(None),
        })
    }

    /// The page's path (`/TOKEN/`): the token is in it, so it is a secret of its own.
    pub fn path(&self) -> Secret {
        Secret::new(format!("/{}/", self.token.expose_str()))
    }

    /// What `path` names, compared in constant time; `None` for anything else.
    pub fn route(&self, path: &str) -> Option<Route> {
        let (token, rest) = path.strip_prefix('/')?.split_once('/')?;
        if !token_matches(token, self.token.expose_str()) {
            return None;
        }
        match rest {
            "" => Some(Route::Page),
            SCRIPT => Some(Route::Script),
            _ => None,
        }
    }

    /// The Content-Security-Policy header of both answers.
    pub fn policy(&self) -> &str {
        &self.policy
    }

    pub fn script(&self) -> Bytes {
        Bytes::from_static(self.script.as_bytes())
    }

    /// The page, made again when the one kept is older than [`FRESH_FOR`]. Blocks: called on a
    /// blocking thread. One viewer makes it while the others wait for it.
    pub fn page(&self) -> Result<Bytes> {
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, page)) = made.as_ref()
            && at.elapsed() < FRESH_FOR
        {
            return Ok(page.clone());
        }
        let page = Bytes::from((self.page)()?);
        *made = Some((Instant::now(), page.clone()));
        Ok(page)
    }
}

fn load_or_draw(base: &Path, rotate: bool) -> Result<Secret> {
    let path = base.join(TOKEN_FILE);
    if !rotate && path.exists() {
        let bytes =
            read_input_file(&path, 1024).with_context(|| format!("reading {}", path.display()))?;
        let kept = String::from_utf8(bytes).unwrap_or_default();
        let kept = kept.trim();
        if is_strong_token(kept) {
            return Ok(Secret::new(kept));
        }
    }
    let token = Secret::new(new_token()?);
    ensure_dir(&base.join(".ibi"), SECRET_DIR_MODE)?;
    let text = format!("{}\n", token.expose_str());
    write_atomic(&path, text.as_bytes(), SECRET_FILE_MODE, Clobber::Replace)
        .with_context(|| format!("saving {}", path.display()))?;
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting(base: &Path) -> (Dashboard, Arc<AtomicUsize>) {
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        let page: PageFn =
            Arc::new(move || Ok(format!("page {}", m.fetch_add(1, Ordering::SeqCst))));
        (Dashboard::new(base, false, page, "js", "p").unwrap(), n)
    }

    #[test]
    fn the_token_is_kept_private_and_reused_until_rotated() {
        let d = tempfile::tempdir().unwrap();
        let (a, _) = counting(d.path());
        let file = d.path().join(TOKEN_FILE);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (b, _) = counting(d.path());
        assert_eq!(a.path().expose_str(), b.path().expose_str());
        let page: PageFn = Arc::new(|| Ok(String::new()));
        let c = Dashboard::new(d.path(), true, page, "", "p").unwrap();
        assert_ne!(a.path().expose_str(), c.path().expose_str());
        // A weak kept token (cut short by hand) is replaced.
        std::fs::write(&file, "abc\n").unwrap();
        let (e, _) = counting(d.path());
        assert_eq!(e.path().expose_str().len(), 34);
    }

    #[test]
    fn only_the_token_with_the_page_or_its_script_routes() {
        let d = tempfile::tempdir().unwrap();
        let (dash, _) = counting(d.path());
        let p = dash.path().expose_str().to_string();
        let token = &p[1..p.len() - 1];
        let mut wrong = token.to_string();
        wrong.replace_range(0..1, if token.starts_with('0') { "1" } else { "0" });
        let cases = [
            (p.clone(), Some(Route::Page)),
            (format!("{p}live.js"), Some(Route::Script)),
            (format!("{p}other"), None),
            (format!("/{token}"), None),
            (format!("/{wrong}/"), None),
            (format!("/{wrong}/live.js"), None),
            (format!("/{}/", &token[1..]), None),
            ("/".to_string(), None),
        ];
        for (path, want) in cases {
            assert_eq!(dash.route(&path), want, "{path}");
        }
    }

    #[test]
    fn viewers_share_a_page_for_a_second() {
        let d = tempfile::tempdir().unwrap();
        let (dash, made) = counting(d.path());
        assert_eq!(dash.page().unwrap(), "page 0");
        assert_eq!(dash.page().unwrap(), "page 0");
        assert_eq!(made.load(Ordering::SeqCst), 1);
        *dash.made.lock().unwrap() = Some((Instant::now() - FRESH_FOR, Bytes::new()));
        assert_eq!(dash.page().unwrap(), "page 1");
    }
}
