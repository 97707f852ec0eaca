//! A built site's identity as a hub keeps it: what `create config-image --sites` handed out for the
//! site (`BASE/sites/<site>/auth/kubeconfig`, `auth/kubeadmin-password`, and `manifest.json` inside
//! `imagebasedconfig.iso`), read back and checked to belong together and to the cluster the inventory
//! describes, so the image-based-install-operator's reinstall path (three Secrets, see
//! `../shared/reference/hub-handoff.md`, "Reinstall") rebuilds the site with the same identity and
//! every kubeconfig already handed out keeps working.
//!
//! The files are read, never re-rendered: the Secrets hold the bytes the site was given. The checks
//! are those IBIO makes (the cluster name and base domain must match, or it refuses) and those that
//! prove the three files are one identity (the password verifies against the manifest's
//! `kubeadmin_password_hash`; the kubeconfig's client certificate is signed by the manifest's
//! admin client CA; the kubeconfig's server is this cluster's API).

use std::fs::File;
use std::path::{Path, PathBuf};

use openssl::x509::X509;
use serde_json::Value;

use crate::config::Finding;
use crate::contract::config_iso::{
    AUTH_DIR, ISO_FILE_NAME, KUBEADMIN_PASSWORD_FILE, KUBECONFIG_FILE, MANIFEST_PATH,
};
use crate::iso9660::{IsoError, IsoReader};
use crate::kubeapi::{ClientAuth, load_kubeconfig};
use crate::util::fs::{InputError, read_input_file};
use crate::util::secret::Secret;

/// The kubeadmin password is 23 characters; anything much larger is not one.
const MAX_PASSWORD: u64 = 1024;
/// manifest.json is a few tens of kilobytes (keys, certificates, the pull secret).
const MAX_MANIFEST: u64 = 4 << 20;

/// The three things IBIO's reinstall reads, as the site was given them.
pub struct Handed {
    pub kubeconfig: Secret<Vec<u8>>,
    pub password: Secret<String>,
    pub manifest_json: Secret<Vec<u8>>,
    /// Where each came from, for the template comments and the docs.
    pub kubeconfig_path: PathBuf,
    pub password_path: PathBuf,
    pub iso_path: PathBuf,
}

/// The files of a built site under `site_dir`.
struct Paths {
    iso: PathBuf,
    kubeconfig: PathBuf,
    password: PathBuf,
}

fn paths(site_dir: &Path) -> Paths {
    let auth = site_dir.join(AUTH_DIR);
    Paths {
        iso: site_dir.join(ISO_FILE_NAME),
        kubeconfig: auth.join(KUBECONFIG_FILE),
        password: auth.join(KUBEADMIN_PASSWORD_FILE),
    }
}

fn finding(path: &Path, field: &str, message: impl Into<String>) -> Finding {
    Finding {
        file: path.display().to_string(),
        field: field.to_string(),
        message: message.into(),
        line: None,
    }
}

/// The site's identity when `create config-image` built it (`Ok(None)`: none of its outputs exist);
/// every problem as a finding, naming the file. No finding quotes a secret.
pub fn read(
    site_dir: &Path,
    cluster_name: &str,
    base_domain: &str,
) -> Result<Option<Handed>, Vec<Finding>> {
    let p = paths(site_dir);
    let present: Vec<bool> = [&p.iso, &p.kubeconfig, &p.password]
        .iter()
        .map(|f| f.symlink_metadata().is_ok())
        .collect();
    if present.iter().all(|x| !x) {
        return Ok(None);
    }
    let mut findings = Vec::new();
    for (path, here) in [&p.iso, &p.kubeconfig, &p.password].iter().zip(&present) {
        if !here {
            findings.push(finding(
                path,
                "",
                "missing, though the site's other outputs of `create config-image` are there: \
                 build the site again (create config-image --sites) so its identity is whole",
            ));
        }
    }
    if !findings.is_empty() {
        return Err(findings);
    }
    let manifest_json =
        read_manifest(&p.iso).map_err(|m| vec![finding(&p.iso, MANIFEST_PATH, m.to_string())]);
    let password =
        read_password(&p.password).map_err(|m| vec![finding(&p.password, "", m.to_string())]);
    let kubeconfig = read_input_file(&p.kubeconfig, MAX_MANIFEST)
        .map(Secret::new)
        .map_err(|e| vec![finding(&p.kubeconfig, "", format!("cannot be read: {e}"))]);
    let (manifest_json, password, kubeconfig) = match (manifest_json, password, kubeconfig) {
        (Ok(m), Ok(p), Ok(k)) => (m, p, k),
        (m, p, k) => {
            for r in [m.err(), p.err(), k.err()].into_iter().flatten() {
                findings.extend(r);
            }
            return Err(findings);
        }
    };
    let handed = Handed {
        kubeconfig,
        password,
        manifest_json,
        kubeconfig_path: p.kubeconfig.clone(),
        password_path: p.password.clone(),
        iso_path: p.iso.clone(),
    };
    let findings = check(&handed, cluster_name, base_domain);
    if findings.is_empty() {
        Ok(Some(handed))
    } else {
        Err(findings)
    }
}

/// Why the site's configuration ISO gives no manifest.json.
#[derive(Debug, thiserror::Error)]
enum ManifestRead {
    #[error("cannot be opened: {0}")]
    Open(std::io::Error),
    #[error("not a configuration ISO ibi can read: {0}")]
    NotIso(IsoError),
    #[error("not in the ISO: {0}")]
    Missing(IsoError),
    #[error("not a manifest.json: a directory or over {MAX_MANIFEST} bytes")]
    NotAManifest,
    #[error("cannot be read from the ISO: {0}")]
    Read(IsoError),
}

/// `cluster-configuration/manifest.json` out of the configuration ISO, read in user space.
fn read_manifest(iso: &Path) -> Result<Secret<Vec<u8>>, ManifestRead> {
    let file = File::open(iso).map_err(ManifestRead::Open)?;
    let mut reader = IsoReader::open(file).map_err(ManifestRead::NotIso)?;
    let entry = reader.find(MANIFEST_PATH).map_err(ManifestRead::Missing)?;
    if entry.is_dir || entry.size > MAX_MANIFEST {
        return Err(ManifestRead::NotAManifest);
    }
    let data = reader.read_entry(&entry).map_err(ManifestRead::Read)?;
    Ok(Secret::new(data))
}

/// Why the site's kubeadmin password file gives no password.
#[derive(Debug, thiserror::Error)]
enum PasswordRead {
    #[error("cannot be read: {0}")]
    Read(InputError),
    #[error("not UTF-8 text")]
    NotUtf8,
    #[error("empty: the kubeadmin password is missing")]
    Empty,
}

fn read_password(path: &Path) -> Result<Secret<String>, PasswordRead> {
    let bytes = read_input_file(path, MAX_PASSWORD).map_err(PasswordRead::Read)?;
    let text = String::from_utf8(bytes).map_err(|_| PasswordRead::NotUtf8)?;
    if text.trim().is_empty() {
        return Err(PasswordRead::Empty);
    }
    Ok(Secret::new(text))
}

/// The checks that make the three one identity, of the cluster the inventory names.
fn check(h: &Handed, cluster_name: &str, base_domain: &str) -> Vec<Finding> {
    let mut f = Vec::new();
    let manifest: Value = match serde_json::from_slice(h.manifest_json.expose()) {
        Ok(v @ Value::Object(_)) => v,
        // serde_json's message names a position, never the content.
        Ok(_) => {
            f.push(finding(&h.iso_path, MANIFEST_PATH, "not a JSON object"));
            return f;
        }
        Err(e) => {
            f.push(finding(
                &h.iso_path,
                MANIFEST_PATH,
                format!("not valid JSON: {e}"),
            ));
            return f;
        }
    };
    let text = |key: &str| manifest.get(key).and_then(Value::as_str).unwrap_or("");
    for (key, want) in [("cluster_name", cluster_name), ("base_domain", base_domain)] {
        let have = text(key);
        if have != want {
            f.push(finding(
                &h.iso_path,
                &format!("{MANIFEST_PATH}: {key}"),
                format!(
                    "the site was built for {have:?}, the inventory now says {want:?}: the hub's \
                     image-based-install-operator refuses a reinstall whose {key} changed; build the \
                     site again (create config-image --sites) or keep the old value"
                ),
            ));
        }
    }
    for key in ["cluster_id", "infra_id"] {
        if text(key).is_empty() {
            f.push(finding(
                &h.iso_path,
                &format!("{MANIFEST_PATH}: {key}"),
                "missing: the hub would give the cluster a new one",
            ));
        }
    }
    let hash = text("kubeadmin_password_hash");
    match bcrypt::verify(h.password.expose_str(), hash) {
        Ok(true) => {}
        Ok(false) | Err(_) => f.push(finding(
            &h.password_path,
            "",
            format!(
                "does not match the kubeadmin_password_hash of {} ({MANIFEST_PATH}): the files are \
                 from different builds; build the site again",
                h.iso_path.display()
            ),
        )),
    }
    let ca = manifest
        .pointer("/KubeconfigCryptoRetention/KubeAPICrypto/ClientAuthCrypto/admin_ca_certificate")
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Err(m) = check_kubeconfig(&h.kubeconfig_path, ca, cluster_name, base_domain) {
        f.push(finding(&h.kubeconfig_path, "", m.to_string()));
    }
    f
}

/// Why the kubeconfig is not this cluster's admin kubeconfig.
#[derive(Debug, thiserror::Error)]
enum NotTheAdminKubeconfig {
    #[error("not a usable kubeconfig: {0}")]
    Unusable(String),
    #[error("its server is {host:?}, not this cluster's API {want:?}: build the site again")]
    OtherServer { host: String, want: String },
    #[error("has no client certificate (the admin kubeconfig ibi writes has one)")]
    NoClientCertificate,
    #[error("its client certificate is not a PEM certificate")]
    NotPem,
    #[error("{MANIFEST_PATH} has no admin client CA certificate to check it against")]
    NoCa,
    #[error(
        "its client certificate is not signed by the admin client CA of {MANIFEST_PATH}: the \
         files are from different builds; build the site again"
    )]
    OtherCa,
}

/// The kubeconfig is this cluster's, and its client certificate is one the cluster will accept:
/// signed by the admin client CA the manifest carries.
fn check_kubeconfig(
    path: &Path,
    admin_ca_pem: &str,
    cluster_name: &str,
    base_domain: &str,
) -> Result<(), NotTheAdminKubeconfig> {
    let access =
        load_kubeconfig(path).map_err(|e| NotTheAdminKubeconfig::Unusable(format!("{e:#}")))?;
    let want_host = format!(
        "api.{cluster_name}.{}",
        base_domain.strip_suffix('.').unwrap_or(base_domain)
    );
    let host = access.server.host_str().unwrap_or_default();
    if host != want_host {
        return Err(NotTheAdminKubeconfig::OtherServer {
            host: host.to_string(),
            want: want_host,
        });
    }
    let ClientAuth::Certificate { cert_pem, .. } = &access.auth else {
        return Err(NotTheAdminKubeconfig::NoClientCertificate);
    };
    let cert = X509::from_pem(cert_pem).map_err(|_| NotTheAdminKubeconfig::NotPem)?;
    let ca = X509::from_pem(admin_ca_pem.as_bytes()).map_err(|_| NotTheAdminKubeconfig::NoCa)?;
    let signed = ca
        .public_key()
        .and_then(|k| cert.verify(&k))
        .unwrap_or(false);
    if !signed {
        return Err(NotTheAdminKubeconfig::OtherCa);
    }
    Ok(())
}
