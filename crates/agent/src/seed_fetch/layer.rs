//! The synchronous half of the seed walk: the image manifest's layer list, a `Read` over a blob's chunks,
//! and the tar walk that hands each regular file's bytes to a handler while the blob is still streaming.
//!
//! Layers are walked in manifest order and never merged: a path present in two layers is seen twice, the
//! later one last, and whiteouts (`.wh.*`) are skipped. A seed has a single layer (lifecycle-agent
//! reference §1.1), so this only matters for a seed someone rebuilt by hand.
//!
//! The layer's gunzip and tar walk run on a thread of their own ([`walk_layer`]), which hands each
//! file's bytes to the calling thread in bounded blocks: the handler then reads an owned, `Send`
//! stream and can pass it on to a thread of its own (the restore inflates `ostree.tgz` on one), so
//! the layer's and the archive's inflating and the file writes all overlap.

use std::io::{self, Read};
use std::path::{Component, Path};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use anyhow::{Context, Result, bail};
use flate2::read::MultiGzDecoder;
use serde::Deserialize;
use tokio::sync::mpsc;

use super::fetcher::Chunk;
use util::read_ahead::{Cursor, fill};

/// Media types of image indexes (OCI, Docker manifest list).
const INDEX_MEDIA_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];
/// Prefix of whiteout entries in a layer (OCI image spec, layer changesets).
const WHITEOUT_PREFIX: &str = ".wh.";

/// The handler a walk calls for each regular file: root-relative path, its bytes, its size.
pub(crate) type FileHandler<'a> = dyn FnMut(&str, &mut (dyn Read + Send), u64) -> Result<()> + 'a;

/// Bytes per block of a file handed from the layer thread to the handler, and blocks in flight.
const FILE_BLOCK: usize = 256 << 10;
const FILE_BLOCKS: usize = 4;

/// How a layer blob is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Compression {
    Gzip,
    None,
}

/// A layer to stream: its descriptor and how to unpack it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub(crate) digest: String,
    pub(crate) size: u64,
    pub(crate) compression: Compression,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawManifest {
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Option<serde_json::Value>,
    #[serde(default)]
    layers: Vec<RawDescriptor>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDescriptor {
    #[serde(default)]
    media_type: String,
    digest: String,
    size: u64,
}

/// The layers of an image manifest (OCI or Docker v2s2). An image index is refused: the proxy resolves
/// one to the platform image, so seeing one means the reference could not be resolved.
pub(crate) fn parse_layers(raw: &[u8]) -> Result<Vec<Layer>> {
    let manifest: RawManifest =
        serde_json::from_slice(raw).context("the image manifest is not valid JSON")?;
    let media_type = manifest.media_type.as_deref().unwrap_or_default();
    if manifest.manifests.is_some() || INDEX_MEDIA_TYPES.contains(&media_type) {
        bail!(
            "the reference names an image index, not an image; pin the seed by its platform manifest digest"
        );
    }
    if manifest.layers.is_empty() {
        bail!("the image has no layers");
    }
    manifest
        .layers
        .into_iter()
        .map(|d| {
            let compression = layer_compression(&d.media_type)?;
            Ok(Layer {
                digest: d.digest,
                size: d.size,
                compression,
            })
        })
        .collect()
}

/// The compression a layer media type says, for the types podman and skopeo write.
pub(crate) fn layer_compression(media_type: &str) -> Result<Compression> {
    match media_type {
        "application/vnd.oci.image.layer.v1.tar+gzip"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
        | "application/vnd.docker.image.rootfs.diff.tar.gzip"
        | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => Ok(Compression::Gzip),
        "application/vnd.oci.image.layer.v1.tar"
        | "application/vnd.oci.image.layer.nondistributable.v1.tar" => Ok(Compression::None),
        other if other.ends_with("+zstd") => bail!(
            "layer media type {other} is zstd-compressed; ibi reads gzip and plain tar layers (push the seed with gzip compression)"
        ),
        other => bail!("unsupported layer media type {other:?}"),
    }
}

/// A `Read` over a blob's chunks. It reports end of file only after [`Chunk::End`], so a blob that was
/// cut short or failed verification is an error, never a silently short stream.
pub(crate) struct ChunkReader {
    chunks: mpsc::Receiver<Chunk>,
    current: Vec<u8>,
    pos: usize,
    ended: bool,
}

impl ChunkReader {
    pub(crate) fn new(chunks: mpsc::Receiver<Chunk>) -> ChunkReader {
        ChunkReader {
            chunks,
            current: Vec::new(),
            pos: 0,
            ended: false,
        }
    }

    /// Waits for the next chunk; `false` at the verified end of the blob.
    fn next_chunk(&mut self) -> io::Result<bool> {
        match self.chunks.blocking_recv() {
            Some(Chunk::Data(data)) => {
                self.current = data;
                self.pos = 0;
                Ok(true)
            }
            Some(Chunk::End) => {
                self.ended = true;
                Ok(false)
            }
            Some(Chunk::Failed(why)) => Err(io::Error::other(why)),
            None => Err(io::Error::other(
                "the seed fetch stopped in the middle of a layer",
            )),
        }
    }
}

impl Read for ChunkReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.current.len() {
            if self.ended || !self.next_chunk()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.current.len() - self.pos);
        buf[..n].copy_from_slice(&self.current[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Walks the tar stream of one layer blob, calling `handler` for each regular file and recording
/// `(path, size)` in `files`. Reads the blob to its end so its gzip trailer and digest are checked.
/// The blob is inflated and untarred on a scoped thread; `handler` runs on the calling thread.
pub(crate) fn walk_layer(
    blob: impl Read + Send,
    compression: Compression,
    handler: &mut FileHandler<'_>,
    files: &mut Vec<(String, u64)>,
) -> Result<()> {
    let (tx, rx) = sync_channel(FILE_BLOCKS);
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("ibi-layer".to_string())
            .spawn_scoped(scope, move || {
                if let Err(e) = untar_layer(blob, compression, &tx) {
                    // Nobody listening means the handler side failed first; its error is the one.
                    let _ = tx.send(Item::Failed(e));
                }
            })
            .context("starting the layer thread")?;
        // `rx` moves in and is dropped on return, which stops the layer thread if it is still going.
        hand_out(rx, handler, files)
    })
}

/// What the layer thread sends: a file's start, its bytes, its end; the layer's end or failure.
enum Item {
    File { path: String, size: u64 },
    Data(Vec<u8>),
    EndOfFile,
    Done,
    Failed(anyhow::Error),
}

/// The layer thread: gunzip and untar, every regular file sent as [`Item`]s. Returns early, with
/// `Ok`, once the receiver is gone.
fn untar_layer(blob: impl Read, compression: Compression, tx: &SyncSender<Item>) -> Result<()> {
    let stream: Box<dyn Read + '_> = match compression {
        Compression::Gzip => Box::new(MultiGzDecoder::new(blob)),
        Compression::None => Box::new(blob),
    };
    let mut archive = tar::Archive::new(stream);
    for entry in archive.entries().context("reading the layer")? {
        let mut entry = entry.context("reading the layer's next entry")?;
        let name = entry.path().context("reading a layer entry's name")?;
        let path = root_relative(&name)?;
        if !entry.header().entry_type().is_file() || is_whiteout(&path) {
            continue;
        }
        let size = entry.size();
        if tx.send(Item::File { path, size }).is_err() {
            return Ok(());
        }
        loop {
            let mut block = vec![0; FILE_BLOCK];
            let (n, failure) = fill(&mut entry, &mut block);
            block.truncate(n);
            // What was read before a failure goes first: the handler fails where the layer did.
            if n > 0 && tx.send(Item::Data(block)).is_err() {
                return Ok(());
            }
            if let Some(e) = failure {
                return Err(e).context("reading the layer");
            }
            if n < FILE_BLOCK {
                break;
            }
        }
        if tx.send(Item::EndOfFile).is_err() {
            return Ok(());
        }
    }
    // tar stops at its end marker; the rest (padding, gzip trailer, skopeo's verdict) is still due.
    io::copy(&mut archive.into_inner(), &mut io::sink()).context("reading the end of the layer")?;
    let _ = tx.send(Item::Done);
    Ok(())
}

/// The calling thread's side: each file to `handler` as a [`FileReader`], the rest of a file the
/// handler left unread skipped.
fn hand_out(
    rx: Receiver<Item>,
    handler: &mut FileHandler<'_>,
    files: &mut Vec<(String, u64)>,
) -> Result<()> {
    let mut rx = rx;
    loop {
        match rx.recv() {
            Ok(Item::File { path, size }) => {
                let mut reader = FileReader::new(rx);
                handler(&path, &mut reader, size).with_context(|| format!("seed file {path}"))?;
                io::copy(&mut reader, &mut io::sink())
                    .with_context(|| format!("seed file {path}: skipping what was not read"))?;
                rx = reader.into_inner();
                files.push((path, size));
            }
            Ok(Item::Done) => return Ok(()),
            Ok(Item::Failed(e)) => return Err(e),
            Ok(Item::Data(_) | Item::EndOfFile) => {
                bail!("file data outside a file from the layer thread")
            }
            Err(_) => bail!("the layer thread stopped before the end of the layer"),
        }
    }
}

/// One file's bytes as they come from the layer thread. It owns the receiver while the handler
/// reads, so it is `Send` and the handler may read it from another thread.
struct FileReader {
    rx: Receiver<Item>,
    current: Cursor,
    ended: bool,
}

impl FileReader {
    fn new(rx: Receiver<Item>) -> FileReader {
        FileReader {
            rx,
            current: Cursor::default(),
            ended: false,
        }
    }

    fn into_inner(self) -> Receiver<Item> {
        self.rx
    }
}

impl Read for FileReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_spent() {
            if self.ended {
                return Ok(0);
            }
            match self.rx.recv() {
                Ok(Item::Data(data)) => {
                    self.current.replace(data);
                }
                Ok(Item::EndOfFile) => self.ended = true,
                Ok(Item::Failed(e)) => {
                    self.ended = true;
                    return Err(io::Error::other(format!("{e:#}")));
                }
                Ok(Item::File { .. } | Item::Done) | Err(_) => {
                    self.ended = true;
                    return Err(io::Error::other(
                        "the layer thread stopped in the middle of a file",
                    ));
                }
            }
        }
        Ok(self.current.read_into(buf))
    }
}

/// `./a/b`, `/a/b` and `a/b` all give `a/b`; `..` is refused, being meaningless at the image root.
fn root_relative(name: &Path) -> Result<String> {
    let mut parts = Vec::new();
    for c in name.components() {
        match c {
            Component::Normal(p) => match p.to_str() {
                Some(s) => parts.push(s),
                None => bail!("layer entry {} is not UTF-8", name.display()),
            },
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                bail!(
                    "layer entry {} climbs out of the image root",
                    name.display()
                )
            }
        }
    }
    Ok(parts.join("/"))
}

fn is_whiteout(path: &str) -> bool {
    path.rsplit('/')
        .next()
        .is_some_and(|base| base.starts_with(WHITEOUT_PREFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_layers() {
        let raw = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"digest":"sha256:c","size":1},"layers":[
            {"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:a","size":10},
            {"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:b","size":20}]}"#;
        let layers = parse_layers(raw).expect("layers");
        assert_eq!(
            layers,
            [
                Layer {
                    digest: "sha256:a".into(),
                    size: 10,
                    compression: Compression::Gzip
                },
                Layer {
                    digest: "sha256:b".into(),
                    size: 20,
                    compression: Compression::None
                }
            ]
        );
    }

    #[test]
    fn refuses_indexes_and_odd_layers() {
        let cases: [(&[u8], &str); 5] = [
            (
                br#"{"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#,
                "names an image index",
            ),
            (br#"{"manifests":[{"digest":"sha256:a","size":1}]}"#, "names an image index"),
            (br#"{"layers":[]}"#, "has no layers"),
            (
                br#"{"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+zstd","digest":"sha256:a","size":1}]}"#,
                "zstd-compressed",
            ),
            (b"<html>", "not valid JSON"),
        ];
        for (raw, want) in cases {
            let e = parse_layers(raw).expect_err(want);
            assert!(e.to_string().contains(want), "{want}: {e:#}");
        }
        let e = layer_compression("application/x-foo").expect_err("foo");
        assert_eq!(
            e.to_string(),
            r#"unsupported layer media type "application/x-foo""#
        );
        assert_eq!(
            layer_compression("application/vnd.docker.image.rootfs.diff.tar.gzip").expect("docker"),
            Compression::Gzip
        );
    }

    #[test]
    fn normalizes_names() {
        for (name, want) in [
            ("./a/b", "a/b"),
            ("/a/b", "a/b"),
            ("a//b", "a/b"),
            ("./", ""),
        ] {
            assert_eq!(root_relative(Path::new(name)).expect(name), want);
        }
        let e = root_relative(Path::new("a/../../etc")).expect_err("dotdot");
        assert!(e.to_string().contains("climbs out"), "{e}");
        assert!(is_whiteout("var/.wh.foo") && is_whiteout(".wh..wh..opq"));
        assert!(!is_whiteout("var/a.wh.b"));
    }

    fn channel_of(chunks: Vec<Chunk>) -> ChunkReader {
        let (tx, rx) = mpsc::channel(chunks.len().max(1));
        for c in chunks {
            tx.try_send(c).expect("send");
        }
        ChunkReader::new(rx)
    }

    #[test]
    fn chunk_reader_needs_a_verified_end() {
        let mut ok = channel_of(vec![
            Chunk::Data(b"ab".to_vec()),
            Chunk::Data(Vec::new()),
            Chunk::Data(b"c".to_vec()),
            Chunk::End,
        ]);
        let mut text = String::new();
        ok.read_to_string(&mut text).expect("read");
        assert_eq!(text, "abc");
        assert_eq!(ok.read(&mut [0; 4]).expect("eof"), 0);
        let mut cut = channel_of(vec![Chunk::Data(b"ab".to_vec())]);
        let e = cut.read_to_end(&mut Vec::new()).expect_err("cut");
        assert!(e.to_string().contains("stopped in the middle"), "{e}");
        let mut bad = channel_of(vec![
            Chunk::Data(b"ab".to_vec()),
            Chunk::Failed("digest mismatch".into()),
        ]);
        let e = bad.read_to_end(&mut Vec::new()).expect_err("bad");
        assert_eq!(e.to_string(), "digest mismatch");
    }

    /// A tar of `(name, body)` regular files plus a directory and a whiteout.
    fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut dir = tar::Header::new_ustar();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_size(0);
        dir.set_mode(0o755);
        b.append_data(&mut dir, "./", io::empty()).expect("dir");
        for (name, body) in files.iter().chain([(".wh.gone", &b""[..])].iter()) {
            let mut h = tar::Header::new_ustar();
            h.set_size(body.len() as u64);
            h.set_mode(0o644);
            b.append_data(&mut h, name, *body).expect("file");
        }
        b.into_inner().expect("tar")
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        io::Write::write_all(&mut e, data).expect("gzip");
        e.finish().expect("gzip")
    }

    #[test]
    fn walks_gzip_and_plain_layers() {
        let tar = tar_of(&[("./manifest.json", b"{}"), ("./var.tgz", b"0123456789")]);
        for (blob, compression) in [
            (gzip(&tar), Compression::Gzip),
            (tar.clone(), Compression::None),
        ] {
            let mut seen = Vec::new();
            let mut files = Vec::new();
            let mut handler = |path: &str, r: &mut (dyn Read + Send), size: u64| -> Result<()> {
                let mut first = [0u8; 1];
                r.read_exact(&mut first)?;
                seen.push((path.to_string(), size, first[0]));
                Ok(())
            };
            walk_layer(&blob[..], compression, &mut handler, &mut files).expect("walk");
            assert_eq!(
                seen,
                [
                    ("manifest.json".into(), 2, b'{'),
                    ("var.tgz".into(), 10, b'0')
                ]
            );
            assert_eq!(files, [("manifest.json".into(), 2), ("var.tgz".into(), 10)]);
        }
    }

    #[test]
    fn handler_and_stream_errors_name_the_file() {
        let blob = gzip(&tar_of(&[("etc.tgz", b"x")]));
        let mut failing =
            |_: &str, _: &mut (dyn Read + Send), _: u64| -> Result<()> { bail!("disk full") };
        let e = walk_layer(&blob[..], Compression::Gzip, &mut failing, &mut Vec::new())
            .expect_err("handler");
        assert_eq!(format!("{e:#}"), "seed file etc.tgz: disk full");
        let mut ignore = |_: &str, _: &mut (dyn Read + Send), _: u64| -> Result<()> { Ok(()) };
        let cut = &blob[..blob.len() - 4];
        let e = walk_layer(cut, Compression::Gzip, &mut ignore, &mut Vec::new()).expect_err("cut");
        assert!(format!("{e:#}").contains("end of the layer"), "{e:#}");
    }
}
