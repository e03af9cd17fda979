//! Reconnecting on request replaces the process; a slow start within the deadline still connects.

use std::time::Duration;

use serde_json::json;
use warden_mcp::{CallOptions, ServerState, ToolIdentity};

use crate::common;

#[tokio::test]
async fn reconnect_on_request_starts_a_new_process() {
    let test = common::runtime(vec![common::fixture("echo", "echo")]);
    let runtime = &test.runtime;
    runtime.connect("echo").await.expect("connect");
    let first = runtime
        .server_status("echo")
        .expect("status")
        .pid
        .expect("pid");
    runtime.reconnect("echo").await.expect("reconnect");
    let status = runtime.server_status("echo").expect("status");
    assert_eq!(status.state, ServerState::Connected);
    let second = status.pid.expect("pid");
    assert_ne!(first, second);
    assert!(
        common::wait_gone(first).await,
        "the old process survived the reconnect"
    );
    let arguments = json!({"text": "again"})
        .as_object()
        .cloned()
        .expect("object");
    runtime
        .call_tool(
            &ToolIdentity::new("echo", "echo"),
            arguments,
            CallOptions::default(),
        )
        .await
        .expect("call after reconnect");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_slow_start_within_the_deadline_connects() {
    let spec = common::fixture("slow", "slow-start").with_startup_timeout(Duration::from_secs(20));
    let test = common::runtime(vec![spec]);
    test.runtime
        .connect("slow")
        .await
        .expect("slow start connects");
    assert_eq!(
        common::state_of(&test.runtime, "slow"),
        ServerState::Connected
    );
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn an_http_session_the_server_forgot_is_renewed() {
    // Serve on a fixed port, connect, restart the server on the same port (it forgets the
    // session), and call again: the 404 on the old session leads to a new session.
    let port = warden_testkit::free_port();
    let address = format!("127.0.0.1:{port}");
    let url = format!("http://{address}/mcp");
    let first = echo_on(&address).await;
    // A 2025-11-25 session: the server hands out an Mcp-Session-Id it can forget.
    let workspace = tempfile::tempdir().expect("workspace");
    let mut options = warden_mcp::RuntimeOptions::new(workspace.path());
    options.protocol = warden_mcp::ProtocolMode::Legacy;
    let runtime =
        &warden_mcp::McpRuntime::new(vec![warden_mcp::ServerSpec::http("web", &url)], options);
    let arguments = || {
        json!({"text": "hello"})
            .as_object()
            .cloned()
            .expect("object")
    };
    runtime
        .call_tool(
            &ToolIdentity::new("web", "echo"),
            arguments(),
            CallOptions::default(),
        )
        .await
        .expect("first call");
    drop(first);
    let second = echo_on(&address).await;
    // A tool call may have applied an effect: the 404 on its session ends it, unsent again.
    let error = runtime
        .call_tool(
            &ToolIdentity::new("web", "echo"),
            arguments(),
            CallOptions::default(),
        )
        .await
        .expect_err("the server forgot the session during the call");
    assert_eq!(
        error.kind(),
        warden_mcp::FailureKind::SessionForgotten,
        "{error}"
    );
    assert!(error.to_string().contains("not re-sent"), "{error}");
    // The next call finds a new session.
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("web", "echo"),
            arguments(),
            CallOptions::default(),
        )
        .await
        .expect("call after the server forgot the session");
    assert!(common::first_text(&outcome.result).contains("hello"));
    assert_eq!(common::state_of(runtime, "web"), ServerState::Connected);
    // A list is safe to re-send: after another restart it is renewed transparently.
    drop(second);
    let _third = echo_on(&address).await;
    let resources = runtime
        .resources(Some("web"))
        .await
        .expect("a list after the server forgot the session");
    assert!(!resources.is_empty());
    runtime.shutdown().await;
}

/// The echo fixture serving HTTP on `address`; killed when dropped.
async fn echo_on(address: &str) -> warden_testkit::HttpFixture {
    warden_testkit::spawn_http_fixture_rebinding("echo", address).await
}
