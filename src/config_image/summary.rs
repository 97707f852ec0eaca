//! What an operator checks on a configuration ISO before shipping it, read back from its
//! `manifest.json` and the mirror manifest: identity, machine networks, the host's interfaces and
//! addresses (from `networkConfig`), NTP servers, node labels, the proxy (credentials hidden), and
//! whether a trust bundle and mirrors are there. Never the pull secret, keys or the password hash.

use serde_json::{Value, json};

use crate::contract::config_iso::MANIFEST_NMSTATE_KEY;
use crate::util::summary::{Summary, hide_credentials};

/// manifest.json keys shown as they are (none holds a secret).
const SHOWN_KEYS: [&str; 6] = [
    "cluster_name",
    "base_domain",
    "hostname",
    "cluster_id",
    "infra_id",
    "release_registry",
];

/// The summary of a configuration ISO: `manifest` is its manifest.json, `idms` its
/// image-digest-mirror-set.json when it has one.
pub fn summarize(manifest: &Value, idms: Option<&Value>) -> Summary {
    let mut s = Summary::default();
    for key in SHOWN_KEYS {
        if let Some(v) = manifest.get(key) {
            s.push(key, v.clone());
        }
    }
    s.push("machine_networks", machine_networks(manifest));
    s.push(
        "interfaces",
        interfaces(manifest[MANIFEST_NMSTATE_KEY].as_str()),
    );
    s.push(
        "ntp_servers",
        ntp_servers(manifest["chrony_config"].as_str().unwrap_or("")),
    );
    s.push(
        "node_labels",
        manifest.get("node_labels").cloned().unwrap_or(json!({})),
    );
    s.push("proxy", proxy(&manifest["proxy"]));
    let bundle = manifest
        .pointer("/additionalTrustBundle/userCaBundle")
        .and_then(Value::as_str)
        .unwrap_or("");
    s.push(
        "trust_bundle_certificates",
        bundle.matches("-----BEGIN CERTIFICATE-----").count(),
    );
    s.push("mirrors", idms.map_or(json!([]), mirrors));
    s
}

/// 4.20+ seeds read `machine_networks`, older ones `machine_network`: show what the ISO carries.
fn machine_networks(manifest: &Value) -> Value {
    match manifest.get("machine_networks") {
        Some(Value::Array(a)) if !a.is_empty() => Value::Array(a.clone()),
        _ => manifest
            .get("machine_network")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map_or(json!([]), |n| json!([n])),
    }
}

/// `name mac: address/prefix, …` for each interface of the nmstate YAML; "DHCP" when it has none.
fn interfaces(nmstate: Option<&str>) -> Value {
    let state: Value = nmstate
        .and_then(|t| serde_yaml_ng::from_str(t).ok())
        .unwrap_or(Value::Null);
    let Some(ifaces) = state["interfaces"].as_array() else {
        return json!([]);
    };
    let list: Vec<String> = ifaces
        .iter()
        .map(|i| {
            let mut addrs = Vec::new();
            for family in ["ipv4", "ipv6"] {
                for a in i[family]["address"].as_array().into_iter().flatten() {
                    addrs.push(format!(
                        "{}/{}",
                        scalar(&a["ip"]),
                        scalar(&a["prefix-length"])
                    ));
                }
            }
            let addrs = if addrs.is_empty() {
                "no static address".to_string()
            } else {
                addrs.join(", ")
            };
            format!(
                "{} {}: {addrs}",
                scalar(&i["name"]),
                scalar(&i["mac-address"])
            )
        })
        .collect();
    json!(list)
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".to_string(),
        other => other.to_string(),
    }
}

/// The `server` lines of the chrony.conf (the site's additionalNTPSources).
fn ntp_servers(chrony: &str) -> Value {
    let servers: Vec<&str> = chrony
        .lines()
        .filter_map(|l| l.strip_prefix("server "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    json!(servers)
}

fn proxy(p: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for key in ["httpProxy", "httpsProxy", "noProxy"] {
        if let Some(v) = p[key].as_str().filter(|v| !v.is_empty()) {
            out.insert(key.into(), hide_credentials(v).into());
        }
    }
    Value::Object(out)
}

/// `source → mirror, mirror` for each entry of the ImageDigestMirrorSet.
fn mirrors(idms: &Value) -> Value {
    let entries = idms
        .pointer("/spec/imageDigestMirrors")
        .and_then(Value::as_array);
    let list: Vec<String> = entries
        .into_iter()
        .flatten()
        .map(|e| {
            let m: Vec<String> = e["mirrors"]
                .as_array()
                .into_iter()
                .flatten()
                .map(scalar)
                .collect();
            format!("{} → {}", scalar(&e["source"]), m.join(", "))
        })
        .collect();
    json!(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shows_what_an_operator_checks_and_no_secret() {
        let manifest = json!({
            "cluster_name": "sno", "hostname": "a17", "machine_network": "10.0.0.0/24",
            "raw_nm_state_config": "interfaces:\n- name: eth0\n  mac-address: 52:54:00:aa:17:01\n  ipv4:\n    address:\n    - ip: 10.0.0.17\n      prefix-length: 24\n",
            "chrony_config": "\npool 0.rhel.pool.ntp.org iburst\nserver 10.0.0.1 iburst",
            "node_labels": {"site": "a17"},
            "proxy": {"httpProxy": "http://u:PROXY-PW@p.lab:3128"},
            "pull_secret": "PULL-SECRET",
            "additionalTrustBundle": {"userCaBundle": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"}
        });
        let idms = json!({"spec": {"imageDigestMirrors": [{"source": "quay.io/o", "mirrors": ["m.lab/o"]}]}});
        let s = summarize(&manifest, Some(&idms));
        let text = s.text();
        for want in [
            "  hostname: a17\n",
            "  machine_networks:\n    - 10.0.0.0/24\n",
            "    - eth0 52:54:00:aa:17:01: 10.0.0.17/24\n",
            "  ntp_servers:\n    - 10.0.0.1\n",
            "    site: a17\n",
            "    httpProxy: http://***@p.lab:3128\n",
            "  trust_bundle_certificates: 1\n",
            "    - quay.io/o → m.lab/o\n",
        ] {
            assert!(text.contains(want), "{want:?} in\n{text}");
        }
        let json = s.json().to_string();
        for secret in ["PROXY-PW", "PULL-SECRET"] {
            assert!(!text.contains(secret) && !json.contains(secret), "{secret}");
        }
    }
}
