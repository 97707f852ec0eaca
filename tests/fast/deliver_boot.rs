//! `ibi boot` against real BMC parts: sushy-tools' emulator (fake driver, Basic auth, self-signed
//! TLS) for both phases of an image-based install and the errors a user meets, and a stand-in for
//! the iDRAC layout (virtual media under the manager, session auth, ETag-checked PATCH, a task).
//! The images come from a real `ibi serve`, and the bytes each BMC downloaded are checked.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common::deliver::standin::{self, StandIn};
use crate::common::deliver::*;

use crate::common::deliver_boot::*;

/// Issue 33 item 12: a hostile BMC (a raw HTTP server standing for one that answers every call
/// with an error whose text holds an escape sequence, a carriage return and a newline) printed a
/// line of its own through `ibi boot`'s error (`forged: ok`). Escaped, newline too, as deploy does.
#[test]
fn boot_escapes_a_hostile_bmcs_newline() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            let mut buf = [0u8; 8192];
            let _ = s.read(&mut buf);
            let body = serde_json::json!({"error": {"message": "refused \u{1b}]0;pwned\u{7}\r\nforged: ok"}})
                .to_string();
            let _ = write!(
                s,
                "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
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
        t.contains("refused \\x1b]0;pwned\\x07\\r\\nforged: ok"),
        "{t}"
    );
    assert!(
        !t.lines().any(|l| l.starts_with("forged")),
        "the BMC printed a line of its own: {t:?}"
    );
    assert!(!t.chars().any(|c| c.is_control() && c != '\n'), "{t:?}");
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
    assert!(
        text(&out).contains("boot    one-time override to the virtual CD"),
        "{}",
        text(&out)
    );
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

/// What a BMC says of its power is its text: after an eject it is shown bounded and with control
/// characters escaped, as after every other job (the stand-in's `PowerState` carries a terminal
/// title sequence and 200 more characters; before the typed power state the eject showed them all).
#[test]
fn eject_shows_a_bmcs_power_state_as_text() {
    let dir = images();
    let bmc = StandIn::start();
    bmc.state.lock().expect("state").power = format!("On\u{1b}]0;pwned\u{7}{}", "x".repeat(200));
    let pw = dir.path().join("bmc-password");
    std::fs::write(&pw, standin::PASSWORD).expect("write");
    let out = ibi_env(
        &[
            "boot",
            "--eject",
            "--bmc",
            &format!("{}/redfish/v1/Systems", bmc.url),
            "--bmc-user",
            standin::USER,
            "--bmc-password-file",
            pw.to_str().expect("utf-8"),
            "--timeout",
            "60",
        ],
        &[],
    );
    let t = text(&out);
    assert!(out.status.success(), "{t}\n{:?}", bmc.seen().calls);
    assert!(!t.contains('\u{1b}') && !t.contains('\u{7}'), "{t:?}");
    assert!(t.contains("On\\x1b]0;pwned\\x07"), "{t}");
    // Bounded: 40 characters of the BMC's word and `…`, as after the other jobs.
    let power = t
        .lines()
        .find(|l| l.starts_with("power "))
        .expect("a power line");
    assert!(
        power.ends_with("x…") && power.chars().count() < 70,
        "{power}"
    );
}
