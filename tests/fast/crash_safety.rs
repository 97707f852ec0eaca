//! Crash safety of the outputs (issue 5 item 4): `ibi create config-image` and `ibi create image` are
//! killed with SIGKILL at random moments, at least 20 times each. After every kill each final output
//! path holds nothing or a complete, valid result (byte for byte the result of an uninterrupted run:
//! both commands are deterministic for fixed inputs, identity and SOURCE_DATE_EPOCH), never a partial
//! file; the temp files a kill leaves are removed by the next run. A full filesystem (a small ext4 on a
//! loop device) gives a clear error and no output. SIGINT and SIGTERM remove the temp output at once,
//! print one line ("interrupted; nothing was written", or a batch's summary so far) and exit 130/143.
//!
//! The delays come from a fixed-seed generator spread over the measured length of one run, so a
//! failure can be reproduced. The disk-full cases need root (mount): they are in tests/root.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;
use std::path::Path;

use crate::common::*;

use crate::common::crash_safety::*;

#[test]
fn config_image_killed_at_random_moments_never_leaves_a_partial_output() {
    let reference = copy_example();
    let dir = copy_example();
    // The identity must be the same for both runs to agree byte for byte: share it.
    let d = dir.path().to_str().unwrap().to_string();
    run_ok(&["create", "config-image", "--dir", &d]);
    // Later runs reuse the identity (no key generation): time one of those.
    let length = run_ok(&["create", "config-image", "--dir", &d]);
    for f in CONFIG_OUTPUTS {
        let to = reference.path().join(f);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(dir.path().join(f), to).unwrap();
    }
    assert_config_iso_valid(dir.path());

    let mut delays = Delays(0x1b1_c0ff_ee00_0001);
    let mut killed = 0;
    let mut attempts = 0;
    while killed < KILLS {
        attempts += 1;
        assert!(attempts < KILLS * 10, "runs end before the kill too often");
        if kill_after(
            &["create", "config-image", "--dir", &d],
            delays.next_below(length),
        ) {
            killed += 1;
        }
        assert_absent_or_reference(
            dir.path(),
            reference.path(),
            &CONFIG_OUTPUTS,
            &format!("after kill {killed}"),
        );
    }
    run_ok(&["create", "config-image", "--dir", &d]);
    assert_absent_or_reference(
        dir.path(),
        reference.path(),
        &CONFIG_OUTPUTS,
        "after a clean run",
    );
    assert!(
        temp_files(dir.path()).is_empty(),
        "a clean run leaves no temp file: {:?}",
        temp_files(dir.path())
    );
}

#[test]
fn config_image_killed_on_a_fresh_site_leaves_nothing_or_valid_files() {
    let mut delays = Delays(0x5eed_0000_0002);
    let probe = copy_example();
    let length = run_ok(&[
        "create",
        "config-image",
        "--dir",
        probe.path().to_str().unwrap(),
    ]);
    let mut killed = 0;
    while killed < 5 {
        let dir = copy_example();
        let d = dir.path().to_str().unwrap();
        if !kill_after(
            &["create", "config-image", "--dir", d],
            delays.next_below(length),
        ) {
            continue;
        }
        killed += 1;
        if dir.path().join("imagebasedconfig.iso").exists() {
            assert_config_iso_valid(dir.path());
        }
        // The next run finishes the job and sweeps what the killed one left.
        run_ok(&["create", "config-image", "--dir", d]);
        assert_config_iso_valid(dir.path());
        assert!(
            temp_files(dir.path()).is_empty(),
            "{:?}",
            temp_files(dir.path())
        );
    }
}

#[test]
fn create_image_killed_at_random_moments_never_leaves_a_partial_output() {
    let bases = tempfile::tempdir().unwrap();
    let (reference, base) = image_site(bases.path());
    let (site, _) = image_site(bases.path());
    let b = base.to_str().unwrap();
    let r = reference.path().to_str().unwrap();
    let s = site.path().to_str().unwrap();
    let length = run_ok(&create_image_args(r, b));

    let mut delays = Delays(0x150_0000_0003);
    let mut killed = 0;
    let mut attempts = 0;
    let mut mid_write = 0;
    while killed < KILLS {
        attempts += 1;
        assert!(attempts < KILLS * 10, "runs end before the kill too often");
        if kill_after(&create_image_args(s, b), delays.next_below(length)) {
            killed += 1;
            // A kill while the ISO was being written leaves its temp file behind.
            mid_write += usize::from(!temp_files(site.path()).is_empty());
        }
        assert_absent_or_reference(
            site.path(),
            reference.path(),
            &["rhcos-ibi.iso"],
            &format!("after kill {killed}"),
        );
    }
    assert!(
        mid_write >= KILLS / 4,
        "only {mid_write} of {KILLS} kills hit the write of the ISO"
    );
    run_ok(&create_image_args(s, b));
    assert_absent_or_reference(
        site.path(),
        reference.path(),
        &["rhcos-ibi.iso"],
        "clean run",
    );
    assert!(site.path().join("rhcos-ibi.iso").exists());
    assert!(
        temp_files(site.path()).is_empty(),
        "stale temp files after a clean run: {:?}",
        temp_files(site.path())
    );
}

#[test]
fn create_image_on_sigint_or_sigterm_removes_its_temp_file_says_so_and_exits_130_or_143() {
    use rustix::process::Signal;
    let bases = tempfile::tempdir().unwrap();
    for (sig, code) in [(Signal::INT, 130), (Signal::TERM, 143)] {
        let (site, base) = image_site(bases.path());
        let args = create_image_args(site.path().to_str().unwrap(), base.to_str().unwrap());
        let out = (0..5)
            .find_map(|_| signal_mid_write(&args, site.path(), sig))
            .expect("the ISO's temp file was never seen");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if site.path().join("rhcos-ibi.iso").exists() {
            // The signal came just after the rename: the output is complete and the line says so.
            assert!(stderr.contains("written completely"), "{stderr}");
            fs::remove_file(site.path().join("rhcos-ibi.iso")).unwrap();
        } else {
            let last = stderr.lines().last().unwrap_or_default();
            assert_eq!(last, "interrupted; nothing was written", "{stderr}");
        }
        assert_eq!(out.status.code(), Some(code), "{sig:?}: {stderr}");
        assert!(
            temp_files(site.path()).is_empty(),
            "{sig:?} left {:?}",
            temp_files(site.path())
        );
    }
}

#[test]
fn an_interrupted_batch_prints_its_summary_so_far_and_leaves_no_temp_files() {
    let fleet = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("seed-fixtures/example-fleet");
    for f in [
        "install-config.yaml",
        "image-based-config.yaml",
        "sites.yaml",
    ] {
        fs::copy(src.join(f), fleet.path().join(f)).unwrap();
    }
    copy_tree(
        &src.join("extra-manifests"),
        &fleet.path().join("extra-manifests"),
    );
    let dir = fleet.path().to_str().unwrap();
    let inventory = fleet.path().join("sites.yaml");
    let inventory = inventory.to_str().unwrap();
    let args = ["create", "config-image", "--dir", dir, "--sites", inventory];
    // Three small ISOs write fast: under the fast tier's parallel load a run can end before the
    // poll sees a temp file (once, all five tries of a run missed it), so try more often.
    let out = (0..20)
        .find_map(|_| signal_mid_write(&args, fleet.path(), rustix::process::Signal::INT))
        .expect("no temp file was ever seen");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let line = stderr.lines().last().unwrap_or_default();
    assert!(
        line.starts_with("interrupted; ") && line.contains(" of 3 sites done: "),
        "{stderr}"
    );
    let left = temp_files(fleet.path());
    assert!(left.is_empty(), "left {left:?}: {stderr}");
}
