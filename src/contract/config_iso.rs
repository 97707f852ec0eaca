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
/// The only `api_version` of manifest.json (SeedReconfiguration) post-pivot accepts ("unsupported seed
/// reconfiguration version" otherwise).
pub const SEED_RECONFIGURATION_VERSION: u32 = 1;
