//! `list_changed` refreshes the affected list under a generation counter, over both protocol eras.

use serde_json::json;
use warden_mcp::{CallOptions, ProtocolMode, RuntimeOptions, ToolIdentity};

use crate::common;

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
