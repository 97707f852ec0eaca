//! The two boots of an image-based install, driven through the host's BMC.
//!
//! Factory (`BootFrom::Cd`): the installation ISO as a virtual CD and a **one-time** UEFI override
//! to it; a persistent one would reinstall the host on its next reboot. Site (`BootFrom::Disk`):
//! the configuration ISO as a virtual CD and no CD override (one left by the factory is cleared),
//! so the host boots its disk and post-pivot finds the `cluster-config` device, which it polls for
//! with no time limit: the media stays inserted. Both in the order Ironic uses on every vendor:
//! power off, eject (never trusting `Inserted`), insert, boot override after the insert, power on.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use reqwest::Url;
use tracing::info;

use crate::redfish::system::{self, ENABLED_ONCE, Patience, Power, System, TARGET_CD};
use crate::redfish::vmedia::{self, Slot};
use crate::redfish::{Client, ClientOptions};
use crate::util::secret::Secret;

/// Where the service root is when the user gives only the BMC's address.
const SERVICE_ROOT: &str = "/redfish/v1/";
/// The shortest URL segment scrubbed on its own: `ibi serve`'s tokens are 32 hex digits.
const MIN_TOKEN_CHARS: usize = 16;
/// A floor for the insert call: BMCs that download the image before answering need time.
const MIN_INSERT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootFrom {
    /// The installation ISO: one-time boot from the virtual CD.
    Cd,
    /// The configuration ISO: boot the disk; the CD stays inserted for post-pivot.
    Disk,
}

/// What to do with the host.
#[derive(Debug, Clone)]
pub enum Job {
    Boot {
        /// The image URL: a capability (its path is a token), so it is a secret.
        iso: Secret,
        from: BootFrom,
        /// PEM of the image server's certificate, for the BMC to verify it.
        iso_ca: Option<String>,
    },
    /// Eject every virtual CD and clear a pending CD override.
    Eject,
}

#[derive(Debug, Clone)]
pub struct BootRequest {
    pub bmc: Url,
    pub system_id: Option<String>,
    pub client: ClientOptions,
    pub job: Job,
    /// The bound on the whole job, power waits and the insert included.
    pub timeout: Duration,
    pub patience: Patience,
}

/// What was done, for the command to print.
#[derive(Debug, Default)]
pub struct Report {
    pub bmc: String,
    pub system: String,
    pub media: String,
    pub image: String,
    pub boot: String,
    pub power: String,
    /// The System's `UUID`, lower case, when the BMC shows one: the key its host's reports carry.
    pub uuid: Option<String>,
}

/// A moment of a boot job its caller may need to record before it goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootEvent {
    /// The System was found (before anything is changed): its path, and its `UUID` in lower case
    /// when the BMC shows one.
    Found {
        system: String,
        uuid: Option<String>,
    },
    /// The power-on request is about to be sent: from here on the host may boot.
    PoweringOn,
}

pub fn run(req: &BootRequest) -> Result<Report> {
    run_observed(req, &mut |_| {})
}

/// [`run`], telling `on` of each [`BootEvent`] before it happens.
pub fn run_observed(req: &BootRequest, on: &mut dyn FnMut(BootEvent)) -> Result<Report> {
    let deadline = Instant::now() + req.timeout;
    let mut c = Client::new(&req.bmc, req.client.clone())?;
    if let Job::Boot { iso, .. } = &req.job {
        for s in url_secrets(iso) {
            c.redact(s);
        }
    }
    let start = match req.bmc.path() {
        "" | "/" => SERVICE_ROOT,
        p => p,
    };
    let sys = system::find_system(&mut c, start, req.system_id.as_deref()).map_err(|e| {
        if e.to_string().ends_with("name one") {
            e.context("several systems: pass --system ID")
        } else {
            e.context("finding the system")
        }
    })?;
    let slots = vmedia::find_cd_slots(&mut c, &sys)?;
    let mut report = Report {
        bmc: c.origin().to_string(),
        system: sys.path.clone(),
        uuid: sys.data.uuid.as_ref().map(|u| u.to_ascii_lowercase()),
        ..Report::default()
    };
    on(BootEvent::Found {
        system: report.system.clone(),
        uuid: report.uuid.clone(),
    });
    match &req.job {
        Job::Boot { iso, from, iso_ca } => boot(
            &mut c,
            &sys,
            &slots,
            iso,
            *from,
            iso_ca.as_deref(),
            deadline,
            req,
            &mut report,
            on,
        )?,
        Job::Eject => eject(&mut c, &sys, &slots, &req.patience, &mut report)?,
    }
    c.logout();
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn boot(
    c: &mut Client,
    sys: &System,
    slots: &[Slot],
    iso: &Secret,
    from: BootFrom,
    iso_ca: Option<&str>,
    deadline: Instant,
    req: &BootRequest,
    report: &mut Report,
    on: &mut dyn FnMut(BootEvent),
) -> Result<()> {
    let p = &req.patience;
    info!("powering {} off", sys.path);
    system::reset(c, sys, Power::Off, p)?;
    system::wait_power(c, sys, Power::Off, deadline, p)?;
    for slot in slots {
        vmedia::eject(c, slot)?;
    }
    let slot = insert_somewhere(c, slots, iso, iso_ca, deadline)?;
    report.media = slot.path().to_string();
    report.image = display_url(iso.expose_str());
    // The insert may change the system's ETag and Boot: read it again before the override.
    let sys = system::read_system(c, &sys.path)?;
    report.boot = match from {
        BootFrom::Cd => {
            system::set_boot_override(c, &sys, TARGET_CD, ENABLED_ONCE, p)?;
            "one-time override to the virtual CD (UEFI)".to_string()
        }
        BootFrom::Disk => match system::clear_cd_override(c, &sys, p)? {
            Some(done) => format!("from disk (CD override replaced: {done})"),
            None => "from disk (no CD override was set)".to_string(),
        },
    };
    info!("powering {} on", sys.path);
    on(BootEvent::PoweringOn);
    system::reset(c, &sys, Power::On, p)?;
    system::wait_power(c, &sys, Power::On, deadline, p)?;
    report.power = Power::On.as_str().to_string();
    Ok(())
}

/// Inserts into the first slot that takes the image; a slot answering 400/405 (internal-only
/// slots on some BMCs) passes to the next.
fn insert_somewhere<'a>(
    c: &mut Client,
    slots: &'a [Slot],
    iso: &Secret,
    iso_ca: Option<&str>,
    deadline: Instant,
) -> Result<&'a Slot> {
    let mut first_err = None;
    for slot in slots {
        if let Some(pem) = iso_ca {
            vmedia::trust_image_server(c, slot, pem)?;
        }
        let timeout = deadline
            .saturating_duration_since(Instant::now())
            .max(MIN_INSERT_TIMEOUT);
        info!(
            "inserting {} into {}",
            display_url(iso.expose_str()),
            slot.path()
        );
        match vmedia::insert(c, slot, iso, timeout) {
            Ok(()) => return Ok(slot),
            Err(e) if vmedia::slot_refused(&e) => {
                info!("{e:#}; trying the next slot");
                first_err.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => bail!("no virtual CD to insert into"),
    }
}

fn eject(
    c: &mut Client,
    sys: &System,
    slots: &[Slot],
    p: &Patience,
    report: &mut Report,
) -> Result<()> {
    for slot in slots {
        vmedia::eject(c, slot)?;
    }
    report.media = slots.iter().map(Slot::path).collect::<Vec<_>>().join(", ");
    report.image = "(ejected)".into();
    let sys = system::read_system(c, &sys.path)?;
    report.boot = match system::clear_cd_override(c, &sys, p)? {
        Some(done) => format!("CD override replaced: {done}"),
        None => "no CD override was set".into(),
    };
    report.power = system::power_state(c, &sys)?;
    Ok(())
}

/// The URL as it may be shown: scheme, host, port and the file name, never the token before it.
pub fn display_url(url: &str) -> String {
    match Url::parse(url) {
        Ok(u) => {
            let name = u
                .path_segments()
                .and_then(|mut s| s.next_back())
                .unwrap_or("");
            let host = u.host_str().unwrap_or("?");
            match u.port() {
                Some(p) => format!("{}://{host}:{p}/<redacted>/{name}", u.scheme()),
                None => format!("{}://{host}/<redacted>/{name}", u.scheme()),
            }
        }
        Err(_) => "<redacted>".to_string(),
    }
}

/// The strings of an image URL a BMC might echo: the whole URL and its path.
fn url_secrets(iso: &Secret) -> Vec<Secret> {
    let mut out = vec![iso.clone()];
    if let Ok(u) = Url::parse(iso.expose_str()) {
        if u.path().len() > 1 {
            out.push(Secret::new(u.path()));
        }
        // Only a token-sized segment: scrubbing a short one would mangle ordinary words.
        let first = u.path_segments().and_then(|mut s| s.next());
        if let Some(t) = first.filter(|t| t.len() >= MIN_TOKEN_CHARS) {
            out.push(Secret::new(t));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displayed_urls_keep_the_file_name_and_lose_the_token() {
        let cases = [
            (
                "https://10.0.0.1:8443/0123456789abcdef0123456789abcdef/rhcos-ibi.iso",
                "https://10.0.0.1:8443/<redacted>/rhcos-ibi.iso",
            ),
            (
                "http://files.example/tok/imagebasedconfig.iso",
                "http://files.example/<redacted>/imagebasedconfig.iso",
            ),
            ("not a url", "<redacted>"),
        ];
        for (url, want) in cases {
            assert_eq!(display_url(url), want);
        }
    }

    #[test]
    fn every_echoable_part_of_the_url_is_redacted() {
        let token = "0123456789abcdef0123456789abcdef";
        let url = format!("https://h:1/{token}/a.iso");
        let s = url_secrets(&Secret::new(&url));
        let shown: Vec<&str> = s.iter().map(Secret::expose_str).collect();
        assert_eq!(shown, [url.as_str(), &format!("/{token}/a.iso"), token]);
        let short = url_secrets(&Secret::new("http://x/y/z.iso"));
        assert_eq!(short.len(), 2, "a one-letter segment would scrub every 'y'");
    }
}
