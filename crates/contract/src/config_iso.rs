//! The configuration ISO as both sides see it: `create config-image` writes it, lifecycle-agent's
//! post-pivot (and `ibi agent fetch-config`) finds it by its label and reads this tree from it after
//! copying the ISO root to `/opt/openshift`.

/// Volume label post-pivot looks for with `lsblk -o LABEL`, compared exactly: lower case with a
/// hyphen, never "corrected" to ISO d-characters.
pub const VOLUME_LABEL: &str = "cluster-config";
/// The label post-pivot looked for before January 2024 (lifecycle-agent commit 43dc4c48e); still
/// accepted by post-pivot, so accepted by ibi's readers.
pub const LEGACY_VOLUME_LABEL: &str = "relocation-config";
/// The output file name the installer uses and IBIO/docs refer to.
pub const ISO_FILE_NAME: &str = "imagebasedconfig.iso";
/// Beside the ISO, as the installer's `image-based create config-image` writes them: the admin
/// kubeconfig and kubeadmin password of the cluster the ISO configures.
pub const AUTH_DIR: &str = "auth";
pub const KUBECONFIG_FILE: &str = "kubeconfig";
pub const KUBEADMIN_PASSWORD_FILE: &str = "kubeadmin-password";
/// The directory of the cluster's configuration inside the tree.
pub const CONFIG_DIR: &str = "cluster-configuration";
/// post-pivot reads `/opt/openshift/cluster-configuration/manifest.json` after copying the ISO root.
pub const MANIFEST_PATH: &str = "cluster-configuration/manifest.json";
/// post-pivot lists this directory unconditionally: it must exist even when empty.
pub const MANIFESTS_DIR: &str = "cluster-configuration/manifests";
pub const IDMS_PATH: &str = "cluster-configuration/manifests/image-digest-mirror-set.json";
/// Applied by post-pivot after the cluster manifests.
pub const EXTRA_MANIFESTS_DIR: &str = "extra-manifests";
/// Where post-pivot expects the tree on the installed host (`/opt` is `/var/opt` on RHCOS), relative to
/// the root.
pub const HOST_TARGET: &str = "opt/openshift";
/// One-shot site install (`ibi create image --site`): where the installation ISO's Ignition places the
/// site's configuration tree on the live system (every file 0600, every directory 0700), exactly the
/// files and bytes of the site's configuration ISO. `ibi agent install` (step `write-site-config`) and,
/// with `hostAgent: lca`, ibi's generated `post.sh` copy it from here into the new stateroot.
pub const LIVE_SITE_TREE: &str = "/var/tmp/ibi-site-configuration";
/// One-shot, a tree too large for the Ignition embed area (`ibi deploy --phase oneshot`, `hostAgent:
/// ibi`, `statusURL`): instead of the tree, the host's variant carries this file (0600), naming the
/// site's configuration ISO by size and SHA-256; `ibi agent install` fetches it from
/// [`SITE_FETCH_ENDPOINT`] of `statusURL` with the host's own report token and `statusCA`, checks both,
/// and copies the ISO's tree into the stateroot.
pub const SITE_FETCH_PATH: &str = "/var/tmp/ibi-site-fetch.json";
/// Below `statusURL`: `GET` with `Authorization: Bearer <the host's own report token>` answers the
/// configuration ISO of the site that token belongs to.
pub const SITE_FETCH_ENDPOINT: &str = "site-configuration";

/// The content of [`SITE_FETCH_PATH`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SiteFetch {
    /// The configuration ISO's size in bytes.
    pub size: u64,
    /// Its SHA-256, lower-case hex.
    pub sha256: String,
}

/// A one-shot installation ISO says that it is one (0600, [`OneShot`]), whatever else its Ignition
/// carries: a host agent that finds neither the tree nor the fetch settings then fails its
/// `write-site-config` step, instead of installing a host that waits for a configuration device
/// forever.
pub const ONE_SHOT_PATH: &str = "/var/tmp/ibi-one-shot.json";

/// The content of [`ONE_SHOT_PATH`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OneShot {
    /// The site whose configuration it carries (its directory's name).
    pub site: String,
    /// How the tree reaches the host.
    pub tree: OneShotTree,
}

/// How a one-shot ISO's site tree reaches the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OneShotTree {
    /// In the ISO, at [`LIVE_SITE_TREE`].
    Carried,
    /// Fetched at install time ([`SITE_FETCH_PATH`]).
    Fetched,
}

/// Where the tree goes inside the new stateroot (`<sysroot>/ostree/deploy/<stateroot>/`): the installed
/// host's `/var/opt/openshift`, i.e. [`HOST_TARGET`] under `/var`, where post-pivot finds
/// `cluster-configuration` and stops waiting for a device.
pub const STATEROOT_TARGET: &str = "var/opt/openshift";
/// manifest.json's key holding the site's nmstate YAML (empty for a site on DHCP): post-pivot applies
/// it on the installed host; a one-shot installation ISO applies it on the live system too.
pub const MANIFEST_NMSTATE_KEY: &str = "raw_nm_state_config";

/// The only `api_version` of manifest.json (SeedReconfiguration) post-pivot accepts ("unsupported seed
/// reconfiguration version" otherwise).
pub const SEED_RECONFIGURATION_VERSION: u32 = 1;

/// `ibi watch`'s marker, a ConfigMap among the extra manifests. post-pivot applies the extra manifests
/// once the reconfigured cluster's API answers, so the ConfigMap's `metadata.creationTimestamp` says,
/// on the cluster's own clock, when this configuration reached it; a ClusterVersion whose conditions
/// all changed before that (less [`MARKER_SLACK_SECS`]) is the seed's, not this cluster's
/// (image-based-install-operator's `ibi-monitor-cm` rule). The name stays under 30 characters
/// (OCPBUGS-48244).
pub const MARKER_FILE: &str = "ibi-reconfiguration.yaml";
pub const MARKER_NAMESPACE: &str = "openshift-config";
pub const MARKER_NAME: &str = "ibi-reconfiguration";
/// The build's time (RFC 3339, UTC; `SOURCE_DATE_EPOCH` when set): tells this build's marker from one
/// an earlier build of the site, or the seed's own cluster, left behind.
pub const MARKER_BUILT_AT_KEY: &str = "builtAt";
/// The slack image-based-install-operator allows between a ClusterVersion condition's change and the
/// marker's creation: the cluster version operator may move before post-pivot applies the extra
/// manifests, and the host's clock may be stepped by NTP in between.
pub const MARKER_SLACK_SECS: i64 = 60 * 60;
