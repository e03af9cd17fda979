//! A server flooding stderr keeps working; only its last lines are kept.

use std::time::Duration;

use serde_json::json;
use warden_mcp::STDERR_LINES_KEPT;
use warden_mcp::{CallOptions, ToolIdentity};

use crate::common;

#[tokio::test]
async fn a_stderr_flood_is_drained_and_bounded() {
    let test = common::runtime(vec![common::fixture("loud", "stderr-flood")]);
    let runtime = &test.runtime;
    let tools = runtime.server_tools("loud").await.expect("tools");
    assert!(tools.iter().any(|tool| tool.identity.tool == "echo"));
    // Let the flood run for a while; calls must still be answered.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..5 {
        let arguments = json!({"text": "hi"}).as_object().cloned().expect("object");
        runtime
            .call_tool(
                &ToolIdentity::new("loud", "echo"),
                arguments,
                CallOptions::default(),
            )
            .await
            .expect("call during the flood");
    }
    let status = runtime.server_status("loud").expect("status");
    assert!(!status.stderr_tail.is_empty());
    assert!(status.stderr_tail.len() <= STDERR_LINES_KEPT);
    assert!(status.stderr_tail.iter().all(|line| line.len() <= 1024));
    runtime.shutdown().await;
}
