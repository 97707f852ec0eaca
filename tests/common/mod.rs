//! What the integration tests share: the prerequisites every test checks the same way (root, tools on
//! PATH; a missing one fails the test, naming it: each tier of `tests/run` needs all of its
//! prerequisites, so nothing is skipped), running the built binary on a copy of the bundled example,
//! and (submodules) a local OCI registry, the host agent's test hosts, the Redfish BMC stand-ins, a
//! kube-apiserver stand-in, and what the tests of one file split across tiers share.
#![allow(dead_code)]

#[cfg(feature = "agent")]
pub mod agent;
pub mod browser;
pub mod deliver;
pub mod kubeapi;
pub mod lab;
pub mod registry;

// What the tests of one file split across tiers share (tests/<tier>/<name>.rs).
pub mod agent_fetch_config;
pub mod agent_restore_files;
pub mod batch;
pub mod config_image;
pub mod config_image_seed;
pub mod config_manifest;
pub mod crash_safety;
pub mod create_image;
pub mod deliver_boot;
pub mod deliver_serve;
pub mod deliver_watch;
pub mod deploy_fleet;
pub mod deploy_trust;
pub mod hub_manifests;
pub mod ignition_validate;
pub mod iso9660_tools;
pub mod release_base_iso;
pub mod secrets;
pub mod seed_fixture_generators;
pub mod seed_registry;
pub mod status_fleet;
pub mod units_verify;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The bundled example site, the same one the README's quick start uses.
pub fn example_site() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/example-site")
}

/// The example installation config (`seed-fixtures/example-install`) with its `oci:` seed made
/// absolute, so it builds from any directory; written into `dir` and returned.
pub fn write_example_install(dir: &Path) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let name = "image-based-installation-config.yaml";
    let text = fs::read_to_string(repo.join("seed-fixtures/example-install").join(name))
        .expect("reading the example installation config")
        .replace(
            "oci:seed-fixtures/seed:",
            &format!("oci:{}:", repo.join("seed-fixtures/seed").display()),
        );
    fs::write(dir.join(name), &text).expect("writing the installation config");
    text
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
    // `IBI_TEST_BINARY` runs another build (to show a test failing on an older one).
    let bin =
        std::env::var_os("IBI_TEST_BINARY").unwrap_or_else(|| env!("CARGO_BIN_EXE_ibi").into());
    let mut cmd = Command::new(bin);
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

/// A prerequisite of `test` is missing here: the test fails, naming it. Nothing is skipped: the tier
/// a test is in (tests/fast, tests/tools, tests/root, tests/lab.rs) says what it needs, and
/// `tests/run TIER` installs that as root on Debian, or lists what is missing before building.
pub fn missing(test: &str, reason: &str) {
    panic!(
        "{test}: {reason} (`tests/run` installs what each tier needs when run as root on Debian)"
    );
}

pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self").map(|m| m.uid()).unwrap_or(1) == 0
}

/// True as root; otherwise fails the test ([`missing`]: loop devices, mounts).
pub fn require_root(test: &str) -> bool {
    if is_root() {
        return true;
    }
    missing(test, "needs root for loop devices and mounts");
    false
}

/// The full path of `name` on PATH, or in the sbin directories (where blkid and losetup live, which a
/// user's PATH may lack).
pub fn tool_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::env::split_paths(&path).chain(["/usr/sbin", "/sbin"].map(PathBuf::from));
    dirs.map(|d| d.join(name)).find(|p| p.is_file())
}

/// True when every tool is on PATH; otherwise fails the test ([`missing`]) naming the missing ones.
pub fn require_tools(test: &str, tools: &[&str]) -> bool {
    let absent: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|t| tool_path(t).is_none())
        .collect();
    if absent.is_empty() {
        return true;
    }
    missing(test, &format!("missing tools: {}", absent.join(", ")));
    false
}

/// [`require_tools`] for one tool.
pub fn tool(name: &str, test: &str) -> bool {
    require_tools(test, &[name])
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

/// A self-signed CA certificate (PEM) named `cn`, valid for a day, made with OpenSSL: for inputs that
/// take a CA (trust bundles, statusCA) where nothing is verified against it.
pub fn self_signed_ca_pem(cn: &str) -> String {
    use openssl::{asn1::Asn1Time, hash::MessageDigest, pkey::PKey, rsa::Rsa, x509};
    let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
    let mut name = x509::X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", cn).unwrap();
    let name = name.build();
    let mut b = x509::X509::builder().unwrap();
    b.set_version(2).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    b.set_pubkey(&key).unwrap();
    b.set_not_before(&Asn1Time::days_from_now(0).unwrap())
        .unwrap();
    b.set_not_after(&Asn1Time::days_from_now(1).unwrap())
        .unwrap();
    b.sign(&key, MessageDigest::sha256()).unwrap();
    String::from_utf8(b.build().to_pem().unwrap()).unwrap()
}

/// Debian's kubectl (package kubernetes-client): `IBI_TEST_KUBECTL`, else where tests/run unpacks
/// it (another package may own /usr/bin/kubectl).
pub fn debian_kubectl(test: &str) -> Option<PathBuf> {
    let path = std::env::var_os("IBI_TEST_KUBECTL")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".cache/ibi/kubernetes-client/usr/bin/kubectl"))
        })
        .filter(|p| p.is_file());
    if path.is_none() {
        missing(
            test,
            "Debian's kubectl (kubernetes-client) not found: tests/run unpacks it, or set IBI_TEST_KUBECTL",
        );
    }
    path
}
