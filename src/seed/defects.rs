//! What `create image` can learn from a seed about the known seed defects of `seed::lines`:
//! the seed image's `created` time and its own post-pivot unit, read out of `etc.tgz` without unpacking
//! it. A seed does not record which lifecycle-agent build generated it, so this is all there is.

use anyhow::{Context, Result};

use super::lines::SeedEvidence;
use super::registry::{
    ImagePath, LayerOrder, RegistryOptions, read_layout_file, read_registry_file,
};
use super::{SeedInfo, SeedReference, parse_seed_reference};

/// The seed's `/etc` changes (lifecycle-agent `lca-cli create`), at the image root.
pub const ETC_ARCHIVE: &str = "etc.tgz";
/// lifecycle-agent's first-boot unit (`lca-cli post-pivot`), as etc.tgz carries it.
pub const POST_PIVOT_UNIT: &str = "etc/systemd/system/installation-configuration.service";
/// The unit the fixed post-pivot unit is ordered after (lifecycle-agent 95c0672d1 and cherry-picks).
pub const CA_TRUST_UNIT: &str = "coreos-update-ca-trust.service";
/// A unit file is small; anything bigger is not the unit.
const UNIT_LIMIT: u64 = 64 << 10;

/// Reads `path` out of the image `reference` (a registry reference or `oci:PATH[:TAG]`), streaming the
/// layers in `order` and stopping at the file; `None` when no layer has it.
pub fn read_image_file(
    reference: &str,
    architecture: &str,
    registry: &RegistryOptions,
    path: ImagePath<'_>,
    order: LayerOrder,
    limit: u64,
) -> Result<Option<Vec<u8>>> {
    match parse_seed_reference(reference).map_err(anyhow::Error::msg)? {
        SeedReference::Registry(r) => {
            read_registry_file(&r, architecture, registry, path, order, limit)
        }
        SeedReference::OciLayout { path: dir, tag } => {
            read_layout_file(&dir, tag.as_deref(), architecture, path, order, limit)
        }
    }
}

/// Whether a unit file's `[Unit]` section orders it `After=coreos-update-ca-trust.service`.
pub fn orders_after_ca_trust(unit: &str) -> bool {
    let mut in_unit = false;
    for line in unit.lines().map(str::trim) {
        if line.starts_with('[') {
            in_unit = line == "[Unit]";
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if in_unit && key.trim() == "After" && value.split_whitespace().any(|u| u == CA_TRUST_UNIT)
        {
            return true;
        }
    }
    false
}

/// The seed's own post-pivot unit: whether it is ordered after the trust update; `None` when the
/// seed's etc.tgz does not carry it.
pub fn read_post_pivot_order(
    seed: &str,
    architecture: &str,
    registry: &RegistryOptions,
) -> Result<Option<bool>> {
    let path = ImagePath {
        outer: ETC_ARCHIVE,
        inner: Some(POST_PIVOT_UNIT),
    };
    let unit = read_image_file(
        seed,
        architecture,
        registry,
        path,
        LayerOrder::FirstToLast,
        UNIT_LIMIT,
    )
    .with_context(|| format!("reading {path} of the seed {seed}"))?;
    Ok(unit.map(|u| orders_after_ca_trust(&String::from_utf8_lossy(&u))))
}

/// Everything ibi can tell of the seed's lifecycle-agent build: `created` from the inspected image,
/// the post-pivot unit's order from its etc.tgz. A unit that cannot be read is only logged: the
/// warnings then say the version and date were all that was checked.
pub fn seed_evidence(
    info: &SeedInfo,
    seed: &str,
    architecture: &str,
    registry: &RegistryOptions,
) -> SeedEvidence {
    let post_pivot_after_ca_trust = match read_post_pivot_order(seed, architecture, registry) {
        Ok(found) => found,
        Err(e) => {
            tracing::info!("could not read the seed's post-pivot unit: {e:#}");
            None
        }
    };
    SeedEvidence {
        created: info.created.clone(),
        post_pivot_after_ca_trust,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_trust_order_is_read_from_the_unit_section_only() {
        let cases = [
            (
                "[Unit]\nDescription=x\nAfter=coreos-update-ca-trust.service\n[Service]\n",
                true,
            ),
            (
                "[Unit]\nAfter=network.target  coreos-update-ca-trust.service\n",
                true,
            ),
            (
                "[Unit]\nAfter=network.target\n[Service]\nType=oneshot\n",
                false,
            ),
            (
                "[Unit]\n[Install]\nAfter=coreos-update-ca-trust.service\n",
                false,
            ),
            ("[Unit]\nBefore=coreos-update-ca-trust.service\n", false),
            ("[Unit]\nAfter=coreos-update-ca-trust.service.d\n", false),
        ];
        for (unit, want) in cases {
            assert_eq!(orders_after_ca_trust(unit), want, "{unit}");
        }
    }
}
