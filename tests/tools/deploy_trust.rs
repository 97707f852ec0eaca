//! `ibi deploy --phase factory` where it must be trusted with real machines: a re-run never boots a
//! host twice for one phase, one deploy at a time holds BASE, Ctrl-C leaves a table and a
//! resumable fleet, and a report speaks only for the host whose own token it carries. The BMCs are
//! sushy-tools emulators (fake driver, Basic auth, TLS, one System each, standing for each host's
//! BMC); the hosts are played by the test from the ISO their BMC downloaded, as the booted live ISO
//! would run its report script (`tests/common/deliver/fleet.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::time::{Duration, Instant};

use crate::common::deliver::emulator::sushy_emulator;
use crate::common::deliver::fleet::{
    Fleet, deploy_binary, fleet, play_until, report_done_lca, requests, state_is, wait_exit,
};
use crate::common::deliver::free_port;
use crate::common::deliver::host::{Host, iso_ignition};
use rustix::process::{Pid, Signal, kill_process};

use crate::common::deploy_trust::*;

/// One host through three runs. Run 1 boots it and is interrupted (SIGINT) while it installs:
/// the table so far, "interrupted: re-run to resume", exit 130; meanwhile a second deploy on the
/// same BASE was refused, naming the first. Run 2 resumes the wait without a boot; the host reports
/// done while its BMC is down, so the eject fails and the site is recorded failed at eject. Run 3,
/// the BMC back, only ejects: the finished host is never booted again.
#[test]
fn a_finished_host_is_never_booted_again_and_an_interrupt_leaves_it_resumable() {
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let mut f = fleet(
        &bin,
        &[("a", "a1a1a1a1-0000-4000-8000-00000000000a")],
        &TIMEOUTS,
    );

    let mut run1 = f.spawn("run1");
    wait_step(&f, &mut run1, "run1", "a", "wait-report");
    let booted = requests(&f.emulators[0]);
    let boot_calls = boots(&booted);
    assert!(boot_calls >= 2, "an insert and a power-on: {booted}");

    // A second deploy on the same BASE: refused before it touches anything.
    let base = f.base().to_str().unwrap().to_string();
    let inv = f.inventory();
    let other = format!("127.0.0.1:{}", free_port());
    let second = std::process::Command::new(deploy_binary())
        .args(["deploy", "--dir", &base, "--sites"])
        .arg(&inv)
        .args(["--phase", "factory", "--listen", &other])
        // Bounded, should it not be refused (an older build without the lock).
        .args(["--report-timeout", "5", "--bmc-timeout", "60"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{err}");
    let holder = format!(
        "error: {base} is in use by ibi deploy (PID {}, listening on 127.0.0.1:{}, since ",
        run1.id(),
        f.port
    );
    assert!(err.starts_with(&holder), "{err}");
    assert_eq!(
        requests(&f.emulators[0]),
        booted,
        "the second deploy touched the BMC"
    );

    // Ctrl-C: no new step, the table so far, exit 130.
    kill_process(Pid::from_child(&run1), Signal::INT).unwrap();
    let status = wait_exit(&mut run1);
    let (out1, err1) = (f.output("run1", "stdout"), f.output("run1", "stderr"));
    assert_eq!(status.code(), Some(130), "{out1}\n{err1}");
    assert!(out1.starts_with("SITE"), "{out1}");
    assert!(out1.contains("  interrupted at wait-report  "), "{out1}");
    assert!(err1.ends_with("interrupted: re-run to resume\n"), "{err1}");
    assert!(state_is(&f, "a", "running", "wait-report"));

    // Run 2: resumes the wait; the host is done while its BMC is down; the eject fails.
    let mut run2 = f.spawn("run2");
    play_until(&f, &mut run2, "run2", &[], |f| {
        f.output("run2", "stderr").contains("wait-report: resumed")
    });
    f.emulators[0].pause();
    report_done_lca(&f, 0);
    assert_eq!(wait_exit(&mut run2).code(), Some(1));
    assert!(state_is(&f, "a", "failed", "eject"), "{:?}", f.phase("a"));
    let err2 = f.output("run2", "stderr");
    assert!(err2.contains("error: site a: ejecting: "), "{err2}");
    // Issue 33 item 11: the BMC client's retry lines name their site.
    let retries: Vec<&str> = err2.lines().filter(|l| l.contains("; try ")).collect();
    assert!(!retries.is_empty(), "{err2}");
    assert!(
        retries
            .iter()
            .all(|l| l.starts_with(" WARN site a: BMC https://")),
        "{err2}"
    );

    // Run 3: the BMC is back; only the eject is left.
    f.emulators[0].resume();
    let mut run3 = f.spawn("run3");
    assert_eq!(
        wait_exit(&mut run3).code(),
        Some(0),
        "{}",
        f.output("run3", "stderr")
    );
    assert!(state_is(&f, "a", "done", "eject"), "{:?}", f.phase("a"));
    let all = requests(&f.emulators[0]);
    assert_eq!(boots(&all), boot_calls, "the host was booted again:\n{all}");
    assert!(all.contains("EjectMedia"), "{all}");
    assert_eq!(f.emulators[0].cd()["Inserted"], false);
    assert!(
        f.output("run3", "stderr")
            .contains("site a: eject: resumed"),
        "{}",
        f.output("run3", "stderr")
    );

    // Issue 33 item 5: with every site done, `--check` says there is nothing to do (it printed an
    // empty table before), and asks the BMC nothing.
    let changes = |log: &str| {
        log.lines()
            .filter(|l| ["POST ", "PATCH ", "DELETE "].iter().any(|m| l.contains(m)))
            .count()
    };
    let before = changes(&requests(&f.emulators[0]));
    let mut check = f.spawn_with("check", &["--check"]);
    assert_eq!(wait_exit(&mut check).code(), Some(0));
    let (out, err) = (f.output("check", "stdout"), f.output("check", "stderr"));
    assert!(
        out.lines().any(|l| l.starts_with("a ")
            && l.contains(" done ")
            && l.contains("done by an earlier run")),
        "{out}"
    );
    assert!(
        err.contains("nothing to do: every selected site's factory phase is done (--redo SITE does one again)"),
        "{err}"
    );
    assert_eq!(
        changes(&requests(&f.emulators[0])),
        before,
        "--check changed something on the BMC"
    );
}

/// Three hosts booted. Reports that claim host y's System UUID but carry the fleet ISO's own token,
/// or host x's own token, never end y's phase: the first is kept without a site, the second is x's.
/// Only y's own report (its own token, from the ISO its BMC downloaded) ends y's. Host z reports a
/// failure whose text holds terminal escape sequences: deploy stores them as sent and prints them
/// escaped.
#[test]
fn a_report_speaks_only_for_the_host_whose_own_token_it_carries() {
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let (x, y, z) = (
        "a1a1a1a1-0000-4000-8000-00000000000a",
        "b2b2b2b2-0000-4000-8000-00000000000b",
        "c3c3c3c3-0000-4000-8000-00000000000c",
    );
    let f = fleet(&bin, &[("x", x), ("y", y), ("z", z)], &TIMEOUTS);
    let mut run = f.spawn("run");
    play_until(&f, &mut run, "run", &[], |f| {
        ["x", "y", "z"]
            .iter()
            .all(|s| state_is(f, s, "running", "wait-report"))
    });
    let forged = |ign: &serde_json::Value| {
        let h = Host::new(ign, y, "sno-y", "");
        common::deliver::host::ok(&h.lca_report("done", &[]), "a forged done");
    };
    // The fleet ISO's token (anyone with the ISO has it) and y's UUID.
    forged(&f.ign);
    // x's own token (x's ISO, from x's BMC) and y's UUID: it is x's report.
    let x_iso = f.emulators[0].downloaded("rhcos-ibi.iso").unwrap();
    forged(&iso_ignition(&x_iso));
    // Three polls later y still waits; x, whose own token ended its phase, is done.
    play_until(&f, &mut run, "run", &[], |f| state_is(f, "x", "done", ""));
    let later = Instant::now() + Duration::from_secs(3);
    while Instant::now() < later {
        assert!(
            state_is(&f, "y", "running", "wait-report"),
            "a report ended y's phase: {:?}",
            f.phase("y")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    report_done_lca(&f, 1);
    // z fails, its text full of escape sequences (the screen cleared, the title set, a bell).
    let z_iso = f.emulators[2].downloaded("rhcos-ibi.iso").unwrap();
    let host = Host::new(
        &iso_ignition(&z_iso),
        z,
        "sno-z\x1b[2J",
        "line\x1b]0;owned\x07\n",
    );
    let failed = host.lca_report(
        "failed",
        &[("MONITOR_SERVICE_RESULT", "exit-code\x1b]0;owned\x07\x1b[2J")],
    );
    common::deliver::host::ok(&failed, "ibi-report.sh failed");
    assert_eq!(wait_exit(&mut run).code(), Some(1), "z failed");
    assert!(state_is(&f, "y", "done", ""));
    let err = f.output("run", "stderr");
    assert!(
        !err.contains('\x1b') && !err.contains('\x07'),
        "raw escapes: {err:?}"
    );
    // x's report carried y's UUID: heard as x's (its token), and the mismatch is told, once.
    let told = format!(
        "site x: the host reports System UUID {y}, its BMC shows {x}: check that the inventory"
    );
    assert_eq!(err.matches(&told).count(), 1, "{err}");
    assert!(
        !err.contains("site y: the host reports System UUID"),
        "{err}"
    );
    assert!(
        err.contains("error: site z: the host reported a failure: install-rhcos-and-restore-seed.service failed (result exit-code\\x1b]0;owned\\x07\\x1b[2J,"),
        "{err}"
    );
    let store = std::fs::read_to_string(f.base().join(".ibi/reports.jsonl")).unwrap();
    assert!(
        store.contains("exit-code\\u001b]0;owned"),
        "stored as sent: {store}"
    );
    let sites: Vec<Option<String>> = store
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["site"].as_str().map(String::from)
        })
        .collect();
    assert_eq!(
        sites,
        [
            None,
            Some("x".into()),
            Some("y".into()),
            Some("y".into()),
            Some("z".into())
        ],
        "{store}"
    );
    let status = common::deliver::ibi_env(
        &["status", "--dir", f.base().to_str().unwrap(), "--logs"],
        &[],
    );
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(
        !shown.contains('\x1b') && !shown.contains('\x07'),
        "raw escapes: {shown:?}"
    );
    assert!(shown.contains("sno-z\\x1b[2J"), "{shown}");
}

/// Every mistake found in one run, before any host is touched: two inventory typos at once; then a
/// wrong BMC password (site a), a CA file that is not there (b), a password file that is not there
/// (c) and an installation ISO whose statusURL names another port than deploy listens on, all in one
/// table, exit 1, and no BMC asked for anything but reads. With everything fixed, `--check` says
/// each site is ready and changes nothing either.
#[test]
fn every_mistake_is_found_before_any_host_is_touched() {
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let f = fleet(
        &bin,
        &[
            ("a", "a1a1a1a1-0000-4000-8000-00000000000a"),
            ("b", "b2b2b2b2-0000-4000-8000-00000000000b"),
            ("c", "c3c3c3c3-0000-4000-8000-00000000000c"),
        ],
        &TIMEOUTS,
    );
    let good = std::fs::read_to_string(f.inventory()).unwrap();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(deploy_binary())
            .args(["deploy", "--dir"])
            .arg(f.base())
            .arg("--sites")
            .arg(f.inventory())
            .args(["--phase", "factory"])
            .args(TIMEOUTS)
            .arg("--tls-cert")
            .arg(&f.tls.1)
            .arg("--tls-key")
            .arg(&f.tls.2)
            .args(extra)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let listen = format!("127.0.0.1:{}", f.port);

    // Issue 33 item 6: two typos (one in a's bmc, one in b's entry) and a mistyped passwordFile
    // in c, all in one run, by file, line and field; and (item 5) the default listen address on
    // every interface without --public-url, which the server would refuse at once: `--check` says
    // so too.
    let typos = good
        .replacen("      address:", "      adress:", 1)
        .replacen(
            "    hostname: sno-b",
            "    hostname: sno-b\n    clusterNmae: b",
            1,
        )
        .replacen(
            &f.emulators[2].password_file.display().to_string(),
            "/nonexistent/c-password",
            1,
        );
    // And a site with no bmc: at all (item 13): named with its line.
    let typos = format!("{typos}  - name: e\n    hostname: sno-e\n");
    std::fs::write(f.inventory(), &typos).unwrap();
    for check in [&["--check"][..], &[]] {
        let (code, out, err) = run(check);
        eprintln!("{check:?}: stdout:\n{out}\nstderr:\n{err}");
        assert_eq!(code, Some(1), "{err}");
        let row = |site: &str, check: &str, has: &str| {
            out.lines().any(|l| {
                l.starts_with(&format!("{site} "))
                    && l.contains(&format!(" {check} "))
                    && l.contains(has)
            })
        };
        assert!(
            row(
                "a",
                "inventory",
                "sites.yaml:5: sites[0].bmc (site a): unknown field `adress`"
            ),
            "{out}"
        );
        assert!(
            row(
                "b",
                "inventory",
                "sites.yaml:11: sites[1].clusterNmae (site b): unknown field `clusterNmae`"
            ),
            "{out}"
        );
        assert!(row("c", "inventory", "/nonexistent/c-password"), "{out}");
        assert!(
            row(
                "-",
                "serve",
                "listening on 0.0.0.0:8443: pass --public-url with the address BMCs reach this host at"
            ),
            "{out}"
        );
        assert!(
            row(
                "e",
                "inventory",
                "sites.yaml:24: sites[3].bmc (site e): missing: deploy drives the site's host through its BMC"
            ),
            "{out}"
        );
        assert!(err.contains("5 finding(s), listed above"), "{err}");
    }

    // Four mistakes of other kinds, one table.
    let wrong_pw = f.work.path().join("wrong-password");
    std::fs::write(&wrong_pw, "not-the-password\n").unwrap();
    let broken = good
        .replacen(
            &f.emulators[0].password_file.display().to_string(),
            &wrong_pw.display().to_string(),
            1,
        )
        .replacen(
            &f.emulators[1].cert.display().to_string(),
            "/nonexistent/b-ca.pem",
            1,
        )
        .replacen(
            &f.emulators[2].password_file.display().to_string(),
            "/nonexistent/c-password",
            1,
        );
    std::fs::write(f.inventory(), &broken).unwrap();
    // And b's record cut short (a disk full at the wrong moment): deploy cannot know what was done.
    std::fs::create_dir_all(f.base().join(".ibi/deploy")).unwrap();
    std::fs::write(f.base().join(".ibi/deploy/b.json"), "{\"version\": 1, \"si").unwrap();
    let other = format!("127.0.0.1:{}", free_port());
    let (code, out, err) = run(&["--listen", &other]);
    eprintln!("stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(code, Some(1));
    assert!(out.starts_with("SITE  CHECK"), "{out}");
    let row = |site: &str, check: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{site} ")) && l.contains(&format!(" {check} ")))
            .unwrap_or_else(|| panic!("no {check} finding for {site}:\n{out}"))
            .to_string()
    };
    assert!(row("a", "bmc").contains("HTTP 401"), "{out}");
    assert!(
        row("b", "inventory").contains("/nonexistent/b-ca.pem"),
        "{out}"
    );
    assert!(
        row("c", "inventory").contains("/nonexistent/c-password"),
        "{out}"
    );
    let status_url = row("-", "statusURL");
    assert!(
        status_url.contains(&format!("reports to https://127.0.0.1:{}", f.port))
            && status_url.contains(&format!("deploy serves at https://{other}")),
        "{status_url}"
    );
    assert!(
        err.ends_with("error: pre-flight: 5 finding(s), listed above; no host was touched\n"),
        "{err}"
    );
    let touched = |f: &Fleet| {
        f.emulators.iter().any(|e| {
            let log = requests(e);
            [
                "POST /redfish/v1/Systems",
                "PATCH",
                "DELETE /redfish/v1/Systems",
            ]
            .iter()
            .any(|m| log.contains(m))
        })
    };
    assert!(!touched(&f), "a BMC was asked to change something");
    assert!(
        !f.base().join(".ibi/deploy/a.json").exists(),
        "a record was written"
    );

    // Fixed (b to be started over): the check alone says every site is ready, and changes nothing.
    std::fs::write(f.inventory(), &good).unwrap();
    let (code, out, err) = run(&["--listen", &listen, "--check", "--redo", "b"]);
    eprintln!("stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(code, Some(0), "{err}");
    for site in ["a", "b", "c"] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!("{site}     ok"))),
            "{out}"
        );
    }
    assert!(!touched(&f), "--check changed something");
}

/// A BMC job that panics (injected with the `fault-injection` build's `IBI_FAULT_PANIC`, standing
/// for a BMC reply that trips a bug) ends its own site with an error naming it; the run goes on and
/// the other site installs. The pre-flight's check of that BMC panics too: a finding, not a hang.
#[test]
fn a_panicking_bmc_job_ends_its_site_and_the_run_goes_on() {
    const NAME: &str = "a_panicking_bmc_job_ends_its_site_and_the_run_goes_on";
    let Some((f, port)) = fault_fleet(NAME) else {
        return;
    };
    let fault = |job: &str| format!("bmc-{job}@127.0.0.1:{port}");
    let check_fault = fault("check");

    let mut check = f.spawn_env("check", &["--check"], &[("IBI_FAULT_PANIC", &check_fault)]);
    let status = wait_exit_within(&mut check, Duration::from_secs(120));
    let (out, err) = (f.output("check", "stdout"), f.output("check", "stderr"));
    assert_eq!(status.code(), Some(1), "--check: {out}\n{err}");
    let row = out.lines().find(|l| l.starts_with("b ")).unwrap_or("");
    assert!(
        row.contains(" bmc ") && row.contains("ibi's BMC check panicked (injected fault"),
        "{out}"
    );

    let boot_fault = fault("boot");
    let mut run = f.spawn_env("run", &[], &[("IBI_FAULT_PANIC", &boot_fault)]);
    play_until(&f, &mut run, "run", &[(0, report_done_lca)], |f| {
        state_is(f, "a", "done", "") && state_is(f, "b", "failed", "")
    });
    let status = wait_exit_within(&mut run, Duration::from_secs(120));
    let (out, err) = (f.output("run", "stdout"), f.output("run", "stderr"));
    assert_eq!(status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains("error: site b: ibi's boot job panicked (injected fault"),
        "{err}"
    );
    let cells = |site: &str| -> Vec<String> {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{site} ")))
            .unwrap();
        line.split_whitespace().map(String::from).collect()
    };
    assert_eq!(cells("a")[3], "done", "{out}");
    assert_eq!(cells("b")[3], "failed", "{out}");
    // The job panicked once the System was found: nothing was inserted or powered.
    let log = requests(&f.emulators[1]);
    assert_eq!(boots(&log), 0, "{log}");
    assert!(
        f.record("b").unwrap()["bmc"]["system"].is_string(),
        "the record keeps what the job saved before the panic: {:?}",
        f.record("b")
    );
}

/// Issue 33 items 10 and 11: Ctrl-C while a BMC job is under way (site b's boot hangs, injected with
/// `IBI_FAULT_HANG`, standing for a BMC that stops answering mid-job) says at once which job deploy
/// waits for and that a second Ctrl-C abandons it; the second names the site whose job was cut and
/// the state its record was left in, and the table still comes, each interrupted row timed to the
/// interruption. The BMC's warnings name their site.
#[test]
fn ctrl_c_says_what_it_waits_for_and_a_second_one_what_it_left() {
    const NAME: &str = "ctrl_c_says_what_it_waits_for_and_a_second_one_what_it_left";
    let Some((f, port)) = fault_fleet(NAME) else {
        return;
    };
    let hang = format!("bmc-boot@127.0.0.1:{port}");
    let mut run = f.spawn_env("run", &[], &[("IBI_FAULT_HANG", &hang)]);
    play_until(&f, &mut run, "run", &[], |f| {
        state_is(f, "a", "running", "wait-report")
            && f.record("b")
                .is_some_and(|r| r["bmc"]["system"].is_string())
    });
    // Time passes while a waits, so its TIME is the time to the interruption, not to its last save.
    std::thread::sleep(Duration::from_secs(3));
    kill_process(Pid::from_child(&run), Signal::INT).unwrap();
    let told = "interrupted: starting nothing new; 1 job(s) finishing, at most 60 s: b (boot); Ctrl-C again abandons them";
    play_until(&f, &mut run, "run", &[], |f| {
        f.output("run", "stderr").contains(told)
    });
    kill_process(Pid::from_child(&run), Signal::INT).unwrap();
    let status = wait_exit_within(&mut run, Duration::from_secs(60));
    let (out, err) = (f.output("run", "stdout"), f.output("run", "stderr"));
    eprintln!("stdout:\n{out}\nstderr:\n{err}");
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted again: abandoned b (boot cut: not powered on for this phase: a re-run boots it)"),
        "{err}"
    );
    let cells = |site: &str| -> Vec<String> {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{site} ")))
            .unwrap();
        line.split_whitespace().map(String::from).collect()
    };
    assert_eq!(
        cells("a")[3..6],
        ["interrupted", "at", "wait-report"],
        "{out}"
    );
    assert_eq!(cells("b")[3..6], ["interrupted", "at", "boot"], "{out}");
    assert_ne!(cells("a")[6], "0:00", "the time to the interruption: {out}");
    assert!(err.ends_with("interrupted: re-run to resume\n"), "{err}");
    // Item 11: the CD override warning names its site (the fake driver keeps the override
    // continuous), once for a's one boot.
    assert_eq!(
        err.matches("WARN site a: the BMC keeps the CD override continuous")
            .count(),
        1,
        "{err}"
    );
    assert!(!err.contains("WARN the BMC keeps"), "{err}");
}
