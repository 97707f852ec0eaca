//! `status`: the fleet's table (or JSON, or an HTML page written to a file) from the reports,
//! deploy's records and deploy's lock under BASE/.ibi/. Everything that can be shown is printed (or
//! written) first; damaged records or store lines then make the command fail.

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

use crate::cli::StatusOpts;
use crate::deliver::status::{HTML_FILE_MODE, fleet_status, render, render_html, render_json};
use crate::util::fs::{Clobber, write_atomic};

pub fn run(o: &StatusOpts) -> Result<()> {
    let fleet = fleet_status(&o.dir, o.site.as_deref())?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let text = match &o.html {
        Some(file) => {
            let page = render_html(&fleet, &o.dir.display().to_string(), now);
            write_atomic(file, page.as_bytes(), HTML_FILE_MODE, Clobber::Replace)?;
            // stdout holds the paths written, as every command that writes a file prints it.
            format!("{}\n", file.display())
        }
        None if o.json => render_json(&fleet, now, o.logs)?,
        None => render(&fleet, now, o.logs),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")?;
    match fleet.problems() {
        0 => Ok(()),
        n => bail!(
            "{n} thing(s) under {} could not be read (named {}); everything else is shown",
            o.dir.join(".ibi").display(),
            o.html
                .as_ref()
                .map_or("above".to_string(), |f| format!("in {}", f.display()))
        ),
    }
}
