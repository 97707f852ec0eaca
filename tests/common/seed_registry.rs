//! What the tests of tests/fast/seed_registry.rs and tests/tools/seed_registry.rs share: one file
//! of tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common::registry::{TestRegistry, make_seed};
use ibi::seed::registry::RegistryOptions;
use ibi::seed::{SeedCheck, SeedExpectations, SeedInfo, check_seed, inspect_seed_text};
use std::io::Write;
use std::sync::{Arc, Mutex};

pub(crate) const TAG: &str = "4.16.0";

pub(crate) fn insecure(reg: &TestRegistry) -> RegistryOptions {
    RegistryOptions {
        insecure_registries: vec![reg.addr.clone()],
        ..Default::default()
    }
}

pub(crate) fn expect(version: &str, arch: &str, label: &str) -> SeedExpectations {
    SeedExpectations {
        seed_version: version.into(),
        architecture: arch.into(),
        extra_partition_label: Some(label.into()),
    }
}

pub(crate) fn good() -> SeedExpectations {
    expect(TAG, "amd64", "var-lib-containers")
}

pub(crate) fn inspect(reference: &str, opts: &RegistryOptions) -> SeedInfo {
    inspect_seed_text(reference, "amd64", opts).unwrap_or_else(|e| panic!("{reference}: {e:#}"))
}

/// Pushes a variant of the seed and returns the only finding of the checks against `want`.
pub(crate) fn only_finding(
    test: &str,
    vars: &[(&str, &str)],
    want: &SeedExpectations,
) -> Option<(SeedCheck, String)> {
    let reg = TestRegistry::start(test)?;
    let seed = make_seed(vars);
    let reference = reg.push(&seed.path().join("seed"), TAG, "ibi/seed");
    let findings = check_seed(&inspect(&reference, &insecure(&reg)), want);
    assert_eq!(findings.len(), 1, "{findings:?}");
    Some((findings[0].check, findings[0].message.clone()))
}

/// Collects log lines so the test can prove no secret reaches them.
#[derive(Clone, Default)]
pub(crate) struct LogBuffer(pub(crate) Arc<Mutex<Vec<u8>>>);

impl Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
