//! Runs `ibi serve`: prepares the image map and TLS, then serves on tokio until SIGINT or SIGTERM.

use std::future::Future;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::PathBuf;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use openssl::ssl::{Ssl, SslAcceptor};
use reqwest::Url;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::task::JoinSet;
use tracing::{debug, info, warn};

use super::access_log::AccessLog;
use super::catalog::{Alias, HostToken, Image, ServedEntry, ServedFile};
use super::dashboard::{Dashboard, PageFn};
use super::handler::State;
use super::limits::{Dropped, Limits};
use super::report::Reports;
use super::site_fetch::SiteFetches;
use super::source::{Cache, open};
use super::tls::Host;
use crate::util::secret::Secret;

/// A client must send its first byte (the TLS ClientHello, or the request line) within this of
/// connecting, or it is dropped: a socket opened and left silent holds a slot for this long only.
const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(5);
/// A client that has started must finish its TLS handshake, and each request's headers, within
/// this. hyper starts it again when an answer ends, so it is also how long an idle keep-alive
/// connection is kept between two requests.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// On stop, answers under way get this long before connections are dropped.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Connections served at once; more wait in the kernel's backlog. Bounds memory.
const MAX_CONNECTIONS: usize = 256;
/// Connections one client address may hold at once (a BMC uses one to four); more are closed at
/// once, so one address can neither fill [`MAX_CONNECTIONS`] nor keep another's from being accepted.
pub const PER_ADDRESS_DEFAULT: usize = 32;
/// `ibi serve`'s lock on its DIR, held while it runs (taken by the command, not by [`prepare`]:
/// `ibi deploy` prepares a server too, under its own lock).
pub const LOCK_FILE: &str = ".ibi/serve.lock";
/// Dropped connections are summed up in one log line this often (when there were any).
const DROP_REPORT_EVERY: Duration = Duration::from_secs(10);
/// Threads for hashing a rebuilt image while others are served.
const BLOCKING_THREADS: usize = 4;

/// How the server speaks.
#[derive(Debug, Clone)]
pub enum TlsChoice {
    /// The user's certificate chain and key.
    Files { cert: PathBuf, key: PathBuf },
    /// A self-signed certificate kept under DIR/.ibi/.
    SelfSigned,
    /// Plain HTTP, only when asked for.
    Plain,
}

#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub dir: PathBuf,
    pub listen: SocketAddr,
    pub tls: TlsChoice,
    /// The base URL BMCs reach the server at; default `scheme://listen`.
    pub public_url: Option<Url>,
    pub rotate_tokens: bool,
    /// Also every built site's one-shot installation ISO, streamed over the installation ISO.
    pub one_shot: bool,
    /// Serve only these images (`ibi deploy`); `None`: everything under `dir`.
    pub selection: Option<Selection>,
    /// Also the live status page, under a token of its own (`--dashboard`).
    pub dashboard: Option<DashboardOptions>,
}

/// The status page to serve: what makes it, and the script that refreshes it in the browser.
#[derive(Clone)]
pub struct DashboardOptions {
    pub page: PageFn,
    pub script: &'static str,
    /// The page's Content-Security-Policy, also sent as its header.
    pub policy: &'static str,
}

impl std::fmt::Debug for DashboardOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DashboardOptions")
    }
}

/// What `ibi deploy` serves: one alias per host and phase, with the map and the access log in files
/// of their own, so a deploy neither rewrites `ibi serve`'s map nor prints between its progress bars.
#[derive(Debug, Clone)]
pub struct Selection {
    pub aliases: Vec<Alias>,
    /// The map's path.
    pub map_file: PathBuf,
    /// Where the access-log lines are appended.
    pub access_log: PathBuf,
}

/// A bound, hashed, ready server.
pub struct Prepared {
    listener: StdListener,
    acceptor: Option<SslAcceptor>,
    state: Arc<State>,
    per_address: usize,
    /// The certificate path and whether it was just made (self-signed only).
    pub certificate: Option<(PathBuf, bool)>,
    pub address: SocketAddr,
    /// The status page's URL (its token in it), when it is served.
    pub dashboard_url: Option<Secret>,
}

impl Prepared {
    pub fn entries(&self) -> Vec<ServedEntry> {
        self.state.served.entries()
    }

    /// At most `n` connections at once from one client address ([`PER_ADDRESS_DEFAULT`] unless
    /// set); 0 is taken as 1.
    pub fn per_address(mut self, n: usize) -> Prepared {
        self.per_address = n.max(1);
        self
    }

    /// Serves until SIGINT or SIGTERM.
    pub fn serve(self) -> Result<()> {
        let rt = runtime()?;
        let stop = rt.block_on(async { stop_signal() })?;
        let limits = self.limits();
        rt.block_on(run(
            self.listener,
            self.acceptor.map(Arc::new),
            self.state,
            limits,
            stop,
        ))?;
        eprintln!("ibi serve: stopped");
        Ok(())
    }

    /// Serves on a thread of its own until [`Running::stop`] (or drop): `ibi deploy`'s server,
    /// in the process that drives the BMCs.
    pub fn start(self) -> Result<Running> {
        let rt = runtime()?;
        let (tx, rx) = oneshot::channel::<()>();
        let state = self.state.clone();
        let limits = self.limits();
        let (listener, acceptor) = (self.listener, self.acceptor.map(Arc::new));
        let stop = async move {
            let _ = rx.await;
            Ok(())
        };
        let thread = std::thread::Builder::new()
            .name("ibi-serve".into())
            .spawn(move || rt.block_on(run(listener, acceptor, state, limits, stop)))
            .context("starting the server thread")?;
        Ok(Running {
            stop: Some(tx),
            thread: Some(thread),
            state: self.state,
            address: self.address,
        })
    }

    fn limits(&self) -> Arc<Limits> {
        Arc::new(Limits::new(
            self.per_address,
            FIRST_BYTE_TIMEOUT,
            self.state.log.clone(),
        ))
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()
        .context("starting the server runtime")
}

/// A server started by [`Prepared::start`]; stopped when dropped.
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
    state: Arc<State>,
    pub address: SocketAddr,
}

impl Running {
    pub fn entries(&self) -> Vec<ServedEntry> {
        self.state.served.entries()
    }

    /// The live count of bytes of image `name` sent, for a job on another thread.
    pub fn counter(&self, name: &str) -> Option<Arc<std::sync::atomic::AtomicU64>> {
        self.state
            .images
            .iter()
            .find(|i| i.name == name)
            .map(|i| i.sent.clone())
    }

    /// Bytes of image `name` sent so far.
    pub fn sent(&self, name: &str) -> u64 {
        self.state
            .images
            .iter()
            .find(|i| i.name == name)
            .map_or(0, |i| i.sent.load(Ordering::Relaxed))
    }

    /// Stops accepting, gives answers under way a short grace, and waits for the thread.
    pub fn stop(mut self) -> Result<()> {
        self.halt()
    }

    fn halt(&mut self) -> Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => bail!("the server thread panicked"),
            None => Ok(()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Err(e) = self.halt() {
            warn!("stopping the server: {e:#}");
        }
    }
}

/// Binds, prepares TLS and the image map (hashing every image), writes served.json.
pub fn prepare(opts: &ServeOptions) -> Result<Prepared> {
    let listener =
        StdListener::bind(opts.listen).with_context(|| format!("listening on {}", opts.listen))?;
    listener
        .set_nonblocking(true)
        .context("setting up the listener")?;
    let address = listener.local_addr().context("reading the bound address")?;
    let plain = matches!(opts.tls, TlsChoice::Plain);
    if plain {
        warn!(
            "--plain-http: image URLs and report tokens travel in clear text; anyone on the network \
             path can read them and fetch the images, which hold the pull secret (and a site's \
             cluster keys)"
        );
    }
    let public = public_base(opts.public_url.as_ref(), address, plain)?;
    let (acceptor, certificate) = setup_tls(opts, address, &public)?;
    let mut found = super::catalog::discover(&opts.dir)?;
    if opts.one_shot {
        super::catalog::add_one_shot(&opts.dir, &mut found)?;
    }
    if let Some(sel) = &opts.selection {
        found = super::catalog::select(&opts.dir, found, &sel.aliases)?;
    }
    let images = super::catalog::assign_tokens(&opts.dir, found, opts.rotate_tokens)?;
    let cache = Cache::default();
    let entries = images
        .iter()
        .map(|img| entry(img, &cache, public.as_str()))
        .collect::<Result<Vec<_>>>()?;
    let (served, log) = match &opts.selection {
        None => (ServedFile::create(&opts.dir, entries)?, AccessLog::Stderr),
        Some(sel) => (
            ServedFile::create_at(sel.map_file.clone(), entries)?,
            AccessLog::append_to(&sel.access_log)?,
        ),
    };
    let log = Arc::new(log);
    let dashboard = match &opts.dashboard {
        Some(d) => Some(Arc::new(Dashboard::new(
            &opts.dir,
            opts.rotate_tokens,
            d.page.clone(),
            d.script,
            d.policy,
        )?)),
        None => None,
    };
    let dashboard_url = dashboard.as_ref().map(|d| {
        Secret::new(format!(
            "{}{}",
            public.as_str().trim_end_matches('/'),
            d.path().expose_str()
        ))
    });
    let state = Arc::new(State {
        images,
        cache,
        served,
        reports: Arc::new(Reports::new(
            opts.dir.clone(),
            log.clone(),
            host_tokens(opts),
        )),
        site_fetches: SiteFetches::new(site_fetch_hosts(opts)),
        log,
        dashboard,
    });
    Ok(Prepared {
        listener,
        acceptor,
        state,
        per_address: PER_ADDRESS_DEFAULT,
        certificate,
        address,
        dashboard_url,
    })
}

/// The hosts' own report tokens deploy's aliases carry.
fn host_tokens(opts: &ServeOptions) -> Vec<HostToken> {
    opts.selection
        .iter()
        .flat_map(|s| s.aliases.iter().filter_map(|a| a.host.clone()))
        .collect()
}

/// deploy's one-shot hosts (their own token and their site), which may fetch their site's ISO.
fn site_fetch_hosts(opts: &ServeOptions) -> Vec<(HostToken, PathBuf)> {
    opts.selection
        .iter()
        .flat_map(|s| s.aliases.iter())
        .filter_map(|a| Some((a.host.clone()?, a.site.clone()?)))
        .collect()
}

fn entry(img: &Image, cache: &Cache, public: &str) -> Result<ServedEntry> {
    let opened = open(&img.source, cache).with_context(|| format!("preparing {}", img.name))?;
    Ok(ServedEntry {
        name: img.name.clone(),
        file: img.source.path().display().to_string(),
        url: super::catalog::url_for(public, img),
        sha256: opened.sha256,
        size: opened.size,
    })
}

/// The URL prefix BMCs are given. Listening on every address, the server cannot guess which one a
/// BMC reaches, so the user must say. (`ibi deploy`'s pre-flight asks this too, before it starts.)
pub fn public_base(given: Option<&Url>, address: SocketAddr, plain: bool) -> Result<Url> {
    let scheme = if plain { "http" } else { "https" };
    let url = match given {
        Some(u) => u.clone(),
        None if address.ip().is_unspecified() => bail!(
            "listening on {address}: pass --public-url with the address BMCs reach this host at (e.g. {scheme}://192.0.2.10:{})",
            address.port()
        ),
        None => Url::parse(&format!("{scheme}://{address}/")).context("building the public URL")?,
    };
    if url.scheme() != scheme {
        bail!(
            "--public-url {url} is {} but the server speaks {scheme}",
            url.scheme()
        );
    }
    if url.host_str().is_none() {
        bail!("--public-url {url} has no host");
    }
    Ok(url)
}

type Certificate = Option<(PathBuf, bool)>;

fn setup_tls(
    opts: &ServeOptions,
    address: SocketAddr,
    public: &Url,
) -> Result<(Option<SslAcceptor>, Certificate)> {
    match &opts.tls {
        TlsChoice::Plain => Ok((None, None)),
        TlsChoice::Files { cert, key } => Ok((
            Some(super::tls::acceptor(cert, key)?),
            Some((cert.clone(), false)),
        )),
        TlsChoice::SelfSigned => {
            let mut hosts = Vec::new();
            if !address.ip().is_unspecified() {
                hosts.push(Host::Ip(address.ip()));
            }
            if let Some(h) = public
                .host_str()
                .map(Host::parse)
                .filter(|h| !hosts.contains(h))
            {
                hosts.push(h);
            }
            let (cert, key, made) = super::tls::ensure_self_signed(&opts.dir, &hosts)?;
            Ok((Some(super::tls::acceptor(&cert, &key)?), Some((cert, made))))
        }
    }
}

/// Serves until `stop` resolves.
async fn run(
    listener: StdListener,
    acceptor: Option<Arc<SslAcceptor>>,
    state: Arc<State>,
    limits: Arc<Limits>,
    stop: impl Future<Output = Result<()>>,
) -> Result<()> {
    let listener = TcpListener::from_std(listener).context("registering the listener")?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut conns = JoinSet::new();
    let reporter = tokio::spawn(report_drops(limits.clone()));
    let mut stop = pin!(stop);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.context("connection limit")?,
            r = &mut stop => { r?; break; }
        };
        let (tcp, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => { warn!("accepting a connection: {e}"); continue; }
            },
            r = &mut stop => { r?; break; }
        };
        // Over its address's share: closed at once, its slot free for the next client.
        let Some(slot) = limits.admit(peer.ip()) else {
            continue;
        };
        let (st, acc, rx, lim) = (
            state.clone(),
            acceptor.clone(),
            stop_rx.clone(),
            limits.clone(),
        );
        conns.spawn(async move {
            serve_connection(tcp, peer, acc, st, rx, lim).await;
            drop((slot, permit));
        });
        while conns.try_join_next().is_some() {}
    }
    info!("stopping: {} connection(s) open", conns.len());
    let _ = stop_tx.send(true);
    drop(listener);
    if tokio::time::timeout(STOP_GRACE, async {
        while conns.join_next().await.is_some() {}
    })
    .await
    .is_err()
    {
        warn!("{} download(s) cut short by the stop", conns.len());
        conns.abort_all();
    }
    reporter.abort();
    limits.report();
    Ok(())
}

/// Sums up dropped connections every [`DROP_REPORT_EVERY`]; one line a period at most.
async fn report_drops(limits: Arc<Limits>) {
    let first = tokio::time::Instant::now() + DROP_REPORT_EVERY;
    let mut every = tokio::time::interval_at(first, DROP_REPORT_EVERY);
    loop {
        every.tick().await;
        limits.report();
    }
}

/// A future that resolves on SIGINT or SIGTERM; the handlers are installed at once, before the
/// first accept, so a signal that arrives early stops cleanly too. Called inside the runtime.
fn stop_signal() -> Result<impl Future<Output = Result<()>>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("handling SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("handling SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        Ok(())
    })
}

async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    acceptor: Option<Arc<SslAcceptor>>,
    state: Arc<State>,
    mut stop: watch::Receiver<bool>,
    limits: Arc<Limits>,
) {
    let _ = tcp.set_nodelay(true);
    // A socket that never speaks holds a slot only this long. peek leaves the byte for TLS or HTTP.
    let mut first = [0u8; 1];
    let spoke = tokio::select! {
        r = tokio::time::timeout(FIRST_BYTE_TIMEOUT, tcp.peek(&mut first)) => r,
        _ = stop.changed() => return,
    };
    match spoke {
        Ok(Ok(0)) => return, // closed without a word
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return debug!("{peer}: {e}"),
        Err(_) => return limits.dropped(peer.ip(), Dropped::Idle),
    }
    match acceptor {
        None => drive(TokioIo::new(tcp), peer, state, stop).await,
        Some(acc) => {
            let stream = match Ssl::new(acc.context())
                .and_then(|ssl| tokio_openssl::SslStream::new(ssl, tcp))
            {
                Ok(s) => s,
                Err(e) => return warn!("{peer}: TLS setup: {e}"),
            };
            let mut stream = Box::pin(stream);
            match tokio::time::timeout(HEADER_TIMEOUT, stream.as_mut().accept()).await {
                Ok(Ok(())) => drive(TokioIo::new(stream), peer, state, stop).await,
                Ok(Err(e)) => debug!("{peer}: TLS handshake failed: {e}"),
                Err(_) => debug!("{peer}: TLS handshake timed out"),
            }
        }
    }
}

async fn drive<I>(io: I, peer: SocketAddr, state: Arc<State>, mut stop: watch::Receiver<bool>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| super::handler::handle(state.clone(), peer, req));
    // writev(true): hyper queues our chunks instead of copying each into its own write buffer
    // (its default for a TLS stream, which is not vectored): one copy less, 400 KiB less a client.
    let conn = http1::Builder::new()
        .writev(true)
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(io, svc);
    let mut conn = pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r { debug!("{peer}: {e}"); }
        }
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            if let Err(e) = conn.await { debug!("{peer}: {e}"); }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_url_follows_the_listener_or_is_required() {
        let local: SocketAddr = "127.0.0.1:8443".parse().unwrap();
        assert_eq!(
            public_base(None, local, false).unwrap().as_str(),
            "https://127.0.0.1:8443/"
        );
        assert_eq!(
            public_base(None, local, true).unwrap().as_str(),
            "http://127.0.0.1:8443/"
        );
        let any: SocketAddr = "0.0.0.0:8443".parse().unwrap();
        let err = public_base(None, any, false).unwrap_err().to_string();
        assert!(err.contains("--public-url"), "{err}");
        let given = Url::parse("https://ibi.example:9000/x/").unwrap();
        assert_eq!(public_base(Some(&given), any, false).unwrap(), given);
        let err = public_base(Some(&given), any, true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is https but the server speaks http"), "{err}");
    }
}
