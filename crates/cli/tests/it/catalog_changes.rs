//! A server's catalogue as `warden run` and `warden tool` see it change and go wrong: tools a
//! server adds mid-run are offered on the next model request, withdrawn ones are explained when
//! called, and catalogue warnings (colliding names, a listing cut at the page limit) are shown
//! where tools are listed.

use serde_json::{Value, json};
use warden_mock_model::{MockModel, Turn};
use warden_testkit::fixture_binary;

use crate::support::warden_without_model_keys as warden;
use crate::support::{Sandbox, mock_model_config, stdio_server};

fn fixture_server(name: &str, kind: &str) -> String {
    stdio_server(name, &fixture_binary(), &[kind])
}

#[tokio::test]
async fn tools_a_server_adds_mid_run_are_offered_on_the_next_request() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__lc__mutate",
        json!({"add": "c", "remove": "a"}),
    ));
    mock.push_turn(Turn::tool_call("call_2", "mcp__lc__a", json!({})));
    mock.push_turn(Turn::text("done"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}",
        mock_model_config(&mock.base_url(), "openai", None),
        fixture_server("lc", "list-changed")
    ));
    let run = warden(
        &sandbox,
        &[
            "run",
            "change the tools",
            "--output-format",
            "json",
            "--allowed-tools",
            "mcp__lc__*",
        ],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let first = requests[0].body.to_string();
    assert!(first.contains("mcp__lc__a"), "{first}");
    assert!(!first.contains("mcp__lc__c"), "{first}");
    // The tool the server added is offered from the next request on.
    let second = requests[1].body.to_string();
    assert!(second.contains("mcp__lc__c"), "{second}");
    assert!(
        run.stderr.contains("now offered to the model: mcp__lc__c"),
        "{}",
        run.stderr
    );
    // The withdrawn tool, called anyway, is explained.
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let withdrawn = summary["tool_calls"][1]["result"]["text"].as_str().unwrap();
    assert!(withdrawn.contains("withdrawn"), "{withdrawn}");
}

#[tokio::test]
async fn colliding_tool_names_are_warnings_of_the_run() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("done"));
    mock.push_turn(Turn::text("done again"));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}",
        mock_model_config(&mock.base_url(), "openai", None),
        fixture_server("bad", "bad-names")
    ));
    let run = warden(&sandbox, &["run", "hello", "--output-format", "json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    let warnings: Vec<&str> = summary["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|warning| warning.as_str().unwrap())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("MCP bad: ") && w.contains("\"dup\" is listed 2 times")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("same model-visible name")),
        "{warnings:?}"
    );
    // In text mode they are on stderr.
    let text = warden(&sandbox, &["run", "hello"]).await;
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stderr.contains("\"dup\" is listed 2 times"),
        "{}",
        text.stderr
    );
}

#[tokio::test]
async fn tool_listing_shows_catalogue_warnings_on_stderr() {
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}",
        fixture_server("bad", "bad-names"),
        fixture_server("pg", "paginated-forever")
    ));
    let bad = warden(&sandbox, &["tool", "bad"]).await;
    assert_eq!(bad.code, 0, "{}", bad.stderr);
    assert!(bad.stdout.contains("ok_tool"), "{}", bad.stdout);
    assert!(
        bad.stderr
            .contains("warning: MCP bad: tool \"dup\" is listed 2 times"),
        "{}",
        bad.stderr
    );
    let endless = warden(&sandbox, &["tool", "pg"]).await;
    assert_eq!(endless.code, 0, "{}", endless.stderr);
    assert!(
        endless
            .stderr
            .contains("warning: MCP pg: tools/list stopped after 64 pages"),
        "{}",
        endless.stderr
    );
}
