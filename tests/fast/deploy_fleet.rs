//! `ibi deploy --phase factory` for a fleet of four sites, with real parts: four sushy-tools
//! emulators (one BMC per site: fake driver, each its own System UUID, Basic auth, TLS) on 127.0.0.1,
//! an installation ISO built by `ibi create image` with `statusURL`/`statusCA` pointing at deploy's
//! in-process server (TLS from a test CA), and `--parallel 2`. Every emulator really downloads its
//! ISO from that server during its InsertMedia. The hosts are played by this test as the booted live
//! ISO would run them, against the live server: site a's `hostAgent: lca` units report success, site
//! b's report a failure with the journal's tail, site c never reports (the timeout path), site d
//! reports through the agent's reporter (`hostAgent: ibi`; the lca units without the agent feature).
//! Each host boots the ISO its BMC downloaded: its own variant, whose report token is its own.
//! `deploy` is killed (SIGKILL) mid-run and run again: site a, done, is not touched again (its BMC
//! gets no request), site d resumes its wait without a second boot or download, b (whose host
//! reported a failure) and c (booted, silent) are not booted again: b stays failed, c is waited for
//! again and times out. A third run with `--redo b` installs b again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common::deliver::{example_install, ibi_env};

/// Refused before any BMC is touched or anything is written: a factory without its installation
/// ISO (deploy does not build it: the error names the command that does), and `--only` naming no
/// site of the inventory.
#[test]
fn a_factory_without_its_installation_iso_says_what_to_build() {
    let base = tempfile::tempdir().unwrap();
    let b = base.path().to_str().unwrap();
    example_install(base.path());
    let inv = base.path().join("sites.yaml");
    std::fs::write(
        &inv,
        "sites:\n  - name: a\n    hostname: sno-a\n    bmc:\n      address: https://127.0.0.1:9\n      insecure: true\n",
    )
    .unwrap();
    let deploy = |extra: &[&str]| {
        let mut args = vec!["deploy", "--dir", b, "--sites", inv.to_str().unwrap()];
        args.extend_from_slice(&["--phase", "factory", "--listen", "127.0.0.1:0"]);
        args.extend_from_slice(extra);
        let out = ibi_env(&args, &[]);
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = deploy(&[]);
    assert_eq!(
        err,
        format!(
            "error: {b} has no installation ISO (rhcos-ibi.iso or .ibi/rhcos-ibi.patch.json): build it first with `ibi create image --dir {b}` (add --patch-only to keep one base ISO on disk)\n"
        )
    );
    let err = deploy(&["--only", "zz", "--only", "a"]);
    assert_eq!(
        err,
        format!("error: --only zz: not a site of {}\n", inv.display())
    );
    assert!(!base.path().join(".ibi").exists(), "nothing written");
}
