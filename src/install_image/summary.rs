//! What an operator checks on an installation ISO before shipping it, read back from its embedded
//! Ignition config: the seed (and whether it is pinned by digest), seedVersion, the disk that will be
//! wiped, shutdown, the extra partition, the proxy (credentials hidden), mirrors, and whether a trust
//! bundle and a network config are there. Never the pull secret or any file's contents beyond these.

use serde_json::{Value, json};

use super::ignition::installation::{NETWORK_CONFIG_PATH, REGISTRIES_CONF_PATH, TRUST_BUNDLE_PATH};
use crate::contract::ibi_configuration::IBI_CONFIGURATION_PATH;
use crate::ignition::decode_data_url;
use crate::util::summary::{Summary, hide_credentials};

/// `ibi-configuration.json` keys shown as they are (none holds a secret).
const SHOWN_KEYS: [&str; 8] = [
    "seedImage",
    "seedVersion",
    "installationDisk",
    "shutdown",
    "releaseRegistry",
    "extraPartitionLabel",
    "extraPartitionNumber",
    "extraPartitionStart",
];

/// The summary of an installation ISO's embedded config.
pub fn summarize(config: &Value) -> Summary {
    let mut s = Summary::default();
    let ibi_config: Value = file(config, IBI_CONFIGURATION_PATH)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    for key in SHOWN_KEYS {
        match ibi_config.get(key) {
            Some(v) => s.push(key, v.clone()),
            // Omitted when false, as the installer writes it; the operator still wants the answer.
            None if key == "shutdown" => s.push(key, false),
            None => {}
        }
    }
    if let Some(seed) = ibi_config["seedImage"].as_str() {
        let digest = seed.split_once('@').map(|(_, d)| d.to_string());
        s.push("seedPinnedDigest", digest.map_or(Value::Null, Value::from));
    }
    s.push("proxy", proxy(config));
    let registries = file(config, REGISTRIES_CONF_PATH).unwrap_or_default();
    s.push("mirrors", mirrors(&String::from_utf8_lossy(&registries)));
    s.push("trustBundle", file(config, TRUST_BUNDLE_PATH).is_some());
    // The file is always there; without a networkConfig it holds only a newline.
    let network = file(config, NETWORK_CONFIG_PATH).unwrap_or_default();
    s.push(
        "networkConfig",
        !String::from_utf8_lossy(&network).trim().is_empty(),
    );
    s
}

/// The decoded contents of the file at `path`, if the config has it as a data URL.
fn file(config: &Value, path: &str) -> Option<Vec<u8>> {
    config
        .pointer("/storage/files")?
        .as_array()?
        .iter()
        .find(|f| f["path"] == path)?
        .pointer("/contents/source")?
        .as_str()
        .and_then(decode_data_url)
}

/// The proxy of the install unit's environment (`Environment=HTTP_PROXY="…"`), credentials hidden.
fn proxy(config: &Value) -> Value {
    let mut out = serde_json::Map::new();
    let units = config.pointer("/systemd/units").and_then(Value::as_array);
    let texts = units.into_iter().flatten().flat_map(|u| {
        let dropins = u["dropins"].as_array().into_iter().flatten();
        std::iter::once(&u["contents"]).chain(dropins.map(|d| &d["contents"]))
    });
    for line in texts.filter_map(Value::as_str).flat_map(str::lines) {
        for (var, key) in [
            ("HTTP_PROXY", "httpProxy"),
            ("HTTPS_PROXY", "httpsProxy"),
            ("NO_PROXY", "noProxy"),
        ] {
            if let Some(v) = line.strip_prefix(&format!("Environment={var}=")) {
                out.insert(key.into(), hide_credentials(v.trim_matches('"')).into());
            }
        }
    }
    Value::Object(out)
}

/// `source → mirror, mirror` for each `[[registry]]` of a registries.conf that has mirrors.
fn mirrors(conf: &str) -> Value {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut in_mirror = false;
    for line in conf.lines().map(str::trim) {
        match line {
            "[[registry]]" => {
                out.push((String::new(), Vec::new()));
                in_mirror = false;
            }
            "[[registry.mirror]]" => in_mirror = true,
            l => {
                let Some(v) = l.strip_prefix("location = ") else {
                    continue;
                };
                let v = v.trim_matches('"').to_string();
                if let Some(last) = out.last_mut() {
                    if in_mirror {
                        last.1.push(v)
                    } else {
                        last.0 = v
                    }
                }
            }
        }
    }
    json!(
        out.into_iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(src, m)| format!("{src} → {}", m.join(", ")))
            .collect::<Vec<_>>()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ignition::data_url;

    #[test]
    fn shows_what_an_operator_checks_and_no_secret() {
        let ibi = r#"{"installationDisk":"/dev/sda","seedImage":"q.io/s@sha256:ab","seedVersion":"4.18.0","shutdown":true}"#;
        let conf = "[[registry]]\n  location = \"quay.io/o\"\n\n  [[registry.mirror]]\n    location = \"m.lab/o\"\n";
        let config = json!({
            "storage": {"files": [
                {"path": IBI_CONFIGURATION_PATH, "contents": {"source": data_url(ibi.as_bytes())}},
                {"path": REGISTRIES_CONF_PATH, "contents": {"source": data_url(conf.as_bytes())}},
                {"path": "/var/tmp/pull-secret.json", "contents": {"source": data_url(b"PULL-SECRET")}},
            ]},
            "systemd": {"units": [{"name": "x.service", "contents":
                "Environment=HTTPS_PROXY=\"http://u:PROXY-PW@p.lab:3128\"\n"}]}
        });
        let s = summarize(&config);
        let text = s.text();
        for want in [
            "  seedImage: q.io/s@sha256:ab\n",
            "  seedVersion: 4.18.0\n",
            "  installationDisk: /dev/sda\n",
            "  shutdown: true\n",
            "  seedPinnedDigest: sha256:ab\n",
            "    httpsProxy: http://***@p.lab:3128\n",
            "    - quay.io/o → m.lab/o\n",
            "  trustBundle: false\n",
        ] {
            assert!(text.contains(want), "{want:?} in\n{text}");
        }
        let json = s.json().to_string();
        assert!(!text.contains("PROXY-PW") && !json.contains("PROXY-PW"));
        assert!(!text.contains("PULL-SECRET") && !json.contains("PULL-SECRET"));
    }
}
