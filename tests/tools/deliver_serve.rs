//! `ibi serve` checked with a real client (curl): ranges, HEAD, ETag and conditionals, wrong
//! tokens, TLS by default, a rebuild during a download, sixteen concurrent downloads with memory
//! flat, a clean stop, the variant ISO streamed from a patch byte for byte as `create image`
//! writes it, each site's one-shot ISO streamed (`--one-shot`) with the Ignition config and kargs
//! `create image --site` writes, a missing DIR and a second server on one DIR refused, and idle connections and
//! connections over the per-address limit dropped while a download from another address goes on,
//! and the status page `--dashboard` serves under a token of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::deliver::*;
use crate::common::{mode, tool};

use crate::common::deliver_serve::*;

#[test]
fn serve_answers_ranges_head_and_entity_tags_to_curl() {
    if !tool("curl", "serve_answers_ranges_head_and_entity_tags_to_curl") {
        return;
    }
    let d = one_image(1_000_000);
    let data = std::fs::read(d.path().join(ISO)).expect("read");
    let sha = sha256(&data);
    let s = Served::start(d.path(), &[]);
    let url = s.url(ISO);
    let etag = format!("\"{sha}\"");

    let full = fetch(d.path(), &url, &[]);
    assert_eq!((full.status, sha256(&full.body)), (200, sha.clone()));
    assert_eq!(header(&full, "etag"), Some(etag.as_str()));
    assert_eq!(header(&full, "accept-ranges"), Some("bytes"));

    let head = fetch(d.path(), &url, &["-I"]);
    assert_eq!(
        (head.status, header(&head, "content-length")),
        (200, Some("1000000"))
    );

    type Case<'a> = (&'a str, u16, Option<(usize, usize)>, Option<&'a str>);
    let cases: [Case; 5] = [
        (
            "bytes=0-99",
            206,
            Some((0, 100)),
            Some("bytes 0-99/1000000"),
        ),
        (
            "bytes=999900-",
            206,
            Some((999_900, 1_000_000)),
            Some("bytes 999900-999999/1000000"),
        ),
        (
            "bytes=-10",
            206,
            Some((999_990, 1_000_000)),
            Some("bytes 999990-999999/1000000"),
        ),
        (
            "bytes=123456-654321",
            206,
            Some((123_456, 654_322)),
            Some("bytes 123456-654321/1000000"),
        ),
        ("bytes=1000000-", 416, None, Some("bytes */1000000")),
    ];
    for (range, status, bytes, content_range) in cases {
        let g = fetch(d.path(), &url, &["-H", &format!("Range: {range}")]);
        assert_eq!(g.status, status, "{range}");
        assert_eq!(header(&g, "content-range"), content_range, "{range}");
        if let Some((a, b)) = bytes {
            assert_eq!(g.body, data[a..b], "{range}");
            assert_eq!(
                header(&g, "content-length"),
                Some((b - a).to_string().as_str())
            );
        }
    }

    let g = fetch(d.path(), &url, &["-H", &format!("If-None-Match: {etag}")]);
    assert_eq!((g.status, g.body.len()), (304, 0));
    let g = fetch(d.path(), &url, &["-H", "If-None-Match: \"other\""]);
    assert_eq!(g.status, 200);
    let g = fetch(
        d.path(),
        &url,
        &[
            "-H",
            &format!("If-Range: {etag}"),
            "-H",
            "Range: bytes=10-19",
        ],
    );
    assert_eq!((g.status, g.body.as_slice()), (206, &data[10..20]));
    let g = fetch(
        d.path(),
        &url,
        &["-H", "If-Range: \"stale\"", "-H", "Range: bytes=10-19"],
    );
    assert_eq!((g.status, g.body.len()), (200, data.len()));
    assert!(
        s.stderr()
            .contains("HEAD rhcos-ibi.iso 200 range=- bytes=0 "),
        "{}",
        s.stderr()
    );
}

#[test]
fn serve_answers_only_token_urls_and_never_logs_a_token() {
    if !tool(
        "curl",
        "serve_answers_only_token_urls_and_never_logs_a_token",
    ) {
        return;
    }
    let d = one_image(4096);
    std::fs::create_dir_all(d.path().join("sites/a17")).expect("mkdir");
    write_random(&d.path().join("sites/a17/imagebasedconfig.iso"), 2048, 3);
    let s = Served::start(d.path(), &[]);
    let url = s.url(ISO);
    let site = s.url("sites/a17/imagebasedconfig.iso");
    let token = url.split('/').nth(3).expect("token").to_string();
    assert!(
        token.len() >= 32 && token.bytes().all(|b| b.is_ascii_hexdigit()),
        "{token}"
    );
    assert_ne!(
        site.split('/').nth(3),
        Some(token.as_str()),
        "two images share a token"
    );
    assert_eq!(fetch(d.path(), &site, &[]).status, 200);

    let base = url.rsplit_once(&token).expect("url").0.to_string();
    let wrong = format!("{base}{}", "f".repeat(token.len()));
    let probes = [
        format!("{wrong}/{ISO}"),
        base.clone(),
        format!("{base}{ISO}"),
        format!("{base}{token}/"),
        format!("{base}{token}/imagebasedconfig.iso"),
        format!("{base}{token}/../.ibi/serve-tls.key"),
        format!("{base}.ibi/served.json"),
        format!("{base}{}/{ISO}", &token[..token.len() - 1]),
    ];
    for p in &probes {
        assert_eq!(fetch(d.path(), p, &["--path-as-is"]).status, 404, "{p}");
    }
    let post = fetch(d.path(), &url, &["-X", "POST"]);
    assert_eq!(
        (post.status, header(&post, "allow")),
        (405, Some("get, head"))
    );
    let log = s.stderr();
    assert_eq!(
        log.matches(" 404 ").count(),
        probes.len(),
        "one access line per request: {log}"
    );
    assert!(
        !log.contains(&token) && !log.contains(&"f".repeat(32)),
        "a token in the log: {log}"
    );
    let served = d.path().join(".ibi/served.json");
    assert_eq!(
        (
            mode(&served),
            mode(&d.path().join(".ibi/serve-tokens.json"))
        ),
        (0o600, 0o600)
    );
    let entry = s.entry(ISO);
    assert_eq!(entry["size"], 4096);
    assert_eq!(entry["sha256"], sha256_file(&d.path().join(ISO)));
    assert_eq!(entry["file"], d.path().join(ISO).display().to_string());
}

#[test]
fn serve_keeps_each_download_to_one_version_across_a_rebuild() {
    if !tool(
        "curl",
        "serve_keeps_each_download_to_one_version_across_a_rebuild",
    ) {
        return;
    }
    let len = 48 << 20;
    let d = one_image(len);
    let path = d.path().join(ISO);
    let old_sha = sha256_file(&path);
    let s = Served::start(d.path(), &[]);
    let url = s.url(ISO);
    let out = d.path().join("during.iso");
    let cacert = d.path().join(".ibi/serve-tls.crt");
    let slow = |dest: &Path| {
        Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "120",
                "--limit-rate",
                "12M",
                "--cacert",
                cacert.to_str().expect("utf-8"),
                "-o",
                dest.to_str().expect("utf-8"),
                &url,
            ])
            .stderr(Stdio::null())
            .spawn()
            .expect("curl")
    };

    // A rebuild renamed into place while a download runs: the download finishes on the old bytes.
    let mut during = slow(&out);
    wait_for_bytes(&out, 4 << 20);
    replace_atomically(&path, len, 99);
    assert!(during.wait().expect("curl").success());
    assert_eq!(sha256_file(&out), old_sha, "a download mixed two versions");
    let after = fetch(d.path(), &url, &[]);
    let new_sha = sha256_file(&path);
    assert_eq!((after.status, sha256(&after.body)), (200, new_sha.clone()));
    assert_eq!(
        header(&after, "etag"),
        Some(format!("\"{new_sha}\"").as_str())
    );
    assert_eq!(
        s.entry(ISO)["sha256"],
        new_sha,
        "served.json still has the old hash"
    );

    // A writer in place (not renamed): the download stops short rather than mix.
    let before = std::fs::read(&path).expect("read");
    let out = d.path().join("during-in-place.iso");
    let mut during = slow(&out);
    wait_for_bytes(&out, 4 << 20);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open");
    std::os::unix::fs::FileExt::write_all_at(&f, &vec![0xEE; 1 << 20], (len - (1 << 20)) as u64)
        .expect("write");
    let status = during.wait().expect("curl");
    let got = std::fs::read(&out).expect("read");
    assert!(
        !status.success(),
        "curl got a whole answer although the file changed"
    );
    assert!(
        got.len() < len && got[..] == before[..got.len()],
        "the partial answer is not a prefix of the old version"
    );
    assert!(
        s.stderr()
            .contains("aborted: the image was rewritten in place"),
        "{}",
        s.stderr()
    );
}

#[test]
fn serve_sixteen_concurrent_downloads_with_memory_flat() {
    if !tool(
        "curl",
        "serve_sixteen_concurrent_downloads_with_memory_flat",
    ) {
        return;
    }
    let len = 128 << 20;
    let d = one_image(len);
    let sha = sha256_file(&d.path().join(ISO));
    let s = Served::start(d.path(), &[]);
    let url = s.url(ISO);
    let cacert = d.path().join(".ibi/serve-tls.crt");
    let download = |i: usize| -> (std::process::Child, PathBuf) {
        let dest = d.path().join(format!("dl-{i}"));
        let child = Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "300",
                "--cacert",
                cacert.to_str().expect("utf-8"),
                "-o",
                dest.to_str().expect("utf-8"),
                &url,
            ])
            .spawn()
            .expect("curl");
        (child, dest)
    };
    let (mut one, dest) = download(0);
    assert!(one.wait().expect("curl").success());
    assert_eq!(sha256_file(&dest), sha);
    let after_one = peak_rss_kib(s.pid());
    let many: Vec<_> = (1..=16).map(download).collect();
    for (mut c, dest) in many {
        assert!(c.wait().expect("curl").success());
        assert_eq!(sha256_file(&dest), sha);
        std::fs::remove_file(dest).expect("rm");
    }
    let after_many = peak_rss_kib(s.pid());
    // 16 × 128 MiB went out; memory may grow by buffers per client, not by the file.
    assert!(
        after_many < 64 * 1024,
        "peak RSS {after_many} KiB serving a 128 MiB file"
    );
    assert!(
        after_many - after_one < 16 * 1024,
        "peak RSS went from {after_one} to {after_many} KiB with 16 clients"
    );
    assert_eq!(s.stderr().matches("GET rhcos-ibi.iso 200").count(), 17);
}

#[test]
fn serve_speaks_tls_by_default_keeps_its_certificate_and_tokens_and_stops_cleanly() {
    if !tool(
        "curl",
        "serve_speaks_tls_by_default_keeps_its_certificate_and_tokens_and_stops_cleanly",
    ) || !tool(
        "openssl",
        "serve_speaks_tls_by_default_keeps_its_certificate_and_tokens_and_stops_cleanly",
    ) {
        return;
    }
    let d = one_image(10_000);
    let mut s = Served::start(d.path(), &[]);
    let url = s.url(ISO);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let (code, _) = curl(&["-o", "/dev/null", &url]);
    assert_eq!(code, 60, "an untrusted certificate must fail curl's check");
    assert_eq!(fetch(d.path(), &url, &[]).status, 200);
    let cert = d.path().join(".ibi/serve-tls.crt");
    let san = common::run_tool(
        "openssl",
        &[
            "x509",
            "-in",
            cert.to_str().expect("utf-8"),
            "-noout",
            "-ext",
            "subjectAltName",
        ],
    );
    assert!(san.contains("IP Address:127.0.0.1"), "{san}");
    assert!(s.stdout.contains("TLS certificate (new)"), "{}", s.stdout);
    assert_eq!(mode(&d.path().join(".ibi/serve-tls.key")), 0o600);
    let first_cert = std::fs::read(&cert).expect("cert");
    let status = s.stop().expect("status");
    assert!(
        status.success(),
        "SIGTERM must stop cleanly: {status:?} {}",
        s.stderr()
    );
    assert!(s.stderr().contains("ibi serve: stopped"));
    assert!(!s.stderr().contains("clear text"), "{}", s.stderr());

    let s = Served::start(d.path(), &[]);
    assert!(s.stdout.contains("TLS certificate (kept)"), "{}", s.stdout);
    assert_eq!(std::fs::read(&cert).expect("cert"), first_cert);
    let again = s.url(ISO);
    assert_eq!(
        again.split('/').nth(3),
        url.split('/').nth(3),
        "the token changed across a restart"
    );
    drop(s);

    let s = Served::start(d.path(), &["--rotate-tokens", "--plain-http"]);
    let rotated = s.url(ISO);
    assert_eq!(
        s.stderr()
            .matches("image URLs and report tokens travel in clear text")
            .count(),
        1,
        "--plain-http must warn, once: {}",
        s.stderr()
    );
    assert!(rotated.starts_with("http://127.0.0.1:"), "{rotated}");
    assert_ne!(rotated.split('/').nth(3), url.split('/').nth(3));
    let (code, body) = curl(&["-o", "-", "-w", "%{http_code}", &rotated]);
    assert_eq!(code, 0);
    assert!(body.ends_with(b"200"));
    let old_token_here = format!(
        "{}{}",
        rotated
            .rsplit_once(rotated.split('/').nth(3).expect("token"))
            .expect("url")
            .0,
        url.split('/').skip(3).collect::<Vec<_>>().join("/")
    );
    let (_, body) = curl(&["-o", "/dev/null", "-w", "%{http_code}", &old_token_here]);
    assert_eq!(body, b"404");
}

#[test]
fn serve_streams_a_variant_byte_identical_to_create_image() {
    if !tool(
        "curl",
        "serve_streams_a_variant_byte_identical_to_create_image",
    ) {
        return;
    }
    let written = tempfile::tempdir().expect("tempdir");
    let streamed = tempfile::tempdir().expect("tempdir");
    for d in [written.path(), streamed.path()] {
        example_install(d);
    }
    let base = streamed.path().join("base.iso");
    std::fs::copy(synthetic_base(), &base).expect("copy the synthetic base");
    create_image(written.path(), &base, &[]);
    create_image(streamed.path(), &base, &["--patch-only"]);
    assert!(
        !streamed.path().join(ISO).exists(),
        "--patch-only wrote the ISO"
    );
    assert_eq!(
        mode(&streamed.path().join(".ibi/rhcos-ibi.patch.json")),
        0o600
    );
    let file = std::fs::read(written.path().join(ISO)).expect("create image's file");
    let base_bytes = std::fs::read(&base).expect("base");
    let first_diff = file
        .iter()
        .zip(&base_bytes)
        .position(|(a, b)| a != b)
        .expect("the ISO differs from its base");

    let s = Served::start(streamed.path(), &[]);
    let url = s.url(ISO);
    assert_eq!(s.entry(ISO)["sha256"], sha256(&file));
    let g = fetch(streamed.path(), &url, &[]);
    assert_eq!(
        (g.status, sha256(&g.body)),
        (200, sha256(&file)),
        "the stream differs from create image's file"
    );
    assert_eq!(
        header(&g, "etag"),
        Some(format!("\"{}\"", sha256(&file)).as_str())
    );
    let n = file.len();
    for (a, b) in [
        (0, 4095),
        (first_diff - 10, first_diff + 10),
        (first_diff, first_diff + 300_000),
        (n - 1000, n - 1),
    ] {
        let b = b.min(n - 1);
        let g = fetch(
            streamed.path(),
            &url,
            &["-H", &format!("Range: bytes={a}-{b}")],
        );
        assert_eq!(g.status, 206, "{a}-{b}");
        assert_eq!(
            g.body,
            file[a..=b],
            "bytes {a}-{b} differ from create image's file"
        );
    }

    // The same bytes under a new time are fine; other bytes in the base are refused.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&base)
        .expect("open");
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .expect("touch");
    assert_eq!(fetch(streamed.path(), &url, &["-I"]).status, 200);
    std::os::unix::fs::FileExt::write_all_at(&f, b"X", 0).expect("write");
    assert_eq!(fetch(streamed.path(), &url, &["-I"]).status, 503);
    assert!(
        s.stderr().contains("changed since its patch"),
        "{}",
        s.stderr()
    );
}

/// `ibi serve --one-shot`: every built site's one-shot installation ISO, streamed over the fleet's
/// (here a `--patch-only` variant of a base ISO: two layers of patches), under its own token, with
/// nothing stored per site. What coreos-installer reads from the stream (the Ignition config and
/// the kargs) equals what it reads from the ISO `create image --site` writes for the same site.
#[test]
fn serve_one_shot_streams_each_sites_iso_as_create_image_site_writes_it() {
    const TEST: &str = "serve_one_shot_streams_each_sites_iso_as_create_image_site_writes_it";
    if !tool("curl", TEST) || !tool("coreos-installer", TEST) {
        return;
    }
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path();
    example_install(dir);
    let site = dir.join("sites/s1");
    std::fs::create_dir_all(&site).unwrap();
    let example = common::copy_example();
    common::copy_tree(example.path(), &site);
    let out = common::config_image(&site, &[]);
    common::assert_ok(&out);
    let base = dir.join("base.iso");
    std::fs::copy(synthetic_base(), &base).expect("copy the synthetic base");
    // The per-site ISO written whole, moved out of the served tree.
    create_image(dir, &base, &["--site", site.to_str().unwrap()]);
    let written = d.path().join("written-s1.iso");
    std::fs::rename(site.join(ISO), &written).unwrap();
    create_image(dir, &base, &["--patch-only"]);

    let s = Served::start(dir, &["--one-shot"]);
    let name = "sites/s1/rhcos-ibi.iso";
    let url = s.url(name);
    assert_ne!(url, s.url(ISO), "its own URL");
    assert!(s.entry(name)["sha256"].is_null(), "never hashed whole");
    let g = fetch(dir, &url, &[]);
    assert_eq!(g.status, 200);
    let streamed = d.path().join("streamed-s1.iso");
    std::fs::write(&streamed, &g.body).unwrap();
    assert_eq!(
        g.body.len() as u64,
        std::fs::metadata(&written).unwrap().len()
    );
    let kargs = |iso: &Path| {
        common::run_tool(
            "coreos-installer",
            &["iso", "kargs", "show", iso.to_str().unwrap()],
        )
    };
    let got = host::iso_ignition(&streamed);
    assert_eq!(got, host::iso_ignition(&written), "the Ignition config");
    assert!(
        got.to_string()
            .contains("/var/tmp/ibi-site-configuration/cluster-configuration/manifest.json"),
        "the site's tree is carried"
    );
    assert_eq!(kargs(&streamed), kargs(&written), "the kargs");
    let fleet = fetch(dir, &s.url(ISO), &[]);
    assert_eq!(fleet.status, 200);
    let fleet_iso = d.path().join("fleet.iso");
    std::fs::write(&fleet_iso, &fleet.body).unwrap();
    assert!(
        !host::iso_ignition(&fleet_iso)
            .to_string()
            .contains("/var/tmp/ibi-site-configuration/"),
        "the fleet's ISO carries no site"
    );
    assert!(!site.join(ISO).exists(), "nothing stored per site");
    assert!(
        s.stderr().contains("each carries its site's private keys"),
        "{}",
        s.stderr()
    );
}

#[test]
fn serve_refuses_a_second_server_on_one_dir_naming_the_first() {
    if !tool(
        "curl",
        "serve_refuses_a_second_server_on_one_dir_naming_the_first",
    ) {
        return;
    }
    let d = one_image(4096);
    let listen = format!("127.0.0.1:{}", free_port());
    let first = Served::start_on(d.path(), &listen, &[]);
    let map = std::fs::read(d.path().join(".ibi/served.json")).expect("served.json");
    let url = first.url(ISO);
    // On another port, with new tokens: had it started, served.json would name other URLs.
    let (status, stderr) = run_to_end(&[
        "serve",
        "--dir",
        d.path().to_str().expect("utf-8"),
        "--listen",
        "127.0.0.1:0",
        "--rotate-tokens",
    ]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    let holder = format!(
        "{} is in use by ibi serve (PID {}, listening on {listen}, since ",
        d.path().display(),
        first.pid()
    );
    assert!(stderr.contains(&holder), "{stderr}");
    assert_eq!(
        std::fs::read(d.path().join(".ibi/served.json")).expect("served.json"),
        map,
        "the refused server rewrote served.json"
    );
    assert_eq!(fetch(d.path(), &url, &[]).status, 200);
    assert_eq!(
        mode(&d.path().join(".ibi/serve.lock")),
        0o600,
        "the lock file"
    );
}

#[test]
fn serve_drops_idle_connections_and_those_over_the_per_address_limit_and_keeps_serving() {
    use std::io::Read;
    let name =
        "serve_drops_idle_connections_and_those_over_the_per_address_limit_and_keeps_serving";
    if !tool("curl", name) {
        return;
    }
    let len = 16 << 20;
    let d = one_image(len);
    let sha = sha256_file(&d.path().join(ISO));
    let s = Served::start(d.path(), &[]);
    let mut kept = keep_alive_then_silent(d.path(), &s.address);

    // What a port scanner or a broken client leaves: 300 sockets from one address that never
    // speak. Before, they held every connection slot for 30 s and a download waited.
    let idle: Vec<std::net::TcpStream> = (0..300)
        .map(|_| std::net::TcpStream::connect(&s.address).expect("connecting"))
        .collect();

    // A BMC on another address (127.0.0.2: loopback, local like 127.0.0.1), at a BMC's pace, so
    // the download outlasts the idle timeout.
    let got = fetch(
        d.path(),
        &s.url(ISO),
        &["--interface", "127.0.0.2", "--limit-rate", "2M"],
    );
    assert_eq!(
        (got.status, sha256(&got.body)),
        (200, sha),
        "the download failed: {}",
        s.stderr()
    );

    // The server closed every idle socket: those over the limit at once, the rest when they had
    // said nothing for 5 s.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    for mut c in idle {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        c.set_read_timeout(Some(left.max(std::time::Duration::from_millis(1))))
            .expect("read timeout");
        match c.read(&mut [0u8; 1]) {
            Ok(0) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("an idle connection was not closed: {other:?}"),
        }
    }
    // One line per period sums them up, never a line each.
    let mut seen = (0, 0);
    while seen.0 + seen.1 < 300 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
        seen = drops_from_loopback(&s.stderr());
    }
    let log = s.stderr();
    assert_eq!(seen.0 + seen.1, 300, "{log}");
    assert!(seen.0 > 0 && seen.1 > 0, "{seen:?}: {log}");
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(" dropped ")).collect();
    assert!((1..=3).contains(&lines.len()), "drop lines: {log}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" from 127.0.0.1 in the last ")),
        "a drop from another address: {log}"
    );
    assert_eq!(log.matches("GET rhcos-ibi.iso 200").count(), 1, "{log}");

    // The keep-alive connection, silent since its answer, is closed too.
    kept.get_ref()
        .set_read_timeout(Some(
            deadline
                .saturating_duration_since(std::time::Instant::now())
                .max(std::time::Duration::from_millis(1)),
        ))
        .expect("read timeout");
    match kept.read(&mut [0u8; 1]) {
        Ok(0) => {}
        // Closed without close_notify: an unexpected EOF, closed all the same.
        Err(e)
            if e.kind() != std::io::ErrorKind::WouldBlock
                && e.kind() != std::io::ErrorKind::TimedOut => {}
        other => panic!("an idle keep-alive connection was kept: {other:?}"),
    }
}

/// The URL `ibi serve --dashboard` printed once on stderr.
fn dashboard_url(s: &Served) -> String {
    let err = s.stderr();
    let urls: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("status page: "))
        .collect();
    assert_eq!(urls.len(), 1, "{err}");
    urls[0].split_whitespace().next().unwrap().to_string()
}

#[test]
fn serve_dashboard_serves_the_fleet_page_under_a_token_of_its_own() {
    if !tool(
        "curl",
        "serve_dashboard_serves_the_fleet_page_under_a_token_of_its_own",
    ) {
        return;
    }
    let d = one_image(4096);
    let mut s = Served::start(d.path(), &["--dashboard"]);
    let url = dashboard_url(&s);
    let token = url.split('/').nth(3).unwrap().to_string();
    assert_ne!(s.url(ISO).split('/').nth(3), Some(token.as_str()));
    let page = fetch(d.path(), &url, &[]);
    assert_eq!(page.status, 200);
    assert_eq!(header(&page, "x-frame-options"), Some("deny"));
    let body = String::from_utf8(page.body).unwrap();
    for want in [
        "<title>ibi status: ",
        "<script src=\"live.js\" defer></script>",
        "deploy: none has run on this BASE",
        "<p id=\"live\">Served live: ",
    ] {
        assert!(body.contains(want), "{want} not in {body}");
    }
    let script = fetch(d.path(), &format!("{url}live.js"), &[]);
    assert_eq!(
        (script.status, header(&script, "content-type")),
        (200, Some("text/javascript; charset=utf-8"))
    );
    assert_eq!(
        fetch(d.path(), &format!("{url}served.json"), &[]).status,
        404
    );
    // The access log names the page, never its token: the token is on stderr once, in the URL line.
    let log = s.stderr();
    assert_eq!(log.matches(&token).count(), 1, "{log}");
    assert_eq!(log.matches(" GET dashboard 200 ").count(), 2, "{log}");
    s.stop();
    // The same token for the next server; a new one, and the old one a 404, with --rotate-tokens.
    let token_of = |url: &str| url.split('/').nth(3).unwrap().to_string();
    let s = Served::start(d.path(), &["--dashboard"]);
    assert_eq!(token_of(&dashboard_url(&s)), token);
    drop(s);
    let s = Served::start(d.path(), &["--dashboard", "--rotate-tokens"]);
    let rotated = dashboard_url(&s);
    assert_ne!(token_of(&rotated), token);
    let old = rotated.replace(&token_of(&rotated), &token);
    assert_eq!(fetch(d.path(), &old, &[]).status, 404);
    assert_eq!(fetch(d.path(), &rotated, &[]).status, 200);
}
