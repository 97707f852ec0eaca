//! `ibi deploy`: one phase of an image-based install for every site of a batch inventory, in
//! parallel (threads bounded by `--parallel`, whatever the fleet's size), from one command. It
//! serves the ISOs itself (`serve`'s server, in this process, one URL per host; in the factory each
//! host's own variant of the installation ISO, carrying the host's own report token), drives each
//! host's BMC (`boot`), hears back from the host (`factory`: its reports, or its power going off) or
//! from its cluster (`site`: `watch`), and ejects the media. Each site's progress is kept in
//! `BASE/.ibi/deploy/<site>.json` (`deploy_state`), rewritten atomically at every step, so a killed
//! deploy loses nothing and a re-run resumes each site at its first unfinished step, never booting
//! a host twice for one phase unless told to (`--redo`). A failing site does not stop the others;
//! one deploy at a time holds BASE.

mod engine;
mod plan;
mod pool;
mod preflight;
mod progress;
mod record;
mod run;
mod signals;
mod step;
mod summary;
mod tokens;

pub use plan::{DeployOptions, Timeouts};
pub use preflight::{Checked, Finding};
pub use run::{Deployed, Refused, check, deploy};
pub use step::{Failure, Step, first_wait, steps};
pub use summary::{Ending, SiteOutcome, table};
