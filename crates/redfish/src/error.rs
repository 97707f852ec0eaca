//! What a Redfish call can fail with. Callers branch on the kind (a slot that refuses an action is
//! skipped, a 409 on power-on is retried), and every message names the BMC and the call, so a user
//! with forty BMCs knows which one said what.

use serde_json::Value;

use util::text::clip;

/// The most characters of a BMC's own error text kept in a message: some answer with HTML pages.
const MAX_DETAIL: usize = 300;

/// A failed Redfish call. `bmc` is `scheme://host:port` (never credentials), `call` is
/// `METHOD /path`.
#[derive(Debug, thiserror::Error)]
pub enum RedfishError {
    #[error("BMC {bmc}: {call}: authentication refused (HTTP {status}): {}", if *.user_given {
        "check the user and password"
    } else {
        "no user was given"
    })]
    Unauthorized {
        bmc: String,
        call: String,
        status: u16,
        /// Whether credentials were sent: without, the advice is to give some, not to check them.
        user_given: bool,
    },
    #[error("BMC {bmc}: {call}: not found (HTTP 404){}", detail_suffix(.message))]
    NotFound {
        bmc: String,
        call: String,
        message: String,
    },
    #[error("BMC {bmc}: {call}: HTTP {status}{}", detail_suffix(.message))]
    Status {
        bmc: String,
        call: String,
        status: u16,
        /// The BMC's message ids (`Base.1.8.ActionParameterMissing`), for callers that branch on them.
        message_ids: Vec<String>,
        message: String,
    },
    #[error("BMC {bmc}: {call}: no answer within {seconds} s")]
    Timeout {
        bmc: String,
        call: String,
        seconds: u64,
    },
    #[error("BMC {bmc}: {call}: {}: {detail}", if *.ca_given {
        "the BMC's TLS certificate did not verify against the CA given"
    } else {
        "the BMC's TLS certificate is not trusted"
    })]
    Tls {
        bmc: String,
        call: String,
        detail: String,
        /// Whether it was checked against a CA the user gave (`Trust::Ca`), not the system's.
        ca_given: bool,
    },
    #[error("BMC {bmc}: {call}: connection failed: {detail}")]
    Connection {
        bmc: String,
        call: String,
        detail: String,
    },
    #[error("BMC {bmc}: {call}: unexpected answer: {detail}")]
    Protocol {
        bmc: String,
        call: String,
        detail: String,
    },
    #[error("BMC {bmc}: task {task} ended {state}{}", detail_suffix(.message))]
    TaskFailed {
        bmc: String,
        task: String,
        state: String,
        message: String,
    },
}

fn detail_suffix(message: &str) -> String {
    if message.is_empty() {
        String::new()
    } else {
        format!(": {message}")
    }
}

impl RedfishError {
    /// The HTTP status of an answered call, if it was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Unauthorized { status, .. } | Self::Status { status, .. } => Some(*status),
            Self::NotFound { .. } => Some(404),
            _ => None,
        }
    }

    /// Whether the BMC named `id` (a registry-qualified message id, matched on its last part,
    /// e.g. `ActionParameterMissing`) or said `text` in its message.
    pub(crate) fn mentions(&self, id_or_text: &str) -> bool {
        match self {
            Self::Status {
                message_ids,
                message,
                ..
            } => {
                message_ids
                    .iter()
                    .any(|m| m.rsplit('.').next() == Some(id_or_text))
                    || message.contains(id_or_text)
            }
            Self::NotFound { message, .. } => message.contains(id_or_text),
            _ => false,
        }
    }
}

/// Refusals as the client makes them, for tests of the layers that word advice on them.
#[cfg(any(test, feature = "test-support"))]
impl RedfishError {
    pub fn refused_for_test(user_given: bool) -> Self {
        Self::Unauthorized {
            bmc: "https://b".into(),
            call: "GET /redfish/v1/Systems".into(),
            status: 401,
            user_given,
        }
    }

    pub fn untrusted_for_test(ca_given: bool) -> Self {
        Self::Tls {
            bmc: "https://b".into(),
            call: "GET /redfish/v1/".into(),
            detail: "certificate verify failed".into(),
            ca_given,
        }
    }
}

/// The message ids and the readable text of a Redfish error body (`{"error": {"message",
/// "@Message.ExtendedInfo": [{"MessageId", "Message"}]}}`), else the body's start as text.
pub(crate) fn error_details(body: &[u8]) -> (Vec<String>, String) {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        let text = String::from_utf8_lossy(body);
        return (Vec::new(), truncate(text.trim()));
    };
    let err = v.get("error").unwrap_or(&v);
    let infos = err
        .get("@Message.ExtendedInfo")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ids = infos
        .iter()
        .filter_map(|i| i.get("MessageId").and_then(Value::as_str))
        .map(str::to_string)
        .collect();
    let mut texts: Vec<&str> = infos
        .iter()
        .filter_map(|i| i.get("Message").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        texts.extend(err.get("message").and_then(Value::as_str));
    }
    (ids, truncate(&texts.join("; ")))
}

fn truncate(text: &str) -> String {
    clip(text, MAX_DETAIL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_yield_ids_and_text() {
        let cases: [(&[u8], &[&str], &str); 4] = [
            (
                br#"{"error":{"code":"Base.1.0.GeneralError","message":"Cannot download","@Message.ExtendedInfo":[{"MessageId":"Base.1.0.GeneralError"}]}}"#,
                &["Base.1.0.GeneralError"],
                "Cannot download",
            ),
            (
                br#"{"error":{"@Message.ExtendedInfo":[{"MessageId":"Base.1.8.ActionParameterMissing","Message":"TransferProtocolType missing"},{"Message":"again"}]}}"#,
                &["Base.1.8.ActionParameterMissing"],
                "TransferProtocolType missing; again",
            ),
            (b"  plain text\n", &[], "plain text"),
            (b"", &[], ""),
        ];
        for (body, ids, text) in cases {
            let (got_ids, got_text) = error_details(body);
            assert_eq!(got_ids, ids);
            assert_eq!(got_text, text);
        }
    }

    #[test]
    fn long_bodies_are_cut() {
        let body = "x".repeat(1000);
        let (_, text) = error_details(body.as_bytes());
        assert_eq!(text.chars().count(), MAX_DETAIL + 1);
    }

    #[test]
    fn messages_name_the_bmc_and_the_call() {
        let e = RedfishError::Status {
            bmc: "https://10.0.0.9".into(),
            call: "POST /redfish/v1/x".into(),
            status: 400,
            message_ids: vec!["Base.1.8.ActionParameterMissing".into()],
            message: "missing".into(),
        };
        assert_eq!(
            e.to_string(),
            "BMC https://10.0.0.9: POST /redfish/v1/x: HTTP 400: missing"
        );
        assert!(e.mentions("ActionParameterMissing"));
        assert!(!e.mentions("PropertyMissing"));
    }

    #[test]
    fn refusals_say_whether_a_user_or_a_ca_was_given() {
        let refused = RedfishError::refused_for_test;
        let untrusted = RedfishError::untrusted_for_test;
        let cases = [
            (
                refused(true),
                "BMC https://b: GET /redfish/v1/Systems: authentication refused (HTTP 401): check the user and password",
            ),
            (
                refused(false),
                "BMC https://b: GET /redfish/v1/Systems: authentication refused (HTTP 401): no user was given",
            ),
            (
                untrusted(true),
                "BMC https://b: GET /redfish/v1/: the BMC's TLS certificate did not verify against the CA given: certificate verify failed",
            ),
            (
                untrusted(false),
                "BMC https://b: GET /redfish/v1/: the BMC's TLS certificate is not trusted: certificate verify failed",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
        }
    }
}
