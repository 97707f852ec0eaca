//! `serve`: check DIR and take its lock, translate the options, prepare the server, print the
//! image map, serve until stopped.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::cli::{ServeOpts, ServerOpts};
use crate::deliver::serve::{self, LOCK_FILE, ServeOptions, TlsChoice, catalog};
use crate::deliver::status;
use crate::util::lock::{self, Holder};

/// The TLS the server options ask for (clap already refused a certificate without its key and
/// either beside `--plain-http`); shared with `deploy`, which serves the same way.
pub(super) fn tls_choice(o: &ServerOpts) -> TlsChoice {
    match (&o.tls_cert, &o.tls_key, o.plain_http) {
        (Some(cert), Some(key), _) => TlsChoice::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        (_, _, true) => TlsChoice::Plain,
        _ => TlsChoice::SelfSigned,
    }
}

pub fn run(o: &ServeOpts) -> Result<()> {
    let dir = &o.dir.dir;
    existing_dir(dir)?;
    // Before anything is written under DIR (TLS key, tokens, served.json): a second server on the
    // same DIR would rewrite served.json and leave it naming a server that is gone once it stops.
    let _lock = lock::acquire(
        &dir.join(LOCK_FILE),
        Holder::me("serve", Some(o.server.listen.to_string())),
        &dir.display().to_string(),
    )?;
    let opts = ServeOptions {
        dir: dir.clone(),
        listen: o.server.listen,
        tls: tls_choice(&o.server),
        public_url: o.server.public_url.clone(),
        rotate_tokens: o.rotate_tokens,
        one_shot: o.one_shot,
        selection: None,
        dashboard: o.server.dashboard.then(|| status::dashboard(dir, None)),
    };
    let prepared = serve::prepare(&opts)?.per_address(usize::from(o.max_per_address));
    if let Some(url) = &prepared.dashboard_url {
        // Printed once, as asked for: the URL is the page's key.
        eprintln!("{}", status::dashboard_line(url.expose_str(), dir));
    }
    let mut out = std::io::stdout().lock();
    write!(out, "{}", catalog::table(&prepared.entries())).context("writing to stdout")?;
    writeln!(out, "map: {}", dir.join(catalog::SERVED_FILE).display())
        .context("writing to stdout")?;
    if let Some((cert, made)) = &prepared.certificate {
        let state = if *made { "new" } else { "kept" };
        writeln!(
            out,
            "TLS certificate ({state}): {} (for BMCs: ibi boot --iso-ca)",
            cert.display()
        )
        .context("writing to stdout")?;
    }
    writeln!(out, "listening on {}", prepared.address).context("writing to stdout")?;
    out.flush().context("writing to stdout")?;
    drop(out);
    prepared.serve()
}

/// `serve` only serves what was built in DIR: a mistyped DIR must not get a `.ibi/` with keys.
fn existing_dir(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => bail!("--dir {}: not a directory", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "--dir {}: the directory does not exist (ibi serve serves the images ibi built there)",
            dir.display()
        ),
        Err(e) => Err(e).with_context(|| format!("--dir {}", dir.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_per_address_default_is_the_servers() {
        let cli = crate::cli::Cli::try_parse_from(["ibi", "serve"]).unwrap();
        let crate::cli::Command::Serve(o) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(usize::from(o.max_per_address), serve::PER_ADDRESS_DEFAULT);
    }

    #[test]
    fn a_missing_or_non_directory_dir_is_refused_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("factroy");
        let err = existing_dir(&missing).unwrap_err().to_string();
        assert_eq!(
            err,
            format!(
                "--dir {}: the directory does not exist (ibi serve serves the images ibi built there)",
                missing.display()
            )
        );
        let file = d.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let err = existing_dir(&file).unwrap_err().to_string();
        assert!(err.ends_with(": not a directory"), "{err}");
        existing_dir(d.path()).unwrap();
        assert!(!missing.exists());
    }
}
