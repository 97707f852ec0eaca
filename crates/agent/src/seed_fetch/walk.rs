//! Walking a seed's layers and handing each file to a handler.

use anyhow::{Context, Result, anyhow};

use super::files::{SeedFiles, SeedFilesOutcome};
use super::layer::{FileHandler, Layer, parse_layers};
use super::source::SeedSource;

/// What a walk saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedWalkReport {
    /// The containers-transports reference that was opened.
    pub reference: String,
    /// The image manifest's digest (the platform manifest's when the reference named an index).
    pub digest: String,
    /// Layers walked, in order.
    pub layers: Vec<Layer>,
    /// Every regular file handed to the handler: root-relative path and size, in stream order.
    pub files: Vec<(String, u64)>,
}

/// Streams every layer of the seed at `source` and calls `handler` for each regular file with its
/// root-relative path (`var.tgz`), a reader over its bytes and its size. The handler may read part of
/// a file or none of it. Errors name the reference and, for a handler failure, the file.
///
/// skopeo's digest verdict on a layer comes after its last byte, so what the handler did is provisional
/// until this returns `Ok`: record a restore as done only then.
pub fn walk_seed(source: &SeedSource, handler: &mut FileHandler<'_>) -> Result<SeedWalkReport> {
    let reference = source.transport();
    walk(source, &reference, handler).with_context(|| format!("reading seed image {reference}"))
}

/// [`walk_seed`] into a [`SeedFiles`] dispatcher, then its missing/unexpected check.
pub fn walk_seed_files(
    source: &SeedSource,
    mut files: SeedFiles<'_>,
) -> Result<(SeedWalkReport, SeedFilesOutcome)> {
    let report = walk_seed(source, &mut |path, reader, size| {
        files.handle(path, reader, size)
    })?;
    let outcome = files
        .finish()
        .with_context(|| format!("reading seed image {}", report.reference))?;
    Ok((report, outcome))
}

fn walk(
    source: &SeedSource,
    reference: &str,
    handler: &mut FileHandler<'_>,
) -> Result<SeedWalkReport> {
    let config = source.proxy_config();
    let (client, server) = super::fetcher::channel();
    std::thread::scope(|scope| {
        let thread = scope.spawn(move || server.run(config, reference));
        // Dropping the client (inside `walk_layers`) lets the fetch thread shut skopeo down.
        let walked = walk_layers(client, reference, handler);
        let served = thread
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the seed fetch thread panicked")));
        match (walked, served) {
            (Err(e), served) => {
                if let Err(s) = served {
                    tracing::debug!(target: "ibi::agent::seed_fetch::walk",
                        "after the walk failed, the fetch thread also failed: {s:#}");
                }
                Err(e)
            }
            (Ok(_), Err(e)) => Err(e),
            (Ok(report), Ok(())) => Ok(report),
        }
    })
}

fn walk_layers(
    client: super::fetcher::FetchClient,
    reference: &str,
    handler: &mut FileHandler<'_>,
) -> Result<SeedWalkReport> {
    let manifest = client.manifest()?;
    let layers = parse_layers(&manifest.raw)?;
    tracing::debug!(target: "ibi::agent::seed_fetch::walk",
        "seed {reference}: manifest {}, {} layer(s)",
        manifest.digest,
        layers.len()
    );
    let mut files = Vec::new();
    for (i, l) in layers.iter().enumerate() {
        tracing::debug!(target: "ibi::agent::seed_fetch::walk",
            "seed {reference}: streaming layer {} ({} bytes)",
            l.digest,
            l.size
        );
        let blob = super::layer::ChunkReader::new(client.blob(&l.digest, l.size)?);
        super::layer::walk_layer(blob, l.compression, handler, &mut files)
            .with_context(|| format!("layer {} of {} ({})", i + 1, layers.len(), l.digest))?;
    }
    Ok(SeedWalkReport {
        reference: reference.to_string(),
        digest: manifest.digest,
        layers,
        files,
    })
}
