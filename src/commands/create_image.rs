//! `create image`: the installation ISO (not implemented yet).

use anyhow::{Result, bail};

use crate::cli::CreateImageOpts;

pub fn run(_opts: &CreateImageOpts) -> Result<()> {
    bail!("create image: not yet implemented")
}
