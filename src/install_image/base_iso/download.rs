//! HTTP downloads of the base ISO and the stream metadata: resumable with `Range` into a `.part` file,
//! retried with backoff on connection errors and 5xx (3 attempts without progress), failing at once on
//! other statuses. Blocking `reqwest` over native-tls (system OpenSSL), the HTTP stack `oci-client` brings.

use std::fs::OpenOptions;
use std::io::{self, IsTerminal, Read, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use indicatif::{ProgressBar, ProgressStyle};
use reqwest::blocking::{Client, Response};
use reqwest::header::{CONTENT_RANGE, RANGE};
use reqwest::{StatusCode, Url};

/// Attempts in a row that may fail without any byte arriving before we give up.
const ATTEMPTS: u32 = 3;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// In blocking reqwest this bounds the wait for the headers and for each read: a stalled mirror fails
/// (and is retried) instead of hanging, while a slow but moving 1 GiB download is never cut.
const READ_TIMEOUT: Duration = Duration::from_secs(60);
const BUF_SIZE: usize = 256 * 1024;
const PROGRESS_TEMPLATE: &str = "{msg} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}";

/// Why one attempt failed: the loop retries the first kind and gives up at once on the second.
#[derive(Debug)]
enum AttemptError {
    Retryable {
        err: anyhow::Error,
        progressed: bool,
    },
    Fatal(anyhow::Error),
}

fn retryable(err: anyhow::Error) -> AttemptError {
    AttemptError::Retryable {
        err,
        progressed: false,
    }
}

/// What to do with a response to a request for the bytes from `offset` on.
#[derive(Debug, PartialEq, Eq)]
enum Plan {
    /// 206 starting at `offset`: append to the `.part` file.
    Append,
    /// 200: the server ignored the range (or none was asked); write from byte 0.
    Restart,
    /// 416 whose total equals `offset`: the `.part` file already holds everything.
    Complete,
    /// A range the `.part` file cannot continue: drop it and ask again from byte 0.
    Discard(String),
    Retry(String),
    Fail(String),
}

fn plan(status: StatusCode, content_range: Option<&str>, offset: u64) -> Plan {
    let range = content_range.and_then(parse_content_range);
    match status.as_u16() {
        200 => Plan::Restart,
        206 => match range {
            Some((Some(start), _)) if start == offset => Plan::Append,
            _ => Plan::Discard(format!(
                "206 with Content-Range {content_range:?} for bytes={offset}-"
            )),
        },
        416 if offset > 0 => match range {
            Some((None, Some(total))) if total == offset => Plan::Complete,
            _ => Plan::Discard(format!(
                "416 with Content-Range {content_range:?} for bytes={offset}-"
            )),
        },
        500..=599 => Plan::Retry(format!("HTTP status {status}")),
        _ => Plan::Fail(format!("HTTP status {status}")),
    }
}

/// Parses `bytes START-END/TOTAL` or `bytes */TOTAL` into (start, total); `*` totals are `None`.
fn parse_content_range(v: &str) -> Option<(Option<u64>, Option<u64>)> {
    let (range, total) = v.trim().strip_prefix("bytes ")?.split_once('/')?;
    let total = if total == "*" {
        None
    } else {
        Some(total.parse().ok()?)
    };
    let start = match range {
        "*" => None,
        r => Some(r.split_once('-')?.0.parse().ok()?),
    };
    Some((start, total))
}

fn client() -> Result<Client> {
    Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(READ_TIMEOUT)
        .user_agent(concat!("ibi/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("setting up the HTTP client")
}

/// Runs `attempt` until it succeeds, fails fatally, or fails `ATTEMPTS` times in a row without progress.
fn with_retries<T>(
    url: &Url,
    backoff: Duration,
    mut attempt: impl FnMut() -> Result<T, AttemptError>,
) -> Result<T> {
    let mut failures = 0;
    loop {
        let (err, progressed) = match attempt() {
            Ok(v) => return Ok(v),
            Err(AttemptError::Fatal(e)) => return Err(e),
            Err(AttemptError::Retryable { err, progressed }) => (err, progressed),
        };
        failures = if progressed { 1 } else { failures + 1 };
        if failures >= ATTEMPTS {
            return Err(err.context(format!("giving up on {url} after {ATTEMPTS} attempts")));
        }
        let delay = backoff * 2u32.pow(failures - 1);
        tracing::warn!("{url}: {err:#}; retrying in {delay:?}");
        std::thread::sleep(delay);
    }
}

/// Fetches a small document (stream metadata) into memory.
pub(super) fn get_text(url: &Url, backoff: Duration) -> Result<String> {
    let client = client()?;
    with_retries(url, backoff, || {
        let resp = send(&client, url, 0)?;
        match plan(resp.status(), None, 0) {
            Plan::Restart => resp.text().map_err(|e| retryable(e.into())),
            Plan::Retry(m) => Err(retryable(anyhow!(m))),
            Plan::Fail(m) | Plan::Discard(m) => Err(AttemptError::Fatal(anyhow!(m))),
            Plan::Append | Plan::Complete => {
                Err(AttemptError::Fatal(anyhow!("unexpected partial content")))
            }
        }
    })
}

/// Downloads `url` into `part`, continuing from its current length when the server honours `Range`.
pub(super) fn download(url: &Url, part: &Path, backoff: Duration) -> Result<()> {
    let client = client()?;
    with_retries(url, backoff, || attempt(&client, url, part))?;
    tracing::info!("downloaded {url}");
    Ok(())
}

fn attempt(client: &Client, url: &Url, part: &Path) -> Result<(), AttemptError> {
    let offset = match std::fs::metadata(part) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
        Err(e) => {
            return Err(AttemptError::Fatal(
                anyhow!(e).context(format!("reading {}", part.display())),
            ));
        }
    };
    let resp = send(client, url, offset)?;
    let content_range = resp
        .headers()
        .get(CONTENT_RANGE)
        .and_then(|v| v.to_str().ok());
    match plan(resp.status(), content_range, offset) {
        Plan::Append => write_body(resp, url, part, offset),
        Plan::Restart => write_body(resp, url, part, 0),
        Plan::Complete => Ok(()),
        Plan::Discard(m) => {
            std::fs::remove_file(part).map_err(|e| {
                AttemptError::Fatal(anyhow!(e).context(format!("removing {}", part.display())))
            })?;
            Err(retryable(anyhow!("{m}; starting over")))
        }
        Plan::Retry(m) => Err(retryable(anyhow!(m))),
        Plan::Fail(m) => Err(AttemptError::Fatal(anyhow!(m))),
    }
}

fn send(client: &Client, url: &Url, offset: u64) -> Result<Response, AttemptError> {
    let mut req = client.get(url.clone());
    if offset > 0 {
        tracing::info!("resuming {url} from byte {offset}");
        req = req.header(RANGE, format!("bytes={offset}-"));
    }
    req.send().map_err(|e| {
        let fatal = e.is_builder() || e.is_redirect();
        let err = anyhow::Error::new(e);
        if fatal {
            AttemptError::Fatal(err)
        } else {
            retryable(err)
        }
    })
}

/// Streams the body into `part` from byte `offset`; a broken connection is retryable and keeps what
/// arrived, so the next attempt resumes after it.
fn write_body(mut resp: Response, url: &Url, part: &Path, offset: u64) -> Result<(), AttemptError> {
    let fatal = |e: io::Error| {
        AttemptError::Fatal(anyhow!(e).context(format!("writing {}", part.display())))
    };
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(offset > 0)
        .truncate(offset == 0)
        .open(part)
        .map_err(fatal)?;
    let expected = resp.content_length();
    let progress = Progress::start(url, expected.map(|n| n + offset), offset);
    let mut buf = vec![0u8; BUF_SIZE];
    let mut received = 0u64;
    loop {
        let n = match resp.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                file.sync_all().map_err(fatal)?;
                let err = anyhow!(e).context(format!("connection broken after {received} bytes"));
                return Err(AttemptError::Retryable {
                    err,
                    progressed: received > 0,
                });
            }
        };
        file.write_all(&buf[..n]).map_err(fatal)?;
        received += n as u64;
        progress.advance(n as u64);
    }
    file.sync_all().map_err(fatal)?;
    progress.finish();
    check_length(received, expected)
}

fn check_length(received: u64, expected: Option<u64>) -> Result<(), AttemptError> {
    match expected {
        Some(len) if len != received => Err(AttemptError::Retryable {
            err: anyhow!("connection closed after {received} of {len} bytes"),
            progressed: received > 0,
        }),
        _ => Ok(()),
    }
}

/// An indicatif bar when stderr is a terminal; a log line otherwise, so CI logs stay readable.
struct Progress(Option<ProgressBar>);

impl Progress {
    fn start(url: &Url, total: Option<u64>, done: u64) -> Progress {
        if !io::stderr().is_terminal() {
            let size = total.map_or_else(|| "unknown size".to_string(), |t| format!("{t} bytes"));
            // Not through the log: at the default level a download of minutes would say nothing.
            eprintln!("downloading {url} ({size}, {done} already here)…");
            return Progress(None);
        }
        let bar = ProgressBar::new(total.unwrap_or(0)).with_position(done);
        if let Ok(style) = ProgressStyle::with_template(PROGRESS_TEMPLATE) {
            bar.set_style(style.progress_chars("=> "));
        }
        let name = url
            .path_segments()
            .and_then(|mut s| s.next_back())
            .unwrap_or_default();
        bar.set_message(name.to_string());
        Progress(Some(bar))
    }

    fn advance(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_responses_are_planned() {
        let s = |c| StatusCode::from_u16(c).unwrap();
        let cases = [
            (200, None, 0, Plan::Restart),
            (200, None, 100, Plan::Restart),
            (206, Some("bytes 100-999/1000"), 100, Plan::Append),
            (416, Some("bytes */100"), 100, Plan::Complete),
            (
                503,
                None,
                0,
                Plan::Retry("HTTP status 503 Service Unavailable".into()),
            ),
            (404, None, 0, Plan::Fail("HTTP status 404 Not Found".into())),
            (
                403,
                None,
                100,
                Plan::Fail("HTTP status 403 Forbidden".into()),
            ),
            (
                416,
                None,
                0,
                Plan::Fail("HTTP status 416 Range Not Satisfiable".into()),
            ),
        ];
        for (code, cr, offset, want) in cases {
            assert_eq!(plan(s(code), cr, offset), want, "{code} {cr:?} {offset}");
        }
        let discards = [
            (206, Some("bytes 0-999/1000"), 100),
            (206, None, 100),
            (416, Some("bytes */5000"), 100),
        ];
        for (code, cr, offset) in discards {
            assert!(
                matches!(plan(s(code), cr, offset), Plan::Discard(_)),
                "{code} {cr:?}"
            );
        }
    }

    #[test]
    fn content_range_is_parsed() {
        let cases = [
            ("bytes 0-99/100", Some((Some(0), Some(100)))),
            ("bytes 5-9/*", Some((Some(5), None))),
            ("bytes */42", Some((None, Some(42)))),
            ("items 0-1/2", None),
            ("bytes x-1/2", None),
        ];
        for (v, want) in cases {
            assert_eq!(parse_content_range(v), want, "{v}");
        }
    }

    #[test]
    fn short_body_is_retryable_and_counts_as_progress() {
        assert!(check_length(10, Some(10)).is_ok());
        assert!(check_length(10, None).is_ok());
        match check_length(4, Some(10)) {
            Err(AttemptError::Retryable {
                err,
                progressed: true,
            }) => {
                assert_eq!(err.to_string(), "connection closed after 4 of 10 bytes");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn retries_stop_after_three_failures_without_progress() {
        let url = Url::parse("http://h/r.iso").unwrap();
        let mut calls = 0;
        let err = with_retries(&url, Duration::ZERO, || -> Result<(), _> {
            calls += 1;
            Err(retryable(anyhow!("boom")))
        })
        .unwrap_err();
        assert_eq!(calls, 3);
        assert!(
            format!("{err:#}").contains("after 3 attempts: boom"),
            "{err:#}"
        );
        let mut calls = 0;
        let err = with_retries(&url, Duration::ZERO, || -> Result<(), _> {
            calls += 1;
            Err(AttemptError::Fatal(anyhow!("404")))
        })
        .unwrap_err();
        assert_eq!((calls, err.to_string()), (1, "404".to_string()));
    }
}
