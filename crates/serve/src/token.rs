//! The bearer token of the HTTP gateway: from `WARDEN_SERVE_TOKEN` or freshly generated, never
//! printed by `Debug`, compared in constant time.

use std::fmt;

use ring::rand::{SecureRandom, SystemRandom};

use crate::ServeError;

/// The environment variable holding the operator's token.
pub const TOKEN_ENV: &str = "WARDEN_SERVE_TOKEN";

/// A bearer token.
#[derive(Clone, PartialEq, Eq)]
pub struct ServeToken(String);

impl ServeToken {
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// 32 random bytes, hex-encoded.
    pub fn generate() -> Result<Self, ServeError> {
        let mut bytes = [0u8; 32];
        SystemRandom::new()
            .fill(&mut bytes)
            .map_err(|_| ServeError::Random("the system random source failed".to_owned()))?;
        Ok(Self(hex::encode(bytes)))
    }

    /// The token in `WARDEN_SERVE_TOKEN` when set and not empty.
    pub fn from_env() -> Option<Self> {
        std::env::var(TOKEN_ENV)
            .ok()
            .filter(|value| !value.trim().is_empty())
            .map(|value| Self(value.trim().to_owned()))
    }

    /// The secret itself, for the one place that shows it (the start-up line on stderr).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether an `Authorization` header value carries this token (`Bearer TOKEN`).
    pub fn accepts(&self, authorization: &str) -> bool {
        let Some((scheme, presented)) = authorization.trim().split_once(' ') else {
            return false;
        };
        scheme.eq_ignore_ascii_case("bearer") && constant_time_eq(presented.trim(), &self.0)
    }
}

impl fmt::Debug for ServeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServeToken([redacted])")
    }
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn generated_tokens_differ_and_are_64_hex_characters() {
        let first = ServeToken::generate().unwrap();
        let second = ServeToken::generate().unwrap();
        assert_ne!(first, second);
        assert_eq!(first.expose().len(), 64);
        assert!(first.expose().chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let token = ServeToken::new("s3cret-value");
        let shown = format!("{token:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("[redacted]"));
    }

    #[test]
    fn only_the_exact_bearer_token_is_accepted() {
        let token = ServeToken::new("abc123");
        assert!(token.accepts("Bearer abc123"));
        assert!(token.accepts("bearer abc123"));
        assert!(!token.accepts("Bearer abc124"));
        assert!(!token.accepts("Bearer abc1234"));
        assert!(!token.accepts("Basic abc123"));
        assert!(!token.accepts("abc123"));
    }
}
