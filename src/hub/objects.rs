//! The objects of one site as the hub takes them, as plain JSON values: the site's Namespace, its
//! `ClusterInstance` (SiteConfig, IBI templates), the CA-bundle and extra-manifest ConfigMaps, the
//! pull-secret and BMC-credential Secrets, and the fleet's `ClusterImageSet`; and their YAML text.
//! Names and fields follow `../shared/reference/hub-handoff.md` (SiteConfig ecff291f, IBIO bc1ddc61).
//! Secrets are built straight into a [`Secret`] and never pass through anything that prints.

use anyhow::{Context, Result};
use serde_json::{Map, Value, json};

use crate::config::{Proxy, RootDeviceHints, quote_booleans};
use crate::util::secret::Secret;

pub const CLUSTER_INSTANCE_API: &str = "siteconfig.open-cluster-management.io/v1alpha1";
pub const CLUSTER_IMAGE_SET_API: &str = "hive.openshift.io/v1";
/// SiteConfig's IBI templates, which the operator recreates in its own namespace at every start.
pub const CLUSTER_TEMPLATES: &str = "ibi-cluster-templates-v1";
pub const NODE_TEMPLATES: &str = "ibi-node-templates-v1";
/// The namespace ACM runs the SiteConfig operator in (the templates' ConfigMaps are there).
pub const DEFAULT_TEMPLATES_NAMESPACE: &str = "open-cluster-management";
/// The key IBIO reads the CA bundle from.
pub const CA_BUNDLE_KEY: &str = "tls-ca-bundle.pem";
/// What the referenced objects are called in the site's namespace.
pub const PULL_SECRET_NAME: &str = "pull-secret";
pub const CA_BUNDLE_NAME: &str = "ca-bundle";
pub const EXTRA_MANIFESTS_NAME: &str = "extra-manifests";
/// IBIO labels what it references with this, so a hub backup takes it; ibi writes it up front.
const BACKUP_LABEL: &str = "cluster.open-cluster-management.io/backup";

/// What the ClusterInstance of one site says.
#[derive(Debug, Clone)]
pub struct ClusterSpec<'a> {
    /// install-config `metadata.name`: the ClusterInstance's name and namespace.
    pub cluster_name: &'a str,
    pub base_domain: &'a str,
    pub ssh_key: &'a str,
    pub machine_networks: Vec<&'a str>,
    pub proxy: Option<&'a Proxy>,
    pub ntp_sources: &'a [String],
    pub image_set: &'a str,
    pub templates_namespace: &'a str,
    pub ca_bundle: bool,
    pub extra_manifests: bool,
    pub node: NodeSpec<'a>,
}

/// Its one node.
#[derive(Debug, Clone)]
pub struct NodeSpec<'a> {
    pub hostname: &'a str,
    /// metal3's form: `redfish-virtualmedia+https://HOST/redfish/v1/Systems/ID`.
    pub bmc_address: String,
    pub bmc_secret: String,
    pub boot_mac: &'a str,
    pub boot_mode: Option<&'a str>,
    pub root_device_hints: Option<&'a RootDeviceHints>,
    /// The host's nmstate document (image-based-config `networkConfig`).
    pub network_config: Option<&'a Value>,
}

/// The name of the BMC credentials Secret of `hostname`.
pub fn bmc_secret_name(hostname: &str) -> String {
    format!("{hostname}-bmc-secret")
}

/// Argo CD's sync-wave annotation: namespaces and the ClusterImageSet first, then the Secrets and
/// ConfigMaps the hub's operators read, then what makes them act (the ClusterInstance, ACM's
/// import), so IBIO finds the identity Secrets when it builds the configuration ISO.
pub const SYNC_WAVE: &str = "argocd.argoproj.io/sync-wave";

/// The sync wave of an object of `kind`.
pub fn sync_wave(kind: &str) -> &'static str {
    match kind {
        "Namespace" | "ClusterImageSet" => "0",
        "Secret" | "ConfigMap" => "1",
        _ => "2",
    }
}

/// `doc` with its kind's sync wave among its annotations.
pub fn with_sync_wave(mut doc: Value) -> Value {
    let kind = doc
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(m) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = m
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(SYNC_WAVE.into(), sync_wave(&kind).into());
        }
    }
    doc
}

fn meta(name: &str, namespace: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), name.into());
    if let Some(ns) = namespace {
        m.insert("namespace".into(), ns.into());
    }
    Value::Object(m)
}

pub fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta(name, None)})
}

pub fn cluster_image_set(name: &str, release_image: &str) -> Value {
    json!({
        "apiVersion": CLUSTER_IMAGE_SET_API,
        "kind": "ClusterImageSet",
        "metadata": meta(name, None),
        "spec": {"releaseImage": release_image},
    })
}

/// A ConfigMap of the site's namespace, labelled for the hub's backup.
pub fn config_map(namespace: &str, name: &str, data: &[(String, String)]) -> Value {
    let data: Map<String, Value> = data
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let mut metadata = meta(name, Some(namespace));
    metadata["labels"] = json!({BACKUP_LABEL: "true"});
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data})
}

/// The `nodeNetwork.interfaces` of an nmstate document: each interface that names its MAC address.
fn node_interfaces(network_config: &Value) -> Vec<Value> {
    network_config
        .get("interfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            let name = i.get("name")?.as_str()?;
            let mac = i.get("mac-address")?.as_str()?;
            Some(json!({"name": name, "macAddress": mac}))
        })
        .collect()
}

pub fn cluster_instance(s: &ClusterSpec<'_>) -> Result<Value> {
    let n = &s.node;
    let mut node = json!({
        "hostName": n.hostname,
        "role": "master",
        "bmcAddress": n.bmc_address,
        "bmcCredentialsName": {"name": n.bmc_secret},
        "bootMACAddress": n.boot_mac,
        "templateRefs": [{"name": NODE_TEMPLATES, "namespace": s.templates_namespace}],
    });
    if let Some(mode) = n.boot_mode {
        node["bootMode"] = mode.into();
    }
    if let Some(hints) = n.root_device_hints {
        node["rootDeviceHints"] =
            serde_json::to_value(hints).context("rendering rootDeviceHints")?;
    }
    if let Some(config) = n.network_config {
        // The CRD wants at least one interface when the list is there: none named, none written.
        let interfaces = node_interfaces(config);
        node["nodeNetwork"] = match interfaces.is_empty() {
            true => json!({"config": config}),
            false => json!({"interfaces": interfaces, "config": config}),
        };
    }
    let mut spec = json!({
        "clusterName": s.cluster_name,
        "baseDomain": s.base_domain,
        "clusterType": "SNO",
        "clusterImageSetNameRef": s.image_set,
        "pullSecretRef": {"name": PULL_SECRET_NAME},
        "templateRefs": [{"name": CLUSTER_TEMPLATES, "namespace": s.templates_namespace}],
        "nodes": [node],
    });
    if !s.ssh_key.is_empty() {
        spec["sshPublicKey"] = s.ssh_key.into();
    }
    if !s.machine_networks.is_empty() {
        spec["machineNetwork"] = s
            .machine_networks
            .iter()
            .map(|c| json!({"cidr": c}))
            .collect();
    }
    if let Some(p) = s.proxy {
        let mut proxy = Map::new();
        for (k, v) in [
            ("httpProxy", &p.http_proxy),
            ("httpsProxy", &p.https_proxy),
            ("noProxy", &p.no_proxy),
        ] {
            if !v.is_empty() {
                proxy.insert(k.into(), v.as_str().into());
            }
        }
        if !proxy.is_empty() {
            spec["proxy"] = Value::Object(proxy);
        }
    }
    if !s.ntp_sources.is_empty() {
        spec["additionalNTPSources"] = s.ntp_sources.into();
    }
    if s.ca_bundle {
        spec["caBundleRef"] = json!({"name": CA_BUNDLE_NAME});
    }
    if s.extra_manifests {
        spec["extraManifestsRefs"] = json!([{"name": EXTRA_MANIFESTS_NAME}]);
    }
    Ok(json!({
        "apiVersion": CLUSTER_INSTANCE_API,
        "kind": "ClusterInstance",
        "metadata": meta(s.cluster_name, Some(s.cluster_name)),
        "spec": spec,
    }))
}

/// How the Secrets are written: with their data, or as templates whose data a sealed-secrets or
/// external-secrets step fills (`--secret-templates`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretData {
    Values,
    Templates,
}

/// One key of a Secret: its value, and in words what a template's user fills it with.
pub struct SecretKey<'a> {
    pub key: &'a str,
    pub value: &'a [u8],
    pub fill: String,
}

/// A Secret's YAML with `data` (base64), labelled for the hub's backup (and `labels`). The text holds
/// the secret, so it is one. As a template, every key is there with an empty value, and a comment
/// at the top says what each one takes.
fn secret_yaml(
    namespace: &str,
    name: &str,
    type_: &str,
    labels: &[(&str, &str)],
    keys: &[SecretKey<'_>],
    mode: SecretData,
) -> Result<Secret<String>> {
    let data: Map<String, Value> = keys
        .iter()
        .map(|k| {
            let v = match mode {
                SecretData::Values => openssl::base64::encode_block(k.value),
                SecretData::Templates => String::new(),
            };
            (k.key.to_string(), v.into())
        })
        .collect();
    let mut metadata = meta(name, Some(namespace));
    let mut all_labels = Map::new();
    all_labels.insert(BACKUP_LABEL.into(), "true".into());
    for (k, v) in labels {
        all_labels.insert((*k).into(), (*v).into());
    }
    metadata["labels"] = Value::Object(all_labels);
    let doc = with_sync_wave(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": type_, "data": data}),
    );
    let yaml = to_yaml(&doc).context("rendering a Secret")?;
    Ok(Secret::new(match mode {
        SecretData::Values => yaml,
        SecretData::Templates => format!("{}{yaml}", template_header(keys)),
    }))
}

/// What each key of a template takes, as YAML comments.
fn template_header(keys: &[SecretKey<'_>]) -> String {
    let mut h = String::from(
        "# A template: ibi left the data out (--secret-templates). Fill each key of data with the\n\
         # base64 of what it names (or let your sealed-secrets / external-secrets step do it):\n",
    );
    for k in keys {
        h.push_str(&format!("#   {}: {}\n", k.key, k.fill));
    }
    h
}

/// ACM's import of a running cluster (`--adopt`): the objects SiteConfig's IBI cluster templates
/// render for ACM registration (stolostron/siteconfig ecff291f,
/// `internal/templates/image-based-installer/template.go`: ManagedCluster, KlusterletAddonConfig,
/// the same fields), without the ClusterInstance that would install the host again, and the
/// import Secret the managedcluster-import-controller reads (`auto-import-secret`, key
/// `kubeconfig`, in the cluster's namespace).
pub const MANAGED_CLUSTER_API: &str = "cluster.open-cluster-management.io/v1";
pub const KLUSTERLET_ADDON_CONFIG_API: &str = "agent.open-cluster-management.io/v1";
pub const AUTO_IMPORT_SECRET: &str = "auto-import-secret";

/// The cluster's ManagedCluster (cluster-scoped), accepted by the hub.
pub fn managed_cluster(cluster: &str) -> Value {
    let mut metadata = meta(cluster, None);
    metadata["labels"] = json!({"cloud": "auto-detect", "vendor": "auto-detect"});
    json!({"apiVersion": MANAGED_CLUSTER_API, "kind": "ManagedCluster", "metadata": metadata,
        "spec": {"hubAcceptsClient": true}})
}

/// The add-ons ACM deploys on the cluster, as SiteConfig's template enables them.
pub fn klusterlet_addon_config(cluster: &str) -> Value {
    json!({"apiVersion": KLUSTERLET_ADDON_CONFIG_API, "kind": "KlusterletAddonConfig",
    "metadata": meta(cluster, Some(cluster)),
    "spec": {
        "clusterName": cluster,
        "clusterNamespace": cluster,
        "applicationManager": {"enabled": true},
        "certPolicyController": {"enabled": true},
        "iamPolicyController": {"enabled": true},
        "policyController": {"enabled": true},
        "searchCollector": {"enabled": false},
    }})
}

/// The Secret the hub imports the running cluster with: its admin kubeconfig.
pub fn auto_import_secret(
    cluster: &str,
    kubeconfig: &[u8],
    kubeconfig_from: String,
    mode: SecretData,
) -> Result<Secret<String>> {
    secret_yaml(
        cluster,
        AUTO_IMPORT_SECRET,
        "Opaque",
        &[],
        &[SecretKey {
            key: "kubeconfig",
            value: kubeconfig,
            fill: format!("the cluster's admin kubeconfig ({kubeconfig_from})"),
        }],
        mode,
    )
}

/// The pull secret (`.dockerconfigjson`), as the ClusterDeployment references it.
pub fn pull_secret(
    namespace: &str,
    pull_secret: &Secret<String>,
    mode: SecretData,
) -> Result<Secret<String>> {
    secret_yaml(
        namespace,
        PULL_SECRET_NAME,
        "kubernetes.io/dockerconfigjson",
        &[],
        &[SecretKey {
            key: ".dockerconfigjson",
            value: pull_secret.expose_str().as_bytes(),
            fill: "the pull secret (install-config.yaml pullSecret: JSON with auths)".into(),
        }],
        mode,
    )
}

/// The BMC credentials (`username`, `password`), as the BareMetalHost references them.
pub fn bmc_secret(
    namespace: &str,
    name: &str,
    user: &str,
    password: &Secret<String>,
    mode: SecretData,
) -> Result<Secret<String>> {
    secret_yaml(
        namespace,
        name,
        "Opaque",
        &[],
        &[
            SecretKey {
                key: "username",
                value: user.as_bytes(),
                fill: format!("the BMC user ({user:?} in the inventory)"),
            },
            SecretKey {
                key: "password",
                value: password.expose_str().as_bytes(),
                fill: "the BMC password".into(),
            },
        ],
        mode,
    )
}

/// Labels IBIO puts on the identity Secrets it writes itself, but `image-based-installed…/created`
/// (ibi did not create them on a hub), plus SiteConfig's preservation label, without which a
/// SiteConfig reinstall (`preservationMode: ClusterIdentity`) deletes them with the
/// ClusterDeployment instead of restoring them.
pub const PRESERVE_LABEL: &str = "siteconfig.open-cluster-management.io/preserve";
pub const PRESERVE_CLUSTER_IDENTITY: &str = "cluster-identity";
const CD_NAME_LABEL: &str = "hive.openshift.io/cluster-deployment-name";
const SECRET_TYPE_LABEL: &str = "hive.openshift.io/secret-type";
/// The user IBIO's password Secret names (the installer's `kubeadmin`).
pub const KUBEADMIN_USER: &str = "kubeadmin";

/// What the three identity Secrets hold, with where each value came from (for the templates).
pub struct IdentityData<'a> {
    pub kubeconfig: &'a [u8],
    pub kubeconfig_from: String,
    pub password: &'a str,
    pub password_from: String,
    pub manifest_json: &'a [u8],
    pub manifest_from: String,
}

/// The names IBIO's reinstall looks for: `<cd>-admin-kubeconfig`, `<cd>-admin-password`,
/// `<cd>-seed-reconfiguration`, where the ClusterDeployment is named after the cluster.
pub fn identity_secret_names(cluster: &str) -> [String; 3] {
    [
        format!("{cluster}-admin-kubeconfig"),
        format!("{cluster}-admin-password"),
        format!("{cluster}-seed-reconfiguration"),
    ]
}

/// The three Secrets IBIO's reinstall reads, in the cluster's namespace, in the order of
/// [`identity_secret_names`].
pub fn identity_secrets(
    cluster: &str,
    d: &IdentityData<'_>,
    mode: SecretData,
) -> Result<[Secret<String>; 3]> {
    let [kubeconfig, password, manifest] = identity_secret_names(cluster);
    let labels = |type_: &'static str| {
        [
            (PRESERVE_LABEL, PRESERVE_CLUSTER_IDENTITY),
            (CD_NAME_LABEL, cluster),
            (SECRET_TYPE_LABEL, type_),
        ]
    };
    Ok([
        secret_yaml(
            cluster,
            &kubeconfig,
            "Opaque",
            &labels("kubeconfig"),
            &[SecretKey {
                key: "kubeconfig",
                value: d.kubeconfig,
                fill: format!("the admin kubeconfig ibi handed out, {}", d.kubeconfig_from),
            }],
            mode,
        )?,
        secret_yaml(
            cluster,
            &password,
            "Opaque",
            &labels("kubeadmincreds"),
            &[
                SecretKey {
                    key: "username",
                    value: KUBEADMIN_USER.as_bytes(),
                    fill: format!("{KUBEADMIN_USER:?}"),
                },
                SecretKey {
                    key: "password",
                    value: d.password.as_bytes(),
                    fill: format!("the kubeadmin password, {}", d.password_from),
                },
            ],
            mode,
        )?,
        secret_yaml(
            cluster,
            &manifest,
            "Opaque",
            &labels("manifest.json"),
            &[SecretKey {
                key: "manifest.json",
                value: d.manifest_json,
                fill: format!("the site's manifest.json, {}", d.manifest_from),
            }],
            mode,
        )?,
    ])
}

/// A document as YAML that YAML 1.1 readers (kubectl's) read the same way.
pub fn to_yaml(doc: &Value) -> Result<String> {
    let text = serde_yaml_ng::to_string(doc).context("rendering YAML")?;
    Ok(quote_booleans(&text))
}

#[cfg(test)]
mod tests;
