//! `ibi deploy --dashboard` seen in a real browser (issue 37, items 1, 2 and 4): the 20-site factory
//! deploy of deploy_scale.rs (one sushy-tools emulator with its fake driver serving one System per
//! site: it stands for the sites' BMCs; the test plays the hosts, which report as the booted live
//! ISO would), its status page open in Debian's Chromium, headless, driven over the DevTools
//! protocol on a pipe.
//!
//! Checked: the page's URL is printed once and its token is neither a host's report token nor an
//! image's; a path without the token (or with another, or another file under it) gets the 404 a
//! guessed image URL gets; the page lists every site; a row changes state when its host reports,
//! without a reload (a mark the test leaves on the document survives); a failed host's journal is
//! shown, its hostile text as text (no element of its own, escape sequences written out); with
//! JavaScript off the page is the table as served, and nothing updates it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::collections::HashSet;
use std::os::unix::fs::PermissionsExt;
use std::process::Child;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::browser::Browser;
use common::deliver::emulator::sushy_emulator;
use common::deliver::fleet::{FactoryBase, wait_exit_within};
use common::deliver::stop_child;
use serde_json::Value;

use super::deploy_scale::{Play, ScaleFleet, play_hosts, printed_dashboard_url, site};

const TEST: &str = "deploy_dashboard";
const SITES: usize = 20;
/// The bound of each wait for the page or deploy (the test's own, not a performance assertion).
const WAIT: Duration = Duration::from_secs(600);
/// Seconds the browsers may run before `timeout` ends them.
const BROWSER_SECONDS: &str = "1500";
/// What the failing host (site s001) sends: markup, a broken-out attribute, a terminal escape and a
/// right-to-left override.
const HOSTILE: &str = "<script>alert(1)</script>\"onload=alert(2) \x1b[31m\u{202e}red";
/// [`HOSTILE`] as the page's text must read: the controls written out, the markup as text.
const HOSTILE_TEXT: &str = "<script>alert(1)</script>\"onload=alert(2) \\x1b[31m\\u{202e}red";
/// The text the server puts in `#live`; the page's script replaces it.
const SERVED_LIVE: &str = "Served live: with JavaScript on, this page updates itself";

/// The page's URL, from the line deploy prints once on stderr.
fn dashboard_url(work: &std::path::Path, deploy: &mut Child) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(url) = printed_dashboard_url(work) {
            return url;
        }
        assert!(
            deploy.try_wait().unwrap().is_none() && Instant::now() < deadline,
            "no status page line:\n{}",
            std::fs::read_to_string(work.join("run.stderr")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Until `expression` is true in the page; fails with the page and deploy's last lines.
fn wait_for(b: &mut Browser, what: &str, expression: &str, work: &std::path::Path) {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if b.evaluate(expression) == Value::Bool(true) {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let page = b.evaluate("document.body.innerText");
    let err = std::fs::read_to_string(work.join("run.stderr")).unwrap_or_default();
    panic!("the page never showed {what}:\n{page}\ndeploy's stderr:\n{err}");
}

/// `site`'s row has this result (and step, when given).
fn row_is(site: &str, state: &str, step: Option<&str>) -> String {
    let step = step.map_or("true".to_string(), |s| {
        format!("r.querySelectorAll('td')[4].textContent === '{s}'")
    });
    format!(
        "(r => !!r && r.querySelector('td.state').textContent === '{state}' && {step})\
         (document.querySelector('#fleet tr[data-site=\"{site}\"]'))"
    )
}

fn check_access(url: &str, base: &std::path::Path, ca: &[u8]) {
    let client = reqwest::blocking::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca).unwrap()])
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let page = client.get(url).send().unwrap();
    assert_eq!(page.status(), 200);
    let header = |name: &str| {
        page.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert_eq!(header("content-type"), "text/html; charset=utf-8");
    assert!(header("content-security-policy").contains("frame-ancestors 'none'"));
    assert_eq!(header("cache-control"), "no-store");
    let token = url.split('/').nth(3).unwrap();
    let origin = url.split('/').take(3).collect::<Vec<_>>().join("/");
    let mut other = token.to_string();
    other.replace_range(0..1, if token.starts_with('0') { "1" } else { "0" });
    for path in [
        "/".to_string(),
        format!("/{token}"),
        format!("/{other}/"),
        format!("/{other}/live.js"),
        format!("/{token}/fleet.json"),
        format!("/{token}/../"),
    ] {
        let r = client.get(format!("{origin}{path}")).send().unwrap();
        assert_eq!(r.status(), 404, "{path}");
        assert_eq!(r.content_length(), Some(0), "{path}");
    }
    let script = client.get(format!("{url}live.js")).send().unwrap();
    assert_eq!(script.status(), 200);
    // Its own token: no host's report token, no image's URL, and kept private.
    for file in [".ibi/deploy-tokens.json", ".ibi/deploy-served.json"] {
        let text = std::fs::read_to_string(base.join(file)).unwrap();
        assert!(!text.contains(token), "{file} holds the page's token");
    }
    let kept = base.join(".ibi/dashboard-token");
    assert_eq!(std::fs::read_to_string(&kept).unwrap().trim(), token);
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn a_twenty_site_deploy_is_seen_live_in_chromium() {
    if !common::require_tools(TEST, &["coreos-installer", "chromium"]) {
        return;
    }
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let fleet = ScaleFleet::new(&bin, SITES);
    let ScaleFleet {
        fb: FactoryBase {
            base, work, tls, ..
        },
        uuids,
        emu,
        ..
    } = &fleet;
    let mut deploy = fleet.spawn(4, &["--dashboard"]);
    let url = dashboard_url(work.path(), &mut deploy);
    let ca = std::fs::read(&tls.0).unwrap();
    check_access(&url, base.path(), &ca);

    // s000's host reports once the page has shown it waiting; the last site's once the page has
    // shown the rest, so the server (which stops with deploy) is still there to be asked.
    let (first, last) = (AtomicBool::new(false), AtomicBool::new(false));
    let how = |i: usize| match i {
        0 if !first.load(Ordering::SeqCst) => Play::Wait,
        i if i == SITES - 1 && !last.load(Ordering::SeqCst) => Play::Wait,
        1 => Play::Fail(
            HOSTILE.into(),
            vec![format!("journal {HOSTILE}"), "journal end".into()],
        ),
        _ => Play::Done,
    };
    let (played, done): (Mutex<HashSet<usize>>, AtomicBool) = Default::default();
    let profile = work.path().join("profile");
    let status = std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| play_hosts(base.path(), emu, uuids, &ca, &played, &done, &how));
        }
        // Whatever the page showed, the players stop and deploy ends before the scope does.
        let viewed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            view(&url, &profile, work.path(), &first)
        }));
        last.store(true, Ordering::SeqCst);
        if viewed.is_err() {
            stop_child(&mut deploy);
        }
        let status = wait_exit_within(&mut deploy, WAIT);
        done.store(true, Ordering::SeqCst);
        if let Err(panic) = viewed {
            std::panic::resume_unwind(panic);
        }
        status
    });
    let read = |f: &str| std::fs::read_to_string(work.path().join(f)).unwrap_or_default();
    let stdout = read("run.stdout");
    assert_eq!(status.code(), Some(1), "{stdout}\n{}", read("run.stderr"));
    assert_eq!(
        stdout.lines().filter(|l| l.contains("  done  ")).count(),
        SITES - 1,
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().filter(|l| l.contains("  failed  ")).count(),
        1,
        "{stdout}"
    );
}

/// What the test sees in the browsers while deploy runs; `first` lets s000's host report.
fn view(url: &str, profile: &std::path::Path, w: &std::path::Path, first: &AtomicBool) {
    let mut b = Browser::start(
        profile,
        &["--ignore-certificate-errors", "--window-size=1400,1100"],
        BROWSER_SECONDS,
    );
    b.load(url);
    b.evaluate("document.ibiMark = 'the first load'");
    wait_for(
        &mut b,
        "every site's row",
        &format!("document.querySelectorAll('#fleet > tbody > tr').length === {SITES}"),
        w,
    );
    wait_for(
        &mut b,
        "s000 waiting for its host",
        &row_is("s000", "running", Some("wait-report")),
        w,
    );
    first.store(true, Ordering::SeqCst);
    wait_for(&mut b, "s000 done", &row_is("s000", "done", None), w);
    wait_for(&mut b, "s001 failed", &row_is("s001", "failed", None), w);
    for i in 2..SITES - 1 {
        wait_for(&mut b, "a site done", &row_is(&site(i), "done", None), w);
    }
    wait_for(
        &mut b,
        "s001's journal",
        "(a => !!a && a.querySelector('h3').textContent === 'site s001' \
         && !!a.querySelector('pre.journal'))(document.querySelector('#failures article'))",
        w,
    );
    // Not reloaded: the document the test marked is the one shown.
    assert_eq!(b.evaluate("document.ibiMark"), "the first load");
    let live = b.evaluate("document.getElementById('live').textContent");
    assert!(
        live.as_str().unwrap().starts_with("Live: updated at "),
        "{live}"
    );
    // The host's text is text: shown written out, no element of its own.
    let journal = b.evaluate("document.querySelector('#failures pre.journal').textContent");
    assert_eq!(
        journal.as_str().unwrap(),
        format!("journal {HOSTILE_TEXT}\njournal end")
    );
    assert_eq!(
        b.evaluate("document.querySelectorAll('script').length"),
        1,
        "only the page's own script"
    );
    assert_eq!(
        b.evaluate(
            "document.querySelectorAll('[onload], #failures *:not(h2,h3,p,pre,article)').length"
        ),
        0
    );
    assert_eq!(
        b.evaluate("document.documentElement.outerHTML.includes('\\u001b')"),
        false
    );

    // For docs/deliver.md: the page as it stands now, when asked for.
    if let Some(png) = std::env::var_os("IBI_DASHBOARD_SCREENSHOT") {
        let shot = b.call(
            true,
            "Page.captureScreenshot",
            serde_json::json!({"format": "png", "captureBeyondViewport": true}),
        );
        let bytes = openssl::base64::decode_block(shot["data"].as_str().unwrap()).unwrap();
        std::fs::write(png, bytes).unwrap();
    }

    // JavaScript off: the table as served, which nothing updates.
    let mut off = Browser::start(
        &w.join("profile-off"),
        &[
            "--ignore-certificate-errors",
            "--blink-settings=scriptEnabled=false",
        ],
        BROWSER_SECONDS,
    );
    let root = off.load(url);
    assert_eq!(off.count(&root, "#fleet > tbody > tr"), SITES);
    assert_eq!(off.count(&root, "tr.failed"), 1);
    std::thread::sleep(Duration::from_secs(3)); // longer than the script's first update
    let root =
        off.call(true, "DOM.getDocument", serde_json::json!({"depth": -1}))["root"]["nodeId"]
            .clone();
    let html = off.outer_html(&root);
    assert!(html.contains(SERVED_LIVE), "{html}");
    off.close();
    b.close();
}
