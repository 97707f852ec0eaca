//! Ignition spec 3.2.0 (and the 3.3.0/3.4.0 an override may bring, which only add fields) as serde types, reduced to what the installation ISO's builder reads and writes:
//! `ignition.version`, `passwd.users[].{name,sshAuthorizedKeys}`, `storage.files[]` and `systemd.units[]`.
//!
//! Every object keeps the keys it does not type in a flattened `extra` map, so a config that went through
//! these types (an `ignitionConfigOverride` with disks, links, drop-ins …) comes out with the same content.
//! Absent fields are omitted on output: unlike Go's `json.Marshal` of the installer we do not write empty
//! nested objects such as `"timeouts":{}`, which Ignition treats the same and which cost embed-area bytes.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The spec version the installer writes (`v3_2` types through OpenShift 4.22), and ibi's generated config
/// unless an override of a later spec (3.3.0, 3.4.0) needs more; the live ISO's Ignition accepts it.
pub const IGNITION_VERSION: &str = "3.2.0";
/// The data-URL prefix of the installer's `dataurl.EncodeBytes`, used for every generated file.
pub const DATA_URL_PREFIX: &str = "data:text/plain;charset=utf-8;base64,";
/// Owner of every generated file (`ignition.FileFromBytes(path, "root", …)`); Ignition resolves the
/// name in the live ISO's passwd.
pub const FILE_OWNER: &str = "root";

type Extra = Map<String, Value>;

/// An Ignition config (root object).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    pub ignition: Ignition,
    #[serde(default, skip_serializing_if = "Passwd::is_empty")]
    pub passwd: Passwd,
    #[serde(default, skip_serializing_if = "Storage::is_empty")]
    pub storage: Storage,
    #[serde(default, skip_serializing_if = "Systemd::is_empty")]
    pub systemd: Systemd,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `ignition`: the version, plus `config`, `proxy`, `security`, `timeouts` untyped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ignition {
    pub version: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `passwd`: users typed, `groups` untyped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Passwd {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<PasswdUser>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `passwd.users[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PasswdUser {
    pub name: String,
    #[serde(
        rename = "sshAuthorizedKeys",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub ssh_authorized_keys: Vec<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `storage`: files typed; `directories`, `links`, `disks`, `filesystems`, `luks`, `raid` untyped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Storage {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<File>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `storage.files[]` (Node and FileEmbedded1 fields; `group` and `append` untyped).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct File {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwrite: Option<bool>,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<NodeUser>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<Resource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<u32>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `storage.files[].user` (`id` untyped).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeUser {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A resource (`contents`): the source URL; `compression`, `httpHeaders`, `verification` untyped.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `systemd`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Systemd {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<Unit>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `systemd.units[]` (`mask` and `dropins` untyped).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Unit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contents: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    pub name: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Passwd {
    fn is_empty(&self) -> bool {
        self.users.is_empty() && self.extra.is_empty()
    }
}

impl Storage {
    fn is_empty(&self) -> bool {
        self.files.is_empty() && self.extra.is_empty()
    }
}

impl Systemd {
    fn is_empty(&self) -> bool {
        self.units.is_empty() && self.extra.is_empty()
    }
}

impl File {
    /// A file the way the installer's `ignition.FileFromBytes` makes it: owner `root`, `overwrite: true`,
    /// the given mode and the contents as a base64 data URL.
    pub fn from_bytes(path: &str, mode: u32, contents: &[u8]) -> File {
        File {
            overwrite: Some(true),
            path: path.to_string(),
            user: Some(NodeUser {
                name: Some(FILE_OWNER.to_string()),
                extra: Extra::new(),
            }),
            contents: Some(Resource {
                source: Some(data_url(contents)),
                extra: Extra::new(),
            }),
            mode: Some(mode),
            extra: Extra::new(),
        }
    }

    /// The decoded contents when they are an inline data URL (`None` for remote sources or none).
    pub fn data(&self) -> Option<Vec<u8>> {
        let source = self.contents.as_ref()?.source.as_deref()?;
        decode_data_url(source)
    }
}

/// `contents` as `data:text/plain;charset=utf-8;base64,<b64>`, the form of the installer's `dataurl`.
pub fn data_url(contents: &[u8]) -> String {
    format!(
        "{DATA_URL_PREFIX}{}",
        openssl::base64::encode_block(contents)
    )
}

/// Decodes an RFC 2397 data URL, base64 or percent-encoded; `None` when `source` is not a valid one.
pub fn decode_data_url(source: &str) -> Option<Vec<u8>> {
    let rest = source.strip_prefix("data:")?;
    let (header, payload) = rest.split_once(',')?;
    if header.ends_with(";base64") {
        if payload.is_empty() {
            return Some(Vec::new());
        }
        return openssl::base64::decode_block(payload).ok();
    }
    percent_decode(payload)
}

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

/// The config as compact JSON, the bytes that go into the ISO's embed area.
pub fn to_json(c: &Config) -> Result<Vec<u8>> {
    serde_json::to_vec(c).context("serializing the Ignition config")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_url_round_trips() {
        let url = data_url(b"hello\n");
        assert_eq!(url, "data:text/plain;charset=utf-8;base64,aGVsbG8K");
        assert_eq!(decode_data_url(&url).unwrap(), b"hello\n");
        assert_eq!(data_url(b""), DATA_URL_PREFIX);
        assert_eq!(decode_data_url(DATA_URL_PREFIX).unwrap(), b"");
    }

    #[test]
    fn decodes_percent_encoded_and_rejects_others() {
        assert_eq!(decode_data_url("data:,a%20b").unwrap(), b"a b");
        assert_eq!(decode_data_url("data:,a%2").as_deref(), None);
        assert_eq!(decode_data_url("https://example.com/x"), None);
        assert_eq!(decode_data_url("data:;base64,!!!"), None);
    }

    #[test]
    fn unknown_keys_survive_a_round_trip() {
        let text = r#"{"ignition":{"version":"3.2.0","timeouts":{"httpTotal":5}},"storage":{"links":[{"path":"/a","target":"/b"}],"files":[{"path":"/x","append":[{"source":"data:,y"}]}]},"systemd":{"units":[{"name":"a.service","mask":true}]},"kernelArguments":{}}"#;
        let c: Config = serde_json::from_str(text).unwrap();
        let back: Value = serde_json::from_slice(&to_json(&c).unwrap()).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(text).unwrap());
    }

    #[test]
    fn file_from_bytes_has_the_installer_shape() {
        let f = File::from_bytes("/var/tmp/x", 0o600, b"x");
        let v = serde_json::to_value(&f).unwrap();
        let want = serde_json::json!({"overwrite": true, "path": "/var/tmp/x", "user": {"name": "root"},
            "contents": {"source": "data:text/plain;charset=utf-8;base64,eA=="}, "mode": 384});
        assert_eq!(v, want);
        assert_eq!(f.data().unwrap(), b"x");
    }
}
