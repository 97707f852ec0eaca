//! Downloads of the base ISO against a tiny HTTP/1.1 server on 127.0.0.1 written here with std: plain
//! download, resume after a cut connection, retry after a 500, fast failure on a 404, checksum mismatch,
//! cache reuse, xz decompression and two concurrent fetches that download once. No other network.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use ibi::install_image::base_iso::{BaseIsoOptions, BaseIsoSource, fetch};

const ISO_LEN: usize = 256 * 1024;
const CHUNK: usize = 4096;

/// How the server misbehaves; each one-shot fault applies to the first request(s) only.
#[derive(Default)]
struct Faults {
    /// Send only this many body bytes of the first response, then close the connection.
    cut_first_after: Option<usize>,
    /// Answer this many requests with 500 before serving.
    fail_500: AtomicUsize,
    /// Answer every request with 404.
    not_found: bool,
    /// Pause between body chunks, to make downloads overlap.
    chunk_delay: Duration,
}

struct Server {
    base: String,
    /// The `Range` header of each request received, in order (`None` when absent).
    requests: Arc<Mutex<Vec<Option<String>>>>,
}

impl Server {
    fn start(body: Vec<u8>, faults: Faults) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new((body, faults, AtomicBool::new(false), requests.clone()));
        thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let shared = shared.clone();
                thread::spawn(move || {
                    let (body, faults, cut_done, requests) = &*shared;
                    serve(conn, body, faults, cut_done, requests);
                });
            }
        });
        Server { base, requests }
    }

    fn requests(&self) -> Vec<Option<String>> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    mut conn: TcpStream,
    body: &[u8],
    faults: &Faults,
    cut_done: &AtomicBool,
    requests: &Mutex<Vec<Option<String>>>,
) {
    let range = read_range_header(&conn);
    requests.lock().unwrap().push(range.clone());
    if faults.not_found {
        return respond_empty(&mut conn, "404 Not Found");
    }
    let fail = faults.fail_500.load(Ordering::SeqCst);
    if fail > 0 {
        faults.fail_500.store(fail - 1, Ordering::SeqCst);
        return respond_empty(&mut conn, "500 Internal Server Error");
    }
    let start: usize = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .map_or(0, |n| n.parse().unwrap());
    let len = body.len();
    let head = if range.is_some() {
        format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {start}-{}/{len}\r\n",
            len - 1
        )
    } else {
        "HTTP/1.1 200 OK\r\n".to_string()
    };
    let head = format!(
        "{head}Content-Length: {}\r\nConnection: close\r\n\r\n",
        len - start
    );
    if conn.write_all(head.as_bytes()).is_err() {
        return;
    }
    let mut rest = &body[start..];
    if let Some(k) = faults.cut_first_after
        && !cut_done.swap(true, Ordering::SeqCst)
    {
        rest = &rest[..k];
    }
    for chunk in rest.chunks(CHUNK) {
        thread::sleep(faults.chunk_delay);
        if conn.write_all(chunk).is_err() {
            return;
        }
    }
}

fn read_range_header(conn: &TcpStream) -> Option<String> {
    let mut range = None;
    for line in BufReader::new(conn).lines() {
        let line = line.unwrap();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("range")
        {
            range = Some(v.trim().to_string());
        }
    }
    range
}

fn respond_empty(conn: &mut TcpStream, status: &str) {
    let msg = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let _ = conn.write_all(msg.as_bytes());
}

fn iso_bytes() -> Vec<u8> {
    (0..ISO_LEN).map(|i| (i * 31 % 251) as u8).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    openssl::sha::sha256(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn options(cache: &Path) -> BaseIsoOptions {
    BaseIsoOptions {
        cache_dir: Some(cache.to_path_buf()),
        retry_backoff: Some(Duration::from_millis(10)),
        ..BaseIsoOptions::default()
    }
}

fn source(server: &Server, name: &str, sha256: Option<String>) -> BaseIsoSource {
    BaseIsoSource::Url {
        url: format!("{}/{name}", server.base),
        sha256,
    }
}

/// Names in the cache dir other than lock files: what a run left behind.
fn cache_entries(cache: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    names.sort();
    names
}

/// Every name in the cache dir, the lock included.
fn all_names(cache: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn downloads_verifies_and_caches_read_only() {
    let data = iso_bytes();
    let server = Server::start(data.clone(), Faults::default());
    let cache = tempfile::tempdir().unwrap();
    let src = source(&server, "rhcos-live.x86_64.iso", Some(sha256_hex(&data)));
    let path = fetch(&src, &options(cache.path())).unwrap();
    assert_eq!(path, cache.path().join("rhcos-live.x86_64.iso"));
    assert_eq!(fs::read(&path).unwrap(), data);
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o444);
    assert_eq!(server.requests(), vec![None]);
    assert_eq!(cache_entries(cache.path()), vec!["rhcos-live.x86_64.iso"]);
}

#[test]
fn resumes_with_range_after_a_cut_connection() {
    let data = iso_bytes();
    let cut = 10_000;
    let faults = Faults {
        cut_first_after: Some(cut),
        ..Faults::default()
    };
    let server = Server::start(data.clone(), faults);
    let cache = tempfile::tempdir().unwrap();
    let src = source(&server, "r.iso", Some(sha256_hex(&data)));
    let path = fetch(&src, &options(cache.path())).unwrap();
    assert_eq!(server.requests(), vec![None, Some(format!("bytes={cut}-"))]);
    assert_eq!(fs::read(path).unwrap(), data);
}

#[test]
fn resumes_a_part_file_left_by_an_earlier_run() {
    let data = iso_bytes();
    let server = Server::start(data.clone(), Faults::default());
    let cache = tempfile::tempdir().unwrap();
    fs::write(cache.path().join("r.iso.part"), &data[..5000]).unwrap();
    let path = fetch(&source(&server, "r.iso", None), &options(cache.path())).unwrap();
    assert_eq!(server.requests(), vec![Some("bytes=5000-".to_string())]);
    assert_eq!(fs::read(path).unwrap(), data);
}

#[test]
fn retries_after_a_500() {
    let data = iso_bytes();
    let faults = Faults {
        fail_500: AtomicUsize::new(1),
        ..Faults::default()
    };
    let server = Server::start(data.clone(), faults);
    let cache = tempfile::tempdir().unwrap();
    let path = fetch(&source(&server, "r.iso", None), &options(cache.path())).unwrap();
    assert_eq!(server.requests().len(), 2);
    assert_eq!(fs::read(path).unwrap(), data);
}

#[test]
fn gives_up_after_three_500s() {
    let faults = Faults {
        fail_500: AtomicUsize::new(10),
        ..Faults::default()
    };
    let server = Server::start(iso_bytes(), faults);
    let cache = tempfile::tempdir().unwrap();
    let err = fetch(&source(&server, "r.iso", None), &options(cache.path())).unwrap_err();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("after 3 attempts: HTTP status 500 Internal Server Error"),
        "{msg}"
    );
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn not_found_fails_at_once_with_the_status() {
    let faults = Faults {
        not_found: true,
        ..Faults::default()
    };
    let server = Server::start(iso_bytes(), faults);
    let cache = tempfile::tempdir().unwrap();
    let src = source(&server, "r.iso", None);
    let err = fetch(&src, &options(cache.path())).unwrap_err();
    let msg = format!("{err:#}");
    let want = format!(
        "downloading base ISO {}/r.iso: HTTP status 404 Not Found",
        server.base
    );
    assert_eq!(msg, want);
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn checksum_mismatch_removes_the_download() {
    let server = Server::start(iso_bytes(), Faults::default());
    let cache = tempfile::tempdir().unwrap();
    let wrong = sha256_hex(b"something else");
    let src = source(&server, "r.iso", Some(wrong.clone()));
    let err = fetch(&src, &options(cache.path())).unwrap_err();
    let found = sha256_hex(&iso_bytes());
    let want = format!(
        "checksum mismatch for {}: expected {wrong}, found {found}",
        cache.path().join("r.iso").display()
    );
    assert!(format!("{err:#}").ends_with(&want), "{err:#}");
    assert!(
        cache_entries(cache.path()).is_empty(),
        "{:?}",
        cache_entries(cache.path())
    );
}

#[test]
fn cached_file_is_reused_without_a_request_and_replaced_when_stale() {
    let data = iso_bytes();
    let server = Server::start(data.clone(), Faults::default());
    let cache = tempfile::tempdir().unwrap();
    let src = source(&server, "r.iso", Some(sha256_hex(&data)));
    let o = options(cache.path());
    fetch(&src, &o).unwrap();
    let path = fetch(&src, &o).unwrap();
    assert_eq!(
        server.requests().len(),
        1,
        "second fetch is served from the cache"
    );
    fs::remove_file(&path).unwrap();
    fs::write(&path, b"corrupted").unwrap();
    fetch(&src, &o).unwrap();
    assert_eq!(
        server.requests().len(),
        2,
        "a stale cached file is downloaded again"
    );
    assert_eq!(fs::read(path).unwrap(), data);
}

#[test]
fn a_checksum_typo_keeps_the_good_cached_file_and_failures_leave_no_locks() {
    let data = iso_bytes();
    let server = Server::start(data.clone(), Faults::default());
    let cache = tempfile::tempdir().unwrap();
    let o = options(cache.path());
    let good = fetch(&source(&server, "r.iso", Some(sha256_hex(&data))), &o).unwrap();
    let typo = source(&server, "r.iso", Some(sha256_hex(b"a typo")));
    let err = fetch(&typo, &o).unwrap_err();
    assert!(format!("{err:#}").contains("checksum mismatch"), "{err:#}");
    assert_eq!(
        fs::read(&good).unwrap(),
        data,
        "the good copy is still there"
    );
    assert_eq!(server.requests().len(), 2, "the typo was downloaded once");
    let missing = Server::start(
        iso_bytes(),
        Faults {
            not_found: true,
            ..Faults::default()
        },
    );
    fetch(&source(&missing, "other.iso", None), &o).unwrap_err();
    assert_eq!(all_names(cache.path()), [".lock", "r.iso"]);
    let again = fetch(&source(&server, "r.iso", Some(sha256_hex(&data))), &o).unwrap();
    assert_eq!(again, good);
    assert_eq!(server.requests().len(), 2, "served from the kept copy");
}

#[test]
fn xz_download_is_decompressed_and_its_content_verified() {
    let data = iso_bytes();
    let mut xz = liblzma::write::XzEncoder::new(Vec::new(), 1);
    xz.write_all(&data).unwrap();
    let server = Server::start(xz.finish().unwrap(), Faults::default());
    let cache = tempfile::tempdir().unwrap();
    let src = source(&server, "r.iso.xz", Some(sha256_hex(&data)));
    let path = fetch(&src, &options(cache.path())).unwrap();
    assert_eq!(path, cache.path().join("r.iso"));
    assert_eq!(fs::read(&path).unwrap(), data);
    assert_eq!(cache_entries(cache.path()), vec!["r.iso"]);
}

#[test]
fn concurrent_fetches_download_once() {
    let data = iso_bytes();
    let faults = Faults {
        chunk_delay: Duration::from_millis(2),
        ..Faults::default()
    };
    let server = Arc::new(Server::start(data.clone(), faults));
    let cache = tempfile::tempdir().unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (server, barrier) = (server.clone(), barrier.clone());
            let o = options(cache.path());
            let src = source(&server, "r.iso", Some(sha256_hex(&data)));
            thread::spawn(move || {
                barrier.wait();
                fetch(&src, &o).unwrap()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(fs::read(h.join().unwrap()).unwrap(), data);
    }
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn file_urls_work_offline_and_are_used_in_place() {
    let d = tempfile::tempdir().unwrap();
    let iso = d.path().join("r.iso");
    fs::write(&iso, iso_bytes()).unwrap();
    let src = BaseIsoSource::Url {
        url: format!("file://{}", iso.display()),
        sha256: Some(sha256_hex(&iso_bytes())),
    };
    let path = fetch(&src, &options(&d.path().join("cache"))).unwrap();
    assert_eq!(path, iso);
    let src = BaseIsoSource::Url {
        url: format!("file://{}", iso.display()),
        sha256: Some(sha256_hex(b"x")),
    };
    let err = fetch(&src, &options(&d.path().join("cache"))).unwrap_err();
    assert!(
        format!("{err:#}").starts_with("checksum mismatch for"),
        "{err:#}"
    );
    assert!(iso.exists());
}
