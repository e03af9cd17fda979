//! `list_changed` refreshes the affected list under a generation counter, over both protocol eras.

use serde_json::json;
use warden_mcp::{CallOptions, ProtocolMode, RuntimeOptions, ToolIdentity};

use crate::common;

/// Calls the fixture's `mutate`: tool `c` added, `a` removed, then `list_changed`, then the
/// answer.
async fn mutate(runtime: &warden_mcp::McpRuntime) {
    runtime
        .call_tool(
            &ToolIdentity::new("live", "mutate"),
            json!({"add": "c", "remove": "a"})
                .as_object()
                .cloned()
                .expect("object"),
            CallOptions::default(),
        )
        .await
        .expect("mutate");
}

async fn tools_change_after_mutate(runtime: &warden_mcp::McpRuntime) {
    let before = runtime.server_tools("live").await.expect("tools");
    let names: Vec<String> = before
        .iter()
        .map(|tool| tool.identity.tool.clone())
        .collect();
    let generation = runtime
        .server_status("live")
        .expect("status")
        .catalog_generation;
    mutate(runtime).await;
    let status = common::wait_for_status(runtime, "live", |status| {
        status.catalog_generation > generation
    })
    .await;
    assert!(status.warnings.is_empty(), "{:?}", status.warnings);
    let after = runtime.server_tools("live").await.expect("tools");
    let after_names: Vec<String> = after
        .iter()
        .map(|tool| tool.identity.tool.clone())
        .collect();
    assert!(
        names.contains(&"a".to_owned()) && !names.contains(&"c".to_owned()),
        "{names:?}"
    );
    assert!(after_names.contains(&"c".to_owned()), "{after_names:?}");
    assert!(!after_names.contains(&"a".to_owned()), "{after_names:?}");
}

/// A server that announces a change and then answers: the change is noticed before the answer
/// is handed back, so the caller's next look at the tools sees it, without waiting.
async fn a_change_announced_before_the_answer_is_seen_when_the_call_returns(
    runtime: &warden_mcp::McpRuntime,
) {
    runtime.server_tools("live").await.expect("tools");
    let before = runtime.tool_list_epoch("live").expect("epoch");
    mutate(runtime).await;
    let after = runtime.tool_list_epoch("live").expect("epoch");
    assert_eq!(after.connection, before.connection);
    assert!(after.tools > before.tools, "{before:?} → {after:?}");
    let names: Vec<String> = runtime
        .server_tools("live")
        .await
        .expect("tools")
        .iter()
        .map(|tool| tool.identity.tool.clone())
        .collect();
    assert!(names.contains(&"c".to_owned()), "{names:?}");
}

// Several workers, as warden runs: the notification's task and the caller may then run at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_changes_the_list_returns_after_the_change_is_noticed() {
    for protocol in [ProtocolMode::Legacy, ProtocolMode::Auto] {
        let workspace = tempfile::tempdir().expect("workspace");
        let mut options = RuntimeOptions::new(workspace.path());
        options.protocol = protocol;
        let runtime =
            warden_mcp::McpRuntime::new(vec![common::fixture("live", "list-changed")], options);
        // Repeated: without the ordering the race is lost only some of the time (on an idle
        // machine rarely; with the cores busy, every run of this test failed).
        for _ in 0..20 {
            a_change_announced_before_the_answer_is_seen_when_the_call_returns(&runtime).await;
        }
        runtime.shutdown().await;
    }
}

#[tokio::test]
async fn list_changed_over_a_2026_07_28_listen_stream() {
    let test = common::runtime(vec![common::fixture("live", "list-changed")]);
    tools_change_after_mutate(&test.runtime).await;
    let status = test.runtime.server_status("live").expect("status");
    assert_eq!(status.protocol_revision.as_deref(), Some("2026-07-28"));
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn list_changed_over_a_2025_11_25_session() {
    let workspace = tempfile::tempdir().expect("workspace");
    let mut options = RuntimeOptions::new(workspace.path());
    options.protocol = ProtocolMode::Legacy;
    let runtime =
        warden_mcp::McpRuntime::new(vec![common::fixture("live", "list-changed")], options);
    tools_change_after_mutate(&runtime).await;
    let status = runtime.server_status("live").expect("status");
    assert_eq!(status.protocol_revision.as_deref(), Some("2025-11-25"));
    runtime.shutdown().await;
}
