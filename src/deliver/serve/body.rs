//! A response body that reads its image a chunk at a time as the connection drains, so memory is
//! one chunk per client whatever the file's size, and writes the access-log line when it is
//! dropped (when hyper is done with it, sent or not).
//!
//! Reads are plain `pread`s in the connection's task, as nginx does without `aio`: the image is
//! normally in the page cache (it was just built or hashed), and a blocking-pool hop per chunk
//! costs more than it saves. Before each chunk the descriptor's version is checked: a file written
//! in place (not renamed) under a download ends it short, so no client receives a mix of versions.

use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use hyper::body::{Body, Bytes, Frame, SizeHint};

use super::access_log::AccessLog;
use super::source::Opened;
use crate::install_image::variant::Recipe;
use crate::live_iso::overlay;
use crate::util::file_version::FileVersion;

/// Bytes per read and per frame: large enough that TLS records are full and syscalls few, small
/// enough that sixteen clients cost a few MiB.
pub const CHUNK: usize = 64 * 1024;

/// What one access-log line says. Never a path: it holds the token.
#[derive(Debug)]
pub struct Access {
    pub client: SocketAddr,
    pub method: String,
    /// The image's name, `-` when the URL named none.
    pub image: String,
    pub status: u16,
    pub range: Option<(u64, u64)>,
    pub start: Instant,
    pub log: Arc<AccessLog>,
    /// The image's running count of bytes sent, for `ibi deploy`'s per-site totals.
    pub tally: Option<Arc<AtomicU64>>,
}

impl Access {
    fn line(&self, bytes: u64, outcome: &str, now: SystemTime) -> String {
        let range = match self.range {
            Some((s, e)) => format!("{s}-{e}"),
            None => "-".into(),
        };
        format!(
            "{} {} {} {} {} range={range} bytes={bytes} time={:.3}s{outcome}",
            utc_timestamp(now),
            self.client,
            self.method,
            self.image,
            self.status,
            self.start.elapsed().as_secs_f64(),
        )
    }
}

struct Stream {
    file: File,
    version: FileVersion,
    recipe: Option<Arc<Recipe>>,
    pos: u64,
    end: u64,
}

impl Stream {
    fn next_chunk(&mut self) -> io::Result<Bytes> {
        let n = CHUNK.min((self.end - self.pos) as usize);
        let mut buf = vec![0u8; n];
        self.file.read_exact_at(&mut buf, self.pos)?;
        // Checked after the read: a write that landed before it has changed the version by now.
        if FileVersion::of(&self.file.metadata()?) != self.version {
            return Err(io::Error::other(
                "the image was rewritten in place during the download",
            ));
        }
        if let Some(r) = &self.recipe {
            overlay(&r.patches, self.pos, &mut buf);
        }
        self.pos += n as u64;
        Ok(Bytes::from(buf))
    }
}

/// The body of every response `serve` sends.
pub struct ImageBody {
    stream: Option<Stream>,
    /// A body made in memory (the status page), sent as one frame.
    memory: Option<Bytes>,
    access: Access,
    sent: u64,
    failure: Option<String>,
}

impl ImageBody {
    /// No body (HEAD, 304, 404, 416 …); the access line is still written.
    pub fn empty(access: Access) -> Self {
        Self {
            stream: None,
            memory: None,
            access,
            sent: 0,
            failure: None,
        }
    }

    /// `bytes`, made in memory (the status page and its script).
    pub fn bytes(bytes: Bytes, access: Access) -> Self {
        Self {
            stream: None,
            memory: Some(bytes).filter(|b| !b.is_empty()),
            access,
            sent: 0,
            failure: None,
        }
    }

    /// Bytes `start..end` of the opened image.
    pub fn range(opened: Opened, start: u64, end: u64, access: Access) -> Self {
        let stream = Stream {
            file: opened.file,
            version: opened.version,
            recipe: opened.recipe,
            pos: start,
            end,
        };
        Self {
            stream: Some(stream),
            memory: None,
            access,
            sent: 0,
            failure: None,
        }
    }

    fn remaining(&self) -> u64 {
        let memory = self.memory.as_ref().map_or(0, |b| b.len() as u64);
        memory + self.stream.as_ref().map_or(0, |s| s.end - s.pos)
    }
}

impl Body for ImageBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        if let Some(bytes) = this.memory.take() {
            this.sent += bytes.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        let Some(stream) = this.stream.as_mut() else {
            return Poll::Ready(None);
        };
        if stream.pos >= stream.end {
            this.stream = None;
            return Poll::Ready(None);
        }
        match stream.next_chunk() {
            Ok(bytes) => {
                this.sent += bytes.len() as u64;
                if let Some(t) = &this.access.tally {
                    t.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                }
                Poll::Ready(Some(Ok(Frame::data(bytes))))
            }
            Err(e) => {
                this.failure = Some(e.to_string());
                this.stream = None;
                Poll::Ready(Some(Err(e)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.remaining() == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining())
    }
}

impl Drop for ImageBody {
    fn drop(&mut self) {
        let outcome = match (&self.failure, self.remaining()) {
            (Some(f), _) => format!(" aborted: {f}"),
            (None, 0) => String::new(),
            (None, left) => format!(" aborted: the client left with {left} bytes unsent"),
        };
        let line = self.access.line(self.sent, &outcome, SystemTime::now());
        self.access.log.line(&line);
    }
}

/// `2026-11-24T09:30:00.123Z`, without a date crate: days since the epoch to a civil date.
pub fn utc_timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_rfc3339() {
        let cases = [
            (0, "1970-01-01T00:00:00.000Z"),
            (951_782_400, "2000-02-29T00:00:00.000Z"),
            (1_795_512_645, "2026-11-24T09:30:45.000Z"),
        ];
        for (secs, want) in cases {
            assert_eq!(utc_timestamp(UNIX_EPOCH + Duration::from_secs(secs)), want);
        }
    }

    #[test]
    fn access_lines_carry_range_bytes_status_and_no_path() {
        let a = Access {
            client: "127.0.0.1:5000".parse().unwrap(),
            method: "GET".into(),
            image: "rhcos-ibi.iso".into(),
            status: 206,
            range: Some((0, 99)),
            start: Instant::now(),
            log: Arc::new(AccessLog::Stderr),
            tally: None,
        };
        let line = a.line(100, "", UNIX_EPOCH);
        assert!(line.starts_with("1970-01-01T00:00:00.000Z 127.0.0.1:5000 GET rhcos-ibi.iso 206 range=0-99 bytes=100 time="), "{line}");
    }

    #[test]
    fn a_body_streams_its_range_in_chunks_and_stops_on_an_in_place_rewrite() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let data: Vec<u8> = (0..(CHUNK * 3) as u32).map(|i| i as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let opened = || {
            let file = File::open(&p).unwrap();
            let version = FileVersion::of(&file.metadata().unwrap());
            Opened {
                file,
                version,
                recipe: None,
                size: data.len() as u64,
                etag: String::new(),
                sha256: None,
            }
        };
        let access = || Access {
            client: "127.0.0.1:1".parse().unwrap(),
            method: "GET".into(),
            image: "f".into(),
            status: 200,
            range: None,
            start: Instant::now(),
            log: Arc::new(AccessLog::Stderr),
            tally: None,
        };
        let mut body = ImageBody::range(opened(), 10, (CHUNK * 2) as u64, access());
        let mut got = Vec::new();
        while let Some(chunk) = body
            .stream
            .as_mut()
            .filter(|s| s.pos < s.end)
            .map(|s| s.next_chunk().unwrap())
        {
            got.extend_from_slice(&chunk);
        }
        assert_eq!(got, data[10..CHUNK * 2]);

        let mut body = ImageBody::range(opened(), 0, data.len() as u64, access());
        let first = body.stream.as_mut().unwrap().next_chunk().unwrap();
        assert_eq!(first.len(), CHUNK);
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.write_all_at(b"new!", 0).unwrap();
        f.set_len(data.len() as u64 + 1).unwrap();
        let err = body.stream.as_mut().unwrap().next_chunk().unwrap_err();
        assert!(err.to_string().contains("rewritten in place"), "{err}");
    }
}
