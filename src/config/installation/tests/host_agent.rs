//! Which agent reads the file: `hostAgent` and `hostAgentImage`, and with `hostAgent: lca` the keys
//! the seed's lca-cli predates.

use super::fixtures::*;
use crate::config::installation::*;

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
