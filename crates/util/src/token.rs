//! Capability tokens: 128 random bits from OpenSSL's CSPRNG, in lower-case hex. `ibi serve`'s image
//! URLs and the installation ISO's report token are such tokens; a kept one is reused only while it
//! is as strong as a new one would be. Compared in constant time by whoever checks one.

use anyhow::{Context, Result};

use super::digest::hex;

/// Random bytes in a token: 128 bits, out of reach of guessing.
pub(crate) const TOKEN_BYTES: usize = 16;

/// A new token, `2 * TOKEN_BYTES` hex characters.
pub fn new_token() -> Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    openssl::rand::rand_bytes(&mut bytes).context("drawing random bytes for a token")?;
    Ok(hex(&bytes))
}

/// Whether a kept token still has the strength a new one would.
pub fn is_strong_token(t: &str) -> bool {
    t.len() >= TOKEN_BYTES * 2 && t.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `given` is `want`, in time that depends only on their lengths.
pub fn token_matches(given: &str, want: &str) -> bool {
    given.len() == want.len() && openssl::memcmp::eq(given.as_bytes(), want.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_hex() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(is_strong_token(&a));
        assert!(!is_strong_token("abc"));
        assert!(!is_strong_token(&"g".repeat(32)));
        assert!(token_matches(&a, &a.clone()));
        assert!(!token_matches(&a, &b));
        assert!(!token_matches(&a[..31], &a));
    }
}
