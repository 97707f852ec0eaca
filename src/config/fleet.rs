//! A whole fleet read at once: the inventory, the shared base in BASE and its extra manifests, each
//! site rendered and checked, every finding of all of them reported together (as one
//! [`ValidationError`]) before any command writes anything. `create config-image --sites` and
//! `create hub-manifests` both start here; a command may add its own per-site rules
//! ([`SiteRules`]), whose findings join the others.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use tracing::warn;

use super::finding::Invalid;
use super::inventory::{SiteEntry, load_inventory_with_findings};
use super::inventory_locate::site_inputs;
use super::inventory_render::{FleetBase, load_fleet_base};
use super::manifests::{EXTRA_MANIFESTS_DIR, ExtraManifest, load_extra_manifests};
use super::site::SiteInputs;
use crate::util::finding::{Finding, ValidationError};

/// `create config-image --sites` builds each site in `BASE/sites/<site>/`; `create hub-manifests`
/// reads a built site's identity there.
pub const SITES_DIR: &str = "sites";

/// A command's own rules for one inventory entry; `inventory` names the file in findings.
pub type SiteRules<'a> = &'a dyn Fn(&SiteEntry, &str) -> Vec<Finding>;

/// The inventory, the base and the extra manifests, all checked.
#[derive(Debug, Clone)]
pub struct Fleet {
    /// How findings name the inventory (its path as given).
    pub inventory_file: String,
    pub sites: Vec<SiteEntry>,
    pub base: FleetBase,
    pub manifests: Vec<ExtraManifest>,
    /// BASE as given, so findings name the fleet's extra manifests where they are.
    pub base_dir: PathBuf,
}

/// Reads and checks the inventory, the base in `base_dir` and `base_dir/extra-manifests/`, and runs
/// `rules` on every site that decoded. With any finding, every site's own findings (its rendered
/// files) come along, repeated ones once, and nothing else happens: the error is a
/// [`Invalid::Findings`]. Other errors (I/O) name the path.
pub fn load_fleet(
    base_dir: &Path,
    inventory: &Path,
    rules: SiteRules<'_>,
) -> Result<Fleet, Invalid> {
    let inventory_file = inventory.display().to_string();
    let mut findings = Vec::new();
    let sites = findings_into(
        load_inventory_with_findings(inventory).map_err(Invalid::from),
        &mut findings,
    )?
    .map(|(sites, f)| {
        findings.extend(f);
        sites
    });
    let base = findings_into(
        load_fleet_base(base_dir).map_err(Invalid::from),
        &mut findings,
    )?;
    let (manifests, mut f, warnings) = load_extra_manifests(&base_dir.join(EXTRA_MANIFESTS_DIR))?;
    name_manifests(base_dir, &mut f);
    findings.extend(f);
    for w in warnings {
        warn!("{}", under_base(base_dir, &w).unwrap_or(w));
    }
    if let Some(inv) = &sites {
        for site in &inv.sites {
            findings.extend(rules(site, &inventory_file));
        }
        if let Some(base) = &base {
            findings.extend(shared_api_names(base, &inv.sites, &inventory_file));
        }
    }
    let (Some(inventory_data), Some(base)) = (sites, base) else {
        return Err(ValidationError { findings }.into());
    };
    let fleet = Fleet {
        inventory_file,
        sites: inventory_data.sites,
        base,
        manifests,
        base_dir: base_dir.to_path_buf(),
    };
    if !findings.is_empty() {
        // The run stops here; every site's own findings come along, so one run shows them all.
        for site in &fleet.sites {
            // A site whose files do not render has its inventory findings already.
            if let Err(Invalid::Findings(v)) = fleet.site_inputs(site) {
                findings.extend(v.findings);
            }
        }
        dedup_keeping_order(&mut findings);
        return Err(ValidationError { findings }.into());
    }
    Ok(fleet)
}

impl Fleet {
    /// The site's effective inputs (the base with its overrides, the extra manifests), validated;
    /// every finding names where to fix it ([`Invalid::Findings`]).
    pub fn site_inputs(&self, site: &SiteEntry) -> Result<SiteInputs, Invalid> {
        let files = self.base.render(site)?;
        site_inputs(
            &self.base,
            &self.inventory_file,
            site,
            &files,
            self.manifests.clone(),
        )
        .map_err(|mut e| {
            name_manifests(&self.base_dir, &mut e.findings);
            Invalid::Findings(e)
        })
    }
}

/// The fleet's extra manifests named where they are, under BASE as given (`fl/extra-manifests/x.yaml`),
/// as the inventory and the base's files are, not as a site's tree names them.
fn name_manifests(base_dir: &Path, findings: &mut [Finding]) {
    for f in findings {
        if let Some(named) = under_base(base_dir, &f.file) {
            f.file = named;
        }
    }
}

/// `text` with BASE in front, when it starts with an extra manifest's name and BASE is not `.`.
fn under_base(base_dir: &Path, text: &str) -> Option<String> {
    let in_dir = text
        .strip_prefix(EXTRA_MANIFESTS_DIR)
        .is_some_and(|rest| rest.starts_with('/'));
    let here = base_dir.as_os_str().is_empty() || base_dir == Path::new(".");
    (in_dir && !here).then(|| base_dir.join(text).display().to_string())
}

/// Two sites whose clusters would answer at one API name (`api.<clusterName>.<baseDomain>`): one
/// of them could never be reached by its kubeconfig, and a hub takes them for one cluster. Each
/// later site is a finding naming the first.
fn shared_api_names(base: &FleetBase, sites: &[SiteEntry], inventory: &str) -> Vec<Finding> {
    let mut first: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
    let mut f = Vec::new();
    for site in sites {
        let Some(api) = base.api_name(site) else {
            continue;
        };
        match first.get(&api) {
            Some(other) => f.push(Finding {
                file: inventory.to_string(),
                field: site.field("clusterName"),
                message: format!(
                    "the cluster name and base domain {api:?} are also site {other:?}'s: each site's cluster needs its own API name (api.{api})"
                ),
                line: site.line("clusterName").or_else(|| site.line("name")),
            }),
            None => {
                first.insert(api, &site.name);
            }
        }
    }
    f
}

/// Drops repeated findings (a base value every site inherits is one problem, not one per site).
fn dedup_keeping_order(findings: &mut Vec<Finding>) {
    let mut seen = HashSet::new();
    findings.retain(|f| seen.insert(f.to_string()));
}

/// `Ok(Some)` on success; a [`ValidationError`]'s findings go to `findings` (`Ok(None)`); any other
/// error is returned.
fn findings_into<T>(
    r: Result<T, Invalid>,
    findings: &mut Vec<Finding>,
) -> anyhow::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(Invalid::Findings(v)) => {
            findings.extend(v.findings);
            Ok(None)
        }
        Err(Invalid::Failed(e)) => Err(e),
    }
}
