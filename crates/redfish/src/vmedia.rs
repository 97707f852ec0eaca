//! Virtual media: finding a system's CD device by following links (under the system first, as
//! iDRAC10 and sushy-tools have it, then under each of its managers, as iDRAC, iLO and XCC have
//! it), ejecting, inserting with the body variants vendors need, and trusting an image server's
//! certificate (VirtualMedia 1.4 `Certificates` + `VerifyCertificate`).

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use tracing::{debug, info};

use super::client::Client;
use super::error::RedfishError;
use super::model::{Collection, VirtualMedia, decode};
use super::system::System;
use util::secret::Secret;

const MEDIA_CD: &str = "CD";
const MEDIA_DVD: &str = "DVD";

/// One virtual-media device as read, with its ETag.
#[derive(Debug, Clone)]
pub struct Slot {
    pub data: VirtualMedia,
    pub etag: Option<String>,
}

impl Slot {
    pub fn path(&self) -> &str {
        &self.data.odata_id
    }
}

/// The system's CD-capable devices, those listing `CD` first, then those listing only `DVD`
/// (Cisco UCS), from the first place that has any: the system's own VirtualMedia, then each of
/// its managers'.
pub fn find_cd_slots(c: &mut Client, sys: &System) -> Result<Vec<Slot>> {
    let mut places: Vec<String> = sys
        .data
        .virtual_media
        .iter()
        .map(|l| l.id.clone())
        .collect();
    for manager in &sys.data.links.managed_by {
        match c.get(&manager.id) {
            Ok(r) => places.extend(
                r.body
                    .pointer("/VirtualMedia/@odata.id")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            ),
            Err(e) => {
                debug!(target: "ibi::redfish::vmedia", "skipping manager {}: {e}", manager.id)
            }
        }
    }
    for place in &places {
        let slots = match slots_in(c, place) {
            Ok(s) => s,
            // A link to a collection the BMC does not serve (sushy-tools' manager link) is skipped.
            Err(e)
                if e.downcast_ref::<RedfishError>()
                    .and_then(RedfishError::status)
                    == Some(404) =>
            {
                debug!(target: "ibi::redfish::vmedia", "skipping {place}: {e:#}");
                continue;
            }
            Err(e) => return Err(e),
        };
        let ordered = order_slots(slots);
        if !ordered.is_empty() {
            return Ok(ordered);
        }
    }
    bail!(
        "BMC {}: {} has no virtual CD or DVD (looked in: {})",
        c.origin(),
        sys.path,
        if places.is_empty() {
            "nothing linked".to_string()
        } else {
            places.join(", ")
        }
    )
}

fn slots_in(c: &mut Client, collection: &str) -> Result<Vec<Slot>> {
    let members = decode::<Collection>(&c.get(collection)?.body, "VirtualMedia collection")
        .map_err(|e| anyhow!("BMC {}: GET {collection}: {e}", c.origin()))?
        .members;
    members.iter().map(|m| read_slot(c, &m.id)).collect()
}

pub(crate) fn read_slot(c: &mut Client, path: &str) -> Result<Slot> {
    let reply = c.get(path)?;
    let data = decode(&reply.body, "VirtualMedia")
        .map_err(|e| anyhow!("BMC {}: GET {path}: {e}", c.origin()))?;
    Ok(Slot {
        data,
        etag: reply.etag,
    })
}

fn order_slots(slots: Vec<Slot>) -> Vec<Slot> {
    let has = |s: &Slot, t: &str| s.data.media_types.iter().any(|m| m.eq_ignore_ascii_case(t));
    let (cd, rest): (Vec<Slot>, Vec<Slot>) = slots.into_iter().partition(|s| has(s, MEDIA_CD));
    cd.into_iter()
        .chain(rest.into_iter().filter(|s| has(s, MEDIA_DVD)))
        .collect()
}

/// Ejects whatever is in `slot`, whatever `Inserted` says (BMCs get it wrong). An empty slot that
/// refuses the eject (iLO) is not an error.
pub fn eject(c: &mut Client, slot: &Slot) -> Result<()> {
    let result = match &slot.data.actions.eject {
        // iLO needs a body, even an empty one.
        Some(a) => c.post(&a.target, &json!({})).map(drop),
        None => c
            .patch(
                slot.path(),
                &json!({"Image": null, "Inserted": false}),
                slot.etag.as_deref(),
            )
            .map(drop),
    };
    match result {
        Err(e)
            if slot.data.inserted == Some(false)
                && e.status().is_some_and(|s| (400..500).contains(&s)) =>
        {
            debug!(target: "ibi::redfish::vmedia", "ejecting the empty {}: {e}", slot.path());
            Ok(())
        }
        r => r.with_context(|| format!("ejecting {}", slot.path())),
    }
}

/// The insert bodies to try, in order: the full one; without `Inserted`/`WriteProtected`
/// (Supermicro refuses them); with `TransferProtocolType` from the URL's scheme, then also
/// `TransferMethod` (Nokia and others require them).
fn insert_bodies(image: &str) -> Vec<Value> {
    let scheme = image.split(':').next().unwrap_or("").to_ascii_uppercase();
    vec![
        json!({"Image": image, "Inserted": true, "WriteProtected": true}),
        json!({"Image": image}),
        json!({"Image": image, "TransferProtocolType": scheme}),
        json!({"Image": image, "TransferProtocolType": scheme, "TransferMethod": "Stream"}),
    ]
}

/// Whether a refused insert should be tried again with the next body: the BMC named a parameter
/// it does not know or misses.
fn body_was_refused(e: &RedfishError) -> bool {
    e.status() == Some(400)
        && [
            "ActionParameterMissing",
            "PropertyMissing",
            "ActionParameterUnknown",
            "PropertyUnknown",
            "ActionParameterNotSupported",
            "PropertyNotWritable",
        ]
        .iter()
        .any(|id| e.mentions(id))
}

/// Inserts `image` into `slot`: the InsertMedia action with the body variants above, or a PATCH
/// of `Image` where the action is missing (older Lenovo). `timeout` bounds the call: some BMCs
/// (sushy-tools) download the whole image before answering.
pub fn insert(c: &mut Client, slot: &Slot, image: &Secret, timeout: Duration) -> Result<()> {
    let Some(action) = &slot.data.actions.insert else {
        let body = json!({"Image": image.expose_str(), "Inserted": true, "WriteProtected": true});
        c.patch(slot.path(), &body, slot.etag.as_deref())
            .with_context(|| format!("inserting the image into {} (PATCH)", slot.path()))?;
        return Ok(());
    };
    let target = action.target.clone();
    let mut last = None;
    for body in insert_bodies(image.expose_str()) {
        match c.post_with_timeout(&target, &body, timeout) {
            Ok(_) => return Ok(()),
            Err(e) if body_was_refused(&e) => {
                info!(target: "ibi::redfish::vmedia", "{e}; trying another insert body");
                last = Some(e);
            }
            Err(e) => {
                return Err(anyhow::Error::new(e)
                    .context(format!("inserting the image into {}", slot.path())));
            }
        }
    }
    let e = last
        .map(anyhow::Error::new)
        .unwrap_or_else(|| anyhow!("no insert body"));
    Err(e.context(format!("inserting the image into {}", slot.path())))
}

/// Whether an insert failure means "this slot cannot take it" (internal-only slots answer 400 or
/// 405), so the next slot should be tried.
pub fn slot_refused(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<RedfishError>()
            .and_then(RedfishError::status),
        Some(400 | 405)
    )
}

/// Makes the BMC verify the image server against `pem`: uploads it to the slot's `Certificates`
/// (unless an identical one is there) and sets `VerifyCertificate`.
pub fn trust_image_server(c: &mut Client, slot: &Slot, pem: &str) -> Result<()> {
    let Some(certs) = &slot.data.certificates else {
        bail!(
            "BMC {}: {} has no Certificates collection (Redfish VirtualMedia 1.4), so it cannot be told which certificate to trust",
            c.origin(),
            slot.path()
        );
    };
    if !already_trusted(c, &certs.id, pem)? {
        c.post(
            &certs.id,
            &json!({"CertificateString": pem, "CertificateType": "PEM"}),
        )
        .with_context(|| format!("uploading the image server's certificate to {}", certs.id))?;
    }
    c.patch(
        slot.path(),
        &json!({"VerifyCertificate": true}),
        slot.etag.as_deref(),
    )
    .with_context(|| format!("turning on VerifyCertificate on {}", slot.path()))?;
    Ok(())
}

fn already_trusted(c: &mut Client, collection: &str, pem: &str) -> Result<bool> {
    let members = decode::<Collection>(&c.get(collection)?.body, "Certificates collection")
        .map_err(|e| anyhow!("BMC {}: GET {collection}: {e}", c.origin()))?
        .members;
    for m in members {
        let cert = c.get(&m.id)?.body;
        if cert
            .get("CertificateString")
            .and_then(Value::as_str)
            .map(str::trim)
            == Some(pem.trim())
        {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(id: &str, types: &[&str]) -> Slot {
        let data = decode(
            &json!({"@odata.id": id, "MediaTypes": types}),
            "VirtualMedia",
        )
        .unwrap();
        Slot { data, etag: None }
    }

    #[test]
    fn cd_slots_come_before_dvd_only_ones_and_others_are_dropped() {
        let slots = vec![
            slot("/f", &["Floppy", "USBStick"]),
            slot("/d", &["DVD"]),
            slot("/c", &["CD", "DVD"]),
            slot("/c2", &["cd"]),
        ];
        let order: Vec<String> = order_slots(slots)
            .into_iter()
            .map(|s| s.data.odata_id)
            .collect();
        assert_eq!(order, ["/c", "/c2", "/d"]);
    }

    #[test]
    fn insert_bodies_go_from_full_to_transfer_method() {
        let bodies = insert_bodies("https://10.0.0.1:8443/t/rhcos-ibi.iso");
        assert_eq!(bodies.len(), 4);
        assert_eq!(bodies[0]["Inserted"], true);
        assert!(bodies[1].get("Inserted").is_none());
        assert_eq!(bodies[2]["TransferProtocolType"], "HTTPS");
        assert_eq!(bodies[3]["TransferMethod"], "Stream");
        assert_eq!(
            insert_bodies("http://x/a.iso")[2]["TransferProtocolType"],
            "HTTP"
        );
    }

    #[test]
    fn only_parameter_complaints_change_the_body() {
        let status = |code: u16, id: &str| RedfishError::Status {
            bmc: "b".into(),
            call: "c".into(),
            status: code,
            message_ids: vec![format!("Base.1.8.{id}")],
            message: String::new(),
        };
        assert!(body_was_refused(&status(400, "ActionParameterMissing")));
        assert!(body_was_refused(&status(400, "PropertyUnknown")));
        assert!(!body_was_refused(&status(400, "GeneralError")));
        assert!(!body_was_refused(&status(500, "ActionParameterMissing")));
    }
}
