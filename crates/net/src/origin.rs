//! The `Host` and `Origin` checks of warden's local HTTP servers (the service, `warden serve
//! --a2a`): a `Host` must name loopback or the bound address, so a page on a rebound DNS name
//! cannot reach them; a browser `Origin` on loopback is this machine's own.

use std::net::{IpAddr, SocketAddr};

/// The host part of a `Host` header (without the port; brackets of an IPv6 address removed).
pub fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    host.rsplit_once(':').map_or(host, |(name, _port)| name)
}

/// Whether a `Host` header names loopback (`localhost`, `127.0.0.1`, `::1`) or the address the
/// server is bound to (when that is not the unspecified address).
pub fn host_allowed(host: &str, bound: &SocketAddr) -> bool {
    let name = host_name(host);
    matches!(name, "localhost" | "127.0.0.1" | "::1")
        || (!bound.ip().is_unspecified() && name == bound.ip().to_string())
}

/// Whether `host` (a URL's host, without a port) names this machine: `localhost` (any case, one
/// trailing dot allowed), an address in `127.0.0.0/8`, `::1`, or the IPv4-mapped form of a
/// loopback address (`::ffff:127.0.0.1`); an IPv6 address may be in brackets.
/// `localhost.evil.example` and `127.0.0.1.evil.example` are names like any other.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    if host.eq_ignore_ascii_case("localhost") || host.eq_ignore_ascii_case("localhost.") {
        return true;
    }
    host.parse::<IpAddr>()
        .is_ok_and(|address| address.to_canonical().is_loopback())
}

/// Whether a browser `Origin` is a page served from loopback, on any port.
pub fn origin_is_loopback(origin: &str) -> bool {
    ["http://localhost", "http://127.0.0.1", "http://[::1]"]
        .iter()
        .any(|allowed| {
            origin
                .strip_prefix(allowed)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
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
    }

    #[test]
    fn loopback_hosts_are_localhost_127_and_the_ipv6_forms() {
        for loopback in [
            "localhost",
            "LocalHost",
            "localhost.",
            "127.0.0.1",
            "127.0.0.2",
            "127.255.255.254",
            "::1",
            "[::1]",
            "0:0:0:0:0:0:0:1",
            "::ffff:127.0.0.1",
            "[::ffff:127.9.9.9]",
            "::ffff:7f00:1",
        ] {
            assert!(is_loopback_host(loopback), "{loopback}");
        }
        for other in [
            "localhost.evil.example",
            "evil-localhost",
            "127.0.0.1.evil.example",
            "128.0.0.1",
            "10.0.0.1",
            "0.0.0.0",
            "::",
            "::2",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "[::1",
            "",
            "127.1",
        ] {
            assert!(!is_loopback_host(other), "{other}");
        }
    }
}
