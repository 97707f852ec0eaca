//! X.509 construction that reproduces what the installer's Go code (crypto/x509 defaults) emits, so the
//! certificates recert and kube-apiserver receive look like the ones an installer run would have made.
//!
//! Go details kept on purpose: subject RDNs in `pkix.Name` order (O, OU, then CN); PrintableString where
//! the value allows it, UTF8String otherwise; extensions in the order KeyUsage, ExtKeyUsage,
//! BasicConstraints, SubjectKeyId, AuthorityKeyId; no AuthorityKeyId on self-signed certificates.

use std::fmt;

use anyhow::{Context, Result};
use openssl::asn1::{Asn1Integer, Asn1Object, Asn1OctetString, Asn1Time, Asn1TimeRef, Asn1Type};
use openssl::bn::BigNum;
use openssl::hash::{MessageDigest, hash};
use openssl::nid::Nid;
use openssl::pkey::{PKey, PKeyRef, Private};
use openssl::rsa::Rsa;
use openssl::x509::extension::{BasicConstraints, ExtendedKeyUsage, KeyUsage};
use openssl::x509::{X509, X509Builder, X509Extension, X509Name, X509NameBuilder, X509NameRef};
use serde::{Deserialize, Serialize};

/// One PEM certificate and its PKCS#1 PEM private key.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
pub struct CertKey {
    pub cert_pem: String,
    pub key_pem: String,
}

/// Keeps private keys out of logs and panic messages.
impl fmt::Debug for CertKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertKey")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

const SECONDS_PER_DAY: i64 = 24 * 60 * 60;
const OID_SUBJECT_KEY_ID: &str = "2.5.29.14";
const OID_AUTHORITY_KEY_ID: &str = "2.5.29.35";

/// A distinguished name with the only attributes the installer's certificates use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Subject<'a> {
    pub cn: &'a str,
    pub ou: Option<&'a str>,
    pub o: Option<&'a str>,
}

impl Subject<'_> {
    /// Renders in DER order, e.g. `OU=openshift, CN=admin-kubeconfig-signer`, for comparisons and errors.
    pub(super) fn render(&self) -> String {
        self.rdns()
            .map(|(nid, value)| format!("{}={value}", short_name(nid)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The attributes in Go's `pkix.Name.ToRDNSequence` order.
    fn rdns(&self) -> impl Iterator<Item = (Nid, &str)> {
        [
            (Nid::ORGANIZATIONNAME, self.o),
            (Nid::ORGANIZATIONALUNITNAME, self.ou),
            (Nid::COMMONNAME, Some(self.cn)),
        ]
        .into_iter()
        .filter_map(|(nid, value)| value.map(|v| (nid, v)))
    }

    fn to_name(self) -> Result<X509Name> {
        let mut builder = X509NameBuilder::new()?;
        for (nid, value) in self.rdns() {
            builder
                .append_entry_by_nid_with_type(nid, value, go_string_type(value))
                .with_context(|| format!("adding {}={value} to a subject", short_name(nid)))?;
        }
        Ok(builder.build())
    }
}

/// Renders any parsed name the same way as [`Subject::render`].
pub(super) fn render_name(name: &X509NameRef) -> String {
    name.entries()
        .map(|entry| {
            let value = entry.data().to_string().unwrap_or_default();
            format!("{}={value}", short_name(entry.object().nid()))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn short_name(nid: Nid) -> &'static str {
    nid.short_name().unwrap_or("?")
}

/// Go's encoding/asn1 writes PrintableString when every byte is in its set, else UTF8String.
fn go_string_type(value: &str) -> Asn1Type {
    let printable = value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b" '()+,-./:=?".contains(&b));
    if printable {
        Asn1Type::PRINTABLESTRING
    } else {
        Asn1Type::UTF8STRING
    }
}

/// A generated certificate with its key, kept parsed so the admin signer can sign without re-parsing PEM.
pub(super) struct Issued {
    pub cert: X509,
    pub key: PKey<Private>,
    pub pair: CertKey,
}

/// Builds a self-signed CA certificate valid from `now` for `days`, as the installer's signers are.
pub(super) fn self_signed_ca(
    rsa: Rsa<Private>,
    subject: Subject<'_>,
    now: i64,
    days: u32,
) -> Result<Issued> {
    let key_pem = pem_string(rsa.private_key_to_pem()?)?;
    let ski = subject_key_id(&rsa)?;
    let key = PKey::from_rsa(rsa)?;
    let name = subject.to_name()?;
    let mut builder = base_builder(&name, &name, &key, &*Asn1Time::from_unix(now)?, now, days)?;
    let usage = KeyUsage::new()
        .critical()
        .key_encipherment()
        .digital_signature()
        .key_cert_sign()
        .build()?;
    builder.append_extension(usage)?;
    builder.append_extension(BasicConstraints::new().critical().ca().build()?)?;
    builder.append_extension(subject_key_id_extension(&ski)?)?;
    builder.sign(&key, MessageDigest::sha256())?;
    let cert = builder.build();
    let cert_pem = pem_string(cert.to_pem()?)?;
    Ok(Issued {
        cert,
        key,
        pair: CertKey { cert_pem, key_pem },
    })
}

/// Builds the `system:admin` client certificate signed by `signer`, backdated to the signer's NotBefore
/// like the installer's signed certificates, with the signer's key id as AuthorityKeyId.
pub(super) fn client_cert(
    rsa: Rsa<Private>,
    subject: Subject<'_>,
    signer: &Issued,
    now: i64,
    days: u32,
) -> Result<CertKey> {
    let key_pem = pem_string(rsa.private_key_to_pem()?)?;
    let ski = subject_key_id(&rsa)?;
    let key = PKey::from_rsa(rsa)?;
    let name = subject.to_name()?;
    let mut builder = base_builder(
        &name,
        signer.cert.subject_name(),
        &key,
        signer.cert.not_before(),
        now,
        days,
    )?;
    let usage = KeyUsage::new()
        .critical()
        .digital_signature()
        .key_encipherment()
        .build()?;
    builder.append_extension(usage)?;
    builder.append_extension(
        ExtendedKeyUsage::new()
            .server_auth()
            .client_auth()
            .build()?,
    )?;
    builder.append_extension(BasicConstraints::new().critical().build()?)?;
    builder.append_extension(subject_key_id_extension(&ski)?)?;
    if let Some(authority) = signer.cert.subject_key_id() {
        builder.append_extension(authority_key_id_extension(authority.as_slice())?)?;
    }
    builder.sign(&signer.key, MessageDigest::sha256())?;
    let cert_pem = pem_string(builder.build().to_pem()?)?;
    Ok(CertKey { cert_pem, key_pem })
}

/// The fields every certificate shares: v3, a random serial, the names, the key and the validity window.
fn base_builder(
    subject: &X509NameRef,
    issuer: &X509NameRef,
    key: &PKeyRef<Private>,
    not_before: &Asn1TimeRef,
    now: i64,
    days: u32,
) -> Result<X509Builder> {
    let mut builder = X509Builder::new()?;
    builder.set_version(2)?;
    builder.set_serial_number(&*random_serial()?)?;
    builder.set_subject_name(subject)?;
    builder.set_issuer_name(issuer)?;
    builder.set_pubkey(key)?;
    builder.set_not_before(not_before)?;
    let not_after = now + i64::from(days) * SECONDS_PER_DAY;
    builder.set_not_after(&*Asn1Time::from_unix(not_after)?)?;
    Ok(builder)
}

/// A serial drawn uniformly from [0, 2^63−1), the range of Go's `rand.Int(rand.Reader, MaxInt64)`.
fn random_serial() -> Result<Asn1Integer> {
    let bound = BigNum::from_slice(&i64::MAX.to_be_bytes())?;
    let mut serial = BigNum::new()?;
    bound
        .rand_range(&mut serial)
        .context("drawing a certificate serial")?;
    Ok(serial.to_asn1_integer()?)
}

/// SHA-1 of the PKCS#1 `RSAPublicKey` DER, the installer's SubjectKeyId rule.
pub(super) fn subject_key_id(rsa: &Rsa<Private>) -> Result<Vec<u8>> {
    Ok(hash(MessageDigest::sha1(), &rsa.public_key_to_der_pkcs1()?)?.to_vec())
}

/// A SubjectKeyIdentifier extension (`OCTET STRING keyid`), encoded by hand: OpenSSL's helper would
/// compute the id itself, and the installer's rule is ours to state.
fn subject_key_id_extension(key_id: &[u8]) -> Result<X509Extension> {
    let len = key_id_len(key_id)?;
    raw_extension(OID_SUBJECT_KEY_ID, &[&[0x04, len][..], key_id].concat())
}

/// An AuthorityKeyIdentifier extension holding only the key id (`SEQUENCE { [0] keyid }`), as Go writes it.
fn authority_key_id_extension(key_id: &[u8]) -> Result<X509Extension> {
    let len = key_id_len(key_id)?;
    raw_extension(
        OID_AUTHORITY_KEY_ID,
        &[&[0x30, len + 2, 0x80, len][..], key_id].concat(),
    )
}

/// Key ids are 20-byte SHA-1 digests; the short DER length form needs them under 126 bytes.
fn key_id_len(key_id: &[u8]) -> Result<u8> {
    u8::try_from(key_id.len())
        .ok()
        .filter(|len| *len < 126)
        .with_context(|| format!("key identifier of {} bytes is too long", key_id.len()))
}

fn raw_extension(oid: &str, der: &[u8]) -> Result<X509Extension> {
    let value = Asn1OctetString::new_from_bytes(der)?;
    Ok(X509Extension::new_from_der(
        &*Asn1Object::from_str(oid)?,
        false,
        &value,
    )?)
}

fn pem_string(pem: Vec<u8>) -> Result<String> {
    String::from_utf8(pem).context("OpenSSL produced PEM that is not UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_string_types() {
        for (value, expected) in [
            ("admin-kubeconfig-signer", Asn1Type::PRINTABLESTRING),
            ("system:masters", Asn1Type::PRINTABLESTRING),
            ("openshift", Asn1Type::PRINTABLESTRING),
            ("ingress-operator@1760000000", Asn1Type::UTF8STRING),
            ("a*b", Asn1Type::UTF8STRING),
            ("café", Asn1Type::UTF8STRING),
        ] {
            assert_eq!(go_string_type(value), expected, "{value}");
        }
    }

    #[test]
    fn subject_renders_in_go_rdn_order() {
        let s = Subject {
            cn: "system:admin",
            ou: None,
            o: Some("system:masters"),
        };
        assert_eq!(s.render(), "O=system:masters, CN=system:admin");
        assert_eq!(render_name(&s.to_name().unwrap()), s.render());
        let s = Subject {
            cn: "x",
            ou: Some("openshift"),
            o: None,
        };
        assert_eq!(s.render(), "OU=openshift, CN=x");
    }

    #[test]
    fn key_id_extensions_have_the_expected_der() {
        let id = [0xab; 20];
        let ski = subject_key_id_extension(&id).unwrap();
        let aki = authority_key_id_extension(&id).unwrap();
        // Wrap them in a throwaway certificate so OpenSSL parses them back.
        let rsa = Rsa::generate(1024).unwrap();
        let key = PKey::from_rsa(rsa).unwrap();
        let name = Subject {
            cn: "t",
            ou: None,
            o: None,
        }
        .to_name()
        .unwrap();
        let mut b =
            base_builder(&name, &name, &key, &Asn1Time::from_unix(0).unwrap(), 0, 1).unwrap();
        b.append_extension(ski).unwrap();
        b.append_extension(aki).unwrap();
        b.sign(&key, MessageDigest::sha256()).unwrap();
        let cert = b.build();
        assert_eq!(cert.subject_key_id().unwrap().as_slice(), &id);
        assert_eq!(cert.authority_key_id().unwrap().as_slice(), &id);
    }

    #[test]
    fn serials_stay_below_2_pow_63_minus_1() {
        let bound = BigNum::from_slice(&i64::MAX.to_be_bytes()).unwrap();
        for _ in 0..1_000 {
            let serial = random_serial().unwrap().to_bn().unwrap();
            assert!(serial < bound && !serial.is_negative(), "{serial}");
        }
    }
}
