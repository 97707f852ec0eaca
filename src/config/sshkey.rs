//! A minimal authorized_keys parser: enough to tell a public key from a pasted private key, a truncated
//! line or a mislabeled blob, without an SSH crate.
//!
//! A line is `[options] keytype base64-blob [comment]`; the blob is SSH wire format and starts with a
//! length-prefixed string that repeats the key type.
//!
//! The text may be a private key pasted in the wrong place, so messages never quote it: a PEM block is
//! one finding for all its lines, and only a token shaped like a key type (`ssh-rsa`) is ever shown.

/// Key types OpenSSH accepts in authorized_keys (plain and certificate forms).
const KEY_TYPES: &[&str] = &[
    "ssh-rsa",
    "ssh-dss",
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "sk-ssh-ed25519@openssh.com",
    "ssh-rsa-cert-v01@openssh.com",
    "ssh-dss-cert-v01@openssh.com",
    "ssh-ed25519-cert-v01@openssh.com",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "sk-ssh-ed25519-cert-v01@openssh.com",
];

/// Checks every non-empty, non-comment line of `text`; returns one message per bad line (1-based numbers),
/// and one for each PEM block, whose lines are not looked at one by one.
pub(crate) fn check_authorized_keys(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'));
    while let Some((n, line)) = lines.next() {
        if line.starts_with("-----BEGIN") {
            let end = lines
                .by_ref()
                .find(|(_, l)| l.starts_with("-----END"))
                .map_or_else(|| "the end".to_string(), |(m, _)| format!("line {m}"));
            out.push(format!(
                "line {n} to {end}: this is a PEM block (a private key?), not an authorized_keys public key: \
                 give the public key (ssh-keygen -y -f KEY prints it)"
            ));
        } else if let Err(e) = check_line(line) {
            out.push(format!("line {n}: {e}"));
        }
    }
    out
}

/// Why a line is no SSH public key; only key types are quoted (key data never is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum BadKey {
    #[error("unknown key type {0:?}")]
    UnknownType(String),
    #[error("no key type (ssh-ed25519, ssh-rsa, ...) where the line starts")]
    NoType,
    #[error("{0} key has no key data")]
    NoData(&'static str),
    #[error("{0} key data is not valid base64")]
    NotBase64(&'static str),
    #[error("key data is for {inner:?}, not {key_type:?}")]
    OtherType {
        inner: String,
        key_type: &'static str,
    },
    #[error("key data is not a {0:?} key")]
    NotThatType(&'static str),
    #[error("{0} key data is truncated")]
    Truncated(&'static str),
}

fn check_line(line: &str) -> Result<(), BadKey> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    // Options come first when present, so the key type is the first field naming a known type.
    let Some(pos) = fields.iter().position(|f| KEY_TYPES.contains(f)) else {
        let first = fields.first().copied().unwrap_or_default();
        return Err(match shown_key_type(first) {
            Some(t) => BadKey::UnknownType(t.to_string()),
            None => BadKey::NoType,
        });
    };
    // The table's own `&'static str` for the field found.
    let key_type = KEY_TYPES
        .iter()
        .copied()
        .find(|t| *t == fields[pos])
        .unwrap_or_default();
    let blob = fields.get(pos + 1).ok_or(BadKey::NoData(key_type))?;
    let bytes = openssl::base64::decode_block(blob).map_err(|_| BadKey::NotBase64(key_type))?;
    match wire_string(&bytes) {
        Some(inner) if inner == key_type.as_bytes() => Ok(()),
        Some(inner) => Err(match shown_key_type(&String::from_utf8_lossy(inner)) {
            Some(t) => BadKey::OtherType {
                inner: t.to_string(),
                key_type,
            },
            None => BadKey::NotThatType(key_type),
        }),
        None => Err(BadKey::Truncated(key_type)),
    }
}

/// `token` when it looks like a key type (lower-case letters, digits and `-@.`, with a `-`, at most
/// 40 characters), so a typo is shown; never base64 or other text, which may be key material.
fn shown_key_type(token: &str) -> Option<&str> {
    let ok = token.len() <= 40
        && token.contains('-')
        && token
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-@.".contains(&b));
    ok.then_some(token)
}

/// The first SSH wire-format string: a 4-byte big-endian length, then that many bytes.
fn wire_string(b: &[u8]) -> Option<&[u8]> {
    let len = u32::from_be_bytes(b.get(..4)?.try_into().ok()?);
    b.get(4..4 + usize::try_from(len).ok()?)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A syntactically valid ed25519 public key (32 zero bytes as the key).
    pub(crate) fn ed25519_key() -> String {
        let mut blob = Vec::new();
        for part in [b"ssh-ed25519".as_slice(), &[0u8; 32]] {
            blob.extend_from_slice(&u32::try_from(part.len()).unwrap().to_be_bytes());
            blob.extend_from_slice(part);
        }
        format!(
            "ssh-ed25519 {} user@host",
            openssl::base64::encode_block(&blob)
        )
    }

    #[test]
    fn lines() {
        let good = ed25519_key();
        let blob = good.split(' ').nth(1).unwrap().to_string();
        let cases = [
            (good.clone(), vec![]),
            (format!("# comment\n\n{good}\n"), vec![]),
            (format!("no-pty,command=\"x y\" {good}"), vec![]),
            (
                format!("{good}\nssh-foo AAAA"),
                vec!["line 2: unknown key type \"ssh-foo\""],
            ),
            (
                "ssh-rsa".to_string(),
                vec!["line 1: ssh-rsa key has no key data"],
            ),
            (
                "ssh-rsa !!!".to_string(),
                vec!["line 1: ssh-rsa key data is not valid base64"],
            ),
            (
                format!("ssh-rsa {blob}"),
                vec!["line 1: key data is for \"ssh-ed25519\", not \"ssh-rsa\""],
            ),
            (
                "ssh-rsa AAAA".to_string(),
                vec!["line 1: ssh-rsa key data is truncated"],
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAA\n-----END OPENSSH PRIVATE KEY-----\nssh-foo x".to_string(),
                vec![
                    "line 1 to line 4: this is a PEM block (a private key?), not an authorized_keys public key: give the public key (ssh-keygen -y -f KEY prints it)",
                    "line 5: unknown key type \"ssh-foo\"",
                ],
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA".to_string(),
                vec![
                    "line 1 to the end: this is a PEM block (a private key?), not an authorized_keys public key: give the public key (ssh-keygen -y -f KEY prints it)",
                ],
            ),
            (
                "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU key".to_string(),
                vec!["line 1: no key type (ssh-ed25519, ssh-rsa, ...) where the line starts"],
            ),
        ];
        for (input, want) in cases {
            assert_eq!(check_authorized_keys(&input), want, "{input}");
        }
    }
}
