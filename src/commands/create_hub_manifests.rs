//! `create hub-manifests`: the work is `hub::build`; this prints where each file went (never what
//! a Secret holds).

use anyhow::Result;

use crate::cli::CreateHubManifestsOpts;
use crate::hub::HubOptions;
use crate::hub::build::build;
use crate::hub::objects::SecretData;

pub fn run(opts: &CreateHubManifestsOpts) -> Result<()> {
    let out = build(&HubOptions {
        base_dir: opts.dir.dir.clone(),
        inventory: opts.sites.clone(),
        only: opts.only.clone(),
        release_image: opts.release_image.clone(),
        out: opts.out.clone(),
        templates_namespace: opts.templates_namespace.clone(),
        secret_data: if opts.secret_templates {
            SecretData::Templates
        } else {
            SecretData::Values
        },
        seed: opts
            .seed
            .clone()
            .map(|s| (s, opts.insecure_registry.clone())),
        // What deploy did to each host: a running cluster is not installed again by accident.
        running: crate::deliver::deploy_state::configured_sites(&opts.dir.dir)?,
        adopt: opts.adopt,
        reinstall: opts.reinstall.clone(),
    })?;
    for f in &out.files {
        println!("{}", f.display());
    }
    for line in &out.warnings {
        tracing::warn!("{line}");
    }
    for site in &out.unbuilt {
        eprintln!(
            "site {site}: not built by `ibi create config-image --sites` (no {}/{site}): no identity Secrets; \
             the hub gives it a new identity",
            crate::config::SITES_DIR
        );
    }
    let secrets = if opts.secret_templates {
        "secret templates without data"
    } else {
        "secrets"
    };
    for dir in &out.stale {
        eprintln!(
            "{}: not a site of this run's inventory; remove it if the site is gone",
            dir.display()
        );
    }
    eprintln!(
        "{} site{}: manifests in {} ({secrets} under {}/secrets, mode 0600)",
        out.sites,
        if out.sites == 1 { "" } else { "s" },
        out.out.display(),
        out.out.display()
    );
    Ok(())
}
