//! A relaying client's requests said in the upstream's era: a server that speaks only older
//! revisions is reached with `initialize`; on 2026-07-28 a resource subscription is a
//! `subscriptions/listen` stream, a session log level is not sent, and a call's `_meta` log level
//! makes the server log.
// Logging is deprecated by SEP-2577 but still part of 2025-11-25, which warden relays.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::model::{
    LoggingLevel, RequestMetaObject, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use serde_json::json;
use warden_mcp::{
    CallOptions, McpRuntime, RuntimeOptions, ServerSpec, ToolIdentity, UpstreamEvent,
};

use crate::common::arguments;

fn fixture(name: &str, newest_revision: Option<&str>) -> ServerSpec {
    let binary = warden_testkit::conformance_server_binary();
    let spec = ServerSpec::stdio(name, binary.to_string_lossy());
    match newest_revision {
        Some(revision) => spec.with_args(["--newest-revision", revision]),
        None => spec,
    }
}

fn runtime(spec: ServerSpec) -> (McpRuntime, tempfile::TempDir) {
    let workspace = tempfile::tempdir().expect("workspace");
    let options = RuntimeOptions::new(workspace.path());
    (McpRuntime::new(vec![spec], options), workspace)
}

#[tokio::test]
async fn a_server_that_answers_discover_with_only_older_revisions_is_reached_with_initialize() {
    let (runtime, _workspace) = runtime(fixture("old", Some("2025-11-25")));
    let tools = runtime
        .server_tools("old")
        .await
        .expect("the server answers server/discover with \"unsupported protocol version\" and the revisions it speaks; warden falls back to initialize");
    assert!(!tools.is_empty());
    let status = runtime.server_status("old").expect("status");
    assert_eq!(status.protocol_revision.as_deref(), Some("2025-11-25"));
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_relayed_subscription_to_a_2026_server_is_a_listen_stream_and_set_level_sends_nothing() {
    let (runtime, _workspace) = runtime(fixture("new", None));
    runtime.server_tools("new").await.expect("connects");
    assert_eq!(
        runtime
            .server_status("new")
            .expect("status")
            .protocol_revision
            .as_deref(),
        Some("2026-07-28")
    );
    // 2026-07-28 has no resources/subscribe nor logging/setLevel: sent as they are, both were
    // refused with "method not found".
    runtime
        .relay_subscribe("new", SubscribeRequestParams::new("test://static-text"))
        .await
        .expect("a subscriptions/listen stream for the resource");
    runtime
        .relay_set_level("new", SetLevelRequestParams::new(LoggingLevel::Info))
        .await
        .expect("nothing to send on 2026-07-28");
    runtime
        .relay_unsubscribe("new", UnsubscribeRequestParams::new("test://static-text"))
        .await
        .expect("the stream ends");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_call_s_meta_log_level_makes_a_2026_server_log_and_without_it_the_server_is_quiet() {
    let (runtime, _workspace) = runtime(fixture("new", None));
    let tool = ToolIdentity::new("new", "test_tool_with_logging");
    let mut events = runtime.upstream_events();
    runtime
        .call_tool(&tool, arguments(json!({})), CallOptions::default())
        .await
        .expect("a call without a level");
    let mut meta = RequestMetaObject::new();
    meta.set_log_level(LoggingLevel::Info);
    runtime
        .call_tool(
            &tool,
            arguments(json!({})),
            CallOptions {
                meta: Some(meta),
                ..CallOptions::default()
            },
        )
        .await
        .expect("a call with a level");
    // Lines come in order on the one stdio connection: any line of the first call would come
    // before the second call's three. Once three arrived, stragglers get a moment more.
    let mut lines = Vec::new();
    let mut wait = Duration::from_secs(10);
    while let Ok(Ok(event)) = tokio::time::timeout(wait, events.recv()).await {
        if let UpstreamEvent::Log { message, .. } = event {
            lines.push(message.data.to_string());
        }
        if lines.len() >= 3 {
            wait = Duration::from_millis(300);
        }
    }
    assert_eq!(
        lines.len(),
        3,
        "the second call's three lines, none of the first's: {lines:?}"
    );
    assert!(lines[0].contains("Tool execution started"), "{lines:?}");
    runtime.shutdown().await;
}
