//! The hub's files, rendered in memory from the checked plans: per site its objects (namespace, CA
//! bundle, extra manifests, ClusterInstance) or, for an adopted cluster, its import into ACM; its
//! Secrets; the kustomizations that apply OUT in one step. Nothing here writes.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::objects::{self, ClusterSpec, IdentityData, NodeSpec};
use super::plan::{HubOptions, SitePlan};
use crate::config::{self, Fleet};
use crate::util::secret::Secret;

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

/// One file to write: its text, and whether it is a Secret (0600 in a 0700 folder).
pub(super) struct OutFile {
    pub(super) path: PathBuf,
    pub(super) text: Secret<String>,
    pub(super) secret: bool,
}

pub(super) fn render_site(
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

/// A non-secret object as YAML, with its sync wave.
pub(super) fn doc_file(path: PathBuf, doc: &serde_json::Value) -> Result<OutFile> {
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
pub(super) fn kustomizations(out: &Path, outs: &[OutFile]) -> Result<Vec<OutFile>> {
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
