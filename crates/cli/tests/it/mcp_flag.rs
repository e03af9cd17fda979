//! `warden run --mcp URL`: a Streamable HTTP endpoint, and a legacy HTTP+SSE one (a path ending
//! in `/sse`), both server-everything, reached for one run through the gate.

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};

use crate::support::warden_without_model_keys as warden;
use crate::support::{Sandbox, mock_model_config};

/// Runs `warden run --mcp URL` where the model calls the server's `echo`; returns the summary.
async fn echo_through(url: &str) -> Value {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__mcp__echo",
        json!({"message": "over the wire"}),
    ));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&mock_model_config(&mock.base_url(), "openai", None));
    let run = warden(
        &sandbox,
        &["run", "echo", "--output-format", "json", "--mcp", url],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(run.stdout.trim()).unwrap()
}

#[tokio::test]
async fn mcp_flag_reaches_a_streamable_http_server() {
    warden_testkit::require_or_skip!(warden_testkit::npm_server("everything"));
    warden_testkit::require_or_skip!(warden_testkit::node22());
    let server = warden_testkit::spawn_everything_http().await;
    let summary = echo_through(&server.url).await;
    let text = summary["tool_calls"][0]["result"]["text"].as_str().unwrap();
    assert!(text.contains("Echo: over the wire"), "{summary}");
}

#[tokio::test]
async fn mcp_flag_reaches_a_legacy_sse_server() {
    warden_testkit::require_or_skip!(warden_testkit::npm_server("everything"));
    warden_testkit::require_or_skip!(warden_testkit::node22());
    let server = warden_testkit::spawn_everything_sse().await;
    let address = format!("127.0.0.1:{}", server.port);
    let summary = echo_through(&format!("http://{address}/sse")).await;
    let text = summary["tool_calls"][0]["result"]["text"].as_str().unwrap();
    assert!(text.contains("Echo: over the wire"), "{summary}");
}
