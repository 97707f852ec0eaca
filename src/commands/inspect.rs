//! `ibi inspect ISO`: what an ISO is and what it carries, without printing secrets.
//!
//! Kinds: a configuration ISO (volume `cluster-config` with `cluster-configuration/manifest.json`),
//! an installation ISO (a CoreOS live ISO whose embedded config runs the IBI install unit, lca-cli's or
//! ibi's), a
//! CoreOS live ISO with some other or no embedded config, or another ISO 9660 image. For the first two,
//! what an operator checks before shipping (`config_image::summary`, `install_image::summary`), as
//! text or, with `--json`, one JSON object.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::cli::InspectOpts;
use crate::config_image;
use crate::contract::config_iso::{IDMS_PATH, LEGACY_VOLUME_LABEL, MANIFEST_PATH, VOLUME_LABEL};
use crate::install_image;
use crate::install_image::ignition::host_agent::{HOST_AGENT_DROPIN, HOST_AGENT_IMAGE_ENV};
use crate::install_image::ignition::{IBI_AGENT_UNIT, INSTALL_UNIT};
use crate::install_image::report;
use crate::iso9660::IsoReader;
use crate::live_iso::{self, LiveIsoError};
use crate::util::fs::check_input_file;
use crate::util::summary::Summary;

pub fn run(opts: &InspectOpts) -> Result<()> {
    let path = &opts.iso;
    // Any size (an ISO is gigabytes), but a regular file: a FIFO or a directory would block or
    // give an error that does not say what is wrong with the argument.
    check_input_file(path, u64::MAX)?;
    // Every problem found inside the image names the image first.
    inspect(path, opts.ignition, opts.json).with_context(|| path.display().to_string())
}

fn inspect(path: &Path, ignition: bool, json: bool) -> Result<()> {
    let file = File::open(path).context("opening the image")?;
    let mut iso = IsoReader::open(file).context("not an ISO 9660 image")?;
    let mut out = String::new();
    let mut head = Summary::default();
    head.push("volume_id", iso.volume_id());
    out.push_str(&format!("Volume id: {}\n", iso.volume_id()));
    let config_label = [VOLUME_LABEL, LEGACY_VOLUME_LABEL].contains(&iso.volume_id());
    if config_label && iso.find(MANIFEST_PATH).is_ok() {
        if ignition {
            bail!("a configuration ISO carries no Ignition config");
        }
        head.push("kind", "configuration");
        let summary = describe_config_iso(&mut iso, &mut out)?;
        head.fields.extend(summary.fields);
    } else {
        match live_iso::find_ignition_area(&mut iso) {
            Ok(area) => {
                let kargs =
                    live_iso::find_kargs(&mut iso).context("reading the kernel arguments")?;
                let mut file = iso.into_inner();
                let raw = live_iso::decode_ignition(
                    &live_iso::read_area(&mut file, &area).context("reading the Ignition area")?,
                )
                .context("decoding the Ignition area")?;
                if ignition {
                    return print_raw(raw);
                }
                let summary = describe_live_iso(raw, &area, kargs, &mut file, &mut out)?;
                head.fields.extend(summary.fields);
                // A one-shot ISO beside its site's configuration ISO: does it still carry it?
                if let Some(site) = path.parent() {
                    let site = if site.as_os_str().is_empty() {
                        Path::new(".")
                    } else {
                        site
                    };
                    install_image::one_shot_check::warn_if_mismatched(path, site, "");
                }
            }
            Err(LiveIsoError::NotCoreOs) if !ignition => {
                head.push("kind", "other");
                out.push_str("Kind: other ISO 9660 image\n")
            }
            Err(LiveIsoError::NotCoreOs) => bail!("not a CoreOS live ISO"),
            Err(e) => return Err(e).context("finding the Ignition area"),
        }
    }
    if json {
        println!("{}", head.json());
    } else {
        print!("{out}");
    }
    Ok(())
}

fn print_raw(raw: Option<Vec<u8>>) -> Result<()> {
    let raw = raw.context("no embedded Ignition config")?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(&raw)
        .and_then(|()| stdout.flush())
        .context("writing to stdout")
}

fn describe_config_iso<R: Read + Seek>(
    iso: &mut IsoReader<R>,
    out: &mut String,
) -> Result<Summary> {
    out.push_str("Kind: configuration ISO (lifecycle-agent post-pivot)\n");
    let manifest: Value = serde_json::from_slice(&iso.read_file(MANIFEST_PATH)?)
        .with_context(|| format!("{MANIFEST_PATH} is not JSON"))?;
    let idms: Option<Value> = match iso.find(IDMS_PATH) {
        Ok(_) => Some(
            serde_json::from_slice(&iso.read_file(IDMS_PATH)?)
                .with_context(|| format!("{IDMS_PATH} is not JSON"))?,
        ),
        Err(_) => None,
    };
    let summary = config_image::summary::summarize(&manifest, idms.as_ref());
    out.push_str(&summary.text());
    out.push_str("Files (contents hidden):\n");
    for e in iso.walk()? {
        let kind = if e.is_dir { "dir " } else { "file" };
        out.push_str(&format!("  {kind} {} ({} bytes)\n", e.path, e.size));
    }
    Ok(summary)
}

/// Which install unit the config carries, as `Host agent:` shows it; `None`: not an installation ISO.
fn host_agent(config: &Value) -> Option<String> {
    let units = config.pointer("/systemd/units")?.as_array()?;
    let named = |name: &str| units.iter().find(|u| u["name"] == name);
    if named(INSTALL_UNIT).is_some() {
        return Some("lca (lca-cli from the seed image)".into());
    }
    let unit = named(IBI_AGENT_UNIT)?;
    let prefix = format!("Environment={HOST_AGENT_IMAGE_ENV}=");
    let image = unit["dropins"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["name"] == HOST_AGENT_DROPIN)
        .filter_map(|d| d["contents"].as_str())
        .flat_map(str::lines)
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or("image unknown");
    Some(format!("ibi (/usr/local/bin/ibi from {image})"))
}

fn describe_live_iso<F: Read + Seek>(
    raw: Option<Vec<u8>>,
    area: &live_iso::EmbedArea,
    kargs: Option<live_iso::KargsAreas>,
    file: &mut F,
    out: &mut String,
) -> Result<Summary> {
    let mut summary = Summary::default();
    let config: Option<Value> = match &raw {
        Some(bytes) => {
            Some(serde_json::from_slice(bytes).context("the embedded config is not JSON")?)
        }
        None => None,
    };
    let agent = config.as_ref().and_then(host_agent);
    let (kind, text) = match (&config, &agent) {
        (Some(_), Some(_)) => ("installation", "installation ISO (image-based install)"),
        (Some(_), None) => (
            "live-with-config",
            "CoreOS live ISO with an embedded Ignition config",
        ),
        (None, _) => ("live", "plain CoreOS live ISO"),
    };
    summary.push("kind", kind);
    out.push_str(&format!("Kind: {text}\n"));
    if let Some(agent) = &agent {
        summary.push("host_agent", agent.as_str());
        out.push_str(&format!("Host agent: {agent}\n"));
    }
    if let (Some(c), Some(_)) = (&config, &agent) {
        let install = install_image::summary::summarize(c);
        out.push_str("Installation:\n");
        out.push_str(&install.text());
        summary.fields.extend(install.fields);
    }
    out.push_str(&format!(
        "Ignition embed area: {} bytes at offset {}\n",
        area.length, area.offset
    ));
    match kargs {
        Some(k) => {
            let current = live_iso::read_kargs(file, &k)?;
            out.push_str(&format!("Live kernel arguments: {current}\n"));
            if current != k.default {
                out.push_str(&format!("Default kernel arguments: {}\n", k.default));
            }
        }
        None => out.push_str("Live kernel arguments: not modifiable (no kargs.json)\n"),
    }
    if let Some(c) = &config {
        out.push_str(&report::describe(c));
    }
    Ok(summary)
}
