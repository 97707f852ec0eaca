//! One request: find the image its token names (anything else is a 404, with no listing and no
//! hint of what exists), open it, and answer GET or HEAD with the length, range and entity-tag
//! rules of [`super::rules`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use tracing::warn;

use super::access_log::AccessLog;
use super::body::{Access, ImageBody};
use super::catalog::{Image, ServedFile};
use super::dashboard::{Dashboard, Route};
use super::report::{self, Reports};
use super::rules::{RangeAsk, etag_listed, if_range_holds, parse_range};
use super::site_fetch::{self, SiteFetches};
use super::source::{Cache, OpenError, Opened, Source, open};
use crate::util::text::escape_control;
use crate::util::token::token_matches;

/// What the server shares between connections.
pub struct State {
    pub images: Vec<Image>,
    pub cache: Cache,
    pub served: ServedFile,
    pub reports: Arc<Reports>,
    /// One-shot hosts that fetch their site's configuration ISO.
    pub site_fetches: SiteFetches,
    pub log: Arc<AccessLog>,
    /// The live status page, when asked for (`--dashboard`).
    pub dashboard: Option<Arc<Dashboard>>,
}

/// The index of the image `/TOKEN/FILE` names. Tokens are compared in constant time, so response
/// timing says nothing about how much of a guess was right.
pub fn route(images: &[Image], path: &str) -> Option<usize> {
    let (token, file) = path.strip_prefix('/')?.split_once('/')?;
    images
        .iter()
        .position(|img| token_matches(token, img.token.expose_str()) && img.file_name == file)
}

pub async fn handle(
    state: Arc<State>,
    client: SocketAddr,
    req: Request<Incoming>,
) -> Result<Response<ImageBody>, Infallible> {
    let mut access = Access {
        client,
        method: req.method().to_string(),
        image: "-".into(),
        status: 404,
        range: None,
        start: Instant::now(),
        log: state.log.clone(),
        tally: None,
    };
    if req.uri().path() == report::path() {
        return Ok(report_answer(state, client, req, access).await);
    }
    if req.uri().path() == site_fetch::path() {
        return Ok(site_fetch_answer(state, client, req, access).await);
    }
    if let Some(dash) = &state.dashboard
        && let Some(what) = dash.route(req.uri().path())
    {
        return Ok(dashboard_answer(dash.clone(), what, req.method(), access).await);
    }
    let Some(index) = route(&state.images, req.uri().path()) else {
        return Ok(bare(StatusCode::NOT_FOUND, access));
    };
    access.image = state.images[index].name.clone();
    access.tally = Some(state.images[index].sent.clone());
    if !reads(req.method()) {
        return Ok(read_only(access));
    }
    let (opened, access) = match open_off_thread(&state, &state.images[index].source, access).await
    {
        Ok(o) => o,
        Err(r) => return Ok(r),
    };
    state
        .served
        .update(index, opened.sha256.as_deref(), opened.size);
    Ok(answer(
        req.method() == Method::HEAD,
        req.headers(),
        opened,
        access,
    ))
}

/// The report route's answer: no body, the access line naming the route.
async fn report_answer(
    state: Arc<State>,
    client: SocketAddr,
    req: Request<Incoming>,
    mut access: Access,
) -> Response<ImageBody> {
    access.image = report::path();
    let shown = client.to_string();
    let outcome = state.reports.clone().handle(shown.clone(), req).await;
    if let Some(why) = &outcome.refusal {
        report::log_refusal(&shown, why);
    }
    let mut r = bare(outcome.status, access);
    let h = r.headers_mut();
    match outcome.status {
        StatusCode::METHOD_NOT_ALLOWED => {
            h.insert(header::ALLOW, HeaderValue::from_static("POST"));
        }
        StatusCode::UNAUTHORIZED => {
            h.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        _ => {}
    }
    r
}

/// A one-shot host's fetch of its site's configuration ISO, answered as an image (ranges,
/// entity tags) once its token names the site.
async fn site_fetch_answer(
    state: Arc<State>,
    client: SocketAddr,
    req: Request<Incoming>,
    mut access: Access,
) -> Response<ImageBody> {
    access.image = site_fetch::path();
    if !reads(req.method()) {
        return read_only(access);
    }
    let (site, iso) = match state.site_fetches.choose(req.headers()) {
        Ok(found) => found,
        Err((status, why)) => {
            warn!("site configuration fetch from {client} refused: {why}");
            let mut r = bare(status, access);
            if status == StatusCode::UNAUTHORIZED {
                r.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            return r;
        }
    };
    access.image = format!("{} {}", site_fetch::path(), escape_control(&site));
    match open_off_thread(&state, &Source::File(iso), access).await {
        Ok((o, access)) => answer(req.method() == Method::HEAD, req.headers(), o, access),
        Err(r) => r,
    }
}

/// The status page (made on a blocking thread: it reads BASE/.ibi/) or its script, never cached by
/// the browser, with the headers that keep it from being framed, sniffed or told of by a referrer.
async fn dashboard_answer(
    dash: Arc<Dashboard>,
    what: Route,
    method: &Method,
    mut access: Access,
) -> Response<ImageBody> {
    access.image = "dashboard".into();
    if !reads(method) {
        return read_only(access);
    }
    let made = dash.clone();
    let (body, kind) = match what {
        Route::Script => (dash.script(), "text/javascript; charset=utf-8"),
        Route::Page => match tokio::task::spawn_blocking(move || made.page()).await {
            Ok(Ok(page)) => (page, "text/html; charset=utf-8"),
            Ok(Err(e)) => {
                warn!("the status page: {}", escape_control(&format!("{e:#}")));
                return bare(StatusCode::INTERNAL_SERVER_ERROR, access);
            }
            Err(e) => {
                warn!("the status page: {e}");
                return bare(StatusCode::INTERNAL_SERVER_ERROR, access);
            }
        },
    };
    access.status = 200;
    let length = body.len() as u64;
    let body = if method == Method::HEAD {
        ImageBody::empty(access)
    } else {
        ImageBody::bytes(body, access)
    };
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(policy) = HeaderValue::from_str(dash.policy()) {
        h.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// GET and HEAD read an image; nothing else does.
fn reads(method: &Method) -> bool {
    method == Method::GET || method == Method::HEAD
}

/// 405, saying which methods an image answers.
fn read_only(access: Access) -> Response<ImageBody> {
    let mut r = bare(StatusCode::METHOD_NOT_ALLOWED, access);
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    r
}

/// Opens `source` on a blocking thread (it may hash a new version); the answer to send when it
/// cannot be opened.
async fn open_off_thread(
    state: &Arc<State>,
    source: &Source,
    access: Access,
) -> Result<(Opened, Access), Response<ImageBody>> {
    let (st, source) = (state.clone(), source.clone());
    match tokio::task::spawn_blocking(move || open(&source, &st.cache)).await {
        Ok(Ok(o)) => Ok((o, access)),
        Ok(Err(e)) => Err(open_failed(e, access)),
        Err(e) => {
            warn!("{}: opening failed: {e}", access.image);
            Err(bare(StatusCode::INTERNAL_SERVER_ERROR, access))
        }
    }
}

fn open_failed(e: OpenError, access: Access) -> Response<ImageBody> {
    let status = match &e {
        OpenError::Missing(_) => StatusCode::NOT_FOUND,
        OpenError::Stale(_) => StatusCode::SERVICE_UNAVAILABLE,
        OpenError::Io { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    warn!("{}: {e}", access.image);
    bare(status, access)
}

/// What to send for an opened image, before any byte is read.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    pub status: u16,
    /// Bytes `start..end` to send (end exclusive); `None` for no body.
    pub bytes: Option<(u64, u64)>,
    pub content_range: Option<String>,
    pub content_length: u64,
}

/// Applies If-None-Match, If-Range and Range to a representation of `size` bytes.
pub fn plan(headers: &HeaderMap, size: u64, etag: &str) -> Plan {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if text(header::IF_NONE_MATCH).is_some_and(|h| etag_listed(h, etag, true)) {
        return Plan {
            status: 304,
            bytes: None,
            content_range: None,
            content_length: 0,
        };
    }
    let ask = if if_range_holds(text(header::IF_RANGE), etag) {
        parse_range(text(header::RANGE), size)
    } else {
        RangeAsk::Full
    };
    match ask {
        RangeAsk::Full => Plan {
            status: 200,
            bytes: Some((0, size)),
            content_range: None,
            content_length: size,
        },
        RangeAsk::Part { start, end } => Plan {
            status: 206,
            bytes: Some((start, end + 1)),
            content_range: Some(format!("bytes {start}-{end}/{size}")),
            content_length: end + 1 - start,
        },
        RangeAsk::Unsatisfiable => Plan {
            status: 416,
            bytes: None,
            content_range: Some(format!("bytes */{size}")),
            content_length: 0,
        },
    }
}

fn answer(
    head: bool,
    headers: &HeaderMap,
    opened: Opened,
    mut access: Access,
) -> Response<ImageBody> {
    let etag = format!("\"{}\"", opened.etag);
    let p = plan(headers, opened.size, &etag);
    access.status = p.status;
    access.range = p
        .content_range
        .as_ref()
        .and(p.bytes)
        .filter(|_| p.status == 206)
        .map(|(s, e)| (s, e - 1));
    let body = match p.bytes {
        Some((start, end)) if !head => ImageBody::range(opened, start, end, access),
        _ => ImageBody::empty(access),
    };
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    if p.status != 304 {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(p.content_length));
    }
    if let Some(v) = p.content_range.and_then(|c| HeaderValue::from_str(&c).ok()) {
        h.insert(header::CONTENT_RANGE, v);
    }
    r
}

fn bare(status: StatusCode, mut access: Access) -> Response<ImageBody> {
    access.status = status.as_u16();
    let mut r = Response::new(ImageBody::empty(access));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(0u64));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deliver::serve::source::Source;
    use crate::util::secret::Secret;

    fn image(token: &str, file: &str) -> Image {
        Image {
            name: file.into(),
            source: Source::File("/x".into()),
            token: Secret::new(token),
            file_name: file.into(),
            sent: Arc::default(),
        }
    }

    #[test]
    fn only_the_exact_token_and_file_name_route() {
        let images = [image("aaaa", "a.iso"), image("bbbb", "b.iso")];
        let cases = [
            ("/aaaa/a.iso", Some(0)),
            ("/bbbb/b.iso", Some(1)),
            ("/aaaa/b.iso", None),
            ("/aaab/a.iso", None),
            ("/aaa/a.iso", None),
            ("/a.iso", None),
            ("/", None),
            ("/aaaa/a.iso/", None),
            ("/aaaa/", None),
        ];
        for (path, want) in cases {
            assert_eq!(route(&images, path), want, "{path}");
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn conditionals_and_ranges_pick_the_status() {
        let e = "\"e1\"";
        let cases = [
            (vec![], 200, Some((0, 100))),
            (vec![("range", "bytes=10-19")], 206, Some((10, 20))),
            (vec![("range", "bytes=100-")], 416, None),
            (vec![("if-none-match", "\"e1\"")], 304, None),
            (
                vec![("if-none-match", "\"e0\""), ("range", "bytes=0-0")],
                206,
                Some((0, 1)),
            ),
            (
                vec![("if-range", "\"e1\""), ("range", "bytes=90-")],
                206,
                Some((90, 100)),
            ),
            (
                vec![("if-range", "\"old\""), ("range", "bytes=90-")],
                200,
                Some((0, 100)),
            ),
        ];
        for (h, status, bytes) in cases {
            let p = plan(&headers(&h), 100, e);
            assert_eq!((p.status, p.bytes), (status, bytes), "{h:?}");
        }
        let p = plan(&headers(&[("range", "bytes=-10")]), 100, e);
        assert_eq!(
            (p.content_range.as_deref(), p.content_length),
            (Some("bytes 90-99/100"), 10)
        );
        let p = plan(&headers(&[("range", "bytes=200-")]), 100, e);
        assert_eq!(p.content_range.as_deref(), Some("bytes */100"));
    }
}
