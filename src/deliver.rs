//! Getting the ISOs onto hosts: `serve` hands them out over HTTPS under unguessable URLs (a
//! variant's installation ISO streamed from the base ISO and its patch, never written), and `boot`
//! drives a host's BMC through the factory boot (from the installation ISO) and the site boot
//! (from disk, with the configuration ISO attached); `watch` follows the reconfigured cluster
//! through its API until it is ready; `verdict` decides what a host's report means for its site,
//! for deploy and status alike. Built on `redfish`, `kubeapi` and `live_iso`.

pub mod boot;
pub mod deploy;
pub mod deploy_state;
pub mod report_store;
pub mod serve;
pub mod status;
pub mod verdict;
pub mod watch;
