//! `create config-template`: a commented `image-based-config.yaml` to start a site from.

use anyhow::{Context, Result};

use crate::cli::CreateConfigTemplateOpts;
use crate::config::{IMAGE_BASED_CONFIG_FILE, IMAGE_BASED_CONFIG_TEMPLATE};
use crate::util::fs::{Clobber, SECRET_FILE_MODE, write_atomic};

pub fn run(opts: &CreateConfigTemplateOpts) -> Result<()> {
    std::fs::create_dir_all(&opts.dir.dir)
        .with_context(|| format!("creating {}", opts.dir.dir.display()))?;
    let path = opts.dir.dir.join(IMAGE_BASED_CONFIG_FILE);
    let clobber = if opts.force {
        Clobber::Replace
    } else {
        Clobber::Refuse
    };
    // 0600 like the installer: the file will hold the site's network details.
    write_atomic(
        &path,
        IMAGE_BASED_CONFIG_TEMPLATE.as_bytes(),
        SECRET_FILE_MODE,
        clobber,
    )?;
    println!("{}", path.display());
    Ok(())
}
