//! The HTTP gateway's bearer token: warden-net's [`BearerToken`], the operator's from
//! `WARDEN_SERVE_TOKEN` (at least [`MIN_OPERATOR_TOKEN_BYTES`] long) or freshly generated.

use warden_net::{BearerToken, MIN_OPERATOR_TOKEN_BYTES, TokenTooShort};

/// The environment variable holding the operator's token.
pub const TOKEN_ENV: &str = "WARDEN_SERVE_TOKEN";

/// The token in `WARDEN_SERVE_TOKEN`, trimmed: `None` when unset or blank, an error when it is
/// shorter than [`MIN_OPERATOR_TOKEN_BYTES`].
pub fn token_from_env() -> Option<Result<BearerToken, TokenTooShort>> {
    let value = std::env::var(TOKEN_ENV).ok()?;
    (!value.trim().is_empty()).then(|| BearerToken::parse(&value))
}

/// Why `WARDEN_SERVE_TOKEN` was refused, with a way to make a good one.
pub fn too_short_message(error: &TokenTooShort) -> String {
    format!(
        "{TOKEN_ENV} is {} bytes; a bearer token needs at least {MIN_OPERATOR_TOKEN_BYTES} \
         (for example `openssl rand -hex 32`)",
        error.length
    )
}
