//! `serve`: translate the options, prepare the server, print the image map, serve until stopped.

use std::io::Write;

use anyhow::{Context, Result};

use crate::cli::{ServeOpts, ServerOpts};
use crate::deliver::serve::{self, ServeOptions, TlsChoice, catalog};

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
    let opts = ServeOptions {
        dir: o.dir.dir.clone(),
        listen: o.server.listen,
        tls: tls_choice(&o.server),
        public_url: o.server.public_url.clone(),
        rotate_tokens: o.rotate_tokens,
        selection: None,
    };
    let prepared = serve::prepare(&opts)?;
    let mut out = std::io::stdout().lock();
    write!(out, "{}", catalog::table(&prepared.entries())).context("writing to stdout")?;
    writeln!(
        out,
        "map: {}",
        o.dir.dir.join(catalog::SERVED_FILE).display()
    )
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
