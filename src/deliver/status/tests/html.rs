//! The HTML page: every host a row, failures first with their journal, the steps of each phase,
//! host text escaped wherever it lands, nothing fetched.

use super::fixtures::*;
use crate::contract::agent_status::RunState;
use crate::deliver::deploy_state::Phase;
use crate::deliver::status::html::{esc, progress};
use crate::deliver::status::*;

/// The `<tbody>` rows, in order, each as its text.
fn rows(page: &str) -> Vec<&str> {
    let body = page
        .split_once("<tbody>\n")
        .and_then(|(_, rest)| rest.split_once("</tbody>"))
        .map(|(rows, _)| rows)
        .unwrap();
    body.lines().collect()
}

/// The cells of a row, markup and all.
fn cells(row: &str) -> Vec<&str> {
    row.split("<td")
        .skip(1)
        .map(|c| {
            let c = &c[c.find('>').unwrap() + 1..];
            &c[..c.find("</td>").unwrap()]
        })
        .collect()
}

/// a17: factory done, site phase watching; a18: its host failed in precache; a19: nothing yet;
/// a20: factory done; a21: a one-shot install done, its disk booted.
fn fleet_of_five() -> (tempfile::TempDir, Fleet) {
    let mut a17 = site("a17", A);
    a17.phases
        .insert(Phase::Factory, record(RunState::Done, "eject", T));
    a17.phases
        .insert(Phase::Site, record(RunState::Running, "watch", T + 100));
    let mut a18 = site("a18", B);
    a18.phases
        .insert(Phase::Factory, record(RunState::Running, "wait-report", T));
    let mut a20 = site("a20", "20202020-0000-0000-0000-000000000000");
    a20.phases
        .insert(Phase::Factory, record(RunState::Done, "eject", T));
    let mut a21 = site("a21", "21212121-0000-0000-0000-000000000000");
    a21.phases
        .insert(Phase::Oneshot, record(RunState::Running, "boot-disk", T));
    let d = base(
        &[own(
            "a18",
            stored(Some(B), "1", "precache", RunState::Failed, true, T + 50),
        )],
        &[
            a17,
            a18,
            site("a19", "19191919-0000-0000-0000-000000000000"),
            a20,
            a21,
        ],
    );
    let fleet = fleet_status(d.path(), None).unwrap();
    (d, fleet)
}

#[test]
fn every_host_is_a_row_and_the_failures_come_first_with_their_journal() {
    let (_d, fleet) = fleet_of_five();
    let page = render_html(&fleet, "/srv/base", T + 200);
    let rows = rows(&page);
    assert_eq!(rows.len(), fleet.hosts.len(), "{page}");
    let sites: Vec<&str> = rows.iter().map(|r| cells(r)[0]).collect();
    assert_eq!(sites, ["a18", "a17", "a19", "a20", "a21"], "{page}");
    assert!(rows[0].starts_with("<tr class=\"failed\" data-site=\"a18\">"));
    assert_eq!(cells(rows[0])[3], "failed");
    assert_eq!(cells(rows[0])[4], "precache");
    // The failure, in the text's words, with its journal lines, above the table.
    let failure = page
        .find("<p class=\"error\">site a18: factory failed at precache: precache broke</p>\n<pre class=\"journal\">first\nlast</pre>")
        .unwrap_or_else(|| panic!("{page}"));
    assert!(failure < page.find("<table id=\"fleet\">").unwrap());
    assert!(page.contains("<title>ibi status: /srv/base</title>"));
    assert!(page.contains(">5 host(s): 1 done, 2 running, 1 failed, 1 pending</p>"));
    assert!(
        page.contains(
            "<p class=\"deploy never\" id=\"deploy\">deploy: none has run on this BASE</p>"
        )
    );
    assert!(page.contains(&format!(
        "<time datetime=\"{0}\">{0}</time>",
        crate::util::lock::rfc3339(T + 200)
    )));
    // a18's host reported 150 s before the page; the other sites' hosts never did.
    assert_eq!(
        cells(rows[0])[7],
        format!(
            "<time datetime=\"{0}\" title=\"{0}\">2m ago</time>",
            crate::util::lock::rfc3339(T + 50)
        )
    );
    assert_eq!(cells(rows[1])[7], "-");
}

#[test]
fn each_bar_counts_the_steps_of_the_current_phase() {
    let (_d, fleet) = fleet_of_five();
    let by_site = |s: &str| {
        fleet
            .hosts
            .iter()
            .find(|h| h.site.as_deref() == Some(s))
            .unwrap()
    };
    // a17 watches (site phase: boot, watch, eject); a18's host speaks for deploy's wait-report
    // (factory: boot, wait-report, eject); a19 has not begun; a20's factory is done; a21 boots its
    // disk (oneshot: boot, wait-report, boot-disk, watch).
    let want = [
        ("a17", Some((1, 3))),
        ("a18", Some((1, 3))),
        ("a19", Some((0, 3))),
        ("a20", Some((3, 3))),
        ("a21", Some((2, 4))),
    ];
    for (site, want) in want {
        assert_eq!(progress(by_site(site)), want, "{site}");
    }
    let page = render_html(&fleet, "B", T + 200);
    let a21 = rows(&page)
        .into_iter()
        .find(|r| r.contains("data-site=\"a21\""))
        .unwrap();
    assert_eq!(cells(a21)[2], "oneshot");
    assert_eq!(
        cells(a21)[5],
        "<progress max=\"4\" value=\"2\" title=\"the oneshot phase: boot, wait-report, boot-disk, watch\">2/4</progress> <span class=\"steps\">2/4</span>"
    );
}

/// Host text in every field a host fills, and in a site's name, which lands in an attribute too.
#[test]
fn hostile_host_text_is_text_in_elements_and_attributes() {
    let nasty = "<script>alert(1)</script>\"onload='x' \x1b[31mred\u{202e}& \u{9b}2J\r\nforged";
    let mut r = own(
        nasty,
        stored(Some(A), "1", "x", RunState::Failed, true, T + 10),
    );
    r.report.host.hostname = nasty.into();
    r.report.status.step = nasty.into();
    r.report.status.error = Some(nasty.into());
    r.report.logs = vec![nasty.into(), "second".into()];
    let d = base(&[r], &[]);
    let fleet = fleet_status(d.path(), None).unwrap();
    let page = render_html(&fleet, nasty, T + 20);
    for raw in [
        "<script", "\"onload", "'x'", "\x1b", "\u{202e}", "\u{9b}", "\r", "& ",
    ] {
        assert!(!page.contains(raw), "{raw:?} raw in {page}");
    }
    assert!(!page.contains("\nforged"), "a forged line: {page}");
    let shown = "&lt;script&gt;alert(1)&lt;/script&gt;&quot;onload=&#39;x&#39; \\x1b[31mred\\u{202e}&amp; \\u{9b}2J\\r\\nforged";
    assert_eq!(esc(nasty), shown);
    assert!(page.contains(&format!("data-site=\"{shown}\"")), "{page}");
    assert!(page.contains(&format!("<td>{shown}</td>")), "{page}");
    assert!(
        page.contains(&format!("<pre class=\"journal\">{shown}\nsecond</pre>")),
        "{page}"
    );
    assert!(
        page.contains(&format!("<title>ibi status: {shown}</title>")),
        "{page}"
    );
    assert_eq!(
        page.matches("<tr").count(),
        2,
        "the header and one row: {page}"
    );
}

#[test]
fn the_page_fetches_nothing_and_runs_nothing() {
    let (_d, fleet) = fleet_of_five();
    let page = render_html(&fleet, "B", T + 200);
    assert!(page.starts_with("<!DOCTYPE html>\n<html lang=\"en\">\n"));
    assert!(page.ends_with("</body>\n</html>\n"));
    assert!(page.contains(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'\">"
    ));
    for never in [
        "<script", "<link", "<img", "src=", "href=", "url(", "@import", "http://",
    ] {
        assert!(!page.contains(never), "{never} in {page}");
    }
    // The only https:// text is the BMCs' addresses, in their cells.
    assert_eq!(page.matches("https://").count(), 5);
    assert_eq!(page.matches("<td>https://bmc-").count(), 5);
}

/// The served page is the file's, plus its one script (by relative URL, no inline code), the
/// policy that lets that script fetch the page again, the line it writes to, and deploy's
/// pre-flight, escaped.
#[test]
fn the_live_page_is_the_file_page_with_its_script_and_the_preflight() {
    let (_d, fleet) = fleet_of_five();
    let file = render_html(&fleet, "B", T + 200);
    let live = render_live(&fleet, "B", T + 200, Some("SITE  CHECK\na17   ok <\x1b>\n"));
    assert_eq!(live.matches("<script").count(), 1, "{live}");
    assert!(live.contains("<script src=\"live.js\" defer></script>\n</head>"));
    assert!(live.contains(
        "content=\"default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'\""
    ));
    assert!(live.contains("<p id=\"live\">Served live: "));
    assert!(live.contains(
        "<section id=\"preflight\">\n<h2>Pre-flight</h2>\n<pre>SITE  CHECK\na17   ok &lt;\\x1b&gt;</pre>"
    ));
    assert_eq!(rows(&live), rows(&file));
    assert!(!render_live(&fleet, "B", T + 200, None).contains("preflight"));
    // The script fetches only the page it came with, and builds no HTML of its own.
    let script = crate::deliver::status::html::LIVE_SCRIPT;
    assert_eq!(script.matches("fetch(").count(), 1);
    assert!(script.contains("fetch(location.pathname, {"));
    for never in [
        "innerHTML",
        "outerHTML",
        "eval(",
        "document.write",
        "http",
        "localStorage",
    ] {
        assert!(!script.contains(never), "{never} in live.js");
    }
}

#[test]
fn damaged_records_and_notes_are_listed_and_damage_ranks_after_failures() {
    let mut s = site("a18", B);
    s.phases
        .insert(Phase::Factory, record(RunState::Failed, "wait-report", 100));
    let d = base(
        &[stored(Some(B), "1", "x", RunState::Running, false, 150)],
        &[site("a17", A), s],
    );
    std::fs::write(d.path().join(".ibi/deploy/a17.json"), "{\"version\":1,\"si").unwrap();
    let fleet = fleet_status(d.path(), None).unwrap();
    let page = render_html(&fleet, "B", 200);
    let order: Vec<String> = rows(&page)
        .iter()
        .map(|r| format!("{} {}", cells(r)[0], cells(r)[3]))
        .collect();
    assert_eq!(order, ["a18 failed", "a17 damaged", "- running"], "{page}");
    assert!(page.contains("<h2>Could not be read (1)</h2>"), "{page}");
    assert!(page.contains("<li>site a17: record "), "{page}");
    assert!(page.contains("is damaged: cut short"), "{page}");
    assert!(page.contains("<h2>Not counted (1)</h2>\n<ul>\n<li>host 4c4c4544-0000-0000-0000-000000000000: unverified: "), "{page}");
    // Deploy's own failure: no host journal was sent.
    assert!(page.contains("<p class=\"error\">site a18: factory failed at wait-report: no answer</p>\n<p class=\"journal\">(no journal lines were sent)</p>"), "{page}");
    assert_eq!(progress(&fleet.hosts[0]), None, "damaged: no bar");
}
