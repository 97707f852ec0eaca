//! CoreOS stream metadata: the JSON the installer embeds (`coreos-rhel-9.json`) and ibi takes from
//! `--coreos-stream FILE|URL`. Only the live ISO's location and sha256 for one architecture are read.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use reqwest::Url;
use serde_json::Value;

use super::download;

/// Reads the stream metadata from a path, a `file://` URL or an `http(s)://` URL.
pub(super) fn load(spec: &str, backoff: Duration) -> Result<String> {
    let path = if spec.contains("://") {
        let url = Url::parse(spec).with_context(|| format!("parsing URL {spec}"))?;
        match url.scheme() {
            "http" | "https" => {
                return download::get_text(&url, backoff)
                    .with_context(|| format!("fetching CoreOS stream metadata {spec}"));
            }
            "file" => url
                .to_file_path()
                .map_err(|()| anyhow::anyhow!("{spec} does not name a local file"))?,
            other => bail!("unsupported URL scheme {other:?} in {spec} (use http, https or file)"),
        }
    } else {
        spec.into()
    };
    std::fs::read_to_string(&path)
        .with_context(|| format!("reading CoreOS stream metadata {}", path.display()))
}

/// The installer's mapping from the config's `architecture` to the RPM name stream metadata is keyed by.
fn rpm_arch(architecture: &str) -> Result<&'static str> {
    match architecture {
        "amd64" | "x86_64" => Ok("x86_64"),
        "arm64" | "aarch64" => Ok("aarch64"),
        other => bail!("unsupported architecture {other:?} (expected amd64 or arm64)"),
    }
}

/// Returns `(location, sha256)` of
/// `architectures.<rpmArch>.artifacts.metal.formats.iso.disk` for `architecture` (amd64 or arm64).
pub fn parse_coreos_stream(json: &str, architecture: &str) -> Result<(String, String)> {
    let arch = rpm_arch(architecture)?;
    let root: Value =
        serde_json::from_str(json).context("CoreOS stream metadata is not valid JSON")?;
    let keys = [
        "architectures",
        arch,
        "artifacts",
        "metal",
        "formats",
        "iso",
        "disk",
    ];
    let disk = lookup(&root, &keys)?;
    let location = string_at(disk, &keys, "location")?;
    let sha256 = string_at(disk, &keys, "sha256")?;
    let sha256 = normalize_sha256(&sha256)
        .with_context(|| format!("{}.sha256 in CoreOS stream metadata", keys.join(".")))?;
    Ok((location, sha256))
}

/// Walks `keys`; an error names the path up to the first key that is missing.
fn lookup<'a>(root: &'a Value, keys: &[&str]) -> Result<&'a Value> {
    let mut v = root;
    for (i, k) in keys.iter().enumerate() {
        v = match v.get(k) {
            Some(next) => next,
            None => bail!("CoreOS stream metadata has no {}", keys[..=i].join(".")),
        };
    }
    Ok(v)
}

fn string_at(v: &Value, keys: &[&str], field: &str) -> Result<String> {
    let path = format!("{}.{field}", keys.join("."));
    match v.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(_) => bail!("{path} in CoreOS stream metadata is not a non-empty string"),
        None => bail!("CoreOS stream metadata has no {path}"),
    }
}

/// Accepts 64 hex digits in either case; returns them in lower case, the way `sha256sum` prints them.
pub(crate) fn normalize_sha256(s: &str) -> Result<String> {
    let s = s.trim();
    if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("{s:?} is not a sha256 (64 hex digits)");
    }
    Ok(s.to_ascii_lowercase())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A trimmed copy of the installer's coreos-rhel-9.json: two architectures, other artifacts beside.
    pub(crate) fn sample_stream() -> String {
        let a = "a".repeat(64);
        let b = "B".repeat(64);
        format!(
            r#"{{"stream":"rhcos-9.6","architectures":{{
              "x86_64":{{"artifacts":{{"metal":{{"release":"9.6","formats":{{
                "iso":{{"disk":{{"location":"https://m/rhcos-x86_64.iso","sha256":"{a}"}}}},
                "raw.gz":{{"disk":{{"location":"https://m/x.raw.gz","sha256":"{a}"}}}}}}}}}}}},
              "aarch64":{{"artifacts":{{"metal":{{"release":"9.6","formats":{{
                "iso":{{"disk":{{"location":"https://m/rhcos-aarch64.iso","sha256":"{b}"}}}}}}}}}}}}}}}}"#
        )
    }

    #[test]
    fn picks_the_iso_of_each_architecture() {
        let json = sample_stream();
        let cases = [
            ("amd64", "https://m/rhcos-x86_64.iso", "a"),
            ("arm64", "https://m/rhcos-aarch64.iso", "b"),
        ];
        for (arch, loc, sha) in cases {
            let got = parse_coreos_stream(&json, arch).unwrap();
            assert_eq!(got, (loc.to_string(), sha.repeat(64)), "{arch}");
        }
    }

    #[test]
    fn errors_name_the_missing_key_path() {
        let cases = [
            (
                r#"{"architectures":{}}"#,
                "amd64",
                "has no architectures.x86_64",
            ),
            ("{}", "arm64", "has no architectures\n"),
            (
                r#"{"architectures":{"aarch64":{"artifacts":{"metal":{"formats":{}}}}}}"#,
                "arm64",
                "has no architectures.aarch64.artifacts.metal.formats.iso",
            ),
            (
                r#"{"architectures":{"x86_64":{"artifacts":{"metal":{"formats":{"iso":{"disk":{"location":"u"}}}}}}}}"#,
                "amd64",
                "has no architectures.x86_64.artifacts.metal.formats.iso.disk.sha256",
            ),
            (
                r#"{"architectures":{"x86_64":{"artifacts":{"metal":{"formats":{"iso":{"disk":{"location":7}}}}}}}}"#,
                "amd64",
                "disk.location in CoreOS stream metadata is not a non-empty string",
            ),
            ("{}", "s390x", "unsupported architecture \"s390x\""),
            ("not json", "amd64", "not valid JSON"),
        ];
        for (json, arch, want) in cases {
            let err = parse_coreos_stream(json, arch).unwrap_err();
            let msg = format!("{err:#}\n");
            assert!(msg.contains(want), "{json}: {msg}");
        }
    }
}
