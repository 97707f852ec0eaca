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

use super::ignition::one_shot::{carry_site, carry_site_fetch};
use super::site_tree::SiteTree;
use crate::contract::host_report::{REPORT_CONFIG_PATH, ReportConfig};
use crate::ignition::types::{Config, data_url};
use crate::iso9660::IsoReader;
use crate::live_iso::{
    EmbedArea, LiveIsoError, Patch, PatchedReader, decode_ignition, encode_ignition_compact,
    find_ignition_area, read_area,
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
    /// The config (it holds the pull secret: never print it).
    pub fn config(&self) -> &Config {
        &self.config
    }

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

    /// The patch that makes one host's variant: the ISO carrying `token` as its report token (an
    /// error when the ISO was built without `statusURL`), and for a one-shot install `site`'s
    /// configuration tree ([`carry_site`]: the same config `create image --site` builds).
    pub fn patch_for(&self, token: Option<&Secret>, site: Option<&SiteTree>) -> Result<Patch> {
        let mut config = self.config.clone();
        if let Some(token) = token {
            let Some(mut settings) = self.report_config()? else {
                bail!("the installation ISO was built without statusURL: its hosts do not report");
            };
            settings.token = token.clone();
            let mut json = serde_json::to_vec(&settings).context("encoding the report settings")?;
            json.push(b'\n');
            for f in &mut config.storage.files {
                if f.path == REPORT_CONFIG_PATH
                    && let Some(c) = f.contents.as_mut()
                {
                    c.source = Some(data_url(&json));
                }
            }
        }
        let with_token = config.clone();
        if let Some(tree) = site {
            carry_site(&mut config, tree).with_context(|| {
                format!("carrying the configuration of {}", tree.site.display())
            })?;
        }
        let encode = |config: &Config| {
            let raw = serde_json::to_vec(config).context("encoding the Ignition config")?;
            encode_ignition_compact(&raw, self.area.length).map_err(anyhow::Error::new)
        };
        let mut data = match (encode(&config), site, token) {
            (Ok(data), _, _) => data,
            // Too large to carry, and the host has its own token: it fetches the site's ISO.
            (Err(e), Some(tree), Some(_)) if too_large(&e) => {
                let mut fetch = with_token;
                carry_site_fetch(&mut fetch, tree)
                    .and_then(|()| encode(&fetch))
                    .with_context(|| {
                        format!(
                            "the configuration of {} ({} bytes uncompressed) does not fit the Ignition \
                             embed area, and the host cannot fetch it instead",
                            tree.site.display(),
                            tree.bytes()
                        )
                    })?
            }
            (Err(e), Some(tree), None) if too_large(&e) => {
                return Err(e).with_context(|| {
                    format!(
                        "embedding the host's Ignition config with the configuration of {} ({} bytes \
                         uncompressed): a tree too large for the Ignition embed area is fetched at \
                         install time only by a host with its own report token (`ibi deploy --phase \
                         oneshot` of an ISO built with statusURL and hostAgent: ibi); or use the two \
                         phases, factory and site",
                        tree.site.display(),
                        tree.bytes()
                    )
                });
            }
            (Err(e), _, _) => return Err(e).context("embedding the host's Ignition config"),
        };
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

fn too_large(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<LiveIsoError>(),
        Some(LiveIsoError::TooLarge { .. })
    )
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
        let (file, patches) = embedded_in_synthetic_iso(&config);
        (file, patches, config)
    }

    /// A synthetic live ISO and the patch that embeds `config` in its Ignition area.
    fn embedded_in_synthetic_iso(config: &Config) -> (File, Vec<Patch>) {
        let mut file = tempfile::tempfile().unwrap();
        let iso = SyntheticIso::new(IgnitionLayout::InsideFile, true);
        file.write_all(&iso.to_vec().unwrap()).unwrap();
        let mut reader = IsoReader::open(&file).unwrap();
        let area = find_ignition_area(&mut reader).unwrap();
        let data = encode_ignition(&serde_json::to_vec(config).unwrap(), area.length).unwrap();
        let patches = vec![Patch {
            offset: area.offset,
            data,
        }];
        (file, patches)
    }

    #[test]
    fn a_hosts_variant_differs_only_in_its_token() {
        let (file, patches, config) = fleet_iso(true);
        let fleet = read(&file, &patches).unwrap();
        assert_eq!(fleet.report_config().unwrap().unwrap(), settings(FLEET));
        let host = fleet.patch_for(Some(&Secret::new(HOST)), None).unwrap();
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
        let err = format!(
            "{:#}",
            fleet
                .patch_for(Some(&Secret::new(HOST)), None)
                .err()
                .unwrap()
        );
        assert!(err.contains("built without statusURL"), "{err}");
        let err = format!("{:#}", read(&file, &[]).err().unwrap());
        assert_eq!(err, "the installation ISO carries no Ignition config");
    }

    /// A fleet ISO whose config `create image` built (`hostAgent: lca`, seed 4.16, no statusURL).
    fn built_fleet_iso() -> (File, Vec<Patch>) {
        built_fleet_iso_with(None, false)
    }

    /// A fleet ISO `create image` built: `hostAgent: ibi` with `agent`, `statusURL` with `reports`.
    fn built_fleet_iso_with(agent: Option<&str>, reports: bool) -> (File, Vec<Patch>) {
        use crate::install_image::ignition::installation::{
            InstallationIgnitionInputs, build_installation_ignition,
        };
        use crate::install_image::ignition::status_report::StatusReportInputs;
        let config = build_installation_ignition(&InstallationIgnitionInputs {
            seed_image: "quay.io/example/seed@sha256:00".into(),
            seed_version: "4.16.0".into(),
            installation_disk: "/dev/vda".into(),
            host_agent_image: agent.map(str::to_string),
            status_report: reports.then(|| StatusReportInputs {
                url: "https://192.0.2.10:8443".into(),
                token: Secret::new(FLEET),
                ca_pem: None,
            }),
            ..Default::default()
        })
        .unwrap();
        embedded_in_synthetic_iso(&config)
    }

    /// Random bytes do not compress: 300 KiB cannot fit a 256 KiB area.
    /// A manifest.json too large to carry: 300 KiB of random hex in a JSON string (hex compresses
    /// to half, still more than the 256 KiB area).
    fn noise() -> Vec<u8> {
        let mut noise = vec![0u8; 300 << 10];
        openssl::rand::rand_bytes(&mut noise).unwrap();
        serde_json::to_vec(&serde_json::json!({ "noise": crate::util::digest::hex(&noise) }))
            .unwrap()
    }

    /// Too large to carry, a host with its own token and `ibi agent install` fetches the site's ISO:
    /// its variant names the ISO's size and SHA-256 instead of carrying the tree. lca-cli cannot.
    #[test]
    fn a_tree_too_large_is_fetched_by_an_ibi_host_with_its_own_token() {
        use crate::contract::config_iso::{LIVE_SITE_TREE, SITE_FETCH_PATH, SiteFetch};
        let (file, patches) = built_fleet_iso_with(Some("quay.io/x/ibi:1"), true);
        let fleet = read(&file, &patches).unwrap();
        let tree = site_tree(noise());
        let patch = fleet
            .patch_for(Some(&Secret::new(HOST)), Some(&tree))
            .unwrap();
        let got = read(&file, &with_host_patch(&patches, fleet.area(), patch)).unwrap();
        let files = &got.config.storage.files;
        let fetch = files.iter().find(|f| f.path == SITE_FETCH_PATH).unwrap();
        assert_eq!(fetch.mode, Some(0o600));
        let want: SiteFetch = serde_json::from_slice(&fetch.data().unwrap()).unwrap();
        assert_eq!(
            want,
            SiteFetch {
                size: 123_456,
                sha256: "ab".repeat(32)
            }
        );
        assert!(
            !files.iter().any(|f| f.path.starts_with(LIVE_SITE_TREE)),
            "no tree carried"
        );
        assert_eq!(
            got.report_config().unwrap().unwrap().token,
            Secret::new(HOST)
        );

        let (file, patches) = built_fleet_iso_with(None, true);
        let lca = read(&file, &patches).unwrap();
        let err = format!(
            "{:#}",
            lca.patch_for(Some(&Secret::new(HOST)), Some(&tree))
                .unwrap_err()
        );
        assert!(
            err.contains("fetched at install time by hostAgent: ibi only"),
            "{err}"
        );
    }

    fn site_tree(manifest: Vec<u8>) -> SiteTree {
        SiteTree {
            site: "sites/a17".into(),
            dirs: vec![
                "cluster-configuration".into(),
                "cluster-configuration/manifests".into(),
            ],
            files: vec![("cluster-configuration/manifest.json".into(), manifest)],
            iso_size: 123_456,
            iso_sha256: "ab".repeat(32),
        }
    }

    #[test]
    fn a_sites_variant_carries_its_tree_without_a_token_and_a_tree_too_large_is_refused() {
        let (file, patches) = built_fleet_iso();
        let fleet = read(&file, &patches).unwrap();
        let patch = fleet
            .patch_for(
                None,
                Some(&site_tree(b"{\"cluster_name\":\"a17\"}".to_vec())),
            )
            .unwrap();
        let mine = with_host_patch(&patches, fleet.area(), patch);
        let got = read(&file, &mine).unwrap();
        let carried = got
            .config
            .storage
            .files
            .iter()
            .find(|f| {
                f.path == "/var/tmp/ibi-site-configuration/cluster-configuration/manifest.json"
            })
            .expect("the tree is carried");
        assert_eq!(carried.data().unwrap(), b"{\"cluster_name\":\"a17\"}");
        assert_eq!(carried.mode, Some(0o600));
        assert!(
            got.report_config().unwrap().is_none(),
            "no token asked, none set"
        );
        let err = format!(
            "{:#}",
            fleet
                .patch_for(None, Some(&site_tree(noise())))
                .unwrap_err()
        );
        assert!(
            err.contains("sites/a17") && err.contains("use the two phases"),
            "{err}"
        );
    }
}
