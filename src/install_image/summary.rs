//! What an operator checks on an installation ISO before shipping it, read back from its embedded
//! Ignition config: the seed (and whether it is pinned by digest), seedVersion, the disk that will be
//! wiped, shutdown, the extra partition, the proxy (credentials hidden), mirrors, whether a trust
//! bundle and a network config are there, and where the host reports (`statusURL`, `statusCA`). Never the pull secret or any file's contents beyond these.

use serde_json::{Value, json};

use super::ignition::installation::{NETWORK_CONFIG_PATH, REGISTRIES_CONF_PATH, TRUST_BUNDLE_PATH};
use openssl::hash::MessageDigest;
use openssl::x509::X509;

use crate::contract::config_iso::{LIVE_SITE_TREE, MANIFEST_PATH};
use crate::contract::host_report::{REPORT_CONFIG_PATH, ReportConfig};
use crate::contract::ibi_configuration::IBI_CONFIGURATION_PATH;
use crate::ignition::decode_data_url;
use crate::util::summary::{Summary, hide_credentials};
use crate::util::text::escape_control;

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
    let (url, ca) = status(config);
    s.push("statusURL", url);
    s.push("statusCA", ca);
    if let Some(site) = site(config) {
        s.push("site", site);
    }
    s
}

/// A one-shot ISO (`--site`): whose configuration it carries, named from its manifest.json, and
/// that it carries the site's secrets; `None` for an ISO without a site's tree.
fn site(config: &Value) -> Option<String> {
    let prefix = format!("{LIVE_SITE_TREE}/");
    let files = config.pointer("/storage/files")?.as_array()?;
    let count = files
        .iter()
        .filter(|f| f["path"].as_str().is_some_and(|p| p.starts_with(&prefix)))
        .count();
    if count == 0 {
        return None;
    }
    let manifest: Value = file(config, &format!("{prefix}{MANIFEST_PATH}"))
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null);
    let field = |k: &str| escape_control(manifest[k].as_str().unwrap_or("?"));
    Some(format!(
        "carries the configuration and secrets of site {}.{} (hostname {}): {count} files under \
         {LIVE_SITE_TREE}, private keys and pull secret included; keep this ISO as private as the \
         site's kubeconfig",
        field("cluster_name"),
        field("base_domain"),
        field("hostname")
    ))
}

/// Where the host reports and which CAs it trusts for that (never the token): `statusURL` or
/// null; `statusCA` as each certificate's subject and SHA-256 fingerprint, or "the live ISO's
/// system trust store" when none was given.
fn status(config: &Value) -> (Value, Value) {
    let Some(settings) = file(config, REPORT_CONFIG_PATH)
        .and_then(|b| serde_json::from_slice::<ReportConfig>(&b).ok())
    else {
        return (Value::Null, Value::Null);
    };
    let ca = match &settings.ca_pem {
        None => json!("the live ISO's system trust store"),
        Some(pem) => match X509::stack_from_pem(pem.as_bytes()) {
            Ok(certs) => json!(certs.iter().map(describe_cert).collect::<Vec<_>>()),
            Err(_) => json!("not PEM certificates"),
        },
    };
    (json!(settings.url), ca)
}

/// `CN=ibi lab CA (sha256 3a:5f:…)`.
fn describe_cert(c: &X509) -> String {
    let subject: Vec<String> = c
        .subject_name()
        .entries()
        .filter_map(|e| {
            let key = e.object().nid().short_name().ok()?;
            let value = e.data().to_string().ok()?;
            Some(format!("{key}={value}"))
        })
        .collect();
    let fingerprint = c
        .digest(MessageDigest::sha256())
        .map(|d| {
            d.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        })
        .unwrap_or_default();
    format!(
        "{} (sha256 {fingerprint})",
        escape_control(&subject.join(", "))
    )
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

    fn ca_pem(cn: &str) -> String {
        use openssl::{pkey::PKey, rsa::Rsa, x509::X509NameBuilder};
        let key = PKey::from_rsa(Rsa::generate(2048).unwrap()).unwrap();
        let mut name = X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", cn).unwrap();
        let name = name.build();
        let mut b = X509::builder().unwrap();
        b.set_version(2).unwrap();
        let serial = openssl::bn::BigNum::from_u32(1).unwrap();
        b.set_serial_number(&serial.to_asn1_integer().unwrap())
            .unwrap();
        b.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap())
            .unwrap();
        b.set_not_after(&openssl::asn1::Asn1Time::days_from_now(1).unwrap())
            .unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(&key).unwrap();
        b.sign(&key, MessageDigest::sha256()).unwrap();
        String::from_utf8(b.build().to_pem().unwrap()).unwrap()
    }

    #[test]
    fn shows_where_the_host_reports_and_which_ca_it_trusts_never_the_token() {
        let token = "0123456789abcdef0123456789abcdef";
        let with_ca = |ca: Option<String>| {
            let mut settings = json!({"url": "https://192.0.2.10:8443", "token": token,
                                      "attempts": 30, "delaySeconds": 10});
            if let Some(pem) = ca {
                settings["caPem"] = json!(pem);
            }
            let bytes = serde_json::to_vec(&settings).unwrap();
            summarize(&json!({"storage": {"files": [
                {"path": REPORT_CONFIG_PATH, "contents": {"source": data_url(&bytes)}}]}}))
        };
        let s = with_ca(Some(ca_pem("ibi lab CA")));
        let text = s.text();
        assert!(
            text.contains("  statusURL: https://192.0.2.10:8443\n"),
            "{text}"
        );
        assert!(text.contains("    - CN=ibi lab CA (sha256 "), "{text}");
        assert!(!text.contains(token) && !s.json().to_string().contains(token));
        let text = with_ca(None).text();
        assert!(
            text.contains("  statusCA: the live ISO's system trust store\n"),
            "{text}"
        );
    }

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
        assert!(text.contains("  statusURL: none\n"), "{text}");
        let json = s.json().to_string();
        assert!(!text.contains("PROXY-PW") && !json.contains("PROXY-PW"));
        assert!(!text.contains("PULL-SECRET") && !json.contains("PULL-SECRET"));
        assert!(!text.contains("site:"), "not a one-shot ISO: {text}");
    }

    #[test]
    fn a_one_shot_iso_says_whose_secrets_it_carries_and_never_shows_them() {
        let manifest = r#"{"api_version":1,"cluster_name":"sno-a","base_domain":"lab.example","hostname":"a1\u001b[2J","pull_secret":"PULL-SECRET","kubeconfig_crypto":"KEY"}"#;
        let at = |rel: &str| format!("{LIVE_SITE_TREE}/{rel}");
        let config = json!({"storage": {"files": [
            {"path": at(MANIFEST_PATH), "contents": {"source": data_url(manifest.as_bytes())}},
            {"path": at("extra-manifests/a.yaml"), "contents": {"source": data_url(b"kind: A\n")}},
        ]}});
        let s = summarize(&config);
        let text = s.text();
        assert!(
            text.contains(
                "  site: carries the configuration and secrets of site sno-a.lab.example (hostname \
                 a1\\x1b[2J): 2 files under /var/tmp/ibi-site-configuration, private keys and \
                 pull secret included; keep this ISO as private as the site's kubeconfig\n"
            ),
            "{text}"
        );
        let json = s.json().to_string();
        for secret in ["PULL-SECRET", "KEY"] {
            assert!(!text.contains(secret) && !json.contains(secret), "{secret}");
        }
    }
}
