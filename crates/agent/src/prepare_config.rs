//! The host agent's input: `ibi-configuration.json`, the file `lca-cli ibi -f` reads into lifecycle-agent's
//! `IBIPrepareConfig` (reference `lifecycle-agent.md` §3). `ibi agent install` reads the same file the same
//! way: YAML or JSON, unknown keys ignored, the three required keys checked, then lca-cli's defaults applied.
//!
//! Beyond lca-cli, values that would otherwise fail only after the disk has been wiped (an unparsable
//! `extraPartitionStart`, a partition number that lands on an RHCOS partition, a label too long for GPT, a
//! `seedVersion` that cannot name a stateroot directory) are rejected here, before any destructive step. Every
//! finding is reported at once.

use std::fmt;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::disk::{StartSpec, parse_partition_start};
use contract::ibi_configuration::{
    DEFAULT_EXTRA_PARTITION_LABEL, DEFAULT_EXTRA_PARTITION_NUMBER, DEFAULT_EXTRA_PARTITION_START,
    FIRST_FREE_PARTITION_NUMBER, KEYS, MAX_GPT_NAME_UNITS, MAX_GPT_PARTITION_NUMBER,
    stateroot_name,
};
use util::fs::{MAX_INPUT_BYTES, read_input_file};

/// The validated configuration, defaults applied. Serializes with lca-cli's key names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PrepareConfig {
    pub(crate) seed_image: String,
    /// Must equal the seed's `seed_cluster_ocp_version`; names the stateroot.
    pub(crate) seed_version: String,
    pub(crate) installation_disk: String,
    /// Registry substituted into precache image references when the override rule applies.
    pub(crate) release_registry: String,
    pub(crate) precache_best_effort: bool,
    pub(crate) precache_disabled: bool,
    pub(crate) shutdown: bool,
    /// Bind-mount a folder on the target root instead of creating a partition (lca-cli §4.3b).
    pub(crate) use_containers_folder: bool,
    /// The text as given (or the default); [`PrepareConfig::partition_start`] gives its meaning.
    pub(crate) extra_partition_start: String,
    pub(crate) extra_partition_label: String,
    pub(crate) extra_partition_number: u32,
    pub(crate) skip_disk_cleanup: bool,
    /// Appended after `coreos-installer install <disk>`.
    pub(crate) coreos_installer_args: Vec<String>,
}

/// The file as decoded, before validation: `None` where the key is absent or `null`, which Go's decoder
/// leaves at the zero value.
#[derive(Debug, Default)]
struct RawPrepareConfig {
    seed_image: Option<String>,
    seed_version: Option<String>,
    installation_disk: Option<String>,
    release_registry: Option<String>,
    precache_best_effort: Option<bool>,
    precache_disabled: Option<bool>,
    shutdown: Option<bool>,
    use_containers_folder: Option<bool>,
    extra_partition_start: Option<String>,
    extra_partition_label: Option<String>,
    extra_partition_number: Option<u32>,
    skip_disk_cleanup: Option<bool>,
    coreos_installer_args: Option<Vec<String>>,
}

/// The boolean keys, which YAML 1.1 (lca-cli's YAML library) also spells `yes`/`no`/`on`/`off`.
const BOOL_KEYS: [&str; 5] = [
    "precacheBestEffort",
    "precacheDisabled",
    "shutdown",
    "useContainersFolder",
    "skipDiskCleanup",
];

/// Every problem found in the file; the user fixes them all in one pass.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) struct PrepareConfigError {
    pub(crate) findings: Vec<String>,
}

impl fmt::Display for PrepareConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid ibi-configuration: {}", self.findings.join("; "))
    }
}

/// The SHA-256 of the configuration file's bytes, in hex: what a resumed run must match.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct ConfigFingerprint(pub(crate) String);

impl ConfigFingerprint {
    /// Fingerprints the exact bytes: a reformatted file counts as a different configuration, which errs on
    /// the side of not resuming a half-finished install with something else.
    pub(crate) fn of(bytes: &[u8]) -> Self {
        ConfigFingerprint(util::digest::sha256_hex(bytes))
    }
}

impl fmt::Display for ConfigFingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Decodes (YAML or JSON), validates and applies defaults, in lca-cli's order.
pub fn parse_prepare_config(text: &str) -> Result<PrepareConfig> {
    let raw = decode(text)?;
    let config = apply_defaults(raw);
    let findings = validate(&config);
    if findings.is_empty() {
        Ok(config)
    } else {
        Err(PrepareConfigError { findings }.into())
    }
}

/// Reads and parses `path`; the fingerprint is of the bytes read, so the two always agree.
pub(crate) fn load_prepare_config(path: &Path) -> Result<(PrepareConfig, ConfigFingerprint)> {
    let bytes = read_input_file(path, MAX_INPUT_BYTES)?;
    let text =
        std::str::from_utf8(&bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
    let config = parse_prepare_config(text).map_err(|e| as_findings(e, path))?;
    Ok((config, ConfigFingerprint::of(&bytes)))
}

/// Validation problems become the findings every command prints one per line, `error: <file>: …`;
/// other errors (the document does not decode) get the path as context.
fn as_findings(e: anyhow::Error, path: &Path) -> anyhow::Error {
    match e.downcast::<PrepareConfigError>() {
        Ok(p) => util::finding::ValidationError {
            findings: p
                .findings
                .into_iter()
                .map(|message| util::finding::Finding {
                    file: path.display().to_string(),
                    field: String::new(),
                    message,
                    line: None,
                })
                .collect(),
        }
        .into(),
        Err(e) => e.context(path.display().to_string()),
    }
}

/// Decodes the document and each known key, reporting every key of the wrong type at once.
fn decode(text: &str) -> Result<RawPrepareConfig> {
    let (doc, yaml) = decode_document(text)?;
    let map = canonical_keys(doc, yaml);
    let mut findings = Vec::new();
    let raw = RawPrepareConfig {
        seed_image: field(&map, "seedImage", &mut findings),
        seed_version: field(&map, "seedVersion", &mut findings),
        installation_disk: field(&map, "installationDisk", &mut findings),
        release_registry: field(&map, "releaseRegistry", &mut findings),
        precache_best_effort: field(&map, "precacheBestEffort", &mut findings),
        precache_disabled: field(&map, "precacheDisabled", &mut findings),
        shutdown: field(&map, "shutdown", &mut findings),
        use_containers_folder: field(&map, "useContainersFolder", &mut findings),
        extra_partition_start: field(&map, "extraPartitionStart", &mut findings),
        extra_partition_label: field(&map, "extraPartitionLabel", &mut findings),
        extra_partition_number: field(&map, "extraPartitionNumber", &mut findings),
        skip_disk_cleanup: field(&map, "skipDiskCleanup", &mut findings),
        coreos_installer_args: field(&map, "coreosInstallerArgs", &mut findings),
    };
    if findings.is_empty() {
        Ok(raw)
    } else {
        Err(PrepareConfigError { findings }.into())
    }
}

/// Like Kubernetes' YAML-or-JSON decoder that lca-cli uses: a document starting with `{` is JSON, anything
/// else YAML. An empty document decodes to all zero values (and then fails validation). Returns the
/// mapping and whether it came from YAML.
fn decode_document(text: &str) -> Result<(Map<String, Value>, bool)> {
    let trimmed = text.trim_start();
    let yaml = !trimmed.starts_with('{');
    let value: Value = if trimmed.is_empty() {
        Value::Null
    } else if yaml {
        // Deep flow nesting makes the YAML scanner quadratic: refuse it first (util::yaml).
        util::yaml::check_flow_depth(text.as_bytes())
            .context("decoding ibi-configuration as YAML")?;
        serde_yaml_ng::from_str(text).context("decoding ibi-configuration as YAML")?
    } else {
        serde_json::from_str(text).context("decoding ibi-configuration as JSON")?
    };
    match value {
        Value::Object(map) => Ok((map, yaml)),
        Value::Null => Ok((Map::new(), yaml)),
        other => bail!("ibi-configuration must be a mapping of keys to values, not {other}"),
    }
}

/// Go's `encoding/json` matches keys case-insensitively (`SeedImage` fills `seedImage`); an exact match
/// wins over a case-folded one. YAML 1.1 booleans become booleans on the boolean keys.
fn canonical_keys(doc: Map<String, Value>, yaml: bool) -> Map<String, Value> {
    let mut out = Map::new();
    let (exact, folded): (Vec<_>, Vec<_>) = doc
        .into_iter()
        .partition(|(k, _)| KEYS.contains(&k.as_str()));
    for (key, value) in folded.into_iter().chain(exact) {
        let Some(canonical) = KEYS.iter().find(|k| k.eq_ignore_ascii_case(&key)) else {
            continue;
        };
        let value = match value {
            Value::String(s) if yaml && BOOL_KEYS.contains(canonical) => {
                yaml11_bool(&s).map(Value::Bool).unwrap_or(Value::String(s))
            }
            v => v,
        };
        out.insert(canonical.to_string(), value);
    }
    out
}

/// The plain scalars YAML 1.1 (go-yaml v2) resolves to booleans beyond `true`/`false`.
fn yaml11_bool(s: &str) -> Option<bool> {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "True" | "TRUE" => Some(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// Decodes one key; `null` is absent, a wrong type is a finding naming the key.
fn field<T: DeserializeOwned>(
    map: &Map<String, Value>,
    key: &str,
    findings: &mut Vec<String>,
) -> Option<T> {
    match map.get(key) {
        None | Some(Value::Null) => None,
        Some(v) => serde_json::from_value(v.clone())
            .map_err(|e| findings.push(format!("{key}: {e}")))
            .ok(),
    }
}

/// lca-cli's `SetDefaultValues`: an empty string or 0 means "the default", as Go's zero values do.
fn apply_defaults(raw: RawPrepareConfig) -> PrepareConfig {
    let or_default = |v: Option<String>, d: &str| match v {
        Some(s) if !s.is_empty() => s,
        _ => d.to_string(),
    };
    PrepareConfig {
        seed_image: raw.seed_image.unwrap_or_default(),
        seed_version: raw.seed_version.unwrap_or_default(),
        installation_disk: raw.installation_disk.unwrap_or_default(),
        release_registry: raw.release_registry.unwrap_or_default(),
        precache_best_effort: raw.precache_best_effort.unwrap_or(false),
        precache_disabled: raw.precache_disabled.unwrap_or(false),
        shutdown: raw.shutdown.unwrap_or(false),
        use_containers_folder: raw.use_containers_folder.unwrap_or(false),
        extra_partition_start: or_default(raw.extra_partition_start, DEFAULT_EXTRA_PARTITION_START),
        extra_partition_label: or_default(raw.extra_partition_label, DEFAULT_EXTRA_PARTITION_LABEL),
        extra_partition_number: match raw.extra_partition_number {
            Some(n) if n != 0 => n,
            _ => DEFAULT_EXTRA_PARTITION_NUMBER,
        },
        skip_disk_cleanup: raw.skip_disk_cleanup.unwrap_or(false),
        coreos_installer_args: raw.coreos_installer_args.unwrap_or_default(),
    }
}

/// lca-cli's three required keys (same messages), then ibi's early checks of what the later steps need.
fn validate(c: &PrepareConfig) -> Vec<String> {
    let mut findings = Vec::new();
    for (key, value) in [
        ("seedImage", &c.seed_image),
        ("seedVersion", &c.seed_version),
        ("installationDisk", &c.installation_disk),
    ] {
        if value.trim().is_empty() {
            findings.push(format!("{key} is required"));
        }
    }
    if !c.seed_version.is_empty() && !is_stateroot_safe(&c.seed_version) {
        findings.push(format!(
            "seedVersion {:?} cannot name a stateroot: use letters, digits, '.', '_', '+' and '-' only",
            c.seed_version
        ));
    }
    if !c.use_containers_folder {
        findings.extend(validate_partition(c));
    }
    findings
}

/// The extra partition's keys; unused (and so not checked) with `useContainersFolder`.
fn validate_partition(c: &PrepareConfig) -> Vec<String> {
    let mut findings = Vec::new();
    if let Err(e) = parse_partition_start(&c.extra_partition_start) {
        findings.push(format!("extraPartitionStart: {e}"));
    }
    let n = c.extra_partition_number;
    if !(FIRST_FREE_PARTITION_NUMBER..=MAX_GPT_PARTITION_NUMBER).contains(&n) {
        findings.push(format!(
            "extraPartitionNumber {n} is out of range: RHCOS uses partitions 1-4 and GPT has 128 entries, \
             so use {FIRST_FREE_PARTITION_NUMBER}-{MAX_GPT_PARTITION_NUMBER}"
        ));
    }
    let units = c.extra_partition_label.encode_utf16().count();
    if units > MAX_GPT_NAME_UNITS {
        findings.push(format!(
            "extraPartitionLabel {:?} is {units} characters long; a GPT partition name holds at most {MAX_GPT_NAME_UNITS}",
            c.extra_partition_label
        ));
    }
    findings
}

fn is_stateroot_safe(version: &str) -> bool {
    version != "."
        && version != ".."
        && version
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '+' | '-'))
}

impl PrepareConfig {
    /// The parsed `extraPartitionStart` (validated at load time unless `useContainersFolder`), in the
    /// grammar of [`parse_partition_start`], which the partitioning code uses too.
    pub(crate) fn partition_start(&self) -> Result<StartSpec> {
        parse_partition_start(&self.extra_partition_start).context("extraPartitionStart")
    }

    /// The stateroot this configuration restores into.
    pub(crate) fn stateroot(&self) -> String {
        stateroot_name(&self.seed_version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `ibi create image` writes for the installer's own unit-test inputs (ignition/tests.rs).
    const CREATE_IMAGE_GOLDEN: &str = "{\"extraPartitionLabel\":\"var-lib-containers\",\"extraPartitionNumber\":5,\"extraPartitionStart\":\"-40G\",\"installationDisk\":\"/dev/vda\",\"releaseRegistry\":\"mirror.quay.io\",\"seedImage\":\"quay.io/openshift-kni/seed-image:4.16.0\",\"seedVersion\":\"4.16.0\"}\n";
    /// The same with every optional key `create image` can emit, including Go's `\u0026` escape.
    const CREATE_IMAGE_FULL: &str = "{\"extraPartitionLabel\":\"var-lib-containers\",\"extraPartitionNumber\":5,\"extraPartitionStart\":\"-40G\",\"installationDisk\":\"/dev/vda\",\"releaseRegistry\":\"mirror.quay.io\",\"seedImage\":\"quay.io/openshift-kni/seed-image:4.16.0\",\"seedVersion\":\"4.16.0\",\"shutdown\":true,\"skipDiskCleanup\":true,\"coreosInstallerArgs\":[\"--append-karg\",\"a=b\\u0026c\",\"--save-partindex\",\"6\"],\"precacheBestEffort\":true,\"precacheDisabled\":false}\n";

    fn err_text(text: &str) -> String {
        format!("{:#}", parse_prepare_config(text).unwrap_err())
    }

    #[test]
    fn minimal_file_gets_lca_defaults() {
        let c = parse_prepare_config(
            r#"{"installationDisk":"/dev/vda","seedImage":"quay.io/s:4.16.0","seedVersion":"4.16.0"}"#,
        )
        .unwrap();
        assert_eq!(c.extra_partition_start, "-40G");
        assert_eq!(c.extra_partition_label, "var-lib-containers");
        assert_eq!(c.extra_partition_number, 5);
        assert_eq!(c.release_registry, "");
        assert!(!c.shutdown && !c.skip_disk_cleanup && !c.use_containers_folder);
        assert!(!c.precache_best_effort && !c.precache_disabled);
        assert!(c.coreos_installer_args.is_empty());
        assert_eq!(c.partition_start().unwrap(), StartSpec::SizeAtEnd(40 << 30));
    }

    #[test]
    fn zero_empty_and_null_mean_default_as_in_go() {
        let c = parse_prepare_config(
            r#"{"installationDisk":"/dev/vda","seedImage":"s","seedVersion":"4.16.0",
                "extraPartitionStart":"","extraPartitionNumber":0,"extraPartitionLabel":null,
                "coreosInstallerArgs":null,"shutdown":null}"#,
        )
        .unwrap();
        assert_eq!(c.extra_partition_start, DEFAULT_EXTRA_PARTITION_START);
        assert_eq!(c.extra_partition_number, DEFAULT_EXTRA_PARTITION_NUMBER);
        assert_eq!(c.extra_partition_label, DEFAULT_EXTRA_PARTITION_LABEL);
        assert!(!c.shutdown);
    }

    #[test]
    fn explicit_values_in_yaml() {
        let yaml = "seedImage: quay.io/s:4.16.0-rc.1\nseedVersion: 4.16.0-rc.1\ninstallationDisk: /dev/sda\n\
                    releaseRegistry: mirror.lab:5000\nprecacheBestEffort: true\nprecacheDisabled: true\n\
                    shutdown: true\nuseContainersFolder: false\nextraPartitionStart: 120GiB\n\
                    extraPartitionLabel: containers\nextraPartitionNumber: 6\nskipDiskCleanup: true\n\
                    coreosInstallerArgs: [--save-partindex, \"5\"]\n";
        let c = parse_prepare_config(yaml).unwrap();
        let want = PrepareConfig {
            seed_image: "quay.io/s:4.16.0-rc.1".into(),
            seed_version: "4.16.0-rc.1".into(),
            installation_disk: "/dev/sda".into(),
            release_registry: "mirror.lab:5000".into(),
            precache_best_effort: true,
            precache_disabled: true,
            shutdown: true,
            use_containers_folder: false,
            extra_partition_start: "120GiB".into(),
            extra_partition_label: "containers".into(),
            extra_partition_number: 6,
            skip_disk_cleanup: true,
            coreos_installer_args: vec!["--save-partindex".into(), "5".into()],
        };
        assert_eq!(c, want);
        assert_eq!(
            c.partition_start().unwrap(),
            StartSpec::OffsetBytes(120 << 30)
        );
        assert_eq!(c.stateroot(), "rhcos_4.16.0_rc.1");
    }

    #[test]
    fn unknown_keys_are_ignored() {
        let c = parse_prepare_config(
            r#"{"installationDisk":"/dev/vda","seedImage":"s","seedVersion":"4.16.0",
                "rhcosLiveIso":"https://example/x.iso","pullSecret":"{}","nmStateConfig":"x","future":[1,2]}"#,
        )
        .unwrap();
        assert_eq!(c.seed_version, "4.16.0");
    }

    #[test]
    fn round_trip_of_what_create_image_writes() {
        for golden in [CREATE_IMAGE_GOLDEN, CREATE_IMAGE_FULL] {
            let c = parse_prepare_config(golden).unwrap();
            assert_eq!(c.seed_image, "quay.io/openshift-kni/seed-image:4.16.0");
            assert_eq!(c.installation_disk, "/dev/vda");
            assert_eq!(c.release_registry, "mirror.quay.io");
            let again = parse_prepare_config(&serde_json::to_string(&c).unwrap()).unwrap();
            assert_eq!(again, c);
        }
        let full = parse_prepare_config(CREATE_IMAGE_FULL).unwrap();
        assert_eq!(
            full.coreos_installer_args,
            ["--append-karg", "a=b&c", "--save-partindex", "6"]
        );
        assert!(full.shutdown && full.skip_disk_cleanup && full.precache_best_effort);
        assert!(!full.precache_disabled);
    }

    #[test]
    fn missing_required_keys_are_all_reported_with_lca_messages() {
        assert_eq!(
            err_text("{}"),
            "invalid ibi-configuration: seedImage is required; seedVersion is required; \
             installationDisk is required"
        );
        assert_eq!(
            err_text(""),
            err_text("{}"),
            "an empty file decodes to zero values"
        );
    }

    #[test]
    fn bad_values_have_messages() {
        let base = r#""installationDisk":"/dev/vda","seedImage":"s""#;
        let cases = [
            (
                format!(r#"{{{base},"seedVersion":"4.16/../x"}}"#),
                "seedVersion \"4.16/../x\" cannot name a stateroot",
            ),
            (
                format!(r#"{{{base},"seedVersion":"4","extraPartitionStart":"-40X"}}"#),
                "extraPartitionStart: invalid partition start \"-40X\": expected \"0\" or [+-]<number>",
            ),
            (
                format!(r#"{{{base},"seedVersion":"4","extraPartitionStart":"-0G"}}"#),
                "extraPartitionStart: invalid partition start \"-0G\": the size at the end of the disk is zero",
            ),
            (
                format!(r#"{{{base},"seedVersion":"4","extraPartitionNumber":3}}"#),
                "extraPartitionNumber 3 is out of range: RHCOS uses partitions 1-4",
            ),
            (
                format!(
                    r#"{{{base},"seedVersion":"4","extraPartitionLabel":"{}"}}"#,
                    "x".repeat(37)
                ),
                "is 37 characters long; a GPT partition name holds at most 36",
            ),
            (
                format!(r#"{{{base},"seedVersion":"4","shutdown":"yes"}}"#),
                "invalid ibi-configuration: shutdown: invalid type: string \"yes\", expected a boolean",
            ),
            (
                format!(r#"{{{base},"seedVersion":"4","extraPartitionNumber":-1}}"#),
                "extraPartitionNumber: invalid value: integer `-1`, expected u32",
            ),
            (
                "seedImage: [a".to_string(),
                "decoding ibi-configuration as YAML",
            ),
        ];
        for (text, want) in cases {
            let got = err_text(&text);
            assert!(got.contains(want), "{text}\n  got: {got}\n want: {want}");
        }
    }

    #[test]
    fn keys_match_case_insensitively_as_in_go() {
        let c = parse_prepare_config(
            r#"{"SeedImage":"folded","seedImage":"exact","SEEDVERSION":"4.16.0","installationdisk":"/dev/vda",
                "Shutdown":true}"#,
        )
        .unwrap();
        assert_eq!(c.seed_image, "exact", "an exact key wins over a folded one");
        assert_eq!(
            (c.seed_version.as_str(), c.installation_disk.as_str()),
            ("4.16.0", "/dev/vda")
        );
        assert!(c.shutdown);
    }

    #[test]
    fn yaml_1_1_booleans_on_boolean_keys() {
        let c = parse_prepare_config(
            "seedImage: s\nseedVersion: '4'\ninstallationDisk: d\nshutdown: yes\nskipDiskCleanup: on\n\
             precacheDisabled: No\nreleaseRegistry: yes\n",
        )
        .unwrap();
        assert!(c.shutdown && c.skip_disk_cleanup && !c.precache_disabled);
        assert_eq!(c.release_registry, "yes", "string keys keep the text");
        let err = err_text(
            r#"{"seedImage":"s","seedVersion":"4","installationDisk":"d","shutdown":"yes"}"#,
        );
        assert!(
            err.contains("shutdown: invalid type"),
            "JSON has no yes/no booleans: {err}"
        );
    }

    #[test]
    fn every_wrong_type_is_reported_at_once() {
        assert_eq!(
            err_text(
                r#"{"seedImage":1,"extraPartitionNumber":"5","coreosInstallerArgs":"--save-partindex 6"}"#
            ),
            "invalid ibi-configuration: seedImage: invalid type: integer `1`, expected a string; \
             extraPartitionNumber: invalid type: string \"5\", expected u32; \
             coreosInstallerArgs: invalid type: string \"--save-partindex 6\", expected a sequence"
        );
        assert_eq!(
            err_text("- seedImage: s\n"),
            "ibi-configuration must be a mapping of keys to values, not [{\"seedImage\":\"s\"}]"
        );
    }

    #[test]
    fn containers_folder_skips_partition_checks() {
        let c = parse_prepare_config(
            r#"{"installationDisk":"d","seedImage":"s","seedVersion":"4","useContainersFolder":true,
                "extraPartitionStart":"nonsense"}"#,
        )
        .unwrap();
        assert!(c.use_containers_folder);
        assert!(c.partition_start().is_err());
    }

    #[test]
    fn stateroot_of_the_config() {
        assert_eq!(stateroot_name("4.16.0-rc.1"), "rhcos_4.16.0_rc.1");
    }

    #[test]
    fn fingerprint_is_sha256_hex() {
        assert_eq!(
            ConfigFingerprint::of(b"abc").to_string(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn load_reads_file_and_fingerprints_its_bytes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("ibi-configuration.json");
        std::fs::write(&p, CREATE_IMAGE_GOLDEN).unwrap();
        let (c, fp) = load_prepare_config(&p).unwrap();
        assert_eq!(c.seed_version, "4.16.0");
        assert_eq!(fp, ConfigFingerprint::of(CREATE_IMAGE_GOLDEN.as_bytes()));
        let missing = d.path().join("nope.json");
        let err = format!("{:#}", load_prepare_config(&missing).unwrap_err());
        assert!(
            err.starts_with(&format!("reading {}", missing.display())),
            "{err}"
        );
    }
}
