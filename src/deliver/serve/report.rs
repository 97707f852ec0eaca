//! `POST /reports`: the hosts' reports (`contract::host_report`), next to the image routes.
//!
//! The token is the one `ibi create image` baked into the ISOs built in the served directory
//! (`install_image::status_token`), read again at each report, so an ISO built after the server started
//! is heard without a restart. No `Authorization: Bearer` header: 401; a wrong token, or no token in the
//! directory: 403; a body over [`MAX_REPORT_BYTES`]: 413; one that is not a report: 400. Every refusal
//! is logged with its reason and never with the token or the body's text. An accepted report is
//! appended to the store and fsynced ([`crate::deliver::report_store`]) before the host gets its 204, so
//! an acknowledged report is never lost; the server adds one line about it to its record on stderr.

use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use hyper::body::{Body, Incoming};
use hyper::header::{self, HeaderMap};
use hyper::{Method, Request, StatusCode};
use tracing::warn;

use super::access_log::AccessLog;
use super::body::utc_timestamp;
use super::catalog::HostToken;
use crate::contract::host_report::{HostReport, MAX_REPORT_BYTES, OutOfBounds, REPORT_ENDPOINT};
use crate::deliver::report_store::{ReportStore, StoredReport};
use crate::install_image::status_token;
use crate::util::secret::{Secret, scrub};
use crate::util::token::token_matches;

/// A slow body must not hold a connection slot for ever (the header timeout covers headers only).
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The route's path.
pub fn path() -> String {
    format!("/{REPORT_ENDPOINT}")
}

/// What the endpoint shares between connections.
pub struct Reports {
    dir: PathBuf,
    /// Where an accepted report's line goes: the server's record, beside the access log.
    log: Arc<AccessLog>,
    /// `ibi deploy`'s hosts' own tokens: a report carrying one is that site's.
    hosts: Vec<HostToken>,
    /// Opened at the first accepted report, so a server nobody reports to writes nothing.
    store: Mutex<Option<ReportStore>>,
}

/// The answer, and the reason the server logs for a refusal.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: StatusCode,
    pub refusal: Option<String>,
}

impl Outcome {
    fn refused(status: StatusCode, why: impl Into<String>) -> Outcome {
        Outcome {
            status,
            refusal: Some(why.into()),
        }
    }
}

/// A token the endpoint accepts, and the site it speaks for (none: the ISO's own token).
#[derive(Debug)]
struct Accepted {
    token: Secret,
    site: Option<String>,
}

impl Reports {
    pub fn new(dir: PathBuf, log: Arc<AccessLog>, hosts: Vec<HostToken>) -> Reports {
        Reports {
            dir,
            log,
            hosts,
            store: Mutex::new(None),
        }
    }

    /// Handles one request to the route.
    pub async fn handle(self: Arc<Self>, client: String, req: Request<Incoming>) -> Outcome {
        if req.method() != Method::POST {
            return Outcome::refused(StatusCode::METHOD_NOT_ALLOWED, "not a POST");
        }
        let tokens = match self.accepted_tokens().await {
            Ok(t) => t,
            Err(why) => return Outcome::refused(StatusCode::FORBIDDEN, why),
        };
        let by = match check_token(req.headers(), &tokens) {
            Ok(a) => a,
            Err(o) => return o,
        };
        let (parts, body) = req.into_parts();
        let bytes = match read_body(&parts.headers, body).await {
            Ok(b) => b,
            Err(o) => return o,
        };
        let report = match decode(&bytes, &by.token) {
            Ok(r) => r,
            Err(why) => return Outcome::refused(StatusCode::BAD_REQUEST, why.to_string()),
        };
        self.keep(client, report, by.site.clone()).await
    }

    /// The ISO's own token (read again each time: an ISO built after the start is heard) and the
    /// hosts' own tokens.
    async fn accepted_tokens(&self) -> Result<Vec<Accepted>, String> {
        let dir = self.dir.clone();
        let loaded = tokio::task::spawn_blocking(move || status_token::load(&dir)).await;
        let own = match loaded {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => return Err(format!("{e:#}")),
            Err(e) => return Err(format!("reading the report token: {e}")),
        };
        let mut tokens: Vec<Accepted> = self
            .hosts
            .iter()
            .map(|h| Accepted {
                token: h.token.clone(),
                site: Some(h.site.clone()),
            })
            .collect();
        tokens.extend(own.map(|token| Accepted { token, site: None }));
        if tokens.is_empty() {
            return Err(format!(
                "{} has no report token: no installation ISO with statusURL was built there",
                self.dir.display()
            ));
        }
        Ok(tokens)
    }

    async fn keep(
        self: Arc<Self>,
        client: String,
        report: HostReport,
        site: Option<String>,
    ) -> Outcome {
        let line = record_line(&client, site.as_deref(), &report);
        let stored = StoredReport {
            received: unix_now(),
            client,
            site,
            report,
        };
        let me = self.clone();
        let appended = tokio::task::spawn_blocking(move || me.append(&stored)).await;
        match appended {
            Ok(Ok(())) => {
                self.log
                    .line(&format!("{} {line}", utc_timestamp(SystemTime::now())));
                Outcome {
                    status: StatusCode::NO_CONTENT,
                    refusal: None,
                }
            }
            Ok(Err(e)) => Outcome::refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("keeping it: {e:#}"),
            ),
            Err(e) => Outcome::refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("keeping it: {e}"),
            ),
        }
    }

    fn append(&self, report: &StoredReport) -> Result<()> {
        let mut guard = self.store.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Some(ReportStore::open(&self.dir)?);
        }
        match guard.as_mut() {
            Some(store) => store.append(report),
            None => anyhow::bail!("internal error: the report store is not open"),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// `Authorization: Bearer <token>`, compared in constant time with every accepted token (so the
/// time taken says nothing about which came close).
fn check_token<'a>(headers: &HeaderMap, accepted: &'a [Accepted]) -> Result<&'a Accepted, Outcome> {
    let Some(given) = bearer(headers) else {
        return Err(Outcome::refused(
            StatusCode::UNAUTHORIZED,
            "no Authorization: Bearer header",
        ));
    };
    let mut found = None;
    for a in accepted {
        if token_matches(given, a.token.expose_str()) && found.is_none() {
            found = Some(a);
        }
    }
    found.ok_or_else(|| Outcome::refused(StatusCode::FORBIDDEN, "wrong token"))
}

/// The body, at most [`MAX_REPORT_BYTES`] of it, within [`BODY_TIMEOUT`].
async fn read_body(headers: &HeaderMap, body: Incoming) -> Result<Vec<u8>, Outcome> {
    let too_big = || {
        Outcome::refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body over {MAX_REPORT_BYTES} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_REPORT_BYTES as u64) {
        return Err(too_big());
    }
    match tokio::time::timeout(BODY_TIMEOUT, collect(body)).await {
        Ok(Ok(Some(bytes))) => Ok(bytes),
        Ok(Ok(None)) => Err(too_big()),
        Ok(Err(e)) => Err(Outcome::refused(
            StatusCode::BAD_REQUEST,
            format!("reading the body: {e}"),
        )),
        Err(_) => Err(Outcome::refused(
            StatusCode::REQUEST_TIMEOUT,
            "the body did not arrive in time",
        )),
    }
}

/// The body's bytes, or `None` once it grows past [`MAX_REPORT_BYTES`].
async fn collect(mut body: Incoming) -> Result<Option<Vec<u8>>, hyper::Error> {
    let mut buf = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        if let Ok(data) = frame?.into_data() {
            if buf.len() + data.len() > MAX_REPORT_BYTES {
                return Ok(None);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(Some(buf))
}

/// Why a report was refused: messages name a position or a field, never the text.
#[derive(Debug, thiserror::Error)]
pub enum BadReport {
    #[error("not a report ({category:?} error at line {line}, column {column})")]
    NotJson {
        category: serde_json::error::Category,
        line: usize,
        column: usize,
    },
    #[error(transparent)]
    OutOfBounds(#[from] OutOfBounds),
}

/// Decodes and checks a report. The host filters its logs; the token is scrubbed again here, in case a
/// host's filter missed it.
pub fn decode(bytes: &[u8], token: &Secret) -> Result<HostReport, BadReport> {
    let mut report: HostReport = serde_json::from_slice(bytes).map_err(|e| BadReport::NotJson {
        category: e.classify(),
        line: e.line(),
        column: e.column(),
    })?;
    report.check()?;
    let secrets = [token.clone()];
    for line in &mut report.logs {
        *line = scrub(line, &secrets);
    }
    if let Some(e) = report.status.error.as_mut() {
        *e = scrub(e, &secrets);
    }
    Ok(report)
}

/// The server's line about an accepted report (after the timestamp). Host-given text is quoted (Rust's
/// `{:?}` escapes every control character), so a host cannot forge lines of the record or reach the
/// terminal of whoever reads it.
fn record_line(client: &str, site: Option<&str>, r: &HostReport) -> String {
    let state = serde_json::to_value(r.status.state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    format!(
        "{client} report site={} host={:?} hostname={:?} step={:?} state={state}{}",
        site.unwrap_or("-"),
        r.host.product_uuid.as_deref().unwrap_or("-"),
        r.host.hostname,
        r.status.step,
        if r.finished { " finished" } else { "" },
    )
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Logs a refusal: the reason, never the token or the body.
pub fn log_refusal(client: &str, why: &str) {
    warn!("report from {client} refused: {why}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::agent_status::Status;
    use crate::contract::host_report::{HostIdentity, REPORT_VERSION, ReportingAgent};
    use hyper::header::HeaderValue;

    const TOKEN: &str = "0123456789abcdef0123456789abcdef";

    fn headers(auth: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(a) = auth {
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(a).unwrap());
        }
        h
    }

    #[test]
    fn the_token_decides_between_401_403_and_which_site() {
        let want = [
            Accepted {
                token: Secret::new("a".repeat(32)),
                site: Some("a17".into()),
            },
            Accepted {
                token: Secret::new(TOKEN),
                site: None,
            },
        ];
        assert_eq!(
            check_token(&headers(None), &want).unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            check_token(&headers(Some("Basic x")), &want)
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
        let wrong =
            check_token(&headers(Some(&format!("Bearer {}", "f".repeat(32)))), &want).unwrap_err();
        assert_eq!(
            wrong,
            Outcome::refused(StatusCode::FORBIDDEN, "wrong token")
        );
        let own = check_token(&headers(Some(&format!("Bearer {TOKEN}"))), &want).unwrap();
        assert_eq!(own.site, None);
        let host = check_token(&headers(Some(&format!("Bearer {}", "a".repeat(32)))), &want);
        assert_eq!(host.unwrap().site.as_deref(), Some("a17"));
    }

    fn body(logs: Vec<String>, error: Option<String>) -> Vec<u8> {
        let mut status = Status::idle(1);
        status.error = error;
        serde_json::to_vec(&HostReport {
            version: REPORT_VERSION,
            agent: ReportingAgent::Lca,
            host: HostIdentity {
                hostname: "h\nforged line".into(),
                ..HostIdentity::default()
            },
            status,
            finished: true,
            logs,
        })
        .unwrap()
    }

    #[test]
    fn decoding_scrubs_the_token_and_names_no_content() {
        let token = Secret::new(TOKEN);
        let r = decode(
            &body(
                vec![format!("curl -H 'Authorization: Bearer {TOKEN}'")],
                Some(format!("failed with {TOKEN}")),
            ),
            &token,
        )
        .unwrap();
        assert_eq!(r.logs[0], "curl -H 'Authorization: Bearer <redacted>'");
        assert_eq!(r.status.error.as_deref(), Some("failed with <redacted>"));
        let err = decode(br#"{"version":1,"MARKER":2}"#, &token)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("not a report (Data error at line 1"),
            "{err}"
        );
        assert!(!err.contains("MARKER"), "{err}");
        let too_many = body(vec!["x".into(); 101], None);
        assert_eq!(
            decode(&too_many, &token).unwrap_err().to_string(),
            "logs: 101 lines, at most 100"
        );
    }

    #[test]
    fn the_record_line_quotes_what_the_host_wrote() {
        let r: HostReport = serde_json::from_slice(&body(Vec::new(), None)).unwrap();
        let line = record_line("127.0.0.1:1", Some("a17"), &r);
        assert_eq!(
            line,
            "127.0.0.1:1 report site=a17 host=\"-\" hostname=\"h\\nforged line\" step=\"\" state=running finished"
        );
    }
}
