//! `status`: the fleet's table (or JSON) from the reports, deploy's records and deploy's lock under
//! BASE/.ibi/. Everything that can be shown is printed first; damaged records or store lines then
//! make the command fail.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

use crate::cli::StatusOpts;
use crate::deliver::status::{fleet_status, render, render_json};

pub fn run(o: &StatusOpts) -> Result<()> {
    let fleet = fleet_status(&o.dir, o.site.as_deref())?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let text = if o.json {
        render_json(&fleet, now, o.logs)?
    } else {
        render(&fleet, now, o.logs)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")?;
    match fleet.problems() {
        0 => Ok(()),
        n => bail!(
            "{n} thing(s) under {} could not be read (named above); everything else is shown",
            o.dir.join(".ibi").display()
        ),
    }
}
