//! `status`: the fleet's table (or JSON) from the reports and deploy's record under BASE/.ibi/.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use crate::cli::StatusOpts;
use crate::deliver::status::{fleet_status, render, render_json};

pub fn run(o: &StatusOpts) -> Result<()> {
    let rows = fleet_status(&o.dir, o.site.as_deref())?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let text = if o.json {
        render_json(&rows, now, o.logs)?
    } else {
        render(&rows, now, o.logs)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")
}
