use std::io::{Read, Write};
use std::net::TcpListener;

use super::*;
use contract::host_report::{DEFAULT_ATTEMPTS, MAX_LOG_LINE_CHARS};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

fn config(url: &str, attempts: u32) -> ReportConfig {
    ReportConfig {
        url: url.into(),
        token: Secret::new(TOKEN),
        ca_pem: None,
        attempts,
        delay_seconds: 0,
    }
}

/// A port nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Answers every request with `status` and returns the bodies it got, once `n` arrived.
fn answering(status: &'static str, n: usize) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let t = std::thread::spawn(move || {
        let mut bodies = Vec::new();
        for _ in 0..n {
            let (mut s, _) = l.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            // Headers, then Content-Length bytes of body.
            let body = loop {
                let k = s.read(&mut buf).unwrap();
                req.extend_from_slice(&buf[..k]);
                let text = String::from_utf8_lossy(&req).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length: ")
                                .map(|v| v.trim().parse().unwrap())
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        assert!(
                            head.contains(&format!("authorization: Bearer {TOKEN}")),
                            "{head}"
                        );
                        break body.to_string();
                    }
                }
            };
            bodies.push(body);
            write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
        }
        bodies
    });
    (url, t)
}

fn identity() -> HostIdentity {
    HostIdentity {
        hostname: "h".into(),
        product_uuid: Some("u-1".into()),
        boot_id: None,
    }
}

#[test]
fn the_final_report_carries_filtered_logs_and_waits_for_delivery() {
    let (url, server) = answering("204 No Content", 1);
    let secrets = vec![Secret::new("MARKER-pw")];
    let r = Reporter::start(config(&url, 3), identity(), secrets).unwrap();
    let logs = vec![
        format!("token {TOKEN} and MARKER-pw"),
        "proxy http://u:MARKER-proxy@p:3128".into(),
    ];
    let mut status = Status::idle(1);
    status.step = "precache".into();
    let outcome = r.finish(status, Err("precache failed: MARKER-pw leaked"), logs);
    assert_eq!(outcome, Delivery::Delivered);
    let body = server.join().unwrap().pop().unwrap();
    let report: HostReport = serde_json::from_str(&body).unwrap();
    assert!(report.finished);
    assert_eq!(report.status.state, RunState::Failed);
    assert_eq!(
        report.status.error.as_deref(),
        Some("precache failed: <redacted> leaked")
    );
    assert_eq!(
        report.logs,
        [
            "token <redacted> and <redacted>",
            "proxy http://<redacted>@p:3128"
        ]
    );
    assert!(!body.contains("MARKER") && !body.contains(TOKEN), "{body}");
    // Only the first finish sends.
    assert_eq!(
        r.finish(Status::idle(2), Ok(()), Vec::new()),
        Delivery::Delivered
    );
}

#[test]
fn an_unreachable_server_is_tried_a_bounded_number_of_times() {
    let url = format!("http://127.0.0.1:{}", closed_port());
    let r = Reporter::start(config(&url, 3), identity(), Vec::new()).unwrap();
    r.report(&Status::idle(1));
    assert_eq!(
        r.finish(Status::idle(2), Ok(()), Vec::new()),
        Delivery::GaveUp
    );
}

/// The server comes up while a progress report waits to be tried again; the final report takes its
/// place and is delivered: `finish` says so (it said `GaveUp`, the outcome lost with the report it
/// replaced).
#[test]
fn a_final_report_that_replaced_a_waiting_one_is_known_delivered() {
    let port = closed_port();
    let url = format!("http://127.0.0.1:{port}");
    let r = Reporter::start(config(&url, 1_000_000), identity(), Vec::new()).unwrap();
    r.report(&Status::idle(1));
    let server = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
        let (mut s, _) = l.accept().unwrap();
        let mut req = Vec::new();
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&req).contains("\"finished\":") {
            let k = s.read(&mut buf).unwrap();
            req.extend_from_slice(&buf[..k]);
        }
        write!(
            s,
            "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        String::from_utf8_lossy(&req).to_string()
    });
    assert_eq!(
        r.finish(Status::idle(2), Ok(()), Vec::new()),
        Delivery::Delivered
    );
    let req = server.join().unwrap();
    assert!(req.contains("\"finished\":true"), "{req}");
}

#[test]
fn a_refused_token_ends_reporting() {
    let (url, server) = answering("403 Forbidden", 1);
    let r = Reporter::start(config(&url, DEFAULT_ATTEMPTS), identity(), Vec::new()).unwrap();
    r.report(&Status::idle(1));
    let bodies = server.join().unwrap();
    assert_eq!(bodies.len(), 1);
    // The thread stopped at the refusal: the final report is not even tried.
    assert_eq!(
        r.finish(Status::idle(2), Ok(()), Vec::new()),
        Delivery::Refused(403)
    );
}

#[test]
fn logs_are_scrubbed_before_they_are_cut() {
    // A secret straddling the cut must not leave its first half behind.
    let secret = "S".repeat(20);
    let line = format!("{}{secret}", "x".repeat(MAX_LOG_LINE_CHARS - 10));
    let out = filter_logs(vec![line], &[Secret::new(secret.clone())]);
    assert!(!out[0].contains("SSSS"), "{}", out[0]);
}
