//! `ibi deploy --phase factory` for a fleet of four sites, with real parts: four sushy-tools
//! emulators (one BMC per site: fake driver, each its own System UUID, Basic auth, TLS) on 127.0.0.1,
//! an installation ISO built by `ibi create image` with `statusURL`/`statusCA` pointing at deploy's
//! in-process server (TLS from a test CA), and `--parallel 2`. Every emulator really downloads its
//! ISO from that server during its InsertMedia. The hosts are played by this test as the booted live
//! ISO would run them, against the live server: site a's `hostAgent: lca` units report success, site
//! b's report a failure with the journal's tail, site c never reports (the timeout path), site d
//! reports through the agent's reporter (`hostAgent: ibi`; the lca units without the agent feature).
//! `deploy` is killed (SIGKILL) mid-run and run again: site a, done, is not touched again (its BMC
//! gets no request), site d resumes its wait without a second boot or download, b (failed) is tried
//! again, c times out again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::deliver::emulator::{Emulator, USER, free_port, sushy_emulator};
use common::deliver::host::{Host, ignition_file, iso_ignition, ok, test_tls};
use common::deliver::{example_install, ibi_env, sha256_file, stop_child, synthetic_base};
use serde_json::Value;

const TEST: &str = "deploy_fleet";
/// One System UUID per emulator, as four real hosts have.
const UUIDS: [&str; 4] = [
    "a1a1a1a1-0000-4000-8000-00000000000a",
    "b2b2b2b2-0000-4000-8000-00000000000b",
    "c3c3c3c3-0000-4000-8000-00000000000c",
    "d4d4d4d4-0000-4000-8000-00000000000d",
];
const SITES: [&str; 4] = ["a", "b", "c", "d"];
/// Short, so the silent host's timeout path ends the test soon.
const REPORT_TIMEOUT: &str = "45";
/// Every wait of the test itself.
const PHASE_WAIT: Duration = Duration::from_secs(300);

struct Fleet {
    base: tempfile::TempDir,
    work: tempfile::TempDir,
    tls: (PathBuf, PathBuf, PathBuf),
    port: u16,
    emulators: Vec<Emulator>,
    ign: Value,
}

impl Fleet {
    fn base(&self) -> &Path {
        self.base.path()
    }

    fn inventory(&self) -> PathBuf {
        self.work.path().join("sites.yaml")
    }

    /// `ibi deploy --phase factory --parallel 2`, its output in files under `work`.
    fn spawn(&self, run: &str) -> Child {
        let out =
            |s: &str| std::fs::File::create(self.work.path().join(format!("{run}.{s}"))).unwrap();
        Command::new(env!("CARGO_BIN_EXE_ibi"))
            .args(["deploy", "--dir"])
            .arg(self.base())
            .arg("--sites")
            .arg(self.inventory())
            .args(["--phase", "factory", "--parallel", "2", "--poll", "1"])
            .args(["--report-timeout", REPORT_TIMEOUT, "--bmc-timeout", "120"])
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .arg("--tls-cert")
            .arg(&self.tls.1)
            .arg("--tls-key")
            .arg(&self.tls.2)
            .env_remove("RUST_LOG")
            .stdout(Stdio::from(out("stdout")))
            .stderr(Stdio::from(out("stderr")))
            .spawn()
            .expect("starting ibi deploy")
    }

    fn output(&self, run: &str, stream: &str) -> String {
        std::fs::read_to_string(self.work.path().join(format!("{run}.{stream}")))
            .unwrap_or_default()
    }

    /// The site's record of its factory phase: (state, step), or None before deploy wrote one.
    fn phase(&self, site: &str) -> Option<(String, String)> {
        let v = self.record(site)?;
        let p = &v["phases"]["factory"];
        Some((p["state"].as_str()?.into(), p["step"].as_str()?.into()))
    }

    fn record(&self, site: &str) -> Option<Value> {
        let text = std::fs::read(self.base().join(format!(".ibi/deploy/{site}.json"))).ok()?;
        serde_json::from_slice(&text).ok()
    }

    fn host(&self, i: usize, journal: &str) -> Host {
        Host::new(&self.ign, UUIDS[i], &format!("sno-{}", SITES[i]), journal)
    }
}

/// BASE with the example inputs and statusURL on `port`, its installation ISO built; four emulators;
/// the inventory naming them.
fn fleet(bin: &Path) -> Fleet {
    let work = tempfile::tempdir().unwrap();
    let base = tempfile::tempdir().unwrap();
    let tls = test_tls(work.path());
    let port = free_port();
    example_install(base.path());
    let cfg = base.path().join("image-based-installation-config.yaml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!(
        "statusURL: https://127.0.0.1:{port}\nstatusCA: {}\n",
        tls.0.display()
    ));
    std::fs::write(&cfg, text).unwrap();
    let built = ibi_env(
        &[
            "create",
            "image",
            "--dir",
            base.path().to_str().unwrap(),
            "--base-iso",
            synthetic_base().to_str().unwrap(),
        ],
        &[],
    );
    ok(&built, "ibi create image");
    let ign = iso_ignition(&base.path().join("rhcos-ibi.iso"));
    let emulators: Vec<Emulator> = UUIDS
        .iter()
        .map(|u| Emulator::start_with_uuid(bin, u))
        .collect();
    let mut inv = String::from("sites:\n");
    for (site, emu) in SITES.iter().zip(&emulators) {
        inv.push_str(&format!(
            "  - name: {site}\n    hostname: sno-{site}\n    bmc:\n      address: {}\n      user: {USER}\n      passwordFile: {}\n      caFile: {}\n",
            emu.url,
            emu.password_file.display(),
            emu.cert.display()
        ));
    }
    std::fs::write(work.path().join("sites.yaml"), inv).unwrap();
    Fleet {
        base,
        work,
        tls,
        port,
        emulators,
        ign,
    }
}

/// The journal a failed install leaves.
const FAILED_JOURNAL: &str = "2026-11-24T10:00:00+0000 host lca-cli[1]: pulling the seed\n\
     2026-11-24T10:00:05+0000 host lca-cli[1]: error: failed to pull the seed image\n";

fn report_done_lca(f: &Fleet, i: usize) {
    let h = f.host(i, "");
    ok(&h.lca_report("running", &[]), "ibi-report.sh running");
    ok(&h.lca_report("done", &[]), "ibi-report.sh done");
}

fn report_failed_lca(f: &Fleet, i: usize) {
    let h = f.host(i, FAILED_JOURNAL);
    ok(&h.lca_report("running", &[]), "ibi-report.sh running");
    ok(
        &h.lca_report(
            "failed",
            &[
                ("MONITOR_SERVICE_RESULT", "exit-code"),
                ("MONITOR_EXIT_CODE", "exited"),
                ("MONITOR_EXIT_STATUS", "1"),
            ],
        ),
        "ibi-report.sh failed",
    );
}

/// `hostAgent: ibi`: the agent's reporter, as `ibi agent install` drives it, through three steps.
#[cfg(feature = "agent")]
fn report_done_agent(f: &Fleet, i: usize) {
    use ibi::agent::report::{Delivery, ReporterSetup};
    use ibi::agent::state::{Progress, Step};
    let h = f.host(i, "");
    let setup = ReporterSetup {
        config_file: h.path("var/tmp/ibi-report.json"),
        root: h.root.path().to_path_buf(),
        authfile: Some(h.path("var/tmp/pull-secret.json")),
        journalctl: h.path("bin/journalctl").to_string_lossy().into_owned(),
        unit: "ibi-agent-install.service".into(),
    };
    let reporter = std::sync::Arc::new(setup.start().unwrap().unwrap());
    let progress = Progress::new(&h.path("status.json"));
    progress.observe(reporter.observer());
    for step in [Step::DiskCleanup, Step::WriteRhcos, Step::FetchSeed] {
        progress.begin(step);
        progress.finish();
    }
    assert_eq!(
        reporter.finish(progress.snapshot(), Ok(()), Vec::new()),
        Delivery::Delivered
    );
}

#[cfg(not(feature = "agent"))]
fn report_done_agent(f: &Fleet, i: usize) {
    common::skip(
        TEST,
        "hostAgent: ibi's reporter needs the agent feature; site d reports as lca",
    );
    report_done_lca(f, i);
}

/// What a host does once booted: report through the lca units or the agent's reporter.
type Play = fn(&Fleet, usize);

/// Plays the hosts of `plays` (site index, what it does) once each when its site waits for its
/// report, until `until` holds; panics if deploy exits first or the wait is over.
fn play_until(
    f: &Fleet,
    deploy: &mut Child,
    run: &str,
    plays: &[(usize, Play)],
    until: impl Fn(&Fleet) -> bool,
) {
    let mut played = vec![false; plays.len()];
    let deadline = Instant::now() + PHASE_WAIT;
    while !until(f) {
        for (n, (i, play)) in plays.iter().enumerate() {
            let waiting = f
                .phase(SITES[*i])
                .is_some_and(|(st, step)| st == "running" && step == "wait-report");
            if waiting && !played[n] {
                play(f, *i);
                played[n] = true;
            }
        }
        if let Ok(Some(status)) = deploy.try_wait() {
            if until(f) {
                return;
            }
            panic!(
                "deploy ({run}) ended early with {status}: {}{}",
                f.output(run, "stdout"),
                f.output(run, "stderr")
            );
        }
        assert!(
            Instant::now() < deadline,
            "deploy ({run}): no progress in {PHASE_WAIT:?}: {:?}\n{}",
            SITES.map(|s| f.phase(s)),
            f.output(run, "stderr")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn state_is(f: &Fleet, site: &str, state: &str, step: &str) -> bool {
    f.phase(site)
        .is_some_and(|(st, sp)| st == state && (step.is_empty() || sp == step))
}

/// The emulator's request log (werkzeug's lines on its stderr).
fn requests(emu: &Emulator) -> String {
    emu.log()
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + PHASE_WAIT;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() >= deadline {
            return stop_child(child);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_factory_deploy_of_four_sites_survives_a_kill_and_resumes() {
    if !common::require_tools(TEST, &["curl", "jq", "bash", "coreos-installer"]) {
        return;
    }
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let f = fleet(&bin);
    let iso = f.base().join("rhcos-ibi.iso");
    let size = std::fs::metadata(&iso).unwrap().len();

    // Run 1: a reports success, b failure; killed once a is done, b failed and d waits.
    let mut run1 = f.spawn("run1");
    play_until(
        &f,
        &mut run1,
        "run1",
        &[(0, report_done_lca), (1, report_failed_lca)],
        |f| {
            state_is(f, "a", "done", "")
                && state_is(f, "b", "failed", "")
                && state_is(f, "d", "running", "wait-report")
        },
    );
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&run1),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    run1.wait().unwrap();
    let before: Vec<String> = f.emulators.iter().map(requests).collect();
    assert!(before[1].contains("InsertMedia"), "{}", before[1]);

    // Run 2: a is left alone, d resumes its wait, b is booted again and fails again, c times out.
    let mut run2 = f.spawn("run2");
    play_until(
        &f,
        &mut run2,
        "run2",
        &[(3, report_done_agent), (1, report_failed_lca)],
        |f| state_is(f, "d", "done", "") && state_is(f, "b", "failed", ""),
    );
    let status = wait_exit(&mut run2);
    let (stdout, stderr) = (f.output("run2", "stdout"), f.output("run2", "stderr"));
    eprintln!("run 2 stdout:\n{stdout}\nrun 2 stderr:\n{stderr}");
    assert_eq!(status.code(), Some(1), "two sites failed: exit 1");
    let after: Vec<String> = f.emulators.iter().map(requests).collect();

    // The summary table: one row per site.
    let row = |site: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{site} ")))
            .unwrap_or_else(|| panic!("no row for {site}:\n{stdout}"))
            .to_string()
    };
    assert!(stdout.starts_with("SITE"), "{stdout}");
    for (site, result) in [
        ("a", "done (earlier run)"),
        ("b", "failed"),
        ("c", "failed"),
        ("d", "done"),
    ] {
        let r = row(site);
        let emu = &f.emulators[SITES.iter().position(|s| *s == site).unwrap()];
        assert!(r.contains(&emu.url) && r.contains("factory"), "{r}");
        assert!(r.contains(&format!("  {result}  ")), "{site}: {r}");
    }
    assert!(
        stderr.contains("error: site b: the host reported a failure"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "error: site c: no final report from the host within {REPORT_TIMEOUT} s"
        )),
        "{stderr}"
    );

    // Nothing that had finished was done again: a's BMC heard nothing from run 2; d was not booted
    // again (no insert, one download's worth of bytes) but was ejected.
    assert_eq!(after[0], before[0], "site a's BMC got requests in run 2");
    let d_new = &after[3][before[3].len()..];
    assert!(
        !d_new.contains("InsertMedia"),
        "site d was booted again: {d_new}"
    );
    assert!(
        d_new.contains("EjectMedia"),
        "site d was not ejected: {d_new}"
    );
    let b_new = &after[1][before[1].len()..];
    assert!(
        b_new.contains("InsertMedia"),
        "site b (failed) is tried again"
    );

    // Each emulator really downloaded the ISO from deploy's server: whole, per deploy's access log;
    // the copies of the hosts not ejected (an eject deletes the emulator's copy) hash as the ISO.
    let access = std::fs::read_to_string(f.base().join(".ibi/deploy-access.log")).unwrap();
    for (i, site) in SITES.iter().enumerate() {
        let rec = f.record(site).unwrap();
        assert_eq!(rec["bmc"]["uuid"], UUIDS[i], "{rec}");
        assert_eq!(rec["bmc"]["address"], f.emulators[i].url.as_str());
        let line = format!("GET deploy/{site}/rhcos-ibi.iso 200 range=- bytes={size} ");
        assert!(access.contains(&line), "{line} not in:\n{access}");
        assert_eq!(
            rec["phases"]["factory"]["bytesServed"].as_u64(),
            Some(size),
            "{rec}"
        );
    }
    for i in [1, 2] {
        let got = f.emulators[i]
            .downloaded("rhcos-ibi.iso")
            .expect("downloaded");
        assert_eq!(sha256_file(&got), sha256_file(&iso), "site {}", SITES[i]);
    }
    let gets = |site: &str| {
        access
            .matches(&format!("GET deploy/{site}/rhcos-ibi.iso 200"))
            .count()
    };
    assert_eq!(
        (gets("a"), gets("b"), gets("d")),
        (1, 2, 1),
        "b (failed) is downloaded again, a and d are not:\n{access}"
    );
    for i in [0, 3] {
        assert_eq!(
            f.emulators[i].cd()["Inserted"],
            false,
            "site {} ejected",
            SITES[i]
        );
    }

    // No secret in deploy's output or its record: the BMC password, the report token, image URLs.
    let token = serde_json::from_slice::<Value>(&ignition_file(&f.ign, "/var/tmp/ibi-report.json"))
        .unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let served: Value =
        serde_json::from_slice(&std::fs::read(f.base().join(".ibi/deploy-served.json")).unwrap())
            .unwrap();
    let mut secrets = vec![common::deliver::emulator::PASSWORD.to_string(), token];
    for e in served["images"].as_array().unwrap() {
        let url = e["url"].as_str().unwrap();
        secrets.push(url.split('/').nth(3).unwrap().to_string());
    }
    let records: String = SITES
        .iter()
        .map(|s| f.record(s).unwrap().to_string())
        .collect();
    for text in [&stdout, &stderr, &f.output("run1", "stderr"), &records] {
        for s in &secrets {
            assert!(!text.contains(s.as_str()), "a secret ({:.4}…) in {text}", s);
        }
    }

    // ibi status shows the fleet from the same records.
    let st = ok(
        &ibi_env(&["status", "--dir", f.base().to_str().unwrap()], &[]),
        "ibi status",
    );
    eprintln!("ibi status:\n{st}");
    assert!(st.lines().count() > 4, "{st}");
}
