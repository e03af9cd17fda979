//! The legacy HTTP+SSE transport: server-everything in `sse` mode, wrong urls, and a hand-rolled SSE peer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use warden_mcp::{CallOptions, FailureKind, ServerSpec, ServerState, ToolIdentity, TransportSpec};

use crate::common;

fn legacy_sse(name: &str, url: String) -> ServerSpec {
    ServerSpec::with_transport(
        name,
        TransportSpec::LegacySse {
            url,
            headers: Vec::new(),
        },
    )
}

#[tokio::test]
async fn server_everything_over_legacy_http_sse() {
    let server = common::everything_sse().await;
    let url = format!("http://127.0.0.1:{}/sse", server.port);
    let spec = legacy_sse("everything", url).with_header("X-Team", "warden");
    let test = common::runtime(vec![spec]);
    let runtime = &test.runtime;
    let tools = runtime.server_tools("everything").await.expect("tools");
    assert!(tools.iter().any(|tool| tool.identity.tool == "echo"));
    let arguments = json!({"message": "over legacy sse"})
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
    assert!(common::first_text(&outcome.result).contains("over legacy sse"));
    let status = runtime.server_status("everything").expect("status");
    assert_eq!(status.state, ServerState::Connected);
    let revision = status.protocol_revision.expect("negotiated revision");
    assert!(
        revision.as_str() < "2026-07-28",
        "HTTP+SSE uses the initialize handshake, got {revision}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_server_that_goes_away_leaves_the_connection_down_with_one_line() {
    let mut server = common::everything_sse().await;
    let url = format!("http://127.0.0.1:{}/sse", server.port);
    let test = common::runtime(vec![legacy_sse("everything", url)]);
    let runtime = &test.runtime;
    runtime.connect("everything").await.expect("connect");
    server.child.kill().await.expect("kill server-everything");
    let status = common::wait_for_status(runtime, "everything", |status| {
        status.state == ServerState::Down
    })
    .await;
    let line = status.failure.expect("a failure line");
    assert!(line.starts_with("MCP everything: "), "{line}");
    assert!(!line.contains('\n'), "{line}");
    let arguments = json!({"message": "anyone?"})
        .as_object()
        .cloned()
        .expect("object");
    let error = runtime
        .call_tool(
            &ToolIdentity::new("everything", "echo"),
            arguments,
            CallOptions::default(),
        )
        .await
        .expect_err("the server is gone");
    assert!(error.to_string().starts_with("MCP everything: "), "{error}");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_wrong_path_is_a_one_line_404() {
    let server = common::everything_sse().await;
    let url = format!("http://127.0.0.1:{}/nope", server.port);
    let test = common::runtime(vec![legacy_sse("wrong", url.clone())]);
    let runtime = &test.runtime;
    let error = runtime.connect("wrong").await.expect_err("404");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::NotFound, "{line}");
    assert!(line.starts_with("MCP wrong: "), "{line}");
    assert!(line.contains(&url) && line.contains("404"), "{line}");
    assert!(!line.contains('\n'), "{line}");
    let status = runtime.server_status("wrong").expect("status");
    assert_eq!(status.state, ServerState::Failed);
    runtime.shutdown().await;
}

#[tokio::test]
async fn nothing_listening_is_a_one_line_connection_refused() {
    let url = format!("http://127.0.0.1:{}/sse", warden_testkit::free_port());
    let test = common::runtime(vec![legacy_sse("gone", url)]);
    let error = test.runtime.connect("gone").await.expect_err("refused");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::Unreachable, "{line}");
    assert!(line.contains("connection refused"), "{line}");
    assert!(!line.contains('\n'), "{line}");
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn plain_http_to_a_remote_host_is_refused() {
    let test = common::runtime(vec![legacy_sse(
        "remote",
        "http://example.com/sse".to_owned(),
    )]);
    let error = test.runtime.connect("remote").await.expect_err("insecure");
    assert_eq!(error.kind(), FailureKind::InsecureUrl, "{error}");
    test.runtime.shutdown().await;
}

/// A loopback peer that answers every request with an SSE stream holding `body`, records each
/// request head, and keeps the stream open unless `close` is set.
async fn sse_peer(body: String, close: bool) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let recorded = recorded.clone();
            let body = body.clone();
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 65536];
                let read = socket.read(&mut buffer).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buffer[..read]).to_ascii_lowercase();
                recorded.lock().expect("lock").push(head);
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n{body}"
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.flush().await;
                if !close {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
            });
        }
    });
    (port, seen)
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused_and_headers_are_sent() {
    let other = warden_testkit::free_port();
    let body = format!("event: endpoint\ndata: http://127.0.0.1:{other}/message\n\n");
    let (port, seen) = sse_peer(body, false).await;
    let spec =
        legacy_sse("cross", format!("http://127.0.0.1:{port}/sse")).with_header("X-Team", "warden");
    let test = common::runtime(vec![spec]);
    let error = test
        .runtime
        .connect("cross")
        .await
        .expect_err("cross origin");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::Protocol, "{line}");
    assert!(line.contains("another origin"), "{line}");
    let heads = seen.lock().expect("lock").clone();
    assert_eq!(heads.len(), 1, "only the SSE GET, no POST: {heads:?}");
    assert!(heads[0].starts_with("get /sse"), "{heads:?}");
    assert!(heads[0].contains("accept: text/event-stream"), "{heads:?}");
    assert!(heads[0].contains("x-team: warden"), "{heads:?}");
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn a_stream_that_ends_before_its_endpoint_fails_clearly() {
    let (port, _seen) = sse_peer(": just a comment\n\n".to_owned(), true).await;
    let url = format!("http://127.0.0.1:{port}/sse");
    let test = common::runtime(vec![legacy_sse("short", url)]);
    let error = test
        .runtime
        .connect("short")
        .await
        .expect_err("no endpoint");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::HandshakeFailed, "{line}");
    assert!(line.contains("ended before its endpoint event"), "{line}");
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn a_stream_that_ends_after_its_endpoint_fails_the_handshake_in_one_line() {
    let (port, _seen) = sse_peer(
        "event: endpoint\ndata: /message?sessionId=1\n\n".to_owned(),
        true,
    )
    .await;
    let url = format!("http://127.0.0.1:{port}/sse");
    let test = common::runtime(vec![
        legacy_sse("ended", url).with_startup_timeout(Duration::from_secs(20)),
    ]);
    let error = test.runtime.connect("ended").await.expect_err("closed");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::HandshakeFailed, "{line}");
    assert!(line.contains("HTTP+SSE"), "{line}");
    assert!(!line.contains('\n'), "{line}");
    test.runtime.shutdown().await;
}

/// A legacy entry pointed at testkit's HTTP fixture `kind` (extra args), at `/sse`.
async fn legacy_fixture(kind: &str, args: &[&str]) -> (warden_testkit::HttpFixture, String) {
    let fixture = warden_testkit::try_spawn_http_fixture(kind, args, &[])
        .await
        .expect("fixture");
    let url = format!("http://127.0.0.1:{}/sse", fixture.port());
    (fixture, url)
}

#[tokio::test]
async fn a_server_error_is_a_one_line_5xx() {
    let (_fixture, url) = legacy_fixture("http-status", &["--status", "503"]).await;
    let test = common::runtime(vec![legacy_sse("busy", url.clone())]);
    let error = test.runtime.connect("busy").await.expect_err("503");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::ServerError, "{line}");
    assert!(line.starts_with("MCP busy: "), "{line}");
    assert!(line.contains(&url) && line.contains("503"), "{line}");
    let status = test.runtime.server_status("busy").unwrap();
    assert_eq!(status.failure.as_deref(), Some(line.as_str()));
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn an_html_page_is_not_an_mcp_endpoint() {
    let (_fixture, url) = legacy_fixture("garbage", &[]).await;
    let test = common::runtime(vec![legacy_sse("page", url)]);
    let error = test.runtime.connect("page").await.expect_err("html");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::NotMcpEndpoint, "{line}");
    assert!(line.contains("HTML page"), "{line}");
    assert!(line.contains("/sse"), "the legacy hint: {line}");
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn a_401_says_login_is_not_supported_over_legacy_sse_and_what_to_do() {
    let (_fixture, url) = legacy_fixture("http-status", &["--status", "401"]).await;
    let test = common::runtime(vec![legacy_sse("locked", url)]);
    let error = test.runtime.connect("locked").await.expect_err("401");
    let line = error.to_string();
    assert_eq!(error.kind(), FailureKind::Rejected, "{line}");
    assert!(
        line.contains("not support over the legacy HTTP+SSE transport"),
        "{line}"
    );
    assert!(line.contains("Authorization"), "{line}");
    assert!(!line.contains("warden mcp login"), "{line}");
    let status = test.runtime.server_status("locked").unwrap();
    assert_ne!(status.state, ServerState::NeedsLogin);
    test.runtime.shutdown().await;
}
