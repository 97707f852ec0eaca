//! `ibi status` run as an operator runs it, on a BASE laid out as `ibi serve` and `ibi deploy` leave
//! it: reports appended with the store writer `ibi serve` uses (one with the shared token, others with
//! a site's own token, as deploy gives each host), records written as deploy writes them (JSON files,
//! one damaged), a damaged line in the middle of the store, host text full of terminal escapes, and
//! deploy's lock held by this test process (a real `flock` the `ibi status` process sees, standing
//! for a running `ibi deploy`). Checked: every site is shown, the damage is named without its content,
//! nothing reaches the terminal raw, and the command fails only after printing everything.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common::deliver::ibi_env;
use crate::common::status_fleet::{
    ESCAPES, HOSTILE_SHOWN, UUID_A, UUID_B, fleet, hostile_site, now, phase, report, stdout,
    write_record,
};
use ibi::contract::agent_status::RunState;
use ibi::deliver::deploy_state::LOCK_FILE;
use ibi::deliver::report_store::ReportStore;
use ibi::util::lock::{self, Holder};
use serde_json::{Value, json};

#[test]
fn a_missing_base_is_an_error_not_an_empty_fleet() {
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("no-such-base");
    let out = ibi_env(&["status", "--dir", missing.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{}: no such directory", missing.display())),
        "{err}"
    );
}

#[test]
fn damage_and_hostile_text_hide_nothing_and_fail_after_printing_everything() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path();
    let now = now();
    fleet(base, now);
    let mut holder = Holder::me("deploy", Some("127.0.0.1:8443".into()));
    holder.started = now - 600;
    let held = lock::acquire(&base.join(LOCK_FILE), holder, "BASE").unwrap();

    let b = base.to_str().unwrap();
    let out = ibi_env(&["status", "--dir", b, "--logs"], &[]);
    let text = stdout(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("ibi status --logs:\n{text}{err}");
    assert_eq!(out.status.code(), Some(1), "{text}{err}");
    assert!(
        err.contains("error: 2 thing(s) under") && err.contains("could not be read (named above)"),
        "{err}"
    );
    assert!(
        !text
            .chars()
            .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
        "raw control characters: {text:?}"
    );
    let rows: Vec<Vec<&str>> = text
        .lines()
        .take(5)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0].join(" "),
        "SITE BMC SYSTEM HOST FACTORY SITE-PHASE STEP AGE"
    );
    let cols = |i: usize| [rows[i][0], rows[i][4], rows[i][5], rows[i][6]];
    assert_eq!(cols(1), ["a", "done", "running", "watch"], "{text}");
    assert_eq!(
        cols(2),
        ["b", "failed", "-", "install-rhcos-and-restore-seed"],
        "{text}"
    );
    assert_eq!(cols(3), ["c", "damaged", "damaged", "-"], "{text}");
    assert_eq!(cols(4), ["d", "running", "-", "precache"], "{text}");
    assert_eq!(rows[4][3], "sno-d");
    // a's host reported with the shared token: a row of its own, unverified, not a's.
    assert!(
        text.contains(&format!("host {UUID_A}: unverified: it reported with the installation ISO's shared token and the System UUID of site a's BMC")),
        "{text}"
    );
    for want in [
        "site b: factory failed at install-rhcos-and-restore-seed: install-rhcos-and-restore-seed failed\\x1b[2J\\x1b]0;owned\\x07\\r\\n\\u{202e}forged\n",
        "  | lca-cli[1]: error: unauthorized\\x1b[2J",
        "/.ibi/deploy/c.json is damaged: cut short (it ends at line 1, column 12); `ibi deploy ... --redo c` starts the site over\n",
        "/.ibi/reports.jsonl: line 3: not a report (Syntax error at column 19); skipped, the other reports are shown\n",
        "5 host(s): 1 done, 2 running, 1 failed, 0 pending, 1 damaged\n",
        &format!(
            "deploy: running now: ibi deploy (PID {}, listening on 127.0.0.1:8443, since ",
            std::process::id()
        ),
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }

    let out = ibi_env(&["status", "--dir", b, "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hosts = v["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 5);
    assert_eq!(hosts[4]["claimsSite"], "a");
    assert_eq!(hosts[1]["hostname"], format!("sno-b{ESCAPES}"));
    assert_eq!(hosts[2]["state"], "damaged");
    assert_eq!(v["damagedReports"][0]["line"], 3);
    assert_eq!(v["deploy"]["state"], "running");

    drop(held);
    let out = ibi_env(&["status", "--dir", b, "--site", "a"], &[]);
    let text = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the store's damage still counts"
    );
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(
        text.lines()
            .last()
            .unwrap()
            .starts_with("deploy: not running; the last one, ibi deploy (PID "),
        "{text}"
    );
}

/// Issue 33 items 1 and 2, as the walk found them. Site a: factory done, site phase done, then a
/// factory `--redo` booted the host again (reinstalled, done): its site phase no longer counts. Site
/// b: factory done; a report with the plain ISO's shared token and b's System UUID says failed, and
/// another with b's own token but another host's name arrives after the phase ended: neither speaks
/// over deploy's record.
#[test]
fn status_shows_what_deploy_would_act_on() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path();
    let t = now() - 3600;
    let bmc = |n: &str, uuid: &str| json!({"address": format!("https://10.0.0.{n}"), "uuid": uuid});
    let mut factory_a = phase("done", "eject", t + 1000, t + 1300, None);
    factory_a["booted"] = json!(t + 1010);
    factory_a["finished"] = json!(t + 1300);
    let a = json!({"version": 1, "site": "a", "bmc": bmc("1", UUID_A), "phases": {
        "factory": factory_a,
        "site": phase("done", "eject", t + 400, t + 900, None)}});
    let mut factory_b = phase("done", "eject", t, t + 300, None);
    factory_b["booted"] = json!(t + 10);
    factory_b["finished"] = json!(t + 300);
    let b = json!({"version": 1, "site": "b", "bmc": bmc("2", UUID_B), "phases": {"factory": factory_b}});
    write_record(base, "a", &a.to_string());
    write_record(base, "b", &b.to_string());
    let mut store = ReportStore::open(base).unwrap();
    let step = "install-rhcos-and-restore-seed";
    let mut own_b = report(UUID_B, "sno-b", step, RunState::Done, t + 200);
    own_b.site = Some("b".into());
    store.append(&own_b).unwrap();
    store
        .append(&report(UUID_B, "forger", step, RunState::Failed, t + 250))
        .unwrap();
    let mut late = report(UUID_A, "sno-a", step, RunState::Failed, t + 500);
    late.site = Some("b".into());
    store.append(&late).unwrap();
    drop(store);

    let out = ibi_env(&["status", "--dir", base.to_str().unwrap()], &[]);
    let text = stdout(&out);
    eprintln!(
        "ibi status:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    let row = |site: &str| -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{site} ")))
            .unwrap();
        line.split_whitespace().map(String::from).collect()
    };
    assert_eq!(
        row("a")[4..6],
        ["done", "-"],
        "a's site phase predates its reinstall: {text}"
    );
    assert_eq!(row("b")[3..6], ["sno-b", "done", "-"], "{text}");
    assert!(text.contains("site a: its site phase recorded earlier no longer counts: the factory phase booted the host again at "), "{text}");
    assert!(text.contains(&format!("host {UUID_B}: unverified: it reported with the installation ISO's shared token and the System UUID of site b's BMC")), "{text}");
    assert!(text.contains("site b: 1 report(s) with its own token arrived after deploy recorded the install's end at "), "{text}");
    assert!(!text.contains("site b: factory failed"), "{text}");
}

/// Issue 37 item 3: `ibi status --html FILE` writes the page, replacing FILE atomically (0644),
/// prints FILE, and fails after writing when something could not be read, as the table does.
#[test]
fn html_writes_one_page_with_every_host_and_host_text_escaped() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().join("base");
    std::fs::create_dir(&base).unwrap();
    let now = now();
    fleet(&base, now);
    hostile_site(&base, now);
    let out_dir = d.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let page_path = out_dir.join("fleet.html");
    // An older page, not world-readable: replaced, with the page's own mode.
    std::fs::write(&page_path, "old").unwrap();
    std::fs::set_permissions(
        &page_path,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let (b, p) = (base.to_str().unwrap(), page_path.to_str().unwrap());
    let out = ibi_env(&["status", "--dir", b, "--html", p], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(stdout(&out), format!("{p}\n"));
    assert!(
        err.contains(&format!("error: 2 thing(s) under {b}/.ibi could not be read (named in {p}); everything else is shown")),
        "{err}"
    );
    assert_eq!(crate::common::mode(&page_path), 0o644);
    assert_eq!(
        ibi::util::fs::sorted_names(&out_dir),
        ["fleet.html"],
        "no temp file left"
    );
    let page = std::fs::read_to_string(&page_path).unwrap();
    let rows: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("<tr class="))
        .collect();
    let sites: Vec<&str> = rows
        .iter()
        .map(|r| {
            r.split("data-site=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    // Failed first (b, e), then the damaged record (c), then the rest; a's shared-token host last.
    assert_eq!(sites, ["b", "e", "c", "a", "d", "-"], "{page}");
    assert!(!page.contains("<script"), "{page}");
    assert!(
        !page.chars().any(|c| c.is_control() && c != '\n'),
        "raw control characters in the page"
    );
    for want in [
        format!(
            "<p class=\"error\">site e: factory failed at {HOSTILE_SHOWN}: {HOSTILE_SHOWN}</p>"
        ),
        format!("<pre class=\"journal\">journal {HOSTILE_SHOWN}\njournal end</pre>"),
        format!("<td>{HOSTILE_SHOWN}</td>"),
        "sno-b\\x1b[2J\\x1b]0;owned\\x07\\r\\n\\u{202e}forged".to_string(),
        "<h2>Failed (2)</h2>".to_string(),
        "<h2>Could not be read (2)</h2>".to_string(),
        ">6 host(s): 1 done, 2 running, 2 failed, 0 pending, 1 damaged</p>".to_string(),
    ] {
        assert!(page.contains(&want), "{want:?} not in:\n{page}");
    }
    // Site a watches its cluster: the second of the site phase's three steps.
    let a = rows.iter().find(|r| r.contains("data-site=\"a\"")).unwrap();
    assert!(a.contains("<span class=\"steps\">1/3</span>"), "{a}");

    // The page or the JSON, not both: a usage error, nothing written.
    let other = out_dir.join("other.html");
    let out = ibi_env(
        &[
            "status",
            "--dir",
            b,
            "--json",
            "--html",
            other.to_str().unwrap(),
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the argument '--json' cannot be used with '--html <FILE>'"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    assert!(!other.exists());
}
