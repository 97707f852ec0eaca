//! What the tests of tests/fast/status_fleet.rs and tests/tools/status_fleet.rs share: a BASE laid
//! out as `ibi serve` and `ibi deploy` leave it (docs/architecture.md, "Tests"), and a site whose
//! host's text is hostile to a terminal and to a browser.

use std::path::Path;
use std::process::Output;

use ibi::contract::agent_status::{RunState, Status};
use ibi::contract::host_report::{HostIdentity, HostReport, REPORT_VERSION, ReportingAgent};
use ibi::deliver::report_store::{REPORTS_FILE, ReportStore, StoredReport};
use serde_json::{Value, json};

pub(crate) const UUID_A: &str = "a1a1a1a1-0000-4000-8000-00000000000a";
pub(crate) const UUID_B: &str = "b2b2b2b2-0000-4000-8000-00000000000b";
pub(crate) const ESCAPES: &str = "\x1b[2J\x1b]0;owned\x07\r\n\u{202e}forged";

pub(crate) fn report(uuid: &str, host: &str, step: &str, state: RunState, at: u64) -> StoredReport {
    let mut status = Status::idle(at - 7200); // the host's clock: two hours behind, never read
    status.step = step.into();
    status.state = state;
    let failed = state == RunState::Failed;
    status.error = failed.then(|| format!("{step} failed{ESCAPES}"));
    StoredReport {
        received: at,
        client: "127.0.0.1:40000".into(),
        site: None,
        report: HostReport {
            version: REPORT_VERSION,
            agent: ReportingAgent::Lca,
            host: HostIdentity {
                hostname: host.into(),
                product_uuid: Some(uuid.into()),
                boot_id: Some("boot-1".into()),
            },
            status,
            finished: state != RunState::Running,
            logs: if failed {
                vec![
                    "lca-cli[1]: pulling the seed".into(),
                    format!("lca-cli[1]: error: unauthorized{ESCAPES}"),
                ]
            } else {
                Vec::new()
            },
        },
    }
}

pub(crate) fn write_record(base: &Path, site: &str, text: &str) {
    let dir = base.join(".ibi/deploy");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{site}.json")), text).unwrap();
}

pub(crate) fn phase(
    state: &str,
    step: &str,
    started: u64,
    updated: u64,
    error: Option<&str>,
) -> Value {
    json!({"state": state, "step": step, "started": started, "updated": updated, "error": error})
}

/// The fleet: a (factory done, site phase running), b (the host failed; deploy recorded it after),
/// c (its record cut short), d (no record yet, a report with its token).
pub(crate) fn fleet(base: &Path, now: u64) {
    let t = now - 600;
    let bmc = |n: &str, uuid: &str| json!({"address": format!("https://10.0.0.{n}"), "uuid": uuid});
    let a = json!({"version": 1, "site": "a", "bmc": bmc("1", UUID_A), "phases": {
        "factory": phase("done", "eject", t, t + 300, None),
        "site": phase("running", "watch", t + 320, t + 500, None)}});
    let b = json!({"version": 1, "site": "b", "bmc": bmc("2", UUID_B), "phases": {
        "factory": phase("failed", "wait-report", t, t + 200,
            Some("the host reported a failure: install-rhcos-and-restore-seed failed"))}});
    write_record(base, "a", &a.to_string());
    write_record(base, "b", &b.to_string());
    write_record(
        base,
        "c",
        &json!({"version": 1, "site": "c"}).to_string()[..12],
    );

    let mut store = ReportStore::open(base).unwrap();
    let step = "install-rhcos-and-restore-seed";
    store
        .append(&report(UUID_A, "sno-a", step, RunState::Done, t + 250))
        .unwrap();
    let mut failed = report(
        UUID_B,
        &format!("sno-b{ESCAPES}"),
        step,
        RunState::Failed,
        t + 190,
    );
    failed.site = Some("b".into());
    store.append(&failed).unwrap();
    drop(store);
    // A line damaged in the middle of the store (not a torn last line).
    let path = base.join(REPORTS_FILE);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"received\": 17640\u{0}\u{0}\n");
    std::fs::write(&path, text).unwrap();
    let mut store = ReportStore::open(base).unwrap();
    // d's own token, whatever UUID its body claims (a's here): d's, never a's.
    let mut d = report(UUID_A, "sno-d", "precache", RunState::Running, t + 400);
    d.site = Some("d".into());
    store.append(&d).unwrap();
}

pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Markup, a broken-out attribute and a terminal escape: text a host may send.
pub(crate) const HOSTILE: &str = "<script>alert(1)</script>\"onload=alert(2) x='y' \x1b[31mred";
/// [`HOSTILE`] as the page must show it: escaped, the escape sequence written out.
pub(crate) const HOSTILE_SHOWN: &str =
    "&lt;script&gt;alert(1)&lt;/script&gt;&quot;onload=alert(2) x=&#39;y&#39; \\x1b[31mred";

/// Site e, added to [`fleet`]'s BASE: deploy waits for its host, which failed with [`HOSTILE`]
/// text in its name, its step, its error and its journal.
pub(crate) fn hostile_site(base: &Path, now: u64) {
    let t = now - 600;
    let e = json!({"version": 1, "site": "e", "phases": {
        "factory": phase("running", "wait-report", t, t, None)}});
    write_record(base, "e", &e.to_string());
    let mut r = report(
        "e5e5e5e5-0000-4000-8000-00000000000e",
        HOSTILE,
        HOSTILE,
        RunState::Failed,
        t + 100,
    );
    r.site = Some("e".into());
    r.report.status.error = Some(HOSTILE.into());
    r.report.logs = vec![format!("journal {HOSTILE}"), "journal end".into()];
    ReportStore::open(base).unwrap().append(&r).unwrap();
}
