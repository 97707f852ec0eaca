//! Which RHEL a CoreOS live ISO boots, from its metadata: the ISO 9660 volume ID, which coreos-assembler
//! sets to `<name>-<release>` (`rhcos-46.82.202112161843-0` on the RHCOS 4.6 fixture, and, inferred from
//! the same rule, `rhcos-9.6.20250523-0` and `rhcos-10.2.20260715-0` for the releases the installer's
//! `coreos-rhel-9.json` and `coreos-rhel-10.json` name). The live kernel's `coreos.liveiso=` karg
//! carries the same string.

/// The RHEL major of a CoreOS live ISO's volume ID; `None` for anything that is not RHCOS or SCOS.
pub fn rhel_of_volume_id(volume_id: &str) -> Option<u32> {
    let release = volume_id
        .strip_prefix("rhcos-")
        .or_else(|| volume_id.strip_prefix("scos-"))?;
    rhel_of_release(release)
}

/// The smallest first field of the old scheme (OpenShift 4.0 as `40`).
const OLD_SCHEME_FROM: u32 = 40;

/// The RHEL major of an RHCOS release: `10.2.20260715-0` and `9.6.20250523-0` (RHEL `major.minor`
/// first, RHCOS 9.6 on), or `418.94.202410090804-0` and `46.82.…` (OpenShift `4.18` on RHEL `9.4`,
/// OpenShift `4.6` on RHEL `8.2`, before).
pub fn rhel_of_release(release: &str) -> Option<u32> {
    let mut parts = release.split('.');
    let (first, second) = (parts.next()?, parts.next()?);
    parts.next()?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(first) || !digits(second) {
        return None;
    }
    let first: u32 = first.parse().ok()?;
    // The old scheme starts with the OpenShift version (46, 418); RHEL majors are far below 40.
    if first < OLD_SCHEME_FROM {
        return Some(first);
    }
    if second.len() != 2 {
        return None;
    }
    second.get(..1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rhel_major_is_read_from_both_release_schemes() {
        let cases = [
            ("rhcos-10.2.20260715-0", Some(10)),
            ("rhcos-9.8.20260428-0", Some(9)),
            ("rhcos-418.94.202410090804-0", Some(9)),
            ("rhcos-46.82.202112161843-0", Some(8)),
            ("rhcos-410.84.202205191234-0", Some(8)),
            ("scos-10.0.20260301-0", Some(10)),
            ("fedora-coreos-38.20230718.dev.0", None),
            ("fedora-coreos-ibi-synthetic", None),
            ("rhcos-latest", None),
            ("rhcos-9.10.20280101-0", Some(9)),
            ("rhcos-9.6", None),
            ("rhcos-418.9.2024-0", None),
            ("", None),
        ];
        for (volume_id, want) in cases {
            assert_eq!(rhel_of_volume_id(volume_id), want, "{volume_id}");
        }
    }
}
