//! A value that must never be shown: a pull secret, a private key, a password or its hash, a BMC
//! credential, a session token, a URL whose path is a capability (the tokens `ibi serve` hands out). Its
//! `Debug` and `Display` print `<redacted>`, so a `{:?}` of any struct holding one cannot leak it; serde
//! sees the value itself (transparent), so what ibi writes and reads is unchanged. Reading it is explicit
//! and greppable: [`Secret::expose`]. [`scrub`] removes secrets from text that comes from elsewhere (a
//! BMC's error message echoing the image URL it was given).

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret<T = String>(T);

impl<T> Secret<T> {
    pub fn new(value: impl Into<T>) -> Secret<T> {
        Secret(value.into())
    }

    /// The value, for the one place that must write or use it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl Secret<String> {
    /// Whether the secret is the empty string (fields the documents leave out when empty).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value as text, for the one call that must send it (an HTTP header, a request body).
    pub fn expose_str(&self) -> &str {
        &self.0
    }
}

impl<T> From<T> for Secret<T> {
    fn from(value: T) -> Secret<T> {
        Secret(value)
    }
}

impl From<&str> for Secret<String> {
    fn from(value: &str) -> Secret<String> {
        Secret(value.to_string())
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Replaces every occurrence of each non-empty secret in `text` with `<redacted>`: for messages that
/// come from elsewhere (a BMC's error text echoes the image URL it was given).
pub fn scrub(text: &str, secrets: &[Secret]) -> String {
    secrets
        .iter()
        .filter(|s| !s.is_empty())
        .fold(text.to_string(), |acc, s: &Secret| {
            acc.replace(s.expose_str(), "<redacted>")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct Doc {
        name: String,
        pull_secret: Secret<String>,
    }

    #[test]
    fn debug_redacts_and_serde_is_transparent() {
        let doc = Doc {
            name: "a".into(),
            pull_secret: Secret::new("MARKER-s3cr3t"),
        };
        let shown = format!("{doc:?} {doc:#?}");
        assert!(!shown.contains("MARKER"), "{shown}");
        assert!(shown.contains("<redacted>"));
        let json = serde_json::to_string(&doc).unwrap();
        assert_eq!(json, r#"{"name":"a","pull_secret":"MARKER-s3cr3t"}"#);
        assert_eq!(serde_json::from_str::<Doc>(&json).unwrap(), doc);
        assert_eq!(doc.pull_secret.expose(), "MARKER-s3cr3t");
        assert!(!doc.pull_secret.is_empty());
    }

    #[test]
    fn display_hides_the_value() {
        let s: Secret = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "<redacted> <redacted>");
        assert_eq!(s.expose_str(), "hunter2");
    }

    #[test]
    fn scrub_removes_every_occurrence_and_ignores_empty_secrets() {
        let secrets = [Secret::new("tok123"), Secret::default()];
        assert_eq!(
            scrub("GET /tok123/a.iso failed; tok123 again", &secrets),
            "GET /<redacted>/a.iso failed; <redacted> again"
        );
    }
}
