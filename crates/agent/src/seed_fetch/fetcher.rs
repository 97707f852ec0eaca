//! The async half of the seed walk: a thread running a current-thread tokio runtime that drives
//! `skopeo experimental-image-proxy`, opens the image, hands over its manifest, then streams each blob the
//! synchronous half asks for as bounded chunks.
//!
//! Memory stays bounded: at most [`CHANNEL_CHUNKS`] chunks of [`CHUNK_SIZE`] bytes wait in the channel,
//! and the pump waits for the reader. skopeo checks each blob's digest and size; the verdict comes with
//! `FinishPipe` after the last byte, so the reader sees [`Chunk::End`] only for a verified blob.

use std::str::FromStr;
use std::sync::mpsc as std_mpsc;

use anyhow::{Context, Result, anyhow};
use containers_image_proxy::oci_spec::image::Digest;
use containers_image_proxy::{ImageProxy, ImageProxyConfig, OpenedImage};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

/// Bytes per chunk handed to the reader.
pub(crate) const CHUNK_SIZE: usize = 256 << 10;
/// Chunks in flight between the threads: with [`CHUNK_SIZE`], at most 1 MiB of a layer in memory.
pub(crate) const CHANNEL_CHUNKS: usize = 4;

/// One message of a blob stream.
#[derive(Debug)]
pub(crate) enum Chunk {
    Data(Vec<u8>),
    /// The whole blob was sent and skopeo verified it.
    End,
    /// The blob could not be fetched or failed verification.
    Failed(String),
}

/// The image's manifest as skopeo returns it (Docker v2s2 converted to OCI) and its digest.
#[derive(Debug)]
pub(crate) struct FetchedManifest {
    pub(crate) digest: String,
    pub(crate) raw: Vec<u8>,
}

/// A request for one blob, answered on `chunks`.
#[derive(Debug)]
pub(crate) struct BlobRequest {
    pub(crate) digest: String,
    pub(crate) size: u64,
    pub(crate) chunks: mpsc::Sender<Chunk>,
}

/// The synchronous side's handle: the manifest arrives once, then blobs are requested in turn.
/// Dropping it lets the fetch thread shut the proxy down.
pub(crate) struct FetchClient {
    manifest: std_mpsc::Receiver<Result<FetchedManifest>>,
    requests: mpsc::UnboundedSender<BlobRequest>,
}

/// The fetch thread's end of the channels.
pub(crate) struct FetchServer {
    manifest: std_mpsc::SyncSender<Result<FetchedManifest>>,
    requests: mpsc::UnboundedReceiver<BlobRequest>,
}

/// A connected client and server.
pub(crate) fn channel() -> (FetchClient, FetchServer) {
    let (manifest_tx, manifest_rx) = std_mpsc::sync_channel(1);
    let (request_tx, request_rx) = mpsc::unbounded_channel();
    let client = FetchClient {
        manifest: manifest_rx,
        requests: request_tx,
    };
    let server = FetchServer {
        manifest: manifest_tx,
        requests: request_rx,
    };
    (client, server)
}

impl FetchClient {
    /// Waits for the image's manifest (or the reason there is none).
    pub(crate) fn manifest(&self) -> Result<FetchedManifest> {
        self.manifest
            .recv()
            .map_err(|_| anyhow!("the seed fetch thread stopped before reading the manifest"))?
    }

    /// Asks for the blob `digest` of `size` bytes; its chunks arrive on the returned receiver.
    pub(crate) fn blob(&self, digest: &str, size: u64) -> Result<mpsc::Receiver<Chunk>> {
        let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
        let request = BlobRequest {
            digest: digest.to_string(),
            size,
            chunks: tx,
        };
        self.requests
            .send(request)
            .map_err(|_| anyhow!("the seed fetch thread stopped before layer {digest}"))?;
        Ok(rx)
    }
}

impl FetchServer {
    /// Runs the proxy for `image` (a containers-transports reference) until the client is dropped.
    /// Failures before the manifest go to the client; the result is the proxy's shutdown.
    pub(crate) fn run(self, config: ImageProxyConfig, image: &str) -> Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the I/O runtime for the seed fetch")?;
        runtime.block_on(self.serve(config, image))
    }

    async fn serve(mut self, config: ImageProxyConfig, image: &str) -> Result<()> {
        let opened = open(config, image).await;
        let (proxy, img, manifest) = match opened {
            Ok(parts) => parts,
            Err(e) => {
                // The client reports it; nothing is left to shut down.
                let _ = self.manifest.send(Err(e));
                return Ok(());
            }
        };
        if self.manifest.send(Ok(manifest)).is_ok() {
            while let Some(request) = self.requests.recv().await {
                serve_blob(&proxy, &img, request).await;
            }
        }
        proxy
            .close_image(&img)
            .await
            .context("closing the seed image")?;
        proxy
            .finalize()
            .await
            .context("stopping skopeo experimental-image-proxy")
    }
}

/// Starts skopeo, opens `image` and fetches its manifest.
async fn open(
    config: ImageProxyConfig,
    image: &str,
) -> Result<(ImageProxy, OpenedImage, FetchedManifest)> {
    let proxy = ImageProxy::new_with_config(config)
        .await
        .context("starting skopeo experimental-image-proxy (is skopeo installed?)")?;
    let img = proxy.open_image(image).await.context("opening the image")?;
    let (digest, raw) = proxy
        .fetch_manifest_raw_oci(&img)
        .await
        .context("fetching the manifest")?;
    Ok((proxy, img, FetchedManifest { digest, raw }))
}

/// Streams one blob; any failure reaches the reader as [`Chunk::Failed`].
async fn serve_blob(proxy: &ImageProxy, img: &OpenedImage, request: BlobRequest) {
    let chunks = request.chunks.clone();
    let last = match stream_blob(proxy, img, request).await {
        Ok(Pumped::Complete) => Chunk::End,
        // The reader went away (it failed or had enough); nobody is listening.
        Ok(Pumped::ReaderGone) => return,
        Err(e) => Chunk::Failed(format!("{e:#}")),
    };
    let _ = chunks.send(last).await;
}

/// How a pump ended without an I/O error.
#[derive(Debug, PartialEq, Eq)]
enum Pumped {
    Complete,
    ReaderGone,
}

async fn stream_blob(
    proxy: &ImageProxy,
    img: &OpenedImage,
    request: BlobRequest,
) -> Result<Pumped> {
    let digest = Digest::from_str(&request.digest)
        .with_context(|| format!("invalid layer digest {:?}", request.digest))?;
    let (reader, driver) = proxy
        .get_blob(img, &digest, request.size)
        .await
        .with_context(|| format!("fetching layer {digest}"))?;
    // Both futures must be polled together: skopeo finishes the pipe only once it has all been read.
    let (pumped, finished) = tokio::join!(pump(reader, request.chunks), driver);
    let pumped = pumped.with_context(|| format!("reading layer {digest}"))?;
    if pumped == Pumped::ReaderGone {
        return Ok(pumped);
    }
    finished.with_context(|| {
        format!("fetching layer {digest} (skopeo verifies its digest and size)")
    })?;
    Ok(pumped)
}

/// Copies `reader` into `chunks` until EOF or until the receiver is dropped. Taking `reader` by value
/// closes the pipe when the pump stops, so skopeo stops writing instead of blocking the driver.
async fn pump(mut reader: impl AsyncRead + Unpin, chunks: mpsc::Sender<Chunk>) -> Result<Pumped> {
    loop {
        let mut buf = Vec::with_capacity(CHUNK_SIZE);
        let n = (&mut reader)
            .take(CHUNK_SIZE as u64)
            .read_to_end(&mut buf)
            .await?;
        if n == 0 {
            return Ok(Pumped::Complete);
        }
        if chunks.send(Chunk::Data(buf)).await.is_err() {
            return Ok(Pumped::ReaderGone);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
    }

    #[test]
    fn pump_sends_bounded_chunks() {
        let data: Vec<u8> = (0..(CHUNK_SIZE * 2 + 5)).map(|i| i as u8).collect();
        let (tx, mut rx) = mpsc::channel(16);
        let pumped = runtime().block_on(pump(&data[..], tx)).expect("pump");
        assert_eq!(pumped, Pumped::Complete);
        let mut sizes = Vec::new();
        let mut joined = Vec::new();
        while let Ok(Chunk::Data(d)) = rx.try_recv() {
            sizes.push(d.len());
            joined.extend(d);
        }
        assert_eq!(sizes, [CHUNK_SIZE, CHUNK_SIZE, 5]);
        assert_eq!(joined, data);
    }

    #[test]
    fn pump_stops_when_reader_is_gone() {
        let data = vec![0u8; CHUNK_SIZE * 3];
        let (tx, rx) = mpsc::channel(1);
        drop(rx);
        let pumped = runtime().block_on(pump(&data[..], tx)).expect("pump");
        assert_eq!(pumped, Pumped::ReaderGone);
    }
}
