//! The site's identity, kept in `DIR/.ibi/identity.json` between runs.
//!
//! Everything random that ends up in the configuration ISO lives here: the signers (and the admin
//! client cert they sign), the kubeadmin password and its bcrypt hash, `cluster_id` and `infra_id`.
//! Reusing it means regenerating a site's ISO after fixing, say, an NTP server keeps the kubeconfig
//! already handed out working, and makes the ISO reproducible byte for byte.

use std::fs;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::config_image::pki::{self, SiteCrypto};
use crate::util::fs::{Clobber, SECRET_DIR_MODE, SECRET_FILE_MODE, ensure_dir, write_atomic};
use crate::util::secret::Secret;

/// Directory under `--dir` holding the identity; 0700 because it holds private keys.
pub const STATE_DIR: &str = ".ibi";
const IDENTITY_FILE: &str = "identity.json";
const IDENTITY_VERSION: u32 = 1;
/// k8s `utilrand.String` alphabet, which the installer uses for the infra ID suffix.
const INFRA_ID_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// The installer keeps infra IDs to 27 characters: 21 of name, a dash and 5 random characters.
const INFRA_ID_NAME_MAX: usize = 21;

#[derive(Clone, Serialize, Deserialize)]
pub struct Identity {
    pub version: u32,
    pub cluster_id: String,
    pub infra_id: String,
    /// The cluster name `infra_id` was derived from; a rename derives a new one.
    pub infra_id_cluster_name: String,
    pub kubeadmin_password: Secret<String>,
    pub kubeadmin_password_hash: Secret<String>,
    pub crypto: SiteCrypto,
}

/// How `load_or_create_with_threads` got the identity, for the log and the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Created,
    Reused,
    Rotated,
}

pub fn identity_path(dir: &Path) -> PathBuf {
    dir.join(STATE_DIR).join(IDENTITY_FILE)
}

/// The identity for this run and whether it must be saved before outputs are written.
pub struct SiteState {
    pub identity: Identity,
    pub origin: Origin,
    /// New or changed: `save` it before writing any output, so every kubeconfig handed out
    /// matches a stored identity.
    pub dirty: bool,
}

/// Returns the stored identity (checked) or makes a new one, generating any new keys on at most
/// `threads` threads. Writes nothing: the caller renders every output first and calls [`save`] only
/// when that succeeded.
pub fn load_or_create_with_threads(
    dir: &Path,
    cluster_name: &str,
    rotate_crypto: bool,
    threads: NonZeroUsize,
) -> Result<SiteState> {
    let path = identity_path(dir);
    // With --rotate-crypto the stored keys are about to be replaced, so a damaged key is no reason
    // to refuse: only the IDs are kept.
    let (mut identity, origin) = match load(&path, !rotate_crypto)? {
        Some(old) if rotate_crypto => (rotate(old, threads)?, Origin::Rotated),
        Some(old) => (old, Origin::Reused),
        None => (create(cluster_name, threads)?, Origin::Created),
    };
    let renamed = identity.infra_id_cluster_name != cluster_name;
    if renamed {
        warn!(old = %identity.infra_id_cluster_name, new = %cluster_name, "cluster name changed; deriving a new infra_id");
        identity.infra_id = infra_id(cluster_name)?;
        identity.infra_id_cluster_name = cluster_name.to_string();
    }
    info!(path = %path.display(), ?origin, "site identity");
    Ok(SiteState {
        identity,
        origin,
        dirty: origin != Origin::Reused || renamed,
    })
}

/// Stores the identity in `DIR/.ibi/identity.json` (directory 0700, file 0600).
pub fn save(dir: &Path, id: &Identity) -> Result<()> {
    let path = identity_path(dir);
    let state_dir = dir.join(STATE_DIR);
    ensure_dir(&state_dir, SECRET_DIR_MODE)?;
    let mut json = serde_json::to_vec_pretty(id).context("serialising the site identity")?;
    json.push(b'\n');
    write_atomic(&path, &json, SECRET_FILE_MODE, Clobber::Replace)
}

fn load(path: &Path, check_crypto: bool) -> Result<Option<Identity>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let id: Identity = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a valid ibi identity file", path.display()))?;
    if id.version != IDENTITY_VERSION {
        bail!(
            "{}: version {} is not supported (expected {IDENTITY_VERSION})",
            path.display(),
            id.version
        );
    }
    if !check_crypto {
        return Ok(Some(id));
    }
    pki::verify_site_crypto(&id.crypto).with_context(|| {
        format!(
            "{}: stored crypto is inconsistent (use --rotate-crypto to replace it)",
            path.display()
        )
    })?;
    Ok(Some(id))
}

fn create(cluster_name: &str, threads: NonZeroUsize) -> Result<Identity> {
    let (password, crypto, hash) = fresh_secrets(threads)?;
    Ok(Identity {
        version: IDENTITY_VERSION,
        cluster_id: uuid_v4()?,
        infra_id: infra_id(cluster_name)?,
        infra_id_cluster_name: cluster_name.to_string(),
        kubeadmin_password: password.into(),
        kubeadmin_password_hash: hash.into(),
        crypto,
    })
}

/// New signers and password; the cluster's identity (`cluster_id`, `infra_id`) stays, because a
/// key rotation is not a new cluster.
fn rotate(old: Identity, threads: NonZeroUsize) -> Result<Identity> {
    let (password, crypto, hash) = fresh_secrets(threads)?;
    Ok(Identity {
        kubeadmin_password: password.into(),
        kubeadmin_password_hash: hash.into(),
        crypto,
        ..old
    })
}

fn fresh_secrets(threads: NonZeroUsize) -> Result<(String, SiteCrypto, String)> {
    let password = pki::generate_kubeadmin_password()?;
    // bcrypt runs in the same worker pool as the key generation: the run's floor is the crypto.
    let (crypto, hash) =
        pki::generate_site_crypto_and_hash_with_threads(SystemTime::now(), &password, threads)?;
    Ok((password, crypto, hash))
}

/// A random (version 4, RFC 4122 variant) UUID, from OpenSSL's CSPRNG.
pub fn uuid_v4() -> Result<String> {
    let mut b = [0u8; 16];
    openssl::rand::rand_bytes(&mut b).context("drawing random bytes for cluster_id")?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = crate::util::digest::hex(&b);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

/// The installer's infra ID: the sanitised cluster name cut to 21 characters, a dash and five
/// random characters.
pub fn infra_id(cluster_name: &str) -> Result<String> {
    let base = infra_id_base(cluster_name);
    let suffix = pki::random_chars(INFRA_ID_ALPHABET, 5).context("drawing the infra_id suffix")?;
    Ok(format!("{base}-{suffix}"))
}

fn infra_id_base(cluster_name: &str) -> String {
    let mut out = String::new();
    for c in cluster_name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '-'
        };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    if out.len() > INFRA_ID_NAME_MAX {
        warn!(name = %cluster_name, "cluster name truncated to {INFRA_ID_NAME_MAX} characters for infra_id");
        out.truncate(INFRA_ID_NAME_MAX);
    }
    out.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_v4_shape() {
        for _ in 0..50 {
            let u = uuid_v4().unwrap();
            let parts: Vec<_> = u.split('-').map(str::len).collect();
            assert_eq!(parts, [8, 4, 4, 4, 12], "{u}");
            assert_eq!(&u[14..15], "4", "{u}");
            assert!("89ab".contains(&u[19..20]), "{u}");
        }
    }

    #[test]
    fn infra_id_base_rules() {
        let cases = [
            ("sno", "sno"),
            ("my_cluster.a", "my-cluster-a"),
            ("a__b", "a-b"),
            ("abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstu"),
            ("abcdefghijklmnopqrst-xyz", "abcdefghijklmnopqrst"),
        ];
        for (name, want) in cases {
            assert_eq!(infra_id_base(name), want, "{name}");
        }
    }

    #[test]
    fn infra_id_suffix_uses_k8s_alphabet() {
        let id = infra_id("sno").unwrap();
        let (base, suffix) = id.split_at(4);
        assert_eq!(base, "sno-");
        assert_eq!(suffix.len(), 5);
        assert!(
            suffix.bytes().all(|c| INFRA_ID_ALPHABET.contains(&c)),
            "{id}"
        );
    }
}
