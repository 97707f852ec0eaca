//! What a hub refuses that ibi's own inputs allow, checked before anything is written
//! ([`site_findings`], [`manifest_findings`]), and the field rules every object ibi writes must
//! follow ([`check_object`]): the published schemas' required fields, enum values, patterns and
//! types, and the rules IBIO's and SiteConfig's webhooks and controllers enforce outside them
//! (`../shared/reference/hub-handoff.md`: SiteConfig ecff291f, IBIO bc1ddc61).
//!
//! Already enforced for every site by ibi's input rules, and so not repeated here: a hostname that
//! is a DNS-1123 subdomain (IBIO's webhook on `hostname`), an SSH key that parses as an
//! authorized_keys line (`sshKey`), machine networks that parse as CIDRs and are present (ibi needs
//! one or two; IBIO's webhook needs one with a proxy), a non-empty `auths` in the pull secret.

use serde_json::Value;

use super::objects::{CLUSTER_TEMPLATES, NODE_TEMPLATES};
use crate::config::{
    BOOT_MODES, ExtraManifest, Finding, INSTALL_CONFIG_FILE, SiteInputs, decoded_user_password,
    is_dns1123_label, is_dns1123_subdomain, is_mac,
};

/// IBIO writes these into the extra manifests itself.
pub const RESERVED_MANIFESTS: &[&str] = &["invoker-cm.yaml", "ibi-monitor-cm.yaml"];
/// Longer extra-manifest file names break an image-based install from a hub (OCPBUGS-48244).
pub const MAX_MANIFEST_NAME: usize = 30;
const ROOT_DEVICE_HINT_KEYS: &[&str] = &[
    "deviceName",
    "hctl",
    "model",
    "vendor",
    "serialNumber",
    "minSizeGigabytes",
    "wwn",
    "wwnWithExtension",
    "wwnVendorExtension",
    "rotational",
];

/// What IBIO refuses in a site's rendered inputs (findings about `install-config.yaml`, for the
/// caller to place in the inventory or the base): every pull-secret entry needs an `auth` that is
/// base64 of `user:password` with exactly one `:` (IBIO splits on `:` and refuses any other
/// count; ibi, like the installer, accepts a `credsStore` or a token with a warning); the
/// cluster name is the site's namespace on the hub (a DNS-1123 label).
pub fn site_findings(inputs: &SiteInputs) -> Vec<Finding> {
    let mut f = Vec::new();
    let ic = &inputs.install_config;
    let mut add = |field: &str, message: String| {
        f.push(Finding {
            file: INSTALL_CONFIG_FILE.into(),
            field: field.into(),
            message,
            line: None,
        });
    };
    let json: Value = serde_json::from_str(ic.pull_secret.expose_str()).unwrap_or(Value::Null);
    if let Some(auths) = json.get("auths").and_then(Value::as_object) {
        for (registry, entry) in auths {
            let auth = entry.get("auth").and_then(Value::as_str);
            let problem = match auth.map(user_password_colons) {
                None => Some("has no auth (a credsStore is not enough on a hub)"),
                Some(None) => Some("has an auth that is not base64 of \"user:password\""),
                Some(Some(1)) => None,
                Some(Some(_)) => Some("has a password containing ':'"),
            };
            if let Some(problem) = problem {
                add(
                    "pullSecret",
                    format!(
                        "the entry for {:?} {problem}: the hub's image-based-install-operator refuses it",
                        crate::util::text::escape_control(registry)
                    ),
                );
            }
        }
    }
    let name = &ic.metadata.name;
    if !is_dns1123_label(name) {
        add(
            "metadata.name",
            format!(
                "invalid value {name:?}: on a hub the cluster name is its namespace (lower-case letters, digits and '-', at most 63)"
            ),
        );
    }
    if let Some(p) = &ic.proxy {
        let has_network = ic.networking.iter().any(|n| !n.machine_network.is_empty());
        if (!p.http_proxy.is_empty() || !p.https_proxy.is_empty()) && !has_network {
            add(
                "networking.machineNetwork",
                "required with a proxy: the hub's ImageClusterInstall webhook refuses a proxy without a machine network".into(),
            );
        }
    }
    f
}

/// How many `:` the decoded `user:password` of `auth` holds (`None`: not base64 of UTF-8 with a
/// non-empty user).
fn user_password_colons(auth: &str) -> Option<usize> {
    decoded_user_password(auth).map(|text| text.expose_str().matches(':').count())
}

/// What a hub refuses in the shared extra manifests, each named by its file in `manifests_dir`:
/// names over [`MAX_MANIFEST_NAME`] characters, the names IBIO writes itself, names that are not
/// ConfigMap keys, and a name ibi uses for the mirror set (`reserved`).
pub fn manifest_findings(
    manifests_dir: &str,
    manifests: &[ExtraManifest],
    reserved: Option<&str>,
) -> Vec<Finding> {
    let mut f = Vec::new();
    for m in manifests {
        let mut add = |message: String| {
            f.push(Finding {
                file: format!("{manifests_dir}/{}", m.name),
                field: String::new(),
                message,
                line: None,
            });
        };
        let n = m.name.chars().count();
        if n > MAX_MANIFEST_NAME {
            add(format!(
                "the name has {n} characters: a hub's image-based install breaks on extra-manifest names over \
                 {MAX_MANIFEST_NAME} (OCPBUGS-48244); rename the file"
            ));
        }
        if RESERVED_MANIFESTS.contains(&m.name.as_str()) || reserved == Some(m.name.as_str()) {
            add(
                "the name is one the hub writes itself (image-based-install-operator, or ibi's mirror set): rename the file"
                    .into(),
            );
        }
        if !is_config_map_key(&m.name) {
            add(
                "the name is not a ConfigMap key (letters, digits, '-', '_' and '.', at most 253)"
                    .into(),
            );
        }
    }
    f
}

fn is_config_map_key(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A rule of the ClusterInstance CRD's OpenAPI schema, at a path (`spec.nodes[].role`: each item of
/// `spec.nodes`, its `role`).
enum Rule {
    /// The object's only fields: the API server refuses any other (kubectl's strict field
    /// validation) or drops it.
    Fields(&'static [&'static str]),
    Required(&'static [&'static str]),
    Enum(&'static [&'static str]),
    MinItems(usize),
    MaxItems(usize),
    MinLength(usize),
    /// An integer of at least this.
    Minimum(u64),
    /// The schema's MAC pattern (`[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}`).
    Mac,
    String,
    Array,
    Object,
}

/// The ClusterInstance CRD's rules, every one the API server enforces for a field ibi may write and
/// for the objects around them: stolostron/siteconfig ecff291f,
/// `config/crd/bases/siteconfig.open-cluster-management.io_clusterinstances.yaml` (apiVersion
/// v1alpha1). Facts carried over by hand, not the file.
const CLUSTER_INSTANCE_SCHEMA: &[(&str, Rule)] = &[
    (
        "spec",
        Rule::Fields(&[
            "additionalNTPSources",
            "apiVIPs",
            "baseDomain",
            "caBundleRef",
            "clusterImageSetNameRef",
            "clusterName",
            "clusterNetwork",
            "clusterType",
            "cpuArchitecture",
            "cpuPartitioningMode",
            "diskEncryption",
            "extraAnnotations",
            "extraLabels",
            "extraManifestsRefs",
            "holdInstallation",
            "ignitionConfigOverride",
            "ingressVIPs",
            "installConfigOverrides",
            "machineNetwork",
            "networkType",
            "nodes",
            "platformType",
            "proxy",
            "pruneManifests",
            "pullSecretRef",
            "reinstall",
            "serviceNetwork",
            "sshPublicKey",
            "suppressedManifests",
            "templateRefs",
        ]),
    ),
    (
        "spec",
        Rule::Required(&[
            "baseDomain",
            "clusterImageSetNameRef",
            "clusterName",
            "nodes",
            "pullSecretRef",
            "templateRefs",
        ]),
    ),
    ("spec.baseDomain", Rule::String),
    ("spec.clusterName", Rule::String),
    ("spec.clusterImageSetNameRef", Rule::String),
    ("spec.sshPublicKey", Rule::String),
    ("spec.additionalNTPSources", Rule::Array),
    ("spec.additionalNTPSources[]", Rule::String),
    ("spec.apiVIPs", Rule::MaxItems(2)),
    ("spec.ingressVIPs", Rule::MaxItems(2)),
    ("spec.clusterNetwork[]", Rule::Required(&["cidr"])),
    ("spec.serviceNetwork[]", Rule::Required(&["cidr"])),
    ("spec.machineNetwork", Rule::Array),
    ("spec.machineNetwork[]", Rule::Required(&["cidr"])),
    (
        "spec.clusterType",
        Rule::Enum(&[
            "SNO",
            "HighlyAvailable",
            "HostedControlPlane",
            "HighlyAvailableArbiter",
        ]),
    ),
    (
        "spec.cpuArchitecture",
        Rule::Enum(&["x86_64", "aarch64", "multi"]),
    ),
    (
        "spec.cpuPartitioningMode",
        Rule::Enum(&["None", "AllNodes"]),
    ),
    (
        "spec.networkType",
        Rule::Enum(&["OpenShiftSDN", "OVNKubernetes"]),
    ),
    (
        "spec.platformType",
        Rule::Enum(&["", "BareMetal", "None", "VSphere", "Nutanix", "External"]),
    ),
    (
        "spec.proxy",
        Rule::Fields(&["httpProxy", "httpsProxy", "noProxy"]),
    ),
    (
        "spec.reinstall",
        Rule::Required(&["generation", "preservationMode"]),
    ),
    (
        "spec.reinstall.preservationMode",
        Rule::Enum(&["None", "All", "ClusterIdentity"]),
    ),
    (
        "spec.templateRefs[]",
        Rule::Required(&["name", "namespace"]),
    ),
    ("spec.templateRefs[].name", Rule::MinLength(1)),
    ("spec.templateRefs[].namespace", Rule::MinLength(1)),
    ("spec.nodes", Rule::Array),
    (
        "spec.nodes[]",
        Rule::Fields(&[
            "automatedCleaningMode",
            "bmcAddress",
            "bmcCredentialsName",
            "bootMACAddress",
            "bootMode",
            "cpuArchitecture",
            "extraAnnotations",
            "extraLabels",
            "hostName",
            "hostRef",
            "ignitionConfigOverride",
            "installerArgs",
            "ironicInspect",
            "nodeLabels",
            "nodeNetwork",
            "pruneManifests",
            "role",
            "rootDeviceHints",
            "suppressedManifests",
            "templateRefs",
        ]),
    ),
    (
        "spec.nodes[]",
        Rule::Required(&[
            "bmcAddress",
            "bmcCredentialsName",
            "bootMACAddress",
            "hostName",
            "templateRefs",
        ]),
    ),
    ("spec.nodes[].bmcCredentialsName", Rule::Required(&["name"])),
    ("spec.nodes[].bootMACAddress", Rule::Mac),
    (
        "spec.nodes[].automatedCleaningMode",
        Rule::Enum(&["metadata", "disabled"]),
    ),
    // The CRD's enum, which the inventory's bootMode already takes.
    ("spec.nodes[].bootMode", Rule::Enum(BOOT_MODES)),
    (
        "spec.nodes[].cpuArchitecture",
        Rule::Enum(&["x86_64", "aarch64"]),
    ),
    (
        "spec.nodes[].hostRef",
        Rule::Required(&["name", "namespace"]),
    ),
    ("spec.nodes[].hostRef.name", Rule::MinLength(1)),
    ("spec.nodes[].hostRef.namespace", Rule::MinLength(1)),
    ("spec.nodes[].ironicInspect", Rule::Enum(&["", "disabled"])),
    (
        "spec.nodes[].role",
        Rule::Enum(&["master", "worker", "arbiter"]),
    ),
    (
        "spec.nodes[].nodeNetwork",
        Rule::Fields(&["config", "interfaces"]),
    ),
    ("spec.nodes[].nodeNetwork.config", Rule::Object),
    ("spec.nodes[].nodeNetwork.interfaces", Rule::MinItems(1)),
    (
        "spec.nodes[].nodeNetwork.interfaces[]",
        Rule::Required(&["macAddress", "name"]),
    ),
    (
        "spec.nodes[].nodeNetwork.interfaces[].macAddress",
        Rule::Mac,
    ),
    (
        "spec.nodes[].rootDeviceHints",
        Rule::Fields(ROOT_DEVICE_HINT_KEYS),
    ),
    (
        "spec.nodes[].rootDeviceHints.minSizeGigabytes",
        Rule::Minimum(0),
    ),
    (
        "spec.nodes[].templateRefs[]",
        Rule::Required(&["name", "namespace"]),
    ),
    ("spec.nodes[].templateRefs[].name", Rule::MinLength(1)),
    ("spec.nodes[].templateRefs[].namespace", Rule::MinLength(1)),
];

/// Every value at `path` (`a.b[].c`), with its concrete path (`a.b[0].c`).
fn at_path<'v>(v: &'v Value, path: &str) -> Vec<(String, &'v Value)> {
    let mut found = vec![(String::new(), v)];
    for part in path.split('.') {
        let (key, each) = match part.strip_suffix("[]") {
            Some(k) => (k, true),
            None => (part, false),
        };
        let mut next = Vec::new();
        for (at, v) in found {
            let Some(child) = v.get(key) else { continue };
            let at = if at.is_empty() {
                key.to_string()
            } else {
                format!("{at}.{key}")
            };
            match (each, child.as_array()) {
                (false, _) => next.push((at, child)),
                (true, Some(items)) => next.extend(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, item)| (format!("{at}[{i}]"), item)),
                ),
                (true, None) => {}
            }
        }
        found = next;
    }
    found
}

/// The violations of [`CLUSTER_INSTANCE_SCHEMA`], one message each.
fn schema_errors(doc: &Value, e: &mut Errors) {
    for (path, rule) in CLUSTER_INSTANCE_SCHEMA {
        for (at, v) in at_path(doc, path) {
            match rule {
                Rule::Fields(known) => {
                    for k in v.as_object().into_iter().flat_map(|m| m.keys()) {
                        if !known.contains(&k.as_str()) {
                            e.push(format!("{at}.{k}: not a field of the ClusterInstance CRD"));
                        }
                    }
                }
                Rule::Required(fields) => {
                    for f in *fields {
                        if v.get(f).is_none() {
                            e.push(format!("{at}.{f}: required by the ClusterInstance CRD"));
                        }
                    }
                }
                Rule::Enum(values) => {
                    if !v.as_str().is_some_and(|s| values.contains(&s)) {
                        e.push(format!("{at}: {v} is not one of {values:?}"));
                    }
                }
                Rule::MinItems(n) => {
                    if v.as_array().is_none_or(|a| a.len() < *n) {
                        e.push(format!(
                            "{at}: the ClusterInstance CRD wants at least {n} item(s)"
                        ));
                    }
                }
                Rule::MaxItems(n) => {
                    if v.as_array().is_some_and(|a| a.len() > *n) {
                        e.push(format!(
                            "{at}: the ClusterInstance CRD allows at most {n} item(s)"
                        ));
                    }
                }
                Rule::MinLength(n) => {
                    if v.as_str().is_none_or(|s| s.chars().count() < *n) {
                        e.push(format!(
                            "{at}: must be a string of at least {n} character(s)"
                        ));
                    }
                }
                Rule::Minimum(n) => {
                    if v.as_u64().is_none_or(|x| x < *n) {
                        e.push(format!("{at}: must be an integer of at least {n}"));
                    }
                }
                Rule::Mac => {
                    if !v.as_str().is_some_and(is_mac) {
                        e.push(format!("{at}: {v} does not match xx:xx:xx:xx:xx:xx"));
                    }
                }
                Rule::String if !v.is_string() => e.push(format!("{at}: must be a string")),
                Rule::Array if !v.is_array() => e.push(format!("{at}: must be a list")),
                Rule::Object if !v.is_object() => e.push(format!("{at}: must be a map")),
                Rule::String | Rule::Array | Rule::Object => {}
            }
        }
    }
}

/// The object's violations of the field rules of its kind, one message each (empty: none).
pub fn check_object(doc: &Value) -> Vec<String> {
    let mut e = Errors::default();
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    e.string(doc, "apiVersion");
    e.string(doc, "kind");
    e.name(doc, "metadata.name", is_dns1123_subdomain);
    match kind {
        "Namespace" => e.name(doc, "metadata.name", is_dns1123_label),
        "ClusterImageSet" => e.string(doc, "spec.releaseImage"),
        "ConfigMap" | "Secret" => {
            e.string(doc, "metadata.namespace");
            let data = doc.get("data").and_then(Value::as_object);
            match data {
                None => e.push("data: required (a map)"),
                Some(d) => {
                    for (k, v) in d {
                        if !is_config_map_key(k) {
                            e.push(format!("data: key {k:?} is not a valid key"));
                        }
                        if !v.is_string() {
                            e.push(format!("data.{k}: must be a string"));
                        }
                    }
                }
            }
            if kind == "Secret" {
                let type_ = doc.get("type").and_then(Value::as_str).unwrap_or("");
                if type_ == "kubernetes.io/dockerconfigjson"
                    && data.is_none_or(|d| !d.contains_key(".dockerconfigjson"))
                {
                    e.push("data: a kubernetes.io/dockerconfigjson Secret needs .dockerconfigjson");
                }
            }
        }
        "ManagedCluster" => {
            if doc.pointer("/metadata/namespace").is_some() {
                e.push("metadata.namespace: a ManagedCluster is cluster-scoped");
            }
            e.name(doc, "metadata.name", is_dns1123_label);
        }
        "KlusterletAddonConfig" => {
            e.string(doc, "metadata.namespace");
            e.string(doc, "spec.clusterName");
            e.string(doc, "spec.clusterNamespace");
        }
        "ClusterInstance" => {
            schema_errors(doc, &mut e);
            cluster_instance(doc, &mut e);
        }
        other => e.push(format!("kind {other:?}: not one ibi writes")),
    }
    e.0
}

fn cluster_instance(doc: &Value, e: &mut Errors) {
    let spec = doc.get("spec").unwrap_or(&Value::Null);
    for field in [
        "spec.baseDomain",
        "spec.clusterImageSetNameRef",
        "spec.clusterName",
        "spec.pullSecretRef.name",
    ] {
        e.string(doc, field);
    }
    e.name(doc, "spec.clusterName", is_dns1123_label);
    // Required by ibi's own templates' rendering (IBIO: SNO only), beyond the CRD's enum.
    if spec.get("clusterType").and_then(Value::as_str) != Some("SNO") {
        e.push("spec.clusterType: ibi writes SNO clusters only");
    }
    e.template_refs(doc, "spec.templateRefs", CLUSTER_TEMPLATES);
    if doc.pointer("/metadata/namespace").and_then(Value::as_str)
        != spec.get("clusterName").and_then(Value::as_str)
    {
        e.push("metadata.namespace: must be the cluster name (the namespace the IBI templates render into)");
    }
    e.each_set(spec, "machineNetwork", "cidr");
    let has_network = !array(spec, "machineNetwork").is_empty();
    if spec.get("proxy").is_some() && !has_network {
        e.push("spec.proxy: needs spec.machineNetwork (IBIO's webhook)");
    }
    e.each_set(spec, "extraManifestsRefs", "name");
    let nodes = array(spec, "nodes");
    if nodes.is_empty() {
        e.push("spec.nodes: required");
    }
    let masters = nodes
        .iter()
        .filter(|n| n.get("role").and_then(Value::as_str).unwrap_or("master") == "master")
        .count();
    if spec.get("clusterType").and_then(Value::as_str) == Some("SNO") && masters != 1 {
        e.push(format!(
            "spec.nodes: SNO needs exactly one master, found {masters}"
        ));
    }
    for (i, node) in nodes.iter().enumerate() {
        let at = |f: &str| format!("spec.nodes[{i}].{f}");
        let mut sub = Errors::default();
        for f in [
            "hostName",
            "bmcAddress",
            "bmcCredentialsName.name",
            "bootMACAddress",
        ] {
            sub.string(node, f);
        }
        sub.name(node, "hostName", is_dns1123_subdomain);
        sub.template_refs(node, "templateRefs", NODE_TEMPLATES);
        // The hints' value types (metal3's), beyond the CRD's list of keys.
        for (k, v) in node
            .get("rootDeviceHints")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let ok = match k.as_str() {
                "minSizeGigabytes" => v.is_u64(),
                "rotational" => v.is_boolean(),
                _ => v.is_string(),
            };
            if !ok {
                sub.push(format!(
                    "rootDeviceHints.{k}: not a metal3 hint of that type"
                ));
            }
        }
        if let Some(nn) = node.get("nodeNetwork") {
            for (j, iface) in array(nn, "interfaces").iter().enumerate() {
                if iface
                    .get("name")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    sub.push(format!(
                        "nodeNetwork.interfaces[{j}].name: must not be empty"
                    ));
                }
            }
        }
        e.0.extend(sub.0.into_iter().map(|m| at(&m)));
    }
}

fn array<'v>(v: &'v Value, key: &str) -> &'v [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

#[derive(Default)]
struct Errors(Vec<String>);

impl Errors {
    fn push(&mut self, m: impl Into<String>) {
        self.0.push(m.into());
    }

    fn get<'v>(v: &'v Value, dotted: &str) -> Option<&'v Value> {
        dotted.split('.').try_fold(v, |v, k| v.get(k))
    }

    /// `dotted` is a non-empty string.
    fn string(&mut self, v: &Value, dotted: &str) {
        match Self::get(v, dotted) {
            None => self.push(format!("{dotted}: required")),
            Some(Value::String(s)) if !s.is_empty() => {}
            Some(Value::String(_)) => self.push(format!("{dotted}: must not be empty")),
            Some(_) => self.push(format!("{dotted}: must be a string")),
        }
    }

    /// `dotted`, when a string, passes `ok`.
    fn name(&mut self, v: &Value, dotted: &str, ok: impl Fn(&str) -> bool) {
        if let Some(s) = Self::get(v, dotted).and_then(Value::as_str)
            && !s.is_empty()
            && !ok(s)
        {
            self.push(format!("{dotted}: {s:?} is not a valid name"));
        }
    }

    /// Every item of `spec.<list>` has a non-empty string `field`.
    fn each_set(&mut self, spec: &Value, list: &str, field: &str) {
        for (i, item) in array(spec, list).iter().enumerate() {
            if item
                .get(field)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                self.push(format!("spec.{list}[{i}].{field}: required"));
            }
        }
    }

    /// A non-empty list of `{name, namespace}`, both set, naming `template`.
    fn template_refs(&mut self, v: &Value, dotted: &str, template: &str) {
        let refs = Self::get(v, dotted).and_then(Value::as_array);
        let Some(refs) = refs.filter(|r| !r.is_empty()) else {
            self.push(format!("{dotted}: required (SiteConfig's {template})"));
            return;
        };
        for (i, r) in refs.iter().enumerate() {
            for f in ["name", "namespace"] {
                if r.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                    self.push(format!("{dotted}[{i}].{f}: required"));
                }
            }
        }
        if !refs
            .iter()
            .any(|r| r.get("name").and_then(Value::as_str) == Some(template))
        {
            self.push(format!("{dotted}: does not name SiteConfig's {template}"));
        }
    }
}

#[cfg(test)]
mod tests;
