//! `ibi boot` against real BMC parts: sushy-tools' emulator (fake driver, Basic auth, self-signed
//! TLS) for both phases of an image-based install and the errors a user meets, and a stand-in for
//! the iDRAC layout (virtual media under the manager, session auth, ETag-checked PATCH, a task).
//! The images come from a real `ibi serve`, and the bytes each BMC downloaded are checked.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::time::{Duration, Instant};

use crate::common::deliver::emulator::{self, Emulator, Proxy};
use crate::common::deliver::*;
use ibi::deliver::boot::{self as deliver_boot, BootEvent, BootFrom, Job};
use ibi::redfish::{Credentials, Trust};
use ibi::util::secret::Secret;

use crate::common::deliver_boot::*;

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
    // The fake driver does not model one-time boot (GET shows `Continuous` whatever was sent), and
    // ibi, reading the override back, says so (the iDRAC stand-in below keeps `Once`).
    assert!(
        text(&out).contains(deliver_boot::CD_CONTINUOUS),
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

    // One-shot's second boot: the disk with no media (`--boot disk` without `--iso`): every CD
    // ejected, no CD override, the host powered off and on again.
    let resets = emu.log().matches("ComputerSystem.Reset").count();
    let inserts = emu.log().matches("InsertMedia").count();
    let out = boot(&emu, &["--boot", "disk"], None);
    assert_success(&out, &emu.log());
    assert!(text(&out).contains("from disk, no media"), "{}", text(&out));
    assert_eq!(emu.cd()["Inserted"], false);
    let sys = emu.system();
    assert_ne!(sys["Boot"]["BootSourceOverrideTarget"], "Cd", "{sys}");
    assert_eq!(sys["PowerState"], "On");
    let new = &emu.log()[..];
    assert_eq!(
        new.matches("ComputerSystem.Reset").count(),
        resets + 2,
        "one power-off and one power-on: {new}"
    );
    assert_eq!(
        new.matches("InsertMedia").count(),
        inserts,
        "nothing inserted: {new}"
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

    // No user at all: the BMC's 401 says so, and how to give one, not "check the password".
    let ca = emu.cert.to_str().expect("utf-8");
    let out = ibi_env(
        &["boot", "--bmc", &emu.url, "--bmc-ca", ca, "--timeout", "60"],
        &[("IBI_ISO_URL", &url)],
    );
    let t = text(&out);
    assert!(!out.status.success());
    assert!(
        t.starts_with(
            "error: the BMC wants a user: give --bmc-user USER (or IBI_BMC_USER) with --bmc-password-file FILE (or IBI_BMC_PASSWORD): "
        ) && t.contains("authentication refused (HTTP 401): no user was given"),
        "{t}"
    );
    assert!(!t.contains("check the user and password"), "{t}");

    // A CA was given, but not the one that signed the BMC's certificate: that CA is named.
    let other = emu.dir.path().join("other-ca.pem");
    let (cert, _) =
        ibi::deliver::serve::tls::generate(&[ibi::deliver::serve::tls::Host::parse("127.0.0.1")])
            .expect("certificate");
    std::fs::write(&other, cert).expect("write");
    let other = other.to_str().expect("utf-8");
    let out = ibi_env(
        &[
            "boot",
            "--bmc",
            &emu.url,
            "--bmc-user",
            emulator::USER,
            "--bmc-password-file",
            emu.password_file.to_str().expect("utf-8"),
            "--bmc-ca",
            other,
        ],
        &[("IBI_ISO_URL", &url)],
    );
    let t = text(&out);
    assert!(!out.status.success());
    assert!(
        t.starts_with(&format!(
            "error: --bmc-ca {other} did not verify the BMC's certificate: give the CA that signed it: "
        )) && t.contains("the BMC's TLS certificate did not verify against the CA given"),
        "{t}"
    );
    assert!(!t.contains("pass --bmc-ca FILE"), "{t}");

    // The system trust store does not know the emulator's self-signed certificate.
    let out = boot_as(&emu, &emu.password_file, false, &[], Some(&url));
    let t = text(&out);
    assert!(!out.status.success());
    assert!(
        t.starts_with(
            "error: the BMC's certificate is not trusted: pass --bmc-ca FILE (its CA) or --bmc-insecure: "
        ),
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
    // The power-off came first: the user learns how the host was left.
    assert!(
        t.starts_with("error: the host was left powered off: inserting the image into "),
        "{t}"
    );
    assert_eq!(emu.system()["PowerState"], "Off");
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
fn boot_keeps_one_connection_to_the_bmc_for_all_its_calls() {
    let Some(bin) = emulator::gunicorn("boot_keeps_one_connection_to_the_bmc_for_all_its_calls")
    else {
        return;
    };
    let emu = Emulator::start_kept_alive(&bin);
    let dir = images();
    let serve = Served::start(dir.path(), &["--plain-http"]);
    // Counts the TCP (and so TLS) connections ibi opens to the BMC.
    let proxy = Proxy::start(emu.address(), None);
    let before = emu.requests().len();
    let iso = serve.url("rhcos-ibi.iso");
    let out = boot_at(&proxy.url, &emu, &emu.password_file, true, &[], Some(&iso));
    assert_success(&out, &emu.log());
    let requests = emu.requests().len() - before;
    assert!(requests >= 15, "only {requests} requests: {}", emu.log());
    assert_eq!(
        proxy.accepted(),
        1,
        "{} connections for {requests} requests",
        proxy.accepted()
    );
}

#[test]
fn boot_survives_a_bmc_closing_its_idle_connection_as_a_request_arrives() {
    let Some(bin) =
        emulator::gunicorn("boot_survives_a_bmc_closing_its_idle_connection_as_a_request_arrives")
    else {
        return;
    };
    let emu = Emulator::start_kept_alive(&bin);
    let dir = images();
    let serve = Served::start(dir.path(), &["--plain-http"]);
    // A BMC whose keep-alive timeout (1.5 s) fires just as the next request arrives.
    let proxy = Proxy::start(emu.address(), Some(Duration::from_millis(1500)));
    let iso = serve.url("rhcos-ibi.iso");
    let mut req = request(
        &emu,
        Job::Boot {
            iso: Secret::new(iso.as_str()),
            from: BootFrom::Cd,
            iso_ca: None,
        },
    );
    req.bmc = proxy.url.parse().expect("url");
    // A caller slow to record two steps leaves the connection idle: the next request after the
    // power-off is a POST (the eject), the one after the insert a GET (the system read again).
    let mut events = Vec::new();
    let report = deliver_boot::run_observed(&req, &mut |event| {
        if matches!(event, BootEvent::PoweredOff | BootEvent::Inserted { .. }) {
            std::thread::sleep(Duration::from_secs(2));
        }
        events.push(event);
        Ok(())
    })
    .expect("the boot failed on a connection the BMC closed");
    // The two above, and any power read that came 2 s after the one before.
    assert!(proxy.dropped() >= 2, "{} dropped", proxy.dropped());
    assert_eq!(events.len(), 5, "{events:?}");
    assert_eq!(report.power, "On");
    let ejects = emu
        .requests()
        .iter()
        .filter(|r| r.ends_with("/VirtualMedia.EjectMedia"))
        .count();
    assert_eq!(
        ejects, 1,
        "the eject the BMC never read was sent again, once"
    );
}

#[test]
fn boot_tells_each_step_and_powering_on_before_the_power_on_request() {
    let Some(bin) = emulator::sushy_emulator(
        "boot_tells_each_step_and_powering_on_before_the_power_on_request",
    ) else {
        return;
    };
    let emu = Emulator::start(&bin);
    let dir = images();
    let serve = Served::start(dir.path(), &["--plain-http"]);
    // A host that is on, so the boot has to power it off first.
    let system = format!("/redfish/v1/Systems/{}", emu.uuid);
    assert!(emu.post(
        &format!("{system}/Actions/ComputerSystem.Reset"),
        &serde_json::json!({"ResetType": "On"})
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    while emu.system()["PowerState"] != "On" {
        assert!(Instant::now() < deadline, "the emulator did not power on");
        std::thread::sleep(Duration::from_millis(500));
    }
    let first = resets(&emu);
    let iso = serve.url("rhcos-ibi.iso");
    let req = request(
        &emu,
        Job::Boot {
            iso: Secret::new(iso.as_str()),
            from: BootFrom::Cd,
            iso_ca: None,
        },
    );
    // At each event: the power requests answered so far, the power state, the CD, the override.
    let mut seen = Vec::new();
    let report = deliver_boot::run_observed(&req, &mut |event| {
        let sys = emu.system();
        seen.push((
            event,
            resets(&emu) - first,
            sys["PowerState"].as_str().unwrap_or("").to_string(),
            emu.cd()["Inserted"].as_bool(),
            sys["Boot"]["BootSourceOverrideTarget"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        ));
        Ok(())
    })
    .expect("boot");
    let cd = format!("{system}/VirtualMedia/Cd");
    // The fake system boots its disk (`Hdd`) until told otherwise, and its CD starts empty; the
    // power request counted at the power-off is ibi's, the test's own came before `first`.
    let found = BootEvent::Found {
        system: system.clone(),
        uuid: Some(emu.uuid.clone()),
    };
    let want = [
        (found, 0, "On", Some(false), "Hdd"),
        (BootEvent::PoweredOff, 1, "Off", Some(false), "Hdd"),
        (
            BootEvent::Inserted { media: cd.clone() },
            1,
            "Off",
            Some(true),
            "Hdd",
        ),
        (BootEvent::PoweringOn, 1, "Off", Some(true), "Cd"),
        (BootEvent::PoweredOn, 2, "On", Some(true), "Cd"),
    ];
    let got: Vec<_> = seen
        .iter()
        .map(|(e, n, power, inserted, target)| {
            (e.clone(), *n, power.as_str(), *inserted, target.as_str())
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(report.system, system);
    assert_eq!(report.media, cd);
    assert_eq!(report.power, "On");
}

#[test]
fn check_only_looks_and_its_errors_name_what_is_wrong() {
    let Some(bin) = emulator::sushy_emulator("check_only_looks_and_its_errors_name_what_is_wrong")
    else {
        return;
    };
    let emu = Emulator::start(&bin);
    let dir = images();
    let serve = Served::start(dir.path(), &["--plain-http"]);
    // A state worth keeping: media in the CD and a one-time CD override.
    let system = format!("/redfish/v1/Systems/{}", emu.uuid);
    let cd = format!("{system}/VirtualMedia/Cd");
    let iso = serve.url("rhcos-ibi.iso");
    assert!(emu.post(
        &format!("{cd}/Actions/VirtualMedia.InsertMedia"),
        &serde_json::json!({"Image": iso, "Inserted": true, "WriteProtected": true})
    ));
    assert!(emu.patch(
        &system,
        &serde_json::json!({"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
    ));
    let before = (emu.system(), emu.cd());
    let n = emu.requests().len();
    let report = deliver_boot::run(&request(&emu, Job::Check)).expect("check");
    let during = emu.requests()[n..].to_vec();
    assert!(!during.is_empty());
    assert!(
        during.iter().all(|r| r.starts_with("GET ")),
        "the check sent more than GETs: {during:?}"
    );
    assert_eq!(
        (emu.system(), emu.cd()),
        before,
        "the check changed something"
    );
    assert_eq!(report.system, system);
    assert_eq!(report.uuid.as_deref(), Some(emu.uuid.as_str()));
    assert_eq!(report.media, cd);
    assert!(
        report.image.ends_with("/<redacted>/rhcos-ibi.iso"),
        "{}",
        report.image
    );
    assert!(report.boot.starts_with("override to Cd"), "{}", report.boot);
    assert_eq!(report.power, "Off");

    // What a pre-flight meets, each with its own message.
    let wrong_password = {
        let mut r = request(&emu, Job::Check);
        r.client.credentials = Some(Credentials {
            user: emulator::USER.into(),
            password: Secret::new("not-the-password"),
        });
        r
    };
    let no_user = {
        let mut r = request(&emu, Job::Check);
        r.client.credentials = None;
        r
    };
    let other_ca = {
        let (cert, _) =
            ibi::deliver::serve::tls::generate(&[ibi::deliver::serve::tls::Host::parse(
                "127.0.0.1",
            )])
            .expect("certificate");
        let mut r = request(&emu, Job::Check);
        r.client.trust = Trust::Ca(cert);
        r
    };
    let unknown_system = {
        let mut r = request(&emu, Job::Check);
        r.system_id = Some("nope".into());
        r
    };
    let cases = [
        (
            wrong_password,
            "authentication refused (HTTP 401): check the user and password",
        ),
        (
            no_user,
            "authentication refused (HTTP 401): no user was given",
        ),
        (
            other_ca,
            "GET /redfish/v1/: the BMC's TLS certificate did not verify against the CA given: ",
        ),
        (unknown_system, "/redfish/v1/Systems has no system \"nope\""),
    ];
    for (req, want) in cases {
        let e = deliver_boot::run(&req).expect_err(want);
        let t = format!("{e:#}");
        assert!(t.contains(want), "{t}");
        assert!(!t.contains("not-the-password"), "{t}");
    }
    assert_eq!(
        (emu.system(), emu.cd()),
        before,
        "a failed check changed something"
    );
}
