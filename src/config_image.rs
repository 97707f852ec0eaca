//! The configuration ISO, the product of `ibi create config-image`: one site's identity (keys, IDs,
//! password, kept between runs), its SeedReconfiguration (`manifest.json`), the ISO tree, the admin
//! kubeconfig, the marker `ibi watch` reads back from the cluster, and many sites in one run.

pub mod batch;
pub mod batch_state;
pub mod build;
pub mod iso;
pub mod marker;
pub mod pki;
pub mod reconfig;
pub mod site;
pub mod summary;
