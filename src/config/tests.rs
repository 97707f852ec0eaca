//! Tests of the whole config module: strict decoding, every install-config and image-based-config rule
//! (table-driven, asserting the rendered finding), and loading a site directory.

use serde_yaml_ng::{Mapping, Value};

use super::sshkey::tests::ed25519_key;
use super::*;

const CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBgzCCASmgAwIBAgIUQD8s4KvOQSDeEf5gwEgDd3z8ipQwCgYIKoZIzj0EAwIw
FjEUMBIGA1UEAwwLaWJpLXRlc3QtY2EwIBcNMjYxMTIxMDkwNDEyWhgPMjEyNjEw
MjgwOTA0MTJaMBYxFDASBgNVBAMMC2liaS10ZXN0LWNhMFkwEwYHKoZIzj0CAQYI
KoZIzj0DAQcDQgAEOHdvNgzcnL60hLh3jqQDI9Z6wp+dCgsNLTyOqz+6bfxWVUiM
LSpKqIMfdaR3ZXNTJ5HhdHwPLLzZA4Cf0nqi7qNTMFEwHQYDVR0OBBYEFKIzUY0K
46bwc2XTXCymwvaIHRU/MB8GA1UdIwQYMBaAFKIzUY0K46bwc2XTXCymwvaIHRU/
MA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDSAAwRQIgS32k06q9sLDfLhSQ
T9lcrnf+byumBFFL8J/sshsWFgYCIQDj747n22FTjiy+fsu0rj8W4eKqXmklV83R
qxs9/xvXHA==
-----END CERTIFICATE-----
";

pub(super) fn base_install_config() -> String {
    format!(
        r#"apiVersion: v1
metadata:
  name: sno
baseDomain: example.com
controlPlane:
  name: master
  replicas: 1
compute:
- name: worker
  replicas: 0
networking:
  networkType: OVNKubernetes
  machineNetwork:
  - cidr: 192.168.122.0/23
platform:
  none: {{}}
pullSecret: '{{"auths":{{"quay.io":{{"auth":"dXNlcjpwYXNz"}}}}}}'
sshKey: {}
"#,
        ed25519_key()
    )
}

pub(super) const BASE_IMAGE_BASED_CONFIG: &str = "hostname: sno1.example.com\n";

/// Replaces (or, with `null`, removes) top-level keys of `base` with those of `patch`.
pub(super) fn patched(base: &str, patch: &str) -> String {
    let mut doc: Mapping = serde_yaml_ng::from_str(base).unwrap();
    let patch: Mapping = serde_yaml_ng::from_str(patch).unwrap_or_default();
    for (k, v) in patch {
        if v.is_null() {
            doc.remove(&k);
        } else {
            doc.insert(k, v);
        }
    }
    serde_yaml_ng::to_string(&Value::Mapping(doc)).unwrap()
}

pub(super) fn render(findings: &[Finding]) -> Vec<String> {
    findings.iter().map(ToString::to_string).collect()
}

/// The findings and warnings of the base install-config with `patch` applied.
fn ic(patch: &str) -> (Vec<String>, Vec<String>) {
    let text = patched(&base_install_config(), patch);
    let c = parse_install_config(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (f, w) = validate_install_config(&c);
    (render(&f), w)
}

fn ibc(patch: &str) -> (Vec<String>, Vec<String>) {
    let text = patched(BASE_IMAGE_BASED_CONFIG, patch);
    let c = parse_image_based_config(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let (f, w) = validate_image_based_config(&c);
    (render(&f), w)
}

fn check_cases(run: fn(&str) -> (Vec<String>, Vec<String>), file: &str, cases: &[(&str, &[&str])]) {
    for (patch, want) in cases {
        let want: Vec<String> = want.iter().map(|w| format!("{file}: {w}")).collect();
        assert_eq!(run(patch).0, want, "patch: {patch}");
    }
}

#[test]
fn install_config_identity_and_topology_rules() {
    let long = "a".repeat(63);
    let long_domain = format!("baseDomain: {}.com", vec!["b".repeat(60); 4].join("."));
    let long_name = format!("metadata: {{name: {long}}}");
    let cases: &[(&str, &[&str])] = &[
        ("", &[]),
        (
            "apiVersion: v2",
            &["apiVersion: unsupported value \"v2\": must be \"v1\""],
        ),
        (
            "apiVersion: null",
            &["apiVersion: required: must be \"v1\""],
        ),
        (
            "metadata: null",
            &["metadata.name: required: the cluster name"],
        ),
        (
            "metadata: {name: SNO}",
            &[
                "metadata.name: invalid value \"SNO\": must be a DNS-1123 label (lower-case alphanumerics and '-', at most 63 characters)",
            ],
        ),
        (
            "baseDomain: null",
            &["baseDomain: required: the base domain of the cluster"],
        ),
        ("baseDomain: example.com.", &[]),
        (
            "baseDomain: ex_ample.com",
            &[
                "baseDomain: invalid value \"ex_ample.com\": must be a DNS-1123 subdomain (lower-case alphanumerics, '-' and '.'; a trailing dot is allowed)",
            ],
        ),
        (&long_name, &[]),
        (&long_domain, &[]),
        (
            "controlPlane: {replicas: 3}",
            &["controlPlane.replicas: only single-node OpenShift is supported, found 3"],
        ),
        (
            "controlPlane: null",
            &["controlPlane.replicas: only single-node OpenShift is supported, found 3"],
        ),
        (
            "controlPlane: {name: boss, replicas: 1}",
            &["controlPlane.name: unsupported value \"boss\": must be \"master\""],
        ),
        (
            "compute: null",
            &[
                "compute: compute replicas must be 0 for single-node OpenShift, found 3 (the default when compute is omitted)",
            ],
        ),
        (
            "compute: [{name: worker, replicas: 2}]",
            &["compute[0].replicas: must be 0 for single-node OpenShift, found 2"],
        ),
        (
            "compute: [{name: worker}]",
            &[
                "compute[0].replicas: must be 0 for single-node OpenShift, found 3 (the default when replicas is omitted)",
            ],
        ),
        (
            "platform: {aws: {region: us-east-1}}",
            &["platform: only \"none\" is supported, found \"aws\""],
        ),
        (
            "platform: {none: {}, baremetal: {}}",
            &["platform: only \"none\" is supported, found \"baremetal\""],
        ),
        (
            "platform: null",
            &["platform: required: only \"none\" is supported (platform: {none: {}})"],
        ),
        ("featureSet: Default", &[]),
        (
            "featureSet: TechPreviewNoUpgrade",
            &[
                "featureSet: unsupported value \"TechPreviewNoUpgrade\": only \"Default\" is supported",
            ],
        ),
    ];
    check_cases(ic, INSTALL_CONFIG_FILE, cases);
    let both = format!("{long_name}\n{long_domain}");
    let (f, _) = ic(&both);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].contains("must be a DNS-1123 subdomain of at most 253 characters"),
        "{f:?}"
    );
}

/// The installer accepts any `auth` string; ibi warns, naming the registry and never the value, when
/// the container tools could not log in with it.
#[test]
fn pull_secret_auths_that_are_not_user_password_only_warn() {
    let warning = |registry: &str| {
        format!(
            "install-config.yaml: pullSecret: the auth of \"{registry}\" is not base64 of \"user:password\": accepted, as the installer does, but podman, skopeo and lca-cli cannot log in to \"{registry}\" with it"
        )
    };
    // The installer's own fixture ("super-secret\n"), a bare user, a token, not base64 at all.
    for auth in [
        "c3VwZXItc2VjcmV0Cg==",
        "dXNlcg==",
        "OjpwYXNz",
        "%%%not-base64",
    ] {
        let patch = format!(
            "pullSecret: '{{\"auths\":{{\"quay.io\":{{\"auth\":\"{auth}\"}},\"r.lab\":{{\"auth\":\"dTpw\"}}}}}}'"
        );
        let (f, w) = ic(&patch);
        assert_eq!(f, Vec::<String>::new(), "{auth}");
        assert_eq!(w, [warning("quay.io")], "{auth}");
        assert!(!w[0].contains(auth), "{w:?}");
    }
    let (f, w) = ic("pullSecret: '{\"auths\":{\"quay.io\":{\"auth\":\"dTpw\"}}}'");
    assert!(f.is_empty() && w.is_empty(), "{f:?} {w:?}");
}

#[test]
fn install_config_networking_rules() {
    let cases: &[(&str, &[&str])] = &[
        (
            "networking: {machineNetwork: [{cidr: 10.0.0.0/16}, {cidr: 10.1.0.0/16}]}",
            &[
                "networking.machineNetwork: 10.0.0.0/16 and 10.1.0.0/16 are both IPv4: give at most one machine network per IP family (lifecycle-agent 4.20+ requires one per node IP, of its family)",
            ],
        ),
        (
            "networking: {machineNetwork: [{cidr: 'fd00::/64'}, {cidr: 'fd01::/64'}]}",
            &[
                "networking.machineNetwork: fd00::/64 and fd01::/64 are both IPv6: give at most one machine network per IP family (lifecycle-agent 4.20+ requires one per node IP, of its family)",
            ],
        ),
        (
            "networking: {machineNetwork: [{cidr: 'fd00::/64'}, {cidr: 10.0.0.0/16}]}",
            &[],
        ),
        (
            "networking: {machineNetwork: [{cidr: 192.168.122.0/23}, {cidr: 'fd00::/64'}]}",
            &[],
        ),
        ("networking: {machineCIDR: 10.0.0.0/16}", &[]),
        (
            "networking: {networkType: OpenShiftSDN, machineNetwork: [{cidr: 10.0.0.0/16}]}",
            &[
                "networking.networkType: unsupported value \"OpenShiftSDN\": only \"OVNKubernetes\" is supported",
            ],
        ),
        (
            "networking: {type: Calico, machineNetwork: [{cidr: 10.0.0.0/16}]}",
            &[
                "networking.networkType: unsupported value \"Calico\": only \"OVNKubernetes\" is supported",
            ],
        ),
        (
            "networking: null",
            &[
                "networking.machineNetwork: at least one entry is required: lifecycle-agent needs the machine networks to match the node IPs (one network per IP family)",
            ],
        ),
        (
            "networking: {machineNetwork: [{cidr: 10.0.0.0/16}, {cidr: 10.1.0.0/16}, {cidr: 10.2.0.0/16}]}",
            &["networking.machineNetwork: too many: 3: must have at most 2 items"],
        ),
        (
            "networking: {machineNetwork: [{cidr: 10.0.0.0/16}, {cidr: 10.1.0.1/16}]}",
            &[
                "networking.machineNetwork[1].cidr: invalid network address \"10.1.0.1/16\": expected 10.1.0.0/16",
            ],
        ),
        (
            "networking: {machineNetwork: [{cidr: 10.0.0.0/16}], clusterNetwork: [{cidr: 10.128.0.0/33, hostPrefix: 23}], serviceNetwork: [nope]}",
            &[
                "networking.clusterNetwork[0].cidr: invalid CIDR \"10.128.0.0/33\": invalid prefix length \"33\" (0-32)",
                "networking.serviceNetwork[0]: invalid CIDR \"nope\": not in CIDR notation (address/prefix)",
            ],
        ),
        (
            "networking: {machineNetwork: [{cidr: 172.30.0.0/24}], serviceNetwork: [172.30.0.0/16]}",
            &[
                "networking.machineNetwork[0].cidr: 172.30.0.0/24 overlaps with networking.serviceNetwork[0] (172.30.0.0/16)",
            ],
        ),
    ];
    check_cases(ic, INSTALL_CONFIG_FILE, cases);
}

#[test]
fn install_config_secret_and_trust_rules() {
    let ca = format!("additionalTrustBundle: {CA_PEM:?}");
    let key_block = format!(
        "additionalTrustBundle: {:?}",
        format!("{CA_PEM}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
    );
    let cases: &[(&str, &[&str])] = &[
        (
            "pullSecret: null",
            &["pullSecret: required: the pull secret for the release and seed registries"],
        ),
        (
            "pullSecret: 'nope'",
            &["pullSecret: not valid JSON: expected ident at line 1 column 2"],
        ),
        (
            "pullSecret: '{\"auths\":{}}'",
            &["pullSecret: auths required: a non-empty \"auths\" map"],
        ),
        (
            "pullSecret: '{\"auths\":{\"quay.io\":{}}}'",
            &["pullSecret: \"quay.io\" requires either auth or credsStore"],
        ),
        (
            "pullSecret: '{\"auths\":{\"quay.io\":{\"credsStore\":\"x\"}}}'",
            &[],
        ),
        (
            "pullSecret: '{\"auths\":{\"quay.io\":{\"auth\":5}}}'",
            &["pullSecret: the auth of \"quay.io\" must be a string"],
        ),
        ("sshKey: null", &[]),
        (
            "sshKey: 'ssh-rsa'",
            &["sshKey: line 1: ssh-rsa key has no key data"],
        ),
        (
            "sshKey: 'hello world'",
            &["sshKey: line 1: no key type (ssh-ed25519, ssh-rsa, ...) where the line starts"],
        ),
        (
            "sshKey: 'ssh-rsaa AAAA'",
            &["sshKey: line 1: unknown key type \"ssh-rsaa\""],
        ),
        (&ca, &[]),
        (
            "additionalTrustBundle: 'not pem'",
            &["additionalTrustBundle: no PEM CERTIFICATE block found"],
        ),
        (
            &key_block,
            &["additionalTrustBundle: PEM block 2 is a \"PRIVATE KEY\", not a CERTIFICATE"],
        ),
        ("additionalTrustBundlePolicy: Always", &[]),
        ("additionalTrustBundlePolicy: Proxyonly", &[]),
        (
            "additionalTrustBundlePolicy: Sometimes",
            &[
                "additionalTrustBundlePolicy: unsupported value \"Sometimes\": supported values are \"Proxyonly\", \"Always\"",
            ],
        ),
    ];
    check_cases(ic, INSTALL_CONFIG_FILE, cases);
    let bad_cert = "additionalTrustBundle: \"-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END CERTIFICATE-----\\n\"";
    let (f, _) = ic(bad_cert);
    assert_eq!(f.len(), 1);
    assert!(f[0].starts_with("install-config.yaml: additionalTrustBundle: PEM block 1 is not a valid X.509 certificate: "), "{f:?}");
    assert!(
        !f[0].contains("crypto/") && !f[0].contains("error:"),
        "OpenSSL internals leak: {f:?}"
    );
}

#[test]
fn install_config_proxy_rules() {
    let cases: &[(&str, &[&str])] = &[
        (
            "proxy: {httpProxy: 'http://proxy.example.com:3128', httpsProxy: 'https://u:p@proxy.example.com', noProxy: '.example.com,10.0.0.0/8,10.1.2.3,fd00::1'}",
            &[],
        ),
        (
            "proxy: {httpsProxy: 'http://proxy:3128', noProxy: '*'}",
            &[],
        ),
        (
            "proxy: {noProxy: example.com}",
            &["proxy: must include httpProxy or httpsProxy"],
        ),
        (
            "proxy: {httpProxy: 'https://proxy:3128'}",
            &["proxy.httpProxy: unsupported scheme: supported values are \"http\""],
        ),
        (
            "proxy: {httpsProxy: 'socks5://proxy:1080'}",
            &["proxy.httpsProxy: unsupported scheme: supported values are \"http\", \"https\""],
        ),
        (
            "proxy: {httpProxy: localhost}",
            &["proxy.httpProxy: not a URL: expected scheme://host[:port]"],
        ),
        (
            "proxy: {httpProxy: 'http://:3128'}",
            &["proxy.httpProxy: not a URL: missing host"],
        ),
        (
            "proxy: {httpProxy: 'http://p:3128', noProxy: '*.example.com,ok.com'}",
            &[
                "proxy.noProxy: element 0 \"*.example.com\" must be an IP, a CIDR or a domain without wildcard characters",
            ],
        ),
        (
            "proxy: {httpProxy: 'http://p:3128', noProxy: 'a.com, b.com'}",
            &["proxy.noProxy: must not contain spaces"],
        ),
    ];
    check_cases(ic, INSTALL_CONFIG_FILE, cases);
}

#[test]
fn install_config_mirror_rules() {
    let cases: &[(&str, &[&str])] = &[
        (
            "imageDigestSources: [{source: quay.io/openshift-release-dev/ocp-release, mirrors: ['registry.lab:5000/ocp4/release', 'registry.lab:5000'], sourcePolicy: NeverContactSource}]",
            &[],
        ),
        (
            "imageDigestSources: [{source: 'quay.io/ocp/release:4.16', mirrors: [registry.lab/ocp, 'Registry.lab.redhat.com:5000']}]",
            &[
                "imageDigestSources[0].source: invalid value \"quay.io/ocp/release:4.16\": must be repository--not reference",
                "imageDigestSources[0].mirrors[1]: invalid value \"Registry.lab.redhat.com:5000\": failed to parse: invalid reference format: repository name must be lowercase",
            ],
        ),
        (
            "imageDigestSources: [{source: '', mirrors: []}]",
            &["imageDigestSources[0].source: required"],
        ),
        (
            "imageDigestSources: [{source: quay.io/ocp, sourcePolicy: Maybe}]",
            &[
                "imageDigestSources[0].sourcePolicy: unsupported value \"Maybe\": supported values are \"AllowContactingSource\", \"NeverContactSource\"",
            ],
        ),
        (
            "imageContentSources: [{source: quay.io/ocp, mirrors: [registry.lab/ocp]}]",
            &[],
        ),
        (
            "imageContentSources: [{source: 'quay.io/ocp@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef'}]",
            &[
                "imageContentSources[0].source: invalid value \"quay.io/ocp@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\": must be repository--not reference",
            ],
        ),
        (
            "imageContentSources: [{source: quay.io/ocp}]\nimageDigestSources: [{source: quay.io/ocp}]",
            &[
                "imageContentSources: cannot be set together with imageDigestSources: use imageDigestSources only",
            ],
        ),
    ];
    check_cases(ic, INSTALL_CONFIG_FILE, cases);
}

#[test]
fn install_config_warnings() {
    let (f, w) = ic(
        "controlPlane: {name: master, replicas: 1, hyperthreading: Disabled, platform: {none: {}}}\n\
                     fips: true\nimageContentSources: [{source: quay.io/ocp}]\n\
                     networking: {machineNetwork: [{cidr: 10.0.0.0/16}], clusterNetwork: [{cidr: 10.128.0.0/14, hostPrefix: 23}]}",
    );
    assert_eq!(f, Vec::<String>::new());
    assert_eq!(
        w,
        [
            "install-config.yaml: controlPlane.hyperthreading: \"Disabled\" is ignored: the seed image determines hyperthreading",
            "install-config.yaml: controlPlane.platform: is ignored: there are no machine sets to configure",
            "install-config.yaml: imageContentSources: is deprecated: use imageDigestSources",
            "install-config.yaml: networking.clusterNetwork: is ignored: the seed image determines it",
            "install-config.yaml: fips: is ignored: the seed image determines it",
        ]
    );
}

#[test]
fn install_config_strict_decoding() {
    let err = parse_install_config(&format!("{}foo: 1\n", base_install_config())).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("install-config.yaml: unknown field `foo`, expected one of `apiVersion`"),
        "{msg}"
    );
    assert!(msg.ends_with(" at line 19 column 1"), "{msg}");

    let err = parse_install_config("controlPlane:\n  replicas: one\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "install-config.yaml: controlPlane.replicas: invalid type: string (value not shown), expected i64 at line 2 column 13"
    );
    let err =
        parse_install_config("networking:\n  machineNetwork:\n  - cidr: 10.0.0.0/8\n    cdir: x\n")
            .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("install-config.yaml: networking.machineNetwork[0]: unknown field `cdir`"),
        "{err}"
    );
    assert_eq!(
        parse_install_config("# nothing\n").unwrap_err().to_string(),
        "install-config.yaml: the file is empty"
    );
    assert!(
        parse_install_config("a: [")
            .unwrap_err()
            .to_string()
            .starts_with("install-config.yaml: not valid YAML: ")
    );
}

/// An install-config as `openshift-install` users write them, with fields ibi ignores.
const FULL_INSTALLER_FILE: &str = r#"apiVersion: v1
kind: InstallConfig
metadata:
  name: sno
  namespace: default
  creationTimestamp: null
baseDomain: example.com
additionalTrustBundlePolicy: Proxyonly
bootstrapInPlace:
  installationDisk: /dev/sda
capabilities:
  baselineCapabilitySet: None
  additionalEnabledCapabilities: [marketplace]
compute:
- architecture: amd64
  hyperthreading: Enabled
  name: worker
  platform: {}
  replicas: 0
controlPlane:
  architecture: amd64
  hyperthreading: Enabled
  name: master
  platform: {}
  replicas: 1
cpuPartitioningMode: AllNodes
credentialsMode: ""
featureSet: Default
featureGates: []
fips: false
networking:
  clusterNetwork:
  - cidr: 10.128.0.0/14
    hostPrefix: 23
  clusterNetworkMTU: 1400
  machineNetwork:
  - cidr: 192.168.122.0/23
  networkType: OVNKubernetes
  ovnKubernetesConfig:
    ipv4:
      internalJoinSubnet: 100.65.0.0/16
  serviceNetwork:
  - 172.30.0.0/16
operatorPublishingStrategy:
  ingress: External
platform:
  none: {}
publish: External
pullSecret: '{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}'
"#;

#[test]
fn full_installer_file_is_accepted() {
    let c = parse_install_config(FULL_INSTALLER_FILE).unwrap();
    let (f, w) = validate_install_config(&c);
    assert_eq!(f, vec![]);
    assert_eq!(w.len(), 6, "{w:?}");
    assert_eq!(c.metadata.name, "sno");
    assert_eq!(c.additional_trust_bundle_policy, "Proxyonly");
    assert_eq!(c.proxy, None);
    assert_eq!(c.image_digest_sources(), None);
}

#[test]
fn install_config_accessors() {
    let text = patched(
        &base_install_config(),
        "networking: {machineNetwork: [{cidr: 192.168.122.0/23}, {cidr: '2001:DB8::/32'}]}\n\
         imageContentSources: [{source: quay.io/ocp, mirrors: [m.lab/ocp]}]\n\
         proxy: {httpProxy: 'http://p:3128', noProxy: .lab}",
    );
    let c = parse_install_config(&text).unwrap();
    assert_eq!(
        c.machine_network_cidrs(),
        ["192.168.122.0/23", "2001:db8::/32"]
    );
    assert_eq!(c.additional_trust_bundle_policy, "");
    assert_eq!(
        c.image_digest_sources(),
        Some(vec![ImageDigestSource {
            source: "quay.io/ocp".into(),
            mirrors: vec!["m.lab/ocp".into()],
            source_policy: None
        }])
    );
    let proxy = serde_json::to_string(&c.proxy).unwrap();
    assert_eq!(proxy, r#"{"httpProxy":"http://p:3128","noProxy":".lab"}"#);
}

#[test]
fn image_based_config_rules() {
    let cases: &[(&str, &[&str])] = &[
        ("", &[]),
        (
            "additionalNTPSources: [10.0.0.1, 'fd00::1', ntp.example.com, ntp.example.com.]",
            &[],
        ),
        (
            "additionalNTPSources: [ok.example.com, 'bad host']",
            &[
                "additionalNTPSources[1]: invalid value \"bad host\": NTP server is not a valid IP or domain name",
            ],
        ),
        (
            "hostname: localhost",
            &["hostname: \"localhost\" is not allowed: lifecycle-agent rejects it"],
        ),
        (
            "hostname: Node_1",
            &[
                "hostname: invalid value \"Node_1\": must be a DNS-1123 subdomain (lower-case alphanumerics, '-' and '.')",
            ],
        ),
        (
            "nodeLabels: {node-role.kubernetes.io/edge: '', example.com/site: A_b.c-1, plain: x}",
            &[],
        ),
        (
            "nodeLabels: {'Bad_Prefix/x': ok}",
            &[
                "nodeLabels.Bad_Prefix/x: invalid label key \"Bad_Prefix/x\": the prefix must be a DNS-1123 subdomain (lower case, at most 253 characters)",
            ],
        ),
        (
            "nodeLabels: {'example.com/': ok}",
            &[
                "nodeLabels.example.com/: invalid label key \"example.com/\": the name must be 1-63 characters: alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
            ],
        ),
        (
            "nodeLabels: {site: '-x'}",
            &[
                "nodeLabels.site: invalid label value \"-x\": at most 63 characters, alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
            ],
        ),
        ("cluster_id: 3C3E2F63-9ff4-4f0e-a0b3-5a1a1bb0b4e1", &[]),
        (
            "cluster_id: not-a-uuid",
            &[
                "cluster_id: invalid value \"not-a-uuid\": must be a UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), as ClusterVersion requires",
            ],
        ),
        ("infra_id: sno-x7k2p", &[]),
        (
            "infra_id: sno-",
            &[
                "infra_id: invalid value \"sno-\": at most 27 characters of a-z, 0-9 and '-', not starting or ending with '-'",
            ],
        ),
        (
            "infra_id: abcdefghijklmnopqrstuvwxyz01",
            &[
                "infra_id: invalid value \"abcdefghijklmnopqrstuvwxyz01\": at most 27 characters of a-z, 0-9 and '-', not starting or ending with '-'",
            ],
        ),
        (
            "networkConfig: {interfaces: [{name: eth0, type: ethernet, state: up}]}",
            &[],
        ),
        (
            "networkConfig: {interfaces: [{name: eth0, type: ethernet, state: up, ipv4: {enabled: true, address: [{ip: 10.0.0.2, prefix-length: 99}]}}]}",
            &[
                "networkConfig: InvalidArgument: Invalid IPv4 network prefix length '99', should be in the range of 0 to 32",
            ],
        ),
        (
            "networkConfig: {interfaces: [{name: eth0, type: ethernet, state: up, ipv6: {enabled: true, address: [{ip: 'fd00::zz', prefix-length: 64}]}}]}",
            &[
                "networkConfig: InvalidArgument: Invalid YAML string: interfaces: invalid IP address syntax",
            ],
        ),
        (
            "networkConfig: {bogus: 1}",
            &[
                "networkConfig: InvalidArgument: Invalid YAML string: unknown field `bogus`, expected one of `description`, `hostname`, `dns-resolver`, `route-rules`, `routes`, `interfaces`, `ovs-db`, `ovn`",
            ],
        ),
    ];
    check_cases(ibc, IMAGE_BASED_CONFIG_FILE, cases);
}

#[test]
fn image_based_config_decoding_and_warnings() {
    let c = parse_image_based_config(
        "apiVersion: v1beta1\nkind: ImageBasedConfig\nmetadata: {name: x}\n",
    )
    .unwrap();
    let (f, w) = validate_image_based_config(&c);
    assert_eq!(f, vec![]);
    assert_eq!(
        w,
        [
            "image-based-config.yaml: hostname: not set: lifecycle-agent keeps the host's current name, and fails if that is \"localhost\""
        ]
    );
    assert_eq!(
        parse_image_based_config("# all defaults\n").unwrap(),
        ImageBasedConfig::default()
    );
    let err = parse_image_based_config("hostname: a\nclusterId: x\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("image-based-config.yaml: unknown field `clusterId`, expected one of"),
        "{err}"
    );
    assert!(err.to_string().ends_with("at line 2 column 1"), "{err}");
    let err = parse_image_based_config("additionalNTPSources: pool.ntp.org\n").unwrap_err();
    assert!(
        err.to_string()
            .contains("additionalNTPSources: invalid type: string"),
        "{err}"
    );
}

#[test]
fn canonical_network_config_is_sorted_and_stable() {
    let c = parse_image_based_config(
        "networkConfig:\n  routes: {config: []}\n  interfaces:\n  - type: ethernet\n    name: eth0\n    state: up\n",
    )
    .unwrap();
    let want = "interfaces:\n- name: eth0\n  state: up\n  type: ethernet\nroutes:\n  config: []\n";
    assert_eq!(c.canonical_network_config().unwrap().as_deref(), Some(want));
    assert_eq!(
        parse_image_based_config("hostname: a\n")
            .unwrap()
            .canonical_network_config()
            .unwrap(),
        None
    );
}

/// The nmstate YAML ibi writes (raw_nm_state_config, the live ISO's network-config.yaml) quotes what a
/// YAML 1.1 reader would take for a boolean; nmstate still accepts it.
#[test]
fn canonical_network_config_quotes_yaml11_booleans() {
    let c = parse_image_based_config(
        "networkConfig:\n  interfaces:\n  - name: eth0\n    type: ethernet\n    state: up\n    description: 'no'\n  - name: 'y'\n    type: dummy\n    state: up\n",
    )
    .unwrap();
    let yaml = c.canonical_network_config().unwrap().unwrap();
    assert_eq!(
        yaml,
        "interfaces:\n- description: 'no'\n  name: eth0\n  state: up\n  type: ethernet\n- name: 'y'\n  state: up\n  type: dummy\n"
    );
    let (f, _) = validate_image_based_config(&c);
    assert!(f.is_empty(), "{f:?}");
}

#[test]
fn validation_error_display() {
    let e = ValidationError {
        findings: vec![
            Finding {
                file: "a.yaml".into(),
                field: "x.y".into(),
                message: "bad".into(),
                line: None,
            },
            Finding {
                file: "b.yaml".into(),
                field: String::new(),
                message: "worse".into(),
                line: None,
            },
        ],
    };
    assert_eq!(e.to_string(), "a.yaml: x.y: bad\nb.yaml: worse");
}

#[test]
fn findings_never_repeat_secrets() {
    let cases = [
        (
            "pullSecret: '{\"auths\":{\"quay.io\":{\"auth\":\"c2VjcmV0\"}}}'",
            "c2VjcmV0",
        ),
        ("pullSecret: '{\"auths\": hunter2}'", "hunter2"),
        ("proxy: {httpProxy: 'http://user:hunter2@:3128'}", "hunter2"),
        (
            "proxy: {httpsProxy: 'ftp://user:hunter2@proxy:21'}",
            "hunter2",
        ),
    ];
    for (patch, secret) in cases {
        let (f, w) = ic(patch);
        // The first case is a warning now (the installer accepts it); the others are findings.
        assert!(!f.is_empty() || !w.is_empty(), "{patch}");
        assert!(
            !f.iter().chain(&w).any(|m| m.contains(secret)),
            "{f:?} {w:?}"
        );
    }
}
