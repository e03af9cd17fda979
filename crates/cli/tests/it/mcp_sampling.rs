//! `warden run` answers a server's sampling request with the session's model (the mock model)
//! when the entry says `sampling = true`, and the server never gets to ask otherwise.

use std::path::Path;

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};
use warden_testkit::require_npm_server;

use crate::support::{self, warden_without_model_keys as warden};
use crate::support::{Sandbox, stdio_server, toml_str};

fn config(mock: &MockModel, sampling: bool) -> String {
    let server = require_npm_server("everything");
    format!(
        "model = \"mock\"\n[models.mock]\nprovider = \"openai\"\nid = \"mock-1\"\nbase_url = {}\n{}{}",
        toml_str(&mock.base_url()),
        stdio_server("everything", Path::new("node"), &[server.to_str().unwrap()]),
        if sampling { "sampling = true\n" } else { "" }
    )
}

/// The model's turn that calls server-everything's tool which asks for a sample.
fn sampling_turn() -> Turn {
    Turn::tool_call(
        "call_1",
        "mcp__everything__trigger-sampling-request",
        json!({"prompt": "name a colour", "maxTokens": 20}),
    )
}

/// `warden run` allowed to call that tool, as JSON.
async fn trigger_sampling(sandbox: &Sandbox) -> support::Run {
    warden(
        sandbox,
        &[
            "run",
            "trigger sampling",
            "--output-format",
            "json",
            "--allowed-tools",
            "mcp__everything__trigger-sampling-request",
        ],
    )
    .await
}

#[tokio::test]
async fn an_enabled_server_s_sampling_request_is_answered_by_the_session_s_model() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(sampling_turn());
    // The sampling request itself reaches the model as its own request.
    mock.push_turn(Turn::text("vermilion, said the mock model"));
    mock.push_turn(Turn::text("The server got its answer."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock, true));
    let run = trigger_sampling(&sandbox).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(summary["tool_calls"][0]["result"]["decision"], "allowed");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "agent turn, sampling, agent turn");
    let sampling = requests[1].body.to_string();
    assert!(sampling.contains("name a colour"), "{sampling}");
    assert!(
        sampling.contains("You are a helpful test server."),
        "{sampling}"
    );
    // The server's tool result (with the model's sampled text) went back to the agent.
    let last = requests[2].body.to_string();
    assert!(last.contains("vermilion, said the mock model"), "{last}");
    // The request crossed the gate: one audit record, a sampling answer for a server.
    let sampled: Vec<Value> = sandbox
        .audit()
        .into_iter()
        .filter(|row| row["kind"] == "sampling")
        .collect();
    assert_eq!(sampled.len(), 1, "{sampled:?}");
    assert_eq!(sampled[0]["source"], "server");
    assert_eq!(sampled[0]["tool"], "answer_mcp_sampling");
    assert_eq!(sampled[0]["caller"], "mcp server everything");
    assert_eq!(sampled[0]["decision"], "allowed");
    assert_eq!(sampled[0]["session_id"], summary["session_id"]);
}

#[tokio::test]
async fn the_operator_can_deny_sampling_at_the_gate() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(sampling_turn());
    mock.push_turn(Turn::text("The server was refused."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}[permissions]\ndeny = [\"answer_mcp_sampling\"]\n",
        config(&mock, true)
    ));
    let run = trigger_sampling(&sandbox).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The model never saw the server's request: the agent's two turns only.
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{:?}", requests.len());
    assert!(!requests[1].body.to_string().contains("vermilion"));
    let sampled: Vec<Value> = sandbox
        .audit()
        .into_iter()
        .filter(|row| row["kind"] == "sampling")
        .collect();
    assert_eq!(sampled.len(), 1, "{sampled:?}");
    assert_eq!(sampled[0]["decision"], "denied");
}

#[tokio::test]
async fn without_the_key_the_server_is_not_offered_sampling() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("nothing to do"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&config(&mock, false));
    let run = warden(&sandbox, &["run", "hello", "--output-format", "json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let first = mock.requests()[0].body.to_string();
    assert!(first.contains("mcp__everything__echo"), "the server loaded");
    assert!(
        !first.contains("mcp__everything__trigger-sampling-request"),
        "server-everything offers its sampling tool only to a client that advertises sampling"
    );
}
