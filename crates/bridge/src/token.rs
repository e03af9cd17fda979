//! The bridge's bearer token: 32 random bytes from the system generator, hex-encoded, compared
//! in constant time, never printed by `Debug`.

use ring::rand::{SecureRandom, SystemRandom};

/// Bytes of randomness in a token.
pub const TOKEN_BYTES: usize = 32;

/// A bridge token. `Debug` shows `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct BridgeToken(String);

/// The system random generator failed.
#[derive(Debug, thiserror::Error)]
#[error("the system random generator failed")]
pub struct RandomError;

impl BridgeToken {
    /// A fresh token from the system's secure random generator.
    pub fn generate() -> Result<Self, RandomError> {
        random_hex(TOKEN_BYTES).map(Self)
    }

    /// A token received from elsewhere (the client reads it from the environment).
    pub fn from_text(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// The token text, for the `Authorization` header and the exported variable.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token, in time independent of where they differ.
    pub fn matches(&self, presented: &str) -> bool {
        constant_time_eq(self.0.as_bytes(), presented.as_bytes())
    }
}

impl std::fmt::Debug for BridgeToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BridgeToken([redacted])")
    }
}

/// `count` bytes from the system's secure random generator, hex-encoded.
pub(crate) fn random_hex(count: usize) -> Result<String, RandomError> {
    let mut bytes = vec![0u8; count];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| RandomError)?;
    Ok(hex::encode(bytes))
}

/// Compares every byte whatever the first difference; only the length leaks, which is public.
fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    if expected.len() != presented.len() {
        return false;
    }
    let difference = expected
        .iter()
        .zip(presented)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_64_hex_characters() {
        let first = BridgeToken::generate().unwrap();
        let second = BridgeToken::generate().unwrap();
        assert_eq!(first.expose().len(), 2 * TOKEN_BYTES);
        assert!(first.expose().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(first, second);
    }

    #[test]
    fn debug_never_shows_the_token() {
        let token = BridgeToken::generate().unwrap();
        let shown = format!("{token:?}");
        assert!(shown.contains("[redacted]"), "{shown}");
        assert!(!shown.contains(token.expose()), "{shown}");
    }

    #[test]
    fn matches_only_the_exact_token() {
        let token = BridgeToken::from_text("abcdef");
        assert!(token.matches("abcdef"));
        assert!(!token.matches("abcdeF"));
        assert!(!token.matches("bbcdef"));
        assert!(!token.matches("abcde"));
        assert!(!token.matches("abcdefa"));
        assert!(!token.matches(""));
    }
}
