//! What a deploy works on, all read and checked before a BMC is touched: the inventory and the
//! sites `--only` picks, each site's BMC (a site whose BMC cannot be used fails alone), and what the
//! phase serves: the installation ISO for the factory, each site's configuration ISO for the site.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use reqwest::Url;

use crate::config::{self, SiteEntry};
use crate::config_image::batch;
use crate::contract::config_iso::ISO_FILE_NAME;
use crate::deliver::deploy_state::Phase;
use crate::deliver::serve::Source;
use crate::deliver::serve::TlsChoice;
use crate::deliver::serve::catalog::{Alias, INSTALLATION_ISO, installation_source};
use crate::install_image::per_host;
use crate::install_image::site_tree::read_site_tree;
use crate::install_image::variant::{RECIPE_FILE, load_recipe};
use crate::redfish::{ClientOptions, Credentials, RetryPolicy, Trust};
use crate::util::secret::Secret;
use crate::util::text::escape_control;

/// One BMC request's bound; the insert (during which BMCs may download the image) gets the
/// whole BMC job's timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct DeployOptions {
    pub base: PathBuf,
    pub inventory: PathBuf,
    pub phase: Phase,
    /// Only these sites (empty: every site of the inventory).
    pub only: Vec<String>,
    /// These sites start the phase over, booted again even if they were booted (or done) before.
    pub redo: Vec<String>,
    /// BMC jobs (and so downloads) at once.
    pub parallel: usize,
    pub listen: std::net::SocketAddr,
    pub tls: TlsChoice,
    pub public_url: Option<Url>,
    /// Also serve the live status page (`--dashboard`).
    pub dashboard: bool,
    pub timeouts: Timeouts,
}

#[derive(Debug, Clone)]
pub struct Timeouts {
    /// One BMC job: power off, eject, insert (with its download), boot override, power on.
    pub bmc: Duration,
    /// Factory: from the boot to the host's final report (or its power going off).
    pub report: Duration,
    /// Site: from the boot to the cluster ready.
    pub watch: Duration,
    /// Between two looks at the reports, the host's power or the cluster.
    pub poll: Duration,
}

/// How to reach one site's BMC.
#[derive(Debug, Clone)]
pub struct Bmc {
    pub url: Url,
    pub system: Option<String>,
    pub client: ClientOptions,
}

/// One site of the run.
#[derive(Debug)]
pub struct Target {
    pub name: String,
    /// `BASE/sites/<name>`.
    pub dir: PathBuf,
    /// The BMC's address as the inventory gives it (for the table and the record).
    pub address: String,
    /// Its BMC, or why it cannot be used (the site fails, the others go on).
    pub bmc: Result<Bmc, String>,
    /// The name the server serves this site's image under.
    pub alias: Alias,
    /// What the inventory's decoding found wrong in this site's entry (each rendered with file,
    /// line and field): the entry is not what the user meant, so nothing else of it is checked.
    pub inventory: Vec<String>,
}

/// The sites of a run, and what the inventory's decoding found that names no site.
pub struct Planned {
    pub targets: Vec<Target>,
    pub fleet_findings: Vec<String>,
}

/// What the factory phase knows of the installation ISO's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostSignals {
    /// `statusURL` is set: the host reports to the server.
    pub reports: bool,
    /// `shutdown: true`: the host powers off when it is done.
    pub shutdown: bool,
}

/// The inventory's sites `--only` picks, in inventory order, with their BMCs, and what its decoding
/// found (by site where the finding names one), so the pre-flight reports it with everything else.
pub fn targets(o: &DeployOptions) -> Result<Planned> {
    let (inventory, findings) = config::load_inventory_with_findings(&o.inventory)?;
    let mut fleet_findings = Vec::new();
    let mut by_site: Vec<Vec<String>> = vec![Vec::new(); inventory.sites.len()];
    for f in &findings {
        match entry_index(&f.field).and_then(|i| by_site.get_mut(i)) {
            Some(mine) => mine.push(f.to_string()),
            None => fleet_findings.push(f.to_string()),
        }
    }
    for (flag, names) in [("--only", &o.only), ("--redo", &o.redo)] {
        let unknown: Vec<&str> = names
            .iter()
            .filter(|n| !inventory.sites.iter().any(|s| &s.name == *n))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            bail!(
                "{flag} {}: not a site of {}",
                unknown.join(", "),
                o.inventory.display()
            );
        }
    }
    let left_out: Vec<&str> = o
        .redo
        .iter()
        .filter(|n| !o.only.is_empty() && !o.only.contains(n))
        .map(String::as_str)
        .collect();
    if !left_out.is_empty() {
        bail!(
            "--redo {}: not among the --only sites of this run",
            left_out.join(", ")
        );
    }
    let targets = inventory
        .sites
        .iter()
        .zip(by_site)
        .filter(|(s, _)| o.only.is_empty() || o.only.contains(&s.name))
        .map(|(s, found)| Target {
            inventory: found,
            ..target(o, s)
        })
        .collect();
    Ok(Planned {
        targets,
        fleet_findings,
    })
}

/// The entry a finding's field names: `sites[3].bmc (site a17)` → 3.
fn entry_index(field: &str) -> Option<usize> {
    field
        .strip_prefix("sites[")?
        .split(']')
        .next()?
        .parse()
        .ok()
}

fn target(o: &DeployOptions, site: &SiteEntry) -> Target {
    let of = match o.phase {
        Phase::Factory | Phase::Oneshot => INSTALLATION_ISO.to_string(),
        Phase::Site => format!("{}/{}/{ISO_FILE_NAME}", batch::SITES_DIR, site.name),
    };
    let dir = o.base.join(batch::SITES_DIR).join(&site.name);
    Target {
        name: site.name.clone(),
        dir: dir.clone(),
        address: site.bmc.as_ref().map_or("-".into(), |b| b.address.clone()),
        bmc: bmc(&o.inventory, site).map_err(|e| format!("{e:#}")),
        alias: Alias {
            // The factory's ISO is one file for all hosts: each gets its own name, URL and count.
            name: match o.phase {
                Phase::Factory => format!("deploy/{}/{INSTALLATION_ISO}", site.name),
                // Its own name, so its own token and URL: this variant carries the site's secrets.
                Phase::Oneshot => format!("deploy/{}/oneshot/{INSTALLATION_ISO}", site.name),
                Phase::Site => of.clone(),
            },
            of,
            host: None,
            site: (o.phase == Phase::Oneshot).then_some(dir),
        },
        inventory: Vec::new(),
    }
}

fn bmc(inventory: &Path, site: &SiteEntry) -> Result<Bmc> {
    let Some(entry) = &site.bmc else {
        bail!(
            "{}: missing: deploy drives the site's host through its BMC (bmc: with address, user, passwordFile or passwordEnv, caFile or insecure)",
            site.located(inventory, "bmc")
        );
    };
    let url = Url::parse(&entry.address)
        .with_context(|| format!("{}: {}", inventory.display(), site.field("bmc.address")))?;
    let trust = match (site.bmc_ca(inventory)?, entry.insecure) {
        (Some(pem), _) => Trust::Ca(pem),
        (None, true) => Trust::Insecure,
        (None, false) => Trust::System,
    };
    let credentials = match (&entry.user, site.bmc_password(inventory)?) {
        (Some(user), Some(password)) => Some(Credentials {
            user: user.clone(),
            password,
        }),
        _ => None,
    };
    Ok(Bmc {
        url,
        system: entry.system.clone(),
        client: ClientOptions {
            trust,
            credentials,
            request_timeout: REQUEST_TIMEOUT,
            retry: RetryPolicy::default(),
            label: Some(format!("site {}", escape_control(&site.name))),
        },
    })
}

/// The factory serves BASE's installation ISO, which deploy does not build: it is one build for the
/// whole fleet with its own inputs (the base ISO, the seed), made once on purpose. Its settings say
/// how deploy hears that a host is done; with neither reports nor a shutdown it could not tell.
pub fn factory_signals(base: &Path) -> Result<HostSignals> {
    if !base.join(INSTALLATION_ISO).is_file() && !base.join(RECIPE_FILE).is_file() {
        bail!(
            "{} has no installation ISO ({INSTALLATION_ISO} or {RECIPE_FILE}): build it first with `ibi create image --dir {}` (add --patch-only to keep one base ISO on disk)",
            base.display(),
            base.display()
        );
    }
    let inputs = config::load_installation_inputs(base)?;
    let signals = HostSignals {
        reports: !inputs.config.status_url.is_empty(),
        shutdown: inputs.config.shutdown,
    };
    if !signals.reports && !signals.shutdown {
        bail!(
            "{}: neither statusURL nor shutdown: true: deploy cannot tell when a host is done; set statusURL (this server's address, e.g. https://192.0.2.10:8443) and rebuild with `ibi create image`",
            base.join(config::IMAGE_BASED_INSTALLATION_CONFIG_FILE)
                .display()
        );
    }
    Ok(signals)
}

/// The site phase builds the configuration ISOs that are missing with the batch builder (which
/// leaves unchanged sites alone); a site whose build fails fails alone.
pub fn build_missing(o: &DeployOptions, targets: &[Target]) -> Result<Vec<(String, String)>> {
    let missing: Vec<&str> = targets
        .iter()
        .filter(|t| !t.dir.join(ISO_FILE_NAME).is_file())
        .map(|t| t.name.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(Vec::new());
    }
    // Tens of seconds for a few sites: the user hears what deploy does meanwhile, and where.
    let shown: Vec<String> = missing.iter().take(10).map(|n| escape_control(n)).collect();
    let more = missing.len().saturating_sub(shown.len());
    eprintln!(
        "deploy: building the configuration ISO of {} site(s) that have none ({}{}) under {} (ibi create config-image --sites, which leaves built sites alone)",
        missing.len(),
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        },
        o.base.join(batch::SITES_DIR).display()
    );
    let started = std::time::Instant::now();
    let results = batch::build(&o.base, &o.inventory, None)?;
    eprintln!(
        "deploy: configuration ISOs built in {} s",
        started.elapsed().as_secs()
    );
    Ok(results
        .into_iter()
        .filter_map(|r| {
            r.outcome
                .err()
                .map(|e| (r.name, format!("building its configuration ISO: {e:#}")))
        })
        .collect())
}

/// One-shot: the sites (among those whose configuration ISO is built) whose variant of the
/// installation ISO cannot be made, with why: a seed before 4.16, a tree too large for the embed
/// area, a configuration ISO that is not one. Made here, before any host is touched, the same way
/// the server makes it for the BMC.
pub fn oneshot_failures(base: &Path, targets: &[&Target]) -> Result<Vec<(String, String)>> {
    let Some(source) = installation_source(base)? else {
        return Ok(Vec::new());
    };
    let embedded = match &source {
        Source::Variant(recipe) => {
            let r = load_recipe(recipe)?;
            per_host::read(&File::open(&r.base.path)?, &r.patches)?
        }
        src => per_host::read(&File::open(src.path())?, &[])?,
    };
    // With reports, each host gets its own token (which also lets a tree too large for the ISO be
    // fetched): a stand-in of the same length makes the same variant.
    let token = embedded
        .report_config()?
        .map(|_| Secret::new("0".repeat(32)));
    let mut failed = Vec::new();
    for t in targets {
        if !t.dir.join(ISO_FILE_NAME).is_file() {
            continue;
        }
        let made =
            read_site_tree(&t.dir).and_then(|tree| embedded.patch_for(token.as_ref(), Some(&tree)));
        if let Err(e) = made {
            failed.push((
                t.name.clone(),
                format!("its one-shot installation ISO cannot be made: {e:#}"),
            ));
        }
    }
    Ok(failed)
}

/// The error of a site whose image is not there to serve.
pub fn missing_image(t: &Target, base: &Path) -> Option<String> {
    let path = base.join(&t.alias.of);
    let present =
        path.is_file() || (t.alias.of == INSTALLATION_ISO && base.join(RECIPE_FILE).is_file());
    (!present).then(|| format!("{} is missing", path.display()))
}
