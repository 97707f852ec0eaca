//! Tests of `image-based-installation-config.yaml`: strict decoding, defaults, one table row per rule
//! asserting the rendered finding, and loading the directory with `post.sh`.

use std::path::Path;

use super::super::tests::{patched, render};
use super::*;

const PULL_SECRET: &str = r#"{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}"#;

/// A 4.20 seed's lca-cli honours every key, so each field rule is tested alone; older seeds are in
/// `seed_version_rules`.
fn base() -> String {
    format!(
        "seedImage: quay.io/openshift-kni/seed-image:4.20.0\nseedVersion: 4.20.0\n\
         installationDisk: /dev/vda\npullSecret: '{PULL_SECRET}'\n"
    )
}

/// The findings and warnings of the base config with `patch` applied (`key: null` removes a key).
fn run(patch: &str) -> (Vec<String>, Vec<String>) {
    let text = patched(&base(), patch);
    let c = parse_installation_config(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (f, w) = validate_installation_config(&c);
    (render(&f), w)
}

fn check(cases: &[(&str, &[&str])]) {
    for (patch, want) in cases {
        let want: Vec<String> = want
            .iter()
            .map(|w| format!("{IMAGE_BASED_INSTALLATION_CONFIG_FILE}: {w}"))
            .collect();
        assert_eq!(run(patch).0, want, "patch: {patch}");
    }
}

#[test]
fn required_fields() {
    check(&[
        ("{}", &[]),
        (
            "seedImage: ''",
            &["seedImage: required: you must specify a seedImage"],
        ),
        (
            "seedVersion: null",
            &["seedVersion: required: you must specify a seedVersion"],
        ),
        (
            "installationDisk: ' '",
            &["installationDisk: required: you must specify an installationDisk"],
        ),
        (
            "installationDisk: sda",
            &[
                "installationDisk: invalid value \"sda\": must be an absolute device path, e.g. /dev/disk/by-id/wwn-0x…",
            ],
        ),
        (
            "pullSecret: ''",
            &["pullSecret: required: you must specify a pullSecret"],
        ),
        (
            "pullSecret: '{\"auths\":{}}'",
            &["pullSecret: auths required: a non-empty \"auths\" map"],
        ),
        (
            "pullSecret: '{\"auths\":{\"r.io\":{}}}'",
            &["pullSecret: \"r.io\" requires either auth or credsStore"],
        ),
    ]);
}

#[test]
fn shared_rules() {
    check(&[
        (
            "sshKey: 'ssh-rsa'",
            &["sshKey: line 1: ssh-rsa key has no key data"],
        ),
        (
            "additionalTrustBundle: '-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----'",
            &["additionalTrustBundle: PEM block 1 is a \"PRIVATE KEY\", not a CERTIFICATE"],
        ),
        (
            "networkConfig: {interfaces: [{name: eth0, type: ethernet, state: sideways}]}",
            &[
                "networkConfig: InvalidArgument: Invalid YAML string: interfaces: unknown variant `sideways`, expected one of `up`, `down`, `absent`, `unknown`, `ignore`",
            ],
        ),
        (
            "imageDigestSources: [{source: quay.io/a/b:1, mirrors: ['Registry.lab.redhat.com:5000']}]",
            &[
                "imageDigestSources[0].source: invalid value \"quay.io/a/b:1\": must be repository--not reference",
                "imageDigestSources[0].mirrors[0]: invalid value \"Registry.lab.redhat.com:5000\": failed to parse: invalid reference format: repository name must be lowercase",
            ],
        ),
        (
            "proxy: {noProxy: example.com}",
            &["proxy: must include httpProxy or httpsProxy"],
        ),
        (
            "proxy: {httpProxy: 'https://p:3128'}",
            &["proxy.httpProxy: unsupported scheme: supported values are \"http\""],
        ),
    ]);
}

#[test]
fn extra_partition_rules() {
    check(&[
        (
            "{extraPartitionStart: '0', extraPartitionLabel: data, extraPartitionNumber: 128}",
            &[],
        ),
        ("extraPartitionStart: '+100M'", &[]),
        ("extraPartitionStart: 25G", &[]),
        (
            "extraPartitionStart: ''",
            &[
                "extraPartitionStart: required: partition start sector cannot be empty (omit the key for the default \"-40G\")",
            ],
        ),
        (
            "extraPartitionStart: x",
            &[
                "extraPartitionStart: invalid value \"x\": partition start must be '0' or match pattern [+-]?<number>[KMGTP]",
            ],
        ),
        (
            "extraPartitionStart: -40GiB",
            &[
                "extraPartitionStart: invalid value \"-40GiB\": partition start must be '0' or match pattern [+-]?<number>[KMGTP]",
            ],
        ),
        (
            "extraPartitionStart: -G",
            &[
                "extraPartitionStart: invalid value \"-G\": partition start must be '0' or match pattern [+-]?<number>[KMGTP]",
            ],
        ),
        (
            "extraPartitionLabel: ''",
            &[
                "extraPartitionLabel: required: partition label cannot be empty (omit the key for the default \"var-lib-containers\")",
            ],
        ),
        (
            "extraPartitionLabel: 'var lib'",
            &[
                "extraPartitionLabel: invalid value \"var lib\": a GPT partition name of at most 36 characters of A-Z, a-z, 0-9, '.', '_' and '-'",
            ],
        ),
        (
            "extraPartitionNumber: 0",
            &[
                "extraPartitionNumber: invalid value 0: partitions are numbered from 1 (omit the key for the default 5)",
            ],
        ),
        (
            "extraPartitionNumber: 129",
            &["extraPartitionNumber: invalid value 129: a GPT disk holds at most 128 partitions"],
        ),
        (
            "extraPartitionNumber: 4",
            &[
                "extraPartitionNumber: invalid value 4: RHCOS uses partitions 1-4 (BIOS-BOOT, EFI-SYSTEM, boot, root); the installation would fail after wiping the disk",
            ],
        ),
        (
            "extraPartitionStart: 16384P",
            &[
                "extraPartitionStart: invalid value \"16384P\": partition start must be '0' or match pattern [+-]?<number>[KMGTP]",
            ],
        ),
        ("extraPartitionStart: 16383P", &[]),
    ]);
}

#[test]
fn coreos_installer_args_rules() {
    let allowed =
        "allowed flags are [--append-karg --delete-karg --save-partlabel --save-partindex]";
    let foo = format!(
        "coreosInstallerArgs[2]: found unexpected flag --foo=bar for coreosInstallerArgs - {allowed}"
    );
    let eq = format!(
        "coreosInstallerArgs[0]: found unexpected flag --append-karg=x for coreosInstallerArgs - {allowed}"
    );
    check(&[
        (
            "coreosInstallerArgs: [--append-karg, 'ip=dhcp,dhcp6', --delete-karg, quiet, --save-partlabel, 'data*', --save-partindex, '6-']",
            &[],
        ),
        (
            "coreosInstallerArgs: [--append-karg, a, --foo=bar, b]",
            &[&foo],
        ),
        ("coreosInstallerArgs: [--append-karg=x]", &[&eq]),
        (
            "coreosInstallerArgs: [--append-karg, 'a b&c']",
            &[
                "coreosInstallerArgs[1]: found unexpected chars \" &\" in value \"a b&c\" - allowed are ASCII letters, digits and @!#$%*()_+,-./:;<=\"'{}[]",
            ],
        ),
        (
            "coreosInstallerArgs: [--append-karg, '']",
            &["coreosInstallerArgs[1]: empty value: give the flag's value or remove the element"],
        ),
        (
            "coreosInstallerArgs: [--append-karg, --delete-karg, x]",
            &[
                "coreosInstallerArgs[0]: flag --append-karg has no value: give its value as the next element",
            ],
        ),
        (
            "coreosInstallerArgs: [--save-partindex]",
            &[
                "coreosInstallerArgs[0]: flag --save-partindex has no value: give its value as the next element",
            ],
        ),
        (
            "coreosInstallerArgs: [/dev/sdb, --append-karg, a, b]",
            &[
                "coreosInstallerArgs[0]: value \"/dev/sdb\" does not follow a flag: coreos-installer install takes no further positional arguments",
                "coreosInstallerArgs[3]: value \"b\" does not follow a flag: coreos-installer install takes no further positional arguments",
            ],
        ),
    ]);
}

#[test]
fn other_field_rules() {
    check(&[
        ("architecture: arm64", &[]),
        ("architecture: ''", &[]),
        (
            "architecture: x86",
            &["architecture: invalid value \"x86\": architecture must be one of [amd64 arm64]"],
        ),
        ("releaseRegistry: 'mirror.lab:5000/ocp'", &[]),
        (
            "releaseRegistry: 'https://mirror.lab'",
            &[
                "releaseRegistry: invalid value \"https://mirror.lab\": must be a registry host[:port], optionally with a path, and no scheme",
            ],
        ),
        (
            "releaseRegistry: 'mirror_lab'",
            &[
                "releaseRegistry: invalid value \"mirror_lab\": must be a registry host[:port], optionally with a path, and no scheme",
            ],
        ),
        (
            "liveKernelArgs: ['console=ttyS0,115200n8', rd.neednet=1]",
            &[],
        ),
        (
            "liveKernelArgs: ['a#b']",
            &[
                "liveKernelArgs[0]: invalid value \"a#b\": '#' is not allowed: it pads the ISO's kernel-argument slots and starts a GRUB comment",
            ],
        ),
        (
            "liveKernelArgs: [ok, 'a b', '', \"x\\n\"]",
            &[
                "liveKernelArgs[1]: invalid value \"a b\": a kernel argument must be one non-empty token of printable ASCII, without whitespace",
                "liveKernelArgs[2]: invalid value \"\": a kernel argument must be one non-empty token of printable ASCII, without whitespace",
                "liveKernelArgs[3]: invalid value \"x\\n\": a kernel argument must be one non-empty token of printable ASCII, without whitespace",
            ],
        ),
    ]);
}

/// With `hostAgent: lca` the seed's lca-cli reads the file: keys it predates are refused, naming the
/// field, the seed's version and the first version that honours the key (lca_versions::VERSIONED_KEYS).
#[test]
fn seed_version_rules() {
    let args = "coreosInstallerArgs: [--save-partindex, '6']";
    let registry = "releaseRegistry: mirror.example.com:5000";
    let refused = |field: &str, seed: &str, older: &str, since: &str| {
        format!(
            "{field}: the seed is {seed} (seedVersion), whose lca-cli ignores this key and {older}; lca-cli honours it from {since} on: remove it, use a seed of {since} or later, or set hostAgent: ibi"
        )
    };
    let no_args = |seed| {
        refused(
            "coreosInstallerArgs",
            seed,
            "runs `coreos-installer install <disk>` with no extra arguments",
            "4.18",
        )
    };
    let no_registry = |seed| {
        refused(
            "releaseRegistry",
            seed,
            "precaches from the seed's own registry",
            "4.17",
        )
    };
    let cases: Vec<(String, Vec<String>)> = vec![
        (
            format!("{{seedVersion: 4.16.0, {args}, {registry}}}"),
            vec![no_registry("4.16.0"), no_args("4.16.0")],
        ),
        (
            format!("{{seedVersion: 4.17.5, {args}, {registry}}}"),
            vec![no_args("4.17.5")],
        ),
        (
            format!("{{seedVersion: 4.18.0-rc.1, {args}, {registry}}}"),
            vec![],
        ),
        (
            format!("{{seedVersion: 4.20.0, {args}, {registry}}}"),
            vec![],
        ),
        ("{seedVersion: 4.16.0}".to_string(), vec![]),
        // Our agent honours both keys whatever the seed.
        (
            format!(
                "{{seedVersion: 4.16.0, {args}, {registry}, hostAgent: ibi, hostAgentImage: 'quay.io/kni/ibi:4.16'}}"
            ),
            vec![],
        ),
    ];
    for (patch, want) in &cases {
        let want: Vec<String> = want
            .iter()
            .map(|w| format!("{IMAGE_BASED_INSTALLATION_CONFIG_FILE}: {w}"))
            .collect();
        assert_eq!(run(patch).0, want, "patch: {patch}");
    }
    let (f, w) = run(&format!("{{seedVersion: latest, {registry}}}"));
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(
        w,
        [format!(
            "{IMAGE_BASED_INSTALLATION_CONFIG_FILE}: releaseRegistry: seedVersion \"latest\" is not an OpenShift version, so ibi cannot tell whether the seed's lca-cli honours this key (it does from 4.17 on)"
        )]
    );
}

#[test]
fn host_agent_rules() {
    let digest = format!("quay.io/kni/ibi@sha256:{}", "0".repeat(64));
    let with_digest = format!("{{hostAgent: ibi, hostAgentImage: '{digest}'}}");
    check(&[
        ("hostAgent: lca", &[]),
        ("{hostAgent: lca, hostAgentImage: ''}", &[]),
        (
            "{hostAgent: ibi, hostAgentImage: 'quay.io/kni/ibi:4.16'}",
            &[],
        ),
        (&with_digest, &[]),
        (
            "hostAgent: ibi",
            &[
                "hostAgentImage: required: you must specify a hostAgentImage (the image holding /usr/local/bin/ibi) with hostAgent: ibi",
            ],
        ),
        (
            "{hostAgent: ibi, hostAgentImage: ''}",
            &[
                "hostAgentImage: required: you must specify a hostAgentImage (the image holding /usr/local/bin/ibi) with hostAgent: ibi",
            ],
        ),
        (
            "{hostAgent: ibi, hostAgentImage: 'quay.io/kni/ibi'}",
            &[
                "hostAgentImage: invalid value \"quay.io/kni/ibi\": a tag or a digest is required, e.g. quay.io/namespace/repo:tag",
            ],
        ),
        (
            "{hostAgent: ibi, hostAgentImage: 'ibi:4.16'}",
            &[
                "hostAgentImage: invalid value \"ibi:4.16\": must start with a registry host name, e.g. quay.io/namespace/repo:tag",
            ],
        ),
        (
            "{hostAgent: ibi, hostAgentImage: 'quay.io/Kni/ibi:1'}",
            &[
                "hostAgentImage: invalid value \"quay.io/Kni/ibi:1\": failed to parse: invalid reference format: repository name must be lowercase",
            ],
        ),
        (
            "{hostAgent: ibi, hostAgentImage: \"quay.io/kni/ibi:1\\nExecStart=/bin/sh\"}",
            &[
                "hostAgentImage: invalid value \"quay.io/kni/ibi:1\\nExecStart=/bin/sh\": failed to parse: invalid reference format",
            ],
        ),
        (
            "hostAgentImage: 'quay.io/kni/ibi:4.16'",
            &[
                "hostAgentImage: only used with hostAgent: ibi (hostAgent is lca, which runs lca-cli from the seed): set hostAgent: ibi or remove hostAgentImage",
            ],
        ),
        (
            "{hostAgent: lca, hostAgentImage: 'not a pull spec'}",
            &[
                "hostAgentImage: only used with hostAgent: ibi (hostAgent is lca, which runs lca-cli from the seed): set hostAgent: ibi or remove hostAgentImage",
            ],
        ),
        (
            "hostAgent: IBI",
            &["hostAgent: invalid value \"IBI\": hostAgent must be one of [lca ibi]"],
        ),
        (
            "hostAgent: ''",
            &["hostAgent: invalid value \"\": hostAgent must be one of [lca ibi]"],
        ),
        (
            "{hostAgent: podman, hostAgentImage: 'quay.io/kni/ibi'}",
            &[
                "hostAgent: invalid value \"podman\": hostAgent must be one of [lca ibi]",
                "hostAgentImage: invalid value \"quay.io/kni/ibi\": a tag or a digest is required, e.g. quay.io/namespace/repo:tag",
            ],
        ),
    ]);
}

#[test]
fn host_agent_defaults_to_lca() {
    let c = parse_installation_config(&base()).unwrap();
    assert_eq!(
        (c.host_agent.as_deref(), c.host_agent_image.as_str()),
        (None, "")
    );
    assert_eq!(c.host_agent(), HostAgent::Lca);
    let c = parse_installation_config(&format!("{}hostAgent:\nhostAgentImage:\n", base())).unwrap();
    assert_eq!(c.host_agent(), HostAgent::Lca);
    let c = parse_installation_config(&format!(
        "{}hostAgent: ibi\nhostAgentImage: quay.io/kni/ibi:4.16\n",
        base()
    ))
    .unwrap();
    assert_eq!(
        c.host_agent(),
        HostAgent::Ibi {
            image: "quay.io/kni/ibi:4.16".into()
        }
    );
}

#[test]
fn ignition_config_override_rules() {
    check(&[
        (
            "ignitionConfigOverride: '{\"ignition\":{\"version\":\"3.5.0\"}}'",
            &[
                "ignitionConfigOverride: unsupported config version \"3.5.0\": the installation ISO's config accepts overrides of spec 3.0.0, 3.1.0, 3.2.0, 3.3.0, 3.4.0",
            ],
        ),
        (
            "ignitionConfigOverride: '{\"ignition\":{\"version\":\"3.4.0\"},\"kernelArguments\":{\"shouldExist\":[\"a=1\"]}}'",
            &[],
        ),
        (
            "ignitionConfigOverride: '{\"ignition\":{\"version\":\"3.1.0\"}}'",
            &[],
        ),
        ("ignitionConfigOverride: ' '", &[]),
        (
            "ignitionConfigOverride: '{\"ignition\":'",
            &[
                "ignitionConfigOverride: not valid JSON: EOF while parsing a value at line 1 column 12",
            ],
        ),
        (
            "ignitionConfigOverride: '[]'",
            &["ignitionConfigOverride: must be a JSON object (an Ignition config)"],
        ),
        (
            "ignitionConfigOverride: '{\"storage\":{}}'",
            &[
                "ignitionConfigOverride: ignition.version required: an Ignition config starts with {\"ignition\": {\"version\": \"3.2.0\"}}",
            ],
        ),
        (
            "ignitionConfigOverride: '{\"ignition\":{\"version\":\"2.2.0\"}}'",
            &[
                "ignitionConfigOverride: unsupported ignition.version \"2.2.0\": must be 3.x.y (Ignition spec 3)",
            ],
        ),
        (
            "ignitionConfigOverride: '{\"ignition\":{\"version\":\"3.2\"}}'",
            &[
                "ignitionConfigOverride: unsupported ignition.version \"3.2\": must be 3.x.y (Ignition spec 3)",
            ],
        ),
    ]);
}

#[test]
fn every_finding_is_collected() {
    let (f, _) =
        run("{seedImage: null, seedVersion: null, architecture: x, extraPartitionStart: ''}");
    assert_eq!(f.len(), 4, "{f:?}");
}

#[test]
fn precache_warning() {
    assert_eq!(
        run("{precacheDisabled: true, precacheBestEffort: true}").1,
        [
            "image-based-installation-config.yaml: precacheBestEffort: has no effect: precacheDisabled is true, so lca-cli ibi does not precache"
        ]
    );
    assert_eq!(
        run("{precacheDisabled: false, precacheBestEffort: true}").1,
        Vec::<String>::new()
    );
}

#[test]
fn defaults_apply_only_to_absent_keys() {
    let c = parse_installation_config(&base()).unwrap();
    assert_eq!(c.extra_partition_start(), "-40G");
    assert_eq!(c.extra_partition_label(), "var-lib-containers");
    assert_eq!(c.extra_partition_number(), 5);
    assert_eq!(c.architecture(), "amd64");
    assert_eq!((c.shutdown, c.skip_disk_cleanup), (false, false));
    assert_eq!((c.precache_best_effort, c.precache_disabled), (None, None));
    assert!(c.image_digest_sources().is_empty());
    assert_eq!(c.ignition_config_override(), None);
    assert_eq!(c.canonical_network_config().unwrap(), None);

    let text = format!(
        "{}extraPartitionStart: ''\nextraPartitionLabel: ''\nextraPartitionNumber: 6\narchitecture: arm64\n\
         precacheBestEffort: false\nshutdown: true\nsshKey:\nliveKernelArgs:\n",
        base()
    );
    let c = parse_installation_config(&text).unwrap();
    assert_eq!(c.extra_partition_start(), "");
    assert_eq!(c.extra_partition_label(), "");
    assert_eq!(c.extra_partition_number(), 6);
    assert_eq!(c.architecture(), "arm64");
    assert_eq!(c.precache_best_effort, Some(false));
    assert!(c.shutdown);
    assert_eq!(c.ssh_key, "");

    // A YAML null is an absent key, as in the installer's decoder.
    let c = parse_installation_config(&format!("{}extraPartitionStart:\n", base())).unwrap();
    assert_eq!(c.extra_partition_start(), "-40G");
}

#[test]
fn accessors() {
    let c = parse_installation_config(&format!(
        "{}imageDigestSources: [{{source: quay.io/a, mirrors: [m.lab/a]}}]\n\
         ignitionConfigOverride: '{{\"ignition\":{{\"version\":\"3.2.0\"}}}}'\n\
         networkConfig: {{interfaces: [{{type: ethernet, name: eth0, state: up}}]}}\n",
        base()
    ))
    .unwrap();
    assert_eq!(c.image_digest_sources()[0].mirrors, ["m.lab/a"]);
    assert_eq!(
        c.ignition_config_override(),
        Some(r#"{"ignition":{"version":"3.2.0"}}"#)
    );
    assert_eq!(
        c.canonical_network_config().unwrap().as_deref(),
        Some("interfaces:\n- name: eth0\n  state: up\n  type: ethernet\n")
    );
}

#[test]
fn strict_decoding() {
    let c = parse_installation_config(&format!(
        "apiVersion: v1beta1\nkind: ImageBasedInstallationConfig\nmetadata: {{name: x}}\n{}",
        base()
    ));
    assert!(c.is_ok(), "{c:?}");
    for key in [
        "imageContentSources",
        "useContainersFolder",
        "rhcosLiveIso",
        "nmStateConfig",
    ] {
        let err = parse_installation_config(&format!("{}{key}: x\n", base())).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "image-based-installation-config.yaml: unknown field `{key}`, expected one of `apiVersion`"
            )),
            "{msg}"
        );
        assert!(msg.ends_with(" at line 5 column 1"), "{msg}");
    }
    let err = parse_installation_config("extraPartitionNumber: -1\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "image-based-installation-config.yaml: extraPartitionNumber: invalid type: integer `-1`, expected u32 at line 1 column 23"
    );
    assert_eq!(
        parse_installation_config("# nothing\n")
            .unwrap_err()
            .to_string(),
        "image-based-installation-config.yaml: the file is empty"
    );
}

#[test]
fn findings_never_repeat_secrets() {
    let cases = [
        (
            "pullSecret: '{\"auths\":{\"quay.io\":{\"auth\":\"c2VjcmV0\"}}}'",
            "c2VjcmV0",
        ),
        (
            "pullSecret: '{\"auths\":{\"quay.io\":{\"auth\":\"c2VjcmV0\",\"x\":[hunter2]}}}'",
            "hunter2",
        ),
        ("pullSecret: '{\"auths\": hunter2}'", "hunter2"),
        ("ignitionConfigOverride: '{\"passwd\": hunter2}'", "hunter2"),
        ("proxy: {httpProxy: 'ftp://user:hunter2@p:21'}", "hunter2"),
    ];
    for (patch, secret) in cases {
        let (f, w) = run(patch);
        assert!(!f.is_empty() || !w.is_empty(), "{patch}");
        assert!(
            !f.iter().chain(&w).any(|m| m.contains(secret)),
            "{f:?} {w:?}"
        );
    }
}

fn write(dir: &Path, name: &str, content: &[u8]) {
    std::fs::write(dir.join(name), content).unwrap();
}

fn load_findings(dir: &Path) -> Vec<String> {
    let err = load_installation_inputs(dir).unwrap_err();
    render(&err.downcast_ref::<ValidationError>().unwrap().findings)
}

#[test]
fn load_reads_config_and_post_sh() {
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        base().as_bytes(),
    );
    let inputs = load_installation_inputs(tmp.path()).unwrap();
    assert_eq!(inputs.config.seed_version, "4.20.0");
    assert_eq!(inputs.post_sh, None);
    assert!(inputs.warnings.is_empty());

    write(tmp.path(), POST_SH_FILE, b"#!/bin/bash\necho done\n");
    let inputs = load_installation_inputs(tmp.path()).unwrap();
    assert_eq!(
        inputs.post_sh.as_deref(),
        Some(b"#!/bin/bash\necho done\n".as_slice())
    );
    assert!(
        tmp.path().join(POST_SH_FILE).exists(),
        "inputs are never deleted"
    );

    write(tmp.path(), POST_SH_FILE, b"echo done\n");
    let inputs = load_installation_inputs(tmp.path()).unwrap();
    assert_eq!(
        inputs.warnings,
        [
            "post.sh: has no #! line: lca-cli ibi runs it with `bash -c`, so it runs as a bash script"
        ]
    );
}

#[test]
fn load_reports_post_sh_problems() {
    let cases: &[(&[u8], &str)] = &[
        (
            b"",
            "post.sh: is empty: remove it, or give the script lca-cli ibi should run after restoring the seed",
        ),
        (
            b"#!/bin/bash\r\necho\r\n",
            "post.sh: the #! line ends with a carriage return (CRLF line endings): the interpreter would not be found",
        ),
    ];
    for (content, want) in cases {
        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            IMAGE_BASED_INSTALLATION_CONFIG_FILE,
            base().as_bytes(),
        );
        write(tmp.path(), POST_SH_FILE, content);
        assert_eq!(load_findings(tmp.path()), [*want]);
    }
    let tmp = tempfile::tempdir().unwrap();
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        base().as_bytes(),
    );
    std::fs::create_dir(tmp.path().join(POST_SH_FILE)).unwrap();
    assert_eq!(
        load_findings(tmp.path()),
        ["post.sh: must be a regular file (the post-deployment script)"]
    );
    std::fs::remove_dir(tmp.path().join(POST_SH_FILE)).unwrap();
    std::os::unix::fs::symlink("missing.sh", tmp.path().join(POST_SH_FILE)).unwrap();
    assert_eq!(
        load_findings(tmp.path()),
        ["post.sh: is a symbolic link to nothing"]
    );
}

#[test]
fn load_collects_findings_of_both_files() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().display();
    write(tmp.path(), POST_SH_FILE, b"");
    assert_eq!(load_findings(tmp.path()), [
        format!(
            "image-based-installation-config.yaml: file not found: {d}/image-based-installation-config.yaml is required (`ibi create image-config-template` writes a commented one)"
        ),
        "post.sh: is empty: remove it, or give the script lca-cli ibi should run after restoring the seed".to_string(),
    ]);
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        b"seedImage: x\nbogus: 1\n",
    );
    let f = load_findings(tmp.path());
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f[0].starts_with("image-based-installation-config.yaml: unknown field `bogus`"),
        "{f:?}"
    );
}

#[test]
fn status_url_rules() {
    check(&[
        ("statusURL: https://192.0.2.10:8443", &[]),
        ("statusURL: https://ibi.example/prefix/", &[]),
        (
            "statusURL: not a url",
            &[
                "statusURL: invalid value \"not a url\": not a URL (relative URL without a base); give the base URL of `ibi serve`, e.g. https://192.0.2.10:8443",
            ],
        ),
        (
            "statusURL: ftp://h",
            &["statusURL: invalid value \"ftp://h\": must be an https (or http) URL"],
        ),
        (
            "statusURL: https://u:MARKER@h",
            &[
                "statusURL: invalid value: must not carry credentials: the host sends its report token in a header",
            ],
        ),
        (
            "statusURL: https://h/?x=1",
            &[
                "statusURL: invalid value \"https://h/?x=1\": must not have a query or fragment: reports go to <statusURL>/reports",
            ],
        ),
        (
            "statusCA: ca.pem",
            &["statusCA: only used with statusURL: set statusURL or remove statusCA"],
        ),
        (
            "{statusURL: 'http://h:8080', statusCA: ca.pem}",
            &["statusCA: only used with an https statusURL: use https or remove statusCA"],
        ),
    ]);
    let (f, w) = run("statusURL: http://h:8080");
    assert!(f.is_empty(), "{f:?}");
    assert_eq!(
        w,
        [
            "image-based-installation-config.yaml: statusURL: is plain http: the reports and their token travel unencrypted; prefer https"
        ]
    );
}

#[test]
fn status_ca_is_read_from_its_file_or_inline_and_must_hold_a_certificate() {
    let tmp = tempfile::tempdir().unwrap();
    let key = openssl::pkey::PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap()).unwrap();
    let mut name = openssl::x509::X509NameBuilder::new().unwrap();
    name.append_entry_by_text("CN", "ibi serve").unwrap();
    let name = name.build();
    let mut b = openssl::x509::X509Builder::new().unwrap();
    b.set_version(2).unwrap();
    b.set_subject_name(&name).unwrap();
    b.set_issuer_name(&name).unwrap();
    let day = |n| openssl::asn1::Asn1Time::days_from_now(n).unwrap();
    b.set_not_before(&day(0)).unwrap();
    b.set_not_after(&day(1)).unwrap();
    b.set_pubkey(&key).unwrap();
    b.sign(&key, openssl::hash::MessageDigest::sha256())
        .unwrap();
    let pem = String::from_utf8(b.build().to_pem().unwrap()).unwrap();
    write(tmp.path(), "ca.pem", pem.as_bytes());
    let config = |ca: &str| {
        format!(
            "{}statusURL: https://192.0.2.10:8443\nstatusCA: {ca}\n",
            base()
        )
    };
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        config("ca.pem").as_bytes(),
    );
    let inputs = load_installation_inputs(tmp.path()).unwrap();
    assert_eq!(inputs.status_ca_pem.as_deref(), Some(pem.as_str()));
    let inline = config(&format!("|\n  {}", pem.trim_end().replace('\n', "\n  ")));
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        inline.as_bytes(),
    );
    let inputs = load_installation_inputs(tmp.path()).unwrap();
    assert_eq!(inputs.status_ca_pem.as_deref(), Some(pem.as_str()));
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        config("missing.pem").as_bytes(),
    );
    let f = load_findings(tmp.path());
    assert_eq!(
        f,
        [format!(
            "image-based-installation-config.yaml: statusCA: reading {}/missing.pem: No such file or directory (os error 2)",
            tmp.path().display()
        )]
    );
    write(tmp.path(), "bad.pem", b"not a certificate");
    write(
        tmp.path(),
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        config("bad.pem").as_bytes(),
    );
    assert_eq!(
        load_findings(tmp.path()),
        [
            "image-based-installation-config.yaml: statusCA: holds no PEM certificate: give the CA of ibi serve's certificate, as a file path or inline PEM"
        ]
    );
}

#[test]
fn the_placeholder_list_names_this_file_as_it_is() {
    assert_eq!(
        crate::config::placeholder::INSTALLATION_FILE,
        IMAGE_BASED_INSTALLATION_CONFIG_FILE
    );
}
