//! Streamable HTTP: server-everything and the echo fixture, both eras, custom headers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warden_mcp::{CallOptions, FailureKind, ServerSpec, ServerState, ToolIdentity};

use crate::common;

#[tokio::test]
async fn server_everything_over_streamable_http() {
    let server = common::everything_http().await;
    let test = common::runtime(vec![ServerSpec::http("everything", &server.url)]);
    let runtime = &test.runtime;
    let tools = runtime.server_tools("everything").await.expect("tools");
    assert!(tools.iter().any(|tool| tool.identity.tool == "echo"));
    let arguments = json!({"message": "over http"})
        .as_object()
        .cloned()
        .expect("object");
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("everything", "echo"),
            arguments,
            CallOptions::default(),
        )
        .await
        .expect("echo");
    assert!(common::first_text(&outcome.result).contains("over http"));
    let status = runtime.server_status("everything").expect("status");
    assert_eq!(status.state, ServerState::Connected);
    assert!(status.protocol_revision.is_some());
    runtime.shutdown().await;
}

#[tokio::test]
async fn the_echo_fixture_over_http_negotiates_2026_07_28() {
    let fixture = warden_testkit::spawn_http_fixture("echo").await;
    let spec = ServerSpec::http("echo", &fixture.url).with_header("X-Team", "warden");
    let test = common::runtime(vec![spec]);
    let runtime = &test.runtime;
    let arguments = json!({"a": 20, "b": 22})
        .as_object()
        .cloned()
        .expect("object");
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("echo", "add"),
            arguments,
            CallOptions::default(),
        )
        .await
        .expect("add");
    assert_eq!(outcome.result.structured_content, Some(json!({"sum": 42})));
    let status = runtime.server_status("echo").expect("status");
    assert_eq!(status.protocol_revision.as_deref(), Some("2026-07-28"));
    runtime.shutdown().await;
}

/// A loopback server that records each request's head and answers 503.
async fn recording_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let recorded = recorded.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 65536];
                if let Ok(Ok(read)) =
                    tokio::time::timeout(Duration::from_millis(500), socket.read(&mut buffer)).await
                {
                    let head = String::from_utf8_lossy(&buffer[..read]).to_ascii_lowercase();
                    recorded.lock().expect("lock").push(head);
                }
                let _ = socket
                    .write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (format!("http://127.0.0.1:{port}/mcp"), seen)
}

#[tokio::test]
async fn configured_headers_are_sent_and_never_printed() {
    let (url, seen) = recording_server().await;
    let spec = ServerSpec::http("api", &url)
        .with_header("Authorization", "Bearer s3cr3t-token")
        .with_header("X-Team", "warden");
    let test = common::runtime(vec![spec]);
    let error = test
        .runtime
        .connect("api")
        .await
        .expect_err("the server answers 503");
    assert_eq!(error.kind(), FailureKind::ServerError);
    assert!(!error.to_string().contains("s3cr3t"), "{error}");
    let requests = seen.lock().expect("lock").clone();
    assert!(!requests.is_empty());
    for request in &requests {
        assert!(
            request.contains("authorization: bearer s3cr3t-token"),
            "{request}"
        );
        assert!(request.contains("x-team: warden"), "{request}");
    }
    let status = test.runtime.server_status("api").expect("status");
    assert!(!format!("{status:?}").contains("s3cr3t"));
}

#[tokio::test]
async fn transport_managed_headers_cannot_be_configured() {
    let spec =
        ServerSpec::http("api", "http://127.0.0.1:9/mcp").with_header("Mcp-Session-Id", "stolen");
    let test = common::runtime(vec![spec]);
    let error = test.runtime.connect("api").await.expect_err("refused");
    assert_eq!(error.kind(), FailureKind::Rejected);
    assert!(
        error.to_string().contains("managed by the MCP transport"),
        "{error}"
    );
}
