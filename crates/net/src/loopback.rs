//! The one loopback rule of warden (`warden-vocab`'s: `localhost`, `127.0.0.0/8`, `::1`,
//! `::ffff:127.x.y.z`; not `*.localhost`) in every form callers hold: host, address, socket
//! address, and here the parsed `Url`.

pub use warden_vocab::{is_loopback_host, is_loopback_ip, is_loopback_socket_addr};

/// Whether a parsed URL's host is loopback. The URL parser has already read its host: an
/// address written another way (`http://0x7f.1/`, `http://2130706433/`) is the address it names,
/// and `http://127.0.0.1:1@evil.example/` names `evil.example`. A URL without a host is not.
pub fn is_loopback_url(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => is_loopback_host(name),
        Some(url::Host::Ipv4(address)) => is_loopback_ip(address.into()),
        Some(url::Host::Ipv6(address)) => is_loopback_ip(address.into()),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::net::{IpAddr, SocketAddr};

    use super::*;
    use crate::AddressClass;

    /// Each host as written, whether it is loopback as a host string, and as the host of an
    /// `http://HOST:8080/` URL (`None`: no valid URL has that host). The two differ only where
    /// the URL parser reads a short or numeric IPv4 form as the address it names.
    const TABLE: &[(&str, bool, Option<bool>)] = &[
        ("localhost", true, Some(true)),
        ("LocalHost", true, Some(true)),
        ("localhost.", true, Some(true)),
        ("127.0.0.1", true, Some(true)),
        ("127.0.0.2", true, Some(true)),
        ("127.0.0.0", true, Some(true)),
        ("127.255.255.254", true, Some(true)),
        ("127.255.255.255", true, Some(true)),
        ("::1", true, Some(true)),
        ("[::1]", true, Some(true)),
        ("0:0:0:0:0:0:0:1", true, Some(true)),
        ("::ffff:127.0.0.1", true, Some(true)),
        ("[::ffff:127.9.9.9]", true, Some(true)),
        ("::ffff:7f00:1", true, Some(true)),
        ("app.localhost", false, Some(false)),
        ("localhost.evil.example", false, Some(false)),
        ("evil-localhost", false, Some(false)),
        ("127.0.0.1.evil.example", false, Some(false)),
        ("128.0.0.1", false, Some(false)),
        ("126.255.255.255", false, Some(false)),
        ("10.0.0.1", false, Some(false)),
        ("0.0.0.0", false, Some(false)),
        ("::", false, Some(false)),
        ("::2", false, Some(false)),
        ("::127.0.0.1", false, Some(false)),
        ("64:ff9b::7f00:1", false, Some(false)),
        ("[::1", false, None),
        ("", false, None),
        ("127.1", false, Some(true)),
        ("0x7f.1", false, Some(true)),
        ("2130706433", false, Some(true)),
    ];

    fn unbracketed(host: &str) -> &str {
        host.strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .unwrap_or(host)
    }

    #[test]
    fn every_form_follows_one_rule() {
        for &(host, as_host, as_url) in TABLE {
            assert_eq!(is_loopback_host(host), as_host, "host {host:?}");
            if let Ok(ip) = unbracketed(host).parse::<IpAddr>() {
                assert_eq!(is_loopback_ip(ip), as_host, "address {ip}");
                let socket = SocketAddr::new(ip, 8080);
                assert_eq!(is_loopback_socket_addr(&socket), as_host, "socket {socket}");
                // The egress guard refuses every loopback address, and more (NAT64 and 6to4
                // forms that carry one).
                if as_host {
                    assert_eq!(AddressClass::of(ip), AddressClass::Loopback, "egress {ip}");
                }
            }
            let written = if unbracketed(host) != host || !host.contains(':') {
                host.to_owned()
            } else {
                format!("[{host}]")
            };
            let url = url::Url::parse(&format!("http://{written}:8080/")).ok();
            assert_eq!(url.as_ref().map(is_loopback_url), as_url, "url of {host:?}");
        }
        let no_host = url::Url::parse("unix:/run/warden/bridge.sock").unwrap();
        assert!(!is_loopback_url(&no_host));
        let userinfo = url::Url::parse("http://127.0.0.1:1@evil.example/").unwrap();
        assert!(!is_loopback_url(&userinfo));
    }
}
