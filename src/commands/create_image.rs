//! `create image-config-template` and `create image`: the installation ISO (not implemented yet).

use anyhow::{Result, bail};

use crate::cli::{CreateImageConfigTemplateOpts, CreateImageOpts};

pub fn run_template(_opts: &CreateImageConfigTemplateOpts) -> Result<()> {
    bail!("create image-config-template: not yet implemented")
}

pub fn run(_opts: &CreateImageOpts) -> Result<()> {
    bail!("create image: not yet implemented")
}
