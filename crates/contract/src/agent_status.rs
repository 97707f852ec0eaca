//! The agent's status document: the JSON file `ibi agent install` keeps current (default
//! `/var/tmp/ibi-status.json`) and whatever watches a host reads — a BMC agent, an SSH user, `ibi serve`'s
//! report endpoint, a test — plus the one-line summary of it the journal gets. The writer is
//! `agent::state::Progress`; this module is the document, which both sides share.

use serde::{Deserialize, Serialize};

/// Where `ibi agent install` writes its status unless told otherwise.
pub const DEFAULT_STATUS_PATH: &str = "/var/tmp/ibi-status.json";

/// Where the current step stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Running,
    Done,
    Failed,
}

/// Precache progress.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageCounts {
    pub pulled: u64,
    pub failed: u64,
    pub total: u64,
}

/// The status file's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The current (or last) step's name, empty before the first step.
    pub step: String,
    pub state: RunState,
    /// Unix seconds when the current step started.
    pub started: u64,
    /// Unix seconds of the last change.
    pub updated: u64,
    pub bytes_done: u64,
    /// 0 when the step does not know its size.
    pub bytes_total: u64,
    pub images: ImageCounts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Status {
    /// Before the first step: running, nothing counted, started and updated `now` (Unix seconds).
    pub fn idle(now: u64) -> Status {
        Status {
            step: String::new(),
            state: RunState::Running,
            started: now,
            updated: now,
            bytes_done: 0,
            bytes_total: 0,
            images: ImageCounts::default(),
            error: None,
        }
    }

    /// The journal's summary: `ibi: fetch-seed 1.2/3.4 GiB, images 12/40 (1 failed)`.
    pub fn progress_line(&self) -> String {
        let mut line = format!("ibi: {}", self.step);
        if let Some(counts) = self.counts() {
            line.push_str(if self.has_bytes() { " " } else { ", " });
            line.push_str(&counts);
        }
        match (&self.state, &self.error) {
            (RunState::Running, _) => {}
            (RunState::Done, _) => line.push_str(", done"),
            (RunState::Failed, Some(e)) => line.push_str(&format!(", failed: {e}")),
            (RunState::Failed, None) => line.push_str(", failed"),
        }
        line
    }

    /// The step's counters (`1.2/3.4 GiB, images 12/40 (1 failed)`), if it counted anything.
    pub fn counts(&self) -> Option<String> {
        let mut parts = Vec::new();
        if self.has_bytes() {
            parts.push(format_bytes(self.bytes_done, self.bytes_total));
        }
        if self.images.total > 0 {
            let mut images = format!("images {}/{}", self.images.pulled, self.images.total);
            if self.images.failed > 0 {
                images.push_str(&format!(" ({} failed)", self.images.failed));
            }
            parts.push(images);
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    fn has_bytes(&self) -> bool {
        self.bytes_total > 0 || self.bytes_done > 0
    }
}

/// `1.2/3.4 GiB`, or `1.2 GiB` when the total is unknown; the unit follows the larger number.
fn format_bytes(done: u64, total: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("B", 1),
    ];
    let biggest = done.max(total);
    let (unit, size) = UNITS
        .into_iter()
        .find(|(_, size)| biggest >= *size)
        .unwrap_or(("B", 1));
    let show = |n: u64| {
        if size == 1 {
            n.to_string()
        } else {
            format!("{:.1}", n as f64 / size as f64)
        }
    };
    if total == 0 {
        format!("{} {unit}", show(done))
    } else {
        format!("{}/{} {unit}", show(done), show(total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(step: &str, done: u64, total: u64, images: (u64, u64, u64)) -> Status {
        Status {
            step: step.into(),
            bytes_done: done,
            bytes_total: total,
            images: ImageCounts {
                pulled: images.0,
                failed: images.1,
                total: images.2,
            },
            ..Status::idle(0)
        }
    }

    #[test]
    fn progress_lines() {
        let gib = 1u64 << 30;
        let mut failed = status("precache", 0, 0, (39, 1, 40));
        failed.state = RunState::Failed;
        failed.error = Some("pulling quay.io/x: manifest unknown".into());
        let mut done = status("deploy", 0, 0, (0, 0, 0));
        done.state = RunState::Done;
        let cases = [
            (
                status("fetch-seed", gib * 12 / 10, gib * 34 / 10, (12, 1, 40)),
                "ibi: fetch-seed 1.2/3.4 GiB, images 12/40 (1 failed)",
            ),
            (
                status("precache", 0, 0, (12, 0, 40)),
                "ibi: precache, images 12/40",
            ),
            (
                status("restore-var", 3 << 19, 0, (0, 0, 0)),
                "ibi: restore-var 1.5 MiB",
            ),
            (
                status("restore-etc", 512, 2048, (0, 0, 0)),
                "ibi: restore-etc 0.5/2.0 KiB",
            ),
            (
                status("fetch-seed", 10, 20, (0, 0, 0)),
                "ibi: fetch-seed 10/20 B",
            ),
            (
                failed,
                "ibi: precache, images 39/40 (1 failed), failed: pulling quay.io/x: manifest unknown",
            ),
            (done, "ibi: deploy, done"),
        ];
        for (s, want) in cases {
            assert_eq!(s.progress_line(), want);
        }
    }
}
