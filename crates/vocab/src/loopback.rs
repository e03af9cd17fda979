//! What "this machine" means, once for every loopback check in warden: plain http allowed only to
//! loopback, `--insecure-no-auth` only on loopback, the `Host` and `Origin` checks of the local
//! servers, the tool bridge's URL. `warden-net` re-exports these and adds the `Url` form.
//!
//! Loopback is the name `localhost` (any case, one trailing dot allowed), every address in
//! `127.0.0.0/8`, `::1`, and the IPv4-mapped form of a loopback address (`::ffff:127.0.0.1`).
//! Subdomains of `localhost` (`app.localhost`) do not count: RFC 6761 asks resolvers to send them
//! to loopback, but the system resolver may pass them to DNS, whose answer can be any address, so
//! a token sent over plain http to such a name could leave the machine. `localhost.evil.example`
//! and `127.0.0.1.evil.example` are names like any other, and `127.1` is not an address here.
//! One table in warden-net's `loopback` module tests every form (host, address, socket address,
//! `Url`) against this rule.

use std::net::{IpAddr, SocketAddr};

/// Whether `ip` is a loopback address: `127.0.0.0/8`, `::1`, or `::ffff:127.x.y.z`.
pub fn is_loopback_ip(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// Whether a socket address's IP is a loopback address ([`is_loopback_ip`]), whatever the port.
pub fn is_loopback_socket_addr(address: &SocketAddr) -> bool {
    is_loopback_ip(address.ip())
}

/// Whether `host` (a URL's or a `Host` header's host, without a port) names this machine:
/// `localhost` or `localhost.` in any case, or a loopback address ([`is_loopback_ip`]); an IPv6
/// address may be in brackets.
pub fn is_loopback_host(host: &str) -> bool {
    let host = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'))
        .unwrap_or(host);
    if host.eq_ignore_ascii_case("localhost") || host.eq_ignore_ascii_case("localhost.") {
        return true;
    }
    host.parse::<IpAddr>().is_ok_and(is_loopback_ip)
}
