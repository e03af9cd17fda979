//! The A2A server over HTTP: the agent card at `/.well-known/agent-card.json` and the JSON-RPC
//! endpoint at `/a2a` (`SendMessage`, `SendStreamingMessage` as server-sent events, `GetTask`,
//! `CancelTask`, and their v0.3 names `message/send`, `message/stream`, `tasks/get`,
//! `tasks/cancel`, converted at this edge), behind the `Host`/`Origin` checks against DNS rebinding, the bearer token of
//! `warden serve` and its request body limit.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use futures::StreamExt;
use http::{HeaderValue, StatusCode, header};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use warden_serve::{HttpAuth, json_rpc_error, read_body, require_bearer};

use crate::protocol::{self, RpcError, code};
use crate::tasks::{Agent, Limits};
use crate::v03;
use crate::{A2aError, SessionOpener};

/// Where the JSON-RPC endpoint is mounted.
pub const A2A_PATH: &str = "/a2a";
/// Where the agent card is published (A2A's well-known path).
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// The most contexts open at once unless the operator says otherwise: each is an agent session
/// with its own MCP server processes.
pub const DEFAULT_MAX_CONTEXTS: usize = 32;

/// The A2A server's settings.
#[derive(Debug, Clone)]
pub struct A2aSettings {
    pub auth: HttpAuth,
    /// The largest request body accepted (larger: 413).
    pub max_body_bytes: usize,
    /// The most contexts (agent sessions, each with its MCP servers) open at once; a message
    /// that would open one more closes the context idle longest if it has been idle for
    /// `idle_timeout`, else is refused ([`DEFAULT_MAX_CONTEXTS`]).
    pub max_contexts: usize,
    /// How long a context must have been idle before it may be closed to make room
    /// (`warden_serve::DEFAULT_SESSION_IDLE_TIMEOUT`, 30 minutes).
    pub idle_timeout: std::time::Duration,
    /// Stops the server (running tasks are cancelled, sessions end).
    pub shutdown: CancellationToken,
    /// The agents the card offers as skills (the default one first).
    pub profiles: Vec<crate::Profile>,
}

impl A2aSettings {
    pub fn new(auth: HttpAuth) -> Self {
        Self {
            auth,
            max_body_bytes: warden_serve::DEFAULT_MAX_BODY_BYTES,
            max_contexts: DEFAULT_MAX_CONTEXTS,
            idle_timeout: warden_serve::DEFAULT_SESSION_IDLE_TIMEOUT,
            shutdown: CancellationToken::new(),
            profiles: Vec::new(),
        }
    }
}

struct Shared {
    agent: Agent,
    bound: SocketAddr,
    bearer: bool,
    max_body_bytes: usize,
}

/// Serves A2A on `listener` until `settings.shutdown` fires; `--insecure-no-auth` is refused off
/// loopback.
pub async fn serve_a2a(
    opener: Arc<dyn SessionOpener>,
    listener: TcpListener,
    settings: A2aSettings,
) -> Result<(), A2aError> {
    let bound = listener.local_addr()?;
    let identity = match &settings.auth {
        HttpAuth::Bearer(token) => format!("token={}", token.fingerprint()),
        HttpAuth::InsecureNone if warden_net::is_loopback_socket_addr(&bound) => {
            "unauthenticated".to_owned()
        }
        HttpAuth::InsecureNone => return Err(A2aError::InsecureOffLoopback(bound)),
    };
    let shared = Arc::new(Shared {
        agent: Agent::new(
            opener,
            identity,
            Limits {
                max_contexts: settings.max_contexts,
                idle: settings.idle_timeout,
            },
            settings.profiles,
        ),
        bound,
        bearer: matches!(settings.auth, HttpAuth::Bearer(_)),
        max_body_bytes: settings.max_body_bytes,
    });
    let mut rpc = axum::Router::new()
        .route(A2A_PATH, post(rpc))
        .with_state(shared.clone());
    if let HttpAuth::Bearer(token) = settings.auth {
        rpc = rpc.layer(axum::middleware::from_fn_with_state(
            Arc::new(token),
            require_bearer,
        ));
    }
    // The card is public, as A2A's discovery expects; everything else needs the token.
    let router = axum::Router::new()
        .route(CARD_PATH, get(card))
        .with_state(shared.clone())
        .merge(rpc)
        .layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            check_host,
        ));
    let shutdown = settings.shutdown.clone();
    // Stream events are written in small pieces: without TCP_NODELAY each would wait for the
    // client's delayed ACK of the one before.
    let listener = listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY on an accepted connection: {error}");
        }
    });
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await;
    shared.agent.shutdown().await;
    Ok(served?)
}

/// `Host` must name loopback or the bound address, and a browser's `Origin` must be a loopback
/// page (DNS rebinding): else 403.
async fn check_host(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let text = |name: header::HeaderName| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let host = text(header::HOST).unwrap_or_default();
    let origin = text(header::ORIGIN);
    if !warden_net::host_allowed(&host, &shared.bound) {
        return (
            StatusCode::FORBIDDEN,
            format!("Host {host:?} is not served here; use the address warden serve listens on\n"),
        )
            .into_response();
    }
    if let Some(origin) = origin
        && !warden_net::origin_is_loopback(&origin)
    {
        return (
            StatusCode::FORBIDDEN,
            format!("Origin {origin:?} is not allowed: only pages on loopback may call warden\n"),
        )
            .into_response();
    }
    next.run(request).await
}

/// The agent card, with the endpoint at the address the client used: in v1.0's shapes for a
/// client that asks for `A2A-Version: 1.x`, else in v0.3's (a request without the header is a
/// v0.3 request, as A2A v1.0 says).
async fn card(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .map_or_else(|| shared.bound.to_string(), str::to_owned);
    let wants_v1 = headers
        .get("a2a-version")
        .and_then(|value| value.to_str().ok())
        .is_some_and(|version| is_v1(version.trim()));
    let url = format!("http://{host}{A2A_PATH}");
    let card = protocol::agent_card(&url, &shared.agent.skills(), shared.bearer);
    let card = if wants_v1 { card } else { v03::card_out(&card) };
    let mut response = axum::Json(card).into_response();
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("A2A-Version"));
    response
}

/// `1`, `1.0`, `1.1`…
fn is_v1(version: &str) -> bool {
    version == "1" || version.starts_with("1.")
}

/// `0.3`, `0.3.0`…
fn is_v03(version: &str) -> bool {
    version == "0.3" || version.starts_with("0.3.")
}

/// The protocol version a JSON-RPC method belongs to, and what it asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V03,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Send,
    Stream,
    Get,
    Cancel,
    /// A method warden does not offer.
    Unsupported,
    /// A push notification method.
    Push,
}

fn call_of(method: &str) -> Option<(Version, Call)> {
    let call = match method {
        "SendMessage" => (Version::V1, Call::Send),
        "SendStreamingMessage" => (Version::V1, Call::Stream),
        "GetTask" => (Version::V1, Call::Get),
        "CancelTask" => (Version::V1, Call::Cancel),
        "SubscribeToTask" | "ListTasks" | "GetExtendedAgentCard" => {
            (Version::V1, Call::Unsupported)
        }
        "message/send" => (Version::V03, Call::Send),
        "message/stream" => (Version::V03, Call::Stream),
        "tasks/get" => (Version::V03, Call::Get),
        "tasks/cancel" => (Version::V03, Call::Cancel),
        "tasks/resubscribe" | "agent/getAuthenticatedExtendedCard" => {
            (Version::V03, Call::Unsupported)
        }
        method if method.starts_with("tasks/pushNotificationConfig/") => (Version::V03, Call::Push),
        method if method.contains("PushNotificationConfig") => (Version::V1, Call::Push),
        _ => return None,
    };
    Some(call)
}

/// One JSON-RPC request: parse and protocol errors are answered as JSON-RPC errors and the
/// server goes on.
async fn rpc(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    if let Some(version) = request
        .headers()
        .get("a2a-version")
        .and_then(|value| value.to_str().ok())
        && !version.trim().is_empty()
        && !is_v1(version.trim())
        && !is_v03(version.trim())
    {
        return rpc_error(
            Value::Null,
            &RpcError::new(
                code::VERSION_NOT_SUPPORTED,
                format!(
                    "A2A-Version {version} is not served here; warden speaks A2A {} and 0.3",
                    protocol::PROTOCOL_VERSION
                ),
            ),
        );
    }
    // A body announced larger than the limit is refused before it is read (a client that
    // waits for `100 Continue` never sends it).
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if announced.is_some_and(|length| length > shared.max_body_bytes) {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "Payload Too Large: request body exceeds {} bytes",
                shared.max_body_bytes
            ),
        )
            .into_response();
    }
    let bytes = match read_body(request.into_body(), shared.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(response) => return response,
    };
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) => message,
        Err(error) => {
            return json_rpc_error(
                StatusCode::OK,
                Value::Null,
                code::PARSE_ERROR,
                format!("Parse error: {error}"),
            );
        }
    };
    let id = message
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    let method = message.get("method").and_then(Value::as_str);
    let (Some(id), Some(method), Some("2.0")) =
        (id, method, message.get("jsonrpc").and_then(Value::as_str))
    else {
        return rpc_error(
            message.get("id").cloned().unwrap_or(Value::Null),
            &RpcError::new(
                code::INVALID_REQUEST,
                "Invalid Request: send a JSON-RPC 2.0 request with an id and a method",
            ),
        );
    };
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    let Some((version, call)) = call_of(method) else {
        return rpc_error(
            id,
            &RpcError::new(
                code::METHOD_NOT_FOUND,
                format!(
                    "Method not found: {method}; warden serves SendMessage, \
                     SendStreamingMessage, GetTask and CancelTask (A2A {}), and message/send, \
                     message/stream, tasks/get and tasks/cancel (A2A 0.3)",
                    protocol::PROTOCOL_VERSION
                ),
            ),
        );
    };
    // v0.3 is converted to v1.0's shapes here, and the answer back below: everything else
    // sees one version.
    let params = match version {
        Version::V1 => params,
        Version::V03 => match v03::request_in(params) {
            Ok(params) => params,
            Err(error) => return rpc_error(id, &error),
        },
    };
    let agent = &shared.agent;
    let result = match call {
        Call::Send => agent.send(&params).await.map(|task| match version {
            Version::V1 => json!({ "task": task }),
            Version::V03 => v03::task_out(&task),
        }),
        Call::Stream => {
            return match agent.stream(&params).await {
                Ok(events) => event_stream(id, events, version),
                Err(error) => rpc_error(id, &error),
            };
        }
        Call::Get | Call::Cancel => {
            let task = if call == Call::Get {
                agent.get(&params)
            } else {
                agent.cancel(&params).await
            };
            task.map(|task| match version {
                Version::V1 => task,
                Version::V03 => v03::task_out(&task),
            })
        }
        Call::Unsupported => Err(RpcError::new(
            code::UNSUPPORTED_OPERATION,
            format!("{method} is not offered by warden; see its agent card"),
        )),
        Call::Push => Err(RpcError::new(
            code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "warden sends no push notifications; stream the task or poll it",
        )),
    };
    match result {
        Ok(result) => {
            axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
        }
        Err(error) => rpc_error(id, &error),
    }
}

/// A JSON-RPC error response (HTTP 200, as the binding answers protocol errors).
fn rpc_error(id: Value, error: &RpcError) -> Response {
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()})).into_response()
}

/// The stream's events (each with whether the stream ends after it) as server-sent events, each
/// a JSON-RPC response to `id` in the request's protocol version.
fn event_stream(
    id: Value,
    events: impl futures::Stream<Item = (Value, bool)> + Send + 'static,
    version: Version,
) -> Response {
    let body = events.map(move |(event, last)| {
        let event = match version {
            Version::V1 => event,
            Version::V03 => v03::event_out(&event, last),
        };
        let response = json!({"jsonrpc": "2.0", "id": id, "result": event});
        Ok::<_, std::convert::Infallible>(format!("data: {response}\n\n"))
    });
    let mut response = Response::new(Body::from_stream(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
