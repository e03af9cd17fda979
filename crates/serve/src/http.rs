//! The gateway over Streamable HTTP: rmcp's service at `/mcp` behind a bearer-token check,
//! loopback `Host` and `Origin` validation (DNS rebinding), a request body limit, one MCP
//! session per client — idle sessions closed, their number capped — and JSON-RPC error bodies
//! for requests that are not JSON or not JSON-RPC.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use futures::StreamExt;
use http::{HeaderValue, Method, StatusCode, header};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::sessions::{InFlight, SessionGauge, Sessions};
use warden_net::BearerToken;

use crate::{Gateway, GatewayHandler, ServeError};

/// Where the MCP endpoint is mounted.
pub const MCP_PATH: &str = "/mcp";
/// The largest request body accepted (4 MiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Browser origins accepted: loopback only, any port. rmcp matches `Origin` and `Host` against
/// lists of spellings, not a rule: these are the usual spellings of warden's loopback rule
/// (`warden_net::is_loopback_host`), and [`allowed_hosts`] adds the bound address.
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];
/// `Host` values accepted on a loopback address.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
/// An MCP session with no request for this long is closed (30 minutes): long enough for a person
/// to step away from an editor, short enough that abandoned sessions do not pile up. Its
/// client's next request gets 404 and starts a new session, as the protocol says.
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The most MCP sessions open at once (about 100 MB at roughly 100 KB each); an `initialize`
/// beyond is answered 503.
pub const DEFAULT_MAX_SESSIONS: usize = 1000;
/// The session header of Streamable HTTP.
const SESSION_HEADER: &str = "mcp-session-id";
/// JSON-RPC's error codes used here.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
const SERVER_BUSY: i64 = -32000;

/// How clients authenticate.
#[derive(Debug, Clone)]
pub enum HttpAuth {
    /// `Authorization: Bearer TOKEN` on every request.
    Bearer(BearerToken),
    /// No authentication (`--insecure-no-auth`): loopback addresses only.
    InsecureNone,
}

/// The HTTP gateway's settings.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    pub auth: HttpAuth,
    pub max_body_bytes: usize,
    /// An MCP session none of whose requests is in flight and whose last request ended this
    /// long ago is closed ([`DEFAULT_SESSION_IDLE_TIMEOUT`]).
    pub session_idle_timeout: Duration,
    /// The most MCP sessions open at once; an `initialize` beyond is answered 503 with a
    /// JSON-RPC error ([`DEFAULT_MAX_SESSIONS`]).
    pub max_sessions: usize,
    /// Stops the server (every session ends).
    pub shutdown: CancellationToken,
    /// The running server's live-session count (shared by clones of these settings).
    pub sessions: SessionGauge,
}

impl HttpSettings {
    pub fn new(auth: HttpAuth) -> Self {
        Self {
            auth,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            session_idle_timeout: DEFAULT_SESSION_IDLE_TIMEOUT,
            max_sessions: DEFAULT_MAX_SESSIONS,
            shutdown: CancellationToken::new(),
            sessions: SessionGauge::default(),
        }
    }
}

/// Binds the listener, refusing `--insecure-no-auth` off loopback before anything listens.
pub async fn bind_http(addr: SocketAddr, auth: &HttpAuth) -> Result<TcpListener, ServeError> {
    if matches!(auth, HttpAuth::InsecureNone) && !warden_net::is_loopback_socket_addr(&addr) {
        return Err(ServeError::InsecureOffLoopback(addr));
    }
    Ok(TcpListener::bind(addr).await?)
}

/// The `Host` values accepted: loopback names, plus the bound address (also a loopback one such
/// as `127.0.0.2`) unless it is the unspecified address.
fn allowed_hosts(bound: &SocketAddr) -> Vec<String> {
    let mut hosts: Vec<String> = LOOPBACK_HOSTS
        .iter()
        .map(|host| (*host).to_owned())
        .collect();
    let ip = bound.ip().to_string();
    if !bound.ip().is_unspecified() && !hosts.contains(&ip) {
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
    let mut manager = LocalSessionManager::default();
    // Idle sessions are closed by `Sessions`, which knows about requests in flight.
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let sessions = Sessions::new(
        manager.clone(),
        settings.max_sessions,
        settings.session_idle_timeout,
    );
    settings.sessions.attach(sessions.clone());
    tokio::spawn(
        sessions
            .clone()
            .run_sweeper(settings.shutdown.child_token()),
    );
    let service: StreamableHttpService<GatewayHandler, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(factory_gateway.handler()), manager, config);
    let mut router = axum::Router::new().nest_service(MCP_PATH, service).layer(
        axum::middleware::from_fn_with_state(
            Arc::new(Admission {
                sessions,
                max_body_bytes: settings.max_body_bytes,
            }),
            admit,
        ),
    );
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

/// Refuses a request without the right bearer token (401, `WWW-Authenticate: Bearer`): the
/// middleware of every warden HTTP server that takes `WARDEN_SERVE_TOKEN`.
pub async fn require_bearer(
    State(token): State<Arc<BearerToken>>,
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

/// What the admission check needs.
struct Admission {
    sessions: Arc<Sessions>,
    max_body_bytes: usize,
}

/// The parts of a JSON-RPC message the admission check reads.
#[derive(serde::Deserialize)]
struct Probe {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    id: Option<Value>,
}

/// In front of rmcp: a POST body that is not JSON gets 400 with a JSON-RPC parse error (rmcp
/// would say 415), and JSON that is not a JSON-RPC message 400 with an invalid-request error; an
/// `initialize` that would open a session beyond the cap gets 503 with a JSON-RPC error; and each
/// request of a session is recorded as its activity until its answer has been sent.
async fn admit(State(admission): State<Arc<Admission>>, request: Request, next: Next) -> Response {
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let sessions = &admission.sessions;
    if request.method() != Method::POST || !is_json(request.headers()) {
        // GET (the notification stream), DELETE, and what rmcp refuses itself.
        let in_flight = session.as_deref().and_then(|id| sessions.begin(id));
        return hold_until_sent(next.run(request).await, in_flight);
    }
    let (parts, body) = request.into_parts();
    let bytes = match read_body(body, admission.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(response) => return response,
    };
    // One pass reads the method and id and checks the syntax of the rest.
    let probe = match serde_json::from_slice::<Probe>(&bytes) {
        Ok(probe) => Some(probe),
        Err(error) if error.is_syntax() || error.is_eof() => {
            return json_rpc_error(
                StatusCode::BAD_REQUEST,
                Value::Null,
                PARSE_ERROR,
                format!("Parse error: {error}"),
            );
        }
        // JSON, but not an object with a string method (a batch, say): rmcp decides.
        Err(_) => None,
    };
    let id = probe
        .as_ref()
        .and_then(|probe| probe.id.clone())
        .filter(|id| id.is_string() || id.is_number())
        .unwrap_or(Value::Null);
    let opens_session = session.is_none()
        && probe
            .as_ref()
            .is_some_and(|probe| probe.method.as_deref() == Some("initialize"));
    let reservation = if opens_session {
        match sessions.reserve().await {
            Some(reservation) => Some(reservation),
            None => {
                return json_rpc_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    id,
                    SERVER_BUSY,
                    format!(
                        "Server busy: {} MCP sessions are open, the most this server keeps; try again later",
                        sessions.max()
                    ),
                );
            }
        }
    } else {
        None
    };
    let mut in_flight = session.as_deref().and_then(|id| sessions.begin(id));
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        // The content type was JSON and the body parsed: rmcp could not read it as JSON-RPC.
        let detail = axum::body::to_bytes(response.into_body(), 4096)
            .await
            .map(|body| String::from_utf8_lossy(&body).into_owned())
            .unwrap_or_default();
        let detail = detail
            .strip_prefix("fail to deserialize request body ")
            .unwrap_or(&detail);
        return json_rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            INVALID_REQUEST,
            format!("Invalid Request: not a JSON-RPC message this server reads: {detail}"),
        );
    }
    if reservation.is_some()
        && let Some(opened) = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
    {
        in_flight = Some(sessions.opened(opened));
    }
    // The reservation ends here: the session, when one was opened, is in the manager now.
    drop(reservation);
    hold_until_sent(response, in_flight)
}

/// The whole body, or the answer when it is larger than `max` (413) or cannot be read.
pub async fn read_body(body: Body, max: usize) -> Result<Vec<u8>, Response> {
    let mut bytes = Vec::new();
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|error| {
            (
                StatusCode::BAD_REQUEST,
                format!("Failed to read request body: {error}"),
            )
                .into_response()
        })?;
        if chunk.len() > max.saturating_sub(bytes.len()) {
            return Err((
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Payload Too Large: request body exceeds {max} bytes"),
            )
                .into_response());
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// Whether the request says its body is JSON (the check rmcp makes before reading it).
fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .split_once(';')
                .map_or(value, |(essence, _)| essence)
                .trim()
                .eq_ignore_ascii_case("application/json")
        })
}

/// Keeps `in_flight` until the answer's event stream has been sent (or dropped).
fn hold_until_sent(response: Response, in_flight: Option<InFlight>) -> Response {
    let Some(in_flight) = in_flight else {
        return response;
    };
    let streams = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if !streams {
        return response;
    }
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _ = &in_flight;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// A JSON-RPC error answer with this HTTP status.
pub fn json_rpc_error(status: StatusCode, id: Value, code: i64, message: String) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
