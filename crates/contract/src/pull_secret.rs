//! A pull secret: registry credentials (`{"auths": {"quay.io": {"auth": base64("user:pass")}}}`), looked
//! up the way containers/image reads an auth file: the most specific `host[:port][/path]` key that
//! contains the repository wins. Both sides read it: the build side's registry checks (the inputs'
//! `pullSecret`), and the host side, which keeps its values out of what it reports (the ISO's
//! [`crate::ibi_configuration::PULL_SECRET_PATH`]).
//!
//! Nothing here may reach a log line or an error message: errors name keys and positions, never values.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use util::secret::Secret;

/// A decoded pull secret. `Debug` shows the registry keys only.
#[derive(Clone, Default, Deserialize)]
pub struct PullSecret {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(Clone, Default, Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    identitytoken: Option<String>,
    #[serde(default)]
    registrytoken: Option<String>,
}

/// A user name and password for HTTP basic auth (or the token exchange that starts with it).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Credentials {{ username: {:?}, password: <redacted> }}",
            self.username
        )
    }
}

impl fmt::Debug for PullSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PullSecret")
            .field("registries", &self.auths.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why a pull secret gives no credentials. It names keys and positions, never values (serde's own
/// messages quote them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullSecretError {
    #[error(
        "pull secret is not a valid auth file ({category:?} error at line {line}, column {column})"
    )]
    NotAuthFile {
        category: serde_json::error::Category,
        line: usize,
        column: usize,
    },
    #[error("pull secret: auths[{key:?}]: {why}")]
    Entry { key: String, why: BadEntry },
}

/// Why one `auths` entry decodes to no credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BadEntry {
    #[error("auth is not valid base64")]
    Base64,
    #[error("auth does not decode to UTF-8 text")]
    Utf8,
    #[error("auth does not decode to user:password")]
    NoColon,
}

/// Decodes a pull secret.
pub fn parse_pull_secret(text: &str) -> Result<PullSecret, PullSecretError> {
    serde_json::from_str(text).map_err(|e| PullSecretError::NotAuthFile {
        category: e.classify(),
        line: e.line(),
        column: e.column(),
    })
}

impl PullSecret {
    /// Credentials for `registry` (`host[:port]`) and `repository` (`org/seed`), or `None` for anonymous
    /// access. An entry that is present but undecodable is an error naming its key.
    pub fn credentials_for(
        &self,
        registry: &str,
        repository: &str,
    ) -> Result<Option<Credentials>, PullSecretError> {
        let name = format!("{}/{repository}", normalize_key(registry));
        let best = self
            .auths
            .iter()
            .filter(|(key, _)| {
                let key = normalize_key(key);
                name == key || name.starts_with(&format!("{key}/"))
            })
            .max_by_key(|(key, _)| normalize_key(key).len());
        match best {
            Some((key, entry)) => entry.credentials().map_err(|why| PullSecretError::Entry {
                key: key.clone(),
                why,
            }),
            None => Ok(None),
        }
    }
}

impl PullSecret {
    /// Every credential value it holds, to scrub foreign text (a journal) of them: each `auth`, its
    /// decoded `user:password` and the password alone, and each `password`, `identitytoken` and
    /// `registrytoken`.
    pub fn secret_values(&self) -> Vec<Secret> {
        let mut values = Vec::new();
        for entry in self.auths.values() {
            if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
                values.push(auth.trim().to_string());
                if let Ok(Some(c)) = entry.credentials() {
                    values.push(format!("{}:{}", c.username, c.password));
                    values.push(c.password);
                }
            }
            let others = [&entry.password, &entry.identitytoken, &entry.registrytoken];
            values.extend(others.into_iter().flatten().cloned());
        }
        // Longest first, so a value that contains another is replaced whole.
        values.retain(|v| !v.is_empty());
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        values.into_iter().map(Secret::new).collect()
    }
}

impl AuthEntry {
    fn credentials(&self) -> Result<Option<Credentials>, BadEntry> {
        if let Some(auth) = self.auth.as_deref().filter(|a| !a.is_empty()) {
            let raw = openssl::base64::decode_block(auth.trim()).map_err(|_| BadEntry::Base64)?;
            let text = String::from_utf8(raw).map_err(|_| BadEntry::Utf8)?;
            let Some((user, pass)) = text.split_once(':') else {
                return Err(BadEntry::NoColon);
            };
            return Ok(Some(Credentials {
                username: user.into(),
                password: pass.into(),
            }));
        }
        match (&self.username, &self.password) {
            (Some(u), Some(p)) => Ok(Some(Credentials {
                username: u.clone(),
                password: p.clone(),
            })),
            _ => Ok(None),
        }
    }
}

/// Auth-file keys may carry a scheme or the legacy Docker Hub URL; the registry `docker.io` has aliases.
fn normalize_key(key: &str) -> String {
    let k = key
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let k = k.trim_end_matches('/');
    let k = k
        .strip_suffix("/v1")
        .or_else(|| k.strip_suffix("/v2"))
        .unwrap_or(k);
    match k {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".into(),
        _ => k.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        openssl::base64::encode_block(s.as_bytes())
    }

    fn secret() -> PullSecret {
        let text = format!(
            r#"{{"auths": {{
                "quay.io": {{"auth": "{}", "email": "x@example.com"}},
                "quay.io/org/private": {{"auth": "{}"}},
                "127.0.0.1:5000": {{"auth": "{}"}},
                "https://index.docker.io/v1/": {{"auth": "{}"}},
                "plain.lab": {{"username": "u", "password": "p"}},
                "broken.lab": {{"auth": "!!!"}},
                "nocolon.lab": {{"auth": "{}"}}
            }}}}"#,
            b64("quay-user:quay:pass"),
            b64("org-user:org-pass"),
            b64("local:secret"),
            b64("hub:hubpass"),
            b64("justuser"),
        );
        parse_pull_secret(&text).expect("parse")
    }

    #[test]
    fn looks_up_credentials() {
        let s = secret();
        let creds = |reg: &str, repo: &str| {
            s.credentials_for(reg, repo)
                .expect("lookup")
                .map(|c| format!("{}:{}", c.username, c.password))
        };
        assert_eq!(
            creds("quay.io", "org/seed").as_deref(),
            Some("quay-user:quay:pass")
        );
        assert_eq!(
            creds("quay.io", "org/private/seed").as_deref(),
            Some("org-user:org-pass")
        );
        assert_eq!(
            creds("quay.io", "org/privateer").as_deref(),
            Some("quay-user:quay:pass")
        );
        assert_eq!(
            creds("127.0.0.1:5000", "seed").as_deref(),
            Some("local:secret")
        );
        assert_eq!(creds("127.0.0.1:5001", "seed"), None);
        assert_eq!(
            creds("docker.io", "library/seed").as_deref(),
            Some("hub:hubpass")
        );
        assert_eq!(creds("plain.lab", "seed").as_deref(), Some("u:p"));
        assert_eq!(creds("registry.redhat.io", "seed"), None);
    }

    #[test]
    fn errors_never_show_secrets() {
        let s = secret();
        let e = s
            .credentials_for("broken.lab", "x")
            .expect_err("broken")
            .to_string();
        assert_eq!(
            e,
            r#"pull secret: auths["broken.lab"]: auth is not valid base64"#
        );
        let e = s
            .credentials_for("nocolon.lab", "x")
            .expect_err("no colon")
            .to_string();
        assert_eq!(
            e,
            r#"pull secret: auths["nocolon.lab"]: auth does not decode to user:password"#
        );
        let e = parse_pull_secret(r#"{"auths": {"q.io": {"auth": 5, "hunter2": "hunter2"}}}"#)
            .expect_err("bad")
            .to_string();
        assert!(!e.contains("hunter2") && e.contains("line 1"), "{e}");
        let e = parse_pull_secret(r#"{"auths": ["hunter2-secret"]}"#)
            .expect_err("bad")
            .to_string();
        assert!(!e.contains("hunter2"), "{e}");
        let debug = format!("{s:?} {:?}", s.credentials_for("quay.io", "a").expect("ok"));
        assert!(
            !debug.contains("quay:pass") && !debug.contains("secret"),
            "{debug}"
        );
    }

    #[test]
    fn secret_values_cover_every_credential_longest_first() {
        // auth: base64("user:MARKER-pw")
        let ps = parse_pull_secret(
            r#"{"auths": {"a.lab": {"auth": "dXNlcjpNQVJLRVItcHc="},
                          "b.lab": {"username": "u", "password": "MARKER-b", "identitytoken": "MARKER-it"}}}"#,
        )
        .expect("valid");
        let values: Vec<String> = ps
            .secret_values()
            .iter()
            .map(|s| s.expose_str().to_string())
            .collect();
        assert_eq!(
            values,
            [
                "dXNlcjpNQVJLRVItcHc=",
                "user:MARKER-pw",
                "MARKER-pw",
                "MARKER-it",
                "MARKER-b"
            ]
        );
    }
}
