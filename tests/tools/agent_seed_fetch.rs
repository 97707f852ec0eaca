#![cfg(feature = "agent")]
//! Streaming the seed through `skopeo experimental-image-proxy` (`ibi::agent::seed_fetch`): the bundled
//! synthetic seed from its OCI layout and from a real local `docker-registry`, `var.tgz` piped into the
//! restore code, the dispatcher, and the failures (wrong digest, missing tag, corrupt blob, no auth,
//! a handler that gives up mid-layer). Without skopeo/docker-registry the tests fail, naming them.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use crate::common::registry::{TestRegistry, fixture_seed, make_seed};
use anyhow::bail;
use flate2::read::GzDecoder;
use ibi::agent::restore_files::extract_tgz;
use ibi::agent::seed_fetch::{
    CONTAINERS_LIST, ETC_DELETIONS, ETC_TGZ, LCA_CLI, MANIFEST_JSON, MCO_CURRENTCONFIG_JSON,
    ORIGIN_PATTERN, OSTREE_TGZ, Presence, RPM_OSTREE_JSON, SMALL_FILE_MAX, SeedFiles, SeedSource,
    SeedWalkReport, VAR_TGZ, walk_seed, walk_seed_files,
};
use ibi::seed::parse_seed_cluster_info;

const TAG: &str = "4.16.0";

/// The root files of a lifecycle-agent seed (reference §1.3; the fixture has no recert_config.json).
const ROOT_FILES: &[&str] = &[
    "containers.list",
    "etc.deletions",
    "etc.tgz",
    "lca-cli",
    "manifest.json",
    "mco-currentconfig.json",
    "ostree-3f2a9c0d1e4b5a6978812c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071.0.origin",
    "ostree.tgz",
    "rpm-ostree.json",
    "var.tgz",
];

/// The fixture's manifest digest, from its `index.json`.
fn fixture_digest(layout: &Path) -> String {
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(layout.join("index.json")).expect("index.json"))
            .expect("index json");
    index["manifests"][0]["digest"]
        .as_str()
        .expect("digest")
        .to_string()
}

/// Regular files and sizes of the fixture's layer, read straight from the blob on disk (not via skopeo).
fn fixture_files(layout: &Path) -> BTreeMap<String, u64> {
    let digest = fixture_digest(layout);
    let blob = |d: &str| {
        layout
            .join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(blob(&digest)).expect("manifest")).expect("json");
    let layer = manifest["layers"][0]["digest"].as_str().expect("layer");
    let mut archive = tar::Archive::new(GzDecoder::new(fs::File::open(blob(layer)).expect("blob")));
    let mut files = BTreeMap::new();
    for entry in archive.entries().expect("entries") {
        let entry = entry.expect("entry");
        if entry.header().entry_type().is_file() {
            let name = entry.path().expect("path").to_string_lossy().into_owned();
            files.insert(name.trim_start_matches("./").to_string(), entry.size());
        }
    }
    files
}

fn oci_source(layout: &Path, tag: &str) -> SeedSource {
    SeedSource::parse(&format!("oci:{}:{tag}", layout.display())).expect("oci reference")
}

fn registry_source(reg: &TestRegistry, reference: &str) -> SeedSource {
    SeedSource::parse(reference)
        .expect("registry reference")
        .with_insecure_registries([reg.addr.as_str()])
}

/// Walks the seed with a handler that reads every file whole and checks its length.
fn walk_counting(source: &SeedSource) -> anyhow::Result<SeedWalkReport> {
    walk_seed(source, &mut |path, reader, size| {
        let n = std::io::copy(reader, &mut std::io::sink())?;
        if n != size {
            bail!("{path}: read {n} bytes, header says {size}");
        }
        Ok(())
    })
}

/// Runs `f` on a thread and fails the test if it takes longer than a minute (a hung proxy).
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the seed walk hung")
}

/// Pseudo-random, incompressible bytes generated on the fly (xorshift64), `left` of them.
struct Noise {
    state: u64,
    left: u64,
}

impl Read for Noise {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        for b in &mut buf[..n] {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            *b = self.state as u8;
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Moves `file` into the layout's blobs under its sha256 and returns `(digest, size)`.
fn add_blob(layout: &Path, file: &Path) -> (String, u64) {
    let mut hasher = openssl::sha::Sha256::new();
    let mut f = fs::File::open(file).expect("open blob");
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).expect("read blob");
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let hex: String = hasher.finish().iter().map(|b| format!("{b:02x}")).collect();
    let size = fs::metadata(file).expect("stat").len();
    fs::rename(file, layout.join("blobs/sha256").join(&hex)).expect("rename");
    (format!("sha256:{hex}"), size)
}

/// A tar of `(name, size, reader)` files written to `path`, gzip'd when `gzip`.
fn write_layer(path: &Path, gzip: bool, files: Vec<(&str, u64, Box<dyn Read>)>) {
    let out = fs::File::create(path).expect("create layer");
    let out: Box<dyn std::io::Write> = if gzip {
        Box::new(flate2::write::GzEncoder::new(
            out,
            flate2::Compression::fast(),
        ))
    } else {
        Box::new(out)
    };
    let mut builder = tar::Builder::new(out);
    for (name, size, reader) in files {
        let mut h = tar::Header::new_ustar();
        h.set_size(size);
        h.set_mode(0o644);
        builder.append_data(&mut h, name, reader).expect("append");
    }
    builder
        .into_inner()
        .expect("finish tar")
        .flush()
        .expect("flush");
}

/// An OCI layout (tag `big`) with a plain-tar layer holding `big.bin` (`size` bytes of noise) and
/// `a.txt` = "one", then a gzip layer holding `a.txt` = "two!".
fn big_layout(dir: &Path, size: u64) -> std::path::PathBuf {
    use std::io::Write;
    let layout = dir.join("big");
    fs::create_dir_all(layout.join("blobs/sha256")).expect("mkdir");
    let noise = Noise {
        state: 0x9e37_79b9_7f4a_7c15,
        left: size,
    };
    let first = dir.join("layer1");
    write_layer(
        &first,
        false,
        vec![
            ("big.bin", size, Box::new(noise)),
            ("a.txt", 3, Box::new(&b"one"[..])),
        ],
    );
    let (l1, s1) = add_blob(&layout, &first);
    let second = dir.join("layer2");
    write_layer(&second, true, vec![("./a.txt", 4, Box::new(&b"two!"[..]))]);
    let (l2, s2) = add_blob(&layout, &second);
    let config = dir.join("config");
    fs::File::create(&config)
        .and_then(|mut f| f.write_all(br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#))
        .expect("config");
    let (c, cs) = add_blob(&layout, &config);
    let manifest = dir.join("manifest");
    let text = format!(
        r#"{{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{c}","size":{cs}}},"layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"{l1}","size":{s1}}},{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{l2}","size":{s2}}}]}}"#
    );
    fs::write(&manifest, text).expect("manifest");
    let (m, ms) = add_blob(&layout, &manifest);
    fs::write(
        layout.join("oci-layout"),
        r#"{"imageLayoutVersion":"1.0.0"}"#,
    )
    .expect("oci-layout");
    fs::write(
        layout.join("index.json"),
        format!(r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{m}","size":{ms},"annotations":{{"org.opencontainers.image.ref.name":"big"}}}}]}}"#),
    )
    .expect("index.json");
    layout
}

/// Peak resident memory of this process in KiB (`VmHWM`).
fn peak_rss_kib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// Set in the child process that does the measuring walk.
const MEMORY_CHILD: &str = "IBI_TEST_SEED_FETCH_MEMORY_CHILD";

fn walk_big_layers() {
    const BIG: u64 = 96 << 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = big_layout(dir.path(), BIG);
    // Resets VmHWM (Linux >= 4.0), so the peak below is the walk's own.
    let _ = fs::write("/proc/self/clear_refs", "5");
    let before = peak_rss_kib();
    let mut texts = Vec::new();
    let report = walk_seed(&oci_source(&layout, "big"), &mut |path, reader, size| {
        if path == "a.txt" {
            let mut t = String::new();
            reader.read_to_string(&mut t)?;
            texts.push(t);
        } else {
            // A slow consumer (a disk busy with fsync): skopeo gets ahead, and only the bounded
            // channel keeps the blob from piling up in memory. Then small reads, as tar does.
            std::thread::sleep(Duration::from_millis(1500));
            let mut buf = [0u8; 4096];
            let mut total = 0;
            loop {
                let n = reader.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                total += n as u64;
            }
            assert_eq!(total, size);
        }
        Ok(())
    })
    .expect("walk");
    let grown_mib = peak_rss_kib().saturating_sub(before) / 1024;
    assert_eq!(
        report.files,
        [
            ("big.bin".to_string(), BIG),
            ("a.txt".into(), 3),
            ("a.txt".into(), 4)
        ]
    );
    assert_eq!(texts, ["one", "two!"]);
    assert!(
        grown_mib < 32,
        "peak memory grew by {grown_mib} MiB while streaming {} MiB",
        BIG >> 20
    );
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("mkdir");
    for entry in fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[test]
fn oci_layout_streams_every_root_file_and_restores_var() {
    if !common::require_tools(
        "oci_layout_streams_every_root_file_and_restores_var",
        &["skopeo"],
    ) {
        return;
    }
    let layout = fixture_seed();
    let want = fixture_files(&layout);
    let names: Vec<&str> = want.keys().map(String::as_str).collect();
    assert_eq!(names, ROOT_FILES, "the fixture's root files changed");

    let var_dir = tempfile::tempdir().expect("tempdir");
    let mut streamed = BTreeMap::new();
    let mut files = SeedFiles::new();
    for small in [
        CONTAINERS_LIST,
        ETC_DELETIONS,
        MANIFEST_JSON,
        MCO_CURRENTCONFIG_JSON,
        RPM_OSTREE_JSON,
        ORIGIN_PATTERN,
    ] {
        files.collect(small, Presence::Required, SMALL_FILE_MAX);
    }
    files
        .ignore(LCA_CLI)
        .stream(VAR_TGZ, Presence::Required, |_, reader, _| {
            extract_tgz(reader, var_dir.path(), &mut |_| {})?;
            Ok(())
        })
        .stream("*.tgz", Presence::Required, |path, reader, _| {
            let n = std::io::copy(reader, &mut std::io::sink())?;
            streamed.insert(path.to_string(), n);
            Ok(())
        });
    let (report, outcome) = walk_seed_files(&oci_source(&layout, TAG), files).expect("walk");

    let seen: BTreeMap<String, u64> = report.files.iter().cloned().collect();
    assert_eq!(seen, want);
    assert_eq!(report.files.len(), want.len(), "a file was seen twice");
    assert_eq!(report.digest, fixture_digest(&layout));
    assert_eq!(report.reference, format!("oci:{}:{TAG}", layout.display()));
    assert_eq!(report.layers.len(), 1);
    assert!(outcome.unexpected.is_empty(), "{:?}", outcome.unexpected);
    let info = std::str::from_utf8(outcome.file(MANIFEST_JSON).expect("manifest")).expect("utf-8");
    let info = parse_seed_cluster_info(info).expect("SeedClusterInfo");
    assert_eq!(info.seed_cluster_ocp_version, "4.16.0");
    assert_eq!(outcome.matching(ORIGIN_PATTERN).count(), 1);
    let list = outcome.file(CONTAINERS_LIST).expect("containers.list");
    assert_eq!(list.split(|b| *b == b'\n').count(), 3);
    assert_eq!(streamed.get(OSTREE_TGZ), want.get(OSTREE_TGZ));
    assert_eq!(streamed.get(ETC_TGZ), want.get(ETC_TGZ));
    let restored = fs::read_to_string(var_dir.path().join("var/seed_data/manifest.json"))
        .expect("restored manifest");
    assert_eq!(parse_seed_cluster_info(&restored).expect("parse"), info);
    assert!(var_dir.path().join("var/lib/kubelet/config.yaml").is_file());
    assert!(var_dir.path().join("var/usrlocal/bin/lca-cli").is_file());
}

#[test]
fn registry_by_digest_and_by_tag_match_the_layout() {
    let Some(reg) = TestRegistry::start("registry_by_digest_and_by_tag_match_the_layout") else {
        return;
    };
    let layout = fixture_seed();
    reg.push(&layout, TAG, "edge/seed");
    let digest = fixture_digest(&layout);
    let from_layout = walk_counting(&oci_source(&layout, TAG)).expect("layout walk");
    let by_digest = format!("{}/edge/seed@{digest}", reg.addr);
    let report = walk_counting(&registry_source(&reg, &by_digest)).expect("digest walk");
    assert_eq!(report.reference, format!("docker://{by_digest}"));
    assert_eq!(report.digest, digest);
    assert_eq!(report.files, from_layout.files);
    assert_eq!(report.layers, from_layout.layers);
    let by_tag = format!("{}/edge/seed:{TAG}", reg.addr);
    let report = walk_counting(&registry_source(&reg, &by_tag)).expect("tag walk");
    assert_eq!(report.digest, digest);
    assert_eq!(report.files, from_layout.files);
}

#[test]
fn wrong_digest_missing_tag_and_tls_name_the_reference() {
    let Some(reg) = TestRegistry::start("wrong_digest_missing_tag_and_tls_name_the_reference")
    else {
        return;
    };
    reg.push(&fixture_seed(), TAG, "edge/seed");
    let wrong = format!("{}/edge/seed@sha256:{}", reg.addr, "0".repeat(64));
    let missing = format!("{}/edge/seed:4.99.0", reg.addr);
    for reference in [&wrong, &missing] {
        let e = walk_counting(&registry_source(&reg, reference)).expect_err(reference);
        let text = format!("{e:#}");
        assert!(
            text.starts_with(&format!("reading seed image docker://{reference}: ")),
            "{text}"
        );
        assert!(text.contains("manifest unknown"), "{text}");
    }
    // Without the insecure entry skopeo insists on HTTPS, which this registry does not speak.
    let strict = SeedSource::parse(&format!("{}/edge/seed:{TAG}", reg.addr)).expect("parse");
    let e = walk_counting(&strict).expect_err("tls");
    let text = format!("{e:#}");
    assert!(text.contains("HTTP response to HTTPS client"), "{text}");
    let e = walk_counting(&oci_source(&fixture_seed(), "4.99.0")).expect_err("layout tag");
    let text = format!("{e:#}");
    assert!(
        text.starts_with(&format!(
            "reading seed image oci:{}:4.99.0: ",
            fixture_seed().display()
        )),
        "{text}"
    );
}

#[test]
fn pull_secret_is_used_and_never_shown() {
    let (user, password) = ("seeduser", "hunter2-seed-secret");
    let Some(reg) =
        TestRegistry::start_with_auth("pull_secret_is_used_and_never_shown", user, password)
    else {
        return;
    };
    reg.push(&fixture_seed(), TAG, "edge/seed");
    let reference = format!("{}/edge/seed:{TAG}", reg.addr);
    let e = walk_counting(&registry_source(&reg, &reference)).expect_err("anonymous");
    let text = format!("{e:#}");
    assert!(
        text.contains("unauthorized") || text.contains("authentication required"),
        "{text}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let authfile = dir.path().join("pull-secret.json");
    let auth = openssl::base64::encode_block(format!("{user}:{password}").as_bytes());
    fs::write(
        &authfile,
        format!(r#"{{"auths":{{"{}":{{"auth":"{auth}"}}}}}}"#, reg.addr),
    )
    .expect("write");
    let source = registry_source(&reg, &reference).with_authfile(&authfile);
    let report = walk_counting(&source).expect("authenticated walk");
    assert_eq!(report.digest, fixture_digest(&fixture_seed()));
    let shown = format!("{source:?} {report:?}");
    assert!(
        !shown.contains(password) && !shown.contains(&auth),
        "{shown}"
    );

    // A wrong password fails, and the error carries neither secret.
    let bad = openssl::base64::encode_block(format!("{user}:wrong-{password}").as_bytes());
    fs::write(
        &authfile,
        format!(r#"{{"auths":{{"{}":{{"auth":"{bad}"}}}}}}"#, reg.addr),
    )
    .expect("write");
    let e = walk_counting(&source).expect_err("bad password");
    let text = format!("{e:#} {e:?}");
    assert!(!text.contains(password) && !text.contains(&bad), "{text}");
}

#[test]
fn corrupt_layer_fails_even_when_it_decompresses() {
    if !common::require_tools("corrupt_layer_fails_even_when_it_decompresses", &["skopeo"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = dir.path().join("seed");
    copy_dir(&fixture_seed(), &layout);
    let digest = fixture_digest(&layout);
    let blob = |d: &str| {
        layout
            .join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(blob(&digest)).expect("manifest")).expect("json");
    let layer = blob(manifest["layers"][0]["digest"].as_str().expect("layer"));
    let mut bytes = fs::read(&layer).expect("layer");
    // The gzip MTIME field: gunzip ignores it, so only the digest check can notice.
    bytes[4] ^= 1;
    fs::write(&layer, bytes).expect("write");
    let source = oci_source(&layout, TAG);
    let e = within_a_minute(move || walk_counting(&source)).expect_err("corrupt");
    let text = format!("{e:#}");
    assert!(
        text.contains("layer 1 of 1") && text.contains("corrupt"),
        "{text}"
    );
}

#[test]
fn handler_failure_stops_the_walk_and_skopeo() {
    if !common::require_tools("handler_failure_stops_the_walk_and_skopeo", &["skopeo"]) {
        return;
    }
    let source = oci_source(&fixture_seed(), TAG);
    let e = within_a_minute(move || {
        walk_seed(&source, &mut |path, reader, _| {
            if path == "etc.tgz" {
                let mut first = [0u8; 2];
                reader.read_exact(&mut first)?;
                bail!("restoring stopped: disk full");
            }
            Ok(())
        })
    })
    .expect_err("handler failure");
    let text = format!("{e:#}");
    assert!(text.starts_with("reading seed image oci:"), "{text}");
    assert!(
        text.ends_with("seed file etc.tgz: restoring stopped: disk full"),
        "{text}"
    );
}

#[test]
fn big_layers_stream_in_bounded_memory_in_order() {
    const NAME: &str = "big_layers_stream_in_bounded_memory_in_order";
    if std::env::var_os(MEMORY_CHILD).is_some() {
        return walk_big_layers();
    }
    if !common::require_tools(NAME, &["skopeo"]) {
        return;
    }
    // Peak memory is per process and other tests run in parallel threads: measure in a process of
    // its own, this test binary running only this test.
    let exe = std::env::current_exe().expect("test binary");
    // The test's name in its binary: its module path without the crate's name, then its own.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let exact = format!("{module}::{NAME}");
    let out = std::process::Command::new(exe)
        .args(["--exact", &exact, "--nocapture", "--test-threads=1"])
        .env(MEMORY_CHILD, "1")
        .output()
        .expect("running the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

#[test]
fn image_index_resolves_to_the_platform_manifest() {
    let Some(reg) = TestRegistry::start("image_index_resolves_to_the_platform_manifest") else {
        return;
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let dir = make_seed(&[("SEED_INDEX", "1"), ("SEED_ARCH", arch)]);
    let layout = dir.path().join("seed");
    let index_digest = fixture_digest(&layout);
    let index: serde_json::Value = serde_json::from_slice(
        &fs::read(
            layout
                .join("blobs/sha256")
                .join(index_digest.trim_start_matches("sha256:")),
        )
        .expect("index blob"),
    )
    .expect("index json");
    let platform_digest = index["manifests"][0]["digest"].as_str().expect("digest");
    let plain = walk_counting(&oci_source(&fixture_seed(), TAG)).expect("plain");
    let report = walk_counting(&oci_source(&layout, TAG)).expect("index layout");
    assert_eq!(report.digest, platform_digest);
    assert_eq!(report.files, plain.files);
    reg.push(&layout, TAG, "edge/seed");
    let pinned = format!("{}/edge/seed@{index_digest}", reg.addr);
    let report = walk_counting(&registry_source(&reg, &pinned)).expect("pinned index");
    assert_eq!(report.digest, platform_digest);
    assert_eq!(report.files, plain.files);
}
