//! The `image-based-config.yaml` template printed by `ibi create config-template`: the installer's template,
//! with every field present and explained (what it does, who consumes it, the default). The values
//! to replace come from [`placeholder`], which refuses them when the template is used unedited.

use super::placeholder;

/// A complete, valid `image-based-config.yaml` with every field commented.
pub const IMAGE_BASED_CONFIG_TEMPLATE: &str = concat!(
    r#"#
# Note: This is a sample ImageBasedConfig file showing
# which fields are available to aid you in creating your
# own image-based-config.yaml file.
#
# It is read by `ibi create config-image` together with install-config.yaml
# (cluster name, base domain, pull secret, SSH key, proxy, mirrors, machine
# networks) and the optional extra-manifests/ directory. Every value below ends
# up in cluster-configuration/manifest.json on the config ISO, which
# lifecycle-agent (`lca-cli post-pivot`) applies on the host.
#
# apiVersion, kind and metadata are accepted and ignored.
apiVersion: v1beta1
kind: ImageBasedConfig
metadata:
  name: example-image-based-config
# additionalNTPSources: NTP servers (IP addresses or DNS names) added to the
# node's /etc/chrony.conf as `server <source> iburst`, after the default
# 0.rhel.pool.ntp.org pool. Optional; when empty chrony.conf is not changed.
additionalNTPSources:
  - 0.rhel.pool.ntp.org
  - 1.rhel.pool.ntp.org
# hostname: the node's host name (a lower-case DNS name), set by lifecycle-agent
# with hostnamectl. Optional: when empty the host keeps its current name, and
# lifecycle-agent fails if that name is "localhost".
hostname: "#,
    placeholder::hostname!(),
    r#"
# releaseRegistry: the registry the release images are pulled from in this
# deployment. lifecycle-agent rewrites the seed's release-image references to
# this registry when it differs from the seed's. Optional; empty keeps the
# seed's registry.
releaseRegistry: quay.io
# nodeLabels: labels lifecycle-agent merges onto the node once the API is up.
# Keys are Kubernetes label keys ([prefix/]name), values at most 63 characters.
# Optional; default none.
# nodeLabels:
#   node-role.kubernetes.io/edge: ""
#   example.com/site: site-a17
# networkConfig contains the network configuration for the host in NMState format.
# See https://nmstate.io/examples.html for examples.
# It is checked here the way `nmstatectl gc` checks it, stored with sorted keys,
# and applied on the host by lifecycle-agent with `nmstatectl apply`. Optional;
# when omitted lifecycle-agent does not change the host's network configuration.
# For dual-stack networking, configure both IPv4 and IPv6 addresses:
networkConfig:
  interfaces:
    - name: eth0
      type: ethernet
      state: up
      mac-address: "#,
    placeholder::mac_address!(),
    r#"
      ipv4:
        enabled: true
        address:
          - ip: 192.168.122.2
            prefix-length: 23
        dhcp: false
      ipv6:
        enabled: true
        address:
          - ip: 2001:db8::2
            prefix-length: 64
        dhcp: false
# cluster_id and infra_id (note the snake_case keys) pin the cluster's identity.
# cluster_id is a UUID written to ClusterVersion.spec.clusterID; infra_id (at most
# 27 characters of a-z, 0-9 and '-') names the cluster's infrastructure. When
# omitted they are generated (a random UUID; the cluster name plus 5 random
# characters) on the first run and kept in .ibi/ in this directory, so later runs
# produce the same cluster identity. Set them only to reuse a known identity.
# cluster_id: 3c3e2f63-9ff4-4f0e-a0b3-5a1a1bb0b4e1
# infra_id: mycluster-x7k2p
"#
);

#[cfg(test)]
mod tests {
    use super::super::{parse_image_based_config, validate_image_based_config};
    use super::*;

    #[test]
    fn template_parses_and_validates_cleanly() {
        let c = parse_image_based_config(IMAGE_BASED_CONFIG_TEMPLATE).unwrap();
        let (findings, warnings) = validate_image_based_config(&c);
        assert_eq!(findings, vec![]);
        assert_eq!(warnings, Vec::<String>::new());
        assert_eq!(c.hostname, "change-to-hostname");
        assert!(c.canonical_network_config().unwrap().is_some());
    }

    #[test]
    fn commented_examples_are_valid_too() {
        let uncommented: String = IMAGE_BASED_CONFIG_TEMPLATE
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest)
                    if rest == "nodeLabels:"
                        || rest.starts_with("  ")
                        || rest.contains("_id: ") =>
                {
                    rest
                }
                _ => l,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let c = parse_image_based_config(&uncommented).unwrap();
        assert_eq!(c.node_labels.len(), 2);
        assert_eq!(c.infra_id, "mycluster-x7k2p");
        assert_eq!(validate_image_based_config(&c).0, vec![]);
    }
}
