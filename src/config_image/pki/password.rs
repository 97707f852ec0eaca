//! The kubeadmin password and its bcrypt hash, shaped like the installer's so users and recert see the same
//! thing: `xxxxx-xxxxx-xxxxx-xxxxx` from an alphabet without the look-alikes `l`, `O`, `0` and `1`.

use anyhow::{Context, Result};
use openssl::rand::rand_bytes;

/// The installer's alphabet: lower case without `l`, upper case without `O`, digits 2–9.
const ALPHABET: &[u8] = b"abcdefghijkmnopqrstuvwxyzABCDEFGHIJKLMNPQRSTUVWXYZ23456789";
const PASSWORD_LEN: usize = 23;
/// Positions forced to `-`, giving four groups of five.
const DASH_AT: [usize; 3] = [5, 11, 17];
/// Go's bcrypt.DefaultCost; recert and the oauth server accept any cost, but 10 is what the installer writes.
const BCRYPT_COST: u32 = 10;

/// Generates a fresh kubeadmin password (23 characters, dashes at 5, 11 and 17) from OpenSSL's CSPRNG.
pub fn generate_kubeadmin_password() -> Result<String> {
    let chars = random_chars(ALPHABET, PASSWORD_LEN - DASH_AT.len())
        .context("drawing random bytes for the kubeadmin password")?;
    let mut password = String::with_capacity(PASSWORD_LEN);
    let mut drawn = chars.chars();
    while password.len() < PASSWORD_LEN {
        match DASH_AT.contains(&password.len()) {
            true => password.push('-'),
            false => password.extend(drawn.next()),
        }
    }
    Ok(password)
}

/// `n` characters drawn uniformly from `alphabet` (at most 256 ASCII characters) with OpenSSL's
/// CSPRNG. Bytes in the biased tail are rejected, so `byte % len` has no modulo bias.
pub fn random_chars(alphabet: &[u8], n: usize) -> Result<String> {
    let mut out = String::with_capacity(n);
    let mut pool = [0u8; 32];
    while out.len() < n {
        rand_bytes(&mut pool).context("drawing random bytes")?;
        for &b in &pool {
            if out.len() < n {
                out.extend(pick(alphabet, b));
            }
        }
    }
    Ok(out)
}

/// Maps one random byte to a character, or rejects it: bytes at or above the largest multiple of
/// the alphabet's length (232 = 4 × 58 for the password) would make `byte % len` biased.
fn pick(alphabet: &[u8], byte: u8) -> Option<char> {
    let byte = usize::from(byte);
    let accept_below = 256 - 256 % alphabet.len();
    (byte < accept_below).then(|| char::from(alphabet[byte % alphabet.len()]))
}

/// Hashes the password the way Go's `bcrypt.GenerateFromPassword(p, 10)` does: `$2a$10$…`.
///
/// Passwords over bcrypt's 72-byte limit are refused, like current Go, rather than silently truncated.
pub fn hash_kubeadmin_password(password: &str) -> Result<String> {
    let parts = bcrypt::non_truncating_hash_with_result(password, BCRYPT_COST)
        .context("hashing the kubeadmin password with bcrypt")?;
    Ok(parts.format_for_version(bcrypt::Version::TwoA))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_shape_and_alphabet_over_many_draws() {
        for _ in 0..2_000 {
            let p = generate_kubeadmin_password().unwrap();
            assert_eq!(p.len(), PASSWORD_LEN, "{p}");
            let groups: Vec<&str> = p.split('-').collect();
            assert_eq!(
                groups.iter().map(|g| g.len()).collect::<Vec<_>>(),
                [5, 5, 5, 5],
                "{p}"
            );
            for (i, c) in p.bytes().enumerate() {
                if [5, 11, 17].contains(&i) {
                    assert_eq!(c, b'-', "index {i} of {p}");
                } else {
                    assert!(ALPHABET.contains(&c), "{:?} at {i} of {p}", char::from(c));
                }
            }
        }
    }

    #[test]
    fn alphabet_has_no_lookalikes_and_58_distinct_chars() {
        for bad in [b'l', b'O', b'0', b'1', b'-'] {
            assert!(!ALPHABET.contains(&bad), "{}", char::from(bad));
        }
        let mut sorted = ALPHABET.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 58);
    }

    /// Plain `byte % 58` would make the first 24 characters ~13% more likely and the rest ~9% less;
    /// a ±6% band (about 5 standard deviations at this sample size) catches that and nothing else.
    #[test]
    fn characters_are_uniform_no_modulo_bias() {
        let mut counts = [0u32; 128];
        let draws = 20_000;
        for _ in 0..draws {
            for c in generate_kubeadmin_password().unwrap().bytes() {
                counts[usize::from(c)] += 1;
            }
        }
        let expected = f64::from(draws * 20) / ALPHABET.len() as f64;
        for &c in ALPHABET {
            let seen = f64::from(counts[usize::from(c)]);
            let deviation = (seen - expected).abs() / expected;
            assert!(
                deviation < 0.06,
                "{} seen {seen} times, expected ~{expected:.0}",
                char::from(c)
            );
        }
    }

    #[test]
    fn pick_rejects_the_biased_tail() {
        assert_eq!(pick(ALPHABET, 0), Some('a'));
        assert_eq!(pick(ALPHABET, 57), Some('9'));
        assert_eq!(pick(ALPHABET, 58), Some('a'));
        assert_eq!(pick(ALPHABET, 231), Some('9'));
        assert!((232..=255).all(|b| pick(ALPHABET, b).is_none()));
    }

    #[test]
    fn bcrypt_hash_is_go_style_and_verifies() {
        let hash = hash_kubeadmin_password("abcde-fghij-kmnop-qrstu").unwrap();
        assert!(hash.starts_with("$2a$10$"), "{hash}");
        assert_eq!(hash.len(), 60);
        assert!(bcrypt::verify("abcde-fghij-kmnop-qrstu", &hash).unwrap());
        assert!(!bcrypt::verify("abcde-fghij-kmnop-qrstv", &hash).unwrap());
    }

    #[test]
    fn bcrypt_refuses_passwords_over_72_bytes() {
        let err = hash_kubeadmin_password(&"x".repeat(73)).unwrap_err();
        assert!(
            format!("{err:#}").starts_with("hashing the kubeadmin password with bcrypt"),
            "{err:#}"
        );
    }
}
