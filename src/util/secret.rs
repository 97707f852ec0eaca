//! A value that must never be shown: a pull secret, a private key, a password or its hash, a token. Its
//! `Debug` prints `<redacted>`, so a `{:?}` of any struct holding one cannot leak it; serde sees the value
//! itself (transparent), so what ibi writes and reads is unchanged. Reading it is explicit: [`Secret::expose`].

use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    pub const fn new(value: T) -> Secret<T> {
        Secret(value)
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
            pull_secret: Secret::new("MARKER-s3cr3t".into()),
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
}
