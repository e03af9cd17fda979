//! warden's network basics: the one builder every outgoing HTTP client comes from
//! ([`http_client`]), the bearer token warden's local servers check ([`BearerToken`]), and
//! their `Host` and `Origin` checks against DNS rebinding ([`host_allowed`],
//! [`origin_is_loopback`]), warden's one loopback rule in every form ([`is_loopback_host`],
//! [`is_loopback_ip`], [`is_loopback_socket_addr`], [`is_loopback_url`]), and the egress guard of clients that reach
//! servers a tenant registered ([`EgressGuard`]: public addresses only, unless the operator
//! allows more, checked at registration, at every connection and at every redirect).

mod client;
mod egress;
mod loopback;
mod origin;
mod token;

pub use egress::{
    AddressClass, DEFAULT_REDIRECT_LIMIT, EgressError, EgressGuard, EgressRuleError, EgressRules,
    GuardedResolver, IpRange, Lookup, NameResolver, ResolveError, StaticResolver, SystemResolver,
    address_is_public,
};
pub use loopback::{is_loopback_host, is_loopback_ip, is_loopback_socket_addr, is_loopback_url};
pub use origin::{host_allowed, host_name, origin_is_loopback};

pub use client::{
    DEFAULT_CONNECT_TIMEOUT, HttpClientBuilder, USER_AGENT, http_client, install_crypto_provider,
};
pub use token::{
    BearerToken, MIN_OPERATOR_TOKEN_BYTES, RandomError, TOKEN_BYTES, TokenTooShort, random_hex,
};
