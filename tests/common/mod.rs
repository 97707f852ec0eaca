//! Shared helpers for the integration tests: run the built binary on a copy of the bundled example.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The bundled example site, the same one the README's quick start uses.
pub fn example_site() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/example-site")
}

/// Copies the example's inputs (not any outputs a quick-start run left there) into a temp dir.
pub fn copy_example() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = example_site();
    for f in ["install-config.yaml", "image-based-config.yaml"] {
        fs::copy(src.join(f), tmp.path().join(f)).expect("copy input");
    }
    copy_tree(
        &src.join("extra-manifests"),
        &tmp.path().join("extra-manifests"),
    );
    tmp
}

pub fn copy_tree(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).expect("mkdir");
    for e in fs::read_dir(src).expect("read_dir") {
        let e = e.expect("entry");
        let to = dst.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            fs::copy(e.path(), &to).expect("copy");
        }
    }
}

/// Runs `ibi ARGS` with a fixed SOURCE_DATE_EPOCH unless the caller overrides env.
pub fn ibi(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibi"));
    cmd.args(args).env_remove("RUST_LOG");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("running ibi")
}

pub fn config_image(dir: &Path, extra: &[&str]) -> Output {
    let d = dir.to_str().expect("utf-8 path");
    let mut args = vec!["create", "config-image", "--dir", d];
    args.extend_from_slice(extra);
    ibi(&args, &[("SOURCE_DATE_EPOCH", "1700000000")])
}

pub fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "ibi failed: {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// True when `name` is on PATH. Missing in CI is a failure (CI installs it); elsewhere the test
/// says it skips, never passing silently.
pub fn tool(name: &str, test: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is required in CI but not installed"
        );
        eprintln!("SKIP {test}: {name} not installed");
    }
    found
}

pub fn run_tool(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().expect(cmd);
    assert!(
        out.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(p).expect("metadata").mode() & 0o777
}
