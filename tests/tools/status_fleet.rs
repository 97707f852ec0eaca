//! `ibi status --html` in a real browser (issue 37 item 4, the static page's part): Debian's
//! `chromium`, headless, renders the page the binary wrote for the fleet of
//! tests/fast/status_fleet.rs plus a site whose host sent markup, a broken-out attribute and a
//! terminal escape. Checked in the DOM the browser built: one row per host, no element or event
//! attribute from host text (every tag and attribute is the page's own), the hostile text shown as
//! text. Twice: with JavaScript on (`--dump-dom`), and with it off (`--blink-settings=scriptEnabled=false`,
//! the DOM read over the DevTools protocol, which needs no script in the page; a probe page first
//! proves scripts are really off).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use std::path::Path;
use std::process::Command;

use crate::common::browser::{BROWSER_TIMEOUT, Browser};
use crate::common::deliver::ibi_env;
use crate::common::status_fleet::{HOSTILE_SHOWN, fleet, hostile_site, now};

const TEST: &str = "status_fleet";
/// The hosts of the fleet: sites a to e and a's shared-token host.
const HOSTS: usize = 6;
/// Every element the page is made of; anything else would have come from host text.
const PAGE_TAGS: [&str; 26] = [
    "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p", "code",
    "time", "section", "article", "pre", "ul", "li", "table", "thead", "tbody", "tr", "th", "td",
    "progress", "span",
];

/// Writes the page for the fleet; returns its path.
fn write_page(dir: &Path) -> std::path::PathBuf {
    let base = dir.join("base");
    std::fs::create_dir(&base).unwrap();
    let now = now();
    fleet(&base, now);
    hostile_site(&base, now);
    let page = dir.join("fleet.html");
    let out = ibi_env(
        &[
            "status",
            "--dir",
            base.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ],
        &[],
    );
    // The fleet has a damaged record and store line: written, then exit 1.
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    page
}

fn url(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// Every start tag of a serialized DOM: its name and its attributes' names. Sound for what a
/// browser serializes: `<` in text and in attribute values is written `&lt;`, `"` in a value
/// `&quot;`, and the page's one raw-text element, `<style>`, holds no `<`.
fn tags(dom: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find('<') {
        rest = &rest[i + 1..];
        if rest.starts_with('/') || rest.starts_with('!') {
            continue;
        }
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '>' || c == '/')
            .unwrap();
        let name = rest[..end].to_ascii_lowercase();
        rest = &rest[end..];
        let mut attrs = Vec::new();
        loop {
            rest = rest.trim_start();
            if rest.starts_with('>') || rest.starts_with("/>") {
                break;
            }
            let end = rest
                .find(|c: char| c == '=' || c.is_whitespace() || c == '>')
                .unwrap();
            attrs.push(rest[..end].to_ascii_lowercase());
            rest = &rest[end..];
            if let Some(value) = rest.strip_prefix("=\"") {
                rest = &value[value.find('"').unwrap() + 1..];
            }
        }
        out.push((name, attrs));
    }
    out
}

/// What both runs check in the DOM the browser built from the page.
fn check_dom(dom: &str, rows: usize, how: &str) {
    assert_eq!(rows, HOSTS, "{how}: rows in #fleet's body:\n{dom}");
    let tags = tags(dom);
    assert!(tags.len() > 100, "{how}: {} tags:\n{dom}", tags.len());
    for (name, attrs) in &tags {
        assert!(
            PAGE_TAGS.contains(&name.as_str()),
            "{how}: <{name}> is not the page's:\n{dom}"
        );
        for a in attrs {
            assert!(
                !a.starts_with("on") && a != "x" && a != "src" && a != "href",
                "{how}: <{name} {a}=…> is not the page's:\n{dom}"
            );
        }
    }
    assert!(!dom.contains('\u{1b}'), "{how}: a raw ESC in the DOM");
    // The hostile text as text, serialized as a browser serializes text (`&`, `<`, `>` escaped,
    // quotes as they are): in the failure's line, the journal, and the host and step cells.
    let shown = HOSTILE_SHOWN.replace("&quot;", "\"").replace("&#39;", "'");
    for (want, times) in [
        (format!("site e: factory failed at {shown}: {shown}</p>"), 1),
        (format!("journal {shown}\njournal end</pre>"), 1),
        (format!("<td>{shown}</td>"), 2),
    ] {
        assert_eq!(
            dom.matches(&want).count(),
            times,
            "{how}: {want:?} not in:\n{dom}"
        );
    }
}

#[test]
fn chromium_renders_every_host_and_host_text_as_text_with_javascript_on() {
    if !crate::common::tool("chromium", TEST) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let page = write_page(d.path());
    let out = Command::new("timeout")
        .args([
            BROWSER_TIMEOUT,
            "chromium",
            "--headless=new",
            "--disable-gpu",
            "--no-sandbox",
            &format!("--user-data-dir={}", d.path().join("profile").display()),
            "--dump-dom",
            &url(&page),
        ])
        .output()
        .unwrap();
    let dom = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success() && dom.contains("</html>"),
        "chromium --dump-dom: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let body = dom.split("<tbody>").nth(1).unwrap();
    let rows = body
        .split("</tbody>")
        .next()
        .unwrap()
        .matches("<tr ")
        .count();
    check_dom(&dom, rows, "JavaScript on");
}

#[test]
fn chromium_renders_every_host_and_host_text_as_text_with_javascript_off() {
    if !crate::common::tool("chromium", TEST) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let page = write_page(d.path());
    // With scripts off, <noscript>'s content is parsed as elements and the script never runs.
    let probe = d.path().join("probe.html");
    std::fs::write(
        &probe,
        "<!DOCTYPE html><body><noscript><p>off</p></noscript>\
         <script>document.body.setAttribute('data-js', 'on')</script></body>",
    )
    .unwrap();
    let mut b = Browser::start(
        &d.path().join("profile"),
        &["--blink-settings=scriptEnabled=false"],
        BROWSER_TIMEOUT,
    );
    let root = b.load(&url(&probe));
    assert_eq!(
        (
            b.count(&root, "noscript > p"),
            b.count(&root, "body[data-js]")
        ),
        (1, 0),
        "scripts are not off: {}",
        b.outer_html(&root)
    );
    let root = b.load(&url(&page));
    let rows = b.count(&root, "#fleet > tbody > tr");
    assert_eq!(b.count(&root, "script"), 0);
    assert_eq!(b.count(&root, "tr.failed"), 2);
    let dom = b.outer_html(&root);
    b.close();
    check_dom(&dom, rows, "JavaScript off");
}
