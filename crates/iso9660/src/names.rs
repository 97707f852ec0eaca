//! Names: validating the real (Rock Ridge) names callers give, deriving unique upper-case 8.3
//! ISO 9660 identifiers from them, and the ECMA-119 9.3 order directory records must follow.
//! Mangling depends only on the set of names in one directory, never on insertion order.

use super::IsoError;
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// Rock Ridge names are capped where common POSIX file systems cap them (NAME_MAX).
pub(crate) const MAX_NAME_BYTES: usize = 255;
/// Level-1 limits: 8 characters of name, 3 of extension (ECMA-119 10.1).
const BASE_LEN: usize = 8;
const EXT_LEN: usize = 3;
/// Most digits a collision counter may take; 10^7 mangled names per directory is plenty.
const MAX_COUNTER_DIGITS: usize = 7;

/// Splits a relative '/'-separated path into validated components.
pub(crate) fn split_path(path: &str) -> Result<Vec<&str>, IsoError> {
    let parts: Vec<&str> = path.split('/').collect();
    for part in &parts {
        validate_component(path, part)?;
    }
    Ok(parts)
}

fn validate_component(path: &str, name: &str) -> Result<(), IsoError> {
    let reason = if name.is_empty() {
        "empty path component (paths are relative, without leading, trailing or doubled '/')"
            .to_string()
    } else if name == "." || name == ".." {
        format!("{name:?} is not allowed as a name")
    } else if name.contains('\0') {
        "name contains a NUL byte".to_string()
    } else if name.len() > MAX_NAME_BYTES {
        format!("name is {} bytes, more than {MAX_NAME_BYTES}", name.len())
    } else {
        return Ok(());
    };
    Err(IsoError::InvalidName {
        path: path.to_string(),
        reason,
    })
}

/// Upper-cases `s` and replaces everything outside the d-characters (A-Z, 0-9, _) with '_',
/// keeping at most `max` characters.
fn d_chars(s: &str, max: usize) -> String {
    s.chars()
        .take(max)
        .map(|c| match c.to_ascii_uppercase() {
            u @ ('A'..='Z' | '0'..='9' | '_') => u,
            _ => '_',
        })
        .collect()
}

/// The unmangled (name, extension) pair for a real name. Directories get no extension, so their
/// dots become underscores; a leading dot (".bashrc") is part of the name, not an extension.
fn base_and_ext(name: &str, is_dir: bool) -> (String, String) {
    let (base, ext) = match name.rfind('.') {
        Some(i) if i > 0 && !is_dir => (
            d_chars(&name[..i], BASE_LEN),
            d_chars(&name[i + 1..], EXT_LEN),
        ),
        _ => (d_chars(name, BASE_LEN), String::new()),
    };
    let base = if base.is_empty() {
        "_".to_string()
    } else {
        base
    };
    (base, ext)
}

/// Candidate keys for a name: the plain 8.3 form, then the base cut short to make room for a
/// counter of growing width ("LONGNA00", "LONGNA01" … "LONGN000" …).
fn candidates<'a>(base: &'a str, ext: &'a str) -> impl Iterator<Item = String> + 'a {
    let key = move |b: &str| {
        if ext.is_empty() {
            b.to_string()
        } else {
            format!("{b}.{ext}")
        }
    };
    let plain = std::iter::once(key(base));
    let counted = (2..=MAX_COUNTER_DIGITS).flat_map(move |digits| {
        let prefix: String = base.chars().take(BASE_LEN - digits).collect();
        (0..10u32.pow(digits as u32)).map(move |n| format!("{prefix}{n:0digits$}"))
    });
    plain.chain(counted.map(move |b| key(&b)))
}

/// Assigns ISO identifiers to one directory's children, given as (real name, is_dir) in real-name
/// order. Files get ";1". Uniqueness is checked on the identifier without version or trailing dot,
/// so a file "FOO.;1" and a directory "FOO" can never both exist and look-ups stay unambiguous.
pub(crate) fn assign_identifiers<'a>(
    children: impl IntoIterator<Item = (&'a str, bool)>,
) -> Result<Vec<Vec<u8>>, IsoError> {
    let mut used = BTreeSet::new();
    let mut out = Vec::new();
    for (name, is_dir) in children {
        let (base, ext) = base_and_ext(name, is_dir);
        let key = candidates(&base, &ext)
            .find(|k| !used.contains(k))
            .ok_or_else(|| IsoError::InvalidName {
                path: name.to_string(),
                reason: "no unique ISO 9660 identifier left in this directory".to_string(),
            })?;
        used.insert(key.clone());
        out.push(full_identifier(&key, is_dir).into_bytes());
    }
    Ok(out)
}

/// File identifiers always carry the separator and version (ECMA-119 7.5.1): "NAME.EXT;1", "NAME.;1".
fn full_identifier(key: &str, is_dir: bool) -> String {
    match (is_dir, key.contains('.')) {
        (true, _) => key.to_string(),
        (false, true) => format!("{key};1"),
        (false, false) => format!("{key}.;1"),
    }
}

/// Strips ";version" and a trailing '.', giving the name a plain ISO 9660 reader shows.
pub(crate) fn plain_identifier(id: &str) -> &str {
    let no_version = id.rsplit_once(';').map_or(id, |(name, _)| name);
    no_version.strip_suffix('.').unwrap_or(no_version)
}

/// ECMA-119 9.3 order: name then extension, each compared as if padded with spaces, then version
/// descending. The "." and ".." identifiers (0x00, 0x01) sort first on their own.
pub(crate) fn cmp_identifiers(a: &[u8], b: &[u8]) -> Ordering {
    let (a_name, a_ext, a_ver) = split_identifier(a);
    let (b_name, b_ext, b_ver) = split_identifier(b);
    cmp_space_padded(a_name, b_name)
        .then_with(|| cmp_space_padded(a_ext, b_ext))
        .then_with(|| b_ver.cmp(&a_ver))
}

fn split_identifier(id: &[u8]) -> (&[u8], &[u8], u32) {
    let (rest, version) = match id.iter().rposition(|&c| c == b';') {
        Some(i) => (&id[..i], parse_version(&id[i + 1..])),
        None => (id, 0),
    };
    match rest.iter().position(|&c| c == b'.') {
        Some(i) => (&rest[..i], &rest[i + 1..], version),
        None => (rest, &[][..], version),
    }
}

fn parse_version(digits: &[u8]) -> u32 {
    digits
        .iter()
        .try_fold(0u32, |acc, &d| {
            d.is_ascii_digit()
                .then(|| acc.saturating_mul(10).saturating_add(u32::from(d - b'0')))
        })
        .unwrap_or(0)
}

fn cmp_space_padded(a: &[u8], b: &[u8]) -> Ordering {
    let len = a.len().max(b.len());
    let at = |s: &[u8], i: usize| s.get(i).copied().unwrap_or(b' ');
    (0..len)
        .map(|i| at(a, i).cmp(&at(b, i)))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idents(children: &[(&str, bool)]) -> Vec<String> {
        let out = assign_identifiers(children.iter().copied()).unwrap();
        out.into_iter()
            .map(|v| String::from_utf8(v).unwrap())
            .collect()
    }

    #[test]
    fn single_names_mangle_to_8_3() {
        let cases: &[(&str, bool, &str)] = &[
            ("readme.txt", false, "README.TXT;1"),
            ("README", false, "README.;1"),
            ("config.yaml", false, "CONFIG.YAM;1"),
            ("cluster-configuration.json", false, "CLUSTER_.JSO;1"),
            (".bashrc", false, "_BASHRC.;1"),
            ("a.b.c", false, "A_B.C;1"),
            ("émoji☃.txt", false, "_MOJI_.TXT;1"),
            ("-", false, "_.;1"),
            ("trailing.", false, "TRAILING.;1"),
            ("dir.d", true, "DIR_D"),
            ("openshift", true, "OPENSHIF"),
            ("lower", true, "LOWER"),
        ];
        for (name, is_dir, want) in cases {
            assert_eq!(idents(&[(name, *is_dir)]), vec![want.to_string()], "{name}");
        }
    }

    #[test]
    fn collisions_get_counters() {
        let got = idents(&[
            ("longname-a.yaml", false),
            ("longname-b.yaml", false),
            ("longname-c.yaml", false),
            ("longname-d", true),
            ("x", false),
            ("X", true),
        ]);
        assert_eq!(
            got,
            [
                "LONGNAME.YAM;1",
                "LONGNA00.YAM;1",
                "LONGNA01.YAM;1",
                "LONGNAME",
                "X.;1",
                "X00"
            ]
        );
    }

    #[test]
    fn hundreds_of_collisions_stay_unique() {
        let names: Vec<String> = (0..1200).map(|i| format!("manifest-{i:04}.yaml")).collect();
        let got = idents(
            &names
                .iter()
                .map(|n| (n.as_str(), false))
                .collect::<Vec<_>>(),
        );
        let unique: BTreeSet<&String> = got.iter().collect();
        assert_eq!(unique.len(), 1200);
        assert!(got.iter().all(|g| g.len() <= 14), "8.3 plus ;1");
        assert!(
            got.contains(&"MANIF000.YAM;1".to_string()),
            "three-digit counters after 100"
        );
    }

    #[test]
    fn invalid_components_are_rejected() {
        let long = "x".repeat(256);
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("a//b", "empty"),
            ("/a", "empty"),
            ("a/", "empty"),
            (".", "not allowed"),
            ("a/..", "not allowed"),
            ("a\0b", "NUL"),
            (&long, "256 bytes"),
        ];
        for (path, want) in cases {
            let err = split_path(path).unwrap_err();
            assert!(matches!(err, IsoError::InvalidName { .. }), "{path:?}");
            assert!(err.to_string().contains(want), "{path:?}: {err}");
        }
        assert_eq!(split_path(&"y".repeat(255)).unwrap().len(), 1);
        assert_eq!(split_path("a/b c/d").unwrap(), ["a", "b c", "d"]);
    }

    #[test]
    fn ordering_follows_ecma_119_9_3() {
        let mut ids: Vec<&[u8]> = vec![
            b"B.;1", b"A.TXT;1", b"A0", b"A.;1", b"A.B;2", b"A.B;10", b"AB", b"A_", b"\x01",
            b"\x00",
        ];
        ids.sort_by(|a, b| cmp_identifiers(a, b));
        let want: Vec<&[u8]> = vec![
            b"\x00", b"\x01", b"A.;1", b"A.B;10", b"A.B;2", b"A.TXT;1", b"A0", b"AB", b"A_",
            b"B.;1",
        ];
        assert_eq!(ids, want);
    }

    #[test]
    fn plain_identifiers() {
        let cases = [
            ("README.TXT;1", "README.TXT"),
            ("README.;1", "README"),
            ("DIR", "DIR"),
            ("A.B", "A.B"),
        ];
        for (id, want) in cases {
            assert_eq!(plain_identifier(id), want, "{id}");
        }
    }
}
