//! Pre-flight of a site against its seed (`create config-image --seed`): what the seed's lifecycle-agent
//! post-pivot would refuse on the host, found on the build machine instead.
//!
//! post-pivot compares the configuration ISO's manifest.json with the seed's `seed_cluster_info`
//! (lifecycle-agent-versions.md, "What post-pivot refuses"). What of that is knowable at build time is
//! checked here, every finding at once, each naming the site's file and field and the seed's value:
//! - `proxy` present exactly when the seed `has_proxy` (every version);
//! - `fips` equal to the seed's `has_fips` (an IBI requirement: the cluster keeps the seed's FIPS mode;
//!   lifecycle-agent enforces it only on the upgrade path);
//! - the machine networks' count and IP families, in order, equal to the seed's node IPs' (4.20+
//!   post-pivot compares the node IPs and pairs machine network i with node IP i; a 4.16–4.19 seed has
//!   one `node_ip` and reads one machine network, so a site of another IP stack cannot be expressed);
//! - with a seed that lists `machine_networks` (4.20+), the same count and family order as those.
//!
//! The rest of post-pivot's validation holds for every site ibi builds (docs/config-image.md lists it).

use std::net::IpAddr;

use anyhow::{Context, Result, anyhow};

use super::{SeedClusterInfo, SeedReference, inspect_seed, parse_seed_reference};
use crate::config::{Finding, INSTALL_CONFIG_FILE, InstallConfig};

/// The installer's architecture when `controlPlane.architecture` is empty.
const DEFAULT_ARCHITECTURE: &str = "amd64";

/// What `--seed` told about the seed.
#[derive(Debug, Clone)]
pub struct SiteSeed {
    /// `--seed` as given.
    pub reference: String,
    /// The digest it resolved to (a batch fingerprints it, so a new seed re-checks every site).
    pub digest: String,
    pub cluster_info: SeedClusterInfo,
}

/// Reads the seed's `seed_cluster_info` label through its registry (with the pull secret, digest mirrors
/// and trust bundle of `config`, as `create image` does) or its OCI layout. Errors name the seed.
pub fn read_site_seed(
    text: &str,
    config: &InstallConfig,
    insecure_registries: Vec<String>,
) -> Result<SiteSeed> {
    let reference: SeedReference =
        parse_seed_reference(text).map_err(|e| anyhow!("--seed: {e}"))?;
    let registry = super::site_registry_options(config, insecure_registries)
        .map_err(|e| anyhow!("{INSTALL_CONFIG_FILE}: pullSecret: {e}"))?;
    let info = inspect_seed(&reference, architecture(config), &registry)
        .with_context(|| format!("reading the seed image {text} (--seed)"))?;
    let cluster_info = match (
        info.cluster_info,
        info.labels.get(super::SEED_CLUSTER_INFO_LABEL),
    ) {
        (Some(ci), _) => ci,
        (None, Some(label)) => {
            let why = super::parse_seed_cluster_info(label)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            return Err(anyhow!("seed image {text} (--seed): {why}"));
        }
        (None, None) => {
            return Err(anyhow!(
                "seed image {text} (--seed) has no {} label: nothing to check the site against",
                super::SEED_CLUSTER_INFO_LABEL
            ));
        }
    };
    tracing::info!(seed = text, digest = %info.digest, "seed read for the pre-flight");
    Ok(SiteSeed {
        reference: text.to_string(),
        digest: info.digest,
        cluster_info,
    })
}

fn architecture(config: &InstallConfig) -> &str {
    config
        .control_plane
        .as_ref()
        .map(|p| p.architecture.as_str())
        .filter(|a| !a.is_empty())
        .unwrap_or(DEFAULT_ARCHITECTURE)
}

/// Every mismatch between the site's install-config.yaml and the seed (module doc); empty: it fits.
pub fn check_site(seed: &SeedClusterInfo, config: &InstallConfig) -> Vec<Finding> {
    let networks = config.machine_network_cidrs();
    let mut out = Vec::new();
    out.extend(proxy(seed, config.proxy.is_some()));
    out.extend(fips(seed, config.fips.unwrap_or(false)));
    out.extend(node_ip_families(seed, &networks));
    out.extend(seed_machine_networks(seed, &networks));
    out
}

fn finding(field: &str, message: String) -> Finding {
    Finding {
        file: INSTALL_CONFIG_FILE.to_string(),
        field: field.to_string(),
        message,
        line: None,
    }
}

/// post-pivot: "seedReconfig and seedClusterInfo proxy configuration mismatch".
fn proxy(seed: &SeedClusterInfo, site_has_proxy: bool) -> Option<Finding> {
    let message = match (site_has_proxy, seed.has_proxy) {
        (true, false) => {
            "is set, but the seed has no proxy (seed_cluster_info has_proxy: false): remove it, or use a seed made with a proxy"
        }
        (false, true) => {
            "is not set, but the seed has a proxy (seed_cluster_info has_proxy: true): set one, or use a seed made without a proxy"
        }
        _ => return None,
    };
    Some(finding(
        "proxy",
        format!(
            "{message}; the seed's post-pivot refuses the mismatch (\"seedReconfig and seedClusterInfo proxy configuration mismatch\")"
        ),
    ))
}

/// The installed cluster runs in the seed's FIPS mode, whatever the site asks for.
fn fips(seed: &SeedClusterInfo, site_fips: bool) -> Option<Finding> {
    (site_fips != seed.has_fips).then(|| {
        let site = if site_fips { "true" } else { "false (or not set)" };
        finding(
            "fips",
            format!(
                "is {site}, but the seed has FIPS {} (seed_cluster_info has_fips: {}): the cluster keeps the seed's FIPS mode, so an image-based installation requires the two to match",
                if seed.has_fips { "enabled" } else { "disabled" },
                seed.has_fips
            ),
        )
    })
}

/// The seed's node IPs: `node_ips`, else the one `node_ip` (4.16–4.19), as lifecycle-agent reads them.
fn seed_node_ips(seed: &SeedClusterInfo) -> (Vec<String>, &'static str) {
    if seed.node_ips.is_empty() {
        let one = (!seed.node_ip.is_empty()).then(|| seed.node_ip.clone());
        (one.into_iter().collect(), "node_ip")
    } else {
        (seed.node_ips.clone(), "node_ips")
    }
}

/// 4.20+: as many node IPs as the seed's, families in the same order, one machine network per node IP
/// of its family. 4.16–4.19: one node IP, one machine network read; the IP stack must match.
fn node_ip_families(seed: &SeedClusterInfo, networks: &[String]) -> Option<Finding> {
    let (ips, key) = seed_node_ips(seed);
    let theirs = families(&ips)?;
    let ours = families(networks)?;
    if theirs == ours {
        return None;
    }
    let why = if key == "node_ips" {
        "the seed's post-pivot requires the node IPs to match the seed's in count and IP family, in order, and one machine network per node IP of its family".to_string()
    } else {
        format!(
            "the seed's lifecycle-agent ({}) reads one machine network only, and an image-based installation keeps the seed's IP stack",
            seed.seed_cluster_ocp_version
        )
    };
    Some(finding(
        "networking.machineNetwork",
        format!(
            "{} ({}), but the seed's node IPs are {} (seed_cluster_info {key} {}): {why}",
            describe(&ours),
            networks.join(", "),
            describe(&theirs),
            quoted(&ips, key == "node_ip"),
        ),
    ))
}

/// 4.20+ post-pivot: a seed `machine_networks` list must match the site's in count and family order.
fn seed_machine_networks(seed: &SeedClusterInfo, networks: &[String]) -> Option<Finding> {
    let theirs = families(&seed.machine_networks)?;
    let ours = families(networks)?;
    (theirs != ours).then(|| {
        finding(
            "networking.machineNetwork",
            format!(
                "{} ({}), but the seed's machine networks are {} (seed_cluster_info machine_networks {}): the seed's post-pivot requires the same count and IP families, in order",
                describe(&ours),
                networks.join(", "),
                describe(&theirs),
                quoted(&seed.machine_networks, false),
            ),
        )
    })
}

/// The IP family of each address or CIDR; `None` when the list is empty or one does not parse
/// (validation reports those; nothing to compare then).
fn families(items: &[String]) -> Option<Vec<&'static str>> {
    if items.is_empty() {
        return None;
    }
    items
        .iter()
        .map(|s| {
            let addr = s.split('/').next().unwrap_or_default();
            addr.parse::<IpAddr>()
                .ok()
                .map(|a| if a.is_ipv4() { "IPv4" } else { "IPv6" })
        })
        .collect()
}

/// "IPv4", "IPv4 then IPv6".
fn describe(families: &[&str]) -> String {
    families.join(" then ")
}

/// As JSON shows them: one string, or a list.
fn quoted(items: &[String], single: bool) -> String {
    let q: Vec<String> = items.iter().map(|i| format!("{i:?}")).collect();
    if single {
        q.join(", ")
    } else {
        format!("[{}]", q.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Networking, Proxy};

    fn seed(json: &str) -> SeedClusterInfo {
        super::super::parse_seed_cluster_info(json).expect("seed info")
    }

    const LISTS: &str = r#"{"seed_cluster_ocp_version":"4.20.0","node_ips":["192.168.126.10"],"has_proxy":false,"has_fips":false,"machine_networks":["192.168.126.0/24"]}"#;
    const LEGACY: &str = r#"{"seed_cluster_ocp_version":"4.18.1","node_ip":"192.168.126.10","has_proxy":true,"has_fips":true}"#;

    fn site(networks: &[&str], proxy: bool, fips: Option<bool>) -> InstallConfig {
        let yaml = format!(
            "networking: {{machineNetwork: [{}]}}",
            networks
                .iter()
                .map(|n| format!("{{cidr: '{n}'}}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let networking: Networking =
            serde_yaml_ng::from_str(&yaml.replace("networking: ", "")).expect("networking");
        InstallConfig {
            networking: Some(networking),
            proxy: proxy.then(|| Proxy {
                http_proxy: "http://proxy:3128".into(),
                ..Default::default()
            }),
            fips,
            ..Default::default()
        }
    }

    fn messages(seed_json: &str, ic: &InstallConfig) -> Vec<String> {
        check_site(&seed(seed_json), ic)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_matching_site_has_no_findings() {
        assert_eq!(
            messages(LISTS, &site(&["10.0.0.0/16"], false, Some(false))),
            Vec::<String>::new()
        );
        assert_eq!(
            messages(LEGACY, &site(&["10.0.0.0/16"], true, Some(true))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn every_mismatch_at_once_with_the_seeds_value() {
        assert_eq!(
            messages(
                LISTS,
                &site(&["fd00::/64", "10.0.0.0/16"], true, Some(true))
            ),
            [
                "install-config.yaml: proxy: is set, but the seed has no proxy (seed_cluster_info has_proxy: false): remove it, or use a seed made with a proxy; the seed's post-pivot refuses the mismatch (\"seedReconfig and seedClusterInfo proxy configuration mismatch\")",
                "install-config.yaml: fips: is true, but the seed has FIPS disabled (seed_cluster_info has_fips: false): the cluster keeps the seed's FIPS mode, so an image-based installation requires the two to match",
                "install-config.yaml: networking.machineNetwork: IPv6 then IPv4 (fd00::/64, 10.0.0.0/16), but the seed's node IPs are IPv4 (seed_cluster_info node_ips [\"192.168.126.10\"]): the seed's post-pivot requires the node IPs to match the seed's in count and IP family, in order, and one machine network per node IP of its family",
                "install-config.yaml: networking.machineNetwork: IPv6 then IPv4 (fd00::/64, 10.0.0.0/16), but the seed's machine networks are IPv4 (seed_cluster_info machine_networks [\"192.168.126.0/24\"]): the seed's post-pivot requires the same count and IP families, in order",
            ]
        );
    }

    #[test]
    fn a_legacy_seed_is_judged_by_its_one_node_ip() {
        assert_eq!(
            messages(LEGACY, &site(&["fd00::/64"], false, None)),
            [
                "install-config.yaml: proxy: is not set, but the seed has a proxy (seed_cluster_info has_proxy: true): set one, or use a seed made without a proxy; the seed's post-pivot refuses the mismatch (\"seedReconfig and seedClusterInfo proxy configuration mismatch\")",
                "install-config.yaml: fips: is false (or not set), but the seed has FIPS enabled (seed_cluster_info has_fips: true): the cluster keeps the seed's FIPS mode, so an image-based installation requires the two to match",
                "install-config.yaml: networking.machineNetwork: IPv6 (fd00::/64), but the seed's node IPs are IPv4 (seed_cluster_info node_ip \"192.168.126.10\"): the seed's lifecycle-agent (4.18.1) reads one machine network only, and an image-based installation keeps the seed's IP stack",
            ]
        );
    }

    #[test]
    fn dual_stack_matches_a_dual_stack_seed_in_order() {
        let dual = r#"{"seed_cluster_ocp_version":"4.20.0","node_ips":["192.168.126.10","fd00::10"],"machine_networks":["192.168.126.0/24","fd00::/64"]}"#;
        assert!(messages(dual, &site(&["10.0.0.0/16", "fd01::/64"], false, None)).is_empty());
        let swapped = messages(dual, &site(&["fd01::/64", "10.0.0.0/16"], false, None));
        assert_eq!(swapped.len(), 2, "{swapped:?}");
        let single = messages(dual, &site(&["10.0.0.0/16"], false, None));
        assert!(
            single[0].contains("IPv4 (10.0.0.0/16), but the seed's node IPs are IPv4 then IPv6")
        );
    }

    #[test]
    fn nothing_to_compare_without_seed_addresses() {
        let bare = r#"{"seed_cluster_ocp_version":"4.16.0"}"#;
        assert!(messages(bare, &site(&["fd00::/64"], false, None)).is_empty());
    }
}
