//! `ibi deploy --phase factory` for a fleet of four sites, with real parts: four sushy-tools
//! emulators (one BMC per site: fake driver, each its own System UUID, Basic auth, TLS) on 127.0.0.1,
//! an installation ISO built by `ibi create image` with `statusURL`/`statusCA` pointing at deploy's
//! in-process server (TLS from a test CA), and `--parallel 2`. Every emulator really downloads its
//! ISO from that server during its InsertMedia. The hosts are played by this test as the booted live
//! ISO would run them, against the live server: site a's `hostAgent: lca` units report success, site
//! b's report a failure with the journal's tail, site c never reports (the timeout path), site d
//! reports through the agent's reporter (`hostAgent: ibi`; the lca units without the agent feature).
//! Each host boots the ISO its BMC downloaded: its own variant, whose report token is its own.
//! `deploy` is killed (SIGKILL) mid-run and run again: site a, done, is not touched again (its BMC
//! gets no request), site d resumes its wait without a second boot or download, b (whose host
//! reported a failure) and c (booted, silent) are not booted again: b stays failed, c is waited for
//! again and times out. A third run with `--redo b` installs b again.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is how it fails

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::deliver::emulator::{Emulator, USER, free_port, sushy_emulator};
use crate::common::deliver::fleet::{
    DeployRun, PHASE_WAIT, build_sites, example_fleet_base, fleet, play_until, report_done_agent,
    report_done_lca, report_failed_lca, requests, spawn_deploy, state_is, wait_exit,
};
use crate::common::deliver::host::{ignition_file, iso_ignition, ok, test_tls};
use crate::common::deliver::{example_install, ibi_env, sha256_file, synthetic_base};
use crate::common::kubeapi::{BuiltSite, StandIn};
use serde_json::Value;

use crate::common::deploy_fleet::*;

#[test]
fn a_factory_deploy_of_four_sites_survives_a_kill_and_resumes() {
    if !common::require_tools(TEST, &["curl", "jq", "bash", "coreos-installer"]) {
        return;
    }
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let sites: Vec<(&str, &str)> = SITES.iter().copied().zip(UUIDS).collect();
    let f = fleet(
        &bin,
        &sites,
        &["--report-timeout", REPORT_TIMEOUT, "--bmc-timeout", "120"],
    );
    let size = std::fs::metadata(f.base().join("rhcos-ibi.iso"))
        .unwrap()
        .len();

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

    // Run 2: a is left alone, d resumes its wait, b stays failed (its host reported), c is waited
    // for again (it was booted) and times out; none is booted again.
    let mut run2 = f.spawn("run2");
    play_until(&f, &mut run2, "run2", &[(3, report_done_agent)], |f| {
        state_is(f, "d", "done", "") && state_is(f, "b", "failed", "")
    });
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
        stderr.contains("error: site b: the host reported a failure: install-rhcos-and-restore-seed.service failed (result exit-code, exited 1) (it is not booted again by a re-run: check it, then pass --redo b to install it again)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "error: site c: no final report from the host within {REPORT_TIMEOUT} s (--report-timeout; a re-run waits again without a new boot)"
        )),
        "{stderr}"
    );
    for line in [
        "site a: done by an earlier run: not touched",
        "site d: wait-report: resumed",
        "site b: wait-report: resumed",
        "site c: wait-report: resumed",
        "site d: eject: done",
    ] {
        assert!(stderr.contains(line), "{line} not in {stderr}");
    }

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
    for i in [1, 2] {
        let new = &after[i][before[i].len()..];
        assert!(
            !new.contains("InsertMedia") && !new.contains("Actions/ComputerSystem.Reset"),
            "site {} was booted again: {new}",
            SITES[i]
        );
    }

    // Run 3: --redo b installs b again (a new boot, a new download), and only b.
    let mut run3 = f.spawn_with("run3", &["--only", "b", "--redo", "b"]);
    // b's record says failed until run 3 begins it again.
    play_until(&f, &mut run3, "run3", &[], |f| {
        state_is(f, "b", "running", "")
    });
    play_until(&f, &mut run3, "run3", &[(1, report_failed_lca)], |f| {
        state_is(f, "b", "failed", "")
    });
    assert_eq!(wait_exit(&mut run3).code(), Some(1), "b failed again");
    let stderr3 = f.output("run3", "stderr");
    assert!(
        stderr3.contains("error: site b: the host reported a failure"),
        "{stderr3}\n{}",
        std::fs::read_to_string(f.base().join(".ibi/reports.jsonl")).unwrap()
    );
    let redone: Vec<String> = f.emulators.iter().map(requests).collect();
    let b3 = &redone[1][after[1].len()..];
    assert!(b3.contains("InsertMedia"), "--redo b boots b again: {b3}");
    for i in [0, 2, 3] {
        assert_eq!(redone[i], after[i], "site {} touched by run 3", SITES[i]);
    }

    // Each emulator really downloaded its ISO from deploy's server: whole, per deploy's access log.
    // The copies of the hosts not ejected (an eject deletes the emulator's copy) are each host's own
    // variant: the fleet ISO's size and Ignition config but for the report token, a token of its own.
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
    let settings = |ign: &Value| -> Value {
        serde_json::from_slice(&ignition_file(ign, "/var/tmp/ibi-report.json")).unwrap()
    };
    let fleet_token = settings(&f.ign)["token"].clone();
    let mut host_tokens = Vec::new();
    for i in [1, 2] {
        let got = f.emulators[i]
            .downloaded("rhcos-ibi.iso")
            .expect("downloaded");
        assert_eq!(std::fs::metadata(&got).unwrap().len(), size);
        let mut ign = iso_ignition(&got);
        let mut own = settings(&ign);
        assert_ne!(own["token"], fleet_token, "site {}", SITES[i]);
        host_tokens.push(own["token"].as_str().unwrap().to_string());
        let mut fleet = settings(&f.ign);
        (own["token"], fleet["token"]) = (Value::Null, Value::Null);
        assert_eq!(own, fleet, "only the token differs");
        let mut fleet_rest = f.ign.clone();
        for ign in [&mut ign, &mut fleet_rest] {
            let files = ign["storage"]["files"].as_array_mut().unwrap();
            files.retain(|f| f["path"] != "/var/tmp/ibi-report.json");
        }
        assert_eq!(
            ign, fleet_rest,
            "site {}: the rest of the config is the fleet's",
            SITES[i]
        );
    }
    assert_ne!(host_tokens[0], host_tokens[1]);
    let gets = |site: &str| {
        access
            .matches(&format!("GET deploy/{site}/rhcos-ibi.iso 200"))
            .count()
    };
    assert_eq!(
        (gets("a"), gets("b"), gets("c"), gets("d")),
        (1, 2, 1, 1),
        "only --redo b downloads again:\n{access}"
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
    secrets.extend(host_tokens);
    for e in served["images"].as_array().unwrap() {
        let url = e["url"].as_str().unwrap();
        secrets.push(url.split('/').nth(3).unwrap().to_string());
    }
    let records: String = SITES
        .iter()
        .map(|s| f.record(s).unwrap().to_string())
        .collect();
    for text in [
        &stdout,
        &stderr,
        &f.output("run1", "stderr"),
        &f.output("run3", "stderr"),
        &records,
    ] {
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

/// `ibi deploy --phase site` for two sites of the example fleet, against two emulators and two
/// stand-ins for the sites' kube-apiservers (tests/common/kubeapi.rs: served under each site's
/// load-balancer signer, client certificates checked against its admin CA), each site's kubeconfig
/// pointed at its stand-in as DNS would point `api.<cluster>.<domain>` at the host. Deploy attaches
/// each site's own configuration ISO and boots the disk; the first cluster turns ready once deploy
/// watches it and is ejected; the second stays in the seed's state and fails at its watch timeout,
/// its media left attached.
#[test]
fn a_site_deploy_watches_each_cluster_and_ejects_once_ready() {
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let emulators: Vec<Emulator> = UUIDS[..2]
        .iter()
        .map(|u| Emulator::start_with_uuid(&bin, u))
        .collect();
    let (base, names) =
        example_fleet_base(&emulators.iter().map(|e| (e, None)).collect::<Vec<_>>());
    let b = base.path();
    let inventory = b.join("sites.yaml");
    build_sites(b);
    let sites: Vec<BuiltSite> = names
        .iter()
        .map(|n| BuiltSite::read(&b.join("sites").join(n)))
        .collect();
    let apis: Vec<StandIn> = sites
        .iter()
        .map(|s| {
            let api = StandIn::start(&s.cluster_tls(), s.seed_state());
            s.point_at(&api.url());
            api
        })
        .collect();

    let work = tempfile::tempdir().unwrap();
    let tls = test_tls(work.path());
    let port = free_port();
    let spawn = |run: &str| {
        spawn_deploy(
            &DeployRun {
                base: b,
                inventory: &inventory,
                phase: "site",
                port,
                tls: &tls,
                out: work.path(),
            },
            run,
            &[
                "--parallel",
                "2",
                "--poll",
                "1",
                "--watch-timeout",
                "20",
                "--bmc-timeout",
                "120",
            ],
        )
    };
    let mut deploy = spawn("run1");
    let record = |site: &str| -> Option<Value> {
        serde_json::from_slice(&std::fs::read(b.join(format!(".ibi/deploy/{site}.json"))).ok()?)
            .ok()
    };
    let step = |site: &str| {
        record(site).and_then(|r| r["phases"]["site"]["step"].as_str().map(String::from))
    };
    // The first cluster turns ready part-way: once deploy watches it.
    let deadline = Instant::now() + PHASE_WAIT;
    while step(&names[0]).as_deref() != Some("watch") {
        assert!(Instant::now() < deadline, "site {} never watched", names[0]);
        assert!(deploy.try_wait().unwrap().is_none(), "deploy ended early");
        std::thread::sleep(Duration::from_millis(200));
    }
    apis[0].set(|c| *c = sites[0].ready());
    let status = wait_exit(&mut deploy);
    let read = |s: &str| std::fs::read_to_string(work.path().join(s)).unwrap();
    let (stdout, stderr) = (read("run1.stdout"), read("run1.stderr"));
    eprintln!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(status.code(), Some(1), "one site failed: exit 1");

    let row = |site: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{site} ")))
            .unwrap_or_else(|| panic!("no row for {site}:\n{stdout}"))
            .to_string()
    };
    for (n, result) in [(&names[0], "done"), (&names[1], "failed")] {
        let r = row(n);
        let cells: Vec<&str> = r.split_whitespace().collect();
        assert_eq!(cells[2..4], ["site", result], "{stdout}");
    }
    assert!(
        stderr.contains(&format!("error: site {}: not ready after", names[1])),
        "{stderr}"
    );
    // Each BMC fetched its site's own configuration ISO from deploy's server; the ready site's was
    // ejected, the other's stays attached (post-pivot polls for it with no time limit).
    let access = std::fs::read_to_string(b.join(".ibi/deploy-access.log")).unwrap();
    for (i, n) in names.iter().enumerate() {
        let iso = b.join("sites").join(n).join("imagebasedconfig.iso");
        let size = std::fs::metadata(&iso).unwrap().len();
        let line = format!("GET sites/{n}/imagebasedconfig.iso 200 range=- bytes={size} ");
        assert!(access.contains(&line), "{line} not in:\n{access}");
        let rec = record(n).unwrap();
        assert_eq!(rec["phases"]["site"]["bytesServed"].as_u64(), Some(size));
        assert_eq!(rec["bmc"]["uuid"], UUIDS[i]);
        let target = &emulators[i].system()["Boot"]["BootSourceOverrideTarget"];
        assert_ne!(target, "Cd", "site {n} must boot its disk");
        assert!(
            apis[i].count("/readyz") > 0,
            "site {n}'s cluster was not watched"
        );
    }
    assert_eq!(emulators[0].cd()["Inserted"], false);
    let cd = emulators[1].cd();
    assert_eq!(
        (&cd["Inserted"], &cd["ImageName"]),
        (&Value::Bool(true), &Value::from("imagebasedconfig.iso"))
    );
    let got = emulators[1]
        .downloaded("imagebasedconfig.iso")
        .expect("downloaded");
    assert_eq!(
        sha256_file(&got),
        sha256_file(&b.join("sites").join(&names[1]).join("imagebasedconfig.iso"))
    );

    // What the slow site's host was given is recorded (issue 33 item 8); its configuration ISO
    // built again meanwhile (a new marker) does not change how its cluster is judged.
    let shipped = record(&names[1]).unwrap()["phases"]["site"]["shipped"].clone();
    assert_eq!(shipped["builtAt"], sites[1].built_at.as_str(), "{shipped}");
    assert_eq!(
        shipped["clusterId"],
        sites[1].cluster_id.as_str(),
        "{shipped}"
    );
    let rebuilt = ibi_env(
        &[
            "create",
            "config-image",
            "--dir",
            b.to_str().unwrap(),
            "--sites",
            inventory.to_str().unwrap(),
        ],
        &[("SOURCE_DATE_EPOCH", "1800000000")],
    );
    ok(&rebuilt, "ibi create config-image --sites (again)");
    for (site, api) in sites.iter().zip(&apis) {
        site.point_at(&api.url());
    }
    assert_ne!(
        BuiltSite::read(&b.join("sites").join(&names[1])).built_at,
        sites[1].built_at,
        "a new marker"
    );

    // Run 2, once the slow cluster is ready: it is watched again, never booted again (no insert, no
    // power change), and ejected; the ready site is left alone.
    let before: Vec<String> = emulators.iter().map(requests).collect();
    apis[1].set(|c| *c = sites[1].ready());
    let mut run2 = spawn("run2");
    let status = wait_exit(&mut run2);
    let (stdout2, stderr2) = (read("run2.stdout"), read("run2.stderr"));
    eprintln!("run 2 stdout:\n{stdout2}\nrun 2 stderr:\n{stderr2}");
    assert_eq!(status.code(), Some(0), "{stderr2}");
    assert!(
        stderr2.contains(&format!("site {}: watch: resumed", names[1])),
        "{stderr2}"
    );
    let after: Vec<String> = emulators.iter().map(requests).collect();
    assert_eq!(after[0], before[0], "the done site's BMC got requests");
    let new = &after[1][before[1].len()..];
    assert!(
        !new.contains("InsertMedia") && !new.contains("ComputerSystem.Reset"),
        "the slow site was booted again: {new}"
    );
    assert!(new.contains("EjectMedia"), "not ejected: {new}");
    assert_eq!(emulators[1].cd()["Inserted"], false);
    let st = ok(
        &ibi_env(&["status", "--dir", b.to_str().unwrap()], &[]),
        "ibi status",
    );
    eprintln!("ibi status:\n{st}");
}

/// `shutdown: true` without `statusURL`: the host says it is done only by powering off. The test
/// powers the emulated system off (ForceOff) once deploy waits, as lca-cli does at the end of an
/// install; deploy sees `PowerState` `Off`, ejects and records the site done.
#[test]
fn a_factory_host_that_powers_off_is_done_without_a_report() {
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let emu = Emulator::start_with_uuid(&bin, UUIDS[0]);
    let base = tempfile::tempdir().unwrap();
    let b = base.path();
    example_install(b);
    let cfg = b.join("image-based-installation-config.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap() + "shutdown: true\n";
    std::fs::write(&cfg, text).unwrap();
    let built = ibi_env(
        &[
            "create",
            "image",
            "--dir",
            b.to_str().unwrap(),
            "--base-iso",
            synthetic_base().to_str().unwrap(),
        ],
        &[],
    );
    ok(&built, "ibi create image");
    let inv = b.join("sites.yaml");
    std::fs::write(
        &inv,
        format!(
            "sites:\n  - name: a\n    hostname: sno-a\n    bmc:\n      address: {}\n      user: {USER}\n      passwordFile: {}\n      caFile: {}\n",
            emu.url,
            emu.password_file.display(),
            emu.cert.display()
        ),
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let tls = test_tls(work.path());
    let mut deploy = Command::new(env!("CARGO_BIN_EXE_ibi"))
        .args(["deploy", "--dir"])
        .arg(b)
        .arg("--sites")
        .arg(&inv)
        .args([
            "--phase",
            "factory",
            "--poll",
            "1",
            "--report-timeout",
            "120",
        ])
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--tls-cert")
        .arg(&tls.1)
        .arg("--tls-key")
        .arg(&tls.2)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let step = || -> Option<String> {
        let v: Value =
            serde_json::from_slice(&std::fs::read(b.join(".ibi/deploy/a.json")).ok()?).ok()?;
        v["phases"]["factory"]["step"].as_str().map(String::from)
    };
    let deadline = Instant::now() + PHASE_WAIT;
    while step().as_deref() != Some("wait-report") {
        assert!(Instant::now() < deadline, "site a never waited");
        assert!(deploy.try_wait().unwrap().is_none(), "deploy ended early");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(emu.system()["PowerState"], "On", "booted and still on");
    let reset = format!(
        "/redfish/v1/Systems/{}/Actions/ComputerSystem.Reset",
        emu.uuid
    );
    assert!(emu.post(&reset, &serde_json::json!({"ResetType": "ForceOff"})));
    let status = wait_exit(&mut deploy);
    let out = deploy.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cells: Vec<&str> = stdout.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        cells[..4],
        ["a", emu.url.as_str(), "factory", "done"],
        "{stdout}"
    );
    assert_eq!(emu.cd()["Inserted"], false, "ejected");
}

/// `ibi deploy --phase oneshot` for one site of the example fleet: one emulator (fake driver), the
/// fleet's installation ISO (built once, `shutdown: true`: the host says it is done by powering off,
/// as lca-cli does), the site's configuration ISO and a stand-in for its kube-apiserver. Deploy
/// serves the site its own variant of the one installation ISO, made as it streams (nothing is stored
/// per site), boots it from CD once; the test powers the system off as the installed host does;
/// deploy ejects and boots the disk with no media, then watches the cluster. It is killed during
/// the watch and run again: the second run only watches (no insert, no power change) and ends done.
/// The ISO the emulator downloaded carries the site's configuration tree byte for byte as xorriso
/// reads it from the site's configuration ISO; a factory run for that site afterwards is refused.
#[test]
fn a_oneshot_deploy_serves_the_sites_own_iso_boots_the_disk_and_resumes_its_watch() {
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    if !common::tool("xorriso", TEST) {
        return;
    }
    let rig = OneShotRig::new(&bin, |_| "shutdown: true\n".into(), |_| {});
    let (emu, b, name, dir) = (&rig.emu, rig.base.path(), rig.name.clone(), rig.dir());
    let (site_dir, site, api, work) = (&rig.site_dir, &rig.site, &rig.api, rig.work.path());
    let spawn = |phase: &str, run: &str| rig.spawn(phase, run);
    let read = |s: &str| rig.read(s);
    let record = || rig.record();
    let wait_step = |deploy: &mut std::process::Child, want: &str| rig.wait_step(deploy, want);

    let mut run1 = spawn("oneshot", "run1");
    wait_step(&mut run1, "wait-report");
    // Booted once from its own ISO on the virtual CD.
    assert_eq!(emu.system()["PowerState"], "On");
    assert_eq!(emu.system()["Boot"]["BootSourceOverrideTarget"], "Cd");
    assert_eq!(emu.cd()["Inserted"], true);
    // What the BMC downloaded (the emulator drops it at the eject).
    let kept = work.join("downloaded.iso");
    std::fs::copy(emu.downloaded("rhcos-ibi.iso").expect("downloaded"), &kept).unwrap();
    // The installed host powers off (`shutdown: true`).
    rig.power_off();
    wait_step(&mut run1, "watch");
    let rec = record().unwrap();
    assert!(
        rec["phases"]["oneshot"]["diskBooted"].as_u64().is_some(),
        "{rec}"
    );
    // The disk boot: every CD ejected, no CD override, the host on.
    let deadline = Instant::now() + PHASE_WAIT;
    while emu.system()["PowerState"] != "On" {
        assert!(Instant::now() < deadline, "never powered on from disk");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(emu.cd()["Inserted"], false, "the disk boots with no media");
    assert_ne!(emu.system()["Boot"]["BootSourceOverrideTarget"], "Cd");
    // Killed while it watches the cluster.
    run1.kill().unwrap();
    run1.wait().unwrap();
    eprintln!("run 1 stderr:\n{}", read("run1.stderr"));

    // The ISO the BMC downloaded: the site's own, carrying its configuration.
    let ign = iso_ignition(&kept);
    let extracted = tempfile::tempdir().unwrap();
    let x = Command::new("xorriso")
        .args(["-osirrox", "on", "-indev"])
        .arg(site_dir.join("imagebasedconfig.iso"))
        .args(["-extract", "/"])
        .arg(extracted.path())
        .output()
        .unwrap();
    assert!(x.status.success(), "{}", String::from_utf8_lossy(&x.stderr));
    let mut files = 0;
    for entry in walk_files(extracted.path()) {
        let rel = entry.strip_prefix(extracted.path()).unwrap();
        let path = format!("/var/tmp/ibi-site-configuration/{}", rel.display());
        assert_eq!(
            ignition_file(&ign, &path),
            std::fs::read(&entry).unwrap(),
            "{path}"
        );
        files += 1;
    }
    assert!(files >= 3, "{files} files in the site's ISO");
    let fleet = iso_ignition(&b.join("rhcos-ibi.iso"));
    let carried = |ign: &Value| {
        ign["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                f["path"]
                    .as_str()
                    .unwrap()
                    .starts_with("/var/tmp/ibi-site-configuration/")
            })
            .count()
    };
    assert_eq!(carried(&ign), files, "exactly the site's files");
    assert_eq!(carried(&fleet), 0, "the fleet's ISO carries no site");
    assert!(
        !site_dir.join("rhcos-ibi.iso").exists(),
        "nothing stored per site"
    );
    let access = std::fs::read_to_string(b.join(".ibi/deploy-access.log")).unwrap();
    let line = format!("GET deploy/{name}/oneshot/rhcos-ibi.iso 200");
    assert!(access.contains(&line), "{line} not in:\n{access}");

    // Run 2, once the cluster is ready: only watched, never booted again.
    let before = requests(emu);
    api.set(|c| *c = site.ready());
    let mut run2 = spawn("oneshot", "run2");
    let status = wait_exit(&mut run2);
    let (stdout2, stderr2) = (read("run2.stdout"), read("run2.stderr"));
    eprintln!("run 2 stdout:\n{stdout2}\nrun 2 stderr:\n{stderr2}");
    assert_eq!(status.code(), Some(0), "{stderr2}");
    assert!(
        stderr2.contains(&format!("site {name}: watch: resumed")),
        "{stderr2}"
    );
    let new = requests(emu)[before.len()..].to_string();
    assert!(
        !new.contains("InsertMedia") && !new.contains("ComputerSystem.Reset"),
        "booted again: {new}"
    );
    let cells: Vec<&str> = stdout2.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(cells[2..4], ["oneshot", "done"], "{stdout2}");
    assert!(api.count("/readyz") > 0, "the cluster was not watched");

    // The site was installed one-shot: the factory phase would install it again.
    let before = requests(emu);
    let mut run3 = spawn("factory", "run3");
    let status = wait_exit(&mut run3);
    assert_eq!(status.code(), Some(1));
    let out3 = read("run3.stdout") + &read("run3.stderr");
    assert!(
        out3.contains("deploy ran its oneshot phase before"),
        "{out3}"
    );
    let new = requests(emu)[before.len()..].to_string();
    assert!(
        !new.contains("InsertMedia") && !new.contains("ComputerSystem.Reset"),
        "touched: {new}"
    );
    let st = ok(&ibi_env(&["status", "--dir", dir], &[]), "ibi status");
    eprintln!("ibi status:\n{st}");
    let row: Vec<&str> = st
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .unwrap_or_else(|| panic!("no row for {name}:\n{st}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[4..7], ["done", "done", "watch"], "{st}");
    let json = ok(
        &ibi_env(&["status", "--dir", dir, "--json"], &[]),
        "ibi status --json",
    );
    assert!(json.contains("\"phase\": \"oneshot\""), "{json}");
}

/// `ibi deploy --phase oneshot` of a site whose configuration does not fit the Ignition embed area
/// (an extra manifest of 400 KB of random base64): its variant of the installation ISO (`hostAgent:
/// ibi`, `statusURL` naming deploy's server, `statusCA` the test CA, `shutdown: true`) names the
/// site's configuration ISO by size and SHA-256 instead of carrying it, with the host's own report
/// token. The test plays the host's fetch with curl, as `ibi agent install` does it (its side is
/// unit-tested against a stand-in server): with that token deploy's server answers exactly the
/// site's configuration ISO; with the ISO's own token it refuses (403), without one 401. Then the
/// host powers off and deploy boots the disk and watches the cluster to done.
#[test]
fn a_oneshot_site_too_large_for_the_iso_is_fetched_with_the_hosts_own_token() {
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    if !common::tool("curl", TEST) {
        return;
    }
    let rig = OneShotRig::new(
        &bin,
        |i| {
            format!(
                "hostAgent: ibi\nhostAgentImage: quay.io/openshift-kni/ibi:4.20\nshutdown: true\nstatusURL: https://127.0.0.1:{}\nstatusCA: {}\n",
                i.port,
                i.ca.display()
            )
        },
        |base| {
            let mut noise = vec![0u8; 300_000];
            openssl::rand::rand_bytes(&mut noise).unwrap();
            let blob = openssl::base64::encode_block(&noise);
            std::fs::write(
                base.join("extra-manifests/large-configmap.yaml"),
                format!(
                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: large\n  namespace: openshift-config\ndata:\n  blob: {blob}\n"
                ),
            )
            .unwrap();
        },
    );
    let site_iso = rig.site_dir.join("imagebasedconfig.iso");
    let iso_bytes = std::fs::read(&site_iso).unwrap();
    assert!(iso_bytes.len() > 400_000, "{} bytes", iso_bytes.len());

    let mut run1 = rig.spawn("oneshot", "run1");
    rig.wait_step(&mut run1, "wait-report");
    let ign = iso_ignition(&rig.emu.downloaded("rhcos-ibi.iso").expect("downloaded"));
    let fetch: Value =
        serde_json::from_slice(&ignition_file(&ign, "/var/tmp/ibi-site-fetch.json")).unwrap();
    assert_eq!(fetch["size"], iso_bytes.len() as u64);
    assert_eq!(fetch["sha256"], sha256_file(&site_iso));
    let carried = ign.to_string().contains("/var/tmp/ibi-site-configuration/");
    assert!(!carried, "the tree is not carried");
    let settings: Value =
        serde_json::from_slice(&ignition_file(&ign, "/var/tmp/ibi-report.json")).unwrap();
    let token = settings["token"].as_str().unwrap().to_string();
    let fleet = iso_ignition(&rig.base.path().join("rhcos-ibi.iso"));
    let fleet_settings: Value =
        serde_json::from_slice(&ignition_file(&fleet, "/var/tmp/ibi-report.json")).unwrap();
    let fleet_token = fleet_settings["token"].as_str().unwrap().to_string();
    assert_ne!(token, fleet_token, "the host's own token");

    // The host's fetch, as `ibi agent install` makes it.
    let url = format!("https://127.0.0.1:{}/site-configuration", rig.port);
    let got = rig.work.path().join("fetched.iso");
    let curl = |auth: Option<&str>| -> String {
        let mut c = Command::new("curl");
        c.args(["-s", "-o"])
            .arg(&got)
            .args(["-w", "%{http_code}", "--cacert"])
            .arg(&rig.tls.0);
        if let Some(t) = auth {
            c.args(["-H", &format!("Authorization: Bearer {t}")]);
        }
        let out = c.arg(&url).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(curl(Some(&token)), "200");
    assert_eq!(std::fs::read(&got).unwrap(), iso_bytes, "the site's ISO");
    assert_eq!(curl(Some(&fleet_token)), "403", "the ISO's own token");
    assert_eq!(curl(None), "401");

    rig.power_off();
    rig.wait_step(&mut run1, "watch");
    rig.api.set(|c| *c = rig.site.ready());
    let status = wait_exit(&mut run1);
    let (stdout, stderr) = (rig.read("run1.stdout"), rig.read("run1.stderr"));
    eprintln!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(status.code(), Some(0), "{stderr}");
    let access = std::fs::read_to_string(rig.base.path().join(".ibi/deploy-access.log")).unwrap();
    let line = format!(
        "GET /site-configuration {} 200 range=- bytes={} ",
        rig.name,
        iso_bytes.len()
    );
    assert!(access.contains(&line), "{line} not in:\n{access}");
    assert!(
        !access.contains(&token) && !stderr.contains(&token),
        "a token is shown"
    );
}

/// Issue 33 item 1: factory done → site phase done → a factory `--redo` booted the host again
/// (recorded as deploy records it: `booted` after the site phase began). The site phase then took
/// the old record as done and touched nothing, for a host holding only the bare seed. Now its old
/// record counts as not started: deploy says why, boots the host with its configuration ISO, and
/// watches (no cluster answers here, so the short watch fails). The BMC is sushy-tools' emulator.
#[test]
fn a_site_phase_older_than_the_factory_boot_is_run_again() {
    let Some(bin) = sushy_emulator(TEST) else {
        return;
    };
    let emu = Emulator::start_with_uuid(&bin, UUIDS[0]);
    let (base, names) = example_fleet_base(&[(&emu, None)]);
    let b = base.path();
    // Its configuration ISO is not built: deploy builds it, and says so (issue 33 item 11).
    let site = &names[0];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let t = now - 3600;
    let record = serde_json::json!({"version": 1, "site": site,
        "bmc": {"address": emu.url, "uuid": UUIDS[0]},
        "phases": {
            "factory": {"state": "done", "step": "eject", "started": t + 1000, "updated": t + 1300,
                        "finished": t + 1300, "booted": t + 1010},
            "site": {"state": "done", "step": "eject", "started": t + 400, "updated": t + 900,
                     "finished": t + 900, "booted": t + 410}}});
    std::fs::create_dir_all(b.join(".ibi/deploy")).unwrap();
    std::fs::write(
        b.join(format!(".ibi/deploy/{site}.json")),
        record.to_string(),
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let tls = test_tls(work.path());
    let inventory = b.join("sites.yaml");
    let run = DeployRun {
        base: b,
        inventory: &inventory,
        phase: "site",
        port: free_port(),
        tls: &tls,
        out: work.path(),
    };
    let mut deploy = spawn_deploy(
        &run,
        "run",
        &[
            "--watch-timeout",
            "3",
            "--poll",
            "1",
            "--bmc-timeout",
            "120",
        ],
    );
    let status = wait_exit(&mut deploy);
    let read = |s: &str| std::fs::read_to_string(work.path().join(s)).unwrap();
    let (out, err) = (read("run.stdout"), read("run.stderr"));
    eprintln!("stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains(&format!(
            "site {site}: its site phase recorded earlier no longer counts: the host was installed again (factory phase booted at "
        )),
        "{err}"
    );
    assert!(!err.contains("done by an earlier run"), "{err}");
    assert!(
        err.contains(&format!(
            "deploy: building the configuration ISO of 1 site(s) that have none ({site}) under {}",
            b.join("sites").display()
        )) && err.contains("deploy: configuration ISOs built in "),
        "{err}"
    );
    let log = requests(&emu);
    assert!(
        log.contains("InsertMedia") && log.contains("ComputerSystem.Reset"),
        "the host was not booted with its configuration ISO: {log}"
    );
    assert_eq!(
        status.code(),
        Some(1),
        "no cluster answers: the watch fails"
    );
}
