//! One small file out of an image's layers: the seed's `containers.list` (which names the release
//! payload) and the release payload's CoreOS boot-images manifest. A layer is streamed through gunzip
//! and tar on a thread of its own and the download stops as soon as the file is found, so a
//! gigabyte-sized seed layer is not read to the end for a file near its start.

use std::io::{self, Read};
use std::path::Path;
use std::pin::Pin;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::task::{Context as TaskContext, Poll};

use anyhow::{Context, Result, bail};

use super::layout::{blob_path, layout_manifest};
use super::manifest::Descriptor;
use super::mirrors::pull_endpoints;
use super::remote::{RegistryOptions, build_client, classify, platform_manifest};
use crate::image_ref::ImageReference;

/// Which layers to search first: a seed's root files sit in its first layer, a release payload's
/// manifests in its last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerOrder {
    FirstToLast,
    LastToFirst,
}

/// A file in an image: `outer`, relative to the image root, or with `inner` the member `inner` of the
/// tar (plain or gzip) archive `outer` (a seed's `etc.tgz`), read as a stream without unpacking the archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImagePath<'a> {
    pub outer: &'a str,
    pub inner: Option<&'a str>,
}

impl<'a> From<&'a str> for ImagePath<'a> {
    fn from(outer: &'a str) -> Self {
        ImagePath { outer, inner: None }
    }
}

impl std::fmt::Display for ImagePath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.inner {
            Some(inner) => write!(f, "{inner} in {}", self.outer),
            None => f.write_str(self.outer),
        }
    }
}

/// Chunks in flight between the download and the tar reader.
const CHANNEL_DEPTH: usize = 8;

/// `path` (relative to the image root) from the registry image `reference`, or `None` when no layer
/// has it. At most `limit` bytes are read.
pub fn read_registry_file(
    reference: &ImageReference,
    architecture: &str,
    opts: &RegistryOptions,
    path: ImagePath<'_>,
    order: LayerOrder,
    limit: u64,
) -> Result<Option<Vec<u8>>> {
    let endpoints = pull_endpoints(reference, &opts.image_digest_sources)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("reading {reference}"))?;
    let client = build_client(opts).map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the I/O runtime")?;
    let mut last = None;
    for endpoint in &endpoints {
        let pm = runtime.block_on(platform_manifest(
            &client,
            reference,
            endpoint,
            architecture,
            opts,
        ));
        let pm = match pm {
            Ok(pm) => pm,
            Err(e) => {
                last = Some(anyhow::Error::new(e));
                continue;
            }
        };
        for layer in ordered(&pm.manifest.layers, order) {
            let found = search_stream(path, limit, |tx| {
                let out = ChannelWriter(tx);
                let pulled =
                    runtime.block_on(client.pull_blob(&pm.top, layer.digest.as_str(), out));
                pulled.map_err(|e| classify(e, reference, &endpoint.registry))
            })
            .with_context(|| format!("reading layer {} of {reference}", layer.digest))?;
            if found.is_some() {
                return Ok(found);
            }
        }
        return Ok(None);
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("no source to read {reference} from")))
}

/// `path` from the image `tag` of the OCI layout `dir`, as [`read_registry_file`].
pub fn read_layout_file(
    dir: &Path,
    tag: Option<&str>,
    architecture: &str,
    path: ImagePath<'_>,
    order: LayerOrder,
    limit: u64,
) -> Result<Option<Vec<u8>>> {
    let (manifest, _, _) = layout_manifest(dir, tag, architecture)?;
    for layer in ordered(&manifest.layers, order) {
        let blob = blob_path(dir, &layer.digest)?;
        let file =
            std::fs::File::open(&blob).with_context(|| format!("opening {}", blob.display()))?;
        let found = find_in_layer(file, path, limit)
            .with_context(|| format!("reading layer {}", blob.display()))?;
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}

fn ordered(layers: &[Descriptor], order: LayerOrder) -> Vec<&Descriptor> {
    let mut v: Vec<&Descriptor> = layers.iter().collect();
    if order == LayerOrder::LastToFirst {
        v.reverse();
    }
    v
}

/// Runs `download` (which writes the layer into the sender) beside a thread that searches what it
/// receives. A download cut short because the file was found is not an error.
fn search_stream<E: std::error::Error + Send + Sync + 'static>(
    path: ImagePath<'_>,
    limit: u64,
    download: impl FnOnce(SyncSender<Vec<u8>>) -> Result<(), E>,
) -> Result<Option<Vec<u8>>> {
    let (tx, rx) = sync_channel::<Vec<u8>>(CHANNEL_DEPTH);
    std::thread::scope(|scope| {
        let searcher = scope.spawn(move || find_in_layer(ChannelReader::new(rx), path, limit));
        let pulled = download(tx);
        let found = searcher
            .join()
            .map_err(|_| anyhow::anyhow!("the layer reader panicked"))??;
        match (found, pulled) {
            (Some(bytes), _) => Ok(Some(bytes)),
            (None, Ok(())) => Ok(None),
            (None, Err(e)) => Err(anyhow::Error::new(e)),
        }
    })
}

/// Searches a layer (gzip-compressed or plain tar) for `path`; `./`-prefixed names match too.
fn find_in_layer(r: impl Read, path: ImagePath<'_>, limit: u64) -> Result<Option<Vec<u8>>> {
    let mut r = io::BufReader::new(r);
    let head = io::BufRead::fill_buf(&mut r).context("reading the layer")?;
    let gzip = head.starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn Read> = if gzip {
        Box::new(flate2::read::GzDecoder::new(r))
    } else {
        Box::new(r)
    };
    let want = path.outer.trim_start_matches('/');
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries().context("reading the layer's tar")? {
        let entry = entry.context("reading the layer's tar")?;
        let name = entry.path().context("reading a tar entry's name")?;
        let name = name.to_string_lossy();
        if name.trim_start_matches("./").trim_start_matches('/') != want {
            continue;
        }
        if let Some(inner) = path.inner {
            return find_in_layer(entry, inner.into(), limit)
                .with_context(|| format!("reading {}", path.outer));
        }
        if entry.header().size().unwrap_or(0) > limit {
            bail!("{path} is over {limit} bytes");
        }
        let mut out = Vec::new();
        entry
            .take(limit)
            .read_to_end(&mut out)
            .with_context(|| format!("reading {path}"))?;
        return Ok(Some(out));
    }
    Ok(None)
}

/// The download's end: each write goes to the searcher; once it hung up (found, or failed), writes fail
/// and the download stops.
struct ChannelWriter(SyncSender<Vec<u8>>);

impl tokio::io::AsyncWrite for ChannelWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        // Blocking is fine: this runtime runs this one download, and the searcher drains the channel.
        match self.0.send(buf.to_vec()) {
            Ok(()) => Poll::Ready(Ok(buf.len())),
            Err(_) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the layer reader stopped",
            ))),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The searcher's end: a `Read` over the received chunks; the end of the channel is the end of the layer.
struct ChannelReader {
    rx: Receiver<Vec<u8>>,
    chunk: Vec<u8>,
    pos: usize,
}

impl ChannelReader {
    fn new(rx: Receiver<Vec<u8>>) -> ChannelReader {
        ChannelReader {
            rx,
            chunk: Vec::new(),
            pos: 0,
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.chunk.len() {
            match self.rx.recv() {
                Ok(c) => {
                    self.chunk = c;
                    self.pos = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.chunk.len() - self.pos);
        buf[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(files: &[(&str, &[u8])], gzip: bool) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, name, *data).unwrap();
        }
        let tar = b.into_inner().unwrap();
        if !gzip {
            return tar;
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        io::Write::write_all(&mut gz, &tar).unwrap();
        gz.finish().unwrap()
    }

    #[test]
    fn finds_a_file_in_plain_and_gzip_layers_and_stops_the_download() {
        let files: &[(&str, &[u8])] = &[("./a", b"x"), ("containers.list", b"q.io/r@sha256:1")];
        for gzip in [false, true] {
            let l = layer(files, gzip);
            let got = find_in_layer(&l[..], "/containers.list".into(), 100).unwrap();
            assert_eq!(got.as_deref(), Some(&b"q.io/r@sha256:1"[..]));
            assert_eq!(find_in_layer(&l[..], "b".into(), 100).unwrap(), None);
            assert!(find_in_layer(&l[..], "containers.list".into(), 3).is_err());
        }
        let l = layer(files, true);
        let got = search_stream("containers.list".into(), 100, |tx| {
            for c in l.chunks(7) {
                if tx.send(c.to_vec()).is_err() {
                    return Err(io::Error::other("stopped early"));
                }
            }
            Ok::<(), io::Error>(())
        })
        .unwrap();
        assert_eq!(got.as_deref(), Some(&b"q.io/r@sha256:1"[..]));
    }

    #[test]
    fn finds_a_member_of_an_archive_inside_the_layer() {
        let unit = b"[Unit]\nAfter=coreos-update-ca-trust.service\n";
        let etc = layer(
            &[("etc/motd", b"hi"), ("etc/systemd/system/x.service", unit)],
            true,
        );
        let l = layer(&[("containers.list", b"q"), ("etc.tgz", &etc)], true);
        let path = ImagePath {
            outer: "etc.tgz",
            inner: Some("etc/systemd/system/x.service"),
        };
        let got = find_in_layer(&l[..], path, 100).unwrap();
        assert_eq!(got.as_deref(), Some(&unit[..]));
        let missing = ImagePath {
            outer: "etc.tgz",
            inner: Some("etc/none"),
        };
        assert_eq!(find_in_layer(&l[..], missing, 100).unwrap(), None);
        assert_eq!(path.to_string(), "etc/systemd/system/x.service in etc.tgz");
    }
}
