//! Tool calls: routing by identity, filters, deadlines with cancellation, progress, caller
//! cancellation, and a server that dies mid-call (never re-sent, reconnected by supervision).

use std::time::Duration;

use serde_json::{Map, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use warden_mcp::{CallOptions, FailureKind, ServerState, ToolFilter, ToolIdentity};
use warden_testkit::fixtures::CRASH_STDERR_LINE;

use crate::common::{self, arguments};

#[tokio::test]
async fn calls_route_by_identity_and_keep_structured_content() {
    let test = common::runtime(vec![common::fixture("math", "echo")]);
    let runtime = &test.runtime;
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("math", "add"),
            arguments(json!({"a": 2, "b": 3})),
            CallOptions::default(),
        )
        .await
        .expect("add");
    assert!(!outcome.is_error());
    assert_eq!(outcome.result.structured_content, Some(json!({"sum": 5})));

    let failed = runtime
        .call_tool(
            &ToolIdentity::new("math", "fail"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect("fail returns a result");
    assert!(failed.is_error(), "isError must be kept");
    runtime.shutdown().await;
}

#[tokio::test]
async fn unknown_and_filtered_tools_are_refused_before_any_call() {
    let filter = ToolFilter {
        allow: None,
        deny: vec!["write_note".to_owned()],
    };
    let test = common::runtime(vec![
        common::fixture("notes", "echo").with_tool_filter(filter),
    ]);
    let runtime = &test.runtime;
    let tools = runtime.server_tools("notes").await.expect("tools");
    assert!(tools.iter().all(|tool| tool.identity.tool != "write_note"));

    let denied = runtime
        .call_tool(
            &ToolIdentity::new("notes", "write_note"),
            arguments(json!({"text": "x"})),
            CallOptions::default(),
        )
        .await
        .expect_err("denied tool");
    assert_eq!(denied.kind(), FailureKind::UnknownTool);
    let unknown = runtime
        .call_tool(
            &ToolIdentity::new("notes", "no_such_tool"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect_err("unknown tool");
    assert_eq!(unknown.kind(), FailureKind::UnknownTool);
    assert_eq!(
        unknown.to_string(),
        "MCP notes: offers no tool named \"no_such_tool\" — list the server's tools to see what it offers"
    );
    // A prefix of a real name is not a name.
    let prefix = runtime
        .call_tool(
            &ToolIdentity::new("notes", "ech"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect_err("prefix");
    assert_eq!(prefix.kind(), FailureKind::UnknownTool);
    let wrong_server = runtime
        .call_tool(
            &ToolIdentity::new("other", "echo"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect_err("unknown server");
    assert_eq!(wrong_server.kind(), FailureKind::UnknownServer);
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_timed_out_call_is_cancelled_and_the_server_stays_up() {
    let (ledger, spec) = fixture_with_ledger("slowpoke", "echo");
    let spec = spec.with_tool_timeout(Duration::from_millis(400));
    let test = common::runtime(vec![spec]);
    let runtime = &test.runtime;
    let error = runtime
        .call_tool(
            &ToolIdentity::new("slowpoke", "slow"),
            arguments(json!({"ms": 20000})),
            CallOptions::default(),
        )
        .await
        .expect_err("must time out");
    assert_eq!(error.kind(), FailureKind::Timeout);
    assert!(
        error
            .to_string()
            .contains("timed out after 0.4s and was cancelled"),
        "{error}"
    );
    assert_eq!(
        common::state_of(runtime, "slowpoke"),
        ServerState::Connected
    );

    // The server saw notifications/cancelled.
    assert!(
        ledger_shows(ledger.path(), "slow cancelled 20000").await,
        "the server never saw the cancellation"
    );

    let after = runtime
        .call_tool(
            &ToolIdentity::new("slowpoke", "echo"),
            arguments(json!({"text": "still here"})),
            CallOptions::default(),
        )
        .await
        .expect("server still usable");
    assert!(common::first_text(&after.result).contains("still here"));
    runtime.shutdown().await;
}

#[tokio::test]
async fn progress_reaches_the_caller() {
    let test = common::runtime(vec![common::fixture("work", "echo")]);
    let runtime = &test.runtime;
    let (sender, mut receiver) = mpsc::channel(64);
    let options = CallOptions {
        progress: Some(sender),
        cancel: CancellationToken::new(),
        meta: None,
    };
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("work", "slow"),
            arguments(json!({"ms": 600})),
            options,
        )
        .await
        .expect("slow");
    assert!(!outcome.is_error());
    let first = receiver
        .try_recv()
        .expect("at least one progress notification");
    assert_eq!(first.total, Some(600.0));
    assert!(first.message.unwrap_or_default().contains("of 600 ms"));
    runtime.shutdown().await;
}

#[tokio::test]
async fn the_caller_can_cancel_a_call() {
    let test = common::runtime(vec![common::fixture("work", "echo")]);
    let runtime = &test.runtime;
    runtime.server_tools("work").await.expect("tools");
    let (cancel, options) = cancellable();
    let identity = ToolIdentity::new("work", "slow");
    let call = runtime.call_tool(&identity, arguments(json!({"ms": 30000})), options);
    let (result, ()) = tokio::join!(call, cancel_soon(cancel));
    assert_eq!(
        result.expect_err("cancelled").kind(),
        FailureKind::Cancelled
    );
    assert_eq!(common::state_of(runtime, "work"), ServerState::Connected);
    runtime.shutdown().await;
}

/// Call options whose call the returned token cancels.
fn cancellable() -> (CancellationToken, CallOptions) {
    let cancel = CancellationToken::new();
    let options = CallOptions {
        progress: None,
        cancel: cancel.clone(),
        meta: None,
    };
    (cancel, options)
}

/// Cancels after 300 ms, while the fixture's slow tool is still sleeping.
async fn cancel_soon(cancel: CancellationToken) {
    tokio::time::sleep(Duration::from_millis(300)).await;
    cancel.cancel();
}

/// The fixture `kind` as server `name`, writing its ledger (cancellations seen, calls made) to a
/// temporary file kept alive by the returned handle.
fn fixture_with_ledger(
    name: &str,
    kind: &str,
) -> (tempfile::NamedTempFile, warden_mcp::ServerSpec) {
    let ledger = tempfile::NamedTempFile::new().expect("ledger");
    let spec = common::fixture(name, kind).with_env(
        warden_testkit::fixtures::LEDGER_ENV,
        ledger.path().to_string_lossy().into_owned(),
    );
    (ledger, spec)
}

/// Polls `ledger` until the fixture wrote `line` (it writes one when it sees a cancellation).
async fn ledger_shows(ledger: &std::path::Path, line: &str) -> bool {
    for _ in 0..100 {
        let text = std::fs::read_to_string(ledger).unwrap_or_default();
        if text.contains(line) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_relayed_call_comes_back_as_answered_and_its_cancellation_reaches_the_server() {
    let (ledger, spec) = fixture_with_ledger("work", "echo");
    let test = common::runtime(vec![spec]);
    let runtime = &test.runtime;
    runtime.server_tools("work").await.expect("tools");
    let relayed = |tool: &str, arguments_json: serde_json::Value| {
        rmcp::model::CallToolRequestParams::new(tool.to_owned())
            .with_arguments(arguments(arguments_json))
    };
    // The server's answer, unchanged.
    let answer = runtime
        .relay_call_tool(
            &ToolIdentity::new("work", "echo"),
            relayed("echo", json!({"text": "relayed"})),
            CallOptions::default(),
        )
        .await
        .expect("relayed");
    let rmcp::model::ServerResult::CallToolResult(result) = answer else {
        panic!("expected a tool result, got {answer:?}");
    };
    assert_eq!(common::first_text(&result), "relayed");
    // A caller that stops the call: reported as cancelled, and the server is told.
    let (cancel, options) = cancellable();
    let slow = ToolIdentity::new("work", "slow");
    let call = runtime.relay_call_tool(&slow, relayed("slow", json!({"ms": 30000})), options);
    let (result, ()) = tokio::join!(call, cancel_soon(cancel));
    match result {
        Err(warden_mcp::RelayError::Failed(error)) => {
            assert_eq!(error.kind(), FailureKind::Cancelled, "{error}");
        }
        other => panic!("expected a cancelled call, got {other:?}"),
    }
    assert!(
        ledger_shows(ledger.path(), "slow cancelled 30000").await,
        "the server never saw the cancellation"
    );
    assert_eq!(common::state_of(runtime, "work"), ServerState::Connected);
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_server_that_dies_mid_call_is_reported_never_resent_and_reconnected() {
    let (ledger, spec) = fixture_with_ledger("db", "crash-mid-call");
    let test = common::runtime(vec![spec]);
    let runtime = &test.runtime;
    let error = runtime
        .call_tool(
            &ToolIdentity::new("db", "crash"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect_err("the server crashed");
    assert_eq!(error.kind(), FailureKind::Exited);
    let text = error.to_string();
    assert!(
        text.contains(&format!("its last stderr line: \"{CRASH_STDERR_LINE}\"")),
        "{text}"
    );
    assert!(text.contains("the call was not re-sent"), "{text}");
    assert!(text.contains("then reconnect"), "{text}");

    // Supervision brings it back; the crashing call is not repeated.
    let status = common::wait_for_status(runtime, "db", |status| {
        status.state == ServerState::Connected && status.connect_attempts >= 2
    })
    .await;
    assert!(status.failure.is_none());
    let crashes = std::fs::read_to_string(ledger.path())
        .unwrap_or_default()
        .lines()
        .filter(|line| line.contains("crash"))
        .count();
    assert!(
        crashes <= 1,
        "the crashing call was re-sent: {crashes} crash lines"
    );
    let echo = runtime
        .call_tool(
            &ToolIdentity::new("db", "echo"),
            arguments(json!({"text": "back"})),
            CallOptions::default(),
        )
        .await
        .expect("echo after reconnect");
    assert!(common::first_text(&echo.result).contains("back"));
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_down_server_keeps_its_tools_and_answers_that_it_exited() {
    let test = common::runtime(vec![common::fixture("db", "crash-mid-call")]);
    let runtime = &test.runtime;
    let before = runtime.server_tools("db").await.expect("tools");
    let pid = runtime
        .server_status("db")
        .expect("status")
        .pid
        .expect("pid");
    std::process::Command::new("kill")
        .arg("-9")
        .arg(pid.to_string())
        .status()
        .expect("kill");
    let down = common::wait_for_status(runtime, "db", |status| {
        status.state != ServerState::Connected
    })
    .await;
    assert!(
        matches!(down.state, ServerState::Down | ServerState::Reconnecting),
        "{down:?}"
    );
    assert!(
        down.failure
            .as_deref()
            .unwrap_or_default()
            .contains("exited with signal 9"),
        "{down:?}"
    );
    let listed = runtime.server_tools("db").await.expect("tools stay listed");
    assert_eq!(listed.len(), before.len());
    let back = common::wait_for_status(runtime, "db", |status| {
        status.state == ServerState::Connected
    })
    .await;
    assert_ne!(back.pid, Some(pid));
    runtime.shutdown().await;
}
