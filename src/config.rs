//! The site inputs of `ibi create config-image`: `install-config.yaml`, `image-based-config.yaml` and the
//! optional `extra-manifests/` directory; and the inputs of `ibi create image`:
//! `image-based-installation-config.yaml` and the optional `post.sh`.
//!
//! This module owns the input models, their strict decoding (unknown keys are errors, with line and column),
//! the validation rules (every finding is collected so the user fixes all of them in one pass), the
//! templates, and loading extra manifests and `post.sh`; and the site inventory of the batch mode
//! (`create config-image --sites`) with the shared base it applies to. Parsers are pure (`parse_*` take
//! `&str`); only the `load_*` functions touch the filesystem.

mod cross;
mod finding;
mod fleet;
mod idms;
mod image_based_config;
mod input;
mod install_config;
mod installation;
mod installation_template;
mod inventory;
mod inventory_bmc;
mod inventory_csv;
mod inventory_locate;
mod inventory_model;
mod inventory_render;
mod lca_versions;
mod manifests;
mod net;
mod nmstate_check;
mod placeholder;
mod rules;
mod site;
mod sshkey;
mod template;
mod validate_ic;
mod yaml11;

pub use crate::util::finding::{Finding, ValidationError};
pub use finding::Invalid;
pub use fleet::{Fleet, SITES_DIR, SiteRules, load_fleet};
pub use idms::{IDMS_NAME, image_digest_mirror_set};
pub use image_based_config::{
    IMAGE_BASED_CONFIG_FILE, ImageBasedConfig, parse_image_based_config,
    validate_image_based_config,
};
pub use install_config::{
    INSTALL_CONFIG_FILE, ImageContentSource, ImageDigestSource, InstallConfig, MachinePool,
    Metadata, Networking, Proxy, parse_install_config,
};
pub use installation::{
    ARCHITECTURES, COREOS_INSTALLER_FLAGS, DEFAULT_ARCHITECTURE, DEFAULT_HOST_AGENT,
    HOST_AGENT_BINARY_IN_IMAGE, HOST_AGENTS, HostAgent, IMAGE_BASED_INSTALLATION_CONFIG_FILE,
    InstallationConfig, InstallationInputs, POST_SH_FILE, load_installation_inputs,
    parse_installation_config, validate_installation_config,
};
pub use installation_template::IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE;
pub use inventory::{
    BOOT_MODES, Inventory, Nic, RootDeviceHints, SiteEntry, is_mac, load_inventory_with_findings,
};
pub use inventory_bmc::BmcEntry;
pub use inventory_locate::{locate as locate_site_finding, site_inputs as check_site_inputs};
pub use inventory_render::{FleetBase, SiteFiles, check_site, load_fleet_base};
pub use lca_versions::{MinorVersion, VERSIONED_KEYS, VersionedKey, parse_minor_version};
pub use manifests::{EXTRA_MANIFESTS_DIR, ExtraManifest, load_extra_manifests};
pub use net::{is_dns1123_label, is_dns1123_subdomain};
pub use rules::decoded_user_password;
pub use site::{SiteInputs, load_site_inputs, parse_site_inputs};
pub use template::IMAGE_BASED_CONFIG_TEMPLATE;
pub use validate_ic::validate_install_config;
pub(crate) use yaml11::quote_booleans;

#[cfg(test)]
mod tests;
