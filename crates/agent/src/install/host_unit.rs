//! Placing ibi on the installed host (issue 4 item 4): `ibi-fetch-config.service` into the new
//! deployment's `/etc/systemd/system`, enabled for `multi-user.target` and for lifecycle-agent's
//! `installation-configuration.service` (the two `WantedBy=` of its `[Install]`), and the running
//! `ibi` binary into the stateroot's `/var/usrlocal/bin` (the host's `/usr/local/bin`, where lca-cli
//! lives too). Each file takes the SELinux label of its neighbour from the seed (lca-cli's unit and
//! binary) when there is one: written from the live system they would otherwise carry whatever label
//! the live policy gives, which the installed host's systemd may refuse to execute.

use std::fs;
use std::io;
use std::os::unix::fs::symlink;
use std::path::Path;

use anyhow::{Context, Result};
use rustix::fs::XattrFlags;
use tracing::{debug, info};

use util::fs::{Clobber, write_atomic, write_atomic_with};

/// The unit file, as shipped in `units/`.
pub(crate) const FETCH_CONFIG_UNIT: &str =
    include_str!("../../../../units/ibi-fetch-config.service");
pub(crate) const FETCH_CONFIG_UNIT_NAME: &str = "ibi-fetch-config.service";
/// The targets whose `.wants` directories enable the unit (its `[Install] WantedBy=` lines).
pub(crate) const WANTED_BY: [&str; 2] = ["multi-user.target", "installation-configuration.service"];
/// The seed's lca-cli unit, whose label the new unit copies.
const NEIGHBOUR_UNIT: &str = "installation-configuration.service";
/// The seed's lca-cli binary, whose label the ibi binary copies.
const NEIGHBOUR_BINARY: &str = "lca-cli";
const SELINUX_XATTR: &str = "security.selinux";
const UNIT_MODE: u32 = 0o644;
const BINARY_MODE: u32 = 0o755;

/// Installs the unit into `deploy_dir` and `binary` into `stateroot_dir`.
pub(crate) fn install_host_unit(
    deploy_dir: &Path,
    stateroot_dir: &Path,
    binary: &Path,
) -> Result<()> {
    let systemd = deploy_dir.join("etc/systemd/system");
    fs::create_dir_all(&systemd).with_context(|| format!("creating {}", systemd.display()))?;
    let unit = systemd.join(FETCH_CONFIG_UNIT_NAME);
    write_atomic(
        &unit,
        FETCH_CONFIG_UNIT.as_bytes(),
        UNIT_MODE,
        Clobber::Replace,
    )
    .with_context(|| format!("writing {}", unit.display()))?;
    copy_label(&systemd.join(NEIGHBOUR_UNIT), &unit);
    let link_target = Path::new("/etc/systemd/system").join(FETCH_CONFIG_UNIT_NAME);
    for wanted_by in WANTED_BY {
        let wants = systemd.join(format!("{wanted_by}.wants"));
        fs::create_dir_all(&wants).with_context(|| format!("creating {}", wants.display()))?;
        replace_symlink(&link_target, &wants.join(FETCH_CONFIG_UNIT_NAME))?;
    }

    let bin_dir = stateroot_dir.join("var/usrlocal/bin");
    fs::create_dir_all(&bin_dir).with_context(|| format!("creating {}", bin_dir.display()))?;
    let dest = bin_dir.join("ibi");
    // Streamed, not read whole: the binary is about 16 MiB, a quarter of the agent's memory budget.
    let mut source =
        fs::File::open(binary).with_context(|| format!("reading {}", binary.display()))?;
    write_atomic_with(&dest, BINARY_MODE, Clobber::Replace, |out| {
        io::copy(&mut source, out)
            .map(drop)
            .with_context(|| format!("copying {}", binary.display()))
    })
    .with_context(|| format!("writing {}", dest.display()))?;
    copy_label(&bin_dir.join(NEIGHBOUR_BINARY), &dest);
    info!(target: "ibi::agent::install::host_unit",
        unit = %unit.display(), binary = %dest.display(), "host unit placed and enabled");
    Ok(())
}

/// `ln -sfn target link`.
fn replace_symlink(target: &Path, link: &Path) -> Result<()> {
    match fs::symlink_metadata(link) {
        Ok(_) => fs::remove_file(link).with_context(|| format!("replacing {}", link.display()))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("reading {}", link.display())),
    }
    symlink(target, link).with_context(|| format!("creating {}", link.display()))
}

/// Best effort: gives `to` the SELinux label of `from` when `from` has one.
fn copy_label(from: &Path, to: &Path) {
    let mut label = [0u8; 1024];
    let Ok(n) = rustix::fs::lgetxattr(from, SELINUX_XATTR, &mut label) else {
        debug!(target: "ibi::agent::install::host_unit",
            "no SELinux label on {} to copy", from.display());
        return;
    };
    if let Err(e) = rustix::fs::lsetxattr(to, SELINUX_XATTR, &label[..n], XattrFlags::empty()) {
        tracing::warn!(target: "ibi::agent::install::host_unit",
            "cannot label {} like {}: {e}", to.display(), from.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_binary_and_enable_links() {
        let d = tempfile::tempdir().unwrap();
        let (deploy, stateroot) = (d.path().join("deploy"), d.path().join("stateroot"));
        let bin = d.path().join("ibi-src");
        fs::write(&bin, b"\x7fELF fake").unwrap();
        install_host_unit(&deploy, &stateroot, &bin).unwrap();
        // Twice: a resumed run finds everything in place.
        install_host_unit(&deploy, &stateroot, &bin).unwrap();
        let systemd = deploy.join("etc/systemd/system");
        assert_eq!(
            fs::read_to_string(systemd.join(FETCH_CONFIG_UNIT_NAME)).unwrap(),
            FETCH_CONFIG_UNIT
        );
        for wanted_by in WANTED_BY {
            let link = systemd.join(format!("{wanted_by}.wants/{FETCH_CONFIG_UNIT_NAME}"));
            assert_eq!(
                fs::read_link(link).unwrap(),
                Path::new("/etc/systemd/system/ibi-fetch-config.service")
            );
        }
        let placed = stateroot.join("var/usrlocal/bin/ibi");
        assert_eq!(fs::read(&placed).unwrap(), b"\x7fELF fake");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&placed).unwrap().permissions().mode() & 0o777,
            0o755
        );
    }

    #[test]
    fn the_unit_names_both_wanted_by_targets() {
        for wanted_by in WANTED_BY {
            assert!(
                FETCH_CONFIG_UNIT.contains(&format!("WantedBy={wanted_by}")),
                "{wanted_by}"
            );
        }
    }
}
