//! ComputerSystem operations: finding the system from whatever URL the user has (service root,
//! Systems collection, one system), power, and the boot override with the vendor differences
//! Ironic's redfish driver documents (Supermicro's `UsbCd`, the whole Boot object for AMI, iDRAC10's
//! settings resource, iLO refusing changes during POST, iDRAC10 refusing power-on for a minute).

use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use tracing::{debug, info};

use super::client::Client;
use super::error::RedfishError;
use super::model::{
    BootTarget, Collection, ComputerSystem, OverrideEnabled, PowerState, ServiceRoot, decode,
    is_system,
};

const MODE_UEFI: &str = "UEFI";
/// iLO's refusal while the host is in POST (Ironic retries it with backoff).
const DURING_POST: &str = "UnableToModifyDuringSystemPOST";

/// How long to keep asking when a BMC says "not now". Tests shorten it.
#[derive(Clone, Copy, Debug)]
pub struct Patience {
    /// Power-on answered 409 (iDRAC10 for about a minute after power-off): tries and wait.
    pub busy_tries: u32,
    pub busy_delay: Duration,
    /// Boot changes refused during POST (iLO): tries, first wait (doubling).
    pub post_tries: u32,
    pub post_delay: Duration,
    /// How often `PowerState` is read while waiting for a change.
    pub poll: Duration,
}

impl Default for Patience {
    fn default() -> Self {
        Self {
            busy_tries: 6,
            busy_delay: Duration::from_secs(10),
            post_tries: 6,
            post_delay: Duration::from_secs(5),
            poll: Duration::from_secs(2),
        }
    }
}

/// A system as read, with the path it lives at and its ETag (for `If-Match` on PATCH).
#[derive(Debug, Clone)]
pub struct System {
    pub path: String,
    pub data: ComputerSystem,
    pub etag: Option<String>,
}

/// The desired power state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    On,
    Off,
}

impl Power {
    pub fn as_str(self) -> &'static str {
        match self {
            Power::On => "On",
            Power::Off => "Off",
        }
    }

    /// Whether the system is in this state.
    pub fn is(self, state: Option<&PowerState>) -> bool {
        matches!(
            (self, state),
            (Power::On, Some(PowerState::On)) | (Power::Off, Some(PowerState::Off))
        )
    }

    /// Reset types that reach this state, best first.
    fn reset_types(self) -> &'static [&'static str] {
        match self {
            Power::On => &["On", "ForceOn", "PushPowerButton"],
            Power::Off => &["ForceOff", "GracefulShutdown", "PushPowerButton"],
        }
    }
}

/// Finds the one system `path` leads to: the path itself, a member of the collection it is, or a
/// member of the root's Systems. With several, `id` (a member's `Id` or last path segment) picks.
pub fn find_system(c: &mut Client, path: &str, id: Option<&str>) -> Result<System> {
    let reply = c.get(path)?;
    if is_system(&reply.body) {
        return read_system(c, path);
    }
    let root: ServiceRoot = decode(&reply.body, "ServiceRoot").unwrap_or_default();
    let collection = match root.systems {
        Some(link) if reply.body.get("Members").is_none() => link.id,
        _ => path.to_string(),
    };
    // Named: asked for at its own path first (as sushy's `get_system` does), which spares a BMC
    // with many systems (a chassis manager, an emulator) listing them all for every job.
    if let Some(want) = id.filter(|w| !w.is_empty() && !w.contains('/')) {
        let direct = format!("{}/{want}", collection.trim_end_matches('/'));
        if c.get(&direct).is_ok_and(|r| is_system(&r.body)) {
            return read_system(c, &direct);
        }
    }
    let members = decode::<Collection>(&c.get(&collection)?.body, "Systems collection")
        .map_err(|e| anyhow!("BMC {}: GET {collection}: {e}", c.origin()))?
        .members;
    let chosen = choose_member(c, &members, id, &collection)?;
    read_system(c, &chosen)
}

fn choose_member(
    c: &mut Client,
    members: &[super::model::Link],
    id: Option<&str>,
    collection: &str,
) -> Result<String> {
    let bmc = c.origin().to_string();
    match (members, id) {
        ([], _) => bail!("BMC {bmc}: {collection} lists no system"),
        ([only], None) => Ok(only.id.clone()),
        (_, None) => {
            let ids: Vec<&str> = members.iter().map(|m| last_segment(&m.id)).collect();
            bail!(
                "BMC {bmc}: {collection} lists {} systems ({}); name one",
                ids.len(),
                ids.join(", ")
            )
        }
        (_, Some(want)) => {
            for m in members {
                if last_segment(&m.id) == want {
                    return Ok(m.id.clone());
                }
                let sys = decode::<ComputerSystem>(&c.get(&m.id)?.body, "ComputerSystem");
                if sys.is_ok_and(|s| s.id == want) {
                    return Ok(m.id.clone());
                }
            }
            bail!("BMC {bmc}: {collection} has no system {want:?}")
        }
    }
}

/// Reads a system again (its ETag and Boot change under us).
pub fn read_system(c: &mut Client, path: &str) -> Result<System> {
    let reply = c.get(path)?;
    let data: ComputerSystem = decode(&reply.body, "ComputerSystem")
        .map_err(|e| anyhow!("BMC {}: GET {path}: {e}", c.origin()))?;
    // A redirect (sushy-tools answers /Systems/<name> with 307 to the UUID) is followed by the
    // client; keep the canonical path for later calls.
    let path = if data.odata_id.is_empty() {
        path.to_string()
    } else {
        data.odata_id.clone()
    };
    Ok(System {
        path,
        data,
        etag: reply.etag,
    })
}

/// The system's `PowerState` as read now; `None` when the BMC shows none.
pub fn power_state(c: &mut Client, sys: &System) -> Result<Option<PowerState>> {
    Ok(read_system(c, &sys.path)?.data.power_state)
}

/// One bounded read of `PowerState`, without retries: a look on the way out of a failure.
pub fn power_state_once(c: &mut Client, sys: &System, timeout: Duration) -> Result<PowerState> {
    let reply = c.get_once(&sys.path, timeout)?;
    let data: ComputerSystem = decode(&reply.body, "ComputerSystem")
        .map_err(|e| anyhow!("BMC {}: GET {}: {e}", c.origin(), sys.path))?;
    data.power_state
        .ok_or_else(|| anyhow!("BMC {}: {} shows no PowerState", c.origin(), sys.path))
}

/// Asks for `want` unless the system is there already, retrying a 409 (iDRAC10 refuses power-on
/// for up to a minute after power-off).
pub fn reset(c: &mut Client, sys: &System, want: Power, patience: &Patience) -> Result<()> {
    if want.is(power_state(c, sys)?.as_ref()) {
        debug!(target: "ibi::redfish::system", "power already {}", want.as_str());
        return Ok(());
    }
    let action = sys.data.actions.reset.as_ref().ok_or_else(|| {
        anyhow!(
            "BMC {}: {} has no ComputerSystem.Reset action",
            c.origin(),
            sys.path
        )
    })?;
    let allowed = &action.reset_types;
    let reset_type = want
        .reset_types()
        .iter()
        .find(|t| allowed.is_empty() || allowed.iter().any(|a| a == *t))
        .ok_or_else(|| {
            anyhow!(
                "BMC {}: {} allows no reset type that powers it {} ({allowed:?})",
                c.origin(),
                sys.path,
                want.as_str()
            )
        })?;
    let body = json!({ "ResetType": reset_type });
    let target = action.target.clone();
    let mut tries = 1;
    loop {
        match c.post(&target, &body) {
            Err(e) if e.status() == Some(409) && tries < patience.busy_tries => {
                info!(target: "ibi::redfish::system", "{e}; asking again in {:?}", patience.busy_delay);
                tries += 1;
                sleep(patience.busy_delay);
            }
            r => {
                r.with_context(|| {
                    format!("powering {} {}", sys.path, want.as_str().to_lowercase())
                })?;
                return Ok(());
            }
        }
    }
}

/// Polls `PowerState` until it is `want` or `deadline` passes.
pub fn wait_power(
    c: &mut Client,
    sys: &System,
    want: Power,
    deadline: Instant,
    patience: &Patience,
) -> Result<()> {
    loop {
        let now = power_state(c, sys)?;
        if want.is(now.as_ref()) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "BMC {}: {} is still {} (waited for {})",
                c.origin(),
                sys.path,
                PowerState::shown(now.as_ref()),
                want.as_str()
            );
        }
        sleep(patience.poll);
    }
}

/// The target to send for `target` on this system: Supermicro lists `UsbCd` instead of `Cd`.
fn vendor_target(sys: &System, target: BootTarget) -> BootTarget {
    let allowed = sys
        .data
        .boot
        .as_ref()
        .and_then(|b| b.allowed_targets.as_ref());
    match allowed {
        Some(a)
            if target == BootTarget::Cd
                && !a.contains(&BootTarget::Cd)
                && a.contains(&BootTarget::UsbCd) =>
        {
            BootTarget::UsbCd
        }
        _ => target,
    }
}

/// Sets a boot override. The whole Boot object (target, enabled and, where the system has the
/// property, UEFI mode) goes in every PATCH: AMI and ASRockRack need all three, and Supermicro
/// resets the mode to Legacy on any change unless it is re-sent.
pub fn set_boot_override(
    c: &mut Client,
    sys: &System,
    target: BootTarget,
    enabled: OverrideEnabled,
    patience: &Patience,
) -> Result<()> {
    let mut boot = json!({
        "BootSourceOverrideTarget": vendor_target(sys, target).as_str(),
        "BootSourceOverrideEnabled": enabled.as_str(),
    });
    let has_mode = sys
        .data
        .boot
        .as_ref()
        .is_some_and(|b| b.boot_source_override_mode.is_some());
    if has_mode {
        boot["BootSourceOverrideMode"] = json!(MODE_UEFI);
    }
    let result = patch_boot(c, sys, &boot, patience);
    let unchanged = sys
        .data
        .boot
        .as_ref()
        .and_then(|b| b.boot_source_override_enabled.as_ref())
        == Some(&enabled);
    match result {
        // Some BMCs refuse `Enabled` re-sent unchanged: once more without it.
        Err(e)
            if unchanged
                && e.downcast_ref::<RedfishError>()
                    .and_then(RedfishError::status)
                    == Some(400) =>
        {
            debug!(target: "ibi::redfish::system", "boot override refused ({e:#}); again without BootSourceOverrideEnabled");
            if let Some(b) = boot.as_object_mut() {
                b.remove("BootSourceOverrideEnabled");
            }
            patch_boot(c, sys, &boot, patience)
        }
        r => r,
    }
}

/// Clears a pending CD override left by an earlier boot. Where the BMC lists its targets without
/// `None`, a one-time override to the disk takes its place. Returns what it did.
pub fn clear_cd_override(
    c: &mut Client,
    sys: &System,
    patience: &Patience,
) -> Result<Option<&'static str>> {
    let boot = sys.data.boot.clone().unwrap_or_default();
    let cd_like = boot
        .boot_source_override_target
        .as_ref()
        .is_some_and(BootTarget::is_cd);
    let disabled = boot
        .boot_source_override_enabled
        .as_ref()
        .is_none_or(|e| *e == OverrideEnabled::Disabled);
    if !cd_like || disabled {
        return Ok(None);
    }
    let none_allowed = boot
        .allowed_targets
        .as_ref()
        .is_none_or(|a| a.contains(&BootTarget::None));
    if none_allowed {
        let body = json!({
            "BootSourceOverrideTarget": BootTarget::None.as_str(),
            "BootSourceOverrideEnabled": OverrideEnabled::Disabled.as_str(),
        });
        match patch_boot(c, sys, &body, patience) {
            Ok(()) => return Ok(Some("cleared")),
            Err(e) => {
                debug!(target: "ibi::redfish::system", "clearing the override was refused ({e:#}); setting a one-time disk boot")
            }
        }
    }
    set_boot_override(c, sys, BootTarget::Hdd, OverrideEnabled::Once, patience)?;
    Ok(Some("one-time Hdd"))
}

/// PATCHes `{"Boot": boot}` to the system, or to its settings resource when the system refuses
/// (iDRAC10 keeps Boot read-only there), retrying iLO's refusals during POST.
fn patch_boot(c: &mut Client, sys: &System, boot: &Value, patience: &Patience) -> Result<()> {
    let body = json!({ "Boot": boot });
    let mut delay = patience.post_delay;
    let mut tries = 1;
    loop {
        let r = c.patch(&sys.path, &body, sys.etag.as_deref());
        match r {
            Err(e) if e.mentions(DURING_POST) && tries < patience.post_tries => {
                info!(target: "ibi::redfish::system", "{e}; asking again in {delay:?}");
                sleep(delay);
                delay = delay.saturating_mul(2);
                tries += 1;
            }
            Err(e) if matches!(e.status(), Some(400 | 405)) => {
                return patch_settings(c, sys, &body, e);
            }
            r => {
                r.with_context(|| format!("setting the boot override of {}", sys.path))?;
                return Ok(());
            }
        }
    }
}

fn patch_settings(c: &mut Client, sys: &System, body: &Value, refused: RedfishError) -> Result<()> {
    let Some(settings) = sys
        .data
        .settings
        .as_ref()
        .and_then(|s| s.settings_object.clone())
    else {
        return Err(anyhow::Error::new(refused)
            .context(format!("setting the boot override of {}", sys.path)));
    };
    let etag = c.get(&settings.id)?.etag;
    c.patch(&settings.id, body, etag.as_deref())
        .with_context(|| format!("setting the boot override through {}", settings.id))?;
    Ok(())
}

fn last_segment(path: &str) -> &str {
    path.trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Boot;

    fn system_with(allowed: Option<&[&str]>) -> System {
        let mut data: ComputerSystem =
            decode(&json!({"@odata.id": "/redfish/v1/Systems/1"}), "x").unwrap();
        data.boot = Some(Boot {
            allowed_targets: allowed
                .map(|a| a.iter().map(|s| BootTarget::from(s.to_string())).collect()),
            ..Boot::default()
        });
        System {
            path: data.odata_id.clone(),
            data,
            etag: None,
        }
    }

    #[test]
    fn supermicro_gets_usbcd_when_cd_is_not_listed() {
        let cases: [(Option<&[&str]>, BootTarget, &str); 5] = [
            (Some(&["Pxe", "Hdd", "UsbCd"]), BootTarget::Cd, "UsbCd"),
            (Some(&["Pxe", "Cd", "UsbCd"]), BootTarget::Cd, "Cd"),
            (Some(&["Pxe", "Hdd"]), BootTarget::Cd, "Cd"),
            (None, BootTarget::Cd, "Cd"),
            (Some(&["UsbCd", "Hdd"]), BootTarget::Hdd, "Hdd"),
        ];
        for (allowed, target, want) in cases {
            assert_eq!(
                vendor_target(&system_with(allowed), target).as_str(),
                want,
                "{allowed:?}"
            );
        }
    }

    #[test]
    fn reset_types_prefer_the_forceful_off_and_plain_on() {
        assert_eq!(Power::Off.reset_types()[0], "ForceOff");
        assert_eq!(Power::On.reset_types()[0], "On");
    }

    #[test]
    fn last_segments_name_members() {
        assert_eq!(last_segment("/redfish/v1/Systems/abc/"), "abc");
        assert_eq!(last_segment("/redfish/v1/Systems/1"), "1");
    }
}
