//! The two boots of an image-based install, driven through the host's BMC, and a look that
//! changes nothing.
//!
//! Factory (`BootFrom::Cd`): the installation ISO as a virtual CD and a **one-time** UEFI override
//! to it; a persistent one would reinstall the host on its next reboot. Site (`BootFrom::Disk`):
//! the configuration ISO as a virtual CD and no CD override (one left by the factory is cleared),
//! so the host boots its disk and post-pivot finds the `cluster-config` device, which it polls for
//! with no time limit: the media stays inserted. Both in the order Ironic uses on every vendor:
//! power off, eject (never trusting `Inserted`), insert, boot override after the insert, power on.
//! The caller hears each step as it happens ([`BootEvent`]), so it can record "this host may
//! boot" before the power-on is asked for; a failure after the power-off says where the power
//! was left ([`PowerLeft`]). `Job::Check` only reads: the system, its UUID and its CD slots.

use std::fmt;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use reqwest::Url;
use tracing::{debug, info};

use crate::redfish::system::{self, Patience, Power, System};
use crate::redfish::vmedia::{self, Slot};
use crate::redfish::{
    BootTarget, Client, ClientOptions, OverrideEnabled, PowerState, RedfishError,
};
use crate::util::secret::Secret;
use crate::util::text::{clip, escape_control};

/// Where the service root is when the user gives only the BMC's address.
const SERVICE_ROOT: &str = "/redfish/v1/";
/// The shortest URL segment scrubbed on its own: `ibi serve`'s tokens are 32 hex digits.
const MIN_TOKEN_CHARS: usize = 16;
/// A floor for the insert call: BMCs that download the image before answering need time.
const MIN_INSERT_TIMEOUT: Duration = Duration::from_secs(30);
/// The bound on the one look at the power state after a failure.
const POWER_LOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// The most characters of an image URL a BMC shows (as [`display_url`] shows it).
const MAX_BMC_URL: usize = 200;

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
    /// Boot the disk with no media: power off, eject every virtual CD, clear a CD override, power
    /// on (the one-shot install's second boot, and `ibi boot --boot disk` without `--iso`).
    BootDisk,
    /// Only look: log in, find the system and its virtual CD slots, with GETs (and the session
    /// login and logout where the BMC has sessions). Power, media and boot are left alone.
    Check,
}

impl Job {
    /// Where a test may make this job panic (`util::fault`), once the System is found.
    fn fault_point(&self) -> &'static str {
        match self {
            Job::Boot { .. } => "bmc-boot",
            Job::Eject => "bmc-eject",
            Job::BootDisk => "bmc-boot-disk",
            Job::Check => "bmc-check",
        }
    }
}

/// A step of a job, told to the caller as it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootEvent {
    /// The System was found, before anything is changed (every job): its path, and its `UUID` in
    /// lower case when the BMC shows one.
    Found {
        system: String,
        uuid: Option<String>,
    },
    /// The host is off (it was, or it has been powered off and the BMC says so).
    PoweredOff,
    /// The image is in this virtual-media slot.
    Inserted { media: String },
    /// Told just before the power-on is asked for: from here the host may boot the image.
    PoweringOn,
    /// The BMC says the host is on.
    PoweredOn,
}

/// Where a failed boot left the host's power, as read from the BMC after the failure (`state`,
/// `None` when it could not be read), added to the error: the user, and `ibi deploy` by
/// downcasting, learn whether the host may be running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerLeft {
    /// The BMC's `PowerState` after the failure (shown clipped and escaped).
    pub state: Option<PowerState>,
    /// How far the boot got.
    pub stage: Stage,
}

/// How far a boot got with the power.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The power-off was asked for, or not yet confirmed.
    PoweringOff,
    /// The host was seen off.
    Off,
    /// The power-on was asked for.
    PoweringOn,
}

impl fmt::Display for PowerLeft {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.state.as_ref(), self.stage) {
            (Some(PowerState::Off), _) => f.write_str("the host was left powered off"),
            (Some(PowerState::On), _) => f.write_str("the host was left powered on"),
            (Some(s), _) => write!(f, "the host was left in power state {s}"),
            (None, Stage::PoweringOff) => {
                f.write_str("the host's power state could not be read: it may be on or off")
            }
            (None, Stage::Off) => f.write_str(
                "the host was left powered off (so it was last seen; its power state could not be read again)",
            ),
            (None, Stage::PoweringOn) => f.write_str(
                "the host may have been powered on (its power state could not be read)",
            ),
        }
    }
}

/// How the user of a command gives a BMC's user and CA: named in the advice [`advise`] adds.
#[derive(Debug, Clone, Copy)]
pub struct Ways<'a> {
    /// How to give a user and password, e.g. `--bmc-user USER (or IBI_BMC_USER) with …`.
    pub credentials: &'a str,
    /// How to give a CA or skip the check, e.g. `--bmc-ca FILE (its CA) or --bmc-insecure`.
    pub trust: &'a str,
    /// Where the CA in use was given, e.g. `--bmc-ca /etc/ibi/bmc-ca.pem`; `None`: "the CA given".
    pub ca_given: Option<&'a str>,
}

/// Adds to a BMC error what the user can do about it, in the words of the command they ran:
/// give a user when none was given, a CA that signed the BMC's certificate when the one given
/// did not verify it, a CA (or `insecure`) when the system's trust store did not.
pub fn advise(e: anyhow::Error, ways: &Ways) -> anyhow::Error {
    let advice = match e.downcast_ref::<RedfishError>() {
        Some(RedfishError::Unauthorized {
            user_given: false, ..
        }) => format!("the BMC wants a user: give {}", ways.credentials),
        Some(RedfishError::Tls { ca_given: true, .. }) => format!(
            "{} did not verify the BMC's certificate: give the CA that signed it",
            ways.ca_given.unwrap_or("the CA given")
        ),
        Some(RedfishError::Tls { .. }) => {
            format!("the BMC's certificate is not trusted: pass {}", ways.trust)
        }
        _ => return e,
    };
    e.context(advice)
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

/// What was done, for the command to print; for `Job::Check`, what is there (every CD slot, the
/// image in the first that holds one, the boot override, the power state).
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

/// Runs the job; see [`run_observed`].
pub fn run(req: &BootRequest) -> Result<Report> {
    run_observed(req, &mut |_| Ok(()))
}

/// Runs the job with one client (one kept-alive connection to the BMC), telling `on` each step
/// as it happens: `Found` before anything is changed, `PoweringOn` before the power-on is asked
/// for. An error from `on` stops the job there: a caller that could not record that the host is
/// about to boot keeps it from booting.
pub fn run_observed(
    req: &BootRequest,
    on: &mut dyn FnMut(BootEvent) -> Result<()>,
) -> Result<Report> {
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
    })?;
    crate::util::fault::point(req.job.fault_point(), &report.bmc);
    match &req.job {
        Job::Eject => eject(&mut c, &sys, &slots, &req.patience, &mut report)?,
        Job::Boot { .. } | Job::BootDisk => {
            let image = match &req.job {
                Job::Boot { iso, from, iso_ca } => Some(Image {
                    url: iso,
                    from: *from,
                    ca: iso_ca.as_deref(),
                }),
                _ => None,
            };
            let steps = Steps {
                sys: &sys,
                slots: &slots,
                deadline,
                patience: &req.patience,
            };
            let mut stage = Stage::PoweringOff;
            boot(&mut c, &steps, image.as_ref(), &mut report, &mut stage, on)
                .map_err(|e| e.context(power_left(&mut c, &sys, stage)))?
        }
        Job::Check => look(&sys, &slots, &mut report),
    }
    let (connections, requests) = c.usage();
    debug!(bmc = %report.bmc, requests, connections, "BMC job done");
    c.logout();
    Ok(report)
}

/// The image of a boot and how the host boots with it.
struct Image<'a> {
    url: &'a Secret,
    from: BootFrom,
    ca: Option<&'a str>,
}

/// What every step of a boot works on.
struct Steps<'a> {
    sys: &'a System,
    slots: &'a [Slot],
    deadline: Instant,
    patience: &'a Patience,
}

/// The boot itself, with `image` inserted (or, `None`, the disk with every CD ejected); `stage`
/// follows the power, for the error a failure gets.
fn boot(
    c: &mut Client,
    s: &Steps,
    image: Option<&Image>,
    report: &mut Report,
    stage: &mut Stage,
    on: &mut dyn FnMut(BootEvent) -> Result<()>,
) -> Result<()> {
    let (sys, p) = (s.sys, s.patience);
    info!("powering {} off", sys.path);
    system::reset(c, sys, Power::Off, p)?;
    system::wait_power(c, sys, Power::Off, s.deadline, p)?;
    *stage = Stage::Off;
    on(BootEvent::PoweredOff)?;
    for slot in s.slots {
        vmedia::eject(c, slot)?;
    }
    if let Some(image) = image {
        let slot = insert_somewhere(c, s.slots, image.url, image.ca, s.deadline)?;
        report.media = slot.path().to_string();
        report.image = display_url(image.url.expose_str());
        on(BootEvent::Inserted {
            media: report.media.clone(),
        })?;
    } else {
        report.media = s
            .slots
            .iter()
            .map(Slot::path)
            .collect::<Vec<_>>()
            .join(", ");
        report.image = "(ejected)".into();
    }
    // The insert may change the system's ETag and Boot: read it again before the override.
    let sys = system::read_system(c, &sys.path)?;
    let from = match image {
        Some(i) => i.from,
        None => BootFrom::Disk,
    };
    let media = if image.is_some() { "" } else { ", no media" };
    report.boot = match from {
        BootFrom::Cd => {
            system::set_boot_override(c, &sys, BootTarget::Cd, OverrideEnabled::Once, p)?;
            cd_override_kept(c, &sys.path)?
        }
        BootFrom::Disk => match system::clear_cd_override(c, &sys, p)? {
            Some(done) => format!("from disk{media} (CD override replaced: {done})"),
            None => format!("from disk{media} (no CD override was set)"),
        },
    };
    info!("powering {} on", sys.path);
    on(BootEvent::PoweringOn)?;
    *stage = Stage::PoweringOn;
    system::reset(c, &sys, Power::On, p)?;
    system::wait_power(c, &sys, Power::On, s.deadline, p)?;
    on(BootEvent::PoweredOn)?;
    report.power = Power::On.as_str().to_string();
    Ok(())
}

/// What the BMC made of the one-time CD override, read back: some keep every override
/// continuous whatever was asked (sushy-tools' libvirt driver, the upstream IBI lab's BMC), so the
/// host boots the CD again at every power-on until the media is ejected.
fn cd_override_kept(c: &mut Client, path: &str) -> Result<String> {
    let sys = system::read_system(c, path)?;
    let enabled = sys
        .data
        .boot
        .as_ref()
        .and_then(|b| b.boot_source_override_enabled.clone());
    Ok(match enabled {
        Some(OverrideEnabled::Continuous) => {
            tracing::warn!(
                "{}the BMC keeps the CD override continuous (it ignored Once): the host boots the CD at every power-on until the media is ejected",
                c.prefix()
            );
            CD_CONTINUOUS.to_string()
        }
        _ => "one-time override to the virtual CD (UEFI)".to_string(),
    })
}

/// The report's words for a CD override the BMC kept continuous.
pub const CD_CONTINUOUS: &str = "override to the virtual CD, kept continuous by the BMC (it ignored Once): the host boots the CD at every power-on until the media is ejected (ibi boot --eject; ibi deploy ejects once the host is done, before it boots again)";

/// One bounded look at the power after a failed boot step.
fn power_left(c: &mut Client, sys: &System, stage: Stage) -> PowerLeft {
    let state = match system::power_state_once(c, sys, POWER_LOOK_TIMEOUT) {
        Ok(s) => Some(s),
        Err(e) => {
            debug!("reading the power state after the failure: {e:#}");
            None
        }
    };
    PowerLeft { state, stage }
}

/// What the BMC shows, for a look that changes nothing: the CD slots and what the first with
/// media holds, the boot override, the power state.
fn look(sys: &System, slots: &[Slot], report: &mut Report) {
    report.media = slots.iter().map(Slot::path).collect::<Vec<_>>().join(", ");
    report.image = slots
        .iter()
        .filter(|s| s.data.inserted != Some(false))
        .find_map(|s| s.data.image.as_deref().filter(|i| !i.is_empty()))
        .map_or_else(
            || "(none)".to_string(),
            |i| escape_control(&clip(&display_url(i), MAX_BMC_URL)),
        );
    let boot = sys.data.boot.clone().unwrap_or_default();
    report.boot = match (
        boot.boot_source_override_target,
        boot.boot_source_override_enabled,
    ) {
        (Some(target), Some(enabled))
            if enabled != OverrideEnabled::Disabled && target != BootTarget::None =>
        {
            // Shown bounded and escaped (`Display`): a target the schema does not name is the
            // BMC's text.
            format!("override to {target} ({enabled})")
        }
        _ => "no override".to_string(),
    };
    report.power = PowerState::shown(sys.data.power_state.as_ref());
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
    report.power = PowerState::shown(system::power_state(c, &sys)?.as_ref());
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
    fn the_power_left_is_said_as_read_or_as_far_as_the_boot_got() {
        let left = |state: Option<&str>, stage| {
            PowerLeft {
                state: state.map(|s: &str| PowerState::from(s.to_string())),
                stage,
            }
            .to_string()
        };
        let cases = [
            (
                Some("Off"),
                Stage::PoweringOn,
                "the host was left powered off",
            ),
            (Some("On"), Stage::Off, "the host was left powered on"),
            (
                Some("PoweringOn"),
                Stage::PoweringOn,
                "the host was left in power state PoweringOn",
            ),
            (
                None,
                Stage::PoweringOff,
                "the host's power state could not be read: it may be on or off",
            ),
            (
                None,
                Stage::Off,
                "the host was left powered off (so it was last seen; its power state could not be read again)",
            ),
            (
                None,
                Stage::PoweringOn,
                "the host may have been powered on (its power state could not be read)",
            ),
        ];
        for (state, stage, want) in cases {
            assert_eq!(left(state, stage), want);
        }
        let hostile = BootTarget::from(format!("On\u{1b}[2J{}", "x".repeat(200)));
        assert_eq!(
            hostile.to_string(),
            format!("On\\x1b[2J{}…", "x".repeat(34))
        );
    }

    #[test]
    fn advice_is_in_the_words_of_the_command_that_was_run() {
        let refused = RedfishError::refused_for_test;
        let untrusted = RedfishError::untrusted_for_test;
        let inventory = Ways {
            credentials: "bmc.user with bmc.passwordFile or bmc.passwordEnv",
            trust: "bmc.caFile or bmc.insecure",
            ca_given: None,
        };
        let named = Ways {
            ca_given: Some("bmc.caFile ca.pem"),
            ..inventory
        };
        let cases = [
            (
                refused(false),
                inventory,
                "the BMC wants a user: give bmc.user with bmc.passwordFile or bmc.passwordEnv: ",
            ),
            (
                untrusted(true),
                inventory,
                "the CA given did not verify the BMC's certificate: give the CA that signed it: ",
            ),
            (
                untrusted(true),
                named,
                "bmc.caFile ca.pem did not verify the BMC's certificate: give the CA that signed it: ",
            ),
            (
                untrusted(false),
                inventory,
                "the BMC's certificate is not trusted: pass bmc.caFile or bmc.insecure: ",
            ),
            (refused(true), inventory, "BMC https://b: "),
        ];
        for (e, ways, want) in cases {
            let shown = format!("{:#}", advise(anyhow::Error::new(e), &ways));
            assert!(shown.starts_with(want), "{shown}");
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
