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
//! are never printed; with [`SecretData::Templates`] they are not written either.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Result;

use anyhow::bail;

use super::identity::{self, Handed};
use super::objects::{self, ClusterSpec, IdentityData, NodeSpec, SecretData};
use super::rules;
use crate::config::{
    self, EXTRA_MANIFESTS_DIR, Finding, Fleet, Invalid, SITES_DIR as BUILT_SITES_DIR, SiteEntry,
    SiteInputs, ValidationError,
};
use crate::image_ref::parse_image_reference;
use crate::util::fs::{Clobber, ensure_dir, write_atomic};
use crate::util::secret::Secret;
use crate::util::text::escape_control;

/// Where the manifests go under BASE by default.
pub const HUB_DIR: &str = "hub";
pub const SHARED_DIR: &str = "shared";
pub const SITES_DIR: &str = "sites";
pub const SECRETS_DIR: &str = "secrets";
pub const CLUSTER_IMAGE_SET_FILE: &str = "cluster-image-set.yaml";
pub const NAMESPACE_FILE: &str = "namespace.yaml";
pub const CLUSTER_INSTANCE_FILE: &str = "cluster-instance.yaml";
pub const CA_BUNDLE_FILE: &str = "ca-bundle.yaml";
pub const EXTRA_MANIFESTS_FILE: &str = "extra-manifests.yaml";
pub const PULL_SECRET_FILE: &str = "pull-secret.yaml";
pub const BMC_SECRET_FILE: &str = "bmc-credentials.yaml";
/// The identity Secrets, in the order of [`objects::identity_secret_names`].
pub const IDENTITY_FILES: [&str; 3] = [
    "admin-kubeconfig.yaml",
    "admin-password.yaml",
    "seed-reconfiguration.yaml",
];
/// The key of the mirror set in the extra-manifests ConfigMap (a file name ≤ 30 characters).
pub const IDMS_KEY: &str = "image-digest-mirror-set.json";
pub const MANAGED_CLUSTER_FILE: &str = "managed-cluster.yaml";
pub const KLUSTERLET_ADDON_CONFIG_FILE: &str = "klusterlet-addon-config.yaml";
pub const AUTO_IMPORT_SECRET_FILE: &str = "auto-import-secret.yaml";
pub const KUSTOMIZATION_FILE: &str = "kustomization.yaml";
const DIR_MODE: u32 = 0o755;
const FILE_MODE: u32 = 0o644;
const SECRET_DIR_MODE: u32 = 0o700;
const SECRET_FILE_MODE: u32 = 0o600;
/// The API server's bound on an object's annotations together (`TotalAnnotationSizeLimitB`):
/// client-side apply's `last-applied-configuration` must fit in it.
const MAX_CLIENT_SIDE_APPLY: usize = 256 * 1024;
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

/// The seed's version, and where it was learnt (for messages).
struct SeedVersion {
    version: String,
    from: String,
}

/// What was written.
pub struct HubOutput {
    pub out: PathBuf,
    /// Every file, shared ones first, then site by site in inventory order.
    pub files: Vec<PathBuf>,
    pub sites: usize,
    /// Sites `create config-image --sites` has not built: no identity Secrets for them (a hub gives
    /// them a new identity).
    pub unbuilt: Vec<String>,
    /// Folders under `OUT/sites/` (or `OUT/secrets/`) of sites the inventory no longer has (only
    /// looked for without `--only`); left in place.
    pub stale: Vec<PathBuf>,
    /// What a site sets that the hub path does not carry over, and how a file must be applied, a
    /// line each, site first.
    pub warnings: Vec<String>,
}

/// One site, checked, with everything its files need.
struct SitePlan<'a> {
    site: &'a SiteEntry,
    inputs: SiteInputs,
    bmc_address: String,
    bmc_user: String,
    /// `None` only when Secrets are written as templates.
    bmc_password: Option<Secret<String>>,
    identity: Option<Handed>,
    /// A running cluster, imported into ACM instead of installed.
    adopt: bool,
}

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
                    Some(Ok(message)) => warnings.push(message),
                    Some(Err(message)) => findings.push(Finding {
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

/// The seed the sites run: `--seed`'s (read through its registry or layout), else BASE's
/// `image-based-installation-config.yaml` `seedVersion`, else unknown.
fn seed_version(o: &HubOptions, fleet: &Fleet) -> Result<Option<SeedVersion>> {
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
/// does not read; with a proxy its post-pivot then fails. `Err`: such a site with such a seed (a
/// finding); `Ok`: a proxied site whose seed is unknown (a warning); `None`: nothing to say.
fn proxy_vs_seed(
    plan: &SitePlan<'_>,
    seed: Option<&SeedVersion>,
) -> Option<Result<String, String>> {
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
        return Some(Ok(format!(
            "site {site} has a proxy: through the hub its manifest.json carries only machine_networks, which a seed before {since} does not read (its post-pivot then fails: machineNetwork is empty, must be provided in case of proxy); the seed is unknown here: pass --seed, or keep the fleet's image-based-installation-config.yaml in BASE"
        )));
    };
    let old = config::parse_minor_version(&seed.version).is_some_and(|v| v < since);
    old.then(|| {
        Err(format!(
            "has a proxy, and its seed {} ({}) reads only machine_network, which the hub's image-based-install-operator does not write (it writes machine_networks, read from {since}): post-pivot would fail (machineNetwork is empty, must be provided in case of proxy); install this site with ibi's own configuration ISO (ibi deploy --phase site), or use a seed of {since} or later",
            escape_control(&seed.version),
            escape_control(&seed.from)
        ))
    })
}

/// The run's findings as one error, each once: a value every site takes from the base is one
/// problem, not one per site.
fn refused(mut findings: Vec<Finding>) -> anyhow::Error {
    let mut seen = std::collections::HashSet::new();
    findings.retain(|f| seen.insert(f.to_string()));
    ValidationError { findings }.into()
}

fn command_finding(field: &str, message: impl Into<String>) -> Finding {
    Finding {
        file: COMMAND_LINE.into(),
        field: field.into(),
        message: message.into(),
        line: None,
    }
}

/// `--release-image` and `--templates-namespace`.
fn option_findings(o: &HubOptions) -> Vec<Finding> {
    let mut f = Vec::new();
    match &o.release_image {
        None => f.push(command_finding(
            "--release-image",
            "required: the release the sites run (the seed's), for the hub's ClusterImageSet, \
             e.g. quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64",
        )),
        Some(r) => {
            if let Err(e) = image_set_name(r) {
                f.push(command_finding("--release-image", e));
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
pub fn image_set_name(reference: &str) -> Result<String, String> {
    let r = parse_image_reference(reference)
        .map_err(|e| format!("invalid value {reference:?}: {e}"))?;
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
fn site_rules(site: &SiteEntry, inventory: &str, secret_data: SecretData) -> Vec<Finding> {
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
        add("bmc.address", e);
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

/// The BMC's address as metal3 takes it: `redfish-virtualmedia+` and the URL of one System, from
/// an ibi `bmc.address` (a service root, the Systems collection or one System) and `bmc.system`.
pub fn metal3_bmc_address(address: &str, system: Option<&str>) -> Result<String, String> {
    let url = reqwest::Url::parse(address)
        .map_err(|e| format!("invalid value {address:?}: not a URL ({e})"))?;
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
            return Err(format!(
                "invalid value {address:?}: names a System and bmc.system names one too; give one"
            ));
        }
        ([] | ["redfish", "v1"] | ["redfish", "v1", "Systems"], None) => {
            return Err(format!(
                "the hub's BareMetalHost needs one System: add bmc.system, or give the System's address \
                 ({root}/redfish/v1/Systems/ID)"
            ));
        }
        _ => {
            return Err(format!(
                "invalid value {address:?}: expected the service root, /redfish/v1/Systems or one System"
            ));
        }
    };
    Ok(format!("redfish-virtualmedia+{system_url}"))
}

/// The site's inputs, BMC and identity, checked; findings as [`Invalid::Findings`].
fn plan_site<'a>(
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

/// One file to write: its text, and whether it is a Secret (0600 in a 0700 folder).
struct OutFile {
    path: PathBuf,
    text: Secret<String>,
    secret: bool,
}

fn write_all(
    o: &HubOptions,
    fleet: &Fleet,
    plans: &[SitePlan<'_>],
    out: &Path,
    release_image: &str,
    image_set: &str,
) -> Result<HubOutput> {
    let mut outs = vec![doc_file(
        out.join(SHARED_DIR).join(CLUSTER_IMAGE_SET_FILE),
        &objects::cluster_image_set(image_set, release_image),
    )?];
    for plan in plans {
        outs.extend(render_site(o, fleet, plan, out, image_set)?);
    }
    // Everything is rendered and checked before the first file is written.
    let kustomize = kustomizations(out, &outs)?;
    for f in &outs {
        let doc: serde_json::Value = serde_yaml_ng::from_str(f.text.expose_str())?;
        let errors = rules::check_object(&doc);
        if !errors.is_empty() {
            bail!(
                "internal error: {} breaks the hub's field rules: {}",
                f.path.display(),
                errors.join("; ")
            );
        }
    }
    let outs: Vec<OutFile> = outs.into_iter().chain(kustomize).collect();
    ensure_dir(&out.join(SECRETS_DIR), SECRET_DIR_MODE)?;
    let mut files = Vec::new();
    let mut big = Vec::new();
    for f in outs {
        // Client-side apply keeps the whole object in an annotation, and annotations are bounded.
        let len = f.text.expose_str().len();
        if len > MAX_CLIENT_SIDE_APPLY {
            big.push(format!(
                "{}: {len} bytes: a client-side `kubectl apply` stores the whole object in its last-applied annotation, which the API server bounds at {MAX_CLIENT_SIDE_APPLY} bytes; apply it with `kubectl apply --server-side` (Argo CD: ServerSideApply=true)",
                f.path.display()
            ));
        }
        let (dir_mode, file_mode) = if f.secret {
            (SECRET_DIR_MODE, SECRET_FILE_MODE)
        } else {
            (DIR_MODE, FILE_MODE)
        };
        if let Some(parent) = f.path.parent() {
            ensure_dir(parent, dir_mode)?;
        }
        write_atomic(
            &f.path,
            f.text.expose_str().as_bytes(),
            file_mode,
            Clobber::Replace,
        )?;
        files.push(f.path);
    }
    Ok(HubOutput {
        out: out.to_path_buf(),
        files,
        warnings: plans
            .iter()
            .filter(|p| !p.adopt)
            .flat_map(|p| not_carried(p, release_image))
            .chain(big)
            .collect(),
        sites: plans.len(),
        unbuilt: plans
            .iter()
            .filter(|p| p.identity.is_none())
            .map(|p| p.site.name.clone())
            .collect(),
        stale: if o.only.is_empty() {
            stale_folders(out, fleet)
        } else {
            Vec::new()
        },
    })
}

/// What the site's inputs set that no hub object carries into IBIO's manifest.json
/// (image-based-install-operator bc1ddc61, `WriteImageBaseConfig`; hub-handoff.md): its node
/// labels, and a `releaseRegistry` other than the registry of `--release-image`, which IBIO takes
/// instead.
fn not_carried(plan: &SitePlan<'_>, release_image: &str) -> Vec<String> {
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

/// A running cluster's import into ACM: its namespace, ManagedCluster, KlusterletAddonConfig and
/// auto-import Secret (the kubeconfig the site was given).
fn render_adoption(
    o: &HubOptions,
    plan: &SitePlan<'_>,
    ns: &str,
    site_dir: &Path,
    secret_dir: &Path,
) -> Result<Vec<OutFile>> {
    let mut files = vec![
        doc_file(site_dir.join(NAMESPACE_FILE), &objects::namespace(ns))?,
        doc_file(
            site_dir.join(MANAGED_CLUSTER_FILE),
            &objects::managed_cluster(ns),
        )?,
        doc_file(
            site_dir.join(KLUSTERLET_ADDON_CONFIG_FILE),
            &objects::klusterlet_addon_config(ns),
        )?,
    ];
    if let Some(h) = &plan.identity {
        files.push(OutFile {
            path: secret_dir.join(AUTO_IMPORT_SECRET_FILE),
            text: objects::auto_import_secret(
                ns,
                h.kubeconfig.expose(),
                format!("from {}", h.kubeconfig_path.display()),
                o.secret_data,
            )?,
            secret: true,
        });
    }
    Ok(files)
}

/// Site folders in OUT of sites not in the inventory.
fn stale_folders(out: &Path, fleet: &Fleet) -> Vec<PathBuf> {
    let mut stale = Vec::new();
    for dir in [SITES_DIR, SECRETS_DIR] {
        let Ok(entries) = std::fs::read_dir(out.join(dir)) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter(|e| {
                let name = e.file_name();
                !fleet.sites.iter().any(|s| name == s.name.as_str())
            })
            .map(|e| e.path())
            .collect();
        found.sort();
        stale.extend(found);
    }
    stale
}

/// A non-secret object as YAML, with its sync wave.
fn doc_file(path: PathBuf, doc: &serde_json::Value) -> Result<OutFile> {
    Ok(OutFile {
        path,
        text: Secret::new(objects::to_yaml(&objects::with_sync_wave(doc.clone()))?),
        secret: false,
    })
}

/// The kustomizations that apply OUT in one step (`kubectl apply -k OUT`, or an Argo CD
/// application of OUT): one at the top listing every object's file, and one per folder (a site's
/// objects, a site's Secrets) for applying a part, each listing its files by sync wave (namespaces
/// first, what makes the hub act last). Files, not folders, in `resources`: kustomize before v2.1
/// (Debian's kubectl 1.20) takes only files there. kustomize's own order puts Namespaces first too.
fn kustomizations(out: &Path, outs: &[OutFile]) -> Result<Vec<OutFile>> {
    let mut folders: std::collections::BTreeMap<PathBuf, Vec<(String, String)>> =
        std::collections::BTreeMap::new();
    let mut top: Vec<(String, String)> = Vec::new();
    for f in outs {
        let (Some(dir), Some(name)) = (f.path.parent(), f.path.file_name()) else {
            continue;
        };
        let name = name.to_string_lossy().into_owned();
        let kind = f
            .text
            .expose_str()
            .lines()
            .find_map(|l| l.strip_prefix("kind: "))
            .unwrap_or("")
            .to_string();
        let wave = objects::sync_wave(&kind).to_string();
        let rel = f.path.strip_prefix(out).unwrap_or(&f.path);
        top.push((wave.clone(), rel.display().to_string()));
        if dir != out.join(SHARED_DIR) {
            folders
                .entry(dir.to_path_buf())
                .or_default()
                .push((wave, name));
        }
    }
    top.sort();
    let yaml = |resources: Vec<String>| -> Result<String> {
        let doc = serde_json::json!({
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": resources,
        });
        objects::to_yaml(&doc)
    };
    let mut files = Vec::new();
    for (dir, mut entries) in folders {
        entries.sort();
        let secret = dir.starts_with(out.join(SECRETS_DIR));
        files.push(OutFile {
            path: dir.join(KUSTOMIZATION_FILE),
            text: Secret::new(yaml(entries.into_iter().map(|(_, n)| n).collect())?),
            secret,
        });
    }
    files.push(OutFile {
        path: out.join(KUSTOMIZATION_FILE),
        text: Secret::new(yaml(top.into_iter().map(|(_, f)| f).collect())?),
        secret: false,
    });
    Ok(files)
}

fn render_site(
    o: &HubOptions,
    fleet: &Fleet,
    plan: &SitePlan<'_>,
    out: &Path,
    image_set: &str,
) -> Result<Vec<OutFile>> {
    let ns = plan.inputs.install_config.metadata.name.as_str();
    let site_dir = out.join(SITES_DIR).join(&plan.site.name);
    let secret_dir = out.join(SECRETS_DIR).join(&plan.site.name);
    if plan.adopt {
        return render_adoption(o, plan, ns, &site_dir, &secret_dir);
    }
    let mut files = Vec::new();
    for (name, doc) in site_objects(o, fleet, plan, image_set)? {
        files.push(doc_file(site_dir.join(name), &doc)?);
    }
    for (name, text) in site_secrets(o, plan)? {
        files.push(OutFile {
            path: secret_dir.join(name),
            text,
            secret: true,
        });
    }
    Ok(files)
}

/// The site's objects, by file name: its namespace, the CA bundle and extra manifests when it has
/// them, the ClusterInstance.
fn site_objects(
    o: &HubOptions,
    fleet: &Fleet,
    plan: &SitePlan<'_>,
    image_set: &str,
) -> Result<Vec<(&'static str, serde_json::Value)>> {
    let ic = &plan.inputs.install_config;
    let ibc = &plan.inputs.image_based_config;
    let ns = ic.metadata.name.as_str();
    let mut docs = vec![(NAMESPACE_FILE, objects::namespace(ns))];
    let ca_bundle = !ic.additional_trust_bundle.trim().is_empty();
    if ca_bundle {
        docs.push((
            CA_BUNDLE_FILE,
            objects::config_map(
                ns,
                objects::CA_BUNDLE_NAME,
                &[(
                    objects::CA_BUNDLE_KEY.to_string(),
                    ic.additional_trust_bundle.clone(),
                )],
            ),
        ));
    }
    let mut manifests: Vec<(String, String)> = fleet
        .manifests
        .iter()
        .map(|m| {
            (
                m.name.clone(),
                String::from_utf8_lossy(&m.data).into_owned(),
            )
        })
        .collect();
    // IBIO does not render imageDigestSources: mirrors reach the cluster as an extra manifest.
    if let Some(sources) = ic.image_digest_sources() {
        let idms = config::image_digest_mirror_set(&sources)?;
        manifests.push((
            IDMS_KEY.to_string(),
            String::from_utf8_lossy(&idms).into_owned(),
        ));
    }
    if !manifests.is_empty() {
        docs.push((
            EXTRA_MANIFESTS_FILE,
            objects::config_map(ns, objects::EXTRA_MANIFESTS_NAME, &manifests),
        ));
    }
    let bmc_secret = objects::bmc_secret_name(&ibc.hostname);
    let spec = ClusterSpec {
        cluster_name: ns,
        base_domain: &ic.base_domain,
        ssh_key: &ic.ssh_key,
        machine_networks: ic
            .networking
            .iter()
            .flat_map(|n| n.machine_network.iter().map(|m| m.cidr.as_str()))
            .collect(),
        proxy: ic.proxy.as_ref(),
        ntp_sources: &ibc.additional_ntp_sources,
        image_set,
        templates_namespace: &o.templates_namespace,
        ca_bundle,
        extra_manifests: !manifests.is_empty(),
        node: NodeSpec {
            hostname: &ibc.hostname,
            bmc_address: plan.bmc_address.clone(),
            bmc_secret,
            boot_mac: plan.site.boot_mac_address.as_deref().unwrap_or_default(),
            boot_mode: plan.site.boot_mode.as_deref(),
            root_device_hints: plan.site.root_device_hints.as_ref(),
            network_config: ibc.network_config.as_ref(),
        },
    };
    docs.push((CLUSTER_INSTANCE_FILE, objects::cluster_instance(&spec)?));
    Ok(docs)
}

/// The site's Secrets, by file name: the pull secret, the BMC's credentials and, for a site
/// `create config-image --sites` built, its identity.
fn site_secrets(
    o: &HubOptions,
    plan: &SitePlan<'_>,
) -> Result<Vec<(&'static str, Secret<String>)>> {
    let ic = &plan.inputs.install_config;
    let ns = ic.metadata.name.as_str();
    let bmc_secret = objects::bmc_secret_name(&plan.inputs.image_based_config.hostname);
    let no_password = Secret::new(String::new());
    let mode = o.secret_data;
    let mut secrets = vec![
        (
            PULL_SECRET_FILE,
            objects::pull_secret(ns, &ic.pull_secret, mode)?,
        ),
        (
            BMC_SECRET_FILE,
            objects::bmc_secret(
                ns,
                &bmc_secret,
                &plan.bmc_user,
                plan.bmc_password.as_ref().unwrap_or(&no_password),
                mode,
            )?,
        ),
    ];
    if let Some(h) = &plan.identity {
        let from = |p: &Path| format!("from {}", p.display());
        let data = IdentityData {
            kubeconfig: h.kubeconfig.expose(),
            kubeconfig_from: from(&h.kubeconfig_path),
            password: h.password.expose_str(),
            password_from: from(&h.password_path),
            manifest_json: h.manifest_json.expose(),
            manifest_from: format!(
                "{} inside {}",
                crate::contract::config_iso::MANIFEST_PATH,
                h.iso_path.display()
            ),
        };
        let identity = objects::identity_secrets(ns, &data, mode)?;
        secrets.extend(IDENTITY_FILES.into_iter().zip(identity));
    }
    Ok(secrets)
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
        let e = metal3_bmc_address("https://10.0.0.9", None).unwrap_err();
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
