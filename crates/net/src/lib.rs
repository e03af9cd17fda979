//! warden's network basics: the one builder every outgoing HTTP client comes from
//! ([`http_client`]) and the bearer token warden's local servers check ([`BearerToken`]).

mod client;
mod token;

pub use client::{
    DEFAULT_CONNECT_TIMEOUT, HttpClientBuilder, USER_AGENT, http_client, install_crypto_provider,
};
pub use token::{
    BearerToken, MIN_OPERATOR_TOKEN_BYTES, RandomError, TOKEN_BYTES, TokenTooShort, random_hex,
};
