//! The npm reference server `server-everything` over stdio: handshake fallback to 2025-11-25,
//! tools, a call, resources and prompts.

use std::collections::BTreeMap;

use serde_json::json;
use warden_mcp::{CallOptions, ServerState, ToolIdentity};

use crate::common;

#[tokio::test]
async fn server_everything_over_stdio() {
    let test = common::runtime(vec![common::everything_stdio("everything")]);
    let runtime = &test.runtime;
    let tools = runtime.server_tools("everything").await.expect("tools");
    assert!(
        tools.iter().any(|tool| tool.identity.tool == "echo"),
        "{:?}",
        tools.iter().map(|t| &t.identity.tool).collect::<Vec<_>>()
    );
    let status = runtime.server_status("everything").expect("status");
    assert_eq!(status.state, ServerState::Connected);
    let revision = status.protocol_revision.clone().unwrap_or_default();
    assert!(
        revision == "2025-11-25" || revision == "2026-07-28",
        "{revision}"
    );

    let arguments = json!({"message": "hello from warden"})
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
    assert!(common::first_text(&outcome.result).contains("hello from warden"));

    let rows = runtime
        .resources(Some("everything"))
        .await
        .expect("resources");
    if let Some(row) = rows.first() {
        let read = runtime
            .read_resource("everything", &row.resource.uri)
            .await
            .expect("read a listed resource");
        assert!(!read.contents.is_empty());
    }
    let prompts = runtime.prompts("everything").await.expect("prompts");
    if let Some(prompt) = prompts
        .iter()
        .find(|prompt| prompt.arguments.as_ref().is_none_or(Vec::is_empty))
    {
        runtime
            .get_prompt("everything", &prompt.name, BTreeMap::new())
            .await
            .expect("prompt without arguments");
    }
    runtime.shutdown().await;
}
