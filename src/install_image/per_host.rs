//! One host's own installation ISO: the fleet's ISO (a file, or a base ISO with its patches) with
//! the Ignition config's report settings (`/var/tmp/ibi-report.json`) carrying a report token of
//! that host's own, so its reports speak for it alone. Nothing else changes: the same config, the
//! same karg slots, the same size. The result is one patch over the Ignition embed area, which
//! `ibi serve` lays over the fleet's ISO as it streams it; nothing is stored per host.
//!
//! Also what `ibi deploy` checks before it touches a BMC: the report settings the ISO carries
//! (`statusURL`, `statusCA`).

use std::fs::File;

use anyhow::{Context, Result, bail};

use crate::contract::host_report::{REPORT_CONFIG_PATH, ReportConfig};
use crate::ignition::types::{Config, data_url};
use crate::iso9660::IsoReader;
use crate::live_iso::{
    EmbedArea, Patch, PatchedReader, decode_ignition, encode_ignition_compact, find_ignition_area,
    read_area,
};
use crate::util::secret::Secret;

/// The Ignition config an installation ISO carries, and where it sits. No `Debug`: the config holds
/// the pull secret.
pub struct EmbeddedIgnition {
    area: EmbedArea,
    config: Config,
    /// How much of the area, in the file beneath the patches, is not zero: a host's patch must
    /// cover at least that much and no more (the rest of the area is zeros already).
    beneath_used: u64,
}

/// Reads the Ignition config of the ISO `file` makes with `patches` laid over it (none for an ISO
/// written out).
pub fn read(file: &File, patches: &[Patch]) -> Result<EmbeddedIgnition> {
    let reader = PatchedReader::new(file, patches).context("reading the installation ISO")?;
    let mut iso = IsoReader::open(reader).context("not an ISO 9660 image")?;
    let area = find_ignition_area(&mut iso).context("finding the Ignition area")?;
    let mut reader = iso.into_inner();
    let bytes = read_area(&mut reader, &area).context("reading the Ignition area")?;
    let mut plain = PatchedReader::new(file, &[]).context("reading the installation ISO")?;
    let beneath = read_area(&mut plain, &area).context("reading the Ignition area")?;
    let Some(raw) = decode_ignition(&bytes).context("decoding the Ignition area")? else {
        bail!("the installation ISO carries no Ignition config");
    };
    // Never quote the config in an error: it holds the pull secret.
    let config: Config = serde_json::from_slice(&raw).map_err(|e| {
        anyhow::anyhow!(
            "the installation ISO's Ignition config is not JSON Ignition reads ({:?} error at line {}, column {})",
            e.classify(),
            e.line(),
            e.column()
        )
    })?;
    Ok(EmbeddedIgnition {
        area,
        config,
        beneath_used: used(&beneath),
    })
}

/// The length of `bytes` without its zero tail, rounded up to 4 (an xz stream's alignment).
fn used(bytes: &[u8]) -> u64 {
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1) as u64;
    end.next_multiple_of(4).min(bytes.len() as u64)
}

impl EmbeddedIgnition {
    /// Its report settings, when it was built with `statusURL`.
    pub fn report_config(&self) -> Result<Option<ReportConfig>> {
        let Some(file) = self
            .config
            .storage
            .files
            .iter()
            .find(|f| f.path == REPORT_CONFIG_PATH)
        else {
            return Ok(None);
        };
        let data = file.data().with_context(|| {
            format!("{REPORT_CONFIG_PATH} in the installation ISO is not an inline data URL")
        })?;
        let config = serde_json::from_slice(&data).map_err(|e| {
            anyhow::anyhow!(
                "{REPORT_CONFIG_PATH} in the installation ISO is not ibi's report settings ({:?} error at column {})",
                e.classify(),
                e.column()
            )
        })?;
        Ok(Some(config))
    }

    /// The patch that makes the ISO carry `token` as its report token; an error when the ISO was
    /// built without `statusURL`.
    pub fn patch_for(&self, token: &Secret) -> Result<Patch> {
        let Some(mut settings) = self.report_config()? else {
            bail!("the installation ISO was built without statusURL: its hosts do not report");
        };
        settings.token = token.clone();
        let mut json = serde_json::to_vec(&settings).context("encoding the report settings")?;
        json.push(b'\n');
        let mut config = self.config.clone();
        for f in &mut config.storage.files {
            if f.path == REPORT_CONFIG_PATH
                && let Some(c) = f.contents.as_mut()
            {
                c.source = Some(data_url(&json));
            }
        }
        let raw = serde_json::to_vec(&config).context("encoding the Ignition config")?;
        let mut data = encode_ignition_compact(&raw, self.area.length)
            .context("embedding the host's Ignition config")?;
        // The area's zero fill is there beneath the patch past what was used: the patch stops at
        // the longer of the two streams (some KiB a host, not the area's 256 KiB), the same bytes.
        let keep = used(&data).max(self.beneath_used);
        data.truncate(usize::try_from(keep).unwrap_or(data.len()));
        // And holds no more: a fleet's patches live as long as the server, one per host.
        data.shrink_to_fit();
        Ok(Patch {
            offset: self.area.offset,
            data,
        })
    }

    /// Where the Ignition area is: a host's patch replaces whatever covered it.
    pub fn area(&self) -> EmbedArea {
        self.area
    }
}

/// `patches` with those over the Ignition area replaced by `host`'s.
pub fn with_host_patch(patches: &[Patch], area: EmbedArea, host: Patch) -> Vec<Patch> {
    let overlaps =
        |p: &Patch| p.offset < area.end() && p.offset + p.data.len() as u64 > area.offset;
    let mut out: Vec<Patch> = patches.iter().filter(|p| !overlaps(p)).cloned().collect();
    out.push(host);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::host_report::{DEFAULT_ATTEMPTS, DEFAULT_DELAY_SECONDS};
    use crate::ignition::types::File as IgnFile;
    use crate::live_iso::encode_ignition;
    use crate::live_iso::synthetic::{IgnitionLayout, SyntheticIso};
    use std::io::Write;

    const FLEET: &str = "0123456789abcdef0123456789abcdef";
    const HOST: &str = "fedcba9876543210fedcba9876543210";

    fn settings(token: &str) -> ReportConfig {
        ReportConfig {
            url: "https://192.0.2.10:8443".into(),
            token: Secret::new(token),
            ca_pem: Some("PEM".into()),
            attempts: DEFAULT_ATTEMPTS,
            delay_seconds: DEFAULT_DELAY_SECONDS,
        }
    }

    /// A synthetic live ISO and the patch that embeds a config with report settings (or none).
    fn fleet_iso(report: bool) -> (File, Vec<Patch>, Config) {
        let mut file = tempfile::tempfile().unwrap();
        let iso = SyntheticIso::new(IgnitionLayout::InsideFile, true);
        file.write_all(&iso.to_vec().unwrap()).unwrap();
        let mut config = Config::default();
        config.ignition.version = "3.2.0".into();
        config.storage.files.push(IgnFile::from_bytes(
            "/var/tmp/pull-secret.json",
            0o600,
            b"{\"auths\":{}}",
        ));
        if report {
            let json = serde_json::to_vec(&settings(FLEET)).unwrap();
            config
                .storage
                .files
                .push(IgnFile::from_bytes(REPORT_CONFIG_PATH, 0o600, &json));
        }
        let mut reader = IsoReader::open(&file).unwrap();
        let area = find_ignition_area(&mut reader).unwrap();
        let data = encode_ignition(&serde_json::to_vec(&config).unwrap(), area.length).unwrap();
        let patches = vec![Patch {
            offset: area.offset,
            data,
        }];
        (file, patches, config)
    }

    #[test]
    fn a_hosts_variant_differs_only_in_its_token() {
        let (file, patches, config) = fleet_iso(true);
        let fleet = read(&file, &patches).unwrap();
        assert_eq!(fleet.report_config().unwrap().unwrap(), settings(FLEET));
        let host = fleet.patch_for(&Secret::new(HOST)).unwrap();
        assert!(
            (host.data.len() as u64) < fleet.area().length / 4,
            "{} bytes: the zero fill is not carried",
            host.data.len()
        );
        assert!(
            (host.data.capacity() as u64) < fleet.area().length / 4,
            "{} bytes held: a server keeps one patch per host",
            host.data.capacity()
        );
        let mine = with_host_patch(&patches, fleet.area(), host.clone());
        // The same bytes as the whole area's patch: zeros past the patch.
        let mut whole = vec![0u8; fleet.area().length as usize];
        let mut reader = PatchedReader::new(&file, &mine).unwrap();
        use std::io::{Read, Seek, SeekFrom};
        reader.seek(SeekFrom::Start(fleet.area().offset)).unwrap();
        reader.read_exact(&mut whole).unwrap();
        assert_eq!(&whole[..host.data.len()], &host.data[..]);
        assert!(whole[host.data.len()..].iter().all(|&b| b == 0));
        assert_eq!(mine.len(), 1, "the fleet's Ignition patch is replaced");
        let got = read(&file, &mine).unwrap();
        assert_eq!(got.report_config().unwrap().unwrap(), settings(HOST));
        let mut want = config.clone();
        want.storage.files.pop();
        let mut rest = got.config.clone();
        rest.storage.files.retain(|f| f.path != REPORT_CONFIG_PATH);
        assert_eq!(rest, want, "everything else is the fleet's");
    }

    #[test]
    fn an_iso_without_status_url_has_no_settings_and_no_host_variant() {
        let (file, patches, _) = fleet_iso(false);
        let fleet = read(&file, &patches).unwrap();
        assert!(fleet.report_config().unwrap().is_none());
        let err = format!("{:#}", fleet.patch_for(&Secret::new(HOST)).err().unwrap());
        assert!(err.contains("built without statusURL"), "{err}");
        let err = format!("{:#}", read(&file, &[]).err().unwrap());
        assert_eq!(err, "the installation ISO carries no Ignition config");
    }
}
