//! The client side of the session bridge: inside an agent session's bash tool, `warden tool`
//! finds `WARDEN_BRIDGE_URL` and `WARDEN_BRIDGE_TOKEN` and asks the session's gate over HTTP —
//! on loopback (`http://127.0.0.1:PORT`) or on a Unix socket (`unix:/path/to/bridge.sock`) —
//! instead of opening a host of its own. The session's handshake uses the same client.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{
    BearerToken, CallRequest, CallView, ErrorView, Handshake, PROTOCOL_VERSION, ResourceRequest,
    SearchRequest, SearchView, ServerRow, TOKEN_VAR, ToolView, UNIX_URL_PREFIX, URL_VAR, ViewError,
};
/// A connection to one session's bridge.
#[derive(Debug)]
pub struct BridgeClient {
    http: reqwest::Client,
    base: String,
    token: BearerToken,
}

/// Why the bridge variables cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BridgeClientError {
    #[error("{URL_VAR} must be a loopback http:// URL or unix:/absolute/path, not {0}")]
    NotLoopback(String),
    #[cfg(not(unix))]
    #[error("{URL_VAR} names a Unix socket ({0}), which this platform does not have")]
    UnixUnsupported(String),
    #[error("cannot build the bridge's HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// The base URL of requests sent over a Unix socket (the host is not looked up).
const UNIX_BASE: &str = "http://localhost";

/// The socket of a `unix:/absolute/path` URL; `None` for any other URL (a relative path is not
/// a Unix socket URL, so it is refused as not loopback).
fn unix_socket_path(url: &str) -> Option<&std::path::Path> {
    let path = std::path::Path::new(url.strip_prefix(UNIX_URL_PREFIX)?);
    path.is_absolute().then_some(path)
}

#[cfg(unix)]
fn on_unix_socket(
    client: warden_net::HttpClientBuilder,
    socket: &std::path::Path,
    _url: &str,
) -> Result<warden_net::HttpClientBuilder, BridgeClientError> {
    Ok(client.unix_socket(socket))
}

#[cfg(not(unix))]
fn on_unix_socket(
    _client: warden_net::HttpClientBuilder,
    _socket: &std::path::Path,
    url: &str,
) -> Result<warden_net::HttpClientBuilder, BridgeClientError> {
    Err(BridgeClientError::UnixUnsupported(url.to_owned()))
}

/// Only loopback: the token must never travel to another machine. The URL is parsed, not
/// matched by prefix: `http://127.0.0.1:1@evil.example/` names the host `evil.example`.
fn is_local_bridge_url(url: &str) -> bool {
    let Ok(parsed) = url::Url::parse(url) else {
        return false;
    };
    parsed.scheme() == "http"
        && parsed.username().is_empty()
        && parsed.password().is_none()
        && parsed.port().is_some()
        && warden_net::is_loopback_url(&parsed)
}

impl BridgeClient {
    /// The bridge named by `WARDEN_BRIDGE_URL` and `WARDEN_BRIDGE_TOKEN`, when both are set.
    pub fn from_env() -> Option<Result<Self, BridgeClientError>> {
        let url = std::env::var(URL_VAR).ok().filter(|url| !url.is_empty())?;
        let token = std::env::var(TOKEN_VAR)
            .ok()
            .filter(|token| !token.is_empty())?;
        Some(Self::new(&url, BearerToken::new(token)))
    }

    /// `url` is a loopback `http://` URL or `unix:/absolute/path/to/the.sock`.
    pub fn new(url: &str, token: BearerToken) -> Result<Self, BridgeClientError> {
        // Plain HTTP on loopback: no proxy, no TLS roots to load (a fast start matters here).
        let builder = warden_net::http_client()
            .loopback()
            .connect_timeout(Duration::from_secs(5));
        let (builder, base) = match unix_socket_path(url) {
            Some(socket) => (on_unix_socket(builder, socket, url)?, UNIX_BASE.to_owned()),
            None => {
                let base = url.trim_end_matches('/').to_owned();
                if !is_local_bridge_url(&base) {
                    return Err(BridgeClientError::NotLoopback(base));
                }
                (builder, base)
            }
        };
        Ok(Self {
            http: builder.build()?,
            base,
            token,
        })
    }

    async fn send<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, ViewError> {
        let unreachable = |error: reqwest::Error| {
            ViewError::unavailable(
                format!("the session's tool bridge is unreachable: {error}"),
                Vec::new(),
            )
        };
        let response = request
            .bearer_auth(self.token.expose())
            .send()
            .await
            .map_err(unreachable)?;
        let status = response.status();
        let body = response.bytes().await.map_err(unreachable)?;
        if status.is_success() {
            return serde_json::from_slice(&body).map_err(|error| {
                ViewError::unavailable(
                    format!("the tool bridge sent an answer this warden cannot read: {error}"),
                    Vec::new(),
                )
            });
        }
        let refusal = serde_json::from_slice::<ErrorView>(&body).unwrap_or_else(|_| ErrorView {
            error: format!(
                "the tool bridge answered {status}: {}",
                String::from_utf8_lossy(&body).trim()
            ),
            stderr_tail: Vec::new(),
        });
        let mut error = if status.is_client_error() {
            ViewError::bad_request(refusal.error)
        } else {
            ViewError::unavailable(refusal.error, Vec::new())
        };
        error.stderr_tail = refusal.stderr_tail;
        Err(error)
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ViewError> {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, ViewError> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(body))
            .await
    }

    /// Checks the protocol version and returns the session id.
    pub async fn handshake(&self) -> Result<Handshake, ViewError> {
        let handshake: Handshake = self.get("/v1/handshake").await?;
        if handshake.protocol != PROTOCOL_VERSION {
            return Err(ViewError::unavailable(
                format!(
                    "the tool bridge speaks protocol {}, this warden speaks {PROTOCOL_VERSION}",
                    handshake.protocol
                ),
                Vec::new(),
            ));
        }
        Ok(handshake)
    }

    pub async fn servers(&self) -> Result<Vec<ServerRow>, ViewError> {
        self.get("/v1/servers").await
    }

    pub async fn tools(&self, server: &str) -> Result<Vec<ToolView>, ViewError> {
        self.get(&format!("/v1/servers/{}/tools", path_segment(server)))
            .await
    }

    pub async fn call(&self, request: &CallRequest) -> Result<CallView, ViewError> {
        self.post("/v1/call", request).await
    }

    pub async fn search(&self, query: &str, limit: usize) -> Result<SearchView, ViewError> {
        self.post(
            "/v1/search",
            &SearchRequest {
                query: query.to_owned(),
                limit,
            },
        )
        .await
    }

    pub async fn list_resources(&self, server: Option<&str>) -> Result<CallView, ViewError> {
        self.post(
            "/v1/resources/list",
            &ResourceRequest {
                server: server.map(str::to_owned),
                uri: None,
            },
        )
        .await
    }

    pub async fn resource_templates(&self, server: Option<&str>) -> Result<Value, ViewError> {
        self.post(
            "/v1/resources/templates",
            &ResourceRequest {
                server: server.map(str::to_owned),
                uri: None,
            },
        )
        .await
    }

    pub async fn read_resource(&self, server: &str, uri: &str) -> Result<CallView, ViewError> {
        self.post(
            "/v1/resources/read",
            &ResourceRequest {
                server: Some(server.to_owned()),
                uri: Some(uri.to_owned()),
            },
        )
        .await
    }
}

/// Percent-encodes a server name for a URL path segment.
fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls_are_accepted() {
        assert!(is_local_bridge_url("http://127.0.0.1:4000"));
        assert!(is_local_bridge_url("http://localhost:4000/"));
        assert!(is_local_bridge_url("http://[::1]:4000"));
        assert!(!is_local_bridge_url("https://127.0.0.1:4000"));
        assert!(!is_local_bridge_url("http://127.0.0.1.evil.test:4000"));
        assert!(!is_local_bridge_url("http://example.com:4000"));
        assert!(!is_local_bridge_url("http://localhost.example.com:80"));
        assert!(!is_local_bridge_url("http://127.0.0.1:1@evil.example/"));
        assert!(!is_local_bridge_url("http://user:pass@127.0.0.1:4000/"));
    }

    #[test]
    fn unix_socket_urls_need_an_absolute_path() {
        assert_eq!(
            unix_socket_path("unix:/run/user/1/warden/b/bridge.sock"),
            Some(std::path::Path::new("/run/user/1/warden/b/bridge.sock"))
        );
        assert_eq!(unix_socket_path("unix:relative.sock"), None);
        assert_eq!(unix_socket_path("http://127.0.0.1:4000"), None);
        let relative = BridgeClient::new("unix:relative.sock", BearerToken::new("t"));
        assert!(
            matches!(relative, Err(BridgeClientError::NotLoopback(_))),
            "{relative:?}"
        );
    }

    /// A bridge that answers every request with this handshake, once per connection.
    async fn bridge_speaking(protocol: u32) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = [0_u8; 4096];
                let _ = stream.read(&mut request).await;
                let body = format!(r#"{{"protocol":{protocol},"session":"s-1"}}"#);
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            }
        });
        format!("http://{address}")
    }

    #[tokio::test]
    async fn a_bridge_of_another_protocol_version_is_refused_with_both_versions() {
        let url = bridge_speaking(PROTOCOL_VERSION + 1).await;
        let client = BridgeClient::new(&url, BearerToken::new("t")).unwrap();
        let refused = client.handshake().await.unwrap_err();
        assert_eq!(refused.kind, crate::views::ViewErrorKind::Unavailable);
        assert_eq!(
            refused.message,
            format!(
                "the tool bridge speaks protocol {}, this warden speaks {PROTOCOL_VERSION}",
                PROTOCOL_VERSION + 1
            )
        );
        let same = bridge_speaking(PROTOCOL_VERSION).await;
        let client = BridgeClient::new(&same, BearerToken::new("t")).unwrap();
        assert_eq!(client.handshake().await.unwrap().session, "s-1");
    }

    #[test]
    fn server_names_are_escaped_in_paths() {
        assert_eq!(path_segment("my-server_1"), "my-server_1");
        assert_eq!(path_segment("a/b c"), "a%2Fb%20c");
    }
}
