//! A 20 MiB tool result arrives whole over stdio and over Streamable HTTP.

use serde_json::Map;
use warden_mcp::{CallOptions, ServerSpec, ToolIdentity};
use warden_testkit::fixtures::BIG_RESULT_BYTES;

use crate::common;

async fn big_text_length(runtime: &warden_mcp::McpRuntime) -> usize {
    let outcome = runtime
        .call_tool(
            &ToolIdentity::new("big", "big_result"),
            Map::new(),
            CallOptions::default(),
        )
        .await
        .expect("big_result");
    common::first_text(&outcome.result).len()
}

#[tokio::test]
async fn twenty_mebibytes_over_stdio() {
    let test = common::runtime(vec![common::fixture("big", "big-result")]);
    assert_eq!(big_text_length(&test.runtime).await, BIG_RESULT_BYTES);
    test.runtime.shutdown().await;
}

#[tokio::test]
async fn twenty_mebibytes_over_http() {
    let fixture = warden_testkit::spawn_http_fixture("big-result").await;
    let test = common::runtime(vec![ServerSpec::http("big", &fixture.url)]);
    assert_eq!(big_text_length(&test.runtime).await, BIG_RESULT_BYTES);
    test.runtime.shutdown().await;
}
