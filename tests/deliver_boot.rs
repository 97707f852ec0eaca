//! `ibi boot` against real BMC parts: sushy-tools' emulator (fake driver, Basic auth, self-signed
//! TLS) for both phases of an image-based install and the errors a user meets, and a stand-in for
//! the iDRAC layout (virtual media under the manager, session auth, ETag-checked PATCH, a task).
//! The images come from a real `ibi serve`, and the bytes each BMC downloaded are checked.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

mod common;

use common::deliver::emulator::{self, Emulator};
use common::deliver::standin::{self, StandIn};
use common::deliver::*;

/// A directory holding both ISOs of an install: random bytes stand in for them (the BMC only
/// downloads them).
fn images() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    write_random(&d.path().join("rhcos-ibi.iso"), 3 << 20, 1);
    write_random(&d.path().join("imagebasedconfig.iso"), 1 << 20, 2);
    d
}

fn boot(emu: &Emulator, extra: &[&str], iso: Option<&str>) -> std::process::Output {
    boot_as(emu, &emu.password_file, true, extra, iso)
}

/// `ibi boot` against the emulator with this password file, trusting its certificate or not.
fn boot_as(
    emu: &Emulator,
    password: &std::path::Path,
    trust: bool,
    extra: &[&str],
    iso: Option<&str>,
) -> std::process::Output {
    let ca = emu.cert.to_str().expect("utf-8");
    let mut args = vec![
        "boot",
        "--bmc",
        &emu.url,
        "--bmc-user",
        emulator::USER,
        "--bmc-password-file",
        password.to_str().expect("utf-8"),
        "--timeout",
        "120",
    ];
    if trust {
        args.extend(["--bmc-ca", ca]);
    }
    args.extend_from_slice(extra);
    let envs: Vec<(&str, &str)> = iso.map(|u| ("IBI_ISO_URL", u)).into_iter().collect();
    ibi_env(&args, &envs)
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn assert_success(o: &std::process::Output, emu_log: &str) {
    assert!(
        o.status.success(),
        "ibi boot failed: {}\nemulator: {emu_log}",
        text(o)
    );
}

#[test]
fn boot_factory_cd_then_site_disk_then_eject_against_sushy_emulator() {
    let Some(bin) = emulator::sushy_emulator(
        "boot_factory_cd_then_site_disk_then_eject_against_sushy_emulator",
    ) else {
        return;
    };
    let emu = Emulator::start(&bin);
    let dir = images();
    let serve = Served::start(dir.path(), &[]);
    let cert = dir.path().join(".ibi/serve-tls.crt");
    let install_url = serve.url("rhcos-ibi.iso");

    // Factory: the installation ISO, verified against the serve certificate, one-time CD boot.
    let out = boot(
        &emu,
        &["--boot", "cd", "--iso-ca", cert.to_str().expect("utf-8")],
        Some(&install_url),
    );
    assert_success(&out, &emu.log());
    let sys = emu.system();
    assert_eq!(sys["Boot"]["BootSourceOverrideTarget"], "Cd", "{sys}");
    assert_eq!(sys["Boot"]["BootSourceOverrideMode"], "UEFI", "{sys}");
    assert_eq!(sys["PowerState"], "On");
    let cd = emu.cd();
    assert_eq!(
        (
            cd["Image"].as_str(),
            cd["Inserted"].as_bool(),
            cd["VerifyCertificate"].as_bool()
        ),
        (Some(install_url.as_str()), Some(true), Some(true))
    );
    let got = emu
        .downloaded("rhcos-ibi.iso")
        .expect("the emulator's download");
    assert_eq!(
        sha256_file(&got),
        sha256_file(&dir.path().join("rhcos-ibi.iso")),
        "the BMC got other bytes than served"
    );
    let token = install_url.split('/').nth(3).expect("token");
    assert!(
        !text(&out).contains(token),
        "the token leaked: {}",
        text(&out)
    );
    assert!(
        text(&out).contains("one-time override to the virtual CD"),
        "{}",
        text(&out)
    );

    // Site: the configuration ISO, boot from disk: no CD override left, the media stays inserted.
    let config_url = serve.url("imagebasedconfig.iso");
    let out = boot(&emu, &["--boot", "disk"], Some(&config_url));
    assert_success(&out, &emu.log());
    let sys = emu.system();
    assert_ne!(
        sys["Boot"]["BootSourceOverrideTarget"], "Cd",
        "a CD override is left: {sys}"
    );
    assert_eq!(sys["PowerState"], "On");
    let cd = emu.cd();
    assert_eq!(
        (cd["Image"].as_str(), cd["Inserted"].as_bool()),
        (Some(config_url.as_str()), Some(true))
    );
    let got = emu
        .downloaded("imagebasedconfig.iso")
        .expect("the emulator's download");
    assert_eq!(
        sha256_file(&got),
        sha256_file(&dir.path().join("imagebasedconfig.iso"))
    );

    // Cleanup.
    let out = boot(&emu, &["--eject"], None);
    assert_success(&out, &emu.log());
    assert_eq!(emu.cd()["Inserted"], false);
    let log = serve.stderr();
    assert!(
        log.contains("GET rhcos-ibi.iso 200") && log.contains("GET imagebasedconfig.iso 200"),
        "{log}"
    );
    assert!(!log.contains(token), "the access log shows a token: {log}");
}

#[test]
fn boot_errors_say_what_went_wrong_each_its_own_way() {
    let Some(bin) = emulator::sushy_emulator("boot_errors_say_what_went_wrong_each_its_own_way")
    else {
        return;
    };
    let emu = Emulator::start(&bin);
    let dir = images();
    let serve = Served::start(dir.path(), &["--plain-http"]);
    let url = serve.url("rhcos-ibi.iso");
    let token = url.split('/').nth(3).expect("token").to_string();

    let wrong = emu.dir.path().join("wrong");
    std::fs::write(&wrong, "not-the-password\n").expect("write");
    let out = boot_as(&emu, &wrong, true, &[], Some(&url));
    let t = text(&out);
    assert!(!out.status.success());
    assert!(
        t.contains(&format!("BMC {}", emu.url)) && t.contains("authentication refused (HTTP 401)"),
        "{t}"
    );
    assert!(!t.contains("not-the-password"), "{t}");

    // The system trust store does not know the emulator's self-signed certificate.
    let out = boot_as(&emu, &emu.password_file, false, &[], Some(&url));
    let t = text(&out);
    assert!(!out.status.success());
    assert!(
        t.contains("certificate is not trusted") && t.contains("--bmc-ca"),
        "{t}"
    );

    // An image URL the server does not know: the BMC's download fails with 404.
    let bad = url.replace(&token, &"0".repeat(token.len()));
    let out = boot(&emu, &[], Some(&bad));
    let t = text(&out);
    assert!(!out.status.success());
    assert!(
        t.contains("InsertMedia") && t.contains("HTTP 400") && t.contains("404"),
        "{t}"
    );
    assert!(serve.stderr().contains("GET - 404"), "{}", serve.stderr());

    // No server at all: the emulator's 500 quotes the URL it was given; ours must not show it.
    let port = emulator::free_port();
    let gone = format!("http://127.0.0.1:{port}/{token}/rhcos-ibi.iso");
    let out = boot(&emu, &[], Some(&gone));
    let t = text(&out);
    assert!(!out.status.success());
    assert!(t.contains("HTTP 500") && t.contains("<redacted>"), "{t}");
    assert!(!t.contains(&token), "the URL's token is shown: {t}");

    // A password never reaches the output, even at the most verbose level.
    let out = boot(&emu, &["--eject", "--log-level", "trace"], None);
    assert_success(&out, &emu.log());
    let basic = openssl::base64::encode_block(
        format!("{}:{}", emulator::USER, emulator::PASSWORD).as_bytes(),
    );
    let t = text(&out);
    assert!(t.contains("DEBUG"), "trace logging is not on: {t}");
    assert!(
        !t.contains(emulator::PASSWORD) && !t.contains(&basic),
        "{t}"
    );
}

#[test]
fn boot_names_a_bmc_that_drops_the_connection_after_retrying() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(s);
        }
    });
    let bmc = format!("http://{addr}");
    let out = ibi_env(
        &["boot", "--bmc", &bmc, "--timeout", "60"],
        &[("IBI_ISO_URL", "http://127.0.0.1:9/t/x.iso")],
    );
    let t = text(&out);
    assert!(!out.status.success());
    assert!(
        t.contains(&format!("BMC {bmc}: GET /redfish/v1/: connection failed")),
        "{t}"
    );
    assert!(
        accepted.load(std::sync::atomic::Ordering::SeqCst) >= 2,
        "no retry: {t}"
    );
}

#[test]
fn boot_finds_virtual_media_under_the_manager_idrac_layout() {
    let dir = images();
    let serve = Served::start(dir.path(), &[]);
    let bmc = StandIn::start();
    let pw = dir.path().join("bmc-password");
    std::fs::write(&pw, standin::PASSWORD).expect("write");
    let url = serve.url("rhcos-ibi.iso");
    let out = ibi_env(
        &[
            "boot",
            "--bmc",
            &format!("{}/redfish/v1/Systems", bmc.url),
            "--bmc-user",
            standin::USER,
            "--bmc-password-file",
            pw.to_str().expect("utf-8"),
            "--timeout",
            "60",
        ],
        &[("IBI_ISO_URL", &url)],
    );
    let seen = bmc.seen();
    assert!(out.status.success(), "{}\n{:?}", text(&out), seen.calls);
    assert!(
        text(&out).contains("/Managers/iDRAC.Embedded.1/VirtualMedia/CD"),
        "{}",
        text(&out)
    );
    assert_eq!(seen.image.as_deref(), Some(url.as_str()));
    assert_eq!(
        seen.downloaded_sha256,
        Some(sha256_file(&dir.path().join("rhcos-ibi.iso")))
    );
    assert_eq!(seen.boot["BootSourceOverrideTarget"], "Cd");
    assert_eq!(seen.boot["BootSourceOverrideEnabled"], "Once");
    assert_eq!(seen.power, "On");
    assert_eq!(
        seen.patches_without_if_match, 0,
        "a PATCH went without If-Match: {:?}",
        seen.calls
    );
    assert!(!seen.basic_auth_used, "the session was not used");
    assert_eq!(seen.sessions_deleted, 1, "the session was not deleted");
    assert!(
        seen.calls
            .iter()
            .any(|c| c == "GET /redfish/v1/TaskService/Tasks/JID_001"),
        "the task was not followed: {:?}",
        seen.calls
    );
    // Power off came before the eject, the eject before the insert, the override after it.
    let pos = |needle: &str| {
        seen.calls
            .iter()
            .position(|c| c.contains(needle))
            .unwrap_or_else(|| panic!("no {needle}: {:?}", seen.calls))
    };
    assert!(pos("ComputerSystem.Reset") < pos("EjectMedia"));
    assert!(pos("EjectMedia") < pos("InsertMedia"));
    assert!(pos("InsertMedia") < pos("PATCH /redfish/v1/Systems"));
}
