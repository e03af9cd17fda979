//! The gateway over Streamable HTTP: rmcp's service at `/mcp` behind a bearer-token check,
//! loopback `Host` and `Origin` validation (DNS rebinding), a request body limit, and one MCP
//! session per client.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use http::{StatusCode, header};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::{Gateway, GatewayHandler, ServeError, ServeToken};

/// Where the MCP endpoint is mounted.
pub const MCP_PATH: &str = "/mcp";
/// The largest request body accepted (4 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Browser origins accepted: loopback only, any port.
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];
/// `Host` values accepted on a loopback address.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// How clients authenticate.
#[derive(Debug, Clone)]
pub enum HttpAuth {
    /// `Authorization: Bearer TOKEN` on every request.
    Bearer(ServeToken),
    /// No authentication (`--insecure-no-auth`): loopback addresses only.
    InsecureNone,
}

/// The HTTP gateway's settings.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub auth: HttpAuth,
    pub max_body_bytes: usize,
    /// Stops the server (every session ends).
    pub shutdown: CancellationToken,
}

impl HttpSettings {
    pub fn new(auth: HttpAuth) -> Self {
        Self {
            auth,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            shutdown: CancellationToken::new(),
        }
    }
}

/// Whether `addr` is a loopback address.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}

/// Binds the listener, refusing `--insecure-no-auth` off loopback before anything listens.
pub async fn bind_http(addr: SocketAddr, auth: &HttpAuth) -> Result<TcpListener, ServeError> {
    if matches!(auth, HttpAuth::InsecureNone) && !is_loopback(&addr) {
        return Err(ServeError::InsecureOffLoopback(addr));
    }
    Ok(TcpListener::bind(addr).await?)
}

/// The `Host` values accepted: loopback names, plus the bound address when it is not loopback.
fn allowed_hosts(bound: &SocketAddr) -> Vec<String> {
    let mut hosts: Vec<String> = LOOPBACK_HOSTS
        .iter()
        .map(|host| (*host).to_owned())
        .collect();
    if !bound.ip().is_loopback() && !bound.ip().is_unspecified() {
        let ip = match bound.ip() {
            IpAddr::V4(ip) => ip.to_string(),
            IpAddr::V6(ip) => ip.to_string(),
        };
        hosts.push(ip);
    }
    hosts
}

/// Serves the gateway on `listener` until `settings.shutdown` fires.
pub async fn serve_http(
    gateway: Arc<Gateway>,
    listener: TcpListener,
    settings: HttpSettings,
) -> Result<(), ServeError> {
    let bound = listener.local_addr()?;
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed_hosts(&bound))
        .with_allowed_origins(LOOPBACK_ORIGINS)
        .with_max_request_body_bytes(settings.max_body_bytes)
        .with_cancellation_token(settings.shutdown.child_token());
    let factory_gateway = gateway.clone();
    let service: StreamableHttpService<GatewayHandler, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(factory_gateway.handler()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
    let mut router = axum::Router::new().nest_service(MCP_PATH, service);
    if let HttpAuth::Bearer(token) = settings.auth {
        router = router.layer(axum::middleware::from_fn_with_state(
            Arc::new(token),
            require_bearer,
        ));
    }
    let shutdown = settings.shutdown.clone();
    // Responses are SSE streams written in several small pieces (headers and priming event, the
    // message, the closing chunk). With Nagle's algorithm on, a later piece waits for the ACK of
    // the first, which a keep-alive client delays by up to 40 ms: every call would stall.
    let listener = listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY on an accepted connection: {error}");
        }
    });
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await?;
    Ok(())
}

/// Refuses a request without the right bearer token (401, `WWW-Authenticate: Bearer`).
async fn require_bearer(
    State(token): State<Arc<ServeToken>>,
    request: Request,
    next: Next,
) -> Response {
    let authorized = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| token.accepts(value));
    if authorized {
        next.run(request).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "warden serve: a bearer token is required (Authorization: Bearer $WARDEN_SERVE_TOKEN)\n",
        )
            .into_response()
    }
}
