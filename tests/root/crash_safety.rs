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

use crate::common::*;

use crate::common::crash_safety::*;

#[test]
fn config_image_on_a_full_disk_fails_cleanly() {
    let Some(small) = SmallFs::new(16 << 20) else {
        return;
    };
    let inputs = copy_example();
    let site = small.mnt().join("site");
    copy_tree(inputs.path(), &site);
    small.fill(48 << 10);
    let out = command(&["create", "config-image", "--dir", site.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("imagebasedconfig.iso")
            || stderr.contains("identity.json")
            || stderr.contains("kubeconfig"),
        "the error names the file: {stderr}"
    );
    assert_disk_full(&out, &site, &CONFIG_OUTPUTS);
}

#[test]
fn create_image_on_a_full_disk_fails_cleanly() {
    let Some(small) = SmallFs::new(16 << 20) else {
        return;
    };
    small.fill(1 << 20);
    let bases = tempfile::tempdir().unwrap();
    let (template, base) = image_site(bases.path());
    let site = small.mnt().join("site");
    fs::create_dir(&site).unwrap();
    fs::copy(
        template.path().join(INSTALL_CONFIG),
        site.join(INSTALL_CONFIG),
    )
    .unwrap();
    let out = command(&[
        "create",
        "image",
        "--dir",
        site.to_str().unwrap(),
        "--base-iso",
        base.to_str().unwrap(),
    ])
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("rhcos-ibi.iso"),
        "the error names the file: {stderr}"
    );
    assert_disk_full(&out, &site, &["rhcos-ibi.iso"]);
}
