//! The seed's operating system on the target (lifecycle-agent reference §4.5 steps 4 and 7–12,
//! §4.8): the booted commit of the seed, found through `rpm-ostree.json`, is pulled from the
//! extracted `ostree.tgz` into the target sysroot's repo, deployed into a new stateroot with the
//! kernel arguments of `mco-currentconfig.json`, and given the seed's origin file; afterwards the
//! RHCOS deployment coreos-installer wrote is removed. Everything goes through libostree (the
//! `ostree` crate at `v2022_7`), no `ostree` process is run. A re-run after a crash finds the
//! deployment already made and returns it.

mod adopt;
mod restore;
mod seed;
mod sysroot;
mod undeploy;
pub use seed::{booted_deployment, kernel_args};

pub use restore::{Deployed, restore_ostree, undeploy_other};
pub(crate) use restore::{deployment_of, init_stateroot};
