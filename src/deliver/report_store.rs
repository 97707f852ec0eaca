//! The reports `ibi serve` received, kept durably in `DIR/.ibi/reports.jsonl`: one JSON line per
//! report (when it arrived, from where, the report), appended and fsynced before the host is answered,
//! so an acknowledged report survives a crash or a power loss. A line counts once its newline is on
//! disk: a last line without one (a write cut short) is ignored on read and cut off when the store is
//! opened again, so the next report starts on a line of its own. Any other line that does not parse is
//! damage, reported with the file and line.
//!
//! No HTTP here: the server appends, `ibi status` reads, and tests use both directly.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::contract::host_report::HostReport;
use crate::util::fs::{SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir};

/// Under the served directory.
pub const REPORTS_FILE: &str = ".ibi/reports.jsonl";

/// One line of the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoredReport {
    /// Unix seconds by the server's clock (a live ISO's clock may be anything).
    pub received: u64,
    /// The client's address and port, as the access log shows it.
    pub client: String,
    /// The site whose own report token the report carried (`ibi deploy` gives each host its own);
    /// absent for the installation ISO's shared token, whose reports speak for no site.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    pub report: HostReport,
}

/// The store, open for appending.
#[derive(Debug)]
pub struct ReportStore {
    path: PathBuf,
    file: File,
}

impl ReportStore {
    /// Opens (creating) `dir/.ibi/reports.jsonl` for appending; a torn last line is cut off first.
    pub fn open(dir: &Path) -> Result<ReportStore> {
        let path = dir.join(REPORTS_FILE);
        if let Some(parent) = path.parent() {
            ensure_dir(parent, SECRET_DIR_MODE)?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(SECRET_FILE_MODE)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut store = ReportStore { path, file };
        store.cut_torn_tail()?;
        Ok(store)
    }

    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one report as one write of one line and makes it durable before returning.
    pub fn append(&mut self, report: &StoredReport) -> Result<()> {
        let mut line = serde_json::to_vec(report).context("encoding a report")?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .and_then(|()| self.file.sync_data())
            .with_context(|| format!("appending to {}", self.path.display()))
    }

    /// A crash in the middle of an append leaves a line without its newline; appending after it would
    /// glue the next report to it. Cut back to the last newline.
    fn cut_torn_tail(&mut self) -> Result<()> {
        let context = || format!("checking the end of {}", self.path.display());
        let len = self.file.metadata().with_context(context)?.len();
        if len == 0 {
            return Ok(());
        }
        let keep = last_newline_end(&mut self.file, len).with_context(context)?;
        if keep < len {
            tracing::warn!(
                "{}: cutting off a report whose write was cut short ({} bytes)",
                self.path.display(),
                len - keep
            );
            self.file.set_len(keep).with_context(context)?;
            self.file.sync_data().with_context(context)?;
        }
        Ok(())
    }
}

/// The offset just after the file's last newline (0 if it has none), reading backwards in blocks.
fn last_newline_end(file: &mut File, len: u64) -> std::io::Result<u64> {
    const BLOCK: u64 = 64 * 1024;
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let mut buf = vec![0u8; (end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf)?;
        if let Some(i) = buf.iter().rposition(|b| *b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// Whether `newer` (received later) speaks for its host instead of `older`: an end report is not undone
/// by a progress report of the same boot that arrived after it (the lca units post their start and end
/// independently).
pub fn supersedes(newer: &HostReport, older: &HostReport) -> bool {
    !(older.finished && !newer.finished && older.host.boot_id == newer.host.boot_id)
}

/// Every report in `dir`'s store, in the order received; none when there is no store. A damaged line
/// is an error ([`load_reports_checked`] reads past it).
#[cfg(test)]
pub fn load_reports(dir: &Path) -> Result<Vec<StoredReport>> {
    let path = dir.join(REPORTS_FILE);
    match read_store(&path)? {
        Some(bytes) => parse_reports(&path.display().to_string(), &bytes),
        None => Ok(Vec::new()),
    }
}

/// Every report of `dir`'s store that can be read, in the order received, and what is wrong with each
/// line that cannot ([`parse_reports_checked`]).
pub fn load_reports_checked(dir: &Path) -> Result<(Vec<StoredReport>, Vec<DamagedLine>)> {
    let path = dir.join(REPORTS_FILE);
    match read_store(&path)? {
        Some(bytes) => Ok(parse_reports_checked(&bytes)),
        None => Ok((Vec::new(), Vec::new())),
    }
}

fn read_store(path: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// A line of the store that is not a report: its number (from 1) and serde's reason and position,
/// never the content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedLine {
    pub line: usize,
    pub problem: String,
}

/// Parses a store's bytes; `name` names it in errors. The first damaged line is an error.
#[cfg(test)]
pub fn parse_reports(name: &str, bytes: &[u8]) -> Result<Vec<StoredReport>> {
    let (reports, damaged) = parse_reports_checked(bytes);
    match damaged.first() {
        Some(d) => anyhow::bail!(
            "{name}: line {}: {}; the store is damaged",
            d.line,
            d.problem
        ),
        None => Ok(reports),
    }
}

/// Parses a store's bytes line by line: the reports that parse, and the lines that do not. A last
/// line without its newline (a write cut short) is neither.
pub fn parse_reports_checked(bytes: &[u8]) -> (Vec<StoredReport>, Vec<DamagedLine>) {
    let complete = match bytes.iter().rposition(|b| *b == b'\n') {
        Some(i) => &bytes[..=i],
        None => &[][..],
    };
    let (mut out, mut damaged) = (Vec::new(), Vec::new());
    for (n, line) in complete.split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(r) => out.push(r),
            Err(e) => damaged.push(DamagedLine {
                line: n + 1,
                problem: format!(
                    "not a report ({:?} error at column {})",
                    e.classify(),
                    e.column()
                ),
            }),
        }
    }
    (out, damaged)
}

/// A store read as it grows, for a reader that looks again and again (`ibi deploy`, every poll, for
/// the whole fleet): each call reads only what was appended since the last one, and only complete
/// lines. A damaged line is skipped with a warning (once), not fatal: one bad line must not blind a
/// deploy to every other host. A store that shrank (its torn tail cut off) is read again from the
/// start.
#[derive(Debug)]
pub struct Tail {
    path: PathBuf,
    offset: u64,
    lines: usize,
}

impl Tail {
    pub fn new(dir: &Path) -> Tail {
        Tail {
            path: dir.join(REPORTS_FILE),
            offset: 0,
            lines: 0,
        }
    }

    /// The reports appended since the last call (every report at the first).
    pub fn read_new(&mut self) -> Result<Vec<StoredReport>> {
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("opening {}", self.path.display())),
        };
        let context = || format!("reading {}", self.path.display());
        let len = file.metadata().with_context(context)?.len();
        if len < self.offset {
            (self.offset, self.lines) = (0, 0);
        }
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.take(len - self.offset).read_to_end(&mut bytes))
            .with_context(context)?;
        let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
            return Ok(Vec::new());
        };
        self.offset += end as u64 + 1;
        let mut out = Vec::new();
        for line in bytes[..end].split(|b| *b == b'\n') {
            self.lines += 1;
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice(line) {
                Ok(r) => out.push(r),
                Err(e) => tracing::warn!(
                    "{}: line {}: not a report ({:?} error at column {}); skipped",
                    self.path.display(),
                    self.lines,
                    e.classify(),
                    e.column()
                ),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::agent_status::Status;
    use crate::contract::host_report::{HostIdentity, REPORT_VERSION, ReportingAgent};

    fn report(host: &str, received: u64) -> StoredReport {
        StoredReport {
            received,
            client: "127.0.0.1:40000".into(),
            site: None,
            report: HostReport {
                version: REPORT_VERSION,
                agent: ReportingAgent::Ibi,
                host: HostIdentity {
                    hostname: host.into(),
                    ..HostIdentity::default()
                },
                status: Status::idle(received),
                finished: false,
                logs: vec!["a log line".into()],
            },
        }
    }

    #[test]
    fn appends_survive_reopening_in_order() {
        let d = tempfile::tempdir().unwrap();
        assert!(load_reports(d.path()).unwrap().is_empty());
        let mut s = ReportStore::open(d.path()).unwrap();
        s.append(&report("a", 1)).unwrap();
        s.append(&report("b", 2)).unwrap();
        drop(s);
        let mut s = ReportStore::open(d.path()).unwrap();
        s.append(&report("c", 3)).unwrap();
        let got: Vec<String> = load_reports(d.path())
            .unwrap()
            .into_iter()
            .map(|r| r.report.host.hostname)
            .collect();
        assert_eq!(got, ["a", "b", "c"]);
        use std::os::unix::fs::MetadataExt;
        let mode = std::fs::metadata(d.path().join(REPORTS_FILE))
            .unwrap()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_torn_last_line_is_ignored_then_cut_off() {
        let d = tempfile::tempdir().unwrap();
        let mut s = ReportStore::open(d.path()).unwrap();
        s.append(&report("a", 1)).unwrap();
        drop(s);
        let path = d.path().join(REPORTS_FILE);
        let whole = serde_json::to_string(&report("b", 2)).unwrap();
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        // Cut in the middle, and even a complete object without its newline: not committed.
        f.write_all(&whole.as_bytes()[..whole.len() / 2]).unwrap();
        assert_eq!(load_reports(d.path()).unwrap().len(), 1);
        f.write_all(&whole.as_bytes()[whole.len() / 2..]).unwrap();
        assert_eq!(load_reports(d.path()).unwrap().len(), 1);
        let mut s = ReportStore::open(d.path()).unwrap();
        s.append(&report("c", 3)).unwrap();
        let got: Vec<String> = load_reports(d.path())
            .unwrap()
            .into_iter()
            .map(|r| r.report.host.hostname)
            .collect();
        assert_eq!(got, ["a", "c"]);
    }

    #[test]
    fn a_tail_reads_each_complete_line_once_and_skips_damage() {
        let d = tempfile::tempdir().unwrap();
        let mut tail = Tail::new(d.path());
        assert!(tail.read_new().unwrap().is_empty(), "no store yet");
        let mut s = ReportStore::open(d.path()).unwrap();
        s.append(&report("a", 1)).unwrap();
        let names = |v: Vec<StoredReport>| -> Vec<String> {
            v.into_iter().map(|r| r.report.host.hostname).collect()
        };
        assert_eq!(names(tail.read_new().unwrap()), ["a"]);
        assert!(tail.read_new().unwrap().is_empty());
        let path = d.path().join(REPORTS_FILE);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"damaged\": 1}\n").unwrap();
        s.append(&report("b", 2)).unwrap();
        let half = serde_json::to_string(&report("c", 3)).unwrap();
        f.write_all(&half.as_bytes()[..10]).unwrap();
        assert_eq!(
            names(tail.read_new().unwrap()),
            ["b"],
            "damage skipped, torn line not yet"
        );
        f.write_all(&half.as_bytes()[10..]).unwrap();
        f.write_all(b"\n").unwrap();
        assert_eq!(names(tail.read_new().unwrap()), ["c"]);
        // Cut back (a torn tail removed): read again from the start.
        drop(f);
        std::fs::write(
            &path,
            format!("{}\n", serde_json::to_string(&report("d", 4)).unwrap()),
        )
        .unwrap();
        assert_eq!(names(tail.read_new().unwrap()), ["d"]);
    }

    #[test]
    fn a_file_that_is_all_torn_is_emptied() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".ibi")).unwrap();
        std::fs::write(d.path().join(REPORTS_FILE), "{\"recei").unwrap();
        assert!(load_reports(d.path()).unwrap().is_empty());
        ReportStore::open(d.path()).unwrap();
        assert_eq!(std::fs::read(d.path().join(REPORTS_FILE)).unwrap(), b"");
    }

    #[test]
    fn damage_in_the_middle_names_the_line_not_the_content() {
        let line = serde_json::to_string(&report("a", 1)).unwrap();
        let text = format!("{line}\n{{\"MARKER-secret\": 1}}\n{line}\n");
        let err = format!("{:#}", parse_reports("S", text.as_bytes()).unwrap_err());
        assert!(
            err.starts_with("S: line 2: not a report (Data error at column"),
            "{err}"
        );
        assert!(!err.contains("MARKER"), "{err}");
        let (reports, damaged) = parse_reports_checked(format!("{text}x\n{line}").as_bytes());
        assert_eq!(reports.len(), 2, "the lines around the damage still count");
        let lines: Vec<usize> = damaged.iter().map(|d| d.line).collect();
        assert_eq!(lines, [2, 4]);
        assert!(!format!("{damaged:?}").contains("MARKER"));
    }
}
