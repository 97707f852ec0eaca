//! What `inspect` shows of an ISO, as ordered `(label, value)` pairs: read by people as indented
//! `label: value` lines, by scripts as one JSON object (`--json`). One list, two renderings, so the two
//! never disagree. Values are already free of secrets when they get here.

use serde_json::{Map, Value};

/// Ordered fields of one ISO.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Summary {
    pub fields: Vec<(String, Value)>,
}

impl Summary {
    pub fn push(&mut self, label: &str, value: impl Into<Value>) {
        self.fields.push((label.to_string(), value.into()));
    }

    /// `  label: value` lines; a list or an object goes one item per line beneath its label.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (label, value) in &self.fields {
            match value {
                Value::Array(items) if items.is_empty() => {
                    out.push_str(&format!("  {label}: none\n"))
                }
                Value::Array(items) => {
                    out.push_str(&format!("  {label}:\n"));
                    for i in items {
                        out.push_str(&format!("    - {}\n", scalar(i)));
                    }
                }
                Value::Object(map) if map.is_empty() => out.push_str(&format!("  {label}: none\n")),
                Value::Object(map) => {
                    out.push_str(&format!("  {label}:\n"));
                    for (k, v) in map {
                        out.push_str(&format!("    {k}: {}\n", scalar(v)));
                    }
                }
                v => out.push_str(&format!("  {label}: {}\n", scalar(v))),
            }
        }
        out
    }

    /// The fields as one JSON object, keys as labelled.
    pub fn json(&self) -> Value {
        let map: Map<String, Value> = self.fields.iter().cloned().collect();
        Value::Object(map)
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "none".to_string(),
        other => other.to_string(),
    }
}

/// A URL with its password (and user) replaced, so a proxy can be shown: `http://***@proxy:3128`.
pub fn hide_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_text_and_json_from_one_list() {
        let mut s = Summary::default();
        s.push("seedImage", "quay.io/a/seed@sha256:ab");
        s.push("shutdown", false);
        s.push("mirrors", serde_json::json!(["a → b"]));
        s.push("nodeLabels", serde_json::json!({}));
        assert_eq!(
            s.text(),
            "  seedImage: quay.io/a/seed@sha256:ab\n  shutdown: false\n  mirrors:\n    - a → b\n  nodeLabels: none\n"
        );
        assert_eq!(s.json()["shutdown"], false);
    }

    #[test]
    fn proxy_credentials_are_hidden() {
        assert_eq!(
            hide_credentials("http://u:pw@proxy.lab:3128/x"),
            "http://***@proxy.lab:3128/x"
        );
        assert_eq!(
            hide_credentials("http://proxy.lab:3128"),
            "http://proxy.lab:3128"
        );
        assert_eq!(hide_credentials("http://proxy/a@b"), "http://proxy/a@b");
    }
}
