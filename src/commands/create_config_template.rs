//! `create config-template` and `create image-config-template`: commented input files to start
//! from, written 0600 like the installer (they will hold pull secrets and site details), never
//! over an existing file unless `--force`.

use std::path::Path;

use anyhow::{Context, Result};

use crate::cli::{CreateConfigTemplateOpts, CreateImageConfigTemplateOpts};
use crate::config::{
    IMAGE_BASED_CONFIG_FILE, IMAGE_BASED_CONFIG_TEMPLATE, IMAGE_BASED_INSTALLATION_CONFIG_FILE,
    IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE,
};
use crate::util::fs::{Clobber, SECRET_FILE_MODE, write_atomic};

pub fn run(opts: &CreateConfigTemplateOpts) -> Result<()> {
    write_template(
        &opts.dir.dir,
        IMAGE_BASED_CONFIG_FILE,
        IMAGE_BASED_CONFIG_TEMPLATE,
        opts.force,
    )
}

pub fn run_image(opts: &CreateImageConfigTemplateOpts) -> Result<()> {
    write_template(
        &opts.dir.dir,
        IMAGE_BASED_INSTALLATION_CONFIG_FILE,
        IMAGE_BASED_INSTALLATION_CONFIG_TEMPLATE,
        opts.force,
    )
}

fn write_template(dir: &Path, name: &str, text: &str, force: bool) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(name);
    let clobber = if force {
        Clobber::Replace
    } else {
        Clobber::Refuse
    };
    write_atomic(&path, text.as_bytes(), SECRET_FILE_MODE, clobber)?;
    println!("{}", path.display());
    Ok(())
}
