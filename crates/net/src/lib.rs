//! warden's network basics: the one builder every outgoing HTTP client comes from
//! ([`http_client`]), the bearer token warden's local servers check ([`BearerToken`]), and
//! their `Host` and `Origin` checks against DNS rebinding ([`host_allowed`],
//! [`origin_is_loopback`]).

mod client;
mod origin;
mod token;

pub use origin::{host_allowed, host_name, origin_is_loopback};

pub use client::{
    DEFAULT_CONNECT_TIMEOUT, HttpClientBuilder, USER_AGENT, http_client, install_crypto_provider,
};
pub use token::{
    BearerToken, MIN_OPERATOR_TOKEN_BYTES, RandomError, TOKEN_BYTES, TokenTooShort, random_hex,
};
