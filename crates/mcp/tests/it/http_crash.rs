//! A Streamable HTTP server that dies in the middle of a call: the call ends with a readable
//! failure well before its deadline instead of waiting on a stream that will never answer.

use std::time::Duration;

use warden_mcp::{CallOptions, ServerSpec, ToolIdentity};
use warden_testkit::spawn_http_fixture;

use crate::common;

#[tokio::test]
async fn a_call_in_flight_when_the_http_server_dies_fails_promptly() {
    let fixture = spawn_http_fixture("crash-mid-call").await;
    let spec = ServerSpec::http("db", &fixture.url).with_tool_timeout(Duration::from_secs(600));
    let test = common::runtime(vec![spec]);
    let runtime = &test.runtime;
    runtime.server_tools("db").await.expect("tools");
    let identity = ToolIdentity::new("db", "crash");
    let call = runtime.call_tool(&identity, serde_json::Map::new(), CallOptions::default());
    // Far below the 600 s deadline: only a failure noticed from the dead connection ends it.
    let outcome = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("the call must not wait for its deadline when the server is gone");
    let error = outcome.expect_err("the server died mid-call");
    assert!(error.to_string().starts_with("MCP db"), "{error}");
    runtime.shutdown().await;
}
