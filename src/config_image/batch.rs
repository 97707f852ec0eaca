//! Many sites in one run (`create config-image --sites`): one configuration ISO per site of an inventory,
//! into `BASE/sites/<site>/`, from the shared inputs in BASE (docs/batch.md).
//!
//! The inventory, the shared base and its extra manifests are read and checked first, then the seed of
//! `--seed` is read once: a finding or error there stops the run before anything is written. Every
//! site is checked against that seed with its own findings. Then the sites are built in parallel, each exactly as the
//! single-site command builds it, in its own directory with its own `.ibi/` identity. One site runs per
//! core with its key generation on that core alone (a lone site would use every core; a batch already
//! does), so the machine is busy without being oversubscribed. A site whose effective inputs and
//! outputs are unchanged since the last run is skipped. A failing site is reported and the others go
//! on; the run then exits 1.

use std::collections::HashSet;
use std::fs::DirBuilder;
use std::num::NonZeroUsize;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;

use anyhow::{Context, Result};
use tracing::warn;

use super::batch_state::{self, Fingerprint};
use super::build::{AUTH_DIR, KUBEADMIN_PASSWORD_FILE, KUBECONFIG_FILE, SeedOption, build_from};
use super::pki;
use super::site::{self, Origin};
use crate::config::{
    self, EXTRA_MANIFESTS_DIR, ExtraManifest, Finding, FleetBase, SiteEntry, SiteFiles,
    ValidationError,
};
use crate::contract::config_iso::ISO_FILE_NAME;
use crate::seed::preflight::{self, SiteSeed};
use crate::util::{interrupt, progress};

/// The sites' directories go under `BASE/sites/`.
pub use crate::config::SITES_DIR;
/// Site directories are made like a `--dir` a user makes; the secrets inside have their own modes.
const SITE_DIR_MODE: u32 = 0o755;
/// SOURCE_DATE_EPOCH fixes every date in the ISO, so it is an input of the outputs.
const SOURCE_DATE_EPOCH: &str = "SOURCE_DATE_EPOCH";
/// The fingerprint entry of `--seed`'s digest (not a file name, so it cannot clash with one).
const SEED_FINGERPRINT_KEY: &str = "--seed";

/// Everything the run reads before it builds a site, all checked.
struct Plan {
    inventory_file: String,
    /// The inventory, absolute, as each site's record names it.
    inventory_path: PathBuf,
    sites: Vec<SiteEntry>,
    base: FleetBase,
    manifests: Vec<ExtraManifest>,
    sites_dir: PathBuf,
    /// The outputs the batch record covers, relative to a site directory.
    outputs: Vec<String>,
    source_date_epoch: Option<String>,
    /// `--seed`, read once: every site is checked against it.
    seed: Option<SiteSeed>,
}

/// What happened to one site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Built with a new identity.
    Created,
    /// Rebuilt with the identity kept in its `.ibi/`.
    Updated,
    /// Inputs and outputs as the last run left them: not touched.
    Unchanged,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Created => "created",
            Status::Updated => "updated",
            Status::Unchanged => "unchanged",
            Status::Failed => "failed",
        }
    }
}

/// One site's result: its status, or why it failed.
pub type Outcome = Result<Status>;

/// One site of the inventory, in inventory order: its status or why it failed, and where its ISO is.
pub struct SiteResult {
    pub name: String,
    pub outcome: Outcome,
    pub iso: PathBuf,
}

/// Builds every site of `inventory` from the shared inputs in `base_dir`; a failing site does not stop
/// the others. Errors only for what stops the whole run (the inventory, the base, the seed).
pub fn build(
    base_dir: &Path,
    inventory: &Path,
    seed: Option<&SeedOption>,
) -> Result<Vec<SiteResult>> {
    let plan = load_plan(base_dir, inventory, seed)?;
    let outcomes = build_all(&plan);
    Ok(plan
        .sites
        .iter()
        .zip(outcomes)
        .map(|(site, outcome)| SiteResult {
            name: site.name.clone(),
            iso: plan.site_dir(site).join(ISO_FILE_NAME),
            outcome,
        })
        .collect())
}

/// Reads the inventory, the base and the extra manifests (their findings are reported together,
/// [`config::load_fleet`]), then the seed of `--seed`, before any site is built.
fn load_plan(base_dir: &Path, inventory: &Path, seed: Option<&SeedOption>) -> Result<Plan> {
    let fleet = config::load_fleet(base_dir, inventory, &|_, _| Vec::new())
        .map_err(config::Invalid::into_anyhow)?;
    let seed = match seed {
        Some(s) => Some(s.read(&fleet.base.install_config()?)?),
        None => None,
    };
    let identity = site::identity_path(Path::new(""));
    let outputs = [
        PathBuf::from(ISO_FILE_NAME),
        Path::new(AUTH_DIR).join(KUBECONFIG_FILE),
        Path::new(AUTH_DIR).join(KUBEADMIN_PASSWORD_FILE),
        identity,
    ]
    .iter()
    .map(|p| p.display().to_string())
    .collect();
    Ok(Plan {
        inventory_file: fleet.inventory_file,
        inventory_path: std::path::absolute(inventory).unwrap_or_else(|_| inventory.to_path_buf()),
        sites: fleet.sites,
        base: fleet.base,
        manifests: fleet.manifests,
        sites_dir: base_dir.join(SITES_DIR),
        outputs,
        source_date_epoch: std::env::var(SOURCE_DATE_EPOCH).ok(),
        seed,
    })
}

impl Plan {
    fn site_dir(&self, site: &SiteEntry) -> PathBuf {
        self.sites_dir.join(&site.name)
    }

    /// The site's effective inputs: its two rendered files, the shared extra manifests, and
    /// SOURCE_DATE_EPOCH; plus the ibi version ([`Fingerprint::new`]).
    fn fingerprint(&self, files: &SiteFiles) -> String {
        let mut fp = inputs_fingerprint(files, &self.manifests);
        if let Some(epoch) = &self.source_date_epoch {
            fp.add(SOURCE_DATE_EPOCH, epoch.as_bytes());
        }
        // A site last built unchecked, or against another seed, is checked (and rebuilt) again.
        if let Some(seed) = &self.seed {
            fp.add(SEED_FINGERPRINT_KEY, seed.digest.as_bytes());
        }
        fp.hex()
    }

    /// The site's effective inputs, validated; every finding names where to fix it.
    fn site_inputs(&self, site: &SiteEntry, files: &SiteFiles) -> Result<config::SiteInputs> {
        Ok(config::check_site_inputs(
            &self.base,
            &self.inventory_file,
            site,
            files,
            self.manifests.clone(),
        )?)
    }

    fn outputs(&self) -> Vec<&str> {
        self.outputs.iter().map(String::as_str).collect()
    }
}

/// The site's own inputs: its two rendered files and the shared extra manifests, plus the ibi
/// version; what a run's SOURCE_DATE_EPOCH and seed add is left out.
fn inputs_fingerprint(files: &SiteFiles, manifests: &[ExtraManifest]) -> Fingerprint {
    let mut fp = Fingerprint::new();
    fp.add(config::INSTALL_CONFIG_FILE, files.install_config.as_bytes());
    fp.add(
        config::IMAGE_BASED_CONFIG_FILE,
        files.image_based_config.as_bytes(),
    );
    for m in manifests {
        fp.add(&format!("{EXTRA_MANIFESTS_DIR}/{}", m.name), &m.data);
    }
    fp
}

/// Why a site built by a batch no longer matches the fleet's inputs (its inventory entry, the shared
/// base in BASE, the shared extra manifests), as one warning line: its configuration ISO was built
/// from other inputs than the ones there now. `None` when they match, or the site's record does not
/// say what it was built from (a single-site build, or a record older than this check).
pub fn inputs_changed(site_dir: &Path) -> Result<Option<String>> {
    let Some(from) = batch_state::built_from(site_dir) else {
        return Ok(None);
    };
    let (Some(name), Some(base)) = (
        site_dir.file_name().and_then(|n| n.to_str()),
        site_dir.parent().and_then(Path::parent),
    ) else {
        return Ok(None);
    };
    let rebuild = format!(
        "ibi create config-image --dir {} --sites {}",
        base.display(),
        from.inventory.display()
    );
    if !from.inventory.is_file() {
        return Ok(Some(format!(
            "{} was built from the inventory {}, which is gone: its configuration may be stale",
            site_dir.join(ISO_FILE_NAME).display(),
            from.inventory.display()
        )));
    }
    let fleet = config::load_fleet(base, &from.inventory, &|_, _| Vec::new())
        .map_err(config::Invalid::into_anyhow)?;
    let Some(site) = fleet.sites.iter().find(|s| s.name == name) else {
        return Ok(Some(format!(
            "site {name} is no longer in {}: its configuration ISO is from an earlier inventory",
            from.inventory.display()
        )));
    };
    let files = fleet.base.render(site)?;
    let now = inputs_fingerprint(&files, &fleet.manifests).hex();
    Ok((now != from.site_inputs_sha256).then(|| {
        format!(
            "the fleet's inputs of site {name} changed since {} was built (its entry in {}, the shared files in {} or its extra manifests): it carries the older configuration; run `{rebuild}` first if the change should go to the site",
            site_dir.join(ISO_FILE_NAME).display(),
            from.inventory.display(),
            base.display()
        )
    }))
}

/// Builds every site on one worker per core (fewer for fewer sites, whose key generation then gets
/// the spare cores); outcomes come back in inventory order.
fn build_all(plan: &Plan) -> Vec<Outcome> {
    let total = plan.sites.len();
    let cores = pki::all_cores();
    let workers = cores.get().min(total).max(1);
    let crypto_threads = NonZeroUsize::new(cores.get() / workers).unwrap_or(NonZeroUsize::MIN);
    let bar = progress::count_bar(total as u64, "sites");
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, Result<(Status, Vec<String>)>)>();
    let mut outcomes: Vec<Option<Outcome>> = (0..total).map(|_| None).collect();
    thread::scope(|scope| {
        for _ in 0..workers {
            let tx = tx.clone();
            let next = &next;
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(site) = plan.sites.get(i) else { break };
                    // At error level so the site's name prefixes its warnings under the default
                    // filter (a span below the filter level is not shown).
                    let span = tracing::error_span!("site", name = %site.name);
                    let built = span.in_scope(|| build_site(plan, site, crypto_threads));
                    if tx.send((i, built)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut warned = HashSet::new();
        let mut done = Vec::with_capacity(total);
        interrupt::set_message(so_far(&done, total));
        for (i, built) in rx {
            let outcome = built.map(|(status, warnings)| {
                // The shared base's warnings would repeat for every site: say each once.
                for w in warnings.into_iter().filter(|w| warned.insert(w.clone())) {
                    bar.suspend(|| {
                        warn!("{w} (site {}; a warning is shown once)", plan.sites[i].name)
                    });
                }
                status
            });
            bar.inc(1);
            done.push(outcome.as_ref().map_or(Status::Failed, |s| *s));
            interrupt::set_message(so_far(&done, total));
            outcomes[i] = Some(outcome);
        }
    });
    bar.finish_and_clear();
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Err(anyhow::anyhow!("internal: the site's worker stopped"))))
        .collect()
}

/// The batch's summary so far, printed if it is interrupted: the finished sites are complete, those
/// under way were not written.
fn so_far(done: &[Status], total: usize) -> String {
    let count = |s: Status| done.iter().filter(|d| **d == s).count();
    format!(
        "{} of {total} sites done: {} created, {} updated, {} unchanged, {} failed; the sites under way \
         were not written (run again to build them)",
        done.len(),
        count(Status::Created),
        count(Status::Updated),
        count(Status::Unchanged),
        count(Status::Failed)
    )
}

/// Renders, checks and builds one site, or finds it unchanged.
fn build_site(
    plan: &Plan,
    site: &SiteEntry,
    crypto_threads: NonZeroUsize,
) -> Result<(Status, Vec<String>)> {
    let files = plan.base.render(site)?;
    let fingerprint = plan.fingerprint(&files);
    let dir = plan.site_dir(site);
    let outputs = plan.outputs();
    if batch_state::is_current(&dir, &fingerprint, &outputs) {
        tracing::info!("unchanged since the last run");
        return Ok((Status::Unchanged, Vec::new()));
    }
    let inputs = plan.site_inputs(site, &files)?;
    if let Some(seed) = &plan.seed {
        let findings: Vec<Finding> =
            preflight::check_site(&seed.cluster_info, &inputs.install_config)
                .into_iter()
                .map(|f| config::locate_site_finding(&plan.base, &plan.inventory_file, site, f))
                .collect();
        if !findings.is_empty() {
            return Err(ValidationError { findings }.into());
        }
    }
    DirBuilder::new()
        .recursive(true)
        .mode(SITE_DIR_MODE)
        .create(&dir)
        .with_context(|| format!("creating directory {}", dir.display()))?;
    let out = build_from(&dir, &inputs, false, crypto_threads)?;
    let built_from = batch_state::BuiltFrom {
        inventory: plan.inventory_path.clone(),
        site_inputs_sha256: inputs_fingerprint(&files, &plan.manifests).hex(),
    };
    batch_state::record(&dir, &fingerprint, &outputs, &built_from)?;
    let status = match out.identity {
        Origin::Created => Status::Created,
        Origin::Reused | Origin::Rotated => Status::Updated,
    };
    Ok((status, inputs.warnings))
}
