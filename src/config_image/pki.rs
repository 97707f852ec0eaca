//! Keys, certificates, the admin kubeconfig and the kubeadmin password of one site.
//!
//! IBI has no installer run on the host, so this tool plays the installer's part: it generates the four
//! kube-apiserver serving signers, the ingress-operator signer and the admin-kubeconfig signer, signs the
//! `system:admin` client certificate, and hands the keys to lifecycle-agent (`KubeconfigCryptoRetention`),
//! which makes recert re-key the seed with them. The kubeconfig given to the user is therefore valid for
//! the cluster the seed becomes. Every format follows the installer (openshift-installer-ibi.md §5.5).
//!
//! RSA key generation dominates a `create config-image` run, so the keys (and, if asked, the bcrypt
//! hash) are produced in parallel by a small scoped worker pool.

mod cert;
mod crypto;
mod kubeconfig;
mod password;
mod pool;
pub use kubeconfig::{admin_kubeconfig, api_server_url};
pub use password::{generate_kubeadmin_password, hash_kubeadmin_password, random_chars};
pub use pool::all_cores;

pub use cert::CertKey;
#[cfg(any(test, feature = "test-support"))]
pub use crypto::generate_site_crypto;
pub use crypto::{
    ADMIN_KUBECONFIG_CLIENT, ADMIN_KUBECONFIG_SIGNER, INGRESS_CN_PREFIX, INGRESS_OPERATOR_SIGNER,
    KUBE_APISERVER_LB_SIGNER, KUBE_APISERVER_LOCALHOST_SIGNER,
    KUBE_APISERVER_SERVICE_NETWORK_SIGNER, SiteCrypto, generate_rsa_key,
    generate_site_crypto_and_hash_with_threads, kube_apiserver_ca_bundle, verify_site_crypto,
};
