//! Guards on one request: SSE responses are bounded (events per stream, total bytes) over
//! Streamable HTTP and legacy HTTP+SSE, and a tool call the server answered with a 404 on its
//! session is never re-sent (the tool runs exactly once) while the next call gets a new session.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, json};
use tokio::sync::mpsc;
use warden_mcp::{
    CallOptions, FailureKind, McpRuntime, ProtocolMode, RuntimeOptions, ServerSpec, ServerState,
    SseLimits, ToolIdentity, TransportSpec,
};

use crate::common::{self, arguments};

fn runtime_with(
    spec: ServerSpec,
    limits: SseLimits,
    protocol: ProtocolMode,
) -> (McpRuntime, tempfile::TempDir) {
    let workspace = tempfile::tempdir().expect("workspace");
    let mut options = RuntimeOptions::new(workspace.path());
    options.sse_limits = limits;
    options.protocol = protocol;
    (McpRuntime::new(vec![spec], options), workspace)
}

/// server-everything's long-running operation: `steps` progress notifications on the
/// response stream of one call.
async fn long_operation(runtime: &McpRuntime, steps: u32) -> Result<String, warden_mcp::McpError> {
    let (progress, mut received) = mpsc::channel(1024);
    let drain = tokio::spawn(async move { while received.recv().await.is_some() {} });
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("everything", "trigger-long-running-operation"),
            arguments(json!({"duration": 1, "steps": steps})),
            CallOptions {
                progress: Some(progress),
                ..CallOptions::default()
            },
        )
        .await;
    drain.abort();
    outcome.map(|outcome| common::first_text(&outcome.result))
}

#[tokio::test]
async fn a_streamable_http_response_with_too_many_events_ends_that_call_only() {
    let server = common::everything_http().await;
    let limits = SseLimits {
        max_events_per_stream: 10,
        max_response_bytes: SseLimits::DEFAULT.max_response_bytes,
    };
    let (runtime, _workspace) = runtime_with(
        ServerSpec::http("everything", &server.url),
        limits,
        ProtocolMode::Auto,
    );
    let within = long_operation(&runtime, 5).await.expect("5 events fit");
    assert!(within.contains("completed"), "{within}");
    let error = long_operation(&runtime, 40)
        .await
        .expect_err("40 events do not fit");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::ResponseLimit, "{line}");
    assert!(line.starts_with("MCP everything: "), "{line}");
    assert!(line.contains("more than 10 SSE events"), "{line}");
    assert!(!line.contains('\n'), "{line}");
    // Only that request ended: the server stays connected and answers the next call.
    let again = long_operation(&runtime, 3).await.expect("the next call");
    assert!(again.contains("completed"), "{again}");
    assert_eq!(
        common::state_of(&runtime, "everything"),
        ServerState::Connected
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_streamable_http_response_with_too_many_bytes_is_ended() {
    let server = common::everything_http().await;
    let limits = SseLimits {
        max_events_per_stream: 100_000,
        // Room for the handshake and the tool list, not for 1000 progress notifications.
        max_response_bytes: 40_000,
    };
    let (runtime, _workspace) = runtime_with(
        ServerSpec::http("everything", &server.url),
        limits,
        ProtocolMode::Auto,
    );
    let error = long_operation(&runtime, 1000)
        .await
        .expect_err("too many bytes");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::ResponseLimit, "{line}");
    assert!(line.contains("more than 40000 bytes"), "{line}");
    assert!(line.starts_with("MCP everything: "), "{line}");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_legacy_sse_stream_with_too_many_events_ends_the_call_and_says_why() {
    let server = common::everything_sse().await;
    let port = server.port;
    let spec = ServerSpec::with_transport(
        "everything",
        TransportSpec::LegacySse {
            url: format!("http://127.0.0.1:{port}/sse"),
            headers: Vec::new(),
        },
    );
    let limits = SseLimits {
        max_events_per_stream: 10,
        max_response_bytes: SseLimits::DEFAULT.max_response_bytes,
    };
    let (runtime, _workspace) = runtime_with(spec, limits, ProtocolMode::Auto);
    let within = long_operation(&runtime, 4).await.expect("4 events fit");
    assert!(within.contains("completed"), "{within}");
    let error = long_operation(&runtime, 40)
        .await
        .expect_err("40 events do not fit");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::ResponseLimit, "{line}");
    assert!(line.starts_with("MCP everything: "), "{line}");
    assert!(line.contains("more than 10 SSE events"), "{line}");
    // The one stream carries everything: it is closed, and the status line says why.
    let status = common::wait_for_status(&runtime, "everything", |status| {
        status
            .failure
            .as_deref()
            .is_some_and(|line| line.contains("more than 10 SSE events"))
    })
    .await;
    assert!(
        status.failure.unwrap().starts_with("MCP everything: "),
        "one line naming the server"
    );
    runtime.shutdown().await;
}

// ------------------------------------------------------------------ a server that forgets

/// A tool server counting how often `bump` ran.
#[derive(Clone)]
struct Counter {
    runs: Arc<AtomicUsize>,
}

impl ServerHandler for Counter {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {}});
        let schema = Arc::new(schema.as_object().cloned().expect("object"));
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "bump",
            "Adds one to a counter (an effect that must not happen twice).",
            schema,
        )]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let runs = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(CallToolResponse::from(CallToolResult::success(vec![
            ContentBlock::text(format!("bumped to {runs}")),
        ])))
    }
}

/// Serves [`Counter`] over Streamable HTTP behind a layer that, on the first `tools/call`, lets
/// the tool run, then forgets the session and answers 404 (as a server that lost its session
/// table mid-call would). Later requests on a forgotten session get 404 too.
async fn forgetful_server(runs: Arc<AtomicUsize>) -> String {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::middleware::Next;
    use axum::response::{IntoResponse, Response};
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    use std::collections::HashSet;
    use std::sync::Mutex;

    let counter = Counter { runs };
    let service: StreamableHttpService<Counter, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(counter.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let forgotten: Arc<Mutex<HashSet<String>>> = Arc::default();
    let forgot_once = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let forget = move |request: Request<Body>, next: Next| {
        let forgotten = forgotten.clone();
        let forgot_once = forgot_once.clone();
        async move {
            let session = request
                .headers()
                .get("mcp-session-id")
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned);
            if session
                .as_ref()
                .is_some_and(|id| forgotten.lock().unwrap().contains(id))
            {
                return StatusCode::NOT_FOUND.into_response();
            }
            let (parts, body) = request.into_parts();
            let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
            let is_call = String::from_utf8_lossy(&bytes).contains("\"tools/call\"");
            let response: Response = next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
            if is_call && !forgot_once.swap(true, Ordering::SeqCst) {
                // Let the tool finish (its answer is on the stream), then lose the session.
                let _ = tokio::time::timeout(
                    Duration::from_secs(10),
                    axum::body::to_bytes(response.into_body(), 1 << 20),
                )
                .await;
                if let Some(id) = session {
                    forgotten.lock().unwrap().insert(id);
                }
                return StatusCode::NOT_FOUND.into_response();
            }
            response
        }
    };
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn(forget));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}/mcp")
}

#[tokio::test]
async fn a_tool_call_the_server_forgot_is_not_re_sent_and_the_next_call_gets_a_new_session() {
    let runs = Arc::new(AtomicUsize::new(0));
    let url = forgetful_server(runs.clone()).await;
    // 2025-11-25: the server hands out an Mcp-Session-Id it can forget.
    let (runtime, _workspace) = runtime_with(
        ServerSpec::http("counter", &url),
        SseLimits::default(),
        ProtocolMode::Legacy,
    );
    let bump = ToolIdentity::new("counter", "bump");
    let error = runtime
        .call_tool(&bump, Map::new(), CallOptions::default())
        .await
        .expect_err("the server answered 404 on its session");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::SessionForgotten, "{line}");
    assert!(line.starts_with("MCP counter: "), "{line}");
    assert!(
        line.contains(
            "the server forgot the session; the call to \"bump\" may or may not have run — not re-sent"
        ),
        "{line}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the tool ran exactly once");
    // The connection was renewed for the next call, which runs once more.
    let outcome = runtime
        .call_tool(&bump, Map::new(), CallOptions::default())
        .await
        .expect("the next call, on a new session");
    assert_eq!(common::first_text(&outcome.result), "bumped to 2");
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(
        common::state_of(&runtime, "counter"),
        ServerState::Connected
    );
    runtime.shutdown().await;
}
