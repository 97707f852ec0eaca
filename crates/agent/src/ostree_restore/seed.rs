//! The two seed files that steer the ostree restore (lifecycle-agent reference §1.3, §4.5 steps 4
//! and 9): `rpm-ostree.json` names the booted deployment, whose commit is the one to deploy, and
//! `mco-currentconfig.json` (a MachineConfig) gives the kernel arguments. Pure parsers over text,
//! so every shape the seed can take is a table row in the tests below.

use anyhow::{Context, Result, bail, ensure};
use serde::Deserialize;

/// Kernel arguments lca-cli appends when the MachineConfig has `spec.fips` set: the FIPS switch,
/// and the boot partition by label, which dracut's FIPS module needs to find the kernel's HMAC.
pub(crate) const FIPS_KARGS: [&str; 2] = ["fips=1", "boot=LABEL=boot"];

/// Length of an ostree commit checksum (SHA-256, lower-case hex).
const CHECKSUM_LEN: usize = 64;

/// The part of `rpm-ostree status -v --json` the restore needs.
#[derive(Deserialize)]
struct RpmOstreeStatus {
    #[serde(default)]
    deployments: Vec<RpmOstreeDeployment>,
}

#[derive(Deserialize)]
struct RpmOstreeDeployment {
    /// `<osname>-<checksum>.<serial>`.
    id: String,
    #[serde(default)]
    booted: bool,
}

/// The part of a MachineConfig the restore needs; lca-cli reads nothing else of it.
#[derive(Deserialize, Default)]
struct MachineConfig {
    #[serde(default)]
    spec: Option<MachineConfigSpec>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct MachineConfigSpec {
    #[serde(default)]
    kernel_arguments: Option<Vec<String>>,
    #[serde(default)]
    fips: Option<bool>,
}

/// Finds the booted deployment in the seed's `rpm-ostree.json` and returns `(checksum,
/// deployment)`: the commit to deploy (`<checksum>`) and the seed deployment it came from
/// (`<checksum>.<serial>`, which also names the seed's `ostree-<deployment>.origin`). As in lca-cli
/// the deployment is the text of the `id` after its last `-`, and the checksum that up to its first
/// `.`; unlike lca-cli both are checked, so a malformed id fails here rather than in `ostree`.
pub fn booted_deployment(rpm_ostree_json: &str) -> Result<(String, String)> {
    let status: RpmOstreeStatus =
        serde_json::from_str(rpm_ostree_json).context("parsing rpm-ostree.json")?;
    let Some(booted) = status.deployments.iter().find(|d| d.booted) else {
        bail!(
            "rpm-ostree.json lists no booted deployment (among {} deployments)",
            status.deployments.len()
        );
    };
    split_deployment_id(&booted.id)
        .with_context(|| format!("booted deployment id {:?} in rpm-ostree.json", booted.id))
}

/// `<osname>-<checksum>.<serial>` → `(<checksum>, <checksum>.<serial>)`.
fn split_deployment_id(id: &str) -> Result<(String, String)> {
    let deployment = id.rsplit_once('-').map_or(id, |(_, d)| d);
    let Some((checksum, serial)) = deployment.split_once('.') else {
        bail!("expected <osname>-<checksum>.<serial>, found no serial");
    };
    ensure!(
        is_checksum(checksum),
        "{checksum:?} is not an ostree commit checksum (64 lower-case hex digits)"
    );
    ensure!(
        !serial.is_empty() && serial.bytes().all(|b| b.is_ascii_digit()),
        "deployment serial {serial:?} is not a number"
    );
    Ok((checksum.to_string(), deployment.to_string()))
}

/// Whether `s` is an ostree checksum: 64 lower-case hex digits.
pub(crate) fn is_checksum(s: &str) -> bool {
    s.len() == CHECKSUM_LEN && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The kernel arguments of the new deployment from the seed's `mco-currentconfig.json`: every
/// `spec.kernelArguments` entry in order, then [`FIPS_KARGS`] when `spec.fips` is true. Entries are
/// passed on as they are (lca-cli hands each to `ostree admin deploy --karg-append`); blank entries
/// are dropped because they would only put stray spaces into the boot entry.
pub fn kernel_args(mco_currentconfig_json: &str) -> Result<Vec<String>> {
    let config: MachineConfig =
        serde_json::from_str(mco_currentconfig_json).context("parsing mco-currentconfig.json")?;
    let spec = config.spec.unwrap_or_default();
    let mut kargs: Vec<String> = spec
        .kernel_arguments
        .unwrap_or_default()
        .into_iter()
        .filter(|k| !k.trim().is_empty())
        .collect();
    if spec.fips == Some(true) {
        kargs.extend(FIPS_KARGS.iter().map(|k| k.to_string()));
    }
    Ok(kargs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const C1: &str = "5e2a1b4c6d8f0a1b2c3d4e5f60718293a4b5c6d7e8f90112233445566778899a";
    const C2: &str = "0000000000000000000000000000000000000000000000000000000000000001";

    fn status(deployments: &[(&str, bool)]) -> String {
        let list: Vec<String> = deployments
            .iter()
            .map(|(id, booted)| format!(r#"{{"id":"{id}","osname":"x","booted":{booted}}}"#))
            .collect();
        format!(
            r#"{{"deployments":[{}],"transaction":null}}"#,
            list.join(",")
        )
    }

    #[test]
    fn booted_deployment_cases() {
        let cases: &[(&str, String, &str)] = &[
            (
                "single booted",
                status(&[(&format!("rhcos-{C1}.0"), true)]),
                "0",
            ),
            (
                "booted second, serial 3",
                status(&[
                    (&format!("rhcos-{C2}.0"), false),
                    (&format!("rhcos-{C1}.3"), true),
                ]),
                "3",
            ),
            (
                "osname with dashes",
                status(&[(&format!("fedora-coreos-{C1}.12"), true)]),
                "12",
            ),
        ];
        for (name, json, serial) in cases {
            let (checksum, deployment) = booted_deployment(json).expect(name);
            assert_eq!(checksum, C1, "{name}");
            assert_eq!(deployment, format!("{C1}.{serial}"), "{name}");
        }
    }

    #[test]
    fn booted_deployment_errors() {
        let cases: &[(&str, String, &str)] = &[
            (
                "none booted",
                status(&[(&format!("rhcos-{C1}.0"), false)]),
                "rpm-ostree.json lists no booted deployment (among 1 deployments)",
            ),
            (
                "no deployments key",
                "{}".to_string(),
                "rpm-ostree.json lists no booted deployment (among 0 deployments)",
            ),
            (
                "no serial",
                status(&[(&format!("rhcos-{C1}"), true)]),
                "expected <osname>-<checksum>.<serial>, found no serial",
            ),
            (
                "short checksum",
                status(&[("rhcos-abc.0", true)]),
                "\"abc\" is not an ostree commit checksum (64 lower-case hex digits)",
            ),
            (
                "bad serial",
                status(&[(&format!("rhcos-{C1}.x"), true)]),
                "deployment serial \"x\" is not a number",
            ),
        ];
        for (name, json, want) in cases {
            let err = format!("{:#}", booted_deployment(json).unwrap_err());
            assert!(err.ends_with(want), "{name}: {err}");
        }
    }

    #[test]
    fn booted_deployment_error_names_the_id() {
        let err = booted_deployment(&status(&[("rhcos-abc.0", true)])).unwrap_err();
        assert!(
            format!("{err:#}")
                .starts_with("booted deployment id \"rhcos-abc.0\" in rpm-ostree.json: "),
            "{err:#}"
        );
    }

    #[test]
    fn invalid_json_is_named() {
        let err = booted_deployment("not json").unwrap_err();
        assert!(format!("{err:#}").starts_with("parsing rpm-ostree.json: "));
        let err = kernel_args("[").unwrap_err();
        assert!(format!("{err:#}").starts_with("parsing mco-currentconfig.json: "));
    }

    #[test]
    fn kernel_args_cases() {
        let cases: &[(&str, &str, &[&str])] = &[
            ("no spec", r#"{"kind":"MachineConfig"}"#, &[]),
            ("null spec", r#"{"spec":null}"#, &[]),
            ("null kargs", r#"{"spec":{"kernelArguments":null}}"#, &[]),
            (
                "kargs in order, other fields ignored",
                r#"{"metadata":{"name":"rendered-master-1"},
                    "spec":{"config":{"ignition":{"version":"3.2.0"}},
                            "kernelArguments":["systemd.unified_cgroup_hierarchy=1","cgroup_no_v1=\"all\"","a=1 b=2"],
                            "osImageURL":"quay.io/x"}}"#,
                &[
                    "systemd.unified_cgroup_hierarchy=1",
                    "cgroup_no_v1=\"all\"",
                    "a=1 b=2",
                ],
            ),
            (
                "blank entries dropped",
                r#"{"spec":{"kernelArguments":["", "  ", "x"]}}"#,
                &["x"],
            ),
            (
                "fips appends two",
                r#"{"spec":{"kernelArguments":["x"],"fips":true}}"#,
                &["x", "fips=1", "boot=LABEL=boot"],
            ),
            (
                "fips alone",
                r#"{"spec":{"fips":true}}"#,
                &["fips=1", "boot=LABEL=boot"],
            ),
            (
                "fips false",
                r#"{"spec":{"kernelArguments":["x"],"fips":false}}"#,
                &["x"],
            ),
            ("fips null", r#"{"spec":{"fips":null}}"#, &[]),
        ];
        for (name, json, want) in cases {
            let got = kernel_args(json).expect(name);
            assert_eq!(got, *want, "{name}");
        }
    }

    #[test]
    fn checksum_check() {
        assert!(is_checksum(C1));
        assert!(!is_checksum(&C1.to_uppercase()));
        assert!(!is_checksum(&C1[1..]));
        assert!(!is_checksum(&format!("{}g", &C1[1..])));
    }
}
