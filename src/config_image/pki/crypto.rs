//! The site's signers and certificates: key generation (RSA-2048, PKCS#1 PEM), the certificate chain the admin kubeconfig trusts, and their Debug that never shows a key.

use super::cert::CertKey;
use super::password::hash_kubeadmin_password;
#[cfg(any(test, feature = "test-support"))]
use super::pool::all_cores;
use std::num::NonZeroUsize;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, ensure};
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use openssl::x509::{X509, X509KeyUsage};
use serde::{Deserialize, Serialize};

use super::cert::{Issued, Subject};

/// Installer asset names. The first four double as CNs, and recert's `use_key_rules` match the
/// serving-signer CNs (lifecycle-agent.md §2.2), so they must not drift.
pub const ADMIN_KUBECONFIG_SIGNER: &str = "admin-kubeconfig-signer";
pub const ADMIN_KUBECONFIG_CLIENT: &str = "admin-kubeconfig-client";
pub const KUBE_APISERVER_LOCALHOST_SIGNER: &str = "kube-apiserver-localhost-signer";
pub const KUBE_APISERVER_SERVICE_NETWORK_SIGNER: &str = "kube-apiserver-service-network-signer";
pub const KUBE_APISERVER_LB_SIGNER: &str = "kube-apiserver-lb-signer";
pub const INGRESS_OPERATOR_SIGNER: &str = "ingress-operator-signer";
/// Prefix of the ingress signer CN; recert's `cn_san_replace_rules` swaps the seed's CN for ours.
pub const INGRESS_CN_PREFIX: &str = "ingress-operator@";
/// The OU of every signer except the ingress one.
const OPENSHIFT_OU: &str = "openshift";
/// The admin client identity; `system:masters` is what grants cluster-admin.
const ADMIN_CLIENT_CN: &str = "system:admin";
const ADMIN_CLIENT_O: &str = "system:masters";
/// The installer's ValidityTenYears and 2 × ValidityOneYear (ShortCertRotation is not supported).
const TEN_YEARS_DAYS: u32 = 3650;
const INGRESS_DAYS: u32 = 730;
const RSA_BITS: u32 = 2048;

/// Everything cryptographic one site needs; stored as state so a re-run can reuse it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SiteCrypto {
    pub admin_kubeconfig_signer: CertKey,
    pub admin_kubeconfig_client: CertKey,
    pub kube_apiserver_localhost_signer: CertKey,
    pub kube_apiserver_service_network_signer: CertKey,
    pub kube_apiserver_lb_signer: CertKey,
    pub ingress_operator_signer: CertKey,
    /// `ingress-operator@<unix seconds>`, the ingress signer's CN.
    pub ingress_certificate_cn: String,
}

/// Generates an RSA-2048 key with e = 65537 (OpenSSL's default exponent, as Go's).
pub fn generate_rsa_key() -> Result<Rsa<Private>> {
    Rsa::generate(RSA_BITS).context("generating an RSA-2048 key")
}

/// Generates all keys and certificates of a site, valid from `now`.
#[cfg(any(test, feature = "test-support"))]
pub fn generate_site_crypto(now: SystemTime) -> Result<SiteCrypto> {
    Ok(generate(now, None, all_cores())?.0)
}

/// [`generate_site_crypto_and_hash_with_threads`] on every core.
#[cfg(test)]
pub fn generate_site_crypto_and_hash(
    now: SystemTime,
    password: &str,
) -> Result<(SiteCrypto, String)> {
    generate_site_crypto_and_hash_with_threads(now, password, all_cores())
}

/// Like [`generate_site_crypto`], and hashes `password` with bcrypt as one more job of the same worker
/// pool (on two cores or more the hash runs while the other core finishes a keygen), on at most
/// `threads` threads: a batch that already runs one site per core passes 1, so the machine is not
/// oversubscribed.
pub fn generate_site_crypto_and_hash_with_threads(
    now: SystemTime,
    password: &str,
    threads: NonZeroUsize,
) -> Result<(SiteCrypto, String)> {
    let (crypto, hash) = generate(now, Some(password), threads)?;
    Ok((
        crypto,
        hash.context("internal: the bcrypt job produced no hash")?,
    ))
}

/// The CA bundle the admin kubeconfig trusts (the installer's kube-apiserver-complete-server-ca-bundle):
/// localhost, service-network, load-balancer and ingress signer certificates, in that order.
pub fn kube_apiserver_ca_bundle(c: &SiteCrypto) -> String {
    [
        &c.kube_apiserver_localhost_signer,
        &c.kube_apiserver_service_network_signer,
        &c.kube_apiserver_lb_signer,
        &c.ingress_operator_signer,
    ]
    .iter()
    .map(|pair| pair.cert_pem.as_str())
    .collect()
}

/// What one pool job produced.
enum Made {
    Signer(Box<Issued>),
    ClientKey(Rsa<Private>),
    Hash(String),
}

/// A self-signed signer to make: its asset name (for errors), subject and lifetime.
struct SignerSpec {
    asset: &'static str,
    cn: String,
    ou: Option<&'static str>,
    days: u32,
}

/// The five signers, in the order [`generate`] unpacks them.
fn signer_specs(ingress_cn: &str) -> [SignerSpec; 5] {
    let openshift = |name: &'static str| SignerSpec {
        asset: name,
        cn: name.to_owned(),
        ou: Some(OPENSHIFT_OU),
        days: TEN_YEARS_DAYS,
    };
    [
        openshift(ADMIN_KUBECONFIG_SIGNER),
        openshift(KUBE_APISERVER_LOCALHOST_SIGNER),
        openshift(KUBE_APISERVER_SERVICE_NETWORK_SIGNER),
        openshift(KUBE_APISERVER_LB_SIGNER),
        SignerSpec {
            asset: INGRESS_OPERATOR_SIGNER,
            cn: ingress_cn.to_owned(),
            ou: None,
            days: INGRESS_DAYS,
        },
    ]
}

fn make_signer(spec: &SignerSpec, now: i64) -> Result<Issued> {
    let subject = Subject {
        cn: &spec.cn,
        ou: spec.ou,
        o: None,
    };
    generate_rsa_key()
        .and_then(|key| super::cert::self_signed_ca(key, subject, now, spec.days))
        .with_context(|| format!("generating {}", spec.asset))
}

/// Generates everything in one worker pool, then signs the client certificate, which needs the admin
/// signer (a couple of milliseconds, not worth a dependency between jobs).
fn generate(
    now: SystemTime,
    password: Option<&str>,
    threads: NonZeroUsize,
) -> Result<(SiteCrypto, Option<String>)> {
    let now = unix_seconds(now)?;
    let ingress_certificate_cn = format!("{INGRESS_CN_PREFIX}{now}");
    let specs = signer_specs(&ingress_certificate_cn);
    let (signers, client_key, hash) =
        sort_out(super::pool::run(jobs(&specs, now, password), threads)?)?;
    let [admin, localhost, service_network, lb, ingress] = signers;
    let client = super::cert::client_cert(
        client_key,
        admin_client_subject(),
        &admin,
        now,
        TEN_YEARS_DAYS,
    )
    .with_context(|| format!("signing {ADMIN_KUBECONFIG_CLIENT}"))?;
    let crypto = SiteCrypto {
        admin_kubeconfig_signer: admin.pair,
        admin_kubeconfig_client: client,
        kube_apiserver_localhost_signer: localhost.pair,
        kube_apiserver_service_network_signer: service_network.pair,
        kube_apiserver_lb_signer: lb.pair,
        ingress_operator_signer: ingress.pair,
        ingress_certificate_cn,
    };
    Ok((crypto, hash))
}

/// The pool's schedule: one job per key (signer certificates are signed inside their job), then bcrypt.
/// Bcrypt goes last because it is the shortest job (~60 ms against ~190 ms mean per keygen here):
/// longest-first list scheduling lets it fill the gap while the other worker finishes its last keygen.
/// Simulated over measured keygen times, this beats bcrypt-first by about 3% of wall time on 2 cores.
fn jobs<'a>(
    specs: &'a [SignerSpec],
    now: i64,
    password: Option<&'a str>,
) -> Vec<super::pool::Job<'a, Made>> {
    let mut jobs: Vec<super::pool::Job<'a, Made>> = Vec::with_capacity(specs.len() + 2);
    for spec in specs {
        jobs.push(Box::new(move || {
            make_signer(spec, now).map(|s| Made::Signer(Box::new(s)))
        }));
    }
    jobs.push(Box::new(|| {
        let key =
            generate_rsa_key().with_context(|| format!("generating {ADMIN_KUBECONFIG_CLIENT}"))?;
        Ok(Made::ClientKey(key))
    }));
    if let Some(password) = password {
        jobs.push(Box::new(move || {
            hash_kubeadmin_password(password).map(Made::Hash)
        }));
    }
    jobs
}

/// Splits the pool's results (in job order) into the five signers, the client key and the hash.
fn sort_out(made: Vec<Made>) -> Result<([Issued; 5], Rsa<Private>, Option<String>)> {
    let (mut signers, mut client_key, mut hash) = (Vec::with_capacity(5), None, None);
    for item in made {
        match item {
            Made::Signer(issued) => signers.push(*issued),
            Made::ClientKey(key) => client_key = Some(key),
            Made::Hash(h) => hash = Some(h),
        }
    }
    let signers = signers
        .try_into()
        .map_err(|_| anyhow!("internal: expected five signers"))?;
    let client_key = client_key.context("internal: the client key job produced no key")?;
    Ok((signers, client_key, hash))
}

fn admin_client_subject() -> Subject<'static> {
    Subject {
        cn: ADMIN_CLIENT_CN,
        ou: None,
        o: Some(ADMIN_CLIENT_O),
    }
}

fn unix_seconds(now: SystemTime) -> Result<i64> {
    let since_epoch = now
        .duration_since(UNIX_EPOCH)
        .context("the clock is before 1970")?;
    i64::try_from(since_epoch.as_secs()).context("the clock is beyond year 292 billion")
}

/// Checks crypto reloaded from stored state: each key is PKCS#1 and matches its certificate, each subject
/// is the expected one, the signers are self-signed CAs, and the client certificate was issued by the
/// admin signer. Errors name the object at fault.
pub fn verify_site_crypto(c: &SiteCrypto) -> Result<()> {
    let cn = &c.ingress_certificate_cn;
    let ingress_ok = cn
        .strip_prefix(INGRESS_CN_PREFIX)
        .is_some_and(|ts| !ts.is_empty() && ts.bytes().all(|b| b.is_ascii_digit()));
    ensure!(
        ingress_ok,
        "ingress_certificate_cn {cn:?} is not {INGRESS_CN_PREFIX}<unix seconds>"
    );
    let specs = signer_specs(cn);
    let pairs = [
        &c.admin_kubeconfig_signer,
        &c.kube_apiserver_localhost_signer,
        &c.kube_apiserver_service_network_signer,
        &c.kube_apiserver_lb_signer,
        &c.ingress_operator_signer,
    ];
    let admin = check_signer(&specs[0], pairs[0])?;
    for (spec, pair) in specs.iter().zip(pairs).skip(1) {
        check_signer(spec, pair)?;
    }
    let client = load_pair(&c.admin_kubeconfig_client, admin_client_subject())
        .with_context(|| format!("checking {ADMIN_KUBECONFIG_CLIENT}"))?;
    check_issued_by(&client, &admin).with_context(|| format!("checking {ADMIN_KUBECONFIG_CLIENT}"))
}

fn check_signer(spec: &SignerSpec, pair: &CertKey) -> Result<Loaded> {
    let subject = Subject {
        cn: &spec.cn,
        ou: spec.ou,
        o: None,
    };
    let loaded = load_pair(pair, subject).with_context(|| format!("checking {}", spec.asset))?;
    check_self_signed_ca(&loaded).with_context(|| format!("checking {}", spec.asset))?;
    Ok(loaded)
}

/// A stored pair, parsed.
struct Loaded {
    cert: X509,
    key: PKey<Private>,
}

fn load_pair(pair: &CertKey, subject: Subject<'_>) -> Result<Loaded> {
    let cert = X509::from_pem(pair.cert_pem.as_bytes()).context("parsing the certificate PEM")?;
    // lifecycle-agent and recert expect PKCS#1; a PKCS#8 key here means the state was edited by hand.
    ensure!(
        pair.key_pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"),
        "the private key is not a PKCS#1 `RSA PRIVATE KEY` PEM"
    );
    let rsa = Rsa::private_key_from_pem(pair.key_pem.as_bytes())
        .context("parsing the private key PEM")?;
    let key = PKey::from_rsa(rsa)?;
    ensure!(
        cert.public_key()?.public_eq(&key),
        "the private key does not match the certificate"
    );
    let (found, expected) = (
        super::cert::render_name(cert.subject_name()),
        subject.render(),
    );
    ensure!(
        found == expected,
        "the subject is `{found}`, expected `{expected}`"
    );
    ensure!(
        cert.subject_key_id().is_some(),
        "the certificate has no SubjectKeyIdentifier"
    );
    Ok(Loaded { cert, key })
}

fn check_self_signed_ca(signer: &Loaded) -> Result<()> {
    let usage = signer.cert.key_usage().unwrap_or(X509KeyUsage::empty());
    ensure!(
        usage.contains(X509KeyUsage::KEY_CERT_SIGN),
        "the certificate may not sign certificates"
    );
    check_issued_by(signer, signer)
}

fn check_issued_by(cert: &Loaded, issuer: &Loaded) -> Result<()> {
    let (found, expected) = (
        super::cert::render_name(cert.cert.issuer_name()),
        super::cert::render_name(issuer.cert.subject_name()),
    );
    ensure!(
        found == expected,
        "the issuer is `{found}`, expected `{expected}`"
    );
    let signed = cert
        .cert
        .verify(&issuer.key)
        .context("checking the certificate signature")?;
    ensure!(
        signed,
        "the signature does not verify with the key of `{expected}`"
    );
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use openssl::asn1::Asn1Time;
    use openssl::bn::BigNum;
    use openssl::hash::{MessageDigest, hash};
    use openssl::nid::Nid;
    use openssl::x509::X509ExtendedKeyUsage;
    use std::sync::OnceLock;
    use std::time::Duration;

    /// A fixed clock, so validity windows and the ingress CN are exact.
    pub(super) const NOW: u64 = 1_760_000_000;
    const PASSWORD: &str = "abcde-fghij-kmnop-qrstu";

    /// One generated site (with hash) shared by every test: keygens are the slow part.
    pub(super) fn site_and_hash() -> &'static (SiteCrypto, String) {
        static SITE: OnceLock<(SiteCrypto, String)> = OnceLock::new();
        SITE.get_or_init(|| {
            generate_site_crypto_and_hash(UNIX_EPOCH + Duration::from_secs(NOW), PASSWORD).unwrap()
        })
    }

    pub(crate) fn site() -> &'static SiteCrypto {
        &site_and_hash().0
    }

    fn cert(pair: &CertKey) -> X509 {
        X509::from_pem(pair.cert_pem.as_bytes()).unwrap()
    }

    fn rsa(pair: &CertKey) -> Rsa<Private> {
        Rsa::private_key_from_pem(pair.key_pem.as_bytes()).unwrap()
    }

    fn extension_lines(x: &X509) -> String {
        String::from_utf8(x.to_text().unwrap()).unwrap()
    }

    /// Every certificate with its expected subject, lifetime and CA-ness.
    fn expectations(c: &SiteCrypto) -> [(&'static str, &CertKey, String, u32, bool); 6] {
        let ou = |cn: &str| format!("OU=openshift, CN={cn}");
        [
            (
                "admin signer",
                &c.admin_kubeconfig_signer,
                ou("admin-kubeconfig-signer"),
                3650,
                true,
            ),
            (
                "localhost",
                &c.kube_apiserver_localhost_signer,
                ou("kube-apiserver-localhost-signer"),
                3650,
                true,
            ),
            (
                "svc",
                &c.kube_apiserver_service_network_signer,
                ou("kube-apiserver-service-network-signer"),
                3650,
                true,
            ),
            (
                "lb",
                &c.kube_apiserver_lb_signer,
                ou("kube-apiserver-lb-signer"),
                3650,
                true,
            ),
            (
                "ingress",
                &c.ingress_operator_signer,
                format!("CN=ingress-operator@{NOW}"),
                730,
                true,
            ),
            (
                "client",
                &c.admin_kubeconfig_client,
                "O=system:masters, CN=system:admin".into(),
                3650,
                false,
            ),
        ]
    }

    #[test]
    fn keys_are_pkcs1_rsa_2048_with_e_65537() {
        for (what, pair, ..) in expectations(site()) {
            assert!(
                pair.key_pem
                    .starts_with("-----BEGIN RSA PRIVATE KEY-----\n"),
                "{what}"
            );
            assert!(
                pair.key_pem.ends_with("-----END RSA PRIVATE KEY-----\n"),
                "{what}"
            );
            let key = rsa(pair);
            assert_eq!(key.size() * 8, 2048, "{what}");
            assert_eq!(key.e().to_dec_str().unwrap().to_string(), "65537", "{what}");
            assert!(key.check_key().unwrap(), "{what}");
        }
    }

    #[test]
    fn all_six_keys_are_distinct() {
        let mut moduli: Vec<Vec<u8>> = expectations(site())
            .iter()
            .map(|e| rsa(e.1).n().to_vec())
            .collect();
        moduli.sort();
        moduli.dedup();
        assert_eq!(moduli.len(), 6);
    }

    #[test]
    fn subjects_issuers_and_validity() {
        let c = site();
        let admin_subject = cert(&c.admin_kubeconfig_signer)
            .subject_name()
            .to_owned()
            .unwrap();
        for (what, pair, subject, days, is_ca) in expectations(c) {
            let x = cert(pair);
            assert_eq!(
                super::super::cert::render_name(x.subject_name()),
                subject,
                "{what}"
            );
            let issuer = if is_ca {
                subject.clone()
            } else {
                super::super::cert::render_name(&admin_subject)
            };
            assert_eq!(
                super::super::cert::render_name(x.issuer_name()),
                issuer,
                "{what}"
            );
            let now = i64::try_from(NOW).unwrap();
            assert!(
                x.not_before() == Asn1Time::from_unix(now).unwrap(),
                "{what}"
            );
            let end = now + i64::from(days) * 86_400;
            assert!(x.not_after() == Asn1Time::from_unix(end).unwrap(), "{what}");
            assert_eq!(x.version(), 2, "{what}: X.509 v3");
            assert_eq!(
                x.signature_algorithm().object().nid(),
                Nid::SHA256WITHRSAENCRYPTION,
                "{what}"
            );
        }
        assert_eq!(c.ingress_certificate_cn, format!("ingress-operator@{NOW}"));
    }

    #[test]
    fn serials_are_below_2_pow_63_minus_1() {
        let bound = BigNum::from_slice(&i64::MAX.to_be_bytes()).unwrap();
        for (what, pair, ..) in expectations(site()) {
            let serial = cert(pair).serial_number().to_bn().unwrap();
            assert!(serial < bound && !serial.is_negative(), "{what}: {serial}");
        }
    }

    #[test]
    fn subject_key_id_is_sha1_of_pkcs1_public_key() {
        for (what, pair, ..) in expectations(site()) {
            let der = rsa(pair).public_key_to_der_pkcs1().unwrap();
            let expected = hash(MessageDigest::sha1(), &der).unwrap();
            assert_eq!(
                cert(pair).subject_key_id().unwrap().as_slice(),
                &*expected,
                "{what}"
            );
        }
    }

    #[test]
    fn only_the_client_has_an_authority_key_id_equal_to_the_signer_ski() {
        let c = site();
        let signer_ski = cert(&c.admin_kubeconfig_signer)
            .subject_key_id()
            .unwrap()
            .as_slice()
            .to_vec();
        for (what, pair, _, _, is_ca) in expectations(c) {
            let x = cert(pair);
            match (is_ca, x.authority_key_id()) {
                (true, None) => {}
                (false, Some(aki)) => assert_eq!(aki.as_slice(), signer_ski, "{what}"),
                (_, aki) => panic!(
                    "{what}: unexpected AuthorityKeyId presence {:?}",
                    aki.is_some()
                ),
            }
        }
    }

    #[test]
    fn ca_extensions() {
        let ca_usage = X509KeyUsage::DIGITAL_SIGNATURE
            | X509KeyUsage::KEY_ENCIPHERMENT
            | X509KeyUsage::KEY_CERT_SIGN;
        for (what, pair, _, _, is_ca) in expectations(site()) {
            if !is_ca {
                continue;
            }
            let x = cert(pair);
            assert_eq!(x.key_usage(), Some(ca_usage), "{what}");
            assert_eq!(x.extended_key_usage(), None, "{what}");
            let text = extension_lines(&x);
            assert!(
                text.contains("X509v3 Basic Constraints: critical\n                CA:TRUE\n"),
                "{what}\n{text}"
            );
            assert!(
                text.contains("X509v3 Key Usage: critical\n"),
                "{what}\n{text}"
            );
            assert_eq!(x.pathlen(), None, "{what}: Go writes no pathlen");
        }
    }

    #[test]
    fn client_extensions() {
        let x = cert(&site().admin_kubeconfig_client);
        let usage = X509KeyUsage::DIGITAL_SIGNATURE | X509KeyUsage::KEY_ENCIPHERMENT;
        assert_eq!(x.key_usage(), Some(usage));
        let eku = X509ExtendedKeyUsage::SSL_SERVER | X509ExtendedKeyUsage::SSL_CLIENT;
        assert_eq!(x.extended_key_usage(), Some(eku));
        let text = extension_lines(&x);
        assert!(
            text.contains("X509v3 Basic Constraints: critical\n                CA:FALSE\n"),
            "{text}"
        );
        assert!(text.contains("X509v3 Key Usage: critical\n"), "{text}");
        let admin = cert(&site().admin_kubeconfig_signer);
        assert!(x.verify(&admin.public_key().unwrap()).unwrap());
        assert!(x.not_before() == admin.not_before());
    }

    #[test]
    fn the_hash_from_the_pool_verifies() {
        let hash = &site_and_hash().1;
        assert!(hash.starts_with("$2a$10$"), "{hash}");
        assert!(bcrypt::verify(PASSWORD, hash).unwrap());
    }

    #[test]
    fn plain_generation_uses_the_clock_for_the_ingress_cn() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_123);
        let c = generate_site_crypto(now).unwrap();
        assert_eq!(c.ingress_certificate_cn, "ingress-operator@1800000123");
        verify_site_crypto(&c).unwrap();
    }

    #[test]
    fn a_clock_before_1970_is_an_error() {
        let err = generate_site_crypto(UNIX_EPOCH - Duration::from_secs(1)).unwrap_err();
        assert_eq!(
            format!("{err:#}").split(':').next(),
            Some("the clock is before 1970")
        );
    }

    #[test]
    fn ca_bundle_is_localhost_service_network_lb_ingress() {
        let c = site();
        let bundle = kube_apiserver_ca_bundle(c);
        let certs = X509::stack_from_pem(bundle.as_bytes()).unwrap();
        let cns: Vec<String> = certs
            .iter()
            .map(|x| super::super::cert::render_name(x.subject_name()))
            .collect();
        assert_eq!(
            cns,
            [
                "OU=openshift, CN=kube-apiserver-localhost-signer".to_owned(),
                "OU=openshift, CN=kube-apiserver-service-network-signer".to_owned(),
                "OU=openshift, CN=kube-apiserver-lb-signer".to_owned(),
                format!("CN=ingress-operator@{NOW}"),
            ]
        );
        assert_eq!(bundle.matches("-----BEGIN CERTIFICATE-----").count(), 4);
    }

    #[test]
    fn verify_accepts_fresh_crypto() {
        verify_site_crypto(site()).unwrap();
    }

    /// Each broken state must be refused with a message that names the object at fault.
    #[test]
    fn verify_names_the_broken_object() {
        type Break = fn(&mut SiteCrypto);
        let cases: [(&str, Break, &str); 6] = [
            (
                "lb key swapped",
                |c| {
                    c.kube_apiserver_lb_signer.key_pem =
                        c.kube_apiserver_localhost_signer.key_pem.clone()
                },
                "checking kube-apiserver-lb-signer: the private key does not match the certificate",
            ),
            (
                "client key swapped",
                |c| c.admin_kubeconfig_client.key_pem = c.admin_kubeconfig_signer.key_pem.clone(),
                "checking admin-kubeconfig-client: the private key does not match the certificate",
            ),
            (
                "admin signer replaced",
                |c| c.admin_kubeconfig_signer = c.kube_apiserver_lb_signer.clone(),
                "checking admin-kubeconfig-signer: the subject is `OU=openshift, CN=kube-apiserver-lb-signer`, expected `OU=openshift, CN=admin-kubeconfig-signer`",
            ),
            (
                "ingress CN edited",
                |c| c.ingress_certificate_cn = "ingress-operator@1".into(),
                "checking ingress-operator-signer: the subject is",
            ),
            (
                "ingress CN malformed",
                |c| c.ingress_certificate_cn = "router@123".into(),
                "ingress_certificate_cn \"router@123\" is not ingress-operator@<unix seconds>",
            ),
            (
                "PKCS#8 key",
                |c| c.ingress_operator_signer.key_pem = pkcs8(&c.ingress_operator_signer.key_pem),
                "checking ingress-operator-signer: the private key is not a PKCS#1",
            ),
        ];
        for (what, damage, message) in cases {
            let mut c = site().clone();
            damage(&mut c);
            let err = format!("{:#}", verify_site_crypto(&c).unwrap_err());
            assert!(err.starts_with(message), "{what}: {err}");
        }
    }

    /// A client certificate with the right subject but signed by someone else is caught by the signature.
    #[test]
    fn verify_refuses_a_client_signed_by_another_ca() {
        let other = generate_site_crypto(UNIX_EPOCH + Duration::from_secs(NOW)).unwrap();
        let mut c = site().clone();
        c.admin_kubeconfig_client = other.admin_kubeconfig_client;
        let err = format!("{:#}", verify_site_crypto(&c).unwrap_err());
        assert!(
            err.starts_with("checking admin-kubeconfig-client: the signature does not verify"),
            "{err}"
        );
    }

    /// A signer with the right subject and a matching key that is not allowed to sign certificates.
    #[test]
    fn verify_refuses_a_signer_without_cert_sign() {
        let mut c = site().clone();
        c.ingress_operator_signer = self_signed_without_key_usage(&c.ingress_certificate_cn);
        let err = format!("{:#}", verify_site_crypto(&c).unwrap_err());
        let expected =
            "checking ingress-operator-signer: the certificate may not sign certificates";
        assert_eq!(err, expected);
    }

    fn self_signed_without_key_usage(cn: &str) -> CertKey {
        let rsa = generate_rsa_key().unwrap();
        let key_pem = String::from_utf8(rsa.private_key_to_pem().unwrap()).unwrap();
        let ski = super::super::cert::subject_key_id(&rsa).unwrap();
        let key = PKey::from_rsa(rsa).unwrap();
        let mut name = openssl::x509::X509NameBuilder::new().unwrap();
        name.append_entry_by_nid(Nid::COMMONNAME, cn).unwrap();
        let name = name.build();
        let mut b = openssl::x509::X509Builder::new().unwrap();
        b.set_version(2).unwrap();
        b.set_subject_name(&name).unwrap();
        b.set_issuer_name(&name).unwrap();
        b.set_pubkey(&key).unwrap();
        b.set_not_before(&Asn1Time::from_unix(0).unwrap()).unwrap();
        b.set_not_after(&Asn1Time::days_from_now(1).unwrap())
            .unwrap();
        let ski =
            openssl::asn1::Asn1OctetString::new_from_bytes(&[&[4, 20][..], &ski].concat()).unwrap();
        let oid = openssl::asn1::Asn1Object::from_str("2.5.29.14").unwrap();
        b.append_extension(openssl::x509::X509Extension::new_from_der(&oid, false, &ski).unwrap())
            .unwrap();
        b.sign(&key, MessageDigest::sha256()).unwrap();
        let cert_pem = String::from_utf8(b.build().to_pem().unwrap()).unwrap();
        CertKey { cert_pem, key_pem }
    }

    fn pkcs8(pkcs1_pem: &str) -> String {
        let key = PKey::from_rsa(Rsa::private_key_from_pem(pkcs1_pem.as_bytes()).unwrap()).unwrap();
        String::from_utf8(key.private_key_to_pem_pkcs8().unwrap()).unwrap()
    }

    #[test]
    fn debug_output_redacts_private_keys() {
        let c = site();
        let shown = format!("{c:?} {c:#?}");
        assert!(
            !shown.contains("PRIVATE KEY"),
            "a key leaked into Debug output"
        );
        for (_, pair, ..) in expectations(c) {
            let body = pair.key_pem.lines().nth(1).unwrap();
            assert!(!shown.contains(body));
        }
        assert!(shown.contains("<redacted>") && shown.contains("BEGIN CERTIFICATE"));
    }

    #[test]
    fn site_crypto_round_trips_through_serde() {
        // Stored state goes through serde; a YAML round trip is enough to prove the derives agree.
        let text = serde_yaml_ng::to_string(site()).unwrap();
        let back: SiteCrypto = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(&back, site());
    }
}
