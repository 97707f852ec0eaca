//! What the tests of tests/fast/deliver_watch.rs and tests/tools/deliver_watch.rs share: one file
//! of tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common::kubeapi::BuiltSite;
use crate::common::*;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

/// The bound of every wait in these tests (never asserted on: a stuck run fails instead of hanging).
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

/// A site built by `ibi create config-image` from the bundled example, in a directory of its own.
pub(crate) struct Site {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) built: BuiltSite,
}

impl std::ops::Deref for Site {
    type Target = BuiltSite;

    fn deref(&self) -> &BuiltSite {
        &self.built
    }
}

impl Site {
    pub(crate) fn build() -> Site {
        let dir = copy_example();
        assert_ok(&config_image(dir.path(), &[]));
        Site {
            built: BuiltSite::read(dir.path()),
            _dir: dir,
        }
    }

    pub(crate) fn watch(&self, args: &[&str]) -> Output {
        let mut a = vec!["watch", "--dir", self.path().to_str().unwrap()];
        a.extend_from_slice(args);
        ibi(&a, &[])
    }

    /// One look, as JSON: the exit code and the document.
    pub(crate) fn look(&self) -> (Option<i32>, Value) {
        let out = self.watch(&["--timeout", "0", "--json"]);
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "no JSON ({e}): {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (out.status.code(), doc)
    }
}

pub(crate) fn milestone<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["milestones"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["milestone"] == name)
        .unwrap_or_else(|| panic!("no milestone {name}: {doc}"))
}

pub(crate) fn held(doc: &Value, name: &str) -> bool {
    milestone(doc, name)["held"].as_bool().unwrap()
}

pub(crate) fn detail(doc: &Value, name: &str) -> String {
    milestone(doc, name)["detail"].as_str().unwrap().to_string()
}

/// Waits (bounded) for the child to end; kills it if it does not.
pub(crate) fn wait_child(mut child: Child) -> Output {
    let end = Instant::now() + PATIENCE;
    while Instant::now() < end {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    panic!(
        "ibi watch did not end: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---- kubectl, with the same kubeconfig, against the same stand-in ----

pub(crate) struct Kubectl {
    pub(crate) bin: PathBuf,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) cache: tempfile::TempDir,
}

/// A site, and Debian's kubectl with the site's kubeconfig; `None` (the test skips) without kubectl.
pub(crate) fn site_and_kubectl(test: &str) -> Option<(Site, Kubectl)> {
    let bin = debian_kubectl(test)?;
    let site = Site::build();
    let kubectl = Kubectl {
        bin,
        kubeconfig: site.kubeconfig(),
        cache: tempfile::tempdir().unwrap(),
    };
    Some((site, kubectl))
}

impl Kubectl {
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache.path())
            .args(["--request-timeout", "10s"])
            .args(args)
            .output()
            .expect("running kubectl")
    }

    pub(crate) fn ok(&self, args: &[&str]) -> bool {
        self.run(args).status.success()
    }

    /// kubectl's own verdict on each of ibi's judged milestones.
    pub(crate) fn verdicts(&self) -> [(&'static str, bool); 4] {
        let once = "--timeout=0s";
        let cv = "clusterversion/version";
        [
            ("readyz", self.ok(&["get", "--raw", "/readyz"])),
            (
                "configuration",
                self.ok(&[
                    "get",
                    "configmap",
                    "-n",
                    "openshift-config",
                    "ibi-reconfiguration",
                ]),
            ),
            (
                "clusterversion",
                self.ok(&["wait", "--for=condition=Available", cv, once])
                    && self.ok(&["wait", "--for=condition=Progressing=false", cv, once]),
            ),
            (
                "node",
                self.ok(&["wait", "--for=condition=Ready", "node", "--all", once]),
            ),
        ]
    }
}
