//! `create hub-manifests`: the work is `hub::build`; this prints where each file went (never what
//! a Secret holds).

use anyhow::Result;

use crate::cli::CreateHubManifestsOpts;
use crate::hub::build::{HubOptions, build};

pub fn run(opts: &CreateHubManifestsOpts) -> Result<()> {
    let out = build(&HubOptions {
        base_dir: opts.dir.dir.clone(),
        inventory: opts.sites.clone(),
        only: opts.only.clone(),
        release_image: opts.release_image.clone(),
        out: opts.out.clone(),
        templates_namespace: opts.templates_namespace.clone(),
    })?;
    for f in &out.files {
        println!("{}", f.display());
    }
    eprintln!(
        "{} sites: manifests in {} (secrets under {}/secrets, mode 0600)",
        out.sites,
        out.out.display(),
        out.out.display()
    );
    Ok(())
}
