//! The few Redfish resources ibi reads, decoded leniently: BMCs omit optional properties freely,
//! so everything but the links that make a resource what it is is an `Option`.

use std::fmt;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use util::text::{clip, escape_control};

/// How much of a value the schema does not name is kept for a message.
const MAX_OTHER_STATE: usize = 40;

/// An enum of a Redfish property: the values the schema names, and `Other` with what else a BMC
/// sent, kept for the message. Shown (`Display`) bounded and with control characters escaped: it
/// is the BMC's text. `as_str` is the schema's spelling (a BMC's own text as it came: for
/// comparing and sending back, never for showing).
macro_rules! redfish_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
        #[serde(from = "String")]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
            Other(String),
        }

        impl $name {
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$variant => stringify!($variant),)+
                    $name::Other(s) => s,
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match s.as_str() {
                    $(stringify!($variant) => $name::$variant,)+
                    _ => $name::Other(s),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $name::Other(s) => f.write_str(&escape_control(&clip(s, MAX_OTHER_STATE))),
                    known => f.write_str(known.as_str()),
                }
            }
        }
    };
}

redfish_enum! {
    /// A system's `PowerState` (Redfish `Resource.PowerState`).
    PowerState { On, Off, PoweringOn, PoweringOff, Paused }
}

impl PowerState {
    /// The state as a message shows it; `unknown` when the BMC showed none.
    pub fn shown(state: Option<&PowerState>) -> String {
        state.map_or_else(|| "unknown".to_string(), PowerState::to_string)
    }
}

redfish_enum! {
    /// `Boot.BootSourceOverrideTarget` (DSP0268 ComputerSystem.Boot), the values ibi sends or
    /// reads.
    BootTarget {
        None,
        Cd,
        /// Supermicro's virtual-media target, listed in place of `Cd` on most of its models.
        UsbCd,
        Dvd,
        Hdd,
        Pxe,
    }
}

impl BootTarget {
    /// A target that boots a CD (what an earlier boot's override may have left).
    pub(crate) fn is_cd(&self) -> bool {
        matches!(self, BootTarget::Cd | BootTarget::UsbCd | BootTarget::Dvd)
    }
}

redfish_enum! {
    /// `Boot.BootSourceOverrideEnabled`: whether the override holds for the next boot only.
    OverrideEnabled { Disabled, Once, Continuous }
}

/// A navigation property: `{"@odata.id": "/redfish/v1/…"}`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Link {
    #[serde(rename = "@odata.id")]
    pub id: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct Collection {
    #[serde(default)]
    pub members: Vec<Link>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct ServiceRoot {
    pub systems: Option<Link>,
}

/// An action's target and, where the BMC lists them, the values it accepts.
#[derive(Debug, Clone, Deserialize)]
pub struct Action {
    pub target: String,
    #[serde(rename = "ResetType@Redfish.AllowableValues", default)]
    pub reset_types: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct SystemActions {
    #[serde(rename = "#ComputerSystem.Reset")]
    pub reset: Option<Action>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SystemLinks {
    #[serde(default)]
    pub managed_by: Vec<Link>,
}

/// `ComputerSystem.Boot`: the one-time or persistent override and, where listed, the targets the
/// BMC accepts.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Boot {
    pub boot_source_override_enabled: Option<OverrideEnabled>,
    pub boot_source_override_target: Option<BootTarget>,
    pub boot_source_override_mode: Option<String>,
    #[serde(rename = "BootSourceOverrideTarget@Redfish.AllowableValues")]
    pub allowed_targets: Option<Vec<BootTarget>>,
}

/// `@Redfish.Settings`: where a BMC that keeps properties read-only wants them written (iDRAC10).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Settings {
    pub settings_object: Option<Link>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ComputerSystem {
    #[serde(rename = "@odata.id")]
    pub odata_id: String,
    #[serde(default)]
    pub id: String,
    pub power_state: Option<PowerState>,
    /// The SMBIOS system UUID, which the host's OS sees as its DMI product UUID.
    #[serde(rename = "UUID")]
    pub uuid: Option<String>,
    pub boot: Option<Boot>,
    pub virtual_media: Option<Link>,
    #[serde(default)]
    pub links: SystemLinks,
    #[serde(default)]
    pub actions: SystemActions,
    #[serde(rename = "@Redfish.Settings")]
    pub settings: Option<Settings>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct MediaActions {
    #[serde(rename = "#VirtualMedia.InsertMedia")]
    pub insert: Option<Action>,
    #[serde(rename = "#VirtualMedia.EjectMedia")]
    pub eject: Option<Action>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct VirtualMedia {
    #[serde(rename = "@odata.id")]
    pub odata_id: String,
    #[serde(default)]
    pub id: String,
    #[serde(default)]
    pub media_types: Vec<String>,
    pub image: Option<String>,
    pub inserted: Option<bool>,
    #[serde(default)]
    pub actions: MediaActions,
    pub certificates: Option<Link>,
    pub verify_certificate: Option<bool>,
}

/// A resource that is not the one expected, with serde's reason.
#[derive(Debug, thiserror::Error)]
#[error("not a {what}: {error}")]
pub(crate) struct NotA {
    what: &'static str,
    error: serde_json::Error,
}

/// Decodes a resource, naming what was expected when it does not fit.
pub(crate) fn decode<T: DeserializeOwned>(body: &Value, what: &'static str) -> Result<T, NotA> {
    serde_json::from_value(body.clone()).map_err(|error| NotA { what, error })
}

/// Whether a resource is a ComputerSystem, by type or, for BMCs that omit `@odata.type`, by the
/// properties only a system has.
pub(crate) fn is_system(body: &Value) -> bool {
    match body.get("@odata.type").and_then(Value::as_str) {
        Some(t) => t.contains("ComputerSystem."),
        None => body.get("PowerState").is_some() && body.get("Boot").is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_power_state_outside_the_schema_is_kept_and_shown_as_text() {
        let v = json!({"@odata.id": "/redfish/v1/Systems/1", "PowerState": "On\u{1b}]0;x\u{7}"});
        let s: ComputerSystem = decode(&v, "ComputerSystem").unwrap();
        let state = s.power_state.unwrap();
        assert_eq!(state, PowerState::Other("On\u{1b}]0;x\u{7}".into()));
        assert_eq!(state.to_string(), "On\\x1b]0;x\\x07");
        assert_eq!(
            PowerState::from("x".repeat(100))
                .to_string()
                .chars()
                .count(),
            41
        );
        for (word, state) in [
            ("On", PowerState::On),
            ("Off", PowerState::Off),
            ("PoweringOn", PowerState::PoweringOn),
            ("PoweringOff", PowerState::PoweringOff),
            ("Paused", PowerState::Paused),
        ] {
            assert_eq!(PowerState::from(word.to_string()), state);
            assert_eq!(state.to_string(), word);
        }
    }

    #[test]
    fn a_boot_override_decodes_into_its_values_and_keeps_a_vendors_own() {
        let v = json!({
            "@odata.id": "/redfish/v1/Systems/1",
            "Boot": {
                "BootSourceOverrideTarget": "UsbCd",
                "BootSourceOverrideEnabled": "Continuous",
                "BootSourceOverrideTarget@Redfish.AllowableValues": ["Pxe", "Hdd", "UsbCd", "SDCard\u{1b}[2J"],
            },
        });
        let s: ComputerSystem = decode(&v, "ComputerSystem").unwrap();
        let boot = s.boot.unwrap();
        assert_eq!(boot.boot_source_override_target, Some(BootTarget::UsbCd));
        assert!(BootTarget::UsbCd.is_cd() && BootTarget::Dvd.is_cd() && !BootTarget::Hdd.is_cd());
        assert_eq!(
            boot.boot_source_override_enabled,
            Some(OverrideEnabled::Continuous)
        );
        let allowed = boot.allowed_targets.unwrap();
        assert_eq!(allowed[3], BootTarget::Other("SDCard\u{1b}[2J".into()));
        assert_eq!(allowed[3].to_string(), "SDCard\\x1b[2J", "shown escaped");
        assert_eq!(allowed[3].as_str(), "SDCard\u{1b}[2J", "kept as sent");
        assert_eq!(OverrideEnabled::Once.as_str(), "Once");
        assert_eq!(BootTarget::None.to_string(), "None");
    }

    #[test]
    fn a_minimal_system_decodes() {
        let v = json!({"@odata.id": "/redfish/v1/Systems/1", "PowerState": "On"});
        let s: ComputerSystem = decode(&v, "ComputerSystem").unwrap();
        assert_eq!(s.power_state, Some(PowerState::On));
        assert!(s.virtual_media.is_none() && s.links.managed_by.is_empty());
    }

    #[test]
    fn virtual_media_reads_actions_and_types() {
        let v = json!({
            "@odata.id": "/redfish/v1/Managers/1/VirtualMedia/CD1",
            "Id": "CD1", "MediaTypes": ["CD", "DVD"], "Inserted": false,
            "Actions": {"#VirtualMedia.InsertMedia": {"target": "/x/InsertMedia"}}
        });
        let m: VirtualMedia = decode(&v, "VirtualMedia").unwrap();
        assert_eq!(m.media_types, ["CD", "DVD"]);
        assert!(m.actions.insert.is_some() && m.actions.eject.is_none());
    }

    #[test]
    fn systems_are_recognised_with_or_without_a_type() {
        assert!(is_system(
            &json!({"@odata.type": "#ComputerSystem.v1_10_0.ComputerSystem"})
        ));
        assert!(is_system(&json!({"PowerState": "Off", "Boot": {}})));
        assert!(!is_system(
            &json!({"@odata.type": "#ComputerSystemCollection.ComputerSystemCollection"})
        ));
        assert!(!is_system(&json!({"Members": []})));
    }

    #[test]
    fn a_wrong_resource_is_named() {
        let err = decode::<ComputerSystem>(&json!({"Id": 1}), "ComputerSystem")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("not a ComputerSystem"), "{err}");
    }
}
