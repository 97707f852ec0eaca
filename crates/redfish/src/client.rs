//! The transport: blocking reqwest (native-tls, so the system OpenSSL) with the habits BMCs need:
//! one kept-alive connection per client (BMCs allow few connections, and a TLS handshake per call
//! is what loads them), no compression (weak or `-gzip` ETags follow from it), a session login with
//! Basic auth as the fallback, one new login on a 401, bounded retries with backoff on connection
//! failures and 5xx (honouring `Retry-After`), one retry at once on a new connection when a reused
//! one turns out to have been closed by the BMC, and 202 task monitors followed to their end.
//! Secrets registered with [`Client::redact`] are scrubbed from every error text a BMC sends back.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::thread::sleep;
use std::time::{Duration, Instant};

use reqwest::blocking::{Client as Http, RequestBuilder};
use reqwest::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use reqwest::{Method, Url};
use serde_json::{Value, json};
use tracing::{debug, warn};

use super::error::{RedfishError, error_details};
use util::secret::{Secret, scrub};
use util::text::escape_control;

/// The Redfish session header (DSP0266 "Session login").
const AUTH_TOKEN_HEADER: &str = "X-Auth-Token";
/// The longest `Retry-After` honoured: a BMC asking for more is treated as failing.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// How often a 202 task monitor is asked again.
const TASK_POLL: Duration = Duration::from_secs(1);
/// A session is deleted at the end with this bound: cleanup must not hang a finished run.
const LOGOUT_TIMEOUT: Duration = Duration::from_secs(5);
/// The Redfish task states after which nothing changes (DSP0268 Task.TaskState).
const TASK_FAILED_STATES: [&str; 3] = ["Exception", "Killed", "Cancelled"];
const TASK_DONE_STATE: &str = "Completed";
/// How long an idle connection is kept for the next call: longer than the 2 s power poll, so a
/// boot keeps its one connection through the waits, and shorter than the 5 s keep-alive timeout
/// common web servers default to (Apache, lighttpd), so a BMC seldom closes one as it is reused.
const IDLE_KEPT: Duration = Duration::from_secs(4);

/// A BMC user and password; the password's `Debug` is redacted.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub user: String,
    pub password: Secret,
}

/// Which certificates the BMC's TLS is checked against.
#[derive(Clone, Debug)]
pub enum Trust {
    /// The system's trust store.
    System,
    /// Only the CA certificates in this PEM bundle.
    Ca(Vec<u8>),
    /// No check at all (the user said so).
    Insecure,
}

/// How often and how patiently transient failures are retried.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    /// Tries in all, the first included.
    pub attempts: u32,
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 4,
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The wait before try `next` (2, 3, …): doubling from `first_delay`, capped, unless the BMC
    /// asked for a particular wait.
    fn delay(&self, next: u32, retry_after: Option<Duration>) -> Duration {
        let doubled = self
            .first_delay
            .saturating_mul(2u32.saturating_pow(next.saturating_sub(2)));
        retry_after.unwrap_or(doubled.min(self.max_delay))
    }
}

#[derive(Clone, Debug)]
pub struct ClientOptions {
    pub trust: Trust,
    pub credentials: Option<Credentials>,
    /// The bound on one request without its own timeout.
    pub request_timeout: Duration,
    pub retry: RetryPolicy,
    /// Who the client works for, put in front of its warnings (`ibi deploy`: `site a17`), so a line
    /// from one of many clients says whose it is.
    pub label: Option<String>,
}

impl ClientOptions {
    /// `label: ` when there is one.
    pub fn prefix(&self) -> String {
        self.label
            .as_deref()
            .map_or(String::new(), |l| format!("{l}: "))
    }
}

/// An answered call: status, the headers callers use, and the JSON body (`Null` when empty).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub etag: Option<String>,
    pub location: Option<String>,
    pub body: Value,
    token: Option<Secret>,
}

#[derive(Debug)]
enum Auth {
    Pending,
    Anonymous,
    Basic,
    Session { token: Secret, uri: Option<String> },
}

/// One failed try, sorted by what the retry loop does with it.
enum Failure {
    Transient {
        err: RedfishError,
        retry_after: Option<Duration>,
    },
    /// The request went out on a reused connection that broke before any answer: the BMC had
    /// closed it (its keep-alive timeout) as the request arrived.
    Stale(RedfishError),
    Unauthorized(RedfishError),
    Final(RedfishError),
}

/// A Redfish service reached at one origin.
#[derive(Debug)]
pub struct Client {
    http: Http,
    base: Url,
    origin: String,
    creds: Option<Credentials>,
    auth: Auth,
    opts: ClientOptions,
    redact: Vec<Secret>,
    /// Connections opened so far (by the pool's connector): a failed request during which none
    /// was opened went out on a reused one.
    opened: Arc<AtomicUsize>,
    /// Requests sent so far, retries and logins included.
    sent: AtomicUsize,
}

impl Client {
    /// Sets up the client for the service at `url`'s origin; nothing is sent yet.
    pub fn new(url: &Url, opts: ClientOptions) -> Result<Self, RedfishError> {
        let origin = origin_of(url);
        let opened = Arc::new(AtomicUsize::new(0));
        let http = build_http(&opts.trust, &opened).map_err(|e| RedfishError::Protocol {
            bmc: origin.clone(),
            call: "setting up TLS".into(),
            detail: e.to_string(),
        })?;
        let mut base = url.clone();
        base.set_path("/");
        base.set_query(None);
        Ok(Self {
            http,
            base,
            origin,
            creds: opts.credentials.clone(),
            auth: Auth::Pending,
            opts,
            redact: Vec::new(),
            opened,
            sent: AtomicUsize::new(0),
        })
    }

    /// How many connections this client has opened and how many requests it has sent.
    pub fn usage(&self) -> (usize, usize) {
        (
            self.opened.load(Ordering::Relaxed),
            self.sent.load(Ordering::Relaxed),
        )
    }

    /// `scheme://host:port`, the name errors and logs use for this BMC.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Scrubs `secret` from every error text the BMC sends back from now on.
    pub fn redact(&mut self, secret: Secret) {
        self.redact.push(secret);
    }

    pub fn get(&mut self, path: &str) -> Result<Reply, RedfishError> {
        let t = self.opts.request_timeout;
        self.call(Method::GET, path, None, None, t)
    }

    /// One GET bounded by `timeout`, without retries or a new login: a look taken on the way out
    /// of a failure, which must not add minutes to it.
    pub(crate) fn get_once(
        &mut self,
        path: &str,
        timeout: Duration,
    ) -> Result<Reply, RedfishError> {
        self.ensure_auth()?;
        self.send_once(&Method::GET, path, None, None, timeout, true)
            .map_err(Failure::into_error)
    }

    /// POSTs `body`; a 202 with a task monitor is followed until the task ends.
    pub fn post(&mut self, path: &str, body: &Value) -> Result<Reply, RedfishError> {
        let t = self.opts.request_timeout;
        self.post_with_timeout(path, body, t)
    }

    /// As [`Client::post`], with a bound of its own (an insert during which the BMC downloads).
    pub(crate) fn post_with_timeout(
        &mut self,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<Reply, RedfishError> {
        let reply = self.call(Method::POST, path, Some(body), None, timeout)?;
        self.follow_task(reply, timeout)
    }

    /// PATCHes `body` with `If-Match: etag`. A 412 is retried with the weak ETag made strong, then
    /// without `If-Match` (what OpenBMC, AMI and iDRAC10 need); a 428 (an ETag was required and
    /// none was known) is retried once with the resource's current ETag.
    pub fn patch(
        &mut self,
        path: &str,
        body: &Value,
        etag: Option<&str>,
    ) -> Result<Reply, RedfishError> {
        let t = self.opts.request_timeout;
        let mut tries: Vec<Option<String>> = vec![etag.map(str::to_string)];
        if let Some(strong) = etag.and_then(|e| e.strip_prefix("W/")) {
            tries.push(Some(strong.to_string()));
        }
        tries.push(None);
        tries.dedup();
        let mut last = None;
        for if_match in tries {
            match self.call(Method::PATCH, path, Some(body), if_match.as_deref(), t) {
                Err(e) if e.status() == Some(412) => last = Some(e),
                Err(e) if e.status() == Some(428) && if_match.is_none() => {
                    let fresh = self.get(path)?.etag;
                    let reply = self.call(Method::PATCH, path, Some(body), fresh.as_deref(), t)?;
                    return self.follow_task(reply, t);
                }
                Err(e) => return Err(e),
                Ok(reply) => return self.follow_task(reply, t),
            }
        }
        Err(last.unwrap_or_else(|| self.protocol(path, "no PATCH was sent".into())))
    }

    /// Its label with `: ` ([`ClientOptions::label`]), for the warnings of its callers.
    pub fn prefix(&self) -> String {
        self.opts.prefix()
    }

    /// Deletes the session this client logged in with, if any (best effort, bounded).
    pub fn logout(&mut self) {
        let Auth::Session { uri: Some(uri), .. } = &self.auth else {
            return;
        };
        let uri = uri.clone();
        match self.send_once(&Method::DELETE, &uri, None, None, LOGOUT_TIMEOUT, true) {
            Ok(_) => debug!(target: "ibi::redfish::client", bmc = %self.origin, "session deleted"),
            Err(f) => warn!(target: "ibi::redfish::client",
                "{}could not delete the session: {}",
                self.opts.prefix(),
                f.into_error()
            ),
        }
        self.auth = Auth::Pending;
    }

    /// One call with its retries and at most one new login.
    fn call(
        &mut self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
        timeout: Duration,
    ) -> Result<Reply, RedfishError> {
        self.ensure_auth()?;
        let mut attempt = 1;
        let mut logged_in_again = false;
        let mut stale_retried = false;
        loop {
            let outcome = match self.send_once(&method, path, body, if_match, timeout, true) {
                // A second failure on a reused connection waits its turn like any other.
                Err(Failure::Stale(err)) if stale_retried => Err(Failure::Transient {
                    err,
                    retry_after: None,
                }),
                o => o,
            };
            match outcome {
                Ok(reply) => return Ok(reply),
                Err(Failure::Stale(err)) => {
                    // The BMC closed the kept-alive connection as the request reached it, so it
                    // never read it: once more at once; the pool has dropped that connection.
                    stale_retried = true;
                    debug!(target: "ibi::redfish::client", "{err}: the reused connection had been closed; again on a new one");
                }
                Err(Failure::Unauthorized(_))
                    if matches!(self.auth, Auth::Session { .. }) && !logged_in_again =>
                {
                    // Sessions expire (iLO after 30 min idle); one new login, then give up.
                    logged_in_again = true;
                    self.auth = Auth::Pending;
                    self.ensure_auth()?;
                }
                Err(Failure::Transient { err, retry_after })
                    if attempt < self.opts.retry.attempts =>
                {
                    attempt += 1;
                    let wait = self.opts.retry.delay(attempt, retry_after);
                    warn!(target: "ibi::redfish::client",
                        "{}{err}; try {attempt} of {} in {wait:?}",
                        self.opts.prefix(),
                        self.opts.retry.attempts
                    );
                    sleep(wait);
                }
                Err(f) => return Err(f.into_error()),
            }
        }
    }

    fn ensure_auth(&mut self) -> Result<(), RedfishError> {
        if !matches!(self.auth, Auth::Pending) {
            return Ok(());
        }
        let Some(creds) = self.creds.clone() else {
            self.auth = Auth::Anonymous;
            return Ok(());
        };
        self.auth = match self.login(&creds) {
            Ok(Some(session)) => session,
            Ok(None) => Auth::Basic,
            Err(e @ (RedfishError::Tls { .. } | RedfishError::Timeout { .. })) => return Err(e),
            Err(e) => {
                debug!(target: "ibi::redfish::client", "session login failed ({e}); using Basic auth");
                Auth::Basic
            }
        };
        Ok(())
    }

    /// Logs in through the SessionService the service root links to; `None` when it has none.
    fn login(&mut self, creds: &Credentials) -> Result<Option<Auth>, RedfishError> {
        let t = self.opts.request_timeout;
        let root = self
            .send_once(&Method::GET, "/redfish/v1/", None, None, t, false)
            .map_err(Failure::into_error)?;
        let Some(uri) = root
            .body
            .pointer("/Links/Sessions/@odata.id")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return Ok(None);
        };
        let body = json!({"UserName": creds.user, "Password": creds.password.expose_str()});
        let reply = self
            .send_once(&Method::POST, &uri, Some(&body), None, t, false)
            .map_err(Failure::into_error)?;
        let Some(token) = reply.token.clone() else {
            return Ok(None);
        };
        let uri = reply.location.clone().or_else(|| odata_id(&reply.body));
        debug!(target: "ibi::redfish::client", bmc = %self.origin, "logged in with a session");
        self.redact.push(token.clone());
        Ok(Some(Auth::Session { token, uri }))
    }

    /// Follows a 202's task monitor until the task is over or `timeout` passes.
    fn follow_task(&mut self, reply: Reply, timeout: Duration) -> Result<Reply, RedfishError> {
        let Some(monitor) = reply.location.clone().filter(|_| reply.status == 202) else {
            return Ok(reply);
        };
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.get(&monitor)?;
            let state = r.body.get("TaskState").and_then(Value::as_str);
            match state {
                Some(s) if TASK_FAILED_STATES.contains(&s) => {
                    return Err(RedfishError::TaskFailed {
                        bmc: self.origin.clone(),
                        task: monitor,
                        state: s.to_string(),
                        message: escape_control(&scrub(&task_messages(&r.body), &self.redact)),
                    });
                }
                Some(TASK_DONE_STATE) => return Ok(r),
                None if r.status != 202 => return Ok(r),
                _ => {}
            }
            if Instant::now() >= deadline {
                return Err(RedfishError::Timeout {
                    bmc: self.origin.clone(),
                    call: format!("task {monitor}"),
                    seconds: timeout.as_secs(),
                });
            }
            sleep(TASK_POLL);
        }
    }

    /// Sends one request and sorts the outcome.
    fn send_once(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<&str>,
        timeout: Duration,
        authenticated: bool,
    ) -> Result<Reply, Failure> {
        let url = self
            .base
            .join(path)
            .map_err(|e| Failure::Final(self.protocol(path, format!("bad path: {e}"))))?;
        let call = format!("{method} {}", url.path());
        let mut req = self
            .http
            .request(method.clone(), url)
            .timeout(timeout)
            .header(ACCEPT, "application/json")
            .header(ACCEPT_ENCODING, "identity")
            .header("OData-Version", "4.0");
        if let Some(body) = body {
            req = req
                .header(CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        if let Some(etag) = if_match {
            req = req.header("If-Match", etag);
        }
        if authenticated {
            req = self.authorize(req);
        }
        debug!(target: "ibi::redfish::client", bmc = %self.origin, %call, "redfish request");
        let opened = self.opened.load(Ordering::Relaxed);
        self.sent.fetch_add(1, Ordering::Relaxed);
        let resp = req
            .send()
            .map_err(|e| self.transport_failure(method, &call, &e, timeout, opened))?;
        self.sort_response(method, &call, resp)
    }

    fn authorize(&self, req: RequestBuilder) -> RequestBuilder {
        match (&self.auth, &self.creds) {
            (Auth::Session { token, .. }, _) => req.header(AUTH_TOKEN_HEADER, token.expose_str()),
            (Auth::Basic, Some(c)) => req.basic_auth(&c.user, Some(c.password.expose_str())),
            _ => req,
        }
    }

    fn sort_response(
        &self,
        method: &Method,
        call: &str,
        resp: reqwest::blocking::Response,
    ) -> Result<Reply, Failure> {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp
            .bytes()
            .map_err(|e| {
                // The BMC answered, so it acted: only a request that may be repeated is.
                if repeatable(method) {
                    Failure::Transient {
                        err: self.connection(call, &e),
                        retry_after: None,
                    }
                } else {
                    Failure::Final(self.connection(call, &e))
                }
            })?
            .to_vec();
        if status < 400 {
            return Ok(reply(status, &headers, &bytes));
        }
        let (message_ids, message) = error_details(&bytes);
        // The BMC's words, escaped here (newlines too), so no error that carries them can move a
        // terminal's cursor or print a line of the BMC's own, whoever prints it.
        let message_ids = message_ids.iter().map(|m| escape_control(m)).collect();
        let (bmc, call, message) = (
            self.origin.clone(),
            call.to_string(),
            escape_control(&scrub(&message, &self.redact)),
        );
        Err(match status {
            401 | 403 => Failure::Unauthorized(RedfishError::Unauthorized {
                bmc,
                call,
                status,
                user_given: self.creds.is_some(),
            }),
            404 => Failure::Final(RedfishError::NotFound { bmc, call, message }),
            500 | 502..=504 => Failure::Transient {
                retry_after: retry_after(&headers),
                err: RedfishError::Status {
                    bmc,
                    call,
                    status,
                    message_ids,
                    message,
                },
            },
            _ => Failure::Final(RedfishError::Status {
                bmc,
                call,
                status,
                message_ids,
                message,
            }),
        })
    }

    /// Sorts a request that got no answer. `opened` is the connection count before it was sent:
    /// unchanged, it went out on a reused connection.
    fn transport_failure(
        &self,
        method: &Method,
        call: &str,
        e: &reqwest::Error,
        timeout: Duration,
        opened: usize,
    ) -> Failure {
        if e.is_timeout() {
            return Failure::Final(RedfishError::Timeout {
                bmc: self.origin.clone(),
                call: call.to_string(),
                seconds: timeout.as_secs(),
            });
        }
        if is_certificate_failure(e) {
            return Failure::Final(RedfishError::Tls {
                bmc: self.origin.clone(),
                call: call.to_string(),
                detail: innermost(e),
                ca_given: matches!(self.opts.trust, Trust::Ca(_)),
            });
        }
        let err = self.connection(call, e);
        if !e.is_connect() && self.opened.load(Ordering::Relaxed) == opened {
            return Failure::Stale(err);
        }
        if e.is_connect() || repeatable(method) {
            // Nothing was sent, or sending it again does no harm.
            return Failure::Transient {
                err,
                retry_after: None,
            };
        }
        // A POST on a new connection that broke after it was sent: the BMC may have acted on it
        // (powered on, inserted), and a second one could fail or act twice.
        Failure::Final(RedfishError::Connection {
            bmc: self.origin.clone(),
            call: call.to_string(),
            detail: format!(
                "{} (after the request was sent; not sent again, as the BMC may have acted on it)",
                scrub(&innermost(e), &self.redact)
            ),
        })
    }

    fn connection(&self, call: &str, e: &reqwest::Error) -> RedfishError {
        RedfishError::Connection {
            bmc: self.origin.clone(),
            call: call.to_string(),
            detail: scrub(&innermost(e), &self.redact),
        }
    }

    fn protocol(&self, call: &str, detail: String) -> RedfishError {
        RedfishError::Protocol {
            bmc: self.origin.clone(),
            call: call.to_string(),
            detail,
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.logout();
    }
}

impl Failure {
    fn into_error(self) -> RedfishError {
        match self {
            Failure::Transient { err, .. }
            | Failure::Stale(err)
            | Failure::Unauthorized(err)
            | Failure::Final(err) => err,
        }
    }
}

/// Whether a request may be sent again after a failure that leaves unknown whether the BMC got
/// it. PATCH is, here: ibi's PATCHes set values (a boot override, an image), they do not add.
fn repeatable(method: &Method) -> bool {
    method.is_idempotent() || *method == Method::PATCH
}

/// A connector layer that counts the connections the pool opens.
#[derive(Clone)]
struct CountConnections(Arc<AtomicUsize>);

impl<S> tower_layer::Layer<S> for CountConnections {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            opened: self.0.clone(),
        }
    }
}

#[derive(Clone)]
struct Counted<S> {
    inner: S,
    opened: Arc<AtomicUsize>,
}

impl<S: tower_service::Service<R>, R> tower_service::Service<R> for Counted<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> S::Future {
        self.opened.fetch_add(1, Ordering::Relaxed);
        self.inner.call(req)
    }
}

/// The HTTP client: at most one idle connection to the BMC, kept [`IDLE_KEPT`]. A connection the
/// BMC closes while idle is noticed and dropped by the pool; one it closes as a request arrives is
/// [`Failure::Stale`].
fn build_http(trust: &Trust, opened: &Arc<AtomicUsize>) -> Result<Http, NoHttp> {
    let builder = Http::builder()
        .user_agent(concat!("ibi/", env!("CARGO_PKG_VERSION")))
        .pool_max_idle_per_host(1)
        .pool_idle_timeout(IDLE_KEPT)
        .connector_layer(CountConnections(opened.clone()));
    let builder = match trust {
        Trust::System => builder,
        Trust::Insecure => builder.tls_danger_accept_invalid_certs(true),
        Trust::Ca(pem) => {
            let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(NoHttp::CaBundle)?;
            if certs.is_empty() {
                return Err(NoHttp::EmptyCaBundle);
            }
            builder.tls_certs_only(certs)
        }
    };
    builder.build().map_err(|e| NoHttp::Client(innermost(&e)))
}

/// Why no HTTP client could be made for a BMC.
#[derive(Debug, thiserror::Error)]
enum NoHttp {
    #[error("reading the CA bundle: {0}")]
    CaBundle(reqwest::Error),
    #[error("the CA bundle holds no certificate")]
    EmptyCaBundle,
    /// reqwest's innermost cause.
    #[error("{0}")]
    Client(String),
}

fn reply(status: u16, headers: &HeaderMap, bytes: &[u8]) -> Reply {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    Reply {
        status,
        etag: header("ETag"),
        location: header("Location"),
        token: header(AUTH_TOKEN_HEADER).map(Secret::new),
        body: serde_json::from_slice(bytes).unwrap_or(Value::Null),
    }
}

/// `Retry-After` in seconds (the HTTP-date form is not used by BMCs), capped.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let secs: u64 = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
}

fn task_messages(task: &Value) -> String {
    task.get("Messages")
        .and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .filter_map(|m| m.get("Message").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_default()
}

pub(super) fn odata_id(v: &Value) -> Option<String> {
    v.get("@odata.id")
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn origin_of(url: &Url) -> String {
    let host = url.host_str().unwrap_or("?");
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    match url.port() {
        Some(p) => format!("{}://{host}:{p}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// The deepest cause's text: reqwest's own is "error sending request", which says nothing.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// OpenSSL's verification failures ("certificate verify failed", hostname mismatch) are
/// permanent: retrying them only delays the message.
fn is_certificate_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        let text = c.to_string();
        if text.contains("certificate verify failed") || text.contains("self-signed certificate") {
            return true;
        }
        cur = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_and_obeys_retry_after() {
        let p = RetryPolicy {
            attempts: 5,
            first_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(3),
        };
        let waits: Vec<u64> = (2..=5).map(|n| p.delay(n, None).as_secs()).collect();
        assert_eq!(waits, [1, 2, 3, 3]);
        assert_eq!(p.delay(2, Some(Duration::from_secs(7))).as_secs(), 7);
    }

    #[test]
    fn origins_carry_no_path_and_no_credentials() {
        let cases = [
            (
                "https://admin:pw@10.1.2.3:8000/redfish/v1/Systems/1",
                "https://10.1.2.3:8000",
            ),
            ("http://bmc.example/redfish/v1/", "http://bmc.example"),
            ("https://[fd00::1]:443/redfish/v1", "https://[fd00::1]"),
        ];
        for (url, want) in cases {
            let u = Url::parse(url).unwrap();
            assert_eq!(origin_of(&u), want, "{url}");
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_capped() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(RETRY_AFTER, "5".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(5)));
        h.insert(RETRY_AFTER, "86400".parse().unwrap());
        assert_eq!(retry_after(&h), Some(MAX_RETRY_AFTER));
    }

    /// What a scripted server does with one request it has read.
    #[derive(Clone, Copy)]
    enum Step {
        Answer(u16),
        /// Close the connection without an answer: a BMC's keep-alive timeout firing as the
        /// request arrives, or a BMC that drops a connection it has read a request from.
        Close,
    }

    /// A web server that follows a script per connection (the Nth accepted connection plays
    /// `scripts[N]`), standing in for a BMC where the emulator cannot be made to misbehave on
    /// cue. Returns its URL and the count of connections it accepted.
    fn scripted(scripts: Vec<Vec<Step>>) -> (Url, Arc<AtomicUsize>) {
        use std::io::{BufRead, BufReader, Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            for script in scripts {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let mut out = stream.try_clone().unwrap();
                    let mut r = BufReader::new(stream);
                    for step in script {
                        let mut length = 0;
                        loop {
                            let mut line = String::new();
                            if r.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                            let lower = line.to_ascii_lowercase();
                            if let Some(v) = lower.strip_prefix("content-length:") {
                                length = v.trim().parse().unwrap();
                            }
                            if line == "\r\n" {
                                break;
                            }
                        }
                        r.read_exact(&mut vec![0; length]).unwrap();
                        match step {
                            Step::Answer(204) => out.write_all(b"HTTP/1.1 204 No Content\r\n\r\n"),
                            Step::Answer(code) => out.write_all(
                                format!("HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}").as_bytes(),
                            ),
                            Step::Close => return,
                        }
                        .unwrap();
                    }
                    // Kept open until the client closes it.
                    let _ = r.read_to_end(&mut Vec::new());
                });
            }
        });
        (url, accepted)
    }

    fn client_for(url: &Url) -> Client {
        let opts = ClientOptions {
            trust: Trust::System,
            credentials: None,
            request_timeout: Duration::from_secs(10),
            label: None,
            retry: RetryPolicy {
                attempts: 4,
                first_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(1),
            },
        };
        Client::new(url, opts).unwrap()
    }

    #[test]
    fn calls_share_one_kept_alive_connection() {
        use Step::Answer;
        let (url, accepted) = scripted(vec![vec![Answer(200), Answer(204), Answer(200)]]);
        let mut c = client_for(&url);
        c.get("/redfish/v1/").unwrap();
        c.post("/redfish/v1/x", &json!({})).unwrap();
        c.get("/redfish/v1/Systems").unwrap();
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        assert_eq!(c.usage(), (1, 3));
    }

    #[test]
    fn a_connection_closed_under_a_request_is_retried_only_when_that_is_safe() {
        use Step::{Answer, Close};
        // (scripts, calls after a first GET, whether the last call succeeds, connections)
        let cases: [(Vec<Vec<Step>>, Method, bool, usize); 4] = [
            // Reused connection closed as the request came: any method again at once.
            (
                vec![vec![Answer(200), Close], vec![Answer(200)]],
                Method::GET,
                true,
                2,
            ),
            (
                vec![vec![Answer(200), Close], vec![Answer(204)]],
                Method::POST,
                true,
                2,
            ),
            // A new connection that broke after the request: GET is repeated (with backoff),
            // POST is not, as the BMC may have acted on it.
            (
                vec![vec![Answer(200)], vec![Close], vec![Answer(200)]],
                Method::GET,
                true,
                3,
            ),
            (
                vec![vec![Answer(200)], vec![Close], vec![Answer(204)]],
                Method::POST,
                false,
                2,
            ),
        ];
        for (scripts, method, ok, connections) in cases {
            let fresh = scripts[0].len() == 1;
            let (url, accepted) = scripted(scripts);
            let mut c = client_for(&url);
            c.get("/redfish/v1/").unwrap();
            if fresh {
                // Drop the first connection so the next call opens a new one.
                c = client_for(&url);
            }
            let r = match method {
                Method::GET => c.get("/redfish/v1/Systems"),
                _ => c.post(
                    "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset",
                    &json!({}),
                ),
            };
            assert_eq!(r.is_ok(), ok, "{method} fresh={fresh}: {r:?}");
            if let Err(e) = r {
                assert!(
                    e.to_string()
                        .contains("not sent again, as the BMC may have acted on it"),
                    "{e}"
                );
            }
            assert_eq!(
                accepted.load(Ordering::SeqCst),
                connections,
                "{method} fresh={fresh}"
            );
        }
    }

    #[test]
    fn credentials_debug_hides_the_password() {
        let c = Credentials {
            user: "admin".into(),
            password: Secret::new("s3cret-pw"),
        };
        let shown = format!("{c:?}");
        assert!(
            shown.contains("admin") && !shown.contains("s3cret-pw"),
            "{shown}"
        );
    }
}
