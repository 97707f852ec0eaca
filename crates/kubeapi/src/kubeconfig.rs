//! Kubeconfig files as kubectl reads them, reduced to what one HTTPS client needs: the current
//! context's server URL, the CA bundle it trusts, and its user's client certificate and key (or a
//! bearer token). Inline `*-data` (base64) and file paths (relative to the kubeconfig's directory,
//! as client-go resolves them) are both read. What a plain HTTPS client cannot honour (exec plugins,
//! auth providers, basic auth, a proxy URL, another TLS server name, skipped verification) is refused
//! with the field named rather than silently ignored: a watch that quietly talked to the wrong place,
//! or unverified, would be worse than none.
//!
//! The key and the token are secrets: they are held in [`Secret`], and no error message quotes them
//! (a token that is not a string is reported as such, never echoed).

use std::path::{Path, PathBuf};

use anyhow::Context;
use openssl::base64::decode_block;
use reqwest::Url;
use serde::{Deserialize, Deserializer};

use util::fs::read_input_file;
use util::secret::Secret;

/// A kubeconfig, or a certificate or key file it names, is small; anything larger is not one.
const MAX_FILE: u64 = 4 << 20;

/// What one context of a kubeconfig gives a client.
#[derive(Debug, Clone)]
pub struct Access {
    pub context: String,
    pub server: Url,
    /// PEM bundle of the CAs the server's certificate must chain to; `None`: the system's trust
    /// store (a kubeconfig for a server with a public certificate names no CA).
    pub ca_pem: Option<Vec<u8>>,
    pub auth: ClientAuth,
}

#[derive(Debug, Clone)]
pub enum ClientAuth {
    /// Mutual TLS: the certificate (PEM, leaf first) and its private key (PEM, PKCS#1 or PKCS#8).
    Certificate {
        cert_pem: Vec<u8>,
        key_pem: Secret<Vec<u8>>,
    },
    /// `Authorization: Bearer`.
    Token(Secret),
}

/// A kubeconfig that cannot be used, naming the entry and field.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct KubeconfigError(String);

fn err(msg: impl Into<String>) -> KubeconfigError {
    KubeconfigError(msg.into())
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawConfig {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    current_context: String,
}

#[derive(Deserialize)]
struct NamedCluster {
    name: String,
    cluster: RawCluster,
}

#[derive(Deserialize)]
struct NamedContext {
    name: String,
    context: RawContext,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: RawUser,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawCluster {
    #[serde(default)]
    server: String,
    certificate_authority_data: Option<String>,
    certificate_authority: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
}

#[derive(Deserialize)]
struct RawContext {
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    user: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RawUser {
    client_certificate_data: Option<String>,
    client_certificate: Option<String>,
    #[serde(default, deserialize_with = "secret_scalar")]
    client_key_data: Option<Secret>,
    client_key: Option<String>,
    #[serde(default, deserialize_with = "secret_scalar")]
    token: Option<Secret>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    exec: Option<serde::de::IgnoredAny>,
    auth_provider: Option<serde::de::IgnoredAny>,
    username: Option<serde::de::IgnoredAny>,
}

/// A secret field: any YAML value is taken in (so a decode error cannot quote it), and anything but
/// a string is refused without showing it.
fn secret_scalar<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Secret>, D::Error> {
    match Option::<serde_yaml_ng::Value>::deserialize(d)? {
        None | Some(serde_yaml_ng::Value::Null) => Ok(None),
        Some(serde_yaml_ng::Value::String(s)) => Ok(Some(Secret::new(s))),
        Some(_) => Err(serde::de::Error::custom("not a string")),
    }
}

/// Where a certificate, key or token comes from: inline, or a file to read.
#[derive(Debug, Clone)]
pub(crate) enum Material<T> {
    Inline(T),
    File(PathBuf),
}

/// A context's choices before any file is read: what [`parse_kubeconfig`] returns.
#[derive(Debug, Clone)]
pub struct Selected {
    pub context: String,
    pub server: Url,
    pub(crate) ca: Option<Material<Vec<u8>>>,
    pub(crate) auth: SelectedAuth,
}

#[derive(Debug, Clone)]
pub(crate) enum SelectedAuth {
    Certificate {
        cert: Material<Vec<u8>>,
        key: Material<Secret<Vec<u8>>>,
    },
    Token(Material<Secret>),
}

/// Parses a kubeconfig and picks its current context (or its only one). Nothing is read from disk:
/// files it names are read by [`load_kubeconfig`].
pub(crate) fn parse_kubeconfig(text: &str) -> Result<Selected, KubeconfigError> {
    util::yaml::check_flow_depth(text.as_bytes()).map_err(|e| err(e.to_string()))?;
    let raw: RawConfig = serde_yaml_ng::from_str(text).map_err(|e| err(e.to_string()))?;
    let context = pick_context(&raw)?;
    let cluster = raw
        .clusters
        .iter()
        .find(|c| c.name == context.context.cluster)
        .ok_or_else(|| {
            err(format!(
                "contexts {:?}: cluster {:?} is not in clusters",
                context.name, context.context.cluster
            ))
        })?;
    let user = raw
        .users
        .iter()
        .find(|u| u.name == context.context.user)
        .ok_or_else(|| {
            err(format!(
                "contexts {:?}: user {:?} is not in users",
                context.name, context.context.user
            ))
        })?;
    Ok(Selected {
        context: context.name.clone(),
        server: server_url(cluster)?,
        ca: cluster_ca(cluster)?,
        auth: user_auth(user)?,
    })
}

fn pick_context(raw: &RawConfig) -> Result<&NamedContext, KubeconfigError> {
    if raw.current_context.is_empty() {
        return match raw.contexts.as_slice() {
            [only] => Ok(only),
            [] => Err(err("contexts: there is none")),
            _ => Err(err(
                "current-context: not set, and there are several contexts to choose from",
            )),
        };
    }
    raw.contexts
        .iter()
        .find(|c| c.name == raw.current_context)
        .ok_or_else(|| {
            err(format!(
                "current-context: {:?} is not in contexts",
                raw.current_context
            ))
        })
}

fn server_url(c: &NamedCluster) -> Result<Url, KubeconfigError> {
    let field = |what: &str| format!("clusters {:?}: {what}", c.name);
    let refuse = |key: &str| {
        err(field(&format!(
            "{key} is set: not supported (ibi talks to the server directly and verifies it)"
        )))
    };
    if c.cluster.insecure_skip_tls_verify {
        return Err(refuse("insecure-skip-tls-verify"));
    }
    if c.cluster.tls_server_name.is_some() {
        return Err(refuse("tls-server-name"));
    }
    if c.cluster.proxy_url.is_some() {
        return Err(refuse("proxy-url"));
    }
    let url = Url::parse(&c.cluster.server)
        .map_err(|e| err(field(&format!("server {:?}: {e}", c.cluster.server))))?;
    if url.scheme() != "https" || url.host_str().is_none() {
        return Err(err(field(&format!(
            "server {:?}: not an https:// URL",
            c.cluster.server
        ))));
    }
    Ok(url)
}

fn cluster_ca(c: &NamedCluster) -> Result<Option<Material<Vec<u8>>>, KubeconfigError> {
    let field = format!("clusters {:?}: certificate-authority-data", c.name);
    Ok(
        match (
            &c.cluster.certificate_authority_data,
            &c.cluster.certificate_authority,
        ) {
            (Some(data), _) => Some(Material::Inline(base64(data, &field)?)),
            (None, Some(path)) => Some(Material::File(PathBuf::from(path))),
            (None, None) => None,
        },
    )
}

fn user_auth(u: &NamedUser) -> Result<SelectedAuth, KubeconfigError> {
    let field = |what: &str| format!("users {:?}: {what}", u.name);
    let r = &u.user;
    for (present, key) in [
        (r.exec.is_some(), "exec"),
        (r.auth_provider.is_some(), "auth-provider"),
        (r.username.is_some(), "username"),
    ] {
        if present {
            return Err(err(field(&format!(
                "{key}: not supported: use a client certificate or a token"
            ))));
        }
    }
    let cert = match (&r.client_certificate_data, &r.client_certificate) {
        (Some(d), _) => Some(Material::Inline(base64(
            d,
            &field("client-certificate-data"),
        )?)),
        (None, Some(p)) => Some(Material::File(PathBuf::from(p))),
        (None, None) => None,
    };
    let key = match (&r.client_key_data, &r.client_key) {
        (Some(d), _) => Some(Material::Inline(Secret::new(base64(
            d.expose_str(),
            &field("client-key-data"),
        )?))),
        (None, Some(p)) => Some(Material::File(PathBuf::from(p))),
        (None, None) => None,
    };
    match (cert, key) {
        (Some(cert), Some(key)) => return Ok(SelectedAuth::Certificate { cert, key }),
        (Some(_), None) => return Err(err(field("client-certificate without client-key"))),
        (None, Some(_)) => return Err(err(field("client-key without client-certificate"))),
        (None, None) => {}
    }
    match (&r.token, &r.token_file) {
        (Some(t), _) => Ok(SelectedAuth::Token(Material::Inline(t.clone()))),
        (None, Some(p)) => Ok(SelectedAuth::Token(Material::File(PathBuf::from(p)))),
        (None, None) => Err(err(field(
            "no client certificate and no token: the API server would not know who asks",
        ))),
    }
}

/// Decodes base64 as client-go does (standard alphabet, line breaks allowed); the error never
/// quotes the value, which may be a key.
fn base64(text: &str, field: &str) -> Result<Vec<u8>, KubeconfigError> {
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    decode_block(&compact).map_err(|_| err(format!("{field}: not base64")))
}

/// Reads the kubeconfig at `path` and what its current context names (files relative to its
/// directory). Errors name the kubeconfig, the entry and the field.
pub fn load_kubeconfig(path: &Path) -> anyhow::Result<Access> {
    let bytes =
        read_input_file(path, MAX_FILE).with_context(|| format!("reading {}", path.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{}: not UTF-8 text", path.display()))?;
    let sel = parse_kubeconfig(&text).with_context(|| format!("{}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let read = |p: &Path, what: &str| -> anyhow::Result<Vec<u8>> {
        let full = base.join(p);
        read_input_file(&full, MAX_FILE)
            .with_context(|| format!("{}: {what}: reading {}", path.display(), full.display()))
    };
    let ca_pem = match &sel.ca {
        Some(Material::Inline(b)) => Some(b.clone()),
        Some(Material::File(p)) => Some(read(p, "certificate-authority")?),
        None => None,
    };
    let auth = match &sel.auth {
        SelectedAuth::Certificate { cert, key } => ClientAuth::Certificate {
            cert_pem: match cert {
                Material::Inline(b) => b.clone(),
                Material::File(p) => read(p, "client-certificate")?,
            },
            key_pem: match key {
                Material::Inline(k) => k.clone(),
                Material::File(p) => Secret::new(read(p, "client-key")?),
            },
        },
        SelectedAuth::Token(t) => ClientAuth::Token(match t {
            Material::Inline(t) => t.clone(),
            Material::File(p) => token_from(read(p, "tokenFile")?, path)?,
        }),
    };
    Ok(Access {
        context: sel.context,
        server: sel.server,
        ca_pem,
        auth,
    })
}

fn token_from(bytes: Vec<u8>, kubeconfig: &Path) -> anyhow::Result<Secret> {
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("{}: tokenFile: not UTF-8 text", kubeconfig.display()))?;
    Ok(Secret::new(text.trim()))
}

#[cfg(test)]
mod tests;
