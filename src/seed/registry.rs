//! OCI image access for build-time checks: a manifest (through an image index when there is one), its
//! config blob, labels and architecture — from a registry with `oci-client`, or from an OCI image layout on
//! disk. The checks never fetch layers (a seed is gigabytes; what they need is in the config); [`files`]
//! streams a layer only to find one small file in it, and stops there.
//!
//! Registry access follows containers/image where lifecycle-agent's podman would: credentials from the pull
//! secret, `imageDigestSources` mirrors tried first for digest references only, extra TLS roots from the
//! `additionalTrustBundle`, and plain HTTP only for registries listed as insecure. The rest of ibi is
//! synchronous, so each call runs on its own current-thread tokio runtime.

mod files;
mod layout;
mod manifest;
mod mirrors;
mod remote;
pub use crate::contract::pull_secret::{
    BadEntry, Credentials, PullSecret, PullSecretError, parse_pull_secret,
};
pub use files::{ImagePath, LayerOrder, read_layout_file, read_registry_file};
pub use mirrors::pull_endpoints;

pub use layout::inspect_layout_image;
pub use manifest::ImageInfo;
pub use remote::{RegistryError, RegistryOptions, inspect_registry_image};
