//! `stop` disconnects a server and keeps it down with its tools listed (a call says it was
//! stopped and how to reconnect); `restart` drops the connection and the catalogue and connects
//! again only on the next request.

use std::time::Duration;

use serde_json::{Map, Value, json};
use warden_mcp::{CallOptions, FailureKind, ServerState, ToolIdentity};

use crate::common;

fn text(value: &str) -> Map<String, Value> {
    json!({ "text": value })
        .as_object()
        .cloned()
        .expect("object")
}

#[tokio::test]
async fn a_stopped_server_stays_down_with_its_tools_listed() {
    let test = common::runtime(vec![common::fixture("echo", "echo")]);
    let runtime = &test.runtime;
    let echo = ToolIdentity::new("echo", "echo");
    runtime
        .call_tool(&echo, text("before"), CallOptions::default())
        .await
        .expect("call before the stop");
    let before = runtime.server_status("echo").expect("status");
    let pid = before.pid.expect("pid");

    runtime.stop("echo").await.expect("stop");
    let status = runtime.server_status("echo").expect("status");
    assert_eq!(status.state, ServerState::Down);
    assert_eq!(status.failure_kind, Some(FailureKind::Stopped));
    let failure = status.failure.expect("failure line");
    assert!(
        failure.contains("MCP echo: stopped by the operator"),
        "{failure}"
    );
    assert!(status.pid.is_none());
    assert!(
        common::wait_gone(pid).await,
        "the stopped server's process survived"
    );

    // Its tools stay listed …
    let tools = runtime
        .server_tools("echo")
        .await
        .expect("tools stay listed");
    assert!(tools.iter().any(|tool| tool.identity == echo));
    assert!(
        runtime
            .tools()
            .await
            .tools
            .iter()
            .any(|tool| tool.identity == echo)
    );
    // … and a call answers that it was stopped and how to reconnect.
    let error = runtime
        .call_tool(&echo, text("during"), CallOptions::default())
        .await
        .expect_err("a stopped server is not called");
    assert_eq!(error.kind(), FailureKind::Stopped);
    let message = error.to_string();
    assert!(
        message.contains("was stopped by the operator; \"echo\" was not called"),
        "{message}"
    );
    assert!(message.contains("/mcp restart echo"), "{message}");
    assert!(
        runtime.connect("echo").await.is_err(),
        "no connect while stopped"
    );

    // No supervised recovery: it stays down past the first automatic backoff.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let later = runtime.server_status("echo").expect("status");
    assert_eq!(later.state, ServerState::Down);
    assert_eq!(later.connect_attempts, before.connect_attempts);

    // An explicit reconnect brings it back.
    runtime.reconnect("echo").await.expect("reconnect");
    assert_eq!(common::state_of(runtime, "echo"), ServerState::Connected);
    runtime
        .call_tool(&echo, text("after"), CallOptions::default())
        .await
        .expect("call after the reconnect");
    runtime.shutdown().await;
}

#[tokio::test]
async fn restart_clears_the_catalogue_and_reconnects_on_the_next_request() {
    let test = common::runtime(vec![common::fixture("echo", "echo")]);
    let runtime = &test.runtime;
    let echo = ToolIdentity::new("echo", "echo");
    runtime.server_tools("echo").await.expect("tools");
    let before = runtime.server_status("echo").expect("status");
    assert!(before.counts.tools.is_some_and(|count| count > 0));
    let pid = before.pid.expect("pid");

    runtime.restart("echo").await.expect("restart");
    let status = runtime.server_status("echo").expect("status");
    assert_eq!(status.state, ServerState::NotConnected);
    assert_eq!(status.counts.tools, None, "the catalogue is cleared");
    assert!(status.pid.is_none(), "not reconnected eagerly");
    assert_eq!(status.connect_attempts, before.connect_attempts);
    assert!(status.catalog_generation > before.catalog_generation);
    assert!(
        common::wait_gone(pid).await,
        "the old process survived the restart"
    );

    // The next request connects a new process and lists afresh.
    runtime
        .call_tool(&echo, text("again"), CallOptions::default())
        .await
        .expect("call after the restart");
    let after = runtime.server_status("echo").expect("status");
    assert_eq!(after.state, ServerState::Connected);
    assert_eq!(after.connect_attempts, before.connect_attempts + 1);
    assert_ne!(after.pid.expect("pid"), pid);
    assert!(after.counts.tools.is_some());
    runtime.shutdown().await;
}

#[tokio::test]
async fn restart_clears_a_stop() {
    let test = common::runtime(vec![common::fixture("echo", "echo")]);
    let runtime = &test.runtime;
    let echo = ToolIdentity::new("echo", "echo");
    runtime.connect("echo").await.expect("connect");
    runtime.stop("echo").await.expect("stop");
    runtime.restart("echo").await.expect("restart");
    assert_eq!(common::state_of(runtime, "echo"), ServerState::NotConnected);
    runtime
        .call_tool(&echo, text("back"), CallOptions::default())
        .await
        .expect("a restarted server answers again");
    assert_eq!(common::state_of(runtime, "echo"), ServerState::Connected);
    runtime.shutdown().await;
}

#[tokio::test]
async fn stopping_an_unknown_server_names_it() {
    let test = common::runtime(vec![common::fixture("echo", "echo")]);
    let error = test.runtime.stop("nope").await.expect_err("unknown");
    assert_eq!(error.kind(), FailureKind::UnknownServer);
}

#[tokio::test]
async fn a_call_in_flight_ends_with_the_stop_and_is_not_re_sent() {
    let test = common::runtime(vec![common::fixture("echo", "echo")]);
    let runtime = test.runtime.clone();
    runtime.connect("echo").await.expect("connect");
    let (progress, mut progressed) = tokio::sync::mpsc::channel(16);
    let call = tokio::spawn({
        let runtime = runtime.clone();
        async move {
            runtime
                .call_tool(
                    &ToolIdentity::new("echo", "slow"),
                    json!({ "ms": 60_000 })
                        .as_object()
                        .cloned()
                        .expect("object"),
                    CallOptions {
                        progress: Some(progress),
                        ..CallOptions::default()
                    },
                )
                .await
        }
    });
    // The server is running the call once it reports progress.
    progressed
        .recv()
        .await
        .expect("progress from the running call");
    runtime.stop("echo").await.expect("stop");
    let error = call
        .await
        .expect("join")
        .expect_err("the call ends with the stop");
    assert_eq!(error.kind(), FailureKind::Stopped);
    let message = error.to_string();
    assert!(message.contains("while \"slow\" was running"), "{message}");
    assert!(message.contains("not re-sent"), "{message}");
    assert_eq!(common::state_of(&runtime, "echo"), ServerState::Down);
    runtime.shutdown().await;
}
