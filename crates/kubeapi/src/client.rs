//! The transport: blocking reqwest on native-tls, that is the system OpenSSL. The server is trusted
//! through the kubeconfig's CA bundle only (never the system store as well, so a public CA cannot
//! vouch for a cluster's API); the client proves itself with the kubeconfig's certificate, or a
//! bearer token. Reads only: GET with `Accept: application/json`.

use std::time::Duration;

use openssl::pkey::PKey;
use reqwest::blocking::Client as Http;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue};
use reqwest::{Certificate, Identity, Url};
use serde::de::DeserializeOwned;
use tracing::debug;

use super::error::{ApiError, TransportFailure, classify, innermost};
use super::kubeconfig::{Access, ClientAuth};
use super::objects::{List, READYZ_PATH, Status};
use util::secret::Secret;
use util::text::clip;

/// The most characters of a server's error text kept in a message.
const MAX_DETAIL: usize = 300;

#[derive(Debug, Clone, Copy)]
pub struct ClientOptions {
    /// The bound on opening a connection (a host that is off, or drops packets).
    pub connect_timeout: Duration,
    /// The bound on one whole request.
    pub request_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// One API server, reached with one kubeconfig context's credentials.
pub struct Client {
    http: Http,
    server: Url,
    origin: String,
    token: Option<Secret>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server", &self.origin)
            .finish_non_exhaustive()
    }
}

/// `/readyz`'s answer: whether it said `ok`, its status and its text (the failing checks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub ok: bool,
    pub status: u16,
    pub text: String,
}

impl Client {
    /// Sets the client up; nothing is sent yet.
    pub fn new(access: &Access, opts: ClientOptions) -> Result<Self, ApiError> {
        let origin = origin_of(&access.server);
        let setup = |detail: String| ApiError::Setup {
            server: origin.clone(),
            detail,
        };
        let mut b = Http::builder()
            .user_agent(concat!("ibi/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(opts.connect_timeout)
            .timeout(opts.request_timeout)
            .https_only(true);
        if let Some(pem) = &access.ca_pem {
            let certs = Certificate::from_pem_bundle(pem)
                .map_err(|e| setup(format!("certificate-authority-data: {}", innermost(&e))))?;
            if certs.is_empty() {
                return Err(setup(
                    "certificate-authority-data holds no certificate".into(),
                ));
            }
            b = b.tls_certs_only(certs);
        }
        let token = match &access.auth {
            ClientAuth::Certificate { cert_pem, key_pem } => {
                b = b.identity(identity(cert_pem, key_pem).map_err(|e| setup(e.to_string()))?);
                None
            }
            ClientAuth::Token(t) => Some(t.clone()),
        };
        let http = b.build().map_err(|e| setup(innermost(&e)))?;
        Ok(Self {
            http,
            server: access.server.clone(),
            origin,
            token,
        })
    }

    /// `https://host:port`, the name messages use for the server.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Asks `/readyz`. Any HTTP answer but 401/403 is a [`Health`]; no answer is an error.
    pub fn readyz(&self) -> Result<Health, ApiError> {
        let (status, body) = self.get(READYZ_PATH)?;
        self.refuse_auth(READYZ_PATH, status, &body)?;
        let text = String::from_utf8_lossy(&body).trim().to_string();
        Ok(Health {
            ok: status == 200 && text == "ok",
            status,
            text: truncate(&text),
        })
    }

    /// GETs one object; `None` when the server says 404.
    pub fn get_object<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>, ApiError> {
        let (status, body) = self.get(path)?;
        if status == 404 {
            return Ok(None);
        }
        self.decode(path, status, &body).map(Some)
    }

    /// GETs a collection's items.
    pub fn list<T: DeserializeOwned>(&self, path: &str) -> Result<Vec<T>, ApiError> {
        let (status, body) = self.get(path)?;
        self.decode::<List<T>>(path, status, &body).map(|l| l.items)
    }

    fn decode<T: DeserializeOwned>(
        &self,
        path: &str,
        status: u16,
        body: &[u8],
    ) -> Result<T, ApiError> {
        self.refuse_auth(path, status, body)?;
        if status != 200 {
            return Err(ApiError::Status {
                server: self.origin.clone(),
                call: call(path),
                code: status,
                message: status_message(body),
            });
        }
        serde_json::from_slice(body).map_err(|e| ApiError::Protocol {
            server: self.origin.clone(),
            call: call(path),
            detail: format!("not the JSON expected: {e}"),
        })
    }

    /// 401 and 403 are answers no wait will change.
    fn refuse_auth(&self, path: &str, status: u16, body: &[u8]) -> Result<(), ApiError> {
        match status {
            401 => Err(ApiError::Unauthorized {
                server: self.origin.clone(),
                call: call(path),
            }),
            403 => Err(ApiError::Forbidden {
                server: self.origin.clone(),
                call: call(path),
                message: status_message(body),
            }),
            _ => Ok(()),
        }
    }

    /// One GET: its status and body, or why there was no answer.
    fn get(&self, path: &str) -> Result<(u16, Vec<u8>), ApiError> {
        // A server URL with a path (a proxy in front of several clusters) keeps it as a prefix.
        let mut url = self.server.clone();
        let prefix = self.server.path().trim_end_matches('/').to_string();
        url.set_path(&format!("{prefix}{path}"));
        let mut req = self.http.get(url).header(ACCEPT, "application/json");
        if let Some(t) = &self.token {
            let mut v =
                HeaderValue::from_str(&format!("Bearer {}", t.expose_str())).map_err(|_| {
                    ApiError::Setup {
                        server: self.origin.clone(),
                        detail: "the token is not a valid HTTP header value".into(),
                    }
                })?;
            v.set_sensitive(true);
            req = req.header(AUTHORIZATION, v);
        }
        debug!(target: "ibi::kubeapi::client", server = %self.origin, path, "GET");
        let answer = req
            .send()
            .and_then(|r| {
                let status = r.status().as_u16();
                r.bytes().map(|b| (status, b.to_vec()))
            })
            .map_err(|e| self.transport(path, &e))?;
        debug!(target: "ibi::kubeapi::client", server = %self.origin, path, status = answer.0, "answer");
        Ok(answer)
    }

    fn transport(&self, path: &str, e: &reqwest::Error) -> ApiError {
        let (server, call) = (self.origin.clone(), call(path));
        let detail = if e.is_timeout() {
            "no answer in time (timed out)".to_string()
        } else {
            innermost(e)
        };
        match classify(e) {
            TransportFailure::ServerNotTrusted => ApiError::ServerNotTrusted {
                server,
                call,
                detail,
            },
            TransportFailure::ClientCertificateRefused => ApiError::ClientCertificateRefused {
                server,
                call,
                detail,
            },
            TransportFailure::Unreachable => ApiError::Unreachable {
                server,
                call,
                detail,
            },
        }
    }
}

/// Why a kubeconfig's client certificate and key make no TLS identity; never quotes the key.
#[derive(Debug, thiserror::Error)]
enum BadIdentity {
    #[error("client-key-data: not a PEM private key")]
    Key,
    #[error("client-key-data: re-encoding the key: {0}")]
    Reencoding(openssl::error::ErrorStack),
    #[error("client-certificate-data: not a PEM certificate")]
    Certificate,
    #[error(
        "client-certificate-data and client-key-data do not belong together (the key is not the certificate's)"
    )]
    Mismatch,
    /// native-tls's innermost cause.
    #[error("{0}")]
    Tls(String),
}

/// native-tls takes PKCS#8 only; the installer (and ibi) write PKCS#1 (`RSA PRIVATE KEY`), so the
/// key is read by OpenSSL and handed over re-encoded.
fn identity(cert_pem: &[u8], key_pem: &Secret<Vec<u8>>) -> Result<Identity, BadIdentity> {
    let key = PKey::private_key_from_pem(key_pem.expose()).map_err(|_| BadIdentity::Key)?;
    let pkcs8: Secret<Vec<u8>> = Secret::new(
        key.private_key_to_pem_pkcs8()
            .map_err(BadIdentity::Reencoding)?,
    );
    let cert = openssl::x509::X509::from_pem(cert_pem).map_err(|_| BadIdentity::Certificate)?;
    let matches = cert
        .public_key()
        .map(|p| p.public_eq(&key))
        .unwrap_or(false);
    if !matches {
        return Err(BadIdentity::Mismatch);
    }
    Identity::from_pkcs8_pem(cert_pem, pkcs8.expose()).map_err(|e| BadIdentity::Tls(innermost(&e)))
}

fn call(path: &str) -> String {
    format!("GET {path}")
}

fn origin_of(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port_or_known_default() {
        Some(p) => format!("{}://{host}:{p}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    }
}

/// A `Status` body's message, else the body's start as text.
fn status_message(body: &[u8]) -> String {
    match serde_json::from_slice::<Status>(body) {
        Ok(s) if !s.message.is_empty() => truncate(&s.message),
        _ => truncate(String::from_utf8_lossy(body).trim()),
    }
}

fn truncate(text: &str) -> String {
    clip(text, MAX_DETAIL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_messages_come_from_the_status_object_or_the_text() {
        let status = br#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes is forbidden: User \"x\" cannot list","reason":"Forbidden","code":403}"#;
        assert_eq!(
            status_message(status),
            "nodes is forbidden: User \"x\" cannot list"
        );
        assert_eq!(status_message(b"  upstream down \n"), "upstream down");
        assert_eq!(truncate(&"é".repeat(400)).chars().count(), MAX_DETAIL + 1);
    }

    #[test]
    fn a_key_that_is_not_the_certificates_is_refused_without_quoting_it() {
        let key = openssl::rsa::Rsa::generate(2048).unwrap();
        let other = openssl::rsa::Rsa::generate(2048).unwrap();
        let cert = self_signed(&PKey::from_rsa(other).unwrap());
        let key_pem = Secret::new(key.private_key_to_pem().unwrap());
        let e = identity(&cert, &key_pem).unwrap_err().to_string();
        assert!(e.contains("do not belong together"), "{e}");
        let e = identity(&cert, &Secret::new(b"MARKER not a key".to_vec()))
            .unwrap_err()
            .to_string();
        assert!(!e.contains("MARKER"), "{e}");
    }

    #[test]
    fn a_pkcs1_key_is_accepted() {
        let key = PKey::from_rsa(openssl::rsa::Rsa::generate(2048).unwrap()).unwrap();
        let cert = self_signed(&key);
        let pkcs1 = key.rsa().unwrap().private_key_to_pem().unwrap();
        assert!(String::from_utf8_lossy(&pkcs1).starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        identity(&cert, &Secret::new(pkcs1)).unwrap();
    }

    fn self_signed(key: &PKey<openssl::pkey::Private>) -> Vec<u8> {
        let mut name = openssl::x509::X509NameBuilder::new().unwrap();
        name.append_entry_by_text("CN", "t").unwrap();
        let name = name.build();
        let mut b = openssl::x509::X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(key).unwrap();
        b.set_not_before(&openssl::asn1::Asn1Time::days_from_now(0).unwrap())
            .unwrap();
        b.set_not_after(&openssl::asn1::Asn1Time::days_from_now(1).unwrap())
            .unwrap();
        b.sign(key, openssl::hash::MessageDigest::sha256()).unwrap();
        b.build().to_pem().unwrap()
    }

    #[test]
    fn origins_name_the_port() {
        let u = Url::parse("https://api.sno.example.com:6443/").unwrap();
        assert_eq!(origin_of(&u), "https://api.sno.example.com:6443");
        let u = Url::parse("https://k.example.com/").unwrap();
        assert_eq!(origin_of(&u), "https://k.example.com:443");
    }
}
