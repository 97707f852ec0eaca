//! One table row per field rule, asserting the rendered finding: required keys, the rules shared with
//! the site files, the extra partition, coreosInstallerArgs, the other fields and ignitionConfigOverride.

use super::fixtures::*;

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
