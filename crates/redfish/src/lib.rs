//! A small typed Redfish client: enough of DSP0266/DSP0268 to find a system and its virtual CD,
//! power it, insert and eject media and set a boot override, on every vendor Ironic's redfish
//! driver handles. It knows nothing of OpenShift or ISOs: an image is a URL. No Redfish crate covers
//! virtual media across vendors, so this sits on the project's one HTTP client (reqwest over the
//! system OpenSSL).

mod client;
mod error;
mod model;
pub mod system;
pub mod vmedia;

pub use client::{Client, ClientOptions, Credentials, Reply, RetryPolicy, Trust};
pub use error::RedfishError;
pub use model::{Boot, BootTarget, ComputerSystem, OverrideEnabled, PowerState, VirtualMedia};
