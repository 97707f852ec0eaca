//! The server's TLS on the system OpenSSL: the user's certificate and key, or a self-signed one
//! generated once under `DIR/.ibi/` (key 0600) and reused while it still names every host the
//! server answers as. A BMC is then told to trust exactly that certificate (`ibi boot --iso-ca`).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::hash::MessageDigest;
use openssl::pkey::PKey;
use openssl::rsa::Rsa;
use openssl::ssl::{SslAcceptor, SslFiletype, SslMethod};
use openssl::stack::Stack;
use openssl::x509::extension::{
    BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName,
};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::verify::X509VerifyParam;
use openssl::x509::{X509, X509NameBuilder, X509StoreContext};
use tracing::warn;

use crate::util::fs::{Clobber, SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir, write_atomic};

pub const CERT_FILE: &str = ".ibi/serve-tls.crt";
pub const KEY_FILE: &str = ".ibi/serve-tls.key";
/// Ten years: the certificate is pinned in BMCs one by one, so it should not expire under them.
const VALID_DAYS: u32 = 3650;
/// A certificate this close to its end is replaced rather than reused.
const RENEW_DAYS: u32 = 30;
/// RSA rather than ECDSA: older BMC firmware verifies only RSA.
const RSA_BITS: u32 = 2048;

/// A name the certificate must cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    Dns(String),
}

impl Host {
    pub fn parse(s: &str) -> Self {
        let bare = s.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<IpAddr>() {
            Ok(ip) => Host::Ip(ip),
            Err(_) => Host::Dns(s.to_ascii_lowercase()),
        }
    }
}

/// The self-signed certificate and key under `dir`, made (or remade) when missing, expiring, or
/// not naming every host in `hosts`. Returns the paths and whether a new one was made.
pub fn ensure_self_signed(dir: &Path, hosts: &[Host]) -> Result<(PathBuf, PathBuf, bool)> {
    let (cert, key) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
    if cert.is_file() && key.is_file() {
        match reusable(&cert, hosts) {
            Ok(true) => return Ok((cert, key, false)),
            Ok(false) => warn!(
                "{} does not name every host now served ({hosts:?}) or expires soon: making a new one (BMCs that pinned the old one must get the new one)",
                cert.display()
            ),
            Err(e) => warn!("{}: {e:#}; making a new one", cert.display()),
        }
    }
    let (cert_pem, key_pem) = generate(hosts)?;
    ensure_dir(&dir.join(".ibi"), SECRET_DIR_MODE)?;
    write_atomic(&key, &key_pem, SECRET_FILE_MODE, Clobber::Replace)?;
    write_atomic(&cert, &cert_pem, SECRET_FILE_MODE, Clobber::Replace)?;
    Ok((cert, key, true))
}

fn reusable(cert: &Path, hosts: &[Host]) -> Result<bool> {
    let pem = std::fs::read(cert).with_context(|| format!("reading {}", cert.display()))?;
    let x = X509::from_pem(&pem).context("parsing the certificate")?;
    let soon = Asn1Time::days_from_now(RENEW_DAYS)?;
    if x.not_after() < soon {
        return Ok(false);
    }
    let names: Vec<Host> = x
        .subject_alt_names()
        .map(|s| {
            s.iter()
                .filter_map(|n| {
                    n.dnsname()
                        .map(|d| Host::Dns(d.to_ascii_lowercase()))
                        .or_else(|| n.ipaddress().and_then(ip_from_bytes).map(Host::Ip))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(hosts.iter().all(|h| names.contains(h)))
}

fn ip_from_bytes(b: &[u8]) -> Option<IpAddr> {
    match b.len() {
        4 => <[u8; 4]>::try_from(b).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(b).ok().map(IpAddr::from),
        _ => None,
    }
}

/// A self-signed server certificate for `hosts` (PEM certificate, PEM key).
pub fn generate(hosts: &[Host]) -> Result<(Vec<u8>, Vec<u8>)> {
    let key = PKey::from_rsa(Rsa::generate(RSA_BITS)?)?;
    let mut name = X509NameBuilder::new()?;
    name.append_entry_by_text("CN", "ibi serve")?;
    let name = name.build();
    let mut b = X509::builder()?;
    b.set_version(2)?;
    let mut serial = BigNum::new()?;
    serial.rand(127, MsbOption::MAYBE_ZERO, false)?;
    b.set_serial_number(&*serial.to_asn1_integer()?)?;
    b.set_subject_name(&name)?;
    b.set_issuer_name(&name)?;
    b.set_pubkey(&key)?;
    b.set_not_before(&*Asn1Time::days_from_now(0)?)?;
    b.set_not_after(&*Asn1Time::days_from_now(VALID_DAYS)?)?;
    // CA:TRUE as well as serverAuth: a BMC (or curl --cacert) given this file as its trust anchor
    // then accepts it, which is the point of handing it over.
    b.append_extension(BasicConstraints::new().critical().ca().build()?)?;
    b.append_extension(
        KeyUsage::new()
            .critical()
            .digital_signature()
            .key_encipherment()
            .key_cert_sign()
            .build()?,
    )?;
    b.append_extension(ExtendedKeyUsage::new().server_auth().build()?)?;
    let mut san = SubjectAlternativeName::new();
    for h in hosts {
        match h {
            Host::Ip(ip) => san.ip(&ip.to_string()),
            Host::Dns(d) => san.dns(d),
        };
    }
    let san = san
        .build(&b.x509v3_context(None, None))
        .context("building the subject alternative names")?;
    b.append_extension(san)?;
    b.sign(&key, MessageDigest::sha256())?;
    Ok((b.build().to_pem()?, key.private_key_to_pem_pkcs8()?))
}

/// The acceptor: Mozilla's "intermediate" profile (TLS 1.2 and 1.3), which every BMC of the last
/// decade speaks, with the certificate chain and key from these files.
pub fn acceptor(cert: &Path, key: &Path) -> Result<SslAcceptor> {
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server())?;
    b.set_certificate_chain_file(cert)
        .with_context(|| format!("loading the TLS certificate {}", cert.display()))?;
    b.set_private_key_file(key, SslFiletype::PEM)
        .with_context(|| format!("loading the TLS key {}", key.display()))?;
    b.check_private_key()
        .with_context(|| format!("{} is not the key of {}", key.display(), cert.display()))?;
    Ok(b.build())
}

/// Whether a client that trusts only `ca_pem` (or, without it, this machine's system trust store,
/// standing in for the live ISO's) accepts the certificate chain `chain_pem` for `host` (a DNS
/// name or an IP address): what a host reporting to `statusURL` with `statusCA` will find.
pub fn verify_for(chain_pem: &[u8], ca_pem: Option<&str>, host: &Host) -> Result<(), Untrusted> {
    let certs = X509::stack_from_pem(chain_pem).map_err(Untrusted::NotPem)?;
    let Some((leaf, rest)) = certs.split_first() else {
        return Err(Untrusted::NoCertificate);
    };
    let check = || -> Result<Result<(), Untrusted>, openssl::error::ErrorStack> {
        let mut store = X509StoreBuilder::new()?;
        match ca_pem {
            Some(pem) => {
                for ca in X509::stack_from_pem(pem.as_bytes())? {
                    store.add_cert(ca)?;
                }
            }
            None => store.set_default_paths()?,
        }
        let mut param = X509VerifyParam::new()?;
        match host {
            Host::Ip(ip) => param.set_ip(*ip)?,
            Host::Dns(name) => param.set_host(name)?,
        }
        store.set_param(&param)?;
        let store = store.build();
        let mut chain = Stack::new()?;
        for c in rest {
            chain.push(c.clone())?;
        }
        let mut ctx = X509StoreContext::new()?;
        ctx.init(&store, leaf, &chain, |c| {
            Ok(match c.verify_cert()? {
                true => Ok(()),
                false => Err(Untrusted::Refused(c.error())),
            })
        })
    };
    check().map_err(Untrusted::Checking)?
}

/// Why a client would not trust a certificate chain ([`verify_for`]).
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    #[error("not PEM certificates: {0}")]
    NotPem(openssl::error::ErrorStack),
    #[error("no certificate")]
    NoCertificate,
    /// OpenSSL's verdict, e.g. "unable to get local issuer certificate".
    #[error("{}", .0.error_string())]
    Refused(openssl::x509::X509VerifyResult),
    #[error("checking the certificate: {0}")]
    Checking(openssl::error::ErrorStack),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_parse_as_ip_or_lower_case_name() {
        assert_eq!(
            Host::parse("127.0.0.1"),
            Host::Ip("127.0.0.1".parse().unwrap())
        );
        assert_eq!(Host::parse("[::1]"), Host::Ip("::1".parse().unwrap()));
        assert_eq!(
            Host::parse("Files.Example"),
            Host::Dns("files.example".into())
        );
    }

    #[test]
    fn a_certificate_is_made_once_and_remade_for_a_new_host() {
        let d = tempfile::tempdir().unwrap();
        let local = [Host::parse("127.0.0.1")];
        let (cert, key, made) = ensure_self_signed(d.path(), &local).unwrap();
        assert!(made);
        let first = std::fs::read(&cert).unwrap();
        let (_, _, made) = ensure_self_signed(d.path(), &local).unwrap();
        assert!(!made);
        assert_eq!(std::fs::read(&cert).unwrap(), first);
        let both = [Host::parse("127.0.0.1"), Host::parse("ibi.example")];
        let (_, _, made) = ensure_self_signed(d.path(), &both).unwrap();
        assert!(made);
        assert!(reusable(&cert, &both).unwrap());
        let mode = |p: &Path| {
            std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).unwrap().permissions())
                & 0o777
        };
        assert_eq!((mode(&cert), mode(&key)), (0o600, 0o600));
        acceptor(&cert, &key).unwrap();
    }

    #[test]
    fn a_self_signed_certificate_verifies_as_its_own_ca_for_its_hosts_only() {
        let local = Host::parse("127.0.0.1");
        let (cert, _) = generate(std::slice::from_ref(&local)).unwrap();
        let pem = String::from_utf8(cert.clone()).unwrap();
        verify_for(&cert, Some(&pem), &local).unwrap();
        let other = verify_for(&cert, Some(&pem), &Host::parse("192.0.2.7"))
            .unwrap_err()
            .to_string();
        assert!(other.contains("IP address mismatch"), "{other}");
        let (stranger, _) = generate(std::slice::from_ref(&local)).unwrap();
        let stranger = String::from_utf8(stranger).unwrap();
        let err = verify_for(&cert, Some(&stranger), &local)
            .unwrap_err()
            .to_string();
        assert!(err.contains("self-signed certificate"), "{err}");
        let err = verify_for(&cert, None, &local).unwrap_err().to_string();
        assert!(err.contains("self-signed certificate"), "{err}");
    }
}
