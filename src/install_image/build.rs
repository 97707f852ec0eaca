//! Building the installation ISO `DIR/rhcos-ibi.iso` (`ibi create image`).
//!
//! Order: validate the inputs (every finding at once); check the seed through its registry or
//! OCI layout (so a wrong seed version or partition label fails here, not on the factory floor);
//! get the base ISO and find its embed areas; render the Ignition config; then copy the base ISO
//! to a temp file beside the output (copy_file_range), rewrite only the embed area and karg
//! slots, and rename. Memory stays flat whatever the ISO's size.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use tracing::warn;

use super::base_iso::{self, BaseIsoOptions};
use super::ignition::status_report::StatusReportInputs;
use super::ignition::{InstallationIgnitionInputs, build_installation_ignition};
use super::report;
use super::site_tree::{SiteTree, read_site_tree};
use super::status_token;
use super::variant;
use crate::config::{
    self, Finding, HostAgent, IMAGE_BASED_INSTALLATION_CONFIG_FILE, InstallationConfig,
    ValidationError,
};
use crate::ignition;
use crate::iso9660::IsoReader;
use crate::live_iso::{self, EmbedArea, KargsAreas, LiveIsoError, Patch};
use crate::seed::{
    self, Pairing, PairingInputs, SeedCheck, SeedEvidence, SeedExpectations, SeedReference,
};
use crate::util::fs::{Clobber, SECRET_FILE_MODE, write_atomic_with};
use crate::util::progress;
use crate::util::text::escape_control;

/// The installer's output name; docs and lifecycle-agent tooling refer to it.
pub const OUTPUT_FILE: &str = "rhcos-ibi.iso";
/// How many of the biggest files a "config too large" error names.
const TOO_LARGE_CONTRIBUTORS: usize = 3;

/// What `create image` takes besides the directory's files.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// Holds image-based-installation-config.yaml (and post.sh); receives the ISO.
    pub dir: PathBuf,
    /// A path or URL (`--base-iso`).
    pub base_iso: Option<String>,
    pub base_iso_sha256: Option<String>,
    /// CoreOS stream metadata, a file or URL (`--coreos-stream`).
    pub coreos_stream: Option<String>,
    /// The release payload whose CoreOS stream names the base ISO (`--release-image`); default: the
    /// one in the seed's containers.list.
    pub release_image: Option<String>,
    pub insecure_registry: Vec<String>,
    pub skip_seed_checks: bool,
    pub no_pin_seed: bool,
    /// Accept a base ISO whose Ignition area is not empty.
    pub force: bool,
    /// Write only the patch `ibi serve` streams the ISO from (`--patch-only`).
    pub patch_only: bool,
    /// A one-shot ISO for this site directory (`--site`): it carries the site's configuration tree
    /// and is written to `SITE/rhcos-ibi.iso`.
    pub site: Option<PathBuf>,
}

/// Builds `DIR/rhcos-ibi.iso` and returns its path; with `patch_only`, writes the patch `ibi serve`
/// streams the same bytes from instead.
pub fn build(opts: &BuildOptions) -> Result<PathBuf> {
    if opts.patch_only && opts.site.is_some() {
        bail!(
            "--patch-only does not take --site: a one-shot ISO is written whole; to stream each site's over one installation ISO, build it without --site and use `ibi deploy --phase oneshot` or `ibi serve --one-shot`"
        );
    }
    let plan = plan(opts)?;
    if opts.patch_only {
        let out = opts.dir.join(variant::RECIPE_FILE);
        variant::write_recipe(&out, &plan.base, &plan.patches)?;
        return Ok(out);
    }
    let out = opts.site.as_deref().unwrap_or(&opts.dir).join(OUTPUT_FILE);
    write_output(&plan.base, &out, &plan.patches)?;
    Ok(out)
}

/// The base ISO and the patches that make it `rhcos-ibi.iso`: the one source of the bytes that both
/// the written file and `ibi serve`'s stream are made of.
pub struct ImagePlan {
    pub base: PathBuf,
    pub patches: Vec<Patch>,
}

/// Validates, checks the seed, gets the base ISO and renders the patches; writes nothing.
pub fn plan(opts: &BuildOptions) -> Result<ImagePlan> {
    let dir = &opts.dir;
    let inputs = config::load_installation_inputs(dir)?;
    for w in &inputs.warnings {
        warn!("{w}");
    }
    let cfg = &inputs.config;
    // A local file: a site not built yet fails before any registry or download is waited on.
    let site = opts
        .site
        .as_deref()
        .map(|s| one_shot_tree(cfg, s))
        .transpose()?;
    let base_options = base_iso_options(cfg, opts);
    // Before the seed check, which may wait on a registry: a typo here should not cost that wait.
    base_iso::check_options(&base_options)?;
    if let Some(r) = &opts.release_image {
        seed::parse_seed_reference(r).map_err(|e| anyhow::anyhow!("--release-image: {e}"))?;
    }
    let (seed_image, evidence) = checked_seed_image(cfg, opts)?;
    let host_agent_ibi = matches!(cfg.host_agent(), HostAgent::Ibi { .. });
    for w in seed::defect_warnings(&cfg.seed_version, &evidence, host_agent_ibi) {
        warn!("{}", w.short);
        tracing::info!("{}", w.detail);
    }
    let base = fetch_base_iso(cfg, opts, base_options)?;
    let layout = BaseLayout::read(&base, opts.force)?;
    check_pairing(cfg, opts, &base, &layout.volume_id, &evidence)?;
    let mut ign_inputs = ignition_inputs(cfg, inputs.post_sh.clone(), seed_image)?;
    ign_inputs.status_report = status_report_inputs(&inputs, dir)?;
    ign_inputs.site = site;
    let config = build_installation_ignition(&ign_inputs)?;
    let json = ignition::to_json(&config)?;
    let way_out = ign_inputs.site.as_ref().map(|t| too_large_way_out(cfg, t));
    let ignition = ignition_patch(&json, &layout.ignition, &base, way_out.as_deref())?;
    if let Some(tree) = &ign_inputs.site {
        // A warning, not information: the medium now holds the site's secrets.
        warn!("{}", one_shot_room(tree, &ignition, layout.ignition.length));
    }
    let mut patches = vec![ignition];
    patches.extend(kargs_patches(&layout, &cfg.live_kernel_args)?);
    Ok(ImagePlan { base, patches })
}

/// Runs the seed checks and returns the seed reference the host will pull (pinned by digest
/// unless `--no-pin-seed`, so a moving tag cannot change what the factory installs) and what the
/// seed shows of the lifecycle-agent build that generated it.
fn checked_seed_image(
    cfg: &InstallationConfig,
    opts: &BuildOptions,
) -> Result<(String, SeedEvidence)> {
    let reference = seed::parse_seed_reference(&cfg.seed_image).map_err(|e| {
        let finding = finding("seedImage", e.to_string());
        anyhow::Error::new(ValidationError {
            findings: vec![finding],
        })
    })?;
    if let SeedReference::OciLayout { .. } = reference {
        warn!(seed = %cfg.seed_image, "seedImage is a local OCI layout: the host must be able to read it at that path");
    }
    let registry = seed::registry_options(cfg, opts.insecure_registry.clone())
        .map_err(|e| anyhow::anyhow!("{IMAGE_BASED_INSTALLATION_CONFIG_FILE}: pullSecret: {e}"))?;
    let info = match seed::inspect_seed(&reference, cfg.architecture(), &registry) {
        Ok(info) => info,
        Err(e) if opts.skip_seed_checks => {
            warn!("seed checks skipped: {e:#}");
            return Ok((cfg.seed_image.clone(), SeedEvidence::default()));
        }
        Err(e) => {
            return Err(e.context(format!(
                "checking the seed image {} (--skip-seed-checks builds without it)",
                cfg.seed_image
            )));
        }
    };
    report_seed_findings(
        seed::check_seed(&info, &SeedExpectations::from_installation(cfg)),
        opts,
    )?;
    let evidence =
        seed::defects::seed_evidence(&info, &cfg.seed_image, cfg.architecture(), &registry);
    let image = match info.pinned_reference {
        Some(pinned) if !opts.no_pin_seed => pinned,
        _ => cfg.seed_image.clone(),
    };
    Ok((image, evidence))
}

/// Refuses a base ISO the seed's own lca-cli cannot install from (before anything is written), and
/// warns about a pairing openshift-install would not make; `--skip-seed-checks` makes a refusal a
/// warning.
fn check_pairing(
    cfg: &InstallationConfig,
    opts: &BuildOptions,
    base: &Path,
    volume_id: &str,
    evidence: &SeedEvidence,
) -> Result<()> {
    let iso = format!("{} ({})", escape_control(volume_id), base.display());
    let start = cfg.extra_partition_start();
    let pairing = seed::live_iso_pairing(&PairingInputs {
        seed_version: &cfg.seed_version,
        iso: &iso,
        iso_rhel: base_iso::rhel_of_volume_id(volume_id),
        extra_partition_start: start,
        host_agent_lca: matches!(cfg.host_agent(), HostAgent::Lca),
        evidence,
    });
    match pairing {
        Pairing::Fine => Ok(()),
        Pairing::Warn(m) => {
            warn!("{m}");
            Ok(())
        }
        Pairing::Refuse(m) if opts.skip_seed_checks => {
            warn!("seed check (skipped): {m}");
            Ok(())
        }
        Pairing::Refuse(m) => bail!("{m} (--skip-seed-checks builds it anyway)"),
    }
}

fn report_seed_findings(found: Vec<seed::SeedFinding>, opts: &BuildOptions) -> Result<()> {
    if found.is_empty() {
        return Ok(());
    }
    if opts.skip_seed_checks {
        for f in &found {
            warn!("seed check (skipped): {f}");
        }
        return Ok(());
    }
    let findings = found
        .into_iter()
        .map(|f| finding(seed_check_field(f.check), f.message))
        .collect();
    Err(ValidationError { findings }.into())
}

/// The config field a seed mismatch is about, so the user knows what to edit.
fn seed_check_field(check: SeedCheck) -> &'static str {
    match check {
        SeedCheck::FormatVersion | SeedCheck::ClusterInfo => "seedImage",
        SeedCheck::OcpVersion => "seedVersion",
        SeedCheck::Architecture => "architecture",
        SeedCheck::PartitionLabel => "extraPartitionLabel",
    }
}

fn finding(field: &str, message: String) -> Finding {
    Finding {
        file: IMAGE_BASED_INSTALLATION_CONFIG_FILE.to_string(),
        field: field.to_string(),
        message,
        line: None,
    }
}

fn base_iso_options(cfg: &InstallationConfig, opts: &BuildOptions) -> BaseIsoOptions {
    BaseIsoOptions {
        base_iso: opts.base_iso.clone(),
        base_iso_sha256: opts.base_iso_sha256.clone(),
        coreos_stream: opts.coreos_stream.clone(),
        architecture: cfg.architecture().to_string(),
        ..Default::default()
    }
}

fn fetch_base_iso(
    cfg: &InstallationConfig,
    opts: &BuildOptions,
    mut o: BaseIsoOptions,
) -> Result<PathBuf> {
    if !base_iso::has_source(&o) {
        let (origin, stream) = release_stream(cfg, opts).map_err(|e| {
            anyhow::anyhow!(
                "no base ISO given, and the seed's release payload gave none ({e:#}); {}; or name a \
                 reachable release payload with --release-image REF",
                base_iso::THREE_WAYS
            )
        })?;
        match &stream.name {
            Some(name) => tracing::info!("base ISO from the CoreOS stream {name} of {origin}"),
            None => tracing::info!("base ISO from the CoreOS stream of {origin}"),
        }
        o.stream_json = Some((origin, stream.json));
    }
    let source = base_iso::resolve_source(&o)?;
    base_iso::fetch(&source, &o).context("getting the base ISO")
}

/// The CoreOS stream of the release payload (`--release-image`, else the seed's) and where it came from.
fn release_stream(
    cfg: &InstallationConfig,
    opts: &BuildOptions,
) -> Result<(String, base_iso::release::BootStream)> {
    let registry =
        seed::registry_options(cfg, opts.insecure_registry.clone()).map_err(anyhow::Error::msg)?;
    let arch = cfg.architecture();
    let release = match &opts.release_image {
        Some(r) => r.clone(),
        None => base_iso::release::seed_release(&cfg.seed_image, arch, &registry)?,
    };
    let stream = base_iso::release::release_stream(&release, arch, &registry, &cfg.seed_version)?;
    Ok((release, stream))
}

/// Where the base ISO's embed areas are, found before anything is written.
struct BaseLayout {
    /// The ISO 9660 volume ID (`rhcos-<release>` on RHCOS): which OS the live ISO boots.
    volume_id: String,
    ignition: EmbedArea,
    kargs: Option<(KargsAreas, String)>,
}

impl BaseLayout {
    fn read(base: &Path, force: bool) -> Result<Self> {
        let file = File::open(base).with_context(|| format!("opening {}", base.display()))?;
        let mut iso =
            IsoReader::open(file).with_context(|| format!("reading {}", base.display()))?;
        let volume_id = iso.volume_id().to_string();
        let ignition = live_iso::find_ignition_area(&mut iso)
            .with_context(|| format!("{} is not a CoreOS live ISO", base.display()))?;
        let kargs_areas = live_iso::find_kargs(&mut iso)
            .with_context(|| format!("reading the kernel-argument areas of {}", base.display()))?;
        let mut file = iso.into_inner();
        if live_iso::is_customized(&mut file, &ignition)? && !force {
            bail!(
                "{} already carries an Ignition config (use --force to replace it)",
                base.display()
            );
        }
        let kargs = match kargs_areas {
            Some(areas) => {
                let current = live_iso::read_kargs(&mut file, &areas)?;
                Some((areas, current))
            }
            None => None,
        };
        Ok(Self {
            volume_id,
            ignition,
            kargs,
        })
    }
}

/// `--site`: the site's tree, read from its configuration ISO, for a seed whose lifecycle-agent
/// honours a pre-placed `/opt/openshift/cluster-configuration` (post-pivot) and runs `post.sh` after
/// the restore (`lca-cli ibi`), both from 4.16 (`seed::ONE_SHOT_SINCE`).
fn one_shot_tree(cfg: &InstallationConfig, site: &Path) -> Result<SiteTree> {
    match config::parse_minor_version(&cfg.seed_version) {
        Some(v) if v >= seed::ONE_SHOT_SINCE => {}
        _ => bail!(
            "--site: seedVersion {:?} is not {} or later, the first lifecycle-agent whose post-pivot \
             takes a pre-placed /opt/openshift/cluster-configuration",
            escape_control(&cfg.seed_version),
            seed::ONE_SHOT_SINCE
        ),
    }
    let tree = read_site_tree(site)?;
    check_tree_fits(cfg, &tree)?;
    Ok(tree)
}

/// The Ignition embed area of every CoreOS live ISO known (reference, interop item 11).
const KNOWN_IGNITION_AREA: u64 = 256 * 1024;

/// A tree that does not fit the embed area even alone, compressed as the ISO's config would be,
/// is refused here, in a second, before the seed checks and the base ISO (minutes, and a download):
/// the rest of the config only adds to it.
fn check_tree_fits(cfg: &InstallationConfig, tree: &SiteTree) -> Result<()> {
    let mut alone = ignition::types::Config::default();
    super::ignition::one_shot::add_site_tree(&mut alone, tree);
    let json = ignition::to_json(&alone)?;
    match live_iso::encode_ignition(&json, KNOWN_IGNITION_AREA) {
        Ok(_) => Ok(()),
        Err(LiveIsoError::TooLarge { .. }) => bail!(
            "--site {}: the site's configuration is {} bytes uncompressed and, compressed, does not fit \
             the {KNOWN_IGNITION_AREA}-byte Ignition embed area of a CoreOS live ISO even without the \
             rest of the installation config{}",
            tree.site.display(),
            tree.bytes(),
            too_large_way_out(cfg, tree)
        ),
        Err(e) => Err(e.into()),
    }
}

/// What a user does with a site too large for a one-shot ISO (docs/create-image.md): have it fetched
/// at install time by `ibi deploy --phase oneshot` (which takes `hostAgent: ibi` and `statusURL`),
/// or use the two phases.
fn too_large_way_out(cfg: &InstallationConfig, tree: &SiteTree) -> String {
    let mut missing = Vec::new();
    if !matches!(cfg.host_agent(), HostAgent::Ibi { .. }) {
        missing.push("hostAgent: ibi");
    }
    if cfg.status_url.is_empty() {
        missing.push("statusURL");
    }
    let needs = match missing.is_empty() {
        true => "which this installation config allows".to_string(),
        false => format!(
            "which needs {} in {IMAGE_BASED_INSTALLATION_CONFIG_FILE}",
            missing.join(" and ")
        ),
    };
    format!(
        "; a site this large is installed by `ibi deploy --phase oneshot`, whose host fetches its \
         configuration ISO at install time ({needs}), or in two phases: the installation ISO, then \
         the configuration ISO {}",
        tree.site
            .join(crate::contract::config_iso::ISO_FILE_NAME)
            .display()
    )
}

/// What the site's tree takes and what room the embed area has left, for the log.
fn one_shot_room(tree: &SiteTree, patch: &Patch, area: u64) -> String {
    // xz ends with its footer magic, never with zeros: the last non-zero byte ends the payload.
    let used = patch
        .data
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |i| i + 1) as u64;
    format!(
        "one-shot ISO for {}: it carries the site's configuration and secrets (private keys, pull \
         secret), {} files, {} bytes; the compressed Ignition config takes {used} of the {area}-byte \
         embed area, {} bytes left",
        tree.site.display(),
        tree.files.len(),
        tree.bytes(),
        area.saturating_sub(used)
    )
}

/// The compressed config for the embed area; too large names the sizes and the biggest files.
fn ignition_patch(
    json: &[u8],
    area: &EmbedArea,
    base: &Path,
    site_way_out: Option<&str>,
) -> Result<Patch> {
    match live_iso::encode_ignition(json, area.length) {
        Ok(data) => Ok(Patch {
            offset: area.offset,
            data,
        }),
        Err(e @ LiveIsoError::TooLarge { .. }) => {
            let value: serde_json::Value =
                serde_json::from_slice(json).context("re-reading the generated config")?;
            let biggest = report::biggest_files(&value, TOO_LARGE_CONTRIBUTORS).join(", ");
            let site = site_way_out.unwrap_or_default();
            Err(anyhow::Error::new(e)).with_context(|| {
                format!(
                    "embedding the Ignition config into {} (biggest files: {biggest}; post.sh, \
                     ignitionConfigOverride and additionalTrustBundle are the usual culprits{site})",
                    base.display()
                )
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// `liveKernelArgs` appended to the ISO's current live kargs, written into every slot.
fn kargs_patches(layout: &BaseLayout, extra: &[String]) -> Result<Vec<Patch>> {
    if extra.is_empty() {
        return Ok(Vec::new());
    }
    let Some((areas, current)) = &layout.kargs else {
        bail!(
            "{IMAGE_BASED_INSTALLATION_CONFIG_FILE}: liveKernelArgs: the base ISO has no kernel-argument embed area"
        );
    };
    let kargs = format!("{current} {}", extra.join(" "));
    live_iso::encode_kargs(areas, &kargs)
        .with_context(|| format!("{IMAGE_BASED_INSTALLATION_CONFIG_FILE}: liveKernelArgs"))
}

fn ignition_inputs(
    cfg: &InstallationConfig,
    post_sh: Option<Vec<u8>>,
    seed_image: String,
) -> Result<InstallationIgnitionInputs> {
    Ok(InstallationIgnitionInputs {
        seed_image,
        seed_version: cfg.seed_version.clone(),
        installation_disk: cfg.installation_disk.clone(),
        pull_secret: cfg.pull_secret.clone(),
        ssh_key: cfg.ssh_key.clone(),
        // The installer writes its defaults explicitly; so do we.
        extra_partition_start: Some(cfg.extra_partition_start().to_string()),
        extra_partition_label: Some(cfg.extra_partition_label().to_string()),
        extra_partition_number: Some(cfg.extra_partition_number()),
        shutdown: cfg.shutdown,
        skip_disk_cleanup: cfg.skip_disk_cleanup,
        coreos_installer_args: cfg.coreos_installer_args.clone(),
        release_registry: cfg.release_registry.clone(),
        precache_best_effort: cfg.precache_best_effort,
        precache_disabled: cfg.precache_disabled,
        network_config: cfg.canonical_network_config()?,
        proxy: cfg.proxy.clone(),
        image_digest_sources: cfg.image_digest_sources().to_vec(),
        additional_trust_bundle: cfg.additional_trust_bundle.clone(),
        post_sh,
        ignition_config_override: cfg.ignition_config_override().map(str::to_string),
        host_agent_image: match cfg.host_agent() {
            HostAgent::Lca => None,
            HostAgent::Ibi { image } => Some(image),
        },
        status_report: None,
        site: None,
    })
}

/// With `statusURL`: the URL, the CA and the directory's report token (drawn at the first such build
/// and kept, so `ibi serve --dir DIR` accepts every ISO built here).
fn status_report_inputs(
    inputs: &config::InstallationInputs,
    dir: &Path,
) -> Result<Option<StatusReportInputs>> {
    let cfg = &inputs.config;
    if cfg.status_url.is_empty() {
        return Ok(None);
    }
    Ok(Some(StatusReportInputs {
        url: cfg.status_url.clone(),
        token: status_token::load_or_create(dir)?,
        ca_pem: inputs.status_ca_pem.clone(),
    }))
}

/// Copies the base ISO to a temp file beside `out` (0600: it holds the pull secret), patches it
/// and renames it into place.
fn write_output(base: &Path, out: &Path, patches: &[Patch]) -> Result<()> {
    let src = File::open(base).with_context(|| format!("opening {}", base.display()))?;
    let len = src
        .metadata()
        .with_context(|| format!("reading {}", base.display()))?
        .len();
    let bar = progress::bytes_bar(len, "writing rhcos-ibi.iso");
    write_atomic_with(out, SECRET_FILE_MODE, Clobber::Replace, |dst| {
        live_iso::copy_with_patches(&src, dst, patches, &mut |n| bar.set_position(n))
            .with_context(|| format!("copying {}", base.display()))
    })?;
    bar.finish_and_clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only seeds whose post-pivot takes a pre-placed cluster-configuration (4.16 on) get a one-shot
    /// ISO; the refusal comes before the site's ISO is looked for.
    #[test]
    fn one_shot_needs_a_seed_of_4_16_or_later() {
        let site = tempfile::tempdir().unwrap();
        let cfg = |v: &str| InstallationConfig {
            seed_version: v.to_string(),
            ..Default::default()
        };
        for old in ["4.15.9", "4.x", ""] {
            let err = format!("{:#}", one_shot_tree(&cfg(old), site.path()).unwrap_err());
            assert!(
                err.contains("is not 4.16 or later, the first lifecycle-agent"),
                "{old}: {err}"
            );
        }
        for ok in ["4.16.0", "4.22.1", "5.0.0-ec.4"] {
            let err = format!("{:#}", one_shot_tree(&cfg(ok), site.path()).unwrap_err());
            assert!(
                err.contains("build the site's configuration ISO first"),
                "{ok}: {err}"
            );
        }
    }
}
