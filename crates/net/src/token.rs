//! The bearer token of warden's local servers (`warden serve` over HTTP, the session bridge):
//! 32 random bytes from the system generator, hex-encoded; an operator's own token must be at
//! least [`MIN_OPERATOR_TOKEN_BYTES`] long; an `Authorization` header is compared in constant
//! time; `Debug` never shows the secret.

use std::fmt;

use ring::rand::{SecureRandom, SystemRandom};

/// Bytes of randomness in a generated token (hex-encoded: twice as many characters).
pub const TOKEN_BYTES: usize = 32;

/// The shortest token an operator may choose (`WARDEN_SERVE_TOKEN`).
pub const MIN_OPERATOR_TOKEN_BYTES: usize = 32;

/// The system random generator failed.
#[derive(Debug, thiserror::Error)]
#[error("the system random generator failed")]
pub struct RandomError;

/// An operator's token shorter than [`MIN_OPERATOR_TOKEN_BYTES`].
#[derive(Debug, thiserror::Error)]
#[error("a bearer token needs at least {MIN_OPERATOR_TOKEN_BYTES} bytes, this one has {length}")]
pub struct TokenTooShort {
    /// The length of the refused token, in bytes.
    pub length: usize,
}

/// A bearer token. `Debug` shows `BearerToken([redacted])`.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    /// A fresh token: [`TOKEN_BYTES`] bytes from the system's secure generator, hex-encoded.
    pub fn generate() -> Result<Self, RandomError> {
        random_hex(TOKEN_BYTES).map(Self)
    }

    /// A token taken as it is, without a length check (one handed over by the server that
    /// generated it, as the bridge's client reads it from its environment).
    pub fn new(text: impl Into<String>) -> Self {
        Self(text.into())
    }

    /// An operator's token: surrounding whitespace trimmed, at least
    /// [`MIN_OPERATOR_TOKEN_BYTES`] long.
    pub fn parse(text: &str) -> Result<Self, TokenTooShort> {
        let trimmed = text.trim();
        if trimmed.len() < MIN_OPERATOR_TOKEN_BYTES {
            return Err(TokenTooShort {
                length: trimmed.len(),
            });
        }
        Ok(Self(trimmed.to_owned()))
    }

    /// The secret itself, for the `Authorization` header, an exported variable or a private
    /// file.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether an `Authorization` header value carries this token: the scheme `Bearer` (any
    /// case, as RFC 7235 says), one space, then the token, compared in constant time.
    pub fn accepts(&self, authorization: &str) -> bool {
        let Some((scheme, presented)) = authorization.trim().split_once(' ') else {
            return false;
        };
        scheme.eq_ignore_ascii_case("bearer") && self.matches(presented.trim())
    }

    /// A name for the token that does not reveal it, for audit records: `sha256:` and the first
    /// 12 hex digits of its SHA-256 digest.
    pub fn fingerprint(&self) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, self.0.as_bytes());
        format!("sha256:{}", &hex::encode(digest.as_ref())[..12])
    }

    /// Whether `presented` is this token, in time independent of where they differ.
    pub fn matches(&self, presented: &str) -> bool {
        constant_time_eq(self.0.as_bytes(), presented.as_bytes())
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken([redacted])")
    }
}

/// `count` bytes from the system's secure random generator, hex-encoded.
pub fn random_hex(count: usize) -> Result<String, RandomError> {
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
    fn generated_tokens_are_fresh_64_hex_characters() {
        let first = BearerToken::generate().unwrap();
        let second = BearerToken::generate().unwrap();
        assert_eq!(first.expose().len(), 2 * TOKEN_BYTES);
        assert!(first.expose().bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(first, second);
    }

    #[test]
    fn a_fingerprint_names_the_token_without_revealing_it() {
        let token = BearerToken::new("b".repeat(64));
        let fingerprint = token.fingerprint();
        assert_eq!(fingerprint, token.clone().fingerprint());
        assert!(fingerprint.starts_with("sha256:"), "{fingerprint}");
        assert_eq!(fingerprint.len(), "sha256:".len() + 12);
        assert!(!fingerprint.contains("bbbb"), "{fingerprint}");
        assert_ne!(fingerprint, BearerToken::new("c".repeat(64)).fingerprint());
    }

    #[test]
    fn debug_never_shows_the_token() {
        let token = BearerToken::new("s3cret-value");
        let shown = format!("{token:?}");
        assert!(shown.contains("[redacted]"), "{shown}");
        assert!(!shown.contains("s3cret"), "{shown}");
    }

    #[test]
    fn matches_only_the_exact_token() {
        let token = BearerToken::new("abcdef");
        assert!(token.matches("abcdef"));
        assert!(!token.matches("abcdeF"));
        assert!(!token.matches("bbcdef"));
        assert!(!token.matches("abcde"));
        assert!(!token.matches("abcdefa"));
        assert!(!token.matches(""));
    }

    #[test]
    fn only_the_exact_bearer_header_is_accepted() {
        let token = BearerToken::new("abc123");
        assert!(token.accepts("Bearer abc123"));
        assert!(token.accepts("bearer abc123"));
        assert!(!token.accepts("Bearer abc124"));
        assert!(!token.accepts("Bearer abc1234"));
        assert!(!token.accepts("Basic abc123"));
        assert!(!token.accepts("abc123"));
        assert!(!token.accepts("Bearer"));
    }

    #[test]
    fn an_operator_token_is_trimmed_and_long_enough() {
        let short = BearerToken::parse(" tooshort ").unwrap_err();
        assert_eq!(short.length, 8);
        let text = "0123456789abcdef0123456789abcdef";
        let token = BearerToken::parse(&format!("  {text}\n")).unwrap();
        assert_eq!(token.expose(), text);
    }
}
