//! The command line's own mistakes (issue 15, Why 9): usage errors exit 1 as the README says, a bogus
//! `--log-level` or `RUST_LOG` is refused instead of silently hiding warnings, `--coreos-stream` beside
//! `--base-iso` is refused instead of ignored, `agent install --help` says it wipes the disk (or, in a
//! build without the `agent` feature, `ibi agent` says which feature it needs), and a long step prints
//! a line when stderr is not a terminal.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;

use crate::common::*;
use ibi::live_iso::synthetic::{IgnitionLayout, SyntheticIso};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn usage_errors_exit_1_and_help_exits_0() {
    let out = ibi(&["--no-such-flag"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unexpected argument"),
        "{}",
        stderr(&out)
    );
    let out = ibi(&["--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage: ibi"));
}

#[test]
fn a_bogus_log_level_is_refused_in_the_flag_and_in_rust_log() {
    let out = ibi(&["--log-level", "bogus", "inspect", "x.iso"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("invalid value 'bogus' for '--log-level <LEVEL>'"),
        "{}",
        stderr(&out)
    );
    let out = ibi(&["inspect", "/no/such.iso"], &[("RUST_LOG", "bogus")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: RUST_LOG: \"bogus\" is neither a level (error, warn, info, debug, trace, off) nor TARGET=LEVEL\n"
    );
}

#[test]
fn coreos_stream_beside_base_iso_is_refused() {
    let out = ibi(
        &[
            "create",
            "image",
            "--base-iso",
            "b.iso",
            "--coreos-stream",
            "s.json",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot be used with"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn agent_says_it_wipes_the_disk_or_which_feature_it_needs() {
    if cfg!(feature = "agent") {
        let out = ibi(&["agent", "install", "--help"], &[]);
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            help.contains("WIPES the configuration's installationDisk"),
            "{help}"
        );
    } else {
        let out = ibi(&["agent", "install"], &[]);
        assert_eq!(out.status.code(), Some(1));
        assert!(
            stderr(&out).contains("--features agent"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn writing_the_iso_says_so_when_stderr_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    write_example_install(dir.path());
    let base = dir.path().join("base.iso");
    SyntheticIso::new(IgnitionLayout::WholeFile, true)
        .write(fs::File::create(&base).unwrap())
        .unwrap();
    let d = dir.path().to_str().unwrap();
    let out = ibi(
        &[
            "create",
            "image",
            "--dir",
            d,
            "--base-iso",
            base.to_str().unwrap(),
        ],
        &[],
    );
    assert_ok(&out);
    assert!(
        stderr(&out)
            .lines()
            .any(|l| l.starts_with("writing rhcos-ibi.iso (")),
        "{}",
        stderr(&out)
    );
}

#[test]
fn base_iso_mistakes_are_reported_before_the_seed_is_contacted() {
    let dir = tempfile::tempdir().unwrap();
    let text = write_example_install(dir.path());
    // A registry nobody listens on: reaching the seed check would fail with its error instead.
    let seed = text.lines().find(|l| l.starts_with("seedImage:")).unwrap();
    let text = text.replace(seed, "seedImage: 127.0.0.1:1/ibi-test/seed:4.16.0");
    fs::write(
        dir.path().join("image-based-installation-config.yaml"),
        text,
    )
    .unwrap();
    let d = dir.path().to_str().unwrap();
    let out = ibi(
        &["create", "image", "--dir", d, "--base-iso", "/no/such.iso"],
        &[],
    );
    assert_eq!(
        stderr(&out),
        "error: --base-iso: reading /no/such.iso: No such file or directory (os error 2)\n"
    );
}

/// Issue 34 item 7: `--release-image` is required by `create hub-manifests` (reported with every
/// other finding of the run): its usage line and `--help` say so.
#[test]
fn hub_manifests_usage_and_help_say_release_image_is_required() {
    let out = ibi(&["create", "hub-manifests", "--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains(
            "Usage: ibi create hub-manifests --sites <INVENTORY> --release-image <REF> [--dir <DIR>] [OPTIONS]"
        ),
        "{help}"
    );
    assert!(
        help.contains("Required: the release the sites run"),
        "{help}"
    );
}
