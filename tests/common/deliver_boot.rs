//! What the tests of tests/fast/deliver_boot.rs and tests/tools/deliver_boot.rs share: one file of
//! tests, split by what each test needs (docs/architecture.md, "Tests").

use crate::common::deliver::emulator::{self, Emulator};
use crate::common::deliver::*;
use ibi::deliver::boot::{BootRequest, Job};
use ibi::redfish::system::Patience;
use ibi::redfish::{ClientOptions, Credentials, RetryPolicy, Trust};
use ibi::util::secret::Secret;
use std::time::Duration;

/// A directory holding both ISOs of an install: random bytes stand in for them (the BMC only
/// downloads them).
pub(crate) fn images() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    write_random(&d.path().join("rhcos-ibi.iso"), 3 << 20, 1);
    write_random(&d.path().join("imagebasedconfig.iso"), 1 << 20, 2);
    d
}

pub(crate) fn boot(emu: &Emulator, extra: &[&str], iso: Option<&str>) -> std::process::Output {
    boot_as(emu, &emu.password_file, true, extra, iso)
}

/// `ibi boot` against the emulator with this password file, trusting its certificate or not.
pub(crate) fn boot_as(
    emu: &Emulator,
    password: &std::path::Path,
    trust: bool,
    extra: &[&str],
    iso: Option<&str>,
) -> std::process::Output {
    boot_at(&emu.url, emu, password, trust, extra, iso)
}

/// As [`boot_as`], with `--bmc bmc` (a proxy in front of the emulator).
pub(crate) fn boot_at(
    bmc: &str,
    emu: &Emulator,
    password: &std::path::Path,
    trust: bool,
    extra: &[&str],
    iso: Option<&str>,
) -> std::process::Output {
    let ca = emu.cert.to_str().expect("utf-8");
    let mut args = vec![
        "boot",
        "--bmc",
        bmc,
        "--bmc-user",
        emulator::USER,
        "--bmc-password-file",
        password.to_str().expect("utf-8"),
        "--timeout",
        "120",
    ];
    if trust {
        args.extend(["--bmc-ca", ca]);
    }
    args.extend_from_slice(extra);
    let envs: Vec<(&str, &str)> = iso.map(|u| ("IBI_ISO_URL", u)).into_iter().collect();
    ibi_env(&args, &envs)
}

pub(crate) fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub(crate) fn assert_success(o: &std::process::Output, emu_log: &str) {
    assert!(
        o.status.success(),
        "ibi boot failed: {}\nemulator: {emu_log}",
        text(o)
    );
}

/// A boot request for the emulator's one system, as `ibi deploy` builds it.
pub(crate) fn request(emu: &Emulator, job: Job) -> BootRequest {
    BootRequest {
        bmc: emu.url.parse().expect("url"),
        system_id: None,
        client: ClientOptions {
            trust: Trust::Ca(std::fs::read(&emu.cert).expect("cert")),
            credentials: Some(Credentials {
                user: emulator::USER.into(),
                password: Secret::new(emulator::PASSWORD),
            }),
            request_timeout: Duration::from_secs(60),
            retry: RetryPolicy::default(),
            label: None,
        },
        job,
        timeout: Duration::from_secs(120),
        patience: Patience::default(),
    }
}

/// How many power requests the emulator has answered.
pub(crate) fn resets(emu: &Emulator) -> usize {
    emu.requests()
        .iter()
        .filter(|r| r.starts_with("POST ") && r.ends_with("/Actions/ComputerSystem.Reset"))
        .count()
}
