//! The `image-based-installation-config.yaml` template printed by `ibi create image-config-template`: the
//! installer's template byte for byte, followed by every other field, commented out, with what it does, its
//! default and who consumes it.
//!
//! Like the installer's, the template does not validate as written: `pullSecret` and `seedImage` are
//! placeholders ([`super::placeholder`]), so a forgotten value is caught when the ISO is built, not on
//! the factory floor.

/// The installer's `create image-config-template` output (golden file `image-config-template.txt`); a macro
/// so `concat!` can join it with [`more_fields!`] into one `const`.
macro_rules! installer_template {
    () => {
        concat!(
        r#"#
# Note: This is a sample ImageBasedInstallationConfig file showing
# which fields are available to aid you in creating your
# own image-based-installation-config.yaml file.
#
apiVersion: v1beta1
kind: ImageBasedInstallationConfig
metadata:
  name: example-image-based-installation-config
# The following fields are required
seedImage: "#,
        $crate::config::placeholder::seed_image!(),
        r#"
seedVersion: 4.16.0
installationDisk: /dev/vda
pullSecret: '"#,
        $crate::config::placeholder::pull_secret!(),
        r#"'
# networkConfig is optional and contains the network configuration for the host in NMState format.
# See https://nmstate.io/examples.html for examples.
# networkConfig:
#   interfaces:
#     - name: eth0
#       type: ethernet
#       state: up
#       mac-address: "#,
        $crate::config::placeholder::mac_address!(),
        r#"
#       ipv4:
#         enabled: true
#         address:
#           - ip: 192.168.122.2
#             prefix-length: 23
#         dhcp: false
"#
        )
    };
}

/// The fields the installer's template leaves out, and what the required ones mean.
macro_rules! more_fields {
    () => {
        r#"#
# About the fields above. `ibi create image` reads this file and writes
# rhcos-ibi.iso, a CoreOS live ISO whose Ignition config runs `lca-cli ibi`
# from the seed image (by default: see hostAgent below); lca-cli ibi installs
# RHCOS to installationDisk and restores the seed into it. apiVersion, kind
# and metadata are ignored.
# - seedImage is the seed OCI image (a pullspec, or oci:/path/to/layout:tag
#   for an OCI layout on this machine). ibi checks it at build time and pins
#   it by digest; lca-cli ibi pulls it. Required.
# - seedVersion must equal the seed's OpenShift version; it also names the
#   ostree stateroot. Checked by ibi and lca-cli ibi. Required.
# - installationDisk is the absolute path of the target disk, passed to
#   `coreos-installer install` by lca-cli ibi. Prefer a stable name such as
#   /dev/disk/by-id/wwn-... Required.
# - pullSecret is the registry auth file (JSON) for the seed and release
#   images, used by ibi's seed checks and by podman on the live ISO. Required.
# - networkConfig (above) is applied on the live ISO with `nmstatectl apply`
#   before the installation starts; it does not configure the installed
#   cluster (that is image-based-config.yaml). ibi checks it like
#   `nmstatectl gc`. Default: none (DHCP).
#
# sshKey is an authorized_keys line for the live ISO's `core` user, to watch
# the installation. Default: none.
# sshKey: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA user@example.com
#
# additionalTrustBundle holds PEM CA certificates the live ISO trusts (written
# to /etc/pki/ca-trust/source/anchors/), e.g. for a mirror registry; ibi's
# seed checks trust them too. Default: none.
# additionalTrustBundle: |
#   -----BEGIN CERTIFICATE-----
#   <your CA certificate>
#   -----END CERTIFICATE-----
#
# proxy sets HTTP_PROXY, HTTPS_PROXY and NO_PROXY for lca-cli ibi and its
# podman pulls on the live ISO. httpProxy or httpsProxy is required when set.
# Default: none.
# proxy:
#   httpProxy: http://proxy.example.com:3128
#   httpsProxy: http://proxy.example.com:3128
#   noProxy: .example.com,192.168.122.0/23
#
# imageDigestSources are mirrors written to the live ISO's
# /etc/containers/registries.conf, used by podman and by lca-cli ibi's
# precaching; ibi's seed checks use them too. Sources and mirrors are
# repositories (no tag or digest). Default: none.
# imageDigestSources:
#   - source: quay.io/openshift-release-dev/ocp-release
#     mirrors:
#       - registry.example.com:5000/ocp4/openshift4
#   - source: quay.io/openshift-release-dev/ocp-v4.0-art-dev
#     mirrors:
#       - registry.example.com:5000/ocp4/openshift4
#
# releaseRegistry is the registry lca-cli ibi pulls the precached release
# images from, in place of the seed's registry when that is not mirrored.
# Default: none (the seed's registry).
# releaseRegistry: registry.example.com:5000
#
# extraPartitionStart, extraPartitionLabel and extraPartitionNumber describe
# the partition lca-cli ibi adds after the RHCOS ones for /var/lib/containers.
# The start is '0' or [+-]<number><K|M|G|T|P>: a negative value makes the
# partition that size at the end of the disk, a positive one is its start
# offset. The label must match the partition label the seed mounts at
# /var/lib/containers (ibi checks it against the seed). The number is the
# partition's index on the disk. Defaults: -40G, var-lib-containers, 5.
# extraPartitionStart: -40G
# extraPartitionLabel: var-lib-containers
# extraPartitionNumber: 5
#
# shutdown makes lca-cli ibi power the host off when it is done (instead of
# leaving the live ISO running). Default: false.
# shutdown: false
#
# skipDiskCleanup makes lca-cli ibi skip wiping installationDisk (LVM, RAID,
# device-mapper and filesystem signatures) before installing. Default: false.
# skipDiskCleanup: false
#
# coreosInstallerArgs are appended by lca-cli ibi to `coreos-installer install
# <installationDisk>`. Only --append-karg, --delete-karg, --save-partlabel and
# --save-partindex are allowed, each followed by its value as the next element.
# Kernel arguments given here apply to the installed system. Default: none.
# coreosInstallerArgs:
#   - --append-karg
#   - console=ttyS0,115200n8
#
# ignitionConfigOverride is an Ignition config (JSON, spec 3.0.0 to 3.4.0) that
# ibi merges over the live ISO's generated config. Default: none.
# ignitionConfigOverride: '{"ignition":{"version":"3.2.0"},"storage":{"files":[{"path":"/etc/motd","contents":{"source":"data:,factory%20install%0A"},"mode":420}]}}'
#
# architecture selects the CoreOS live ISO ibi starts from, and must match the
# seed image's architecture (ibi checks it): amd64 or arm64. Default: amd64.
# architecture: amd64
#
# precacheBestEffort and precacheDisabled are lca-cli ibi settings that
# openshift-install does not accept. precacheBestEffort lets the installation
# go on when some release images fail to precache; precacheDisabled skips
# precaching (the cluster then pulls them at first boot). ibi passes each to
# lca-cli ibi only when set. Default: unset (lca-cli ibi's false).
# precacheBestEffort: false
# precacheDisabled: false
#
# liveKernelArgs (not in openshift-install) are kernel arguments ibi appends
# to the live ISO's default ones, as `coreos-installer iso kargs modify
# --append` does. They affect the live boot only; use coreosInstallerArgs
# --append-karg for the installed system. Each element is one argument,
# without spaces. Default: none.
# liveKernelArgs:
#   - console=ttyS0,115200n8
#   - rd.neednet=1
#
# hostAgent (not in openshift-install): lca (default) runs the seed's lca-cli, ibi runs ibi agent install.
# hostAgent: ibi
# hostAgentImage (with hostAgent: ibi only): the image whose /usr/local/bin/ibi the live ISO copies and runs.
# hostAgentImage: quay.io/example/ibi:latest
#
# statusURL (not in openshift-install) is the base URL of `ibi serve` as the
# host reaches it: the host then reports its progress and result there, and
# its journal on failure (`ibi status` shows them). statusCA is the CA of the
# server's certificate, a PEM file path (relative to this directory) or inline
# PEM; without it the live ISO's trust store is used. Default: no reports.
# statusURL: https://192.0.2.10:8443
# statusCA: .ibi/serve-tls.crt
#
# A script named post.sh next to this file, if present, is copied to the live
# ISO and run by lca-cli ibi (with bash) after the seed is restored; a failure
# fails the installation.
"#
    };
}

/// A complete `image-based-installation-config.yaml` with every field explained; fill in the pull secret.
pub const IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE: &str =
    concat!(installer_template!(), more_fields!());

#[cfg(test)]
mod tests {
    use super::super::{parse_installation_config, validate_installation_config};
    use super::*;

    const PULL_SECRET: &str = r#"'{"auths":{"quay.io":{"auth":"dXNlcjpwYXNz"}}}'"#;
    const PLACEHOLDER: &str = "'<your-pull-secret>'";

    fn findings(text: &str) -> Vec<String> {
        let c = parse_installation_config(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let (f, w) = validate_installation_config(&c);
        assert_eq!(w, Vec::<String>::new());
        f.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn starts_with_the_installers_template() {
        assert!(IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE.starts_with(installer_template!()));
        assert!(installer_template!().ends_with("#         dhcp: false\n"));
    }

    #[test]
    fn parses_strictly_and_only_the_placeholder_is_a_finding() {
        let f = findings(IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("image-based-installation-config.yaml: pullSecret: not valid JSON")
        );
        let filled = IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE.replace(PLACEHOLDER, PULL_SECRET);
        assert_eq!(findings(&filled), Vec::<String>::new());
        let c = parse_installation_config(&filled).unwrap();
        assert_eq!(c.extra_partition_start(), "-40G");
        assert_eq!(c.architecture(), "amd64");
    }

    /// `# key: …` lines (camelCase keys) and the indented lines under them are examples; prose never starts
    /// with `word:`.
    fn uncommented(template: &str) -> String {
        let mut in_example = false;
        let lines = template.lines().map(|l| {
            let rest = l.strip_prefix("# ").unwrap_or(l);
            let key = rest.split_once(':').is_some_and(|(k, _)| {
                k.starts_with(|c: char| c.is_ascii_lowercase())
                    && k.bytes().all(|b| b.is_ascii_alphanumeric())
            });
            in_example = l != rest && (key || (in_example && rest.starts_with("  ")));
            if in_example { rest } else { l }
        });
        lines.collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn every_field_is_documented_and_its_example_is_valid() {
        let text = uncommented(
            &IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE.replace(PLACEHOLDER, PULL_SECRET),
        );
        let f = findings(&text);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].contains("additionalTrustBundle: PEM block 1 is not a valid X.509 certificate"),
            "{f:?}"
        );
        let c = parse_installation_config(&text).unwrap();
        assert!(c.network_config.is_some() && c.proxy.is_some() && !c.ssh_key.is_empty());
        assert_eq!(c.image_digest_sources().len(), 2);
        assert_eq!(
            c.coreos_installer_args,
            ["--append-karg", "console=ttyS0,115200n8"]
        );
        assert_eq!(
            c.live_kernel_args,
            ["console=ttyS0,115200n8", "rd.neednet=1"]
        );
        assert_eq!(
            (c.precache_best_effort, c.precache_disabled),
            (Some(false), Some(false))
        );
        assert_eq!(c.extra_partition_number, Some(5));
        assert_eq!(c.release_registry, "registry.example.com:5000");
        assert!(c.ignition_config_override().is_some());
        assert_eq!(c.architecture, "amd64");
        assert_eq!(
            c.host_agent(),
            crate::config::HostAgent::Ibi {
                image: "quay.io/example/ibi:latest".into()
            }
        );
    }
}
