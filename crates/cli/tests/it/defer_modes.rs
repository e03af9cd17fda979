//! Deferred tools end to end through `warden run`, the echo fixture server and the mock model:
//! every defer mode's wire shapes, loading that only appends (the previous request's tools array
//! is an exact prefix of the next, the system prompt identical), a deferred tool called by its
//! exact name without a search, `call_tool` gated as the tool behind it, automatic deferral with
//! `always_load`, and a mode the provider cannot speak refused at config load.

use serde_json::{Value, json};
use warden_mock_model::{MockModel, RecordedRequest, Turn};

use crate::support::Sandbox;
use crate::support::warden_without_model_keys as warden;
use crate::support::{echo_server, mock_model_config};

/// `[models.mock]` for `provider` at `mock`, with `defer_mode` when given, as the default model.
fn model_config(mock: &MockModel, provider: &str, defer_mode: Option<&str>) -> String {
    mock_model_config(&mock.base_url(), provider, defer_mode)
}

async fn run_json(sandbox: &Sandbox, extra: &[&str]) -> Value {
    let mut args = vec!["run", "use the echo tool", "--output-format", "json"];
    args.extend_from_slice(extra);
    let run = warden(sandbox, &args).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(run.stdout.trim()).unwrap()
}

/// Each request's tools array starts with the previous one's, byte for byte, and every request
/// carries the same system prompt.
fn assert_append_only(requests: &[RecordedRequest]) {
    for pair in requests.windows(2) {
        let (before, after) = (pair[0].tools(), pair[1].tools());
        assert!(after.len() >= before.len());
        assert_eq!(
            serde_json::to_string(&after[..before.len()]).unwrap(),
            serde_json::to_string(&before).unwrap(),
            "an earlier part of the tools array changed"
        );
        assert_eq!(pair[0].system_prompt(), pair[1].system_prompt());
        assert!(pair[0].system_prompt().is_some());
    }
}

/// The public names of the agent's audited calls, oldest first.
fn audited_names(sandbox: &Sandbox) -> Vec<String> {
    sandbox
        .audit()
        .iter()
        .filter(|record| record["source"] == "agent")
        .map(|record| record["public_name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn normal_mode_appends_loaded_schemas_and_keeps_earlier_bytes() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "toolu_1",
        "search_tools",
        json!({"query": "echo", "limit": 2}),
    ));
    mock.push_turn(Turn::tool_call(
        "toolu_2",
        "mcp__fx__echo",
        json!({"text": "from a loaded tool"}),
    ));
    mock.push_turn(Turn::text("Echoed."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}",
        model_config(&mock, "anthropic", None),
        echo_server("fx", "defer = \"Echo fixture: repeat and add\"\n")
    ));
    let summary = run_json(&sandbox, &[]).await;
    assert_eq!(summary["tool_calls"][1]["result"]["decision"], "allowed");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_append_only(&requests);
    let first = requests[0].tool_names();
    assert!(first.contains(&"search_tools".to_owned()), "{first:?}");
    assert!(!first.iter().any(|name| name.starts_with("mcp__fx__")));
    let second = requests[1].tool_names();
    assert!(
        second[first.len()..].contains(&"mcp__fx__echo".to_owned()),
        "{second:?}"
    );
    assert!(requests[2].body.to_string().contains("from a loaded tool"));
    assert_eq!(audited_names(&sandbox), ["search_tools", "mcp__fx__echo"]);
}

#[tokio::test]
async fn a_deferred_tool_called_by_its_exact_name_is_loaded_and_run_through_the_gate() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "mcp__fx__echo",
        json!({"text": "no search needed"}),
    ));
    mock.push_turn(Turn::text("Echoed."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}",
        model_config(&mock, "openai", None),
        echo_server("fx", "defer = \"Echo fixture\"\n")
    ));
    let summary = run_json(&sandbox, &[]).await;
    assert_eq!(summary["result"], "Echoed.");
    let result = &summary["tool_calls"][0]["result"];
    assert_eq!(result["decision"], "allowed", "{result}");
    assert_eq!(result["text"], "no search needed");
    let requests = mock.requests();
    assert_append_only(&requests);
    // Its schema is appended for the turns after (normal mode).
    assert!(
        !requests[0]
            .tool_names()
            .contains(&"mcp__fx__echo".to_owned())
    );
    assert!(
        requests[1]
            .tool_names()
            .contains(&"mcp__fx__echo".to_owned())
    );
    assert_eq!(audited_names(&sandbox), ["mcp__fx__echo"]);
}

#[tokio::test]
async fn system_tools_mode_lists_deferred_tools_in_the_prompt_and_gates_call_tool_as_the_tool() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "call_tool",
        json!({"name": "mcp__fx__echo", "arguments": {"text": "behind call_tool"}}),
    ));
    // A write behind call_tool is gated as the write: headless, it is denied.
    mock.push_turn(Turn::tool_call(
        "call_2",
        "call_tool",
        json!({"name": "mcp__fx__write_note", "arguments": {"text": "nope"}}),
    ));
    mock.push_turn(Turn::text("Done."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}",
        model_config(&mock, "openai", Some("system-tools")),
        echo_server("fx", "defer = \"Echo fixture\"\n")
    ));
    let summary = run_json(&sandbox, &[]).await;
    let calls = summary["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["result"]["decision"], "allowed", "{calls:?}");
    assert_eq!(calls[0]["result"]["text"], "behind call_tool");
    assert_eq!(calls[1]["result"]["decision"], "denied", "{calls:?}");

    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_append_only(&requests);
    // The tools array never grows in this mode: loading happens behind call_tool.
    assert_eq!(requests[2].tools(), requests[0].tools());
    let names = requests[0].tool_names();
    assert!(names.contains(&"call_tool".to_owned()), "{names:?}");
    assert!(!names.contains(&"search_tools".to_owned()), "{names:?}");
    assert!(!names.iter().any(|name| name.starts_with("mcp__fx__")));
    let prompt = requests[0].system_prompt().unwrap();
    assert!(prompt.contains("<deferred_tools>"), "{prompt}");
    assert!(prompt.contains("Server fx: Echo fixture"), "{prompt}");
    assert!(
        prompt.contains("- mcp__fx__echo(text): Returns the text it is given."),
        "{prompt}"
    );
    assert!(prompt.contains("- mcp__fx__write_note(text):"), "{prompt}");
    // Audited under the tools' own names, never as call_tool.
    assert_eq!(
        audited_names(&sandbox),
        ["mcp__fx__echo", "mcp__fx__write_note"]
    );
}

#[tokio::test]
async fn reference_mode_sends_every_deferred_definition_once_and_reveals_them_by_reference() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "toolu_1",
        "search_tools",
        json!({"query": "echo", "limit": 1}),
    ));
    mock.push_turn(Turn::tool_call(
        "toolu_2",
        "mcp__fx__echo",
        json!({"text": "by reference"}),
    ));
    mock.push_turn(Turn::text("Done."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}",
        model_config(&mock, "anthropic", Some("reference")),
        echo_server("fx", "defer = \"Echo fixture\"\n")
    ));
    let summary = run_json(&sandbox, &[]).await;
    assert_eq!(summary["tool_calls"][1]["result"]["text"], "by reference");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_append_only(&requests);
    assert_eq!(requests[2].tools(), requests[0].tools());
    let tools = requests[0].tools();
    let echo = tools
        .iter()
        .find(|tool| tool["name"] == "mcp__fx__echo")
        .expect("the deferred definition is sent from the first request");
    assert_eq!(echo["defer_loading"], true);
    let search = tools
        .iter()
        .find(|tool| tool["name"] == "search_tools")
        .unwrap();
    assert!(search.get("defer_loading").is_none());
    let result = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .find(|block| block["tool_use_id"] == "toolu_1")
        .unwrap();
    assert_eq!(
        result["content"],
        json!([{"type": "tool_reference", "tool_name": "mcp__fx__echo"}])
    );
}

async fn native_tool_search(provider: &str) {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(
        Turn::default()
            .with_tool_search("repeat text", &["mcp__fx__echo"])
            .with_tool_call("call_1", "mcp__fx__echo", json!({"text": "found natively"})),
    );
    mock.push_turn(Turn::text("Done."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}{}",
        model_config(&mock, provider, Some("tool-search")),
        echo_server("fx", "defer = \"Echo fixture\"\n")
    ));
    let summary = run_json(&sandbox, &[]).await;
    assert_eq!(
        summary["tool_calls"][0]["result"]["text"], "found natively",
        "{provider}"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_append_only(&requests);
    assert_eq!(requests[1].tools(), requests[0].tools());
    let tools = requests[0].tools();
    let names = requests[0].tool_names();
    assert!(!names.contains(&"search_tools".to_owned()), "{names:?}");
    match provider {
        "anthropic" => assert_eq!(
            tools[0],
            json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"})
        ),
        _ => assert_eq!(tools[0], json!({"type": "tool_search"})),
    }
    let deferred: Vec<&Value> = tools
        .iter()
        .filter(|tool| tool["defer_loading"] == true)
        .collect();
    assert!(
        deferred.iter().any(|tool| tool["name"] == "mcp__fx__echo"),
        "{provider}"
    );
    assert!(
        deferred
            .iter()
            .all(|tool| tool["name"].as_str().unwrap().starts_with("mcp__fx__"))
    );
    // The provider's search blocks come back in the next request.
    let replay = requests[1].body.to_string();
    match provider {
        "anthropic" => {
            assert!(replay.contains("\"server_tool_use\""), "{replay}");
            assert!(replay.contains("\"tool_search_tool_result\""), "{replay}");
        }
        _ => {
            assert!(replay.contains("\"tool_search_call\""), "{replay}");
            assert!(replay.contains("\"tool_search_output\""), "{replay}");
        }
    }
    assert_eq!(audited_names(&sandbox), ["mcp__fx__echo"]);
}

#[tokio::test]
async fn anthropic_tool_search_mode_uses_the_providers_search() {
    native_tool_search("anthropic").await;
}

#[tokio::test]
async fn openai_responses_tool_search_mode_uses_the_hosted_search() {
    native_tool_search("openai-responses").await;
}

#[tokio::test]
async fn large_servers_are_deferred_automatically_except_always_load_ones() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Nothing to do."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}[discovery]\nauto_defer_tokens = 50\n{}{}",
        model_config(&mock, "openai", None),
        echo_server("big", ""),
        echo_server("kept", "always_load = true\n")
    ));
    run_json(&sandbox, &[]).await;
    let request = &mock.requests()[0];
    let names = request.tool_names();
    assert!(names.contains(&"search_tools".to_owned()), "{names:?}");
    assert!(names.contains(&"mcp__kept__echo".to_owned()), "{names:?}");
    assert!(
        !names.iter().any(|name| name.starts_with("mcp__big__")),
        "{names:?}"
    );
    // The generated summary comes from the server's instructions.
    let search = request
        .tools()
        .into_iter()
        .find(|tool| tool.pointer("/function/name") == Some(&json!("search_tools")))
        .unwrap();
    let description = search["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("- big: Fixture server for warden's tests."),
        "{description}"
    );

    // 0 turns automatic deferral off.
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Nothing to do."));
    sandbox.user_config(&format!(
        "{}[discovery]\nauto_defer_tokens = 0\n{}",
        model_config(&mock, "openai", None),
        echo_server("big", "")
    ));
    run_json(&sandbox, &[]).await;
    let names = mock.requests()[0].tool_names();
    assert!(names.contains(&"mcp__big__echo".to_owned()), "{names:?}");
    assert!(!names.contains(&"search_tools".to_owned()), "{names:?}");
}

#[tokio::test]
async fn a_defer_mode_the_provider_cannot_speak_is_refused_with_file_key_and_fix() {
    let mock = MockModel::start().await.unwrap();
    let sandbox = Sandbox::new();
    sandbox.user_config(&model_config(&mock, "openai-responses", Some("reference")));
    let run = warden(&sandbox, &["run", "hello"]).await;
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("config.toml"), "{}", run.stderr);
    assert!(
        run.stderr.contains("models.mock.defer_mode"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("use \"normal\" or \"system-tools\""),
        "{}",
        run.stderr
    );
    assert!(mock.requests().is_empty());
}
