//! The SeedReconfiguration document (`cluster-configuration/manifest.json`) that lifecycle-agent's
//! post-pivot reads on first boot, and the ImageDigestMirrorSet placed beside it.
//!
//! Key names, omission rules and quirks follow the installer's serialisation (Go `encoding/json`
//! of lifecycle-agent's `SeedReconfiguration`): snake_case keys with omitempty, except the crypto
//! block, which has Go field names as keys (`IngresssCrypto` really has three s), and
//! `additionalTrustBundle`, which is a struct and so always present with all three keys.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::config::{Proxy, SiteInputs};
use crate::config_image::pki::SiteCrypto;
use crate::contract::config_iso::SEED_RECONFIGURATION_VERSION;
use crate::util::secret::Secret;

/// Name of the user CA configmap; post-pivot maps it to recert's `proxy_trusted_ca_bundle`.
pub const USER_CA_BUNDLE_CONFIGMAP: &str = "user-ca-bundle";
pub use crate::config::{IDMS_NAME, image_digest_mirror_set};
/// chrony.conf base the installer writes before the user's servers. The leading newline is the
/// installer's and is kept so our manifest matches theirs byte for byte.
const CHRONY_BASE: &str = "\npool 0.rhel.pool.ntp.org iburst\ndriftfile /var/lib/chrony/drift\nmakestep 1.0 3\nrtcsync\nlogdir /var/log/chrony";

/// What the site's identity contributes to the document (kept in `DIR/.ibi/` between runs).
pub struct Identity<'a> {
    pub cluster_id: &'a str,
    pub infra_id: &'a str,
    pub kubeadmin_password_hash: &'a str,
    pub crypto: &'a SiteCrypto,
}

#[derive(Debug, Serialize)]
pub struct SeedReconfiguration {
    #[serde(rename = "additionalTrustBundle")]
    pub additional_trust_bundle: AdditionalTrustBundle,
    pub api_version: u32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub base_domain: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster_id: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub chrony_config: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub infra_id: String,
    #[serde(skip_serializing_if = "Secret::is_empty")]
    pub kubeadmin_password_hash: Secret<String>,
    #[serde(rename = "KubeconfigCryptoRetention")]
    pub kubeconfig_crypto_retention: KubeconfigCryptoRetention,
    /// The first machine network: the only one lifecycle-agent 4.16–4.19 reads (post-pivot needs it
    /// with a proxy and for the node-IP hint); 4.20+ reads `machine_networks` and falls back to it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub machine_network: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machine_networks: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub raw_nm_state_config: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub release_registry: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ssh_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Proxy>,
    #[serde(skip_serializing_if = "Secret::is_empty")]
    pub pull_secret: Secret<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, String>,
}

#[derive(Debug, Default, Serialize, PartialEq)]
pub struct AdditionalTrustBundle {
    #[serde(rename = "userCaBundle")]
    pub user_ca_bundle: String,
    #[serde(rename = "proxyConfigmapName")]
    pub proxy_configmap_name: String,
    #[serde(rename = "proxyConfigmapBundle")]
    pub proxy_configmap_bundle: String,
}

#[derive(Debug, Serialize)]
pub struct KubeconfigCryptoRetention {
    #[serde(rename = "KubeAPICrypto")]
    pub kube_api_crypto: KubeApiCrypto,
    /// Three s: lifecycle-agent's Go field name, which is the JSON key.
    #[serde(rename = "IngresssCrypto")]
    pub ingress_crypto: IngressCrypto,
}

#[derive(Debug, Serialize)]
pub struct KubeApiCrypto {
    #[serde(rename = "ServingCrypto")]
    pub serving_crypto: ServingCrypto,
    #[serde(rename = "ClientAuthCrypto")]
    pub client_auth_crypto: ClientAuthCrypto,
}

#[derive(Debug, Serialize)]
pub struct ServingCrypto {
    pub localhost_signer_private_key: Secret<String>,
    pub service_network_signer_private_key: Secret<String>,
    pub loadbalancer_external_signer_private_key: Secret<String>,
}

#[derive(Debug, Serialize)]
pub struct ClientAuthCrypto {
    pub admin_ca_certificate: String,
}

#[derive(Debug, Serialize)]
pub struct IngressCrypto {
    /// The ingress CA's private key (PEM).
    pub ingress_ca: Secret<String>,
    pub ingress_certificate_cn: String,
}

impl SeedReconfiguration {
    /// Builds the document from validated inputs and the site identity.
    pub fn build(inputs: &SiteInputs, id: &Identity<'_>) -> Result<Self> {
        let ic = &inputs.install_config;
        let ibc = &inputs.image_based_config;
        let machine_networks = ic.machine_network_cidrs();
        let raw_nm_state_config = ibc
            .canonical_network_config()
            .context("rendering networkConfig as canonical nmstate YAML")?
            .unwrap_or_default();
        Ok(Self {
            additional_trust_bundle: trust_bundle(
                &ic.additional_trust_bundle,
                &ic.additional_trust_bundle_policy,
                ic.proxy.is_some(),
            ),
            api_version: SEED_RECONFIGURATION_VERSION,
            base_domain: ic.base_domain.clone(),
            cluster_id: id.cluster_id.to_string(),
            cluster_name: ic.metadata.name.clone(),
            chrony_config: chrony_config(&ibc.additional_ntp_sources),
            hostname: ibc.hostname.clone(),
            infra_id: id.infra_id.to_string(),
            kubeadmin_password_hash: Secret::new(id.kubeadmin_password_hash.to_string()),
            kubeconfig_crypto_retention: crypto_retention(id.crypto),
            machine_network: machine_networks.first().cloned().unwrap_or_default(),
            machine_networks,
            raw_nm_state_config,
            release_registry: ibc.release_registry.clone(),
            ssh_key: ic.ssh_key.clone(),
            proxy: ic.proxy.clone(),
            pull_secret: ic.pull_secret.clone(),
            node_labels: ibc.node_labels.clone(),
        })
    }

    /// Compact JSON without a trailing newline, as `json.Marshal` writes it.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(self).context("serialising manifest.json")
    }
}

/// The installer's policy matrix: the user bundle always goes to `userCaBundle`; the proxy
/// configmap is named only when the policy as written (not defaulted) is `Always`, or `Proxyonly`
/// with a proxy. We also require a non-empty bundle there, because post-pivot insists that the
/// name and the bundle are both set or both empty.
pub fn trust_bundle(bundle: &str, policy: &str, has_proxy: bool) -> AdditionalTrustBundle {
    let mut out = AdditionalTrustBundle {
        user_ca_bundle: bundle.to_string(),
        ..Default::default()
    };
    let wants_configmap = policy == "Always" || (policy == "Proxyonly" && has_proxy);
    if wants_configmap && !bundle.is_empty() {
        out.proxy_configmap_name = USER_CA_BUNDLE_CONFIGMAP.to_string();
        out.proxy_configmap_bundle = bundle.to_string();
    }
    out
}

/// The full chrony.conf post-pivot hands to recert, or "" (omitted) without NTP sources.
pub fn chrony_config(sources: &[String]) -> String {
    if sources.is_empty() {
        return String::new();
    }
    let mut conf = CHRONY_BASE.to_string();
    for s in sources {
        conf.push_str(&format!("\nserver {s} iburst"));
    }
    conf
}

fn crypto_retention(c: &SiteCrypto) -> KubeconfigCryptoRetention {
    KubeconfigCryptoRetention {
        kube_api_crypto: KubeApiCrypto {
            serving_crypto: ServingCrypto {
                localhost_signer_private_key: Secret::new(
                    c.kube_apiserver_localhost_signer.key_pem.clone(),
                ),
                service_network_signer_private_key: Secret::new(
                    c.kube_apiserver_service_network_signer.key_pem.clone(),
                ),
                loadbalancer_external_signer_private_key: Secret::new(
                    c.kube_apiserver_lb_signer.key_pem.clone(),
                ),
            },
            client_auth_crypto: ClientAuthCrypto {
                admin_ca_certificate: c.admin_kubeconfig_signer.cert_pem.clone(),
            },
        },
        ingress_crypto: IngressCrypto {
            ingress_ca: Secret::new(c.ingress_operator_signer.key_pem.clone()),
            ingress_certificate_cn: c.ingress_certificate_cn.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chrony_config_has_leading_newline_and_one_server_line_each() {
        assert_eq!(chrony_config(&[]), "");
        let c = chrony_config(&["10.0.0.1".into(), "ntp.example.com".into()]);
        assert!(c.starts_with("\npool 0.rhel.pool.ntp.org iburst\n"));
        assert!(c.ends_with(
            "logdir /var/log/chrony\nserver 10.0.0.1 iburst\nserver ntp.example.com iburst"
        ));
    }

    #[test]
    fn trust_bundle_policy_matrix() {
        let pem = "PEM";
        // (bundle, policy, proxy) -> configmap named?
        let cases = [
            ("", "", false, false),
            (pem, "", false, false),
            (pem, "", true, false),
            (pem, "Proxyonly", false, false),
            (pem, "Proxyonly", true, true),
            (pem, "Always", false, true),
            (pem, "Always", true, true),
            ("", "Always", true, false),
        ];
        for (bundle, policy, proxy, named) in cases {
            let tb = trust_bundle(bundle, policy, proxy);
            assert_eq!(tb.user_ca_bundle, bundle, "{policy} {proxy}");
            let expect_name = if named { USER_CA_BUNDLE_CONFIGMAP } else { "" };
            let expect_bundle = if named { bundle } else { "" };
            assert_eq!(
                tb.proxy_configmap_name, expect_name,
                "{bundle:?} {policy} {proxy}"
            );
            assert_eq!(
                tb.proxy_configmap_bundle, expect_bundle,
                "{bundle:?} {policy} {proxy}"
            );
        }
    }

    #[test]
    fn trust_bundle_always_serialises_all_three_keys() {
        let v = serde_json::to_value(trust_bundle("", "", false)).unwrap();
        let mut keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            ["proxyConfigmapBundle", "proxyConfigmapName", "userCaBundle"]
        );
    }
}
