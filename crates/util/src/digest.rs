//! Lower-case hex, and the sha256 of bytes in it: the one spelling of a digest in ibi's files and logs.

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// sha256 of `bytes` as lower-case hex (64 characters).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&openssl::sha::sha256(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digest() {
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
