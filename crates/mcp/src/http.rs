//! Streamable HTTP: url policy, the reqwest client (warden-net's: no redirects, ring TLS; under a tenant server's egress guard), headers, and failure diagnosis.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::error::{FailureKind, McpError};
use crate::spec::SecretString;

/// Installs the ring TLS provider once per process (rmcp's own clients need it too).
pub use warden_net::install_crypto_provider;

/// Checks the endpoint: https anywhere, plain http only to a loopback host.
pub fn check_url(server: &str, raw: &str) -> Result<url::Url, McpError> {
    let parsed = url::Url::parse(raw).map_err(|error| {
        McpError::new(
            server,
            FailureKind::InsecureUrl,
            format!("\"{raw}\" is not a valid url: {error}"),
            Some("check the url"),
        )
    })?;
    match parsed.scheme() {
        "https" => Ok(parsed),
        "http" if warden_net::is_loopback_url(&parsed) => Ok(parsed),
        "http" => Err(McpError::new(
            server,
            FailureKind::InsecureUrl,
            format!(
                "refusing plain http to {} (only loopback hosts may use http://)",
                parsed.host_str().unwrap_or("?")
            ),
            Some("use an https:// url"),
        )),
        other => Err(McpError::new(
            server,
            FailureKind::InsecureUrl,
            format!("unsupported url scheme \"{other}\" in {raw}"),
            Some("use an https:// url (or http:// to localhost)"),
        )),
    }
}

/// Checks the url's literal host against the server's egress guard, when it has one (a name is
/// checked at each connection by the guarded client's resolver).
pub(crate) fn check_egress(
    server: &str,
    url: &url::Url,
    egress: Option<&warden_net::EgressGuard>,
) -> Result<(), McpError> {
    match egress {
        Some(guard) => guard
            .check_literal(url)
            .map_err(|refusal| egress_refused(server, &refusal)),
        None => Ok(()),
    }
}

/// The failure of a server whose address the egress guard refused: the guard's one line.
pub(crate) fn egress_refused(server: &str, refusal: &warden_net::EgressError) -> McpError {
    McpError::new(
        server,
        FailureKind::EgressRefused,
        refusal.to_string(),
        None,
    )
}

/// The egress guard's refusal in an error's source chain, as the server's failure.
pub(crate) fn egress_failure(server: &str, error: &(dyn StdError + 'static)) -> Option<McpError> {
    find_in_chain::<warden_net::EgressError>(error).map(|refusal| egress_refused(server, refusal))
}

/// warden's outgoing client (never follows redirects), connecting within `connect_timeout`,
/// under the server's egress guard when it has one.
pub(crate) fn build_client(
    server: &str,
    connect_timeout: Duration,
    egress: Option<&warden_net::EgressGuard>,
) -> Result<reqwest::Client, McpError> {
    let mut builder = warden_net::http_client().connect_timeout(connect_timeout);
    if let Some(guard) = egress {
        builder = builder.egress_guard(guard.clone());
    }
    builder.build().map_err(|error| {
        McpError::new(
            server,
            FailureKind::Tls,
            format!("can't build an HTTP client: {error}"),
            None,
        )
    })
}

/// Converts configured headers; an invalid name or value is a configuration failure.
pub(crate) fn header_map(
    server: &str,
    headers: &[(String, SecretString)],
) -> Result<HashMap<HeaderName, HeaderValue>, McpError> {
    const RESERVED: [&str; 4] = [
        "accept",
        "mcp-session-id",
        "mcp-protocol-version",
        "last-event-id",
    ];
    let mut map = HashMap::new();
    for (name, value) in headers {
        if RESERVED
            .iter()
            .any(|reserved| name.eq_ignore_ascii_case(reserved))
        {
            return Err(McpError::new(
                server,
                FailureKind::Rejected,
                format!(
                    "header \"{name}\" is managed by the MCP transport and can't be configured"
                ),
                Some("remove it from the server's headers"),
            ));
        }
        let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            McpError::new(
                server,
                FailureKind::Rejected,
                format!("header name \"{name}\" is not a valid HTTP header name"),
                Some("check the server's headers"),
            )
        })?;
        let mut header_value = HeaderValue::from_str(value.expose()).map_err(|_| {
            McpError::new(
                server,
                FailureKind::Rejected,
                format!("the value of header \"{name}\" is not a valid HTTP header value"),
                Some("check the server's headers"),
            )
        })?;
        header_value.set_sensitive(true);
        map.insert(header_name, header_value);
    }
    Ok(map)
}

/// The rmcp Streamable HTTP client transport on our (authorizing) client and headers.
pub(crate) fn transport(
    client: crate::http_auth::AuthorizingClient,
    url: &url::Url,
    headers: HashMap<HeaderName, HeaderValue>,
) -> StreamableHttpClientTransport<crate::http_auth::AuthorizingClient> {
    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str().to_owned())
        .custom_headers(headers)
        .max_sse_event_size(crate::server::MAX_MESSAGE_BYTES)
        .max_json_response_size(crate::server::MAX_MESSAGE_BYTES)
        .reinit_on_expired_session(true);
    StreamableHttpClientTransport::with_client(client, config)
}

/// Probes the endpoint with one plain POST and classifies what came back, from typed
/// errors, status codes and content types. `None` when the endpoint looks like MCP.
pub(crate) async fn diagnose(
    server: &str,
    client: &reqwest::Client,
    url: &url::Url,
    headers: &HashMap<HeaderName, HeaderValue>,
    timeout: Duration,
) -> Option<McpError> {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": { "name": "warden-probe", "version": env!("CARGO_PKG_VERSION") }
        }
    });
    let mut request = client
        .post(url.as_str())
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .json(&body)
        .timeout(timeout);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    match request.send().await {
        Err(error) => Some(classify_request_error(server, url, &error)),
        Ok(response) => classify_response(server, url, &response),
    }
}

/// Classifies a reqwest error by its kind and source chain (io kinds, rustls errors).
pub(crate) fn classify_request_error(
    server: &str,
    url: &url::Url,
    error: &reqwest::Error,
) -> McpError {
    if let Some(refused) = egress_failure(server, error) {
        return refused;
    }
    if let Some(tls) = find_in_chain::<rustls::Error>(error) {
        return McpError::new(
            server,
            FailureKind::Tls,
            format!("TLS with {url} failed: {tls}"),
            Some("check the url and the server's certificate"),
        );
    }
    if let Some(io) = find_in_chain::<std::io::Error>(error) {
        let what = match io.kind() {
            std::io::ErrorKind::ConnectionRefused => Some("connection refused"),
            std::io::ErrorKind::ConnectionReset => Some("connection reset"),
            std::io::ErrorKind::TimedOut => Some("connection timed out"),
            std::io::ErrorKind::HostUnreachable => Some("host unreachable"),
            std::io::ErrorKind::NetworkUnreachable => Some("network unreachable"),
            std::io::ErrorKind::AddrNotAvailable => Some("address not available"),
            _ => None,
        };
        if let Some(what) = what {
            return unreachable(server, url, what);
        }
        if let Some(tls) = io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return McpError::new(
                server,
                FailureKind::Tls,
                format!("TLS with {url} failed: {tls}"),
                Some("check the url and the server's certificate"),
            );
        }
    }
    if error.is_timeout() {
        return unreachable(server, url, "timed out");
    }
    if error.is_connect() {
        let detail = innermost(error);
        return unreachable(server, url, &detail);
    }
    McpError::new(
        server,
        FailureKind::Unreachable,
        format!("can't reach {url}: {}", innermost(error)),
        Some("check the url, and that the server is running"),
    )
}

fn unreachable(server: &str, url: &url::Url, what: &str) -> McpError {
    McpError::new(
        server,
        FailureKind::Unreachable,
        format!("can't reach {url}: {what}"),
        Some("check the url, and that the server is running"),
    )
}

/// Classifies an HTTP response that should have been an MCP answer.
pub(crate) fn classify_response(
    server: &str,
    url: &url::Url,
    response: &reqwest::Response,
) -> Option<McpError> {
    let status = response.status();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if status.is_redirection() {
        let location = response
            .headers()
            .get(http::header::LOCATION)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("elsewhere");
        return Some(McpError::new(
            server,
            FailureKind::Redirected,
            format!(
                "{url} redirects (HTTP {}) to {location}; redirects are not followed",
                status.as_u16()
            ),
            Some("put the final endpoint url in the config"),
        ));
    }
    if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
        if response
            .headers()
            .contains_key(http::header::WWW_AUTHENTICATE)
        {
            return Some(needs_login(server, url));
        }
        return Some(McpError::new(
            server,
            FailureKind::Rejected,
            format!("{url} rejected the request with HTTP {}", status.as_u16()),
            Some("check the headers (token) configured for this server"),
        ));
    }
    if status == reqwest::StatusCode::NOT_FOUND {
        return Some(McpError::new(
            server,
            FailureKind::NotFound,
            format!("{url} answered HTTP 404 Not Found"),
            Some("check the url: it must be the MCP endpoint itself (often ending in /mcp)"),
        ));
    }
    if status.is_server_error() {
        return Some(McpError::new(
            server,
            FailureKind::ServerError,
            format!("{url} answered HTTP {} (a server error)", status.as_u16()),
            Some("check the server's logs, then reconnect"),
        ));
    }
    if content_type.starts_with("text/html") {
        return Some(McpError::new(
            server,
            FailureKind::NotMcpEndpoint,
            format!("{url} answered with an HTML page, not an MCP endpoint"),
            Some("check the url: it must be the MCP endpoint itself (often ending in /mcp)"),
        ));
    }
    if !status.is_success() {
        return Some(McpError::new(
            server,
            FailureKind::HandshakeFailed,
            format!("{url} answered HTTP {}", status.as_u16()),
            Some("check the url, and that it is an MCP endpoint"),
        ));
    }
    let looks_like_mcp = content_type.starts_with("application/json")
        || content_type.starts_with("text/event-stream");
    if !looks_like_mcp {
        return Some(McpError::new(
            server,
            FailureKind::NotMcpEndpoint,
            format!(
                "{url} answered with {} instead of MCP (JSON or an event stream)",
                if content_type.is_empty() {
                    "no content type"
                } else {
                    content_type.as_str()
                }
            ),
            Some("check the url: it must be the MCP endpoint itself (often ending in /mcp)"),
        ));
    }
    None
}

/// A 401 (or a challenge) from the server, explained by how the entry is authorized: a login
/// for OAuth entries, a plain rejection when login is not the fix.
pub(crate) fn unauthorized(server: &str, url: &url::Url, auth: &crate::spec::HttpAuth) -> McpError {
    match auth {
        crate::spec::HttpAuth::Forbidden { reason } => McpError::new(
            server,
            FailureKind::Rejected,
            format!("{url} answered 401 Unauthorized ({reason})"),
            Some("fix the credential configured for this server"),
        ),
        crate::spec::HttpAuth::Provisioned(_) => McpError::new(
            server,
            FailureKind::Rejected,
            format!("{url} rejected the pre-provisioned token (401) and it could not be refreshed"),
            Some("provide a fresh token in the configured environment variables"),
        ),
        _ => needs_login(server, url),
    }
}

pub(crate) fn needs_login(server: &str, url: &url::Url) -> McpError {
    McpError::new(
        server,
        FailureKind::NeedsLogin,
        format!("needs login: run warden mcp login {server}"),
        Some(&format!(
            "{url} asks for OAuth authorization; log in with `warden mcp login {server}`"
        )),
    )
}

/// The first `T` in the error chain, looking inside `io::Error`s too (their `source()` skips
/// the wrapped error itself).
fn find_in_chain<'a, T: StdError + 'static>(error: &'a (dyn StdError + 'static)) -> Option<&'a T> {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(candidate) = current {
        if let Some(found) = candidate.downcast_ref::<T>() {
            return Some(found);
        }
        if let Some(io) = candidate.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
        {
            let inner: &(dyn StdError + 'static) = inner;
            if let Some(found) = find_in_chain::<T>(inner) {
                return Some(found);
            }
        }
        current = candidate.source();
    }
    None
}

fn innermost(error: &(dyn StdError + 'static)) -> String {
    let mut current: &(dyn StdError + 'static) = error;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}
