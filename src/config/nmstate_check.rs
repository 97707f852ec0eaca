//! The `networkConfig` of image-based-config.yaml: canonical (sorted-key) YAML for `raw_nm_state_config`,
//! and validation the way `nmstatectl gc` does it, in-process with the `nmstate` crate.
//!
//! The installer writes the network config to a file and runs `nmstatectl gc` on it; we parse the same YAML
//! into `nmstate::NetworkState` and generate the NetworkManager keyfiles in memory, so a config that
//! lifecycle-agent's `nmstatectl apply` would reject fails here, on the workstation.

use anyhow::Context;
use serde_json::{Map, Value};

use super::yaml11;

/// The nmstate YAML with keys sorted at every level; deterministic for the same input. Strings a YAML
/// 1.1 reader takes for booleans (`on`, `no` …) are quoted ([`yaml11`]); the result is checked to read
/// back as `config`, so the quoting can never change the document.
pub(crate) fn canonical_yaml(config: &Value) -> anyhow::Result<String> {
    let sorted = sorted(config);
    let plain = serde_yaml_ng::to_string(&sorted).context("serializing networkConfig as YAML")?;
    let quoted = yaml11::quote_booleans(&plain);
    let back: Value =
        serde_yaml_ng::from_str(&quoted).context("reading back the networkConfig YAML")?;
    anyhow::ensure!(
        back == sorted,
        "internal error: quoting YAML 1.1 booleans changed the networkConfig document"
    );
    Ok(quoted)
}

/// `networkConfig` as canonical YAML, or `None` when absent or null (both input files have it).
pub(crate) fn canonical_network_config(config: Option<&Value>) -> anyhow::Result<Option<String>> {
    match config {
        None | Some(Value::Null) => Ok(None),
        Some(v) => canonical_yaml(v).map(Some),
    }
}

/// A copy of `v` whose maps hold their keys in sorted order (serde_json keeps insertion order here, because
/// nmstate enables its `preserve_order` feature).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect::<Map<_, _>>(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// Why a `networkConfig` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    /// `value` is the key's value as JSON (quoted when a string).
    #[error("interfaces[{index}].{key}: {value} is not a MAC address (like 52:54:00:aa:17:01)")]
    Mac {
        index: usize,
        key: &'static str,
        value: String,
    },
    /// The document could not be put in canonical form.
    #[error("{0}")]
    Canonical(String),
    /// nmstate's own message (a position into the re-serialized YAML dropped).
    #[error("{0}")]
    Nmstate(String),
}

/// Parses the canonical YAML as nmstate state and generates NetworkManager keyfiles from it.
pub(crate) fn check(config: &Value) -> Result<(), Refused> {
    check_macs(config)?;
    let yaml = canonical_yaml(config).map_err(|e| Refused::Canonical(format!("{e:#}")))?;
    let state = nmstate::NetworkState::new_from_yaml(&yaml)
        .map_err(|e| Refused::Nmstate(strip_position(&e.to_string())))?;
    let confs = state
        .gen_conf()
        .map_err(|e| Refused::Nmstate(e.to_string()))?;
    for (backend, files) in &confs {
        for (name, _) in files {
            tracing::debug!("networkConfig: {backend} would write {name}");
        }
    }
    Ok(())
}

/// The MAC-address keys of an nmstate interface. nmstate's config generation copies them into the
/// keyfiles unchecked, so a typo only shows on the host, as a NIC that never matches.
const MAC_KEYS: [&str; 2] = ["mac-address", "permanent-mac-address"];

/// Every `interfaces[i].mac-address` is a MAC: 6 (Ethernet) or 20 (InfiniBand) hex octets joined by `:`.
fn check_macs(config: &Value) -> Result<(), Refused> {
    let Some(interfaces) = config.get("interfaces").and_then(Value::as_array) else {
        return Ok(());
    };
    for (i, iface) in interfaces.iter().enumerate() {
        for key in MAC_KEYS {
            match iface.get(key) {
                None => {}
                Some(Value::String(mac)) if is_mac(mac) => {}
                Some(other) => {
                    return Err(Refused::Mac {
                        index: i,
                        key,
                        value: other.to_string(),
                    });
                }
            }
        }
    }
    Ok(())
}

fn is_mac(s: &str) -> bool {
    let octets: Vec<&str> = s.split(':').collect();
    matches!(octets.len(), 6 | 20)
        && octets
            .iter()
            .all(|o| o.len() == 2 && o.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Drops a trailing " at line L column C": it points into the re-serialized YAML, not the user's file.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(pos) if msg[pos..].contains(" column ") => msg[..pos].to_string(),
        _ => msg.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(s: &str) -> Value {
        serde_yaml_ng::from_str(s).unwrap()
    }

    const ETH0: &str = "interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n";

    #[test]
    fn canonical_sorts_keys_at_every_level() {
        let v = yaml(
            "routes: {config: []}\ninterfaces:\n- state: up\n  name: eth0\n  ipv4: {enabled: true, address: []}\n",
        );
        let want = "interfaces:\n- ipv4:\n    address: []\n    enabled: true\n  name: eth0\n  state: up\nroutes:\n  config: []\n";
        assert_eq!(canonical_yaml(&v).unwrap(), want);
    }

    #[test]
    fn nmstate_accepts_and_rejects() {
        let ip = |addr: &str, prefix: u32| {
            format!(
                "{ETH0}  ipv4:\n    enabled: true\n    dhcp: false\n    address:\n    - ip: {addr}\n      prefix-length: {prefix}\n"
            )
        };
        let cases: Vec<(String, Result<(), &str>)> = vec![
            (ETH0.to_string(), Ok(())),
            (ip("192.168.122.2", 23), Ok(())),
            // nmstate keeps an unknown interface type as an opaque one; nmstatectl gc accepts it too.
            (
                "interfaces:\n- name: eth0\n  type: foo\n  state: up\n".into(),
                Ok(()),
            ),
            (
                ip("300.1.1.1", 24),
                Err("InvalidArgument: Invalid YAML string: interfaces: invalid IP address syntax"),
            ),
            (
                ip("10.1.1.1", 99),
                Err(
                    "InvalidArgument: Invalid IPv4 network prefix length '99', should be in the range of 0 to 32",
                ),
            ),
            (
                format!("{ETH0}  bogus: 1\n"),
                Err("InvalidArgument: Invalid YAML string: interfaces: unknown field `bogus`"),
            ),
            (
                "interfaces:\n- name: eth0\n  type: ethernet\n  state: sideways\n".into(),
                Err(
                    "InvalidArgument: Invalid YAML string: interfaces: unknown variant `sideways`, expected one of `up`, `down`, `absent`, `unknown`, `ignore`",
                ),
            ),
            (
                "interfaces:\n- name: eth0.10\n  type: vlan\n  state: up\n  vlan: {id: 10}\n"
                    .into(),
                Err("InvalidArgument: Missing 'vlan.base-iface' for interface 'eth0.10'"),
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                check(&yaml(&input)).map_err(|e| e.to_string()),
                want.map_err(str::to_string),
                "{input}"
            );
        }
    }

    #[test]
    fn mac_addresses_are_checked() {
        let iface = |mac: &str| {
            yaml(&format!(
                "interfaces:\n- name: eth0\n  type: ethernet\n  state: up\n  mac-address: {mac}\n"
            ))
        };
        assert_eq!(check(&iface("52:54:00:AA:17:01")), Ok(()));
        assert_eq!(
            check(&iface("52:54:00:zz:17:01")).map_err(|e| e.to_string()),
            Err("interfaces[0].mac-address: \"52:54:00:zz:17:01\" is not a MAC address (like 52:54:00:aa:17:01)".into())
        );
        assert!(check(&iface("not-a-mac")).is_err());
        assert!(check(&iface("52:54:00:aa:17")).is_err());
        assert!(is_mac(&["00"; 20].join(":")), "InfiniBand");
    }

    #[test]
    fn strip_position_only_strips_positions() {
        assert_eq!(strip_position("x: bad at line 2 column 1"), "x: bad");
        assert_eq!(strip_position("look at line up"), "look at line up");
    }
}
