//! Human-readable views of an embedded Ignition config, shared by `inspect` and the "too large"
//! error of `create image`. Works on the JSON itself, so it describes any Ignition config (ours,
//! the installer's or a user's), and never prints file contents: they hold pull secrets and keys.

use serde_json::Value;

/// One file of `storage.files`, as far as a report needs it.
#[derive(Debug, PartialEq, Eq)]
pub struct FileSummary {
    pub path: String,
    pub mode: Option<u64>,
    /// Length of the `contents.source` URL, which is what takes room in the embed area.
    pub source_len: usize,
}

/// The files of an Ignition config, in config order.
pub fn files(config: &Value) -> Vec<FileSummary> {
    let Some(files) = config.pointer("/storage/files").and_then(Value::as_array) else {
        return Vec::new();
    };
    files
        .iter()
        .map(|f| FileSummary {
            path: f["path"].as_str().unwrap_or("?").to_string(),
            mode: f["mode"].as_u64(),
            source_len: f
                .pointer("/contents/source")
                .and_then(Value::as_str)
                .map_or(0, str::len),
        })
        .collect()
}

/// `(name, enabled)` of every systemd unit, in config order.
pub fn units(config: &Value) -> Vec<(String, bool)> {
    let Some(units) = config.pointer("/systemd/units").and_then(Value::as_array) else {
        return Vec::new();
    };
    units
        .iter()
        .map(|u| {
            let name = u["name"].as_str().unwrap_or("?").to_string();
            (name, u["enabled"].as_bool().unwrap_or(false))
        })
        .collect()
}

/// The `n` files taking the most room, biggest first, as "path (N bytes)".
pub fn biggest_files(config: &Value, n: usize) -> Vec<String> {
    let mut all = files(config);
    all.sort_by(|a, b| {
        b.source_len
            .cmp(&a.source_len)
            .then_with(|| a.path.cmp(&b.path))
    });
    all.into_iter()
        .take(n)
        .map(|f| format!("{} ({} bytes)", f.path, f.source_len))
        .collect()
}

/// A multi-line summary: users (key counts only), units, files with modes and sizes.
pub fn describe(config: &Value) -> String {
    let mut out = String::new();
    let version = config
        .pointer("/ignition/version")
        .and_then(Value::as_str)
        .unwrap_or("?");
    out.push_str(&format!("Ignition spec: {version}\n"));
    if let Some(users) = config.pointer("/passwd/users").and_then(Value::as_array) {
        for u in users {
            let keys = u["sshAuthorizedKeys"].as_array().map_or(0, |k| {
                k.iter()
                    .filter(|x| x.as_str().is_some_and(|s| !s.is_empty()))
                    .count()
            });
            out.push_str(&format!(
                "User: {} ({keys} SSH keys)\n",
                u["name"].as_str().unwrap_or("?")
            ));
        }
    }
    for (name, enabled) in units(config) {
        let state = if enabled { "enabled" } else { "not enabled" };
        out.push_str(&format!("Unit: {name} ({state})\n"));
    }
    for f in files(config) {
        let mode = f.mode.map_or("----".to_string(), |m| format!("{m:04o}"));
        out.push_str(&format!(
            "File: {} mode {mode}, {} bytes encoded (contents hidden)\n",
            f.path, f.source_len
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        serde_json::json!({
            "ignition": {"version": "3.2.0"},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": [""]}]},
            "storage": {"files": [
                {"path": "/var/tmp/pull-secret.json", "mode": 384, "contents": {"source": "data:,SECRET-AUTH"}},
                {"path": "/usr/local/bin/post.sh", "mode": 493, "contents": {"source": "data:,#!/bin/sh%0Aecho a-much-longer-script"}},
                {"path": "/etc/empty"}
            ]},
            "systemd": {"units": [{"name": "a.service", "enabled": true}, {"name": "b.service"}]}
        })
    }

    #[test]
    fn biggest_files_are_sorted_by_encoded_size() {
        let b = biggest_files(&sample(), 2);
        assert_eq!(
            b,
            [
                "/usr/local/bin/post.sh (43 bytes)",
                "/var/tmp/pull-secret.json (17 bytes)"
            ]
        );
    }

    #[test]
    fn describe_lists_units_and_files_but_no_contents() {
        let d = describe(&sample());
        assert!(d.contains("Ignition spec: 3.2.0\n"));
        assert!(d.contains("User: core (0 SSH keys)\n"), "{d}");
        assert!(
            d.contains("Unit: a.service (enabled)\nUnit: b.service (not enabled)\n"),
            "{d}"
        );
        assert!(
            d.contains("File: /var/tmp/pull-secret.json mode 0600, 17 bytes"),
            "{d}"
        );
        assert!(d.contains("File: /etc/empty mode ----, 0 bytes"), "{d}");
        assert!(!d.contains("SECRET-AUTH"), "contents leaked: {d}");
    }
}
