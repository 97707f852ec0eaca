//! The admin kubeconfig (`auth/kubeconfig`), laid out as the installer writes it with sigs.k8s.io/yaml.
//!
//! Layout decisions, all from the installer's output (openshift-installer-ibi.md §5.5):
//! - keys sorted alphabetically, which is what sigs.k8s.io/yaml does;
//! - no `apiVersion`/`kind`: the installer fills a client-go `v1.Config` without setting them and both are
//!   `omitempty`; kubectl and client-go default them when absent;
//! - no `preferences: {}`: newer client-go (`omitzero`) omits the empty struct, and readers accept either.
//!
//! The document has a fixed shape, so it is written from a template rather than through a YAML library:
//! serde_yaml_ng follows YAML 1.2 and leaves `no`, `on` or `y` unquoted, which client-go's YAML 1.1 reader
//! would turn into booleans and then fail on, for a cluster named `no`. [`scalar`] quotes those.

use anyhow::{Result, ensure};
use openssl::base64::encode_block;

use super::{SiteCrypto, kube_apiserver_ca_bundle};

/// Context and user name the installer uses; `oc login` flows and docs refer to `admin`.
const ADMIN: &str = "admin";
/// kube-apiserver's port behind the `api.` name.
const API_PORT: u16 = 6443;

/// The kube-apiserver URL the installer writes: the base domain loses one trailing dot, like Go's
/// `strings.TrimSuffix(baseDomain, ".")`.
pub fn api_server_url(cluster_name: &str, base_domain: &str) -> String {
    let domain = base_domain.strip_suffix('.').unwrap_or(base_domain);
    format!("https://api.{cluster_name}.{domain}:{API_PORT}")
}

/// Renders the admin kubeconfig: the CA bundle of all four serving signers, and the `system:admin`
/// client certificate and key. The result contains the client key: write it 0600 and never log it.
pub fn admin_kubeconfig(c: &SiteCrypto, cluster_name: &str, base_domain: &str) -> Result<String> {
    ensure!(
        !cluster_name.is_empty(),
        "admin kubeconfig: the cluster name (metadata.name) is empty"
    );
    ensure!(
        !base_domain.trim_end_matches('.').is_empty(),
        "admin kubeconfig: the base domain is empty"
    );
    let ca = encode_block(kube_apiserver_ca_bundle(c).as_bytes());
    let server = scalar(&api_server_url(cluster_name, base_domain));
    let name = scalar(cluster_name);
    let cert = encode_block(c.admin_kubeconfig_client.cert_pem.as_bytes());
    let key = encode_block(c.admin_kubeconfig_client.key_pem.as_bytes());
    Ok(format!(
        "clusters:
- cluster:
    certificate-authority-data: {ca}
    server: {server}
  name: {name}
contexts:
- context:
    cluster: {name}
    user: {ADMIN}
  name: {ADMIN}
current-context: {ADMIN}
users:
- name: {ADMIN}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
"
    ))
}

/// Writes a string as a YAML scalar that every reader, YAML 1.1 or 1.2, takes for that string: plain when
/// that is unambiguous (as Go's encoder does for ordinary names), double-quoted otherwise. It quotes more
/// than strictly needed (anything starting with a digit) because a quoted name only differs in bytes,
/// while an unquoted one that a reader resolves to a number, bool, null or timestamp breaks the file.
fn scalar(value: &str) -> String {
    const RESERVED: [&str; 11] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "inf", "nan",
    ];
    let plain = value.starts_with(|c: char| c.is_ascii_alphabetic())
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._/:+=".contains(&b))
        && !RESERVED.iter().any(|word| value.eq_ignore_ascii_case(word));
    if plain {
        return value.to_owned();
    }
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('"');
    for c in value.chars() {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            c if c.is_control() => quoted.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_image::pki::crypto::tests::site;
    use openssl::base64::decode_block;
    use serde::Deserialize;

    /// The parts of a kubeconfig the tests read back; unknown keys are refused so extras show up.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    struct Kubeconfig {
        clusters: Vec<NamedCluster>,
        contexts: Vec<NamedContext>,
        current_context: String,
        users: Vec<NamedUser>,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct NamedCluster {
        cluster: Cluster,
        name: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    struct Cluster {
        certificate_authority_data: String,
        server: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct NamedContext {
        context: Context,
        name: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Context {
        cluster: String,
        user: String,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct NamedUser {
        name: String,
        user: User,
    }
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    struct User {
        client_certificate_data: String,
        client_key_data: String,
    }

    fn decode(b64: &str) -> String {
        String::from_utf8(decode_block(b64).unwrap()).unwrap()
    }

    #[test]
    fn kubeconfig_parses_with_server_names_and_pems() {
        let c = site();
        let text = admin_kubeconfig(c, "sno1", "example.com.").unwrap();
        let k: Kubeconfig = serde_yaml_ng::from_str(&text).unwrap();
        let [cluster] = &k.clusters[..] else {
            panic!("one cluster expected")
        };
        assert_eq!(cluster.name, "sno1");
        assert_eq!(cluster.cluster.server, "https://api.sno1.example.com:6443");
        assert_eq!(
            decode(&cluster.cluster.certificate_authority_data),
            kube_apiserver_ca_bundle(c)
        );
        let [context] = &k.contexts[..] else {
            panic!("one context expected")
        };
        assert_eq!(
            (context.name.as_str(), context.context.cluster.as_str()),
            ("admin", "sno1")
        );
        assert_eq!(context.context.user, "admin");
        assert_eq!(k.current_context, "admin");
        let [user] = &k.users[..] else {
            panic!("one user expected")
        };
        assert_eq!(user.name, "admin");
        assert_eq!(
            decode(&user.user.client_certificate_data),
            c.admin_kubeconfig_client.cert_pem
        );
        assert_eq!(
            decode(&user.user.client_key_data),
            c.admin_kubeconfig_client.key_pem
        );
    }

    /// Byte layout: sorted keys, block sequences not indented under their key, no preferences/apiVersion.
    #[test]
    fn kubeconfig_layout_matches_the_installer() {
        let text = admin_kubeconfig(site(), "sno1", "example.com").unwrap();
        let shape: Vec<String> = text
            .lines()
            .map(|line| match line.split_once("-data: ") {
                Some((key, _)) => format!("{key}-data: B64"),
                None => line.to_owned(),
            })
            .collect();
        let expected = [
            "clusters:",
            "- cluster:",
            "    certificate-authority-data: B64",
            "    server: https://api.sno1.example.com:6443",
            "  name: sno1",
            "contexts:",
            "- context:",
            "    cluster: sno1",
            "    user: admin",
            "  name: admin",
            "current-context: admin",
            "users:",
            "- name: admin",
            "  user:",
            "    client-certificate-data: B64",
            "    client-key-data: B64",
        ];
        assert_eq!(shape, expected);
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn server_url_drops_one_trailing_dot() {
        for (domain, url) in [
            ("example.com", "https://api.sno.example.com:6443"),
            ("example.com.", "https://api.sno.example.com:6443"),
            ("lab.example.com..", "https://api.sno.lab.example.com.:6443"),
        ] {
            assert_eq!(api_server_url("sno", domain), url, "{domain}");
        }
    }

    #[test]
    fn empty_names_are_refused() {
        let err = admin_kubeconfig(site(), "", "example.com").unwrap_err();
        assert_eq!(
            err.to_string(),
            "admin kubeconfig: the cluster name (metadata.name) is empty"
        );
        let err = admin_kubeconfig(site(), "sno", ".").unwrap_err();
        assert_eq!(
            err.to_string(),
            "admin kubeconfig: the base domain is empty"
        );
    }

    #[test]
    fn scalars_that_yaml_would_retype_are_quoted() {
        for (value, written) in [
            ("sno1", "sno1"),
            ("cluster-a", "cluster-a"),
            (
                "https://api.x.example.com:6443",
                "https://api.x.example.com:6443",
            ),
            ("no", "\"no\""),
            ("ON", "\"ON\""),
            ("y", "\"y\""),
            ("null", "\"null\""),
            ("123", "\"123\""),
            ("0x1f", "\"0x1f\""),
            ("2001-12-14", "\"2001-12-14\""),
            ("1e3", "\"1e3\""),
            ("", "\"\""),
            ("a b", "\"a b\""),
            ("a\"b\\", "\"a\\\"b\\\\\""),
            ("tab\there", "\"tab\\u0009here\""),
        ] {
            assert_eq!(scalar(value), written, "{value:?}");
            let parsed: String = serde_yaml_ng::from_str(written).unwrap();
            assert_eq!(parsed, value);
        }
    }

    #[test]
    fn odd_cluster_names_round_trip() {
        for name in ["no", "123", "on", "2001-12-14"] {
            let text = admin_kubeconfig(site(), name, "example.com").unwrap();
            let k: Kubeconfig = serde_yaml_ng::from_str(&text).unwrap();
            assert_eq!(k.clusters[0].name, name);
            assert_eq!(k.contexts[0].context.cluster, name);
            assert_eq!(
                k.clusters[0].cluster.server,
                format!("https://api.{name}.example.com:6443")
            );
        }
    }
}
