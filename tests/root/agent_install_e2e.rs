#![cfg(feature = "agent")]
//! End-to-end test of `ibi agent install` on a loop device, as a host runs it: a real `docker-registry`
//! holds the real-content seed of `seed-fixtures/make-real-seed.sh` and its precache images; the agent
//! installs onto a 3 GiB loop disk with the container-storage driver the field uses (`overlay`, whose
//! own mount under the storage must come down before the extra partition can), and once more with
//! `vfs`. The first run is killed (SIGKILL, whole process group) while `post.sh` runs, its mounts left as
//! they are and its `/boot` frozen (as libostree leaves it when killed mid bootloader swap); the second
//! run must thaw and take them over, find the state on the disk (the live system's copy was
//! moved there), skip the finished steps — the disk is written once — and finish; a third run does
//! nothing. Then the disk is checked with tools other than ibi (`common::agent::check_target`).
//! A one-shot site tree is killed inside its copy (`write-site-config`) and written whole on resume.
//!
//! Stand-in: `coreos-installer install` (see `common_agent`). Needs root, loop devices and the tools
//! there; without them the tests fail, naming what is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::fs;
use std::time::{Duration, Instant};

use crate::common::agent::{
    Env, RUN_LIMIT, Target, check_nothing_left, check_target, field_driver, log_of, s,
};

const TEST: &str = "agent_install_e2e";

/// Blocks on the first run (the test kills the agent there), passes on the second.
fn blocking_post_sh(env: &Env, name: &str) -> String {
    format!(
        "m={}\nif [ ! -e $m.first ]; then touch $m.first; sleep 600; fi\ntouch $m\n",
        s(&env.path(&format!("{name}/post-ran")))
    )
}

/// Starts the agent and kills its process group once post.sh has started.
fn run_and_kill_in_post_sh(t: &Target) {
    let log = t.path("first-run.log");
    let mut child = t.spawn(&[], &log);
    let started = Instant::now();
    while !t.path("post-ran.first").exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the first run ended ({status}) before post.sh: {}",
                fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            started.elapsed() < RUN_LIMIT,
            "post.sh not reached: {}",
            fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(t.status()["step"], "post-script", "{}", t.status());
    t.kill_group(&child);
    let _ = child.wait();
}

/// `tree_manifest` lines without owner and extended attributes: path, type, size, digest, mode.
fn shape(lines: Vec<String>, prefix: &str) -> Vec<String> {
    let cut = |l: &String| {
        let kept: Vec<&str> = l.split(' ').take_while(|w| !w.contains(':')).collect();
        format!("{prefix}{}", kept.join(" "))
    };
    lines.iter().map(cut).collect()
}

fn install_with_kill_in_post_sh(driver: &str) {
    let Some(env) = Env::setup(TEST) else { return };
    let t = env.target(driver, driver, &blocking_post_sh(&env, driver));
    let site_tree = common::agent::place_site_tree(&t);

    run_and_kill_in_post_sh(&t);
    assert!(
        !t.state_file().exists(),
        "the state moved onto the disk once it was mounted"
    );
    assert!(
        !t.leftover_mounts().is_empty(),
        "the killed run's mounts are still there for the next run to take over"
    );
    // What libostree leaves when it is killed between freezing /boot and thawing it (its watchdog child
    // dies with the process group): unmounted frozen, the filesystem would outlive its unmount.
    common::agent::run("fsfreeze", &["--freeze", s(&t.path("mnt/boot"))]);

    let out = t.run_agent(&[]);
    let log = log_of(&out);
    assert!(out.status.success(), "second run failed: {log}");
    for want in [
        "thawed a filesystem an earlier run left frozen",
        "unmounted what an earlier run left mounted",
        "found the state of an interrupted install on the disk",
        "write-rhcos: done in an earlier run, skipping",
        "fetch-seed: done in an earlier run, skipping",
        "precache: done in an earlier run, skipping",
        "write-site-config: done in an earlier run, skipping",
        "mount-targets: done in an earlier run, running again",
        "post-script: done in",
        "installation finished",
    ] {
        assert!(
            log.contains(want),
            "{want:?} not in the second run's log: {log}"
        );
    }
    let calls = t.installer_log();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(
        calls[0].ends_with(&format!(
            " install {} --append-karg ibi.test=1",
            s(t.disk())
        )),
        "RHCOS written with coreosInstallerArgs: {calls:?}"
    );
    assert!(
        calls[1].starts_with("done "),
        "RHCOS written once: {calls:?}"
    );
    assert!(
        t.path("post-ran").exists(),
        "post.sh finished on the resumed run"
    );
    let st = t.status();
    assert_eq!(
        (&st["step"], &st["state"]),
        (&"install-host-unit".into(), &"done".into()),
        "{st}"
    );
    let first = fs::read_to_string(t.path("first-run.log")).unwrap();
    let counts = format!("pulled={n} failed=0 total={n}", n = env.images.len());
    assert!(
        first.contains("precache done") && first.contains(&counts),
        "{first}"
    );

    check_nothing_left(&t);
    let report = check_target(&env, &t);
    // The site's tree, byte for byte and private, where post-pivot looks: the host's /opt/openshift.
    let want = shape(common::agent::tree_manifest(&site_tree), "opt/openshift/");
    let got: Vec<String> = shape(report.var, "")
        .into_iter()
        .filter(|l| l.starts_with("opt/openshift/"))
        .collect();
    assert_eq!(got, want);
    assert!(
        first.contains("write-site-config: done"),
        "written before post.sh, in the first run: {first}"
    );

    // A further run in the same live boot finds the install finished and touches nothing.
    let out = t.run_agent(&[]);
    let log = log_of(&out);
    assert!(out.status.success(), "third run: {log}");
    assert!(
        log.contains("the install finished in an earlier run; nothing to do"),
        "{log}"
    );
    assert!(!log.contains(": starting"), "no step ran: {log}");
    assert_eq!(t.installer_log(), calls);
    check_nothing_left(&t);
}

/// A stand-in for `ibi serve` on 127.0.0.1, plain HTTP: `GET /site-configuration` with `Bearer
/// TOKEN` answers the ISO (403 with another token), `POST /reports` 204; the request lines are kept.
struct StandInServer {
    url: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Vec<String>>,
}

impl StandInServer {
    fn start(iso: Vec<u8>, token: &'static str) -> StandInServer {
        use std::io::{BufRead, BufReader, Read, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut asked = Vec::new();
            while !stopped.load(Ordering::SeqCst) {
                let Ok((stream, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                stream.set_nonblocking(false).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut first = String::new();
                if reader.read_line(&mut first).is_err() {
                    continue;
                }
                let (mut length, mut auth) = (0usize, String::new());
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    if lower.starts_with("authorization:") {
                        auth = line.trim().to_string();
                    }
                }
                let mut body = vec![0u8; length];
                let _ = reader.read_exact(&mut body);
                asked.push(first.trim().to_string());
                let (status, answer) = if first.starts_with("GET /site-configuration ") {
                    if auth == format!("authorization: Bearer {token}")
                        || auth == format!("Authorization: Bearer {token}")
                    {
                        (200, iso.clone())
                    } else {
                        (403, Vec::new())
                    }
                } else if first.starts_with("POST /reports ") {
                    (204, Vec::new())
                } else {
                    (404, Vec::new())
                };
                let mut out = stream;
                let _ = write!(
                    out,
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    answer.len()
                );
                let _ = out.write_all(&answer);
            }
            asked
        });
        StandInServer { url, stop, thread }
    }

    fn stop(self) -> Vec<String> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// `var/opt` of the stateroot under the agent's sysroot mount, once a staging directory there holds
/// a file with bytes.
fn staging_with_bytes(t: &Target) -> Option<std::path::PathBuf> {
    let deploy = t.path("mnt/ostree/deploy");
    for stateroot in fs::read_dir(&deploy).ok()? {
        let opt = stateroot.ok()?.path().join("var/opt");
        let Ok(entries) = fs::read_dir(&opt) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("openshift.tmp-") && has_bytes(&e.path()) {
                return Some(opt);
            }
        }
    }
    None
}

fn has_bytes(dir: &std::path::Path) -> bool {
    fs::read_dir(dir).into_iter().flatten().flatten().any(|e| {
        let p = e.path();
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => has_bytes(&p),
            Ok(m) => m.len() > 0,
            Err(_) => false,
        }
    })
}

#[test]
fn agent_install_field_driver_on_a_loop_disk_with_kill_and_resume() {
    install_with_kill_in_post_sh(field_driver(TEST));
}

#[test]
fn agent_install_vfs_on_a_loop_disk_with_kill_and_resume() {
    install_with_kill_in_post_sh("vfs");
}

/// The disk is never wiped while it holds another configuration's interrupted install or has a
/// filesystem mounted: each run stops with an error naming the state or the mount (and `--fresh`), and
/// writes nothing; the interrupted install then resumes with its own configuration.
/// A one-shot site tree, killed inside `write-site-config` (issue 25): the tree carries a large extra
/// manifest so that its copy takes long enough to be caught; the agent's process group is killed as
/// soon as the staging directory beside the target holds bytes. What the kill leaves must never be
/// taken as complete by post-pivot (no `opt/openshift`, only the staging directory); the next run,
/// in place with the killed run's mounts as they are, removes the staging directory, writes the
/// tree whole and finishes; the disk's `/opt/openshift` is the tree byte for byte.
#[test]
fn agent_install_killed_inside_write_site_config_writes_the_tree_whole_on_resume() {
    let Some(env) = Env::setup(TEST) else { return };
    let driver = field_driver(TEST);
    let t = env.target("site-kill", driver, "true");
    let site_tree = common::agent::place_site_tree(&t);
    // 160 MiB of text: the copy (and its fsync) takes a while on a loop disk.
    let line = b"# filler of a large extra manifest, copied by write-site-config\n";
    let big: Vec<u8> = line.iter().copied().cycle().take(160 << 20).collect();
    let large = site_tree.join("extra-manifests/large.yaml");
    fs::write(&large, &big).unwrap();
    fs::set_permissions(&large, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();

    let log = t.path("killed-run.log");
    let mut child = t.spawn(&[], &log);
    let started = Instant::now();
    let opt = loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "the run ended ({status}) before its copy of the site's tree was caught: {}",
                fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            started.elapsed() < RUN_LIMIT,
            "write-site-config not reached: {}",
            fs::read_to_string(&log).unwrap_or_default()
        );
        if let Some(opt) = staging_with_bytes(&t) {
            t.kill_group(&child);
            let _ = child.wait();
            break opt;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let st = t.status();
    assert_eq!(
        (&st["step"], &st["state"]),
        (&"write-site-config".into(), &"running".into()),
        "{st}"
    );
    // Post-pivot takes an existing cluster-configuration as complete: the kill left none, only the
    // staging directory.
    let left: Vec<String> = fs::read_dir(&opt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!opt.join("openshift").exists(), "{left:?}");
    assert!(
        left.iter().any(|n| n.starts_with("openshift.tmp-")),
        "{left:?}"
    );

    let out = t.run_agent(&[]);
    let log = log_of(&out);
    assert!(out.status.success(), "the resumed run: {log}");
    assert!(log.contains("site configuration written"), "{log}");
    check_nothing_left(&t);
    let report = check_target(&env, &t);
    let want = shape(common::agent::tree_manifest(&site_tree), "opt/openshift/");
    let all = shape(report.var.clone(), "");
    let got: Vec<&String> = all
        .iter()
        .filter(|l| l.starts_with("opt/openshift/"))
        .collect();
    assert_eq!(got, want.iter().collect::<Vec<_>>(), "the tree, whole");
    let beside: Vec<&String> = all
        .iter()
        .filter(|l| l.starts_with("opt/openshift.") || l.starts_with("opt/openshift "))
        .collect();
    assert_eq!(
        beside,
        ["opt/openshift d 700"],
        "no staging directory left beside it"
    );
}

/// A one-shot site whose configuration was too large for the ISO (issue 25): the live system holds
/// only the fetch settings (`/var/tmp/ibi-site-fetch.json`: the configuration ISO's size and SHA-256)
/// and the report settings (`statusURL`, the host's own token). `ibi agent install` fetches the ISO
/// from a stand-in for `ibi serve` on 127.0.0.1 (plain HTTP; it answers the ISO only to the host's
/// token and takes the reports), checks it, and writes its tree into the stateroot: the disk's
/// `/opt/openshift` holds the files of the ISO `ibi create config-image` built, as xorriso reads them.
#[test]
fn agent_install_fetches_a_site_configuration_the_iso_could_not_carry() {
    if !common::tool("xorriso", TEST) {
        return;
    }
    let Some(env) = Env::setup(TEST) else { return };
    let t = env.target("site-fetch", field_driver(TEST), "true");
    let site = common::copy_example();
    common::assert_ok(&common::config_image(site.path(), &[]));
    let iso = fs::read(site.path().join("imagebasedconfig.iso")).unwrap();
    let token = "0123456789abcdef0123456789abcdef";
    let server = StandInServer::start(iso.clone(), token);
    let tmp = t.path("live/var/tmp");
    let sha: String = openssl::sha::sha256(&iso)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    fs::write(
        tmp.join("ibi-site-fetch.json"),
        serde_json::json!({"size": iso.len(), "sha256": sha}).to_string(),
    )
    .unwrap();
    fs::write(
        tmp.join("ibi-report.json"),
        serde_json::json!({"url": server.url, "token": token, "attempts": 3, "delaySeconds": 1})
            .to_string(),
    )
    .unwrap();

    let out = t.run_agent(&[]);
    let log = log_of(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("site configuration ISO fetched"), "{log}");
    let asked = server.stop();
    assert_eq!(
        asked
            .iter()
            .filter(|l| l.starts_with("GET /site-configuration"))
            .count(),
        1,
        "{asked:?}"
    );
    check_nothing_left(&t);
    let report = check_target(&env, &t);
    let extracted = tempfile::tempdir().unwrap();
    let x = std::process::Command::new("xorriso")
        .args(["-osirrox", "on", "-indev"])
        .arg(site.path().join("imagebasedconfig.iso"))
        .args(["-extract", "/"])
        .arg(extracted.path())
        .output()
        .unwrap();
    assert!(x.status.success(), "{}", String::from_utf8_lossy(&x.stderr));
    // Path, kind, size and SHA-256 (the modes are the agent's, not the ISO's).
    let cut = |l: &String| l.split(' ').take(4).collect::<Vec<_>>().join(" ");
    let want: Vec<String> = shape(
        common::agent::tree_manifest(extracted.path()),
        "opt/openshift/",
    )
    .iter()
    .map(cut)
    .collect();
    let got: Vec<String> = shape(report.var.clone(), "")
        .iter()
        .filter(|l| l.starts_with("opt/openshift/"))
        .map(cut)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn agent_install_refuses_a_disk_in_use_or_holding_another_install() {
    let Some(env) = Env::setup(TEST) else { return };
    let driver = field_driver(TEST);
    let t = env.target("refuse", driver, &blocking_post_sh(&env, "refuse"));
    run_and_kill_in_post_sh(&t);
    let config = t.path("ibi-configuration.json");
    let original = fs::read(&config).unwrap();

    // Another configuration: the interrupted install is not resumed, nor wiped.
    let mut other: serde_json::Value = serde_json::from_slice(&original).unwrap();
    other["coreosInstallerArgs"] = serde_json::json!(["--append-karg", "other=1"]);
    fs::write(&config, other.to_string()).unwrap();
    let out = t.run_agent(&[]);
    let log = log_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    let head = format!(
        "error: {} holds an interrupted install of another ibi-configuration",
        s(t.disk())
    );
    for want in [head.as_str(), "refusing to wipe it", "`--fresh`"] {
        assert!(log.contains(want), "{want:?} not in: {log}");
    }
    fs::write(&config, &original).unwrap();

    // --fresh with a filesystem of the disk mounted elsewhere (read-only, as an admin looking at it).
    let foreign = t.path("foreign");
    let mounted = common::agent::Mounted::new(&t, "boot", &foreign, Some("ro"));
    let out = t.run_agent(&["--fresh"]);
    let log = log_of(&out);
    assert_eq!(out.status.code(), Some(1), "{log}");
    let want = format!(
        "refusing to wipe {}: it is in use: {} on {} (ext4)",
        s(t.disk()),
        s(mounted.device()),
        s(&foreign)
    );
    assert!(log.contains(&want), "{want:?} not in: {log}");
    drop(mounted);
    assert_eq!(t.installer_log().len(), 2, "RHCOS not written again");

    // With its own configuration and nothing mounted, the interrupted install resumes and finishes.
    let out = t.run_agent(&[]);
    let log = log_of(&out);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("found the state of an interrupted install on the disk")
            && log.contains("write-rhcos: done in an earlier run, skipping"),
        "{log}"
    );
    assert_eq!(t.installer_log().len(), 2, "RHCOS written once");
    check_nothing_left(&t);
}
