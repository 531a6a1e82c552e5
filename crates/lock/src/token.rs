//! Holder tokens: 20 random bytes from the operating system's generator, as 40 hex digits.

use rand::RngCore;

/// A fresh token. Two holders never share one (2^160 possibilities), so compare-and-delete
/// only ever deletes the caller's own lock.
pub fn random_token() -> String {
    let mut bytes = [0u8; 20];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let mut token = String::with_capacity(40);
    for byte in bytes {
        token.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
        token.push(char::from(b"0123456789abcdef"[usize::from(byte & 15)]));
    }
    token
}

#[cfg(test)]
mod tests {
    #[test]
    fn forty_hex_digits_and_distinct() {
        let a = super::random_token();
        let b = super::random_token();
        assert_eq!(a.len(), 40);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
