//! What a call to the API server can fail with, sorted by what a caller does about it: a server that
//! does not answer yet (keep trying), one that answers with an error status (maybe later), and the
//! failures no wait will cure (a server whose certificate the kubeconfig does not trust, credentials
//! it refuses). Every message names the server and the call.

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{server}: {call}: no answer: {detail}")]
    Unreachable {
        server: String,
        call: String,
        detail: String,
    },
    #[error(
        "{server}: {call}: the API server's certificate is not trusted by the kubeconfig's certificate-authority-data: {detail}"
    )]
    ServerNotTrusted {
        server: String,
        call: String,
        detail: String,
    },
    #[error(
        "{server}: {call}: the API server refused the kubeconfig's client certificate during the TLS handshake: {detail}"
    )]
    ClientCertificateRefused {
        server: String,
        call: String,
        detail: String,
    },
    #[error(
        "{server}: {call}: authentication refused (HTTP 401): the API server does not accept the kubeconfig's credentials"
    )]
    Unauthorized { server: String, call: String },
    #[error("{server}: {call}: forbidden (HTTP 403): {message}")]
    Forbidden {
        server: String,
        call: String,
        message: String,
    },
    #[error("{server}: {call}: HTTP {code}: {message}")]
    Status {
        server: String,
        call: String,
        code: u16,
        message: String,
    },
    #[error("{server}: {call}: unexpected answer: {detail}")]
    Protocol {
        server: String,
        call: String,
        detail: String,
    },
    #[error("{server}: setting up TLS: {detail}")]
    Setup { server: String, detail: String },
}

impl ApiError {
    /// Whether waiting could help: the server did not answer, or answered with a status that may
    /// change (not found yet, 5xx while it starts), or with something we could not read.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Unreachable { .. } | Self::Status { .. } | Self::Protocol { .. }
        )
    }
}

/// How a failed request without an HTTP answer is sorted, from OpenSSL's and hyper's texts along the
/// error chain (the types underneath are not public).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TransportFailure {
    ServerNotTrusted,
    ClientCertificateRefused,
    Unreachable,
}

/// OpenSSL's verification failures of the server's certificate (chain, self-signed, name).
const SERVER_NOT_TRUSTED: [&str; 4] = [
    "certificate verify failed",
    "self-signed certificate",
    "hostname mismatch",
    "IP address mismatch",
];
/// The alerts a server sends when it will not take the client's certificate: `unknown ca` (not
/// signed by a CA it trusts), `bad certificate`, `certificate required` (TLS 1.3: none was sent),
/// `certificate unknown`, `unsupported certificate`.
const CLIENT_REFUSED: [&str; 5] = [
    "alert unknown ca",
    "alert bad certificate",
    "alert certificate required",
    "alert certificate unknown",
    "alert unsupported certificate",
];

pub(crate) fn classify(e: &(dyn std::error::Error + 'static)) -> TransportFailure {
    let mut cur = Some(e);
    while let Some(c) = cur {
        let text = c.to_string();
        if SERVER_NOT_TRUSTED.iter().any(|m| text.contains(m)) {
            return TransportFailure::ServerNotTrusted;
        }
        if CLIENT_REFUSED.iter().any(|m| text.contains(m)) {
            return TransportFailure::ClientCertificateRefused;
        }
        cur = c.source();
    }
    TransportFailure::Unreachable
}

/// The innermost cause's text: the one that says what happened (`Connection refused`, OpenSSL's
/// reason), without reqwest's wrappers around it.
pub(crate) fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Chain(&'static str, Option<Box<Chain>>);
    impl std::fmt::Display for Chain {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Chain {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|c| c as _)
        }
    }

    fn chain(outer: &'static str, inner: &'static str) -> Chain {
        Chain(outer, Some(Box::new(Chain(inner, None))))
    }

    #[test]
    fn failures_are_sorted_by_the_deepest_telling_text() {
        let cases = [
            (
                "error:0A000086:SSL routines:tls_post_process_server_certificate:certificate verify failed:../ssl/statem/statem_clnt.c:2091:",
                TransportFailure::ServerNotTrusted,
            ),
            (
                "error:0A000418:SSL routines:ssl3_read_bytes:tlsv1 alert unknown ca:../ssl/record/rec_layer_s3.c:1605:SSL alert number 48",
                TransportFailure::ClientCertificateRefused,
            ),
            (
                "error:0A00045C:SSL routines:ssl3_read_bytes:tlsv13 alert certificate required",
                TransportFailure::ClientCertificateRefused,
            ),
            (
                "Connection refused (os error 111)",
                TransportFailure::Unreachable,
            ),
        ];
        for (inner, want) in cases {
            let e = chain("error sending request for url (https://h/readyz)", inner);
            assert_eq!(classify(&e), want, "{inner}");
            assert_eq!(innermost(&e), inner);
        }
    }

    #[test]
    fn only_unanswered_and_status_failures_are_worth_waiting_for() {
        let s = || "https://h:6443".to_string();
        let c = || "GET /readyz".to_string();
        assert!(
            ApiError::Unreachable {
                server: s(),
                call: c(),
                detail: "x".into()
            }
            .is_transient()
        );
        assert!(
            !ApiError::ServerNotTrusted {
                server: s(),
                call: c(),
                detail: "x".into()
            }
            .is_transient()
        );
        assert!(
            !ApiError::Unauthorized {
                server: s(),
                call: c()
            }
            .is_transient()
        );
    }
}
