//! `ibi deploy`: one phase of an image-based install for every site of a batch inventory, in
//! parallel, from one command. It serves the ISOs itself (`serve`'s server, in this process, one URL
//! per host), drives each host's BMC (`boot`), hears back from the host (`factory`: the host's
//! reports to the server, or its power going off) or from its cluster (`site`: `watch`), and ejects
//! the media. Each site's progress is kept in `BASE/.ibi/deploy/<site>.json` (`deploy_state`),
//! rewritten atomically at every step, so a killed deploy loses nothing and a re-run skips what is
//! done and resumes what is not. A failing site does not stop the others.

mod flow;
mod permits;
mod plan;
mod record;
mod run;
mod summary;

pub use plan::{DeployOptions, Timeouts};
pub use run::{Ending, SiteOutcome, deploy};
pub use summary::table;
