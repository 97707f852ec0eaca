//! Field rules shared by the input files: pull secret, SSH key, proxy, trust bundle, mirror sources,
//! Kubernetes label syntax and identifiers.
//!
//! Each rule writes findings to a [`Findings`] under the YAML field path it is given. Messages never repeat
//! secret values (pull-secret auths, proxy credentials).

use std::collections::BTreeMap;

use super::finding::{Findings, idx};
use super::install_config::{ImageDigestSource, Proxy};
use super::net::{is_dns1123_subdomain, is_no_proxy_element, parse_proxy_url};
use super::sshkey::check_authorized_keys;
use crate::image_ref::check_repository;

/// `pullSecret`: what the installer accepts: JSON with a non-empty `auths` map whose entries have `auth`
/// (a string) or `credsStore`. An `auth` that is not base64 of `user:password` (a registry token, the
/// installer's own test fixture) is accepted with a warning naming the registry, never the value: the
/// container tools on the host cannot log in with it.
pub(crate) fn pull_secret(f: &mut Findings, field: &str, value: &str) {
    if value.trim().is_empty() {
        f.add(
            field,
            "required: the pull secret for the release and seed registries",
        );
        return;
    }
    let json: serde_json::Value = match serde_json::from_str(value) {
        Ok(v) => v,
        Err(e) => {
            // serde_json's message names only a position, never the content.
            f.add(field, format!("not valid JSON: {e}"));
            return;
        }
    };
    let auths = match json.get("auths").and_then(|a| a.as_object()) {
        Some(a) if !a.is_empty() => a,
        _ => {
            f.add(field, "auths required: a non-empty \"auths\" map");
            return;
        }
    };
    for (registry, entry) in auths {
        pull_secret_entry(f, field, registry, entry);
    }
}

fn pull_secret_entry(f: &mut Findings, field: &str, registry: &str, entry: &serde_json::Value) {
    let auth = entry.get("auth");
    if auth.is_none() && entry.get("credsStore").is_none() {
        f.add(
            field,
            format!("{registry:?} requires either auth or credsStore"),
        );
        return;
    }
    match auth {
        None => {}
        // The installer decodes the entry into a Go string: anything else fails there too.
        Some(a) if !a.is_string() => {
            f.add(field, format!("the auth of {registry:?} must be a string"));
        }
        Some(a) if !is_user_password(a.as_str().unwrap_or_default()) => f.warn(
            field,
            format!(
                "the auth of {registry:?} is not base64 of \"user:password\": accepted, as the installer does, \
                 but podman, skopeo and lca-cli cannot log in to {registry:?} with it"
            ),
        ),
        Some(_) => {}
    }
}

/// Base64 of UTF-8 `user:password` with a non-empty user: what containers/image can log in with.
fn is_user_password(auth: &str) -> bool {
    decoded_user_password(auth).is_some()
}

/// A pull-secret `auth` decoded, when it is base64 of UTF-8 `user:password` with a non-empty user.
pub fn decoded_user_password(auth: &str) -> Option<crate::util::secret::Secret> {
    let text = String::from_utf8(openssl::base64::decode_block(auth).ok()?).ok()?;
    let (user, _) = text.split_once(':')?;
    (!user.is_empty()).then(|| crate::util::secret::Secret::new(text))
}

/// `sshKey`: optional; every non-empty line must be an authorized_keys public key.
pub(crate) fn ssh_key(f: &mut Findings, field: &str, value: &str) {
    for message in check_authorized_keys(value) {
        f.add(field, message);
    }
}

/// `proxy`: httpProxy or httpsProxy required; URL schemes; `noProxy` elements.
pub(crate) fn proxy(f: &mut Findings, field: &str, p: &Proxy) {
    if p.http_proxy.is_empty() && p.https_proxy.is_empty() {
        f.add(field, "must include httpProxy or httpsProxy");
    }
    if !p.http_proxy.is_empty() {
        proxy_url(f, &format!("{field}.httpProxy"), &p.http_proxy, &["http"]);
    }
    if !p.https_proxy.is_empty() {
        proxy_url(
            f,
            &format!("{field}.httpsProxy"),
            &p.https_proxy,
            &["http", "https"],
        );
    }
    no_proxy(f, &format!("{field}.noProxy"), &p.no_proxy);
}

fn proxy_url(f: &mut Findings, field: &str, url: &str, schemes: &[&str]) {
    match parse_proxy_url(url) {
        Err(e) => f.add(field, e.to_string()),
        // The URL may carry credentials: no part of it is quoted.
        Ok(u) if !schemes.contains(&u.scheme) => {
            let supported = schemes
                .iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            f.add(
                field,
                format!("unsupported scheme: supported values are {supported}"),
            );
        }
        Ok(_) => {}
    }
}

fn no_proxy(f: &mut Findings, field: &str, value: &str) {
    if value.is_empty() || value == "*" {
        return;
    }
    if value.contains(' ') {
        f.add(field, "must not contain spaces");
    }
    for (i, element) in value.split(',').enumerate() {
        let element = element.trim();
        if !is_no_proxy_element(element) {
            f.add(
                field,
                format!(
                    "element {i} {element:?} must be an IP, a CIDR or a domain without wildcard characters"
                ),
            );
        }
    }
}

/// `additionalTrustBundle`: every PEM block is a parseable X.509 CERTIFICATE.
pub(crate) fn trust_bundle(f: &mut Findings, field: &str, pem: &str) {
    if pem.trim().is_empty() {
        return;
    }
    let blocks = pem_blocks(pem);
    if blocks.is_empty() {
        f.add(field, "no PEM CERTIFICATE block found");
    }
    for (i, (label, block)) in blocks.iter().enumerate() {
        let n = i + 1;
        if label != "CERTIFICATE" {
            f.add(
                field,
                format!("PEM block {n} is a {label:?}, not a CERTIFICATE"),
            );
        } else if let Err(e) = openssl::x509::X509::from_pem(block.as_bytes()) {
            f.add(
                field,
                format!(
                    "PEM block {n} is not a valid X.509 certificate: {}",
                    openssl_reason(&e)
                ),
            );
        }
    }
}

/// Splits PEM text into `(label, block text)`; an unterminated block is reported with label `UNTERMINATED`.
fn pem_blocks(pem: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find("-----BEGIN ") {
        let after = &rest[start + "-----BEGIN ".len()..];
        let Some(label_end) = after.find("-----") else {
            break;
        };
        let label = &after[..label_end];
        let end_marker = format!("-----END {label}-----");
        match rest[start..].find(&end_marker) {
            Some(end) => {
                let stop = start + end + end_marker.len();
                out.push((label.to_string(), rest[start..stop].to_string()));
                rest = &rest[stop..];
            }
            None => {
                out.push(("UNTERMINATED".to_string(), String::new()));
                break;
            }
        }
    }
    out
}

/// `additionalTrustBundlePolicy`: "", `Proxyonly` or `Always`.
pub(crate) fn trust_bundle_policy(f: &mut Findings, field: &str, value: &str) {
    if !matches!(value, "" | "Proxyonly" | "Always") {
        f.add(
            field,
            format!("unsupported value {value:?}: supported values are \"Proxyonly\", \"Always\""),
        );
    }
}

/// `imageDigestSources` / `imageContentSources`: repositories, not references; a known source policy.
pub(crate) fn digest_sources(f: &mut Findings, field: &str, sources: &[ImageDigestSource]) {
    for (i, s) in sources.iter().enumerate() {
        let entry = idx(field, i);
        repository(f, &format!("{entry}.source"), &s.source);
        for (j, m) in s.mirrors.iter().enumerate() {
            repository(f, &idx(&format!("{entry}.mirrors"), j), m);
        }
        if let Some(p) = &s.source_policy
            && !matches!(p.as_str(), "AllowContactingSource" | "NeverContactSource")
        {
            f.add(
                format!("{entry}.sourcePolicy"),
                format!(
                    "unsupported value {p:?}: supported values are \"AllowContactingSource\", \"NeverContactSource\""
                ),
            );
        }
    }
}

fn repository(f: &mut Findings, field: &str, value: &str) {
    if value.is_empty() {
        f.add(field, "required");
    } else if let Err(e) = check_repository(value) {
        f.add(field, format!("invalid value {value:?}: {e}"));
    }
}

/// `nodeLabels`: Kubernetes qualified-name keys and label values.
pub(crate) fn node_labels(f: &mut Findings, field: &str, labels: &BTreeMap<String, String>) {
    for (key, value) in labels {
        let path = format!("{field}.{key}");
        if let Err(e) = label_key(key) {
            f.add(&path, format!("invalid label key {key:?}: {e}"));
        }
        if !is_label_value(value) {
            f.add(
                &path,
                format!(
                    "invalid label value {value:?}: at most 63 characters, alphanumerics, '-', '_' or '.', \
                     starting and ending with an alphanumeric"
                ),
            );
        }
    }
}

/// Which half of a label key breaks Kubernetes' qualified-name rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum BadLabelKey {
    #[error("the prefix must be a DNS-1123 subdomain (lower case, at most 253 characters)")]
    Prefix,
    #[error(
        "the name must be 1-63 characters: alphanumerics, '-', '_' or '.', \
         starting and ending with an alphanumeric"
    )]
    Name,
}

/// `[prefix/]name`: prefix a DNS-1123 subdomain (≤253), name ≤63 with alphanumeric ends and `-_.` inside.
fn label_key(key: &str) -> Result<(), BadLabelKey> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && !is_dns1123_subdomain(p)
    {
        return Err(BadLabelKey::Prefix);
    }
    if name.is_empty() || !is_label_value(name) {
        return Err(BadLabelKey::Name);
    }
    Ok(())
}

/// Empty, or ≤63 characters of `[A-Za-z0-9-_.]` starting and ending alphanumeric.
fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b.first().is_some_and(u8::is_ascii_alphanumeric)
            && b.last().is_some_and(u8::is_ascii_alphanumeric)
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c)))
}

/// A UUID in its 8-4-4-4-12 hex form, as `ClusterVersion.spec.clusterID` requires.
pub(crate) fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n)
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// An infra ID: ≤27 characters of `[a-z0-9-]`, not starting or ending with `-`.
pub(crate) fn infra_id(f: &mut Findings, field: &str, value: &str) {
    let ok = value.len() <= 27
        && !value.starts_with('-')
        && !value.ends_with('-')
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !ok {
        f.add(
            field,
            format!(
                "invalid value {value:?}: at most 27 characters of a-z, 0-9 and '-', not starting or ending with '-'"
            ),
        );
    }
}

/// The first reason in an OpenSSL error stack ("too long"), without the library's file names and
/// codes, which mean nothing to a user fixing a YAML file.
fn openssl_reason(e: &openssl::error::ErrorStack) -> String {
    e.errors()
        .first()
        .and_then(|x| x.reason())
        .unwrap_or("unreadable DER")
        .to_string()
}
