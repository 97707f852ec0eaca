//! The live page for `--dashboard`: what `ibi deploy` and `ibi serve` hand their server, which makes
//! the page again from BASE/.ibi/ (the same [`fleet_status`] and page as `ibi status --html`) when
//! a viewer asks and the last one is more than a second old.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use super::fleet::fleet_status;
use super::html::{LIVE_CSP, LIVE_SCRIPT, render_live};
use crate::deliver::serve::DashboardOptions;
use crate::deliver::serve::dashboard::TOKEN_FILE;

/// The page of the fleet under `base`, with deploy's pre-flight result when one ran.
pub fn dashboard(base: &Path, preflight: Option<String>) -> DashboardOptions {
    let base: PathBuf = base.to_path_buf();
    DashboardOptions {
        page: Arc::new(move || {
            let fleet = fleet_status(&base, None)?;
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            Ok(render_live(
                &fleet,
                &base.display().to_string(),
                now,
                preflight.as_deref(),
            ))
        }),
        script: LIVE_SCRIPT,
        policy: LIVE_CSP,
    }
}

/// The one line that gives the page's URL, with what it shows and where its token is kept.
pub fn dashboard_line(url: &str, base: &Path) -> String {
    format!(
        "status page: {url} (anyone with this URL sees the fleet's host names, errors and journal \
         lines, no secret; its token is kept in {})",
        base.join(TOKEN_FILE).display()
    )
}
