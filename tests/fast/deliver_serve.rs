//! `ibi serve` checked with a real client (curl): ranges, HEAD, ETag and conditionals, wrong
//! tokens, TLS by default, a rebuild during a download, sixteen concurrent downloads with memory
//! flat, a clean stop, the variant ISO streamed from a patch byte for byte as `create image`
//! writes it, each site's one-shot ISO streamed (`--one-shot`) with the Ignition config and kargs
//! `create image --site` writes, a missing DIR and a second server on one DIR refused, and idle connections and
//! connections over the per-address limit dropped while a download from another address goes on.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common::deliver_serve::*;

#[test]
fn serve_refuses_a_missing_dir_and_creates_nothing() {
    let d = tempfile::tempdir().expect("tempdir");
    let missing = d.path().join("factroy");
    let (status, stderr) = run_to_end(&[
        "serve",
        "--dir",
        missing.to_str().expect("utf-8"),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(
        !missing.exists(),
        "serve created {}: {stderr}",
        missing.display()
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--dir {}: the directory does not exist",
            missing.display()
        )),
        "{stderr}"
    );
}
