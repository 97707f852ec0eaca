//! `create image`: the installation ISO; the work is `install_image::build`.

use anyhow::Result;
use tracing::{info, warn};

use crate::cli::CreateImageOpts;
use crate::config_image::batch;
use crate::install_image::build::{BuildOptions, build};

pub fn run(opts: &CreateImageOpts) -> Result<()> {
    if let Some(site) = &opts.site {
        // A fleet's site: its configuration ISO against the fleet's inputs as they are now.
        match batch::inputs_changed(site) {
            Ok(Some(why)) => warn!("{why}"),
            Ok(None) => {}
            Err(e) => warn!(
                "could not compare {} with the fleet's inputs: {e:#}",
                site.display()
            ),
        }
    }
    let out = build(&BuildOptions {
        dir: opts.dir.dir.clone(),
        base_iso: opts.base_iso.clone(),
        base_iso_sha256: opts.base_iso_sha256.clone(),
        coreos_stream: opts.coreos_stream.clone(),
        release_image: opts.release_image.clone(),
        insecure_registry: opts.insecure_registry.clone(),
        skip_seed_checks: opts.skip_seed_checks,
        no_pin_seed: opts.no_pin_seed,
        force: opts.force,
        patch_only: opts.patch_only,
        site: opts.site.clone(),
    })?;
    info!(path = %out.display(), "Image created");
    println!("{}", out.display());
    Ok(())
}
