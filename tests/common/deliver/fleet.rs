//! A factory fleet for deploy tests: BASE with the example inputs and an installation ISO built by
//! `ibi create image` (synthetic base ISO) whose `statusURL`/`statusCA` name deploy's server on a
//! fixed port with a test CA; one sushy-tools emulator per site (fake driver, its own System UUID,
//! Basic auth, TLS) standing for each host's BMC; the inventory naming them. The hosts are played by
//! the tests as a booted live ISO would run them: from the ISO their BMC downloaded, with the lca
//! report units' script or the agent's reporter.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::emulator::{Emulator, USER};
use super::host::{Host, iso_ignition, ok, test_tls};
use super::{example_install, free_port, ibi_env, stop_child, synthetic_base};

/// The `ibi` whose deploy runs: this build's, or `IBI_DEPLOY_TEST_BINARY` (to show a test failing
/// on an older build).
pub fn deploy_binary() -> std::ffi::OsString {
    std::env::var_os("IBI_DEPLOY_TEST_BINARY").unwrap_or_else(|| env!("CARGO_BIN_EXE_ibi").into())
}

/// Every wait of a test on a deploy.
pub const PHASE_WAIT: Duration = Duration::from_secs(300);

pub struct Fleet {
    pub base: tempfile::TempDir,
    pub work: tempfile::TempDir,
    /// The test CA, the server's certificate and key (deploy's `--tls-cert`/`--tls-key`).
    pub tls: (PathBuf, PathBuf, PathBuf),
    /// deploy's port, which the ISO's `statusURL` names.
    pub port: u16,
    pub emulators: Vec<Emulator>,
    /// The fleet installation ISO's Ignition config.
    pub ign: Value,
    pub sites: Vec<String>,
    pub uuids: Vec<String>,
    /// Extra arguments of every deploy run (timeouts).
    pub args: Vec<String>,
}

impl Fleet {
    pub fn base(&self) -> &Path {
        self.base.path()
    }

    pub fn inventory(&self) -> PathBuf {
        self.work.path().join("sites.yaml")
    }

    /// `ibi deploy --phase factory --parallel 2`, its output in files under `work`.
    pub fn spawn(&self, run: &str) -> Child {
        self.spawn_with(run, &[])
    }

    pub fn spawn_with(&self, run: &str, extra: &[&str]) -> Child {
        self.spawn_env(run, extra, &[])
    }

    /// [`Fleet::spawn_with`], with these variables in deploy's environment.
    pub fn spawn_env(&self, run: &str, extra: &[&str], envs: &[(&str, &str)]) -> Child {
        let mut args: Vec<&str> = vec!["--parallel", "2", "--poll", "1"];
        args.extend(self.args.iter().map(String::as_str));
        args.extend(extra);
        spawn_deploy_env(
            &DeployRun {
                base: self.base(),
                inventory: &self.inventory(),
                phase: "factory",
                port: self.port,
                tls: &self.tls,
                out: self.work.path(),
            },
            run,
            &args,
            envs,
        )
    }

    pub fn output(&self, run: &str, stream: &str) -> String {
        std::fs::read_to_string(self.work.path().join(format!("{run}.{stream}")))
            .unwrap_or_default()
    }

    /// The site's record of its factory phase: (state, step), or None before deploy wrote one.
    pub fn phase(&self, site: &str) -> Option<(String, String)> {
        let v = self.record(site)?;
        let p = &v["phases"]["factory"];
        Some((p["state"].as_str()?.into(), p["step"].as_str()?.into()))
    }

    pub fn record(&self, site: &str) -> Option<Value> {
        let text = std::fs::read(self.base().join(format!(".ibi/deploy/{site}.json"))).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// The host of site `i` as it booted: from the ISO its BMC downloaded (its own variant, with its
    /// own report token), read by coreos-installer.
    pub fn host(&self, i: usize, journal: &str) -> Host {
        let iso = self.emulators[i]
            .downloaded("rhcos-ibi.iso")
            .unwrap_or_else(|| panic!("site {}'s BMC holds no ISO", self.sites[i]));
        Host::new(
            &iso_ignition(&iso),
            &self.uuids[i],
            &format!("sno-{}", self.sites[i]),
            journal,
        )
    }
}

/// BASE with the example inputs, `statusURL` on a free port of 127.0.0.1 and `statusCA` the test CA,
/// its installation ISO built (synthetic base ISO); `work` for the inventory and the runs' output.
pub struct FactoryBase {
    pub base: tempfile::TempDir,
    pub work: tempfile::TempDir,
    pub tls: (PathBuf, PathBuf, PathBuf),
    pub port: u16,
    /// The installation ISO's Ignition config.
    pub ign: Value,
}

pub fn factory_base() -> FactoryBase {
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
    FactoryBase {
        base,
        work,
        tls,
        port,
        ign,
    }
}

/// One inventory entry whose BMC is `emu` (and `system`, for an emulator with many).
pub fn inventory_entry(site: &str, emu: &Emulator, system: Option<&str>) -> String {
    let system = system.map_or(String::new(), |s| format!("      system: {s}\n"));
    format!(
        "  - name: {site}\n    hostname: sno-{site}\n    bmc:\n      address: {}\n      user: {USER}\n      passwordFile: {}\n      caFile: {}\n{system}",
        emu.url,
        emu.password_file.display(),
        emu.cert.display()
    )
}

/// A [`factory_base`]; one emulator per site (`(name, System UUID)`); the inventory naming them;
/// `args` added to every deploy run.
pub fn fleet(bin: &Path, sites: &[(&str, &str)], args: &[&str]) -> Fleet {
    let FactoryBase {
        base,
        work,
        tls,
        port,
        ign,
    } = factory_base();
    let emulators: Vec<Emulator> = sites
        .iter()
        .map(|(_, u)| Emulator::start_with_uuid(bin, u))
        .collect();
    let mut inv = String::from("sites:\n");
    for ((site, _), emu) in sites.iter().zip(&emulators) {
        inv.push_str(&inventory_entry(site, emu, None));
    }
    std::fs::write(work.path().join("sites.yaml"), inv).unwrap();
    Fleet {
        base,
        work,
        tls,
        port,
        emulators,
        ign,
        sites: sites.iter().map(|(s, _)| s.to_string()).collect(),
        uuids: sites.iter().map(|(_, u)| u.to_string()).collect(),
        args: args.iter().map(|a| a.to_string()).collect(),
    }
}

/// The journal a failed install leaves.
pub const FAILED_JOURNAL: &str = "2026-11-24T10:00:00+0000 host lca-cli[1]: pulling the seed\n\
     2026-11-24T10:00:05+0000 host lca-cli[1]: error: failed to pull the seed image\n";

pub fn report_done_lca(f: &Fleet, i: usize) {
    let h = f.host(i, "");
    ok(&h.lca_report("running", &[]), "ibi-report.sh running");
    ok(&h.lca_report("done", &[]), "ibi-report.sh done");
}

pub fn report_failed_lca(f: &Fleet, i: usize) {
    lca_fails(&f.host(i, FAILED_JOURNAL));
}

/// The lca units of a host whose install failed: running, then the failure unit's report.
pub fn lca_fails(h: &Host) {
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
pub fn report_done_agent(f: &Fleet, i: usize) {
    assert_eq!(
        f.host(i, "").agent_reports_three_steps(),
        ibi::agent::report::Delivery::Delivered,
        "site {}'s reports; deploy's access log:\n{}",
        f.sites[i],
        std::fs::read_to_string(f.base().join(".ibi/deploy-access.log")).unwrap_or_default()
    );
}

#[cfg(not(feature = "agent"))]
pub fn report_done_agent(f: &Fleet, i: usize) {
    crate::common::missing(
        "deploy fleet",
        "hostAgent: ibi's reporter needs the agent feature; the host reports as lca",
    );
    report_done_lca(f, i);
}

/// What a host does once booted: report through the lca units or the agent's reporter.
pub type Play = fn(&Fleet, usize);

/// Plays the hosts of `plays` (site index, what it does) once each when its site waits for its
/// report, until `until` holds; panics if deploy exits first or the wait is over.
pub fn play_until(
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
                .phase(&f.sites[*i])
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
            f.sites.iter().map(|s| f.phase(s)).collect::<Vec<_>>(),
            f.output(run, "stderr")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub fn state_is(f: &Fleet, site: &str, state: &str, step: &str) -> bool {
    f.phase(site)
        .is_some_and(|(st, sp)| st == state && (step.is_empty() || sp == step))
}

/// The emulator's request log (werkzeug's lines on its stderr).
pub fn requests(emu: &Emulator) -> String {
    emu.log()
}

/// Where and how a test runs `ibi deploy`: on 127.0.0.1 with the test's TLS.
pub struct DeployRun<'a> {
    pub base: &'a Path,
    pub inventory: &'a Path,
    pub phase: &'a str,
    pub port: u16,
    /// The test CA, the server's certificate and key.
    pub tls: &'a (PathBuf, PathBuf, PathBuf),
    /// Where `<run>.stdout` and `<run>.stderr` go.
    pub out: &'a Path,
}

/// `ibi deploy --dir BASE --sites INVENTORY --phase PHASE --listen 127.0.0.1:PORT --tls-cert …
/// --tls-key … ARGS`, its output into `out/<run>.stdout` and `.stderr`.
pub fn spawn_deploy(d: &DeployRun, run: &str, args: &[&str]) -> Child {
    spawn_deploy_env(d, run, args, &[])
}

/// [`spawn_deploy`] with these variables in deploy's environment.
pub fn spawn_deploy_env(d: &DeployRun, run: &str, args: &[&str], envs: &[(&str, &str)]) -> Child {
    let out = |s: &str| std::fs::File::create(d.out.join(format!("{run}.{s}"))).unwrap();
    Command::new(deploy_binary())
        .args(["deploy", "--dir"])
        .arg(d.base)
        .arg("--sites")
        .arg(d.inventory)
        .args(["--phase", d.phase])
        .args(["--listen", &format!("127.0.0.1:{}", d.port)])
        .arg("--tls-cert")
        .arg(&d.tls.1)
        .arg("--tls-key")
        .arg(&d.tls.2)
        .args(args)
        .env_remove("RUST_LOG")
        .envs(envs.iter().copied())
        .stdout(Stdio::from(out("stdout")))
        .stderr(Stdio::from(out("stderr")))
        .spawn()
        .expect("starting ibi deploy")
}

pub fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    wait_exit_within(child, PHASE_WAIT)
}

/// `child`'s exit, stopping it once `wait` is over.
pub fn wait_exit_within(child: &mut Child, wait: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + wait;
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

/// A BASE holding the example fleet's inputs (`seed-fixtures/example-fleet`) and an inventory of its
/// first `bmcs.len()` sites, each site's `bmc:` the emulator given (and its System, when given);
/// the sites' names.
pub fn example_fleet_base(bmcs: &[(&Emulator, Option<&str>)]) -> (tempfile::TempDir, Vec<String>) {
    let base = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("seed-fixtures/example-fleet");
    for f in ["install-config.yaml", "image-based-config.yaml"] {
        std::fs::copy(src.join(f), base.path().join(f)).unwrap();
    }
    crate::common::copy_tree(
        &src.join("extra-manifests"),
        &base.path().join("extra-manifests"),
    );
    let inv: serde_yaml_ng::Value =
        serde_yaml_ng::from_slice(&std::fs::read(src.join("sites.yaml")).unwrap()).unwrap();
    let mut sites: Vec<serde_yaml_ng::Value> =
        inv["sites"].as_sequence().unwrap()[..bmcs.len()].to_vec();
    for (site, (emu, system)) in sites.iter_mut().zip(bmcs) {
        let system = system.map_or(String::new(), |s| format!("system: {s}\n"));
        let bmc = format!(
            "address: {}\nuser: {USER}\npasswordFile: {}\ncaFile: {}\n{system}",
            emu.url,
            emu.password_file.display(),
            emu.cert.display()
        );
        site.as_mapping_mut().unwrap().insert(
            "bmc".into(),
            serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&bmc).unwrap(),
        );
    }
    let names = sites
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    let mut doc = serde_yaml_ng::Mapping::new();
    doc.insert("sites".into(), serde_yaml_ng::Value::Sequence(sites));
    std::fs::write(
        base.path().join("sites.yaml"),
        serde_yaml_ng::to_string(&doc).unwrap(),
    )
    .unwrap();
    (base, names)
}

/// `ibi create config-image --dir BASE --sites BASE/sites.yaml`, which must succeed: every site of
/// an [`example_fleet_base`] built.
pub fn build_sites(base: &Path) {
    let inventory = base.join("sites.yaml");
    let args = [
        "create",
        "config-image",
        "--dir",
        base.to_str().unwrap(),
        "--sites",
        inventory.to_str().unwrap(),
    ];
    ok(&ibi_env(&args, &[]), "ibi create config-image --sites");
}
