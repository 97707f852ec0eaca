//! The hub handoff (`ibi create hub-manifests`): the objects a hub with the SiteConfig operator and
//! the image-based-install-operator needs to take over a fleet ibi describes, one folder per site, in
//! a layout for GitOps (docs/hub.md). Field facts: `../shared/reference/hub-handoff.md`.

pub mod build;
pub mod identity;
pub mod objects;
mod plan;
mod render;
pub mod rules;
mod write;
pub use plan::HubOptions;
pub use write::HubOutput;
