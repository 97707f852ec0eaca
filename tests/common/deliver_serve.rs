//! What the tests of tests/fast/deliver_serve.rs and tests/tools/deliver_serve.rs share: one file
//! of tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common::deliver::*;
use std::path::Path;
use std::process::{Command, Stdio};

pub(crate) const ISO: &str = "rhcos-ibi.iso";

pub(crate) struct Got {
    pub(crate) status: u16,
    pub(crate) headers: String,
    pub(crate) body: Vec<u8>,
}

/// One curl request trusting the serve certificate under `dir`.
pub(crate) fn fetch(dir: &Path, url: &str, extra: &[&str]) -> Got {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (h, b) = (tmp.path().join("h"), tmp.path().join("b"));
    let cacert = dir.join(".ibi/serve-tls.crt");
    let mut args = vec![
        "--cacert",
        cacert.to_str().expect("utf-8"),
        "-D",
        h.to_str().expect("utf-8"),
        "-o",
        b.to_str().expect("utf-8"),
        "-w",
        "%{http_code}",
    ];
    args.extend_from_slice(extra);
    args.push(url);
    let (_, out) = curl(&args);
    Got {
        status: String::from_utf8_lossy(&out).trim().parse().unwrap_or(0),
        headers: std::fs::read_to_string(&h)
            .unwrap_or_default()
            .to_ascii_lowercase(),
        body: std::fs::read(&b).unwrap_or_default(),
    }
}

pub(crate) fn header<'a>(g: &'a Got, name: &str) -> Option<&'a str> {
    g.headers
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .map(str::trim)
}

pub(crate) fn one_image(len: usize) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    write_random(&d.path().join(ISO), len, 7);
    d
}

pub(crate) fn wait_for_bytes(p: &Path, n: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::metadata(p).map_or(0, |m| m.len()) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "the download did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `ibi create image --dir DIR --base-iso BASE EXTRA…`, which must succeed.
pub(crate) fn create_image(dir: &Path, base: &Path, extra: &[&str]) {
    let mut args = vec![
        "create",
        "image",
        "--dir",
        dir.to_str().expect("utf-8"),
        "--base-iso",
        base.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    let out = ibi_env(&args, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `ibi ARGS` expecting it to end by itself: killed (and the test failed) if it still runs
/// after a minute, as a server that should have been refused would.
pub(crate) fn run_to_end(args: &[&str]) -> (std::process::ExitStatus, String) {
    let logs = tempfile::tempdir().expect("tempdir");
    let err = logs.path().join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ibi"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("starting ibi");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("waiting for ibi") {
            return (status, std::fs::read_to_string(&err).unwrap_or_default());
        }
        if std::time::Instant::now() >= deadline {
            let status = stop_child(&mut child);
            panic!(
                "ibi {args:?} still ran after a minute ({status:?}): {}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Sums what the server's drop lines say about 127.0.0.1: (idle, over the per-address limit).
pub(crate) fn drops_from_loopback(log: &str) -> (u64, u64) {
    let number_before = |text: &str, what: &str| -> u64 {
        text.find(what)
            .and_then(|i| text[..i].rsplit(' ').next()?.parse().ok())
            .unwrap_or(0)
    };
    log.lines()
        .filter_map(|l| l.split_once(" from 127.0.0.1 in the last "))
        .map(|(_, rest)| {
            (
                number_before(rest, " idle (sent nothing within 5 s)"),
                number_before(rest, " over the limit of 32 per address"),
            )
        })
        .fold((0, 0), |(i, o), (a, b)| (i + a, o + b))
}

/// A TLS connection that asks once and then stays silent, as a keep-alive client between two
/// requests: the server must close it in bounded time.
pub(crate) fn keep_alive_then_silent(
    dir: &Path,
    address: &str,
) -> openssl::ssl::SslStream<std::net::TcpStream> {
    use std::io::{Read, Write};
    let mut c = openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls_client())
        .expect("TLS client");
    c.set_ca_file(dir.join(".ibi/serve-tls.crt"))
        .expect("trusting the serve certificate");
    let tcp = std::net::TcpStream::connect(address).expect("connecting");
    let mut tls = c.build().connect("127.0.0.1", tcp).expect("TLS handshake");
    tls.write_all(b"HEAD /nothing HTTP/1.1\r\nHost: ibi\r\n\r\n")
        .expect("writing a request");
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tls.read(&mut buf).expect("reading the answer");
        assert!(n > 0, "closed before answering");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(
        got.starts_with(b"HTTP/1.1 404"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    tls
}
