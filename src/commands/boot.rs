//! `boot`: gather the BMC's credentials and trust (never from the command line), run the boot job,
//! print what was done.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::cli::{BootDevice, BootOpts};
use crate::deliver::boot::{self, BootFrom, BootRequest, Job, Ways};
use crate::redfish::system::Patience;
use crate::redfish::{ClientOptions, Credentials, RetryPolicy, Trust};
use crate::util::fs::read_input_file;
use crate::util::secret::Secret;
use crate::util::text::escape_control;

/// The environment variable holding the BMC password when no file is given.
const PASSWORD_ENV: &str = "IBI_BMC_PASSWORD";
/// One request's bound; the insert (during which some BMCs download the image) gets --timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_SMALL_FILE: u64 = 1 << 20;
/// How this command's user gives a BMC user, for the advice a refusal gets.
const CREDENTIAL_WAYS: &str =
    "--bmc-user USER (or IBI_BMC_USER) with --bmc-password-file FILE (or IBI_BMC_PASSWORD)";
const TRUST_WAYS: &str = "--bmc-ca FILE (its CA) or --bmc-insecure";

pub fn run(o: &BootOpts) -> Result<()> {
    if o.bmc.username() != "" || o.bmc.password().is_some() {
        bail!(
            "--bmc must not carry credentials (they would show in ps and logs): use --bmc-user with --bmc-password-file or {PASSWORD_ENV}"
        );
    }
    let job = match (&o.iso, o.eject) {
        (_, true) => Job::Eject,
        (Some(iso), false) => Job::Boot {
            iso: iso.clone(),
            from: match o.boot {
                BootDevice::Cd => BootFrom::Cd,
                BootDevice::Disk => BootFrom::Disk,
            },
            iso_ca: o.iso_ca.as_deref().map(read_pem).transpose()?,
        },
        (None, false) if o.boot == BootDevice::Disk => Job::BootDisk,
        (None, false) => {
            bail!("--iso URL (or IBI_ISO_URL) is needed unless --eject or --boot disk")
        }
    };
    let req = BootRequest {
        bmc: o.bmc.clone(),
        system_id: o.system.clone(),
        client: ClientOptions {
            trust: trust(o)?,
            credentials: credentials(o)?,
            request_timeout: REQUEST_TIMEOUT,
            retry: RetryPolicy::default(),
            label: None,
        },
        job,
        timeout: Duration::from_secs(o.timeout),
        patience: Patience::default(),
    };
    let ca = o
        .bmc_ca
        .as_ref()
        .map(|f| format!("--bmc-ca {}", f.display()));
    let ways = Ways {
        credentials: CREDENTIAL_WAYS,
        trust: TRUST_WAYS,
        ca_given: ca.as_deref(),
    };
    // Everything here may carry a BMC's words (paths it links, its error text): printed with every
    // control character escaped, newlines too, as deploy prints them, so a BMC cannot print a line
    // of its own.
    let report = boot::run(&req)
        .map_err(|e| boot::advise(e, &ways))
        .map_err(|e| anyhow::anyhow!("{}", escape_control(&format!("{e:#}"))))?;
    for (key, value) in [
        ("bmc", &report.bmc),
        ("system", &report.system),
        ("media", &report.media),
        ("image", &report.image),
        ("boot", &report.boot),
        ("power", &report.power),
    ] {
        println!("{key:<7} {}", escape_control(value));
    }
    Ok(())
}

fn trust(o: &BootOpts) -> Result<Trust> {
    Ok(match (&o.bmc_ca, o.bmc_insecure) {
        (Some(ca), _) => Trust::Ca(
            read_input_file(ca, MAX_SMALL_FILE)
                .with_context(|| format!("reading --bmc-ca {}", ca.display()))?,
        ),
        (None, true) => Trust::Insecure,
        (None, false) => Trust::System,
    })
}

fn credentials(o: &BootOpts) -> Result<Option<Credentials>> {
    let password = match &o.bmc_password_file {
        Some(f) => Some(read_password(f)?),
        None => std::env::var(PASSWORD_ENV).ok().map(Secret::new),
    };
    match (&o.bmc_user, password) {
        (Some(user), Some(password)) => Ok(Some(Credentials {
            user: user.clone(),
            password,
        })),
        (None, None) => Ok(None),
        (Some(_), None) => {
            bail!("--bmc-user needs a password: --bmc-password-file FILE or {PASSWORD_ENV}")
        }
        (None, Some(_)) => bail!("a BMC password was given without --bmc-user (or IBI_BMC_USER)"),
    }
}

/// The file's first line. Errors name the file, never a byte of its content.
fn read_password(path: &Path) -> Result<Secret> {
    let bytes = read_input_file(path, MAX_SMALL_FILE)
        .with_context(|| format!("reading --bmc-password-file {}", path.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("--bmc-password-file {} is not UTF-8", path.display()))?;
    let line = text.lines().next().unwrap_or("");
    if line.is_empty() {
        bail!("--bmc-password-file {} is empty", path.display());
    }
    Ok(Secret::new(line))
}

fn read_pem(path: &Path) -> Result<String> {
    let bytes = read_input_file(path, MAX_SMALL_FILE)
        .with_context(|| format!("reading --iso-ca {}", path.display()))?;
    let pem = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("--iso-ca {} is not PEM", path.display()))?;
    openssl::x509::X509::from_pem(pem.as_bytes())
        .with_context(|| format!("--iso-ca {} holds no PEM certificate", path.display()))?;
    Ok(pem)
}
