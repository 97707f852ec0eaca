//! Bad values of secret-bearing fields never echo (issue 15, Deliver 2). Every secret-bearing field of
//! both config files — `sshKey`, `pullSecret`, `proxy.httpProxy`/`httpsProxy` in `install-config.yaml`
//! (read by `create config-image`) and in `image-based-installation-config.yaml` (read by `create
//! image`) — gets bad values that carry a marker: a pasted private key, broken JSON, an auth that is not
//! base64, proxy URLs with a password and a bad scheme or port, values of the wrong YAML type. Each runs
//! at every log level, and the marker must appear on neither stdout nor stderr; the run must still fail
//! with a finding naming the field, so the test is known to have reached the check. `boot`'s BMC password
//! file and the ISO URL's token get the same treatment.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::fs;
use std::process::Output;

use crate::common::*;

/// Upper case with a digit: no key-type or scheme token looks like it, so a message may not quote it.
const MARK: &str = "SECRETMARK7Q";
const LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];
const INSTALL_CONFIG: &str = "install-config.yaml";
const INSTALLATION_CONFIG: &str = "image-based-installation-config.yaml";

/// `(field, YAML text of the key and its value)`, each value a mistake carrying the marker. All are
/// refused but the auth that is not base64, which the installer accepts too (with a warning).
fn bad_values() -> Vec<(&'static str, String)> {
    let m = MARK;
    let pem = format!(
        "sshKey: |\n  -----BEGIN OPENSSH PRIVATE KEY-----\n  b3BlbnNzaC1rZXktdjE{m}AAAA\n  {m}Zm9vYmFy\n  \
         -----END OPENSSH PRIVATE KEY-----\n"
    );
    let proxy = |key: &str, url: String| format!("proxy:\n  {key}: '{url}'\n");
    let mut v = vec![
        ("sshKey", pem),
        (
            "sshKey",
            format!("sshKey: ssh-ed25519 {m}!!notbase64 ops\n"),
        ),
        ("sshKey", format!("sshKey: {m} AAAAC3NzaC1lZDI1NTE5\n")),
        ("sshKey", format!("sshKey: [{m}]\n")),
        ("pullSecret", format!("pullSecret: '{{{m}'\n")),
        (
            "pullSecret",
            format!("pullSecret: '{{\"auths\":{{\"r.lab\":{{\"auth\":\"{m}!!\"}}}}}}'\n"),
        ),
        (
            "pullSecret",
            format!("pullSecret: '{{\"auths\":{{\"r.lab\":{{\"auth\":5,\"x\":\"{m}\"}}}}}}'\n"),
        ),
        ("pullSecret", format!("pullSecret: '{{\"auths\": {m}}}'\n")),
        ("pullSecret", format!("pullSecret: [{m}]\n")),
        ("proxy", format!("proxy: {m}\n")),
    ];
    for key in ["httpProxy", "httpsProxy"] {
        v.push((
            "proxy",
            proxy(key, format!("http://ops:{m}@proxy.lab:99999")),
        ));
        v.push(("proxy", proxy(key, format!("ftp://ops:{m}@proxy.lab:3128"))));
        v.push(("proxy", proxy(key, format!("http://ops:{m}proxy.lab:3128"))));
        v.push(("proxy", proxy(key, format!("{m}://ops:pw@proxy.lab"))));
        v.push(("proxy", format!("proxy:\n  {key}: [{m}]\n")));
    }
    v
}

/// `text` with `field`'s top-level line removed and `replacement` appended.
fn with_field(text: &str, field: &str, replacement: &str) -> String {
    let prefix = format!("{field}:");
    let mut out: String = text
        .lines()
        .filter(|l| !l.starts_with(&prefix))
        .map(|l| format!("{l}\n"))
        .collect();
    out.push_str(replacement);
    out
}

fn assert_no_mark(out: &Output, what: &str) {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        !stdout.contains(MARK) && !stderr.contains(MARK),
        "{what} echoed the secret:\nstdout: {stdout}\nstderr: {stderr}"
    );
}

/// An accepted mistake: warned about, not refused.
fn only_warned(yaml: &str) -> bool {
    yaml.contains(&format!("\"{MARK}!!\""))
}

/// Runs `args` at every level; each run must name `field` (fail, or warn for [`only_warned`]) and
/// never show the marker.
fn check_every_level(args: &[&str], field: &str, what: &str, warned: bool) {
    for level in LEVELS {
        let mut a = vec!["--log-level", level];
        a.extend_from_slice(args);
        let out = ibi(&a, &[("SOURCE_DATE_EPOCH", "1700000000")]);
        assert_no_mark(&out, &format!("{what} at {level}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        if warned && level == "error" {
            continue;
        }
        if !warned {
            assert_eq!(out.status.code(), Some(1), "{what} at {level}: {stderr}");
        }
        assert!(
            stderr.contains(field),
            "{what} at {level}: the finding does not name {field}: {stderr}"
        );
    }
}

#[test]
fn install_config_secret_fields_never_echo_at_any_log_level() {
    let site = copy_example();
    let path = site.path().join(INSTALL_CONFIG);
    let original = fs::read_to_string(&path).unwrap();
    let dir = site.path().to_str().unwrap();
    for (field, yaml) in bad_values() {
        fs::write(&path, with_field(&original, field, &yaml)).unwrap();
        let what = format!("{INSTALL_CONFIG} {yaml:?}");
        let args = ["create", "config-image", "--dir", dir];
        check_every_level(&args, field, &what, only_warned(&yaml));
        let iso = site.path().join("imagebasedconfig.iso");
        assert_eq!(iso.exists(), only_warned(&yaml), "{what}");
        fs::remove_file(iso).ok();
    }
}

#[test]
fn installation_config_secret_fields_never_echo_at_any_log_level() {
    let dir = tempfile::tempdir().unwrap();
    let original = write_example_install(dir.path());
    let path = dir.path().join(INSTALLATION_CONFIG);
    let d = dir.path().to_str().unwrap();
    // Never reached: validation comes first. A path, so a slip would not touch the network.
    let base = dir.path().join("no-base.iso");
    let base = base.to_str().unwrap();
    for (field, yaml) in bad_values() {
        fs::write(&path, with_field(&original, field, &yaml)).unwrap();
        let what = format!("{INSTALLATION_CONFIG} {yaml:?}");
        let args = ["create", "image", "--dir", d, "--base-iso", base];
        check_every_level(&args, field, &what, only_warned(&yaml));
    }
}

#[test]
fn boot_never_echoes_the_bmc_password_or_the_iso_token() {
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("bmc-password");
    fs::write(&password, format!("{MARK}\n")).unwrap();
    let iso = format!("https://127.0.0.1:1/{MARK}/rhcos-ibi.iso");
    // Each run waits out its retries against the closed port (about 7 s): the levels run side by side.
    let outs: Vec<(&str, Output)> = std::thread::scope(|s| {
        let runs: Vec<_> = LEVELS
            .iter()
            .map(|&level| {
                let (password, iso) = (&password, &iso);
                s.spawn(move || {
                    let out = ibi(
                        &[
                            "--log-level",
                            level,
                            "boot",
                            "--bmc",
                            "http://127.0.0.1:1/",
                            "--bmc-user",
                            "root",
                            "--bmc-password-file",
                            password.to_str().unwrap(),
                            "--timeout",
                            "5",
                        ],
                        &[("IBI_ISO_URL", iso)],
                    );
                    (level, out)
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for (level, out) in outs {
        assert_no_mark(&out, &format!("boot at {level}"));
        assert_eq!(out.status.code(), Some(1), "boot at {level}");
    }
}
