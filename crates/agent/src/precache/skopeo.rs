//! The real puller: `skopeo copy` from the registry into a containers-storage whose graph root lives on
//! the target's partition, so the installed host's CRI-O finds the images without a network. lca-cli runs
//! `podman pull` in the live system whose `/var/lib/containers` is that partition; skopeo names the storage
//! explicitly instead (`containers-storage:[driver@graphroot+runroot]`), so nothing has to be mounted over
//! the live system's own storage. The argv is built by a pure function and run through [`cmd`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::pool::Puller;
use super::registry_host;
use crate::cmd;

/// A containers-storage location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// The storage driver: `overlay` on the host (what CRI-O uses); `vfs` where overlay cannot run.
    pub driver: String,
    /// The image and layer store, e.g. `/mnt/containers/storage` on the mounted target partition.
    pub graphroot: PathBuf,
    /// The runtime state (locks); a tmpfs directory on the live system.
    pub runroot: PathBuf,
}

impl Storage {
    /// An overlay storage, as CRI-O on the installed host expects it.
    #[cfg(test)]
    pub(crate) fn overlay(graphroot: &Path, runroot: &Path) -> Storage {
        Storage {
            driver: "overlay".to_string(),
            graphroot: graphroot.to_path_buf(),
            runroot: runroot.to_path_buf(),
        }
    }

    /// The containers-storage transport reference of `image` in this storage:
    /// `containers-storage:[overlay@/graph+/run]quay.io/x:1`.
    pub fn reference(&self, image: &str) -> OsString {
        let mut s = OsString::from(format!("containers-storage:[{}@", self.driver));
        s.push(&self.graphroot);
        s.push("+");
        s.push(&self.runroot);
        s.push("]");
        s.push(image);
        s
    }
}

/// Pulls with `skopeo copy` into a [`Storage`].
#[derive(Debug, Clone)]
pub struct SkopeoPuller {
    /// The skopeo binary (`skopeo` on PATH by default).
    pub(crate) program: String,
    /// The pull secret (`auths` JSON); `None` for anonymous pulls.
    pub authfile: Option<PathBuf>,
    pub storage: Storage,
    /// Registry hosts (`host[:port]`) reached without TLS verification; every other host is verified.
    pub insecure_hosts: Vec<String>,
}

impl SkopeoPuller {
    /// A puller running `skopeo` from PATH.
    pub fn new(authfile: Option<&Path>, storage: Storage, insecure_hosts: Vec<String>) -> Self {
        SkopeoPuller {
            program: "skopeo".to_string(),
            authfile: authfile.map(Path::to_path_buf),
            storage,
            insecure_hosts,
        }
    }
}

impl Puller for SkopeoPuller {
    fn pull(&self, image: &str) -> Result<()> {
        let mut argv = skopeo_copy_argv(
            image,
            self.authfile.as_deref(),
            &self.storage,
            &self.insecure_hosts,
        );
        argv[0] = OsString::from(&self.program);
        cmd::run(&argv)
            .map(drop)
            .with_context(|| format!("pulling {image}"))
    }
}

/// `skopeo copy --quiet [--authfile AUTH] [--src-tls-verify=false] docker://IMG
/// containers-storage:[DRIVER@GRAPHROOT+RUNROOT]IMG`; TLS verification is off only when the image's
/// registry host is one of `insecure_hosts`.
pub(crate) fn skopeo_copy_argv(
    image: &str,
    authfile: Option<&Path>,
    storage: &Storage,
    insecure_hosts: &[String],
) -> Vec<OsString> {
    let mut argv: Vec<OsString> = ["skopeo", "copy", "--quiet"].map(OsString::from).into();
    if let Some(auth) = authfile {
        argv.push("--authfile".into());
        argv.push(auth.into());
    }
    let host = registry_host(image);
    if insecure_hosts.iter().any(|h| h == host) {
        argv.push("--src-tls-verify=false".into());
    }
    argv.push(format!("docker://{image}").into());
    argv.push(storage.reference(image));
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn storage() -> Storage {
        Storage::overlay(
            Path::new("/mnt/containers/storage"),
            Path::new("/run/ibi-storage"),
        )
    }

    #[test]
    fn copy_argv() {
        let dest = |img: &str| {
            format!("containers-storage:[overlay@/mnt/containers/storage+/run/ibi-storage]{img}")
        };
        let insecure = vec!["mirror.local:5000".to_string()];
        let auth = Path::new("/var/tmp/pull-secret.json");
        let cases: [(&str, Option<&Path>, Vec<String>); 4] = [
            (
                "quay.io/a/b:1",
                Some(auth),
                vec![
                    "skopeo".into(),
                    "copy".into(),
                    "--quiet".into(),
                    "--authfile".into(),
                    auth.display().to_string(),
                    "docker://quay.io/a/b:1".into(),
                    dest("quay.io/a/b:1"),
                ],
            ),
            (
                "mirror.local:5000/a@sha256:00",
                Some(auth),
                vec![
                    "skopeo".into(),
                    "copy".into(),
                    "--quiet".into(),
                    "--authfile".into(),
                    auth.display().to_string(),
                    "--src-tls-verify=false".into(),
                    "docker://mirror.local:5000/a@sha256:00".into(),
                    dest("mirror.local:5000/a@sha256:00"),
                ],
            ),
            (
                "mirror.local/a:1",
                None,
                vec![
                    "skopeo".into(),
                    "copy".into(),
                    "--quiet".into(),
                    "docker://mirror.local/a:1".into(),
                    dest("mirror.local/a:1"),
                ],
            ),
            (
                "other.io/mirror.local:5000/a:1",
                None,
                vec![
                    "skopeo".into(),
                    "copy".into(),
                    "--quiet".into(),
                    "docker://other.io/mirror.local:5000/a:1".into(),
                    dest("other.io/mirror.local:5000/a:1"),
                ],
            ),
        ];
        for (image, authfile, want) in cases {
            let got: Vec<String> = skopeo_copy_argv(image, authfile, &storage(), &insecure)
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            assert_eq!(got, want, "{image}");
        }
    }

    #[test]
    fn vfs_reference() {
        let s = Storage {
            driver: "vfs".into(),
            graphroot: "/g".into(),
            runroot: "/r".into(),
        };
        assert_eq!(s.reference("x/y:1"), "containers-storage:[vfs@/g+/r]x/y:1");
    }

    #[test]
    fn failed_pull_names_image_and_stderr() {
        let mut puller = SkopeoPuller::new(None, storage(), vec![]);
        puller.program = "/nonexistent/ibi-no-skopeo".to_string();
        let err = format!("{:#}", puller.pull("quay.io/a:1").unwrap_err());
        assert!(
            err.starts_with("pulling quay.io/a:1: starting `/nonexistent/ibi-no-skopeo copy --quiet docker://quay.io/a:1 "),
            "{err}"
        );
    }
}
