//! How each site's phase ended, and the summary table deploy prints on stdout: one row per site.

use std::time::Duration;

use super::step::Failure;
use crate::deliver::deploy_state::Phase;

/// How a site's phase ended in this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Done,
    /// Done by an earlier run: nothing was done again.
    DoneEarlier,
    Failed(Failure),
    /// Still under way at this step when the run was interrupted.
    Interrupted(String),
}

#[derive(Debug, Clone)]
pub struct SiteOutcome {
    pub site: String,
    pub bmc: String,
    pub phase: Phase,
    pub ending: Ending,
    /// The phase's time, from its boot to its end, across runs.
    pub took: Duration,
    pub bytes_served: u64,
}

impl SiteOutcome {
    pub fn failed(&self) -> bool {
        matches!(self.ending, Ending::Failed(_))
    }
}

/// SITE, BMC, PHASE, RESULT, TIME (m:ss), BYTES SERVED.
pub fn table(rows: &[SiteOutcome]) -> String {
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let secs = r.took.as_secs();
            [
                r.site.clone(),
                r.bmc.clone(),
                r.phase.name().to_string(),
                match &r.ending {
                    Ending::Done => "done".into(),
                    Ending::DoneEarlier => "done (earlier run)".into(),
                    Ending::Failed(_) => "failed".into(),
                    Ending::Interrupted(step) => format!("interrupted at {step}"),
                },
                format!("{}:{:02}", secs / 60, secs % 60),
                r.bytes_served.to_string(),
            ]
        })
        .collect();
    let head = ["SITE", "BMC", "PHASE", "RESULT", "TIME", "BYTES SERVED"];
    let width = |i: usize| {
        cells
            .iter()
            .map(|c| c[i].len())
            .chain([head[i].len()])
            .max()
            .unwrap_or(0)
    };
    let w: Vec<usize> = (0..6).map(width).collect();
    let line = |c: [&str; 6]| {
        format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {:>w4$}  {:>w5$}\n",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            c[5],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4],
            w5 = w[5]
        )
    };
    let mut out = line(head);
    for c in &cells {
        out.push_str(&line([&c[0], &c[1], &c[2], &c[3], &c[4], &c[5]]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_aligned_row_per_site() {
        let row = |site: &str, ending: Ending, secs: u64, bytes: u64| SiteOutcome {
            site: site.into(),
            bmc: format!("https://10.0.0.{}", site.len()),
            phase: Phase::Factory,
            ending,
            took: Duration::from_secs(secs),
            bytes_served: bytes,
        };
        let t = table(&[
            row("a17", Ending::Done, 75, 335872),
            row("b1", Ending::Failed(Failure::Setup("x".into())), 5, 0),
            row("c190", Ending::DoneEarlier, 3600, 1),
        ]);
        assert_eq!(
            t,
            "SITE  BMC               PHASE    RESULT               TIME  BYTES SERVED\n\
             a17   https://10.0.0.3  factory  done                 1:15        335872\n\
             b1    https://10.0.0.2  factory  failed               0:05             0\n\
             c190  https://10.0.0.4  factory  done (earlier run)  60:00             1\n"
        );
    }
}
