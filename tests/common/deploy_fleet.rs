//! What the tests of tests/fast/deploy_fleet.rs and tests/tools/deploy_fleet.rs share: one file of
//! tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common::deliver::emulator::{Emulator, free_port};
use crate::common::deliver::fleet::{
    DeployRun, PHASE_WAIT, build_sites, example_fleet_base, spawn_deploy,
};
use crate::common::deliver::host::{ok, test_tls};
use crate::common::deliver::{example_install, ibi_env, synthetic_base};
use crate::common::kubeapi::{BuiltSite, StandIn};
use serde_json::Value;
use std::time::{Duration, Instant};

pub(crate) const TEST: &str = "deploy_fleet";
/// One System UUID per emulator, as four real hosts have.
pub(crate) const UUIDS: [&str; 4] = [
    "a1a1a1a1-0000-4000-8000-00000000000a",
    "b2b2b2b2-0000-4000-8000-00000000000b",
    "c3c3c3c3-0000-4000-8000-00000000000c",
    "d4d4d4d4-0000-4000-8000-00000000000d",
];
pub(crate) const SITES: [&str; 4] = ["a", "b", "c", "d"];
/// Short, so the silent host's timeout path ends the test soon.
pub(crate) const REPORT_TIMEOUT: &str = "45";

/// One site of the example fleet whose BMC is an emulator (fake driver), BASE holding the fleet's
/// installation ISO (the example install with `config(port, ca)` appended, built from the synthetic
/// base ISO) and the site built by `create config-image --sites` (after `prepare(BASE)`), its
/// kubeconfig pointed at a stand-in for its kube-apiserver in the seed's state; deploy's TLS and port.
pub(crate) struct OneShotRig {
    pub(crate) emu: Emulator,
    pub(crate) base: tempfile::TempDir,
    pub(crate) inventory: std::path::PathBuf,
    pub(crate) name: String,
    pub(crate) site_dir: std::path::PathBuf,
    pub(crate) site: BuiltSite,
    pub(crate) api: StandIn,
    pub(crate) work: tempfile::TempDir,
    pub(crate) tls: (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf),
    pub(crate) port: u16,
}

impl OneShotRig {
    pub(crate) fn new(
        bin: &std::path::Path,
        config: impl Fn(&OneShotInputs) -> String,
        prepare: impl FnOnce(&std::path::Path),
    ) -> OneShotRig {
        let emu = Emulator::start_with_uuid(bin, UUIDS[0]);
        let (base, names) = example_fleet_base(&[(&emu, None)]);
        let b = base.path();
        let work = tempfile::tempdir().unwrap();
        let tls = test_tls(work.path());
        let port = free_port();
        example_install(b);
        let cfg = b.join("image-based-installation-config.yaml");
        let extra = config(&OneShotInputs {
            port,
            ca: tls.0.clone(),
        });
        let text = std::fs::read_to_string(&cfg).unwrap() + &extra;
        std::fs::write(&cfg, text).unwrap();
        prepare(b);
        let dir = b.to_str().unwrap();
        let base_iso = synthetic_base();
        let inventory = b.join("sites.yaml");
        let base_iso = base_iso.to_str().unwrap();
        let args = ["create", "image", "--dir", dir, "--base-iso", base_iso];
        ok(&ibi_env(&args, &[]), "ibi create image");
        build_sites(b);
        let name = names[0].clone();
        let site_dir = b.join("sites").join(&name);
        let site = BuiltSite::read(&site_dir);
        let api = StandIn::start(&site.cluster_tls(), site.seed_state());
        site.point_at(&api.url());
        OneShotRig {
            emu,
            base,
            inventory,
            name,
            site_dir,
            site,
            api,
            work,
            tls,
            port,
        }
    }

    pub(crate) fn dir(&self) -> &str {
        self.base.path().to_str().unwrap()
    }

    pub(crate) fn spawn(&self, phase: &str, run: &str) -> std::process::Child {
        spawn_deploy(
            &DeployRun {
                base: self.base.path(),
                inventory: &self.inventory,
                phase,
                port: self.port,
                tls: &self.tls,
                out: self.work.path(),
            },
            run,
            &[
                "--poll",
                "1",
                "--report-timeout",
                "120",
                "--watch-timeout",
                "120",
                "--bmc-timeout",
                "120",
            ],
        )
    }

    pub(crate) fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.work.path().join(file)).unwrap_or_default()
    }

    pub(crate) fn record(&self) -> Option<Value> {
        let path = self
            .base
            .path()
            .join(format!(".ibi/deploy/{}.json", self.name));
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }

    /// Waits for the site's one-shot record to reach `want`, deploy still running.
    pub(crate) fn wait_step(&self, deploy: &mut std::process::Child, want: &str) {
        let step = || {
            self.record()
                .and_then(|r| r["phases"]["oneshot"]["step"].as_str().map(String::from))
        };
        let deadline = Instant::now() + PHASE_WAIT;
        while step().as_deref() != Some(want) {
            assert!(
                Instant::now() < deadline,
                "site {} never reached {want}: {}",
                self.name,
                self.read("run1.stderr")
            );
            assert!(
                deploy.try_wait().unwrap().is_none(),
                "deploy ended early: {}",
                self.read("run1.stderr")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The emulator's system powered off, as an installed host with `shutdown: true` does.
    pub(crate) fn power_off(&self) {
        let reset = format!(
            "/redfish/v1/Systems/{}/Actions/ComputerSystem.Reset",
            self.emu.uuid
        );
        assert!(
            self.emu
                .post(&reset, &serde_json::json!({"ResetType": "ForceOff"}))
        );
    }
}

/// What a one-shot rig's installation config may name: deploy's port and the test CA.
pub(crate) struct OneShotInputs {
    pub(crate) port: u16,
    pub(crate) ca: std::path::PathBuf,
}

/// Every file below `dir`.
pub(crate) fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}
