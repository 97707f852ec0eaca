//! `create hub-manifests`: reads the fleet as `create config-image --sites` does
//! ([`config::load_fleet`]), checks what the hub needs besides (a boot MAC, a BMC naming one System
//! with a user and a readable password, a release image, one namespace per cluster), and only when
//! nothing is wrong anywhere writes, per site, the objects of [`super::objects`]:
//!
//! ```text
//! OUT/shared/cluster-image-set.yaml          the ClusterImageSet every site names
//! OUT/sites/<site>/namespace.yaml            the site's namespace (= its cluster name)
//! OUT/sites/<site>/cluster-instance.yaml     the ClusterInstance
//! OUT/sites/<site>/ca-bundle.yaml            with an additionalTrustBundle
//! OUT/sites/<site>/extra-manifests.yaml      with BASE/extra-manifests/
//! OUT/secrets/<site>/pull-secret.yaml        0600, in 0700 folders
//! OUT/secrets/<site>/bmc-credentials.yaml
//! OUT/secrets/<site>/admin-kubeconfig.yaml   the identity IBIO's reinstall reads, for a site
//! OUT/secrets/<site>/admin-password.yaml     `create config-image --sites` built
//! OUT/secrets/<site>/seed-reconfiguration.yaml
//! OUT/kustomization.yaml                     every file above, by sync wave (`kubectl apply -k OUT`)
//! OUT/{sites,secrets}/<site>/kustomization.yaml  the folder's files
//! ```
//!
//! Every object is rendered and checked against the field rules of [`super::rules`] before the
//! first file is written; each file is written atomically (temp file, fsync, rename). Secret values
//! are never printed; with [`super::objects::SecretData::Templates`] they are not
//! written either.

use std::collections::HashMap;

use anyhow::Result;

use super::plan::{
    HubOptions, ProxySeed, command_finding, image_set_name, option_findings, plan_site,
    proxy_vs_seed, refused, seed_version, site_rules,
};
use super::render::IDMS_KEY;
use super::rules;
use super::write::{HubOutput, write_all};
use crate::config::{self, EXTRA_MANIFESTS_DIR, Finding, Invalid, SiteEntry, ValidationError};
use crate::util::text::escape_control;

/// Where the manifests go under BASE by default.
pub const HUB_DIR: &str = "hub";

/// Checks everything, then writes; with any finding, nothing is written and the error is one
/// [`ValidationError`] holding them all.
pub fn build(o: &HubOptions) -> Result<HubOutput> {
    let mut findings = option_findings(o);
    let selected = |s: &SiteEntry| o.only.is_empty() || o.only.contains(&s.name);
    let running = |s: &SiteEntry| o.running.iter().find(|(n, _)| *n == s.name).map(|(_, w)| w);
    let adopted = |s: &SiteEntry| o.adopt && running(s).is_some() && !o.reinstall.contains(&s.name);
    let rules = |s: &SiteEntry, inventory: &str| {
        // An adopted cluster needs neither a BMC nor a boot MAC on the hub.
        if selected(s) && !adopted(s) {
            site_rules(s, inventory, o.secret_data)
        } else {
            Vec::new()
        }
    };
    let fleet = match config::load_fleet(&o.base_dir, &o.inventory, &rules) {
        Ok(fleet) => {
            let dir = o.base_dir.join(EXTRA_MANIFESTS_DIR).display().to_string();
            findings.extend(rules::manifest_findings(
                &dir,
                &fleet.manifests,
                Some(IDMS_KEY),
            ));
            fleet
        }
        Err(Invalid::Findings(v)) => {
            findings.extend(v.findings);
            return Err(ValidationError { findings }.into());
        }
        Err(Invalid::Failed(e)) => return Err(e),
    };
    for (flag, names) in [("--only", &o.only), ("--reinstall", &o.reinstall)] {
        for name in names {
            if !fleet.sites.iter().any(|s| &s.name == name) {
                findings.push(command_finding(
                    flag,
                    format!("no site named {name:?} in {}", fleet.inventory_file),
                ));
            }
        }
    }
    let seed = seed_version(o, &fleet)?;
    let mut warnings = Vec::new();
    let mut plans = Vec::new();
    let mut clusters: HashMap<String, String> = HashMap::new();
    for site in fleet.sites.iter().filter(|s| selected(s)) {
        if let Some(why) = running(site)
            && !o.adopt
            && !o.reinstall.contains(&site.name)
        {
            findings.push(Finding {
                file: fleet.inventory_file.clone(),
                field: site.field("name"),
                message: format!(
                    "its cluster runs already ({}): a ClusterInstance would make the hub attach media and reboot it to install it again; pass --adopt to import the running cluster into ACM instead, or --reinstall {} to have the hub install it again (keeping its identity)",
                    escape_control(why),
                    site.name
                ),
                line: site.line("name"),
            });
            continue;
        }
        match plan_site(o, &fleet, site, adopted(site)) {
            Ok(plan) => {
                let checked = match plan.adopt {
                    true => None,
                    false => proxy_vs_seed(&plan, seed.as_ref()),
                };
                match checked {
                    Some(ProxySeed::Unknown(message)) => warnings.push(message),
                    Some(ProxySeed::TooOld(message)) => findings.push(Finding {
                        file: fleet.inventory_file.clone(),
                        field: site.field("name"),
                        message,
                        line: site.line("name"),
                    }),
                    None => {}
                }
                let cluster = plan.inputs.install_config.metadata.name.clone();
                if let Some(first) = clusters.insert(cluster.clone(), site.name.clone()) {
                    findings.push(Finding {
                        file: fleet.inventory_file.clone(),
                        field: site.field("clusterName"),
                        message: format!(
                            "cluster name {cluster:?} is also site {first:?}'s: on a hub every cluster is its own namespace"
                        ),
                        line: site.line("clusterName"),
                    });
                }
                plans.push(plan);
            }
            Err(Invalid::Findings(v)) => findings.extend(v.findings),
            Err(Invalid::Failed(e)) => return Err(e),
        }
    }
    let image_set = match &o.release_image {
        Some(r) => image_set_name(r).ok(),
        None => None,
    };
    let (Some(release_image), Some(image_set)) = (&o.release_image, image_set) else {
        return Err(refused(findings));
    };
    if !findings.is_empty() {
        return Err(refused(findings));
    }
    let out = o.out.clone().unwrap_or_else(|| o.base_dir.join(HUB_DIR));
    let mut written = write_all(o, &fleet, &plans, &out, release_image, &image_set)?;
    written.warnings.splice(0..0, warnings);
    Ok(written)
}
