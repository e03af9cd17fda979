//! The `Host` and `Origin` checks of warden's local HTTP servers (the service, `warden serve
//! --a2a`): a `Host` must name loopback or the bound address, so a page on a rebound DNS name
//! cannot reach them; a browser `Origin` on loopback is this machine's own.

use std::net::SocketAddr;

use crate::loopback::{is_loopback_host, is_loopback_url};

/// The host part of a `Host` header (without the port; brackets of an IPv6 address removed).
pub fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    host.rsplit_once(':').map_or(host, |(name, _port)| name)
}

/// Whether a `Host` header names loopback ([`is_loopback_host`]) or the address the server is
/// bound to (when that is not the unspecified address).
pub fn host_allowed(host: &str, bound: &SocketAddr) -> bool {
    let name = host_name(host);
    is_loopback_host(name) || (!bound.ip().is_unspecified() && name == bound.ip().to_string())
}

/// Whether a browser `Origin` is a page served from loopback ([`is_loopback_url`]), over http or
/// https, on any port.
pub fn origin_is_loopback(origin: &str) -> bool {
    url::Url::parse(origin).is_ok_and(|url| {
        matches!(url.scheme(), "http" | "https") && url.path() == "/" && is_loopback_url(&url)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn hosts_and_origins_are_loopback_or_the_bound_address() {
        let loopback: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert!(host_allowed("localhost:8080", &loopback));
        assert!(host_allowed("[::1]:8080", &loopback));
        assert!(!host_allowed("evil.example:8080", &loopback));
        assert!(!host_allowed("", &loopback));
        let public: SocketAddr = "10.0.0.5:80".parse().unwrap();
        assert!(host_allowed("10.0.0.5", &public));
        let any: SocketAddr = "0.0.0.0:80".parse().unwrap();
        assert!(!host_allowed("0.0.0.0", &any));
        assert!(origin_is_loopback("http://localhost:3000"));
        assert!(!origin_is_loopback("http://localhost.evil.example"));
        assert!(!origin_is_loopback("https://evil.example"));
        assert!(host_allowed("127.0.0.2:8080", &loopback));
        assert!(host_allowed("[::ffff:127.0.0.1]:8080", &loopback));
        assert!(!host_allowed("app.localhost:8080", &loopback));
        assert!(origin_is_loopback("http://127.0.0.1"));
        assert!(origin_is_loopback("http://[::1]:8080"));
        assert!(origin_is_loopback("http://127.0.0.2:8080"));
        assert!(origin_is_loopback("https://localhost:8443"));
        assert!(!origin_is_loopback("http://127.0.0.1:1@evil.example"));
        assert!(!origin_is_loopback("http://app.localhost:3000"));
        assert!(!origin_is_loopback("null"));
        assert!(!origin_is_loopback("file://localhost"));
    }
}
