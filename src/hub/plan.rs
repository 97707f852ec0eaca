//! What `create hub-manifests` checks before it renders anything: the command line's options, what
//! the hub needs of each inventory entry besides what ibi needs (a boot MAC, a BMC naming one System
//! with a user and a readable password), each site's inputs and identity ([`SitePlan`]), a proxied
//! site against its seed, and what a site sets that the hub does not carry over.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::identity::{self, Handed};
use super::objects::SecretData;
use super::rules;
use crate::config::{
    self, Finding, Fleet, Invalid, SITES_DIR as BUILT_SITES_DIR, SiteEntry, SiteInputs,
    ValidationError,
};
use crate::image_ref::{RefError, parse_image_reference};
use crate::util::secret::Secret;
use crate::util::text::escape_control;

/// How findings about the command's own options name their "file".
const COMMAND_LINE: &str = "command line";

pub struct HubOptions {
    pub base_dir: PathBuf,
    pub inventory: PathBuf,
    /// Only these sites (all when empty).
    pub only: Vec<String>,
    pub release_image: Option<String>,
    /// Default `BASE/hub`.
    pub out: Option<PathBuf>,
    pub templates_namespace: String,
    /// Secrets with their data, or as templates without it.
    pub secret_data: SecretData,
    /// `--seed` and its plain-HTTP registries: the seed the sites run, read for its version.
    pub seed: Option<(String, Vec<String>)>,
    /// Sites whose cluster runs already (deploy ran their site or one-shot phase), with how deploy
    /// left them: a ClusterInstance would make the hub install them again.
    pub running: Vec<(String, String)>,
    /// Running sites are imported into ACM (ManagedCluster, its auto-import Secret,
    /// KlusterletAddonConfig) instead of getting a ClusterInstance.
    pub adopt: bool,
    /// Running sites to get a ClusterInstance all the same (the hub installs them again, keeping
    /// their identity).
    pub reinstall: Vec<String>,
}

/// What a proxied site's seed means on the hub path.
pub(super) enum ProxySeed {
    /// The seed is unknown here: a warning, naming the site.
    Unknown(String),
    /// The seed predates `machine_networks`: a finding about the site.
    TooOld(String),
}

/// The seed's version, and where it was learnt (for messages).
pub(super) struct SeedVersion {
    pub(super) version: String,
    pub(super) from: String,
}

/// One site, checked, with everything its files need.
pub(super) struct SitePlan<'a> {
    pub(super) site: &'a SiteEntry,
    pub(super) inputs: SiteInputs,
    pub(super) bmc_address: String,
    pub(super) bmc_user: String,
    /// `None` only when Secrets are written as templates.
    pub(super) bmc_password: Option<Secret<String>>,
    pub(super) identity: Option<Handed>,
    /// A running cluster, imported into ACM instead of installed.
    pub(super) adopt: bool,
}

/// The seed the sites run: `--seed`'s (read through its registry or layout), else BASE's
/// `image-based-installation-config.yaml` `seedVersion`, else unknown.
pub(super) fn seed_version(o: &HubOptions, fleet: &Fleet) -> Result<Option<SeedVersion>> {
    if let Some((reference, insecure)) = &o.seed {
        let seed = crate::seed::preflight::read_site_seed(
            reference,
            &fleet.base.install_config()?,
            insecure.clone(),
        )?;
        return Ok(Some(SeedVersion {
            version: seed.cluster_info.seed_cluster_ocp_version,
            from: format!("--seed {reference}"),
        }));
    }
    let file = o
        .base_dir
        .join(config::IMAGE_BASED_INSTALLATION_CONFIG_FILE);
    if !file.is_file() {
        return Ok(None);
    }
    match config::load_installation_inputs(&o.base_dir) {
        Ok(inputs) => Ok(Some(SeedVersion {
            version: inputs.config.seed_version,
            from: format!("seedVersion in {}", file.display()),
        })),
        Err(e) => {
            tracing::warn!(
                "{}: not read for the seed's version ({e:#}); pass --seed to check proxied sites against it",
                file.display()
            );
            Ok(None)
        }
    }
}

/// A proxied site and the seed: image-based-install-operator's manifest.json carries only
/// `machine_networks` (its installer's `clusterconfiguration.go`, bc1ddc61), which a 4.16–4.19 seed
/// does not read; with a proxy its post-pivot then fails. `None`: nothing to say.
pub(super) fn proxy_vs_seed(plan: &SitePlan<'_>, seed: Option<&SeedVersion>) -> Option<ProxySeed> {
    let ic = &plan.inputs.install_config;
    let proxied = ic
        .proxy
        .as_ref()
        .is_some_and(|p| !p.http_proxy.is_empty() || !p.https_proxy.is_empty());
    if !proxied {
        return None;
    }
    let site = escape_control(&plan.site.name);
    let since = crate::seed::MACHINE_NETWORKS_SINCE;
    let Some(seed) = seed else {
        return Some(ProxySeed::Unknown(format!(
            "site {site} has a proxy: through the hub its manifest.json carries only machine_networks, which a seed before {since} does not read (its post-pivot then fails: machineNetwork is empty, must be provided in case of proxy); the seed is unknown here: pass --seed, or keep the fleet's image-based-installation-config.yaml in BASE"
        )));
    };
    let old = config::parse_minor_version(&seed.version).is_some_and(|v| v < since);
    old.then(|| {
        ProxySeed::TooOld(format!(
            "has a proxy, and its seed {} ({}) reads only machine_network, which the hub's image-based-install-operator does not write (it writes machine_networks, read from {since}): post-pivot would fail (machineNetwork is empty, must be provided in case of proxy); install this site with ibi's own configuration ISO (ibi deploy --phase site), or use a seed of {since} or later",
            escape_control(&seed.version),
            escape_control(&seed.from)
        ))
    })
}

/// The run's findings as one error, each once: a value every site takes from the base is one
/// problem, not one per site.
pub(super) fn refused(mut findings: Vec<Finding>) -> anyhow::Error {
    let mut seen = std::collections::HashSet::new();
    findings.retain(|f| seen.insert(f.to_string()));
    ValidationError { findings }.into()
}

pub(super) fn command_finding(field: &str, message: impl Into<String>) -> Finding {
    Finding {
        file: COMMAND_LINE.into(),
        field: field.into(),
        message: message.into(),
        line: None,
    }
}

/// `--release-image` and `--templates-namespace`.
pub(super) fn option_findings(o: &HubOptions) -> Vec<Finding> {
    let mut f = Vec::new();
    match &o.release_image {
        None => f.push(command_finding(
            "--release-image",
            "required: the release the sites run (the seed's), for the hub's ClusterImageSet, \
             e.g. quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64",
        )),
        Some(r) => {
            if let Err(e) = image_set_name(r) {
                f.push(command_finding(
                    "--release-image",
                    format!("invalid value {r:?}: {e}"),
                ));
            }
        }
    }
    if !config::is_dns1123_label(&o.templates_namespace) {
        f.push(command_finding(
            "--templates-namespace",
            format!(
                "invalid value {:?}: a namespace name (lower-case letters, digits and '-', at most 63)",
                o.templates_namespace
            ),
        ));
    }
    f
}

/// The ClusterImageSet's name for `reference`: `ibi-`, its tag (or the digest's first 12 hex
/// digits) in the characters a name allows, and the first 8 hex digits of the SHA-256 of the whole
/// reference. The object is cluster-scoped: two references with one tag (quay.io's and a mirror's)
/// must not share a name, or the second fleet's apply changes the first's image.
pub(super) fn image_set_name(reference: &str) -> Result<String, RefError> {
    let r = parse_image_reference(reference)?;
    let label = match (&r.digest, &r.tag) {
        (Some(d), _) => d.split(':').nth(1).unwrap_or(d).chars().take(12).collect(),
        (None, Some(t)) => t.clone(),
        (None, None) => "latest".to_string(),
    };
    let clean: String = label
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let whole = crate::util::digest::hex(&openssl::sha::sha256(reference.as_bytes()));
    Ok(format!(
        "ibi-{}-{}",
        clean.trim_end_matches(['-', '.']),
        &whole[..8]
    ))
}

/// What the hub needs of an inventory entry that ibi itself does not.
pub(super) fn site_rules(
    site: &SiteEntry,
    inventory: &str,
    secret_data: SecretData,
) -> Vec<Finding> {
    let mut f = Vec::new();
    let mut add = |key: &str, message: String| {
        f.push(Finding {
            file: inventory.to_string(),
            field: site.field(key),
            message,
            line: site.line(key),
        });
    };
    if site.boot_mac_address.is_none() {
        add(
            "bootMACAddress",
            "required by the hub: the MAC address of the NIC the host boots from (its BareMetalHost's bootMACAddress)".into(),
        );
    }
    let Some(bmc) = &site.bmc else {
        add(
            "bmc",
            "required by the hub: the host's BMC (address, system, user and passwordFile or passwordEnv)".into(),
        );
        return f;
    };
    if let Err(e) = metal3_bmc_address(&bmc.address, bmc.system.as_deref()) {
        add("bmc.address", e.to_string());
    }
    if bmc.user.is_none() {
        add(
            "bmc.user",
            "required by the hub: the BMC user (with passwordFile or passwordEnv) for the BMC credentials Secret".into(),
        );
    } else if secret_data == SecretData::Values
        && let Err(e) = site.bmc_password(Path::new(inventory))
    {
        // The error names the file or variable, never the password.
        add("bmc", format!("{e:#}"));
    }
    f
}

/// Why a BMC address gives metal3 no one System.
#[derive(Debug, thiserror::Error)]
pub(super) enum Metal3Address {
    #[error("invalid value {address:?}: not a URL ({detail})")]
    NotUrl {
        address: String,
        /// The URL parser's own words.
        detail: String,
    },
    #[error("invalid value {0:?}: names a System and bmc.system names one too; give one")]
    TwoSystems(String),
    #[error(
        "the hub's BareMetalHost needs one System: add bmc.system, or give the System's address \
         ({0}/redfish/v1/Systems/ID)"
    )]
    NoSystem(String),
    #[error("invalid value {0:?}: expected the service root, /redfish/v1/Systems or one System")]
    OtherPath(String),
}

/// The BMC's address as metal3 takes it: `redfish-virtualmedia+` and the URL of one System, from
/// an ibi `bmc.address` (a service root, the Systems collection or one System) and `bmc.system`.
pub(super) fn metal3_bmc_address(
    address: &str,
    system: Option<&str>,
) -> Result<String, Metal3Address> {
    let url = reqwest::Url::parse(address).map_err(|e| Metal3Address::NotUrl {
        address: address.to_string(),
        detail: e.to_string(),
    })?;
    let root = match url.port() {
        Some(p) => format!(
            "{}://{}:{p}",
            url.scheme(),
            url.host_str().unwrap_or_default()
        ),
        None => format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default()),
    };
    let path = url.path().trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let system_url = match (segments.as_slice(), system) {
        (["redfish", "v1", "Systems", id], None) => format!("{root}/redfish/v1/Systems/{id}"),
        ([] | ["redfish", "v1"] | ["redfish", "v1", "Systems"], Some(s)) => {
            let id = s.trim_matches('/').rsplit('/').next().unwrap_or(s);
            format!("{root}/redfish/v1/Systems/{id}")
        }
        (["redfish", "v1", "Systems", _], Some(_)) => {
            return Err(Metal3Address::TwoSystems(address.to_string()));
        }
        ([] | ["redfish", "v1"] | ["redfish", "v1", "Systems"], None) => {
            return Err(Metal3Address::NoSystem(root));
        }
        _ => {
            return Err(Metal3Address::OtherPath(address.to_string()));
        }
    };
    Ok(format!("redfish-virtualmedia+{system_url}"))
}

/// The site's inputs, BMC and identity, checked; findings as [`Invalid::Findings`].
pub(super) fn plan_site<'a>(
    o: &HubOptions,
    fleet: &Fleet,
    site: &'a SiteEntry,
    adopt: bool,
) -> Result<SitePlan<'a>, Invalid> {
    let inputs = fleet.site_inputs(site)?;
    let mut findings: Vec<Finding> = rules::site_findings(&inputs)
        .into_iter()
        .map(|f| config::locate_site_finding(&fleet.base, &fleet.inventory_file, site, f))
        .collect();
    let ic = &inputs.install_config;
    let identity = match identity::read(
        &o.base_dir.join(BUILT_SITES_DIR).join(&site.name),
        &ic.metadata.name,
        &ic.base_domain,
    ) {
        Ok(h) => h,
        Err(f) => {
            findings.extend(f);
            None
        }
    };
    // site_rules checked these; a failure here is reported as a finding all the same.
    let missing = |key: &str| Finding {
        file: fleet.inventory_file.clone(),
        field: site.field(key),
        message: "required by the hub".into(),
        line: site.line(key),
    };
    if adopt {
        if identity.is_none() {
            findings.push(Finding {
                file: fleet.inventory_file.clone(),
                field: site.field("name"),
                message: "adopting a running cluster needs its admin kubeconfig: build the site with ibi create config-image --sites (BASE/sites/<site>/auth/kubeconfig)".into(),
                line: site.line("name"),
            });
        }
        if !findings.is_empty() {
            return Err(ValidationError { findings }.into());
        }
        return Ok(SitePlan {
            site,
            inputs,
            bmc_address: String::new(),
            bmc_user: String::new(),
            bmc_password: None,
            identity,
            adopt,
        });
    }
    let bmc = site.bmc.as_ref();
    let bmc_address = bmc.and_then(|b| metal3_bmc_address(&b.address, b.system.as_deref()).ok());
    let bmc_user = bmc.and_then(|b| b.user.clone());
    let bmc_password = match o.secret_data {
        SecretData::Templates => None,
        SecretData::Values => match site.bmc_password(&o.inventory)? {
            Some(p) => Some(p),
            None => {
                findings.push(missing("bmc.passwordFile"));
                None
            }
        },
    };
    let (Some(bmc_address), Some(bmc_user)) = (bmc_address, bmc_user) else {
        findings.push(missing("bmc"));
        return Err(ValidationError { findings }.into());
    };
    if !findings.is_empty() {
        return Err(ValidationError { findings }.into());
    }
    Ok(SitePlan {
        site,
        inputs,
        bmc_address,
        bmc_user,
        bmc_password,
        identity,
        adopt,
    })
}

/// What the site's inputs set that no hub object carries into IBIO's manifest.json
/// (image-based-install-operator bc1ddc61, `WriteImageBaseConfig`; hub-handoff.md): its node
/// labels, and a `releaseRegistry` other than the registry of `--release-image`, which IBIO takes
/// instead.
pub(super) fn not_carried(plan: &SitePlan<'_>, release_image: &str) -> Vec<String> {
    let ibc = &plan.inputs.image_based_config;
    let site = escape_control(&plan.site.name);
    let mut out = Vec::new();
    if !ibc.node_labels.is_empty() {
        let labels: Vec<String> = ibc
            .node_labels
            .iter()
            .map(|(k, v)| escape_control(&format!("{k}={v}")))
            .collect();
        out.push(format!(
            "site {site}: its node labels ({}) are not carried over by the hub (no field takes them into image-based-install-operator's manifest.json): add them as an extra manifest (docs/hub.md, \"Not carried over\")",
            labels.join(", ")
        ));
    }
    let hub_registry = parse_image_reference(release_image)
        .map(|r| r.registry)
        .unwrap_or_default();
    if !ibc.release_registry.is_empty() && ibc.release_registry != hub_registry {
        out.push(format!(
            "site {site}: releaseRegistry {} is not carried over: the hub's image-based-install-operator takes the registry of --release-image, {}; give a release image on {} to keep the site on its mirror",
            escape_control(&ibc.release_registry),
            escape_control(&hub_registry),
            escape_control(&ibc.release_registry)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bmc_addresses_become_one_systems_metal3_url() {
        let want = "redfish-virtualmedia+https://10.0.0.9:8443/redfish/v1/Systems/1";
        assert_eq!(
            metal3_bmc_address("https://10.0.0.9:8443/redfish/v1/Systems/1/", None).unwrap(),
            want
        );
        assert_eq!(
            metal3_bmc_address("https://10.0.0.9:8443", Some("1")).unwrap(),
            want
        );
        assert_eq!(
            metal3_bmc_address(
                "https://10.0.0.9:8443/redfish/v1/Systems",
                Some("/redfish/v1/Systems/1")
            )
            .unwrap(),
            want
        );
        let e = metal3_bmc_address("https://10.0.0.9", None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs one System"), "{e}");
        assert!(metal3_bmc_address("https://10.0.0.9/other", Some("1")).is_err());
    }

    /// Issue 34 item 6: two references with one tag got one (cluster-scoped) name.
    #[test]
    fn image_set_names_follow_the_tag_or_digest_and_the_whole_reference() {
        let quay =
            image_set_name("quay.io/openshift-release-dev/ocp-release:4.18.0_X86_64").unwrap();
        assert!(quay.starts_with("ibi-4.18.0-x86-64-"), "{quay}");
        assert_eq!(quay.len(), "ibi-4.18.0-x86-64-".len() + 8);
        let mirror = image_set_name("mirror.example.com:5000/ocp/release:4.18.0_X86_64").unwrap();
        assert_ne!(quay, mirror, "one tag, two references");
        let digest = format!("quay.io/o/r@sha256:{}", "ab".repeat(32));
        assert!(
            image_set_name(&digest)
                .unwrap()
                .starts_with("ibi-abababababab-")
        );
        assert!(crate::config::is_dns1123_subdomain(&quay));
        assert!(image_set_name("not a ref").is_err());
    }
}
