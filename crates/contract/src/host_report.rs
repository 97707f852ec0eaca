//! The host's reports to `ibi serve` (factory phase): what an installation ISO built with `statusURL`
//! posts while it installs, and the per-ISO settings it posts with. Both sides read them here: the
//! host side (`agent::report` for `hostAgent: ibi`, the `ibi-report.sh` script `install_image` writes
//! for `hostAgent: lca`) and the server side (`deliver::serve`, `deliver::report_store`, `ibi status`).
//!
//! A report is the agent's status document ([`super::agent_status::Status`]) plus who sent it (host
//! name, the DMI product UUID, which is the host's Redfish System UUID, and the boot ID) and, on
//! failure, the last lines of the install's journal. It carries no secret: the token travels in the
//! `Authorization` header, and log lines are filtered on the host before they leave it.

use serde::{Deserialize, Serialize};

use super::agent_status::Status;
use util::secret::Secret;

/// Where the installation ISO's Ignition writes the report settings (0600: it holds the token).
pub const REPORT_CONFIG_PATH: &str = "/var/tmp/ibi-report.json";
/// The report endpoint, appended to `statusURL` (one path segment, so it can never be an image's
/// `/<token>/<file>`).
pub const REPORT_ENDPOINT: &str = "reports";
/// The format version of a report body; a server refuses other versions.
pub const REPORT_VERSION: u32 = 1;
/// Largest report body the server reads; bigger bodies are refused with 413.
pub const MAX_REPORT_BYTES: usize = 512 * 1024;
/// Most journal lines one report carries.
pub const MAX_LOG_LINES: usize = 100;
/// Longest journal line, in characters, a report carries; longer ones are cut.
pub const MAX_LOG_LINE_CHARS: usize = 500;
/// Longest text field (host name, step, error) a server accepts.
pub const MAX_FIELD_CHARS: usize = 4096;
/// How often the host tries one report while the server is unreachable, and how long it waits between
/// tries: 30 × 10 s, five minutes, then it gives the report up (the install never waits longer).
pub const DEFAULT_ATTEMPTS: u32 = 30;
pub const DEFAULT_DELAY_SECONDS: u64 = 10;
/// The install unit whose journal `hostAgent: ibi` reports carry.
pub const IBI_INSTALL_UNIT: &str = "ibi-agent-install.service";
/// Where Linux shows the SMBIOS system UUID (the Redfish `UUID` of the System).
pub const PRODUCT_UUID_PATH: &str = "/sys/class/dmi/id/product_uuid";
/// This boot's ID: two reports with the same one come from the same install attempt.
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// `/var/tmp/ibi-report.json`: where and how to report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReportConfig {
    /// `statusURL`: the base URL of `ibi serve` as the host reaches it.
    pub url: String,
    /// Sent as `Authorization: Bearer <token>`; 128 random bits, hex.
    pub token: Secret,
    /// `statusCA`: the only certificates the server's TLS is checked against; absent: the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_pem: Option<String>,
    pub attempts: u32,
    pub delay_seconds: u64,
}

impl ReportConfig {
    /// The URL reports are posted to.
    pub fn endpoint(&self) -> String {
        endpoint(&self.url)
    }
}

/// `statusURL` joined with [`REPORT_ENDPOINT`], whether or not it ends in `/`.
pub fn endpoint(status_url: &str) -> String {
    format!("{}/{REPORT_ENDPOINT}", status_url.trim_end_matches('/'))
}

/// Which program installed the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportingAgent {
    /// `ibi agent install`: one report per step change, the result at the end.
    Ibi,
    /// The installer's unit running `lca-cli ibi`: started, then its end.
    Lca,
}

/// Who sent a report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostIdentity {
    pub hostname: String,
    /// [`PRODUCT_UUID_PATH`], lower case; absent where the firmware gives none or it cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

/// One report body (`POST <statusURL>/reports`, JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostReport {
    pub version: u32,
    pub agent: ReportingAgent,
    pub host: HostIdentity,
    pub status: Status,
    /// The whole install ended; `status.state` says how (`done` or `failed`).
    pub finished: bool,
    /// The last lines of the install's journal, sent with a failure; filtered of secrets on the host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<String>,
}

/// Which of the server's bounds a report breaks; the message names the field, never its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OutOfBounds {
    #[error("version {0} (this server reads version {REPORT_VERSION})")]
    Version(u32),
    #[error("logs: {0} lines, at most {MAX_LOG_LINES}")]
    LogLines(usize),
    #[error("logs[{0}]: longer than {MAX_LOG_LINE_CHARS} characters")]
    LogLine(usize),
    #[error("{0}: longer than {MAX_FIELD_CHARS} characters")]
    Field(&'static str),
}

impl HostReport {
    /// The server's bounds on a report it keeps; the message names the field, never its value.
    pub fn check(&self) -> Result<(), OutOfBounds> {
        if self.version != REPORT_VERSION {
            return Err(OutOfBounds::Version(self.version));
        }
        if self.logs.len() > MAX_LOG_LINES {
            return Err(OutOfBounds::LogLines(self.logs.len()));
        }
        if let Some(n) = self
            .logs
            .iter()
            .position(|l| too_long(l, MAX_LOG_LINE_CHARS))
        {
            return Err(OutOfBounds::LogLine(n));
        }
        let fields = [
            ("host.hostname", Some(&self.host.hostname)),
            ("host.productUuid", self.host.product_uuid.as_ref()),
            ("host.bootId", self.host.boot_id.as_ref()),
            ("status.step", Some(&self.status.step)),
            ("status.error", self.status.error.as_ref()),
        ];
        for (name, value) in fields {
            if value.is_some_and(|v| too_long(v, MAX_FIELD_CHARS)) {
                return Err(OutOfBounds::Field(name));
            }
        }
        Ok(())
    }
}

fn too_long(s: &str, max: usize) -> bool {
    s.len() > max && s.chars().count() > max
}

/// Bounds journal lines for a report: the last [`MAX_LOG_LINES`], each cut to [`MAX_LOG_LINE_CHARS`].
pub fn bound_log_lines<I: IntoIterator<Item = String>>(lines: I) -> Vec<String> {
    let all: Vec<String> = lines.into_iter().collect();
    let skip = all.len().saturating_sub(MAX_LOG_LINES);
    all.into_iter()
        .skip(skip)
        .map(|l| match l.char_indices().nth(MAX_LOG_LINE_CHARS) {
            Some((cut, _)) => l[..cut].to_string(),
            None => l,
        })
        .collect()
}

/// Replaces the password of every `scheme://user:password@` in `line` (a proxy or registry URL in a
/// tool's message) with `<redacted>`: such credentials are not known to the host by value.
pub fn redact_url_credentials(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c.is_whitespace() || c == '"' || c == '\'')
            .unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(userinfo_end) if tail[..userinfo_end].contains(':') => {
                out.push_str("<redacted>");
                rest = &tail[userinfo_end..];
            }
            _ => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> HostReport {
        HostReport {
            version: REPORT_VERSION,
            agent: ReportingAgent::Ibi,
            host: HostIdentity {
                hostname: "sno-a17".into(),
                product_uuid: Some("27946b59-9e44-4fa7-8e91-f3527a1ef094".into()),
                boot_id: Some("1b1c".into()),
            },
            status: Status::idle(1_700_000_000),
            finished: false,
            logs: Vec::new(),
        }
    }

    #[test]
    fn the_body_has_the_status_document_and_the_host() {
        let json = serde_json::to_value(report()).unwrap();
        assert_eq!(json["agent"], "ibi");
        assert_eq!(
            json["host"]["productUuid"],
            "27946b59-9e44-4fa7-8e91-f3527a1ef094"
        );
        assert_eq!(json["status"]["state"], "running");
        assert!(json.get("logs").is_none(), "no logs key without logs");
        let back: HostReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, report());
        let unknown = r#"{"version":1,"agent":"lca","host":{"hostname":"h"},"status":{"step":"","state":"done","started":0,"updated":0,"bytes_done":0,"bytes_total":0,"images":{"pulled":0,"failed":0,"total":0}},"finished":true,"extra":1}"#;
        assert!(serde_json::from_str::<HostReport>(unknown).is_err());
    }

    #[test]
    fn the_server_bounds_are_checked_by_field() {
        let mut r = report();
        r.check().unwrap();
        r.version = 2;
        assert_eq!(
            r.check().unwrap_err().to_string(),
            "version 2 (this server reads version 1)"
        );
        let mut r = report();
        r.logs = vec!["x".into(); MAX_LOG_LINES + 1];
        assert_eq!(
            r.check().unwrap_err().to_string(),
            "logs: 101 lines, at most 100"
        );
        let mut r = report();
        r.logs = vec!["ok".into(), "é".repeat(MAX_LOG_LINE_CHARS + 1)];
        assert_eq!(
            r.check().unwrap_err().to_string(),
            "logs[1]: longer than 500 characters"
        );
        r.logs = vec!["é".repeat(MAX_LOG_LINE_CHARS)];
        r.check().unwrap();
        r.status.error = Some("e".repeat(MAX_FIELD_CHARS + 1));
        assert_eq!(
            r.check().unwrap_err().to_string(),
            "status.error: longer than 4096 characters"
        );
    }

    #[test]
    fn log_lines_are_bounded_in_count_and_length() {
        let lines = (0..150).map(|i| format!("line {i}"));
        let kept = bound_log_lines(lines);
        assert_eq!(kept.len(), MAX_LOG_LINES);
        assert_eq!(kept[0], "line 50");
        let long = bound_log_lines(["é".repeat(600)]);
        assert_eq!(long[0].chars().count(), MAX_LOG_LINE_CHARS);
    }

    #[test]
    fn url_credentials_are_redacted() {
        let cases = [
            (
                "proxyconnect tcp: http://u:p%40ss@proxy:3128 refused",
                "proxyconnect tcp: http://<redacted>@proxy:3128 refused",
            ),
            (
                "a https://x:y@h/p and b http://c:d@e",
                "a https://<redacted>@h/p and b http://<redacted>@e",
            ),
            ("no user: https://host/a@b", "no user: https://host/a@b"),
            ("user only: ssh://git@host/x", "user only: ssh://git@host/x"),
            ("plain text", "plain text"),
        ];
        for (line, want) in cases {
            assert_eq!(redact_url_credentials(line), want, "{line}");
        }
    }

    #[test]
    fn the_endpoint_joins_one_slash() {
        assert_eq!(endpoint("https://h:8443"), "https://h:8443/reports");
        assert_eq!(
            endpoint("https://h:8443/ibi/"),
            "https://h:8443/ibi/reports"
        );
    }
}
