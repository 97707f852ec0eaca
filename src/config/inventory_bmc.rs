//! The optional `bmc:` of an inventory site: how `ibi deploy` reaches the site's host through its
//! Redfish BMC, with the same choices as `ibi boot` (docs/deliver.md): the address, optionally one
//! System, a user whose password comes from a file or an environment variable (never from the
//! inventory itself), and the BMC's CA or no TLS check at all.
//!
//! The inventory is checked here for what it says (findings name the file, the entry and the site, as
//! for every other key); files and variables are read only when a BMC is used ([`SiteEntry::bmc_password`],
//! [`SiteEntry::bmc_ca`]), so `create config-image --sites` never needs them. The password is read into
//! a [`Secret`] and never shown.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use super::finding::Findings;
use crate::util::fs::read_input_file;
use crate::util::secret::Secret;

const MAX_SMALL_FILE: u64 = 1 << 20;

/// A site's BMC.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct BmcEntry {
    /// The BMC's address, service root, Systems collection or one System (as `ibi boot --bmc`).
    pub address: String,
    /// The System's Id or last path segment, when the BMC has several (as `--system`).
    pub system: Option<String>,
    pub user: Option<String>,
    /// A file whose first line is the password; relative paths are from the inventory's directory.
    pub password_file: Option<String>,
    /// The environment variable holding the password.
    pub password_env: Option<String>,
    /// The CA bundle (PEM) the BMC's certificate must chain to; relative to the inventory's directory.
    pub ca_file: Option<String>,
    /// No TLS check of the BMC at all.
    pub insecure: bool,
}

/// Every rule of `bmc:` that needs only the inventory.
/// `field` names a key of `bmc:` as findings show it (`sites[2].bmc.user (site a17)`).
pub(super) fn check_bmc(f: &mut Findings, field: &dyn Fn(&str) -> String, bmc: &BmcEntry) {
    if let Err(e) = check_address(&bmc.address) {
        f.add(field("address"), e.to_string());
    }
    if let Some(system) = &bmc.system
        && (system.is_empty() || system.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        f.add(
            field("system"),
            format!("invalid value {system:?}: a System Id or path, without spaces"),
        );
    }
    check_credentials(f, field, bmc);
    if bmc.ca_file.is_some() && bmc.insecure {
        f.add(
            field("insecure"),
            "caFile and insecure are exclusive: check the BMC against its CA, or not at all",
        );
    }
    if bmc.ca_file.as_deref() == Some("") {
        f.add(
            field("caFile"),
            "empty: leave the key out to use the system's CAs",
        );
    }
}

/// Why a BMC address is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum BadAddress {
    #[error("required: the BMC's address, e.g. https://10.0.17.9")]
    Missing,
    #[error("invalid value {address:?}: not a URL ({detail})")]
    NotUrl { address: String, detail: String },
    /// The URL is not quoted: it carries a password.
    #[error(
        "must not carry credentials (they would show in logs): use user with passwordFile or passwordEnv"
    )]
    Credentials,
    #[error("invalid value {0:?}: must be an https (or http) URL")]
    Scheme(String),
    #[error("invalid value {0:?}: has no host")]
    NoHost(String),
    #[error("invalid value {0:?}: must not have a query or fragment")]
    QueryOrFragment(String),
}

/// An http(s) URL with a host, and no credentials, query or fragment.
fn check_address(address: &str) -> Result<(), BadAddress> {
    if address.is_empty() {
        return Err(BadAddress::Missing);
    }
    let url = reqwest::Url::parse(address).map_err(|e| BadAddress::NotUrl {
        address: address.to_string(),
        detail: e.to_string(),
    })?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(BadAddress::Credentials);
    }
    let quoted = address.to_string();
    if !matches!(url.scheme(), "https" | "http") {
        Err(BadAddress::Scheme(quoted))
    } else if url.host_str().is_none_or(str::is_empty) {
        Err(BadAddress::NoHost(quoted))
    } else if url.query().is_some() || url.fragment().is_some() {
        Err(BadAddress::QueryOrFragment(quoted))
    } else {
        Ok(())
    }
}

/// A user goes with exactly one password source, and a password source with a user.
fn check_credentials(f: &mut Findings, field: &dyn Fn(&str) -> String, bmc: &BmcEntry) {
    let sources =
        usize::from(bmc.password_file.is_some()) + usize::from(bmc.password_env.is_some());
    match (&bmc.user, sources) {
        (Some(u), _) if u.is_empty() => f.add(field("user"), "empty: give the BMC user or leave the key out"),
        (Some(_), 0) => f.add(
            field("user"),
            "has no password: add passwordFile (a file whose first line is the password) or passwordEnv",
        ),
        (None, n) if n > 0 => f.add(field("user"), "required with passwordFile or passwordEnv"),
        _ => {}
    }
    if sources == 2 {
        f.add(
            field("passwordEnv"),
            "passwordFile and passwordEnv are exclusive: give one",
        );
    }
    if bmc.password_file.as_deref() == Some("") {
        f.add(
            field("passwordFile"),
            "empty: give the path of the password file",
        );
    }
    if let Some(name) = &bmc.password_env
        && !is_env_name(name)
    {
        f.add(
            field("passwordEnv"),
            format!(
                "invalid value {name:?}: an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
            ),
        );
    }
}

fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl BmcEntry {
    /// The password, when this `bmc:` names one: the first line of `passwordFile` (relative to
    /// `inventory`'s directory) or the value of `passwordEnv`. `at` names a key with the inventory and
    /// the site; errors name it and the file or variable, never a byte of the password.
    pub fn password(
        &self,
        inventory: &Path,
        at: &dyn Fn(&str) -> String,
    ) -> Result<Option<Secret>> {
        let bmc = self;
        if let Some(file) = &bmc.password_file {
            let path = relative_to(inventory, file);
            let bytes =
                read_input_file(&path, MAX_SMALL_FILE).with_context(|| at("passwordFile"))?;
            let text = String::from_utf8(bytes).unwrap_or_default();
            let line = text.lines().next().unwrap_or_default();
            if line.is_empty() {
                bail!(
                    "{}: {} has no password on its first line (or is not UTF-8)",
                    at("passwordFile"),
                    path.display()
                );
            }
            return Ok(Some(Secret::new(line)));
        }
        if let Some(name) = &bmc.password_env {
            return match std::env::var(name) {
                Ok(v) if !v.is_empty() => Ok(Some(Secret::new(v))),
                _ => bail!(
                    "{}: the environment variable {name} is not set",
                    at("passwordEnv")
                ),
            };
        }
        Ok(None)
    }

    /// The PEM bytes of `caFile`, when it names one; `at` as for [`BmcEntry::password`].
    pub fn ca(&self, inventory: &Path, at: &dyn Fn(&str) -> String) -> Result<Option<Vec<u8>>> {
        let Some(file) = &self.ca_file else {
            return Ok(None);
        };
        let path = relative_to(inventory, file);
        let bytes = read_input_file(&path, MAX_SMALL_FILE).with_context(|| at("caFile"))?;
        // Checked here, so the file and the field are named (an empty file would otherwise surface
        // as an error of the BMC's client, as if the BMC had answered something).
        let certs = openssl::x509::X509::stack_from_pem(&bytes).unwrap_or_default();
        if certs.is_empty() {
            bail!(
                "{}: {} holds no PEM certificate (the CA that signed the BMC's certificate)",
                at("caFile"),
                path.display()
            );
        }
        Ok(Some(bytes))
    }
}

/// `file` as given when absolute, else beside the inventory.
fn relative_to(inventory: &Path, file: &str) -> std::path::PathBuf {
    let dir = inventory.parent().unwrap_or(Path::new("."));
    dir.join(file)
}

/// The CSV columns of `bmc:`, each the key with `bmc` in front (`bmcPasswordFile`).
pub(super) const CSV_BMC_COLUMNS: &[&str] = &[
    "bmcAddress",
    "bmcSystem",
    "bmcUser",
    "bmcPasswordFile",
    "bmcPasswordEnv",
    "bmcCaFile",
    "bmcInsecure",
];

/// The YAML key of a CSV column of `bmc:` (`bmcPasswordFile` → `bmc.passwordFile`), and back.
pub(super) fn csv_column_of(key: &str) -> Option<String> {
    let rest = key.strip_prefix("bmc.")?;
    let mut chars = rest.chars();
    let first = chars.next()?.to_ascii_uppercase();
    Some(format!("bmc{first}{}", chars.as_str()))
}

/// Sets one `bmc:` key from a CSV cell; a finding for a bad `bmcInsecure`.
pub(super) fn set_csv_cell(
    f: &mut Findings,
    line: usize,
    bmc: &mut BmcEntry,
    column: &str,
    value: &str,
) {
    let text = || Some(value.to_string());
    match column {
        "bmcAddress" => bmc.address = value.to_string(),
        "bmcSystem" => bmc.system = text(),
        "bmcUser" => bmc.user = text(),
        "bmcPasswordFile" => bmc.password_file = text(),
        "bmcPasswordEnv" => bmc.password_env = text(),
        "bmcCaFile" => bmc.ca_file = text(),
        "bmcInsecure" => match value {
            "true" => bmc.insecure = true,
            "false" => bmc.insecure = false,
            _ => f.add(
                format!("line {line} column bmcInsecure"),
                format!("invalid value {value:?}: true or false"),
            ),
        },
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::super::inventory::parse_inventory;

    fn findings(text: &str, csv: bool) -> Vec<String> {
        match parse_inventory("BASE/sites.yaml", text, csv) {
            Ok(_) => Vec::new(),
            Err(e) => e.findings.iter().map(ToString::to_string).collect(),
        }
    }

    fn site(bmc: &str) -> String {
        format!("sites:\n  - name: a17\n    hostname: sno-a17\n    bmc:\n{bmc}")
    }

    #[test]
    fn a_complete_bmc_decodes() {
        let text = site(
            "      address: https://10.0.17.9\n      system: /redfish/v1/Systems/1\n      user: admin\n      passwordFile: bmc/a17.pw\n      caFile: bmc/ca.pem\n",
        );
        let inv = parse_inventory("S", &text, false).unwrap();
        let bmc = inv.sites[0].bmc.clone().unwrap();
        assert_eq!(bmc.address, "https://10.0.17.9");
        assert_eq!(bmc.password_file.as_deref(), Some("bmc/a17.pw"));
        assert!(!bmc.insecure);
    }

    #[test]
    fn every_rule_is_a_finding_naming_file_entry_and_site() {
        let cases = [
            (
                "      user: admin\n      passwordEnv: X\n",
                "BASE/sites.yaml: sites[0].bmc.address (site a17): required: the BMC's address, e.g. https://10.0.17.9",
            ),
            (
                "      address: ftp://10.0.17.9\n",
                "BASE/sites.yaml: sites[0].bmc.address (site a17): invalid value \"ftp://10.0.17.9\": must be an https (or http) URL",
            ),
            (
                "      address: https://admin:MARKER@10.0.17.9\n      user: admin\n      passwordEnv: X\n",
                "BASE/sites.yaml: sites[0].bmc.address (site a17): must not carry credentials (they would show in logs): use user with passwordFile or passwordEnv",
            ),
            (
                "      address: https://b\n      user: admin\n",
                "BASE/sites.yaml: sites[0].bmc.user (site a17): has no password: add passwordFile (a file whose first line is the password) or passwordEnv",
            ),
            (
                "      address: https://b\n      passwordEnv: BMC_PW\n",
                "BASE/sites.yaml: sites[0].bmc.user (site a17): required with passwordFile or passwordEnv",
            ),
            (
                "      address: https://b\n      user: u\n      passwordEnv: BMC_PW\n      passwordFile: f\n",
                "BASE/sites.yaml: sites[0].bmc.passwordEnv (site a17): passwordFile and passwordEnv are exclusive: give one",
            ),
            (
                "      address: https://b\n      user: u\n      passwordEnv: 1-BAD\n",
                "BASE/sites.yaml: sites[0].bmc.passwordEnv (site a17): invalid value \"1-BAD\": an environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
            ),
            (
                "      address: https://b\n      caFile: ca.pem\n      insecure: true\n",
                "BASE/sites.yaml: sites[0].bmc.insecure (site a17): caFile and insecure are exclusive: check the BMC against its CA, or not at all",
            ),
            (
                "      address: https://b\n      system: Systems 1\n",
                "BASE/sites.yaml: sites[0].bmc.system (site a17): invalid value \"Systems 1\": a System Id or path, without spaces",
            ),
        ];
        for (bmc, want) in cases {
            let f = findings(&site(bmc), false);
            assert_eq!(f, [want], "{bmc}");
            assert!(!f.join("").contains("MARKER"));
        }
        let f = findings(
            &site("      address: https://b\n      password: MARKER\n"),
            false,
        );
        assert_eq!(f.len(), 1);
        assert!(f[0].contains("unknown field `password`"), "{f:?}");
        assert!(!f[0].contains("MARKER"), "{f:?}");
    }

    #[test]
    fn csv_columns_fill_bmc_and_name_their_column() {
        let text = "name,hostname,bmcAddress,bmcUser,bmcPasswordEnv,bmcInsecure\n\
                    a17,sno-a17,https://10.0.17.9,admin,BMC_A17,true\n\
                    a18,sno-a18,,,,\n\
                    a19,sno-a19,https://b,admin,,maybe\n";
        let f = findings(text, true);
        assert_eq!(
            f,
            ["BASE/sites.yaml: line 4 column bmcInsecure: invalid value \"maybe\": true or false",]
        );
        let text = text.replace("maybe", "false");
        let f = findings(&text, true);
        assert_eq!(
            f,
            [
                "BASE/sites.yaml: line 4 column bmcUser (site a19): has no password: add passwordFile (a file whose first line is the password) or passwordEnv"
            ]
        );
        let text = text.replace("admin,,false", "admin,PW,false");
        let inv = parse_inventory("S", &text, true).unwrap();
        let bmc = inv.sites[0].bmc.clone().unwrap();
        assert_eq!(
            (
                bmc.address.as_str(),
                bmc.user.as_deref(),
                bmc.password_env.as_deref(),
                bmc.insecure
            ),
            ("https://10.0.17.9", Some("admin"), Some("BMC_A17"), true)
        );
        assert!(inv.sites[1].bmc.is_none());
    }

    #[test]
    fn passwords_are_read_when_used_into_a_secret() {
        let d = tempfile::tempdir().unwrap();
        let inventory = d.path().join("sites.yaml");
        std::fs::create_dir(d.path().join("bmc")).unwrap();
        std::fs::write(d.path().join("bmc/a17.pw"), "MARKER-pw\nignored\n").unwrap();
        let text = site(
            "      address: https://b\n      user: u\n      passwordFile: bmc/a17.pw\n      caFile: bmc/ca.pem\n",
        );
        let inv = parse_inventory("S", &text, false).unwrap();
        let pw = inv.sites[0].bmc_password(&inventory).unwrap().unwrap();
        assert_eq!(pw.expose_str(), "MARKER-pw");
        assert_eq!(format!("{pw:?}"), "<redacted>");
        let err = format!("{:#}", inv.sites[0].bmc_ca(&inventory).unwrap_err());
        assert!(
            err.starts_with(&format!(
                "{}:8: sites[0].bmc.caFile (site a17): reading {}",
                inventory.display(),
                d.path().join("bmc/ca.pem").display()
            )),
            "{err}"
        );
        // Issue 33 item 13: an empty caFile is the file's and the field's fault, named so.
        std::fs::write(d.path().join("bmc/ca.pem"), "").unwrap();
        let err = format!("{:#}", inv.sites[0].bmc_ca(&inventory).unwrap_err());
        assert_eq!(
            err,
            format!(
                "{}:8: sites[0].bmc.caFile (site a17): {} holds no PEM certificate (the CA that signed the BMC's certificate)",
                inventory.display(),
                d.path().join("bmc/ca.pem").display()
            )
        );
        let text = site(
            "      address: https://b\n      user: u\n      passwordEnv: IBI_TEST_UNSET_BMC_PW\n",
        );
        let inv = parse_inventory("S", &text, false).unwrap();
        let err = format!("{:#}", inv.sites[0].bmc_password(&inventory).unwrap_err());
        assert!(
            err.ends_with("sites[0].bmc.passwordEnv (site a17): the environment variable IBI_TEST_UNSET_BMC_PW is not set"),
            "{err}"
        );
    }
}
