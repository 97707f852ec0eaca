//! PLACEHOLDER: replaced by the PKI module.
use serde::{Deserialize, Serialize};
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CertKey {
    pub cert_pem: String,
    pub key_pem: String,
}
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SiteCrypto {
    pub admin_kubeconfig_signer: CertKey,
    pub admin_kubeconfig_client: CertKey,
    pub kube_apiserver_localhost_signer: CertKey,
    pub kube_apiserver_service_network_signer: CertKey,
    pub kube_apiserver_lb_signer: CertKey,
    pub ingress_operator_signer: CertKey,
    pub ingress_certificate_cn: String,
}
pub fn generate_site_crypto_and_hash(
    _now: std::time::SystemTime,
    _pw: &str,
) -> anyhow::Result<(SiteCrypto, String)> {
    anyhow::bail!("placeholder")
}
pub fn generate_site_crypto(_now: std::time::SystemTime) -> anyhow::Result<SiteCrypto> {
    anyhow::bail!("placeholder")
}
pub fn verify_site_crypto(_c: &SiteCrypto) -> anyhow::Result<()> {
    Ok(())
}
pub fn admin_kubeconfig(_c: &SiteCrypto, _n: &str, _d: &str) -> anyhow::Result<String> {
    anyhow::bail!("placeholder")
}
pub fn generate_kubeadmin_password() -> anyhow::Result<String> {
    anyhow::bail!("placeholder")
}
pub fn hash_kubeadmin_password(_p: &str) -> anyhow::Result<String> {
    anyhow::bail!("placeholder")
}
