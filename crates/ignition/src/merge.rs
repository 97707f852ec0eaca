//! `ignitionConfigOverride`: parsing it (spec 3.0.0–3.4.0; the installer's `v3_2.Parse` takes up to
//! 3.2.0), and Ignition's own config-merge rules (`config/merge.MergeStructTranscribe`), implemented on
//! JSON values.
//!
//! The merge rule, from Ignition's `merge.go`, with the override as the child:
//! - objects merge key by key, recursively; a scalar or a value of another kind in the child replaces the
//!   parent's, and a child key that is absent or `null` keeps the parent's value;
//! - lists with identity merge by key: an entry of the child with the key of a parent entry is merged into
//!   it (in the parent's position), the other child entries are appended in their order. Keys: `path` for
//!   `storage.{files,directories,links}` (one shared key space: a parent file whose path the child defines
//!   as a link or directory is dropped), `name` for users, groups, units, drop-ins, raid, luks and HTTP
//!   headers (a child header without `value` deletes the parent's), `device` for disks and filesystems,
//!   number-or-label for partitions, `source` for `ignition.config.merge` and TLS CAs, `url` for tang, and
//!   the value itself for lists of strings (`sshAuthorizedKeys`, `noProxy`, raid `devices`, user `groups`);
//! - `append`, `options` and `mountOptions` are concatenated, duplicates and all.
//!
//! Keys the types do not model travel through. Unlike Ignition we do not drop unknown keys (Ignition warns
//! "Unused key" and the installer's typed round trip loses them); `ignition-validate` shows them.

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value};

use super::types::{Config, IGNITION_VERSION};

/// Spec versions an override may declare: 3.0.0–3.2.0, which the installer's `v3_2.Parse` takes, and
/// 3.3.0 and 3.4.0, which the Ignition of RHCOS 4.16+ runs (the newest installer parses up to 3.6.0,
/// newer than the live ISOs of the seeds ibi serves). Ignition 3.x minor versions only add fields, so
/// a config of one version is a valid config of every later one with the version string changed.
const ACCEPTED_OVERRIDE_VERSIONS: [&str; 5] =
    ["3.0.0", "3.1.0", IGNITION_VERSION, "3.3.0", "3.4.0"];

/// Parses an `ignitionConfigOverride` (Ignition JSON, spec 3.0.0–3.4.0). 3.0.0 and 3.1.0 are
/// translated to 3.2.0, the spec of the generated config; a 3.3.0 or 3.4.0 override keeps its version,
/// which the merged config then takes ([`merge_configs`]): it may use fields 3.2.0 lacks
/// (`kernelArguments`, LUKS `discard` …).
///
/// Errors carry the installer's prefix, `failed to parse ignition config override: …`.
pub fn parse_override(text: &str) -> Result<Config> {
    parse_override_inner(text).context("failed to parse ignition config override")
}

fn parse_override_inner(text: &str) -> Result<Config> {
    let value: Value = serde_json::from_str(text).context("invalid JSON")?;
    let Some(version) = value.pointer("/ignition/version") else {
        bail!("ignition.version is missing");
    };
    let Some(version) = version.as_str() else {
        bail!("ignition.version must be a string, found {version}");
    };
    if !ACCEPTED_OVERRIDE_VERSIONS.contains(&version) {
        bail!(
            "unsupported config version {version:?}: the installation ISO's config accepts overrides of spec {}",
            ACCEPTED_OVERRIDE_VERSIONS.join(", ")
        );
    }
    let mut config: Config = serde_json::from_value(value).context("invalid Ignition config")?;
    config.ignition.version = spec_max(&config.ignition.version, IGNITION_VERSION).to_string();
    Ok(config)
}

/// The later of two accepted spec versions (both `3.N.0`, so the text orders them).
fn spec_max<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a >= b { a } else { b }
}

/// Merges `child` over `parent` with Ignition's rules (module doc). The result is written at the later
/// of the two specs: the lowest that holds both (3.2.0 unless the override declares 3.3.0 or 3.4.0).
pub fn merge_configs(parent: &Config, child: &Config) -> Result<Config> {
    let p = serde_json::to_value(parent).context("serializing the generated Ignition config")?;
    let c = serde_json::to_value(child).context("serializing the Ignition override")?;
    let merged = match (&p, &c) {
        (Value::Object(p), Value::Object(c)) => Value::Object(merge_object(p, c, &[])),
        _ => c.clone(),
    };
    let mut config: Config =
        serde_json::from_value(merged).context("reading back the merged Ignition config")?;
    config.ignition.version =
        spec_max(&parent.ignition.version, &child.ignition.version).to_string();
    Ok(config)
}

/// Merges two JSON objects found at `path` (the object keys from the root; list indices left out).
fn merge_object(
    parent: &Map<String, Value>,
    child: &Map<String, Value>,
    path: &[&str],
) -> Map<String, Value> {
    let mut keys: Vec<&String> = parent.keys().collect();
    keys.extend(child.keys().filter(|k| !parent.contains_key(*k)));
    let mut out = Map::new();
    for key in keys {
        let p = parent.get(key).filter(|v| !v.is_null());
        let c = child.get(key).filter(|v| !v.is_null());
        let sub: Vec<&str> = path.iter().copied().chain([key.as_str()]).collect();
        let merged = match (p, c) {
            (Some(Value::Array(_)), _) | (_, Some(Value::Array(_))) => {
                let list = merge_list(key, p, child, path, &sub);
                (!list.is_empty()).then_some(Value::Array(list))
            }
            (Some(Value::Object(p)), Some(Value::Object(c))) => {
                Some(Value::Object(merge_object(p, c, &sub)))
            }
            (_, Some(c)) => Some(c.clone()),
            (Some(p), None) => Some(p.clone()),
            (None, None) => None,
        };
        if let Some(v) = merged {
            out.insert(key.clone(), v);
        }
    }
    out
}

/// How a list merges.
#[derive(Clone, Copy, PartialEq, Debug)]
enum ListRule {
    /// Concatenate (Ignition's `IgnoreDuplicates`).
    Append,
    /// Merge entries with equal keys; objects keyed by this field, scalars by their value.
    Keyed(KeyField),
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum KeyField {
    Field(&'static str),
    /// `number:<n>` when the number is set and not 0, else `label:<l>`.
    Partition,
}

fn list_rule(field: &str) -> ListRule {
    let key = match field {
        "append" | "options" | "mountOptions" => return ListRule::Append,
        "files" | "directories" | "links" => KeyField::Field("path"),
        "disks" | "filesystems" => KeyField::Field("device"),
        "partitions" => KeyField::Partition,
        "merge" | "certificateAuthorities" => KeyField::Field("source"),
        "tang" => KeyField::Field("url"),
        _ => KeyField::Field("name"),
    };
    ListRule::Keyed(key)
}

/// Lists whose keys share one space: `storage.{files,directories,links}` (Ignition's `MergedKeys`).
fn shared_lists(path: &[&str], field: &str) -> &'static [&'static str] {
    const NODES: &[&str] = &["files", "directories", "links"];
    if path == ["storage"] && NODES.contains(&field) {
        NODES
    } else {
        &[]
    }
}

fn item_key(item: &Value, key: KeyField) -> String {
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    match (item, key) {
        (Value::Object(m), KeyField::Field(f)) => text(m.get(f)),
        (Value::Object(m), KeyField::Partition) => match m.get("number").and_then(Value::as_i64) {
            Some(n) if n != 0 => format!("number:{n}"),
            _ => format!("label:{}", text(m.get("label"))),
        },
        (scalar, _) => text(Some(scalar)),
    }
}

fn as_slice(v: Option<&Value>) -> &[Value] {
    match v {
        Some(Value::Array(a)) => a,
        _ => &[],
    }
}

/// Merges the list `field` of the parent (`p`) with the child object's lists (module doc).
fn merge_list(
    field: &str,
    p: Option<&Value>,
    child: &Map<String, Value>,
    path: &[&str],
    sub: &[&str],
) -> Vec<Value> {
    let parent = as_slice(p);
    let own = as_slice(child.get(field));
    let ListRule::Keyed(key) = list_rule(field) else {
        return parent.iter().chain(own).cloned().collect();
    };
    let in_other_list = |k: &str| {
        shared_lists(path, field)
            .iter()
            .filter(|f| **f != field)
            .any(|f| {
                as_slice(child.get(*f))
                    .iter()
                    .any(|i| item_key(i, key) == k)
            })
    };
    let mut out = Vec::with_capacity(parent.len() + own.len());
    for item in parent {
        let k = item_key(item, key);
        match own.iter().rev().find(|c| item_key(c, key) == k) {
            Some(c) => out.extend(merge_item(field, item, c, sub)),
            None if in_other_list(&k) => {}
            None => out.push(item.clone()),
        }
    }
    let parent_keys: Vec<String> = parent.iter().map(|i| item_key(i, key)).collect();
    out.extend(
        own.iter()
            .filter(|c| !parent_keys.contains(&item_key(c, key)))
            .cloned(),
    );
    out
}

/// Merges one child entry into the parent entry with the same key; `None` drops it (a header reset).
fn merge_item(field: &str, parent: &Value, child: &Value, sub: &[&str]) -> Option<Value> {
    match (parent, child) {
        (_, Value::Object(c))
            if field == "httpHeaders" && c.get("value").is_none_or(Value::is_null) =>
        {
            None
        }
        (Value::Object(p), Value::Object(c)) => Some(Value::Object(merge_object(p, c, sub))),
        _ => Some(child.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn merge(p: Value, c: Value) -> Value {
        let (Value::Object(p), Value::Object(c)) = (p, c) else {
            panic!("objects")
        };
        Value::Object(merge_object(&p, &c, &[]))
    }

    #[test]
    fn files_merge_by_path_and_child_fields_win() {
        let p = json!({"storage": {"files": [{"path": "/a", "mode": 420, "overwrite": true}, {"path": "/b"}]}});
        let c = json!({"storage": {"files": [{"path": "/c"}, {"path": "/a", "mode": 384}]}});
        let want = json!({"storage": {"files": [
            {"path": "/a", "mode": 384, "overwrite": true}, {"path": "/b"}, {"path": "/c"}]}});
        assert_eq!(merge(p, c), want);
    }

    #[test]
    fn a_child_link_drops_the_parent_file_with_that_path() {
        let p = json!({"storage": {"files": [{"path": "/a"}, {"path": "/b"}]}});
        let c = json!({"storage": {"links": [{"path": "/a", "target": "/t"}]}});
        let want = json!({"storage": {"files": [{"path": "/b"}], "links": [{"path": "/a", "target": "/t"}]}});
        assert_eq!(merge(p, c), want);
    }

    #[test]
    fn scalar_lists_dedup_and_append_lists_concatenate() {
        let p = json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1"]}]},
            "storage": {"files": [{"path": "/a", "append": [{"source": "data:,x"}]}]}});
        let c = json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2"]}, {"name": "u"}]},
            "storage": {"files": [{"path": "/a", "append": [{"source": "data:,x"}]}]}});
        let want = json!({"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k1", "k2"]}, {"name": "u"}]},
            "storage": {"files": [{"path": "/a", "append": [{"source": "data:,x"}, {"source": "data:,x"}]}]}});
        assert_eq!(merge(p, c), want);
    }

    #[test]
    fn units_merge_by_name_and_null_keeps_the_parent() {
        let p = json!({"systemd": {"units": [{"name": "a.service", "enabled": true, "contents": "x"}]}});
        let c = json!({"systemd": {"units": [{"name": "a.service", "enabled": null,
            "dropins": [{"name": "10.conf", "contents": "y"}]}]}});
        let want = json!({"systemd": {"units": [{"name": "a.service", "enabled": true, "contents": "x",
            "dropins": [{"name": "10.conf", "contents": "y"}]}]}});
        assert_eq!(merge(p, c), want);
    }

    #[test]
    fn partitions_key_on_number_then_label_and_headers_reset() {
        let p = json!({"storage": {"disks": [{"device": "/dev/sda", "partitions": [
            {"number": 1, "label": "a"}, {"label": "b", "sizeMiB": 1}]}]},
            "ignition": {"config": {"merge": [{"source": "s", "httpHeaders": [{"name": "h", "value": "v"}]}]}}});
        let c = json!({"storage": {"disks": [{"device": "/dev/sda", "partitions": [
            {"label": "b", "sizeMiB": 2}, {"number": 1, "label": "z"}]}]},
            "ignition": {"config": {"merge": [{"source": "s", "httpHeaders": [{"name": "h"}]}]}}});
        let want = json!({"storage": {"disks": [{"device": "/dev/sda", "partitions": [
            {"number": 1, "label": "z"}, {"label": "b", "sizeMiB": 2}]}]},
            "ignition": {"config": {"merge": [{"source": "s"}]}}});
        assert_eq!(merge(p, c), want);
    }

    #[test]
    fn override_versions() {
        let cases = [
            ("3.0.0", "3.2.0"),
            ("3.1.0", "3.2.0"),
            ("3.2.0", "3.2.0"),
            ("3.3.0", "3.3.0"),
            ("3.4.0", "3.4.0"),
        ];
        for (declared, kept) in cases {
            let text = format!(r#"{{"ignition":{{"version":"{declared}"}}}}"#);
            let c = parse_override(&text).unwrap();
            assert_eq!(c.ignition.version, kept, "{declared}");
            let parent = Config {
                ignition: super::super::types::Ignition {
                    version: IGNITION_VERSION.into(),
                    ..Default::default()
                },
                ..Default::default()
            };
            assert_eq!(merge_configs(&parent, &c).unwrap().ignition.version, kept);
            assert_eq!(merge_configs(&c, &parent).unwrap().ignition.version, kept);
        }
        for v in ["3.5.0", "3.6.0", "3.7.0-experimental", "2.3.0", "3.4"] {
            let e = parse_override(&format!(r#"{{"ignition":{{"version":"{v}"}}}}"#)).unwrap_err();
            assert_eq!(
                format!("{e:#}"),
                format!(
                    "failed to parse ignition config override: unsupported config version \"{v}\": the \
                     installation ISO's config accepts overrides of spec 3.0.0, 3.1.0, 3.2.0, 3.3.0, 3.4.0"
                )
            );
        }
        let e = parse_override("{}").unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "failed to parse ignition config override: ignition.version is missing"
        );
        let e = parse_override("{").unwrap_err();
        assert!(
            format!("{e:#}")
                .starts_with("failed to parse ignition config override: invalid JSON: ")
        );
        let e = parse_override(
            r#"{"ignition":{"version":"3.2.0"},"storage":{"files":[{"mode":"x","path":"/a"}]}}"#,
        )
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("invalid Ignition config: "),
            "{e:#}"
        );
    }
}
