//! Defer modes on the wire, through the agent loop and the real HTTP providers against the mock
//! model: deferred definitions with `defer_loading`, the providers' tool search (Anthropic's tool
//! search tool, OpenAI Responses' hosted `tool_search`) whose blocks are replayed unchanged, and
//! `tool_reference` results; the tools array and the system prompt never change between turns.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_agent::{
    Agent, Message, ModelConfig, ToolCallRequest, ToolCallResult, ToolExecutor, ToolList, ToolSpec,
    client_for,
};
use warden_config::{DeferMode, ModelProvider};
use warden_mock_model::{MockModel, RecordedRequest, Turn};

const SYSTEM: &str = "You are a test.";

fn spec(name: &str, description: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
    }
}

/// Answers every call with its name; `search_tools` reveals `mcp__fx__echo` by reference.
#[derive(Default)]
struct Executor {
    calls: Mutex<Vec<String>>,
}

impl ToolExecutor for Executor {
    fn is_read_only(&self, _public_name: &str) -> bool {
        false
    }

    fn execute<'a>(
        &'a self,
        call: ToolCallRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolCallResult> {
        self.calls.lock().unwrap().push(call.public_name.clone());
        Box::pin(async move {
            let mut result = ToolCallResult::ok(format!("ran {}", call.public_name));
            if call.public_name == "search_tools" {
                result.tool_references = vec!["mcp__fx__echo".into()];
            }
            result
        })
    }
}

async fn run(
    mock: &MockModel,
    provider: ModelProvider,
    tools: ToolList,
) -> (Vec<Message>, Arc<Executor>) {
    let client = client_for(ModelConfig::new(provider, "m", mock.base_url())).unwrap();
    let executor = Arc::new(Executor::default());
    let agent = Agent::new(client, executor.clone(), SYSTEM.into(), tools);
    let mut conversation = vec![Message::user("echo hi")];
    agent
        .run(&mut conversation, &CancellationToken::new())
        .await
        .unwrap();
    (conversation, executor)
}

/// Every request sent the same system prompt and the same tools array.
fn assert_stable(requests: &[RecordedRequest]) {
    for request in requests {
        assert_eq!(request.system_prompt().as_deref(), Some(SYSTEM));
        assert_eq!(
            request.tools(),
            requests[0].tools(),
            "the tools array changed"
        );
    }
}

fn deferred_list(mode: DeferMode, offered: Vec<ToolSpec>) -> ToolList {
    let tools = ToolList::from(offered);
    tools.set_deferred(
        mode,
        vec![
            spec("mcp__fx__echo", "Returns the text it is given."),
            spec("mcp__fx__add", "Adds two numbers."),
        ],
    );
    tools
}

#[tokio::test]
async fn anthropic_tool_search_sends_deferred_definitions_and_replays_its_blocks_unchanged() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(
        Turn::text("Found it.")
            .with_tool_search("echo text", &["mcp__fx__echo"])
            .with_tool_call("toolu_1", "mcp__fx__echo", json!({"text": "hi"})),
    );
    mock.push_turn(Turn::text("Done."));
    let tools = deferred_list(
        DeferMode::ToolSearch,
        vec![spec("read_file", "Read a file")],
    );
    let (conversation, executor) = run(&mock, ModelProvider::Anthropic, tools).await;
    assert_eq!(*executor.calls.lock().unwrap(), ["mcp__fx__echo"]);

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_stable(&requests);
    let tools = requests[0].tools();
    assert_eq!(
        tools[0],
        json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"})
    );
    assert_eq!(tools[1]["name"], "read_file");
    assert!(tools[1].get("defer_loading").is_none());
    assert_eq!(tools[2]["name"], "mcp__fx__echo");
    assert_eq!(tools[2]["defer_loading"], true);
    assert_eq!(tools[3]["name"], "mcp__fx__add");
    assert_eq!(tools[3]["defer_loading"], true);

    // The server's blocks are kept in the conversation and sent back as they came.
    let blocks = conversation
        .iter()
        .find_map(|m| match m {
            Message::ProviderBlocks { provider, blocks } if provider == "anthropic" => {
                Some(blocks.clone())
            }
            _ => None,
        })
        .expect("the server tool search blocks are kept");
    let sent = &requests[1].body["messages"][1];
    assert_eq!(sent["role"], "assistant");
    let content = sent["content"].as_array().unwrap();
    assert_eq!(content[0], blocks[0]);
    assert_eq!(
        content[0],
        json!({"type": "server_tool_use", "id": "srvtoolu_mock_1",
            "name": "tool_search_tool_bm25", "input": {"query": "echo text"}})
    );
    assert_eq!(content[1], blocks[1]);
    assert_eq!(content[1]["type"], "tool_search_tool_result");
    assert_eq!(
        content[1]["content"]["tool_references"][0]["tool_name"],
        "mcp__fx__echo"
    );
    assert_eq!(content[2], json!({"type": "text", "text": "Found it."}));
    assert_eq!(content[3]["type"], "tool_use");
    // No result is ever sent for the server's own call; ours answers the tool_use.
    let results = requests[1].body["messages"][2]["content"]
        .as_array()
        .unwrap();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["tool_use_id"], "toolu_1");
}

#[tokio::test]
async fn openai_responses_tool_search_sends_deferred_functions_and_replays_its_items() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(
        Turn::default()
            .with_tool_search("echo text", &["mcp__fx__echo"])
            .with_tool_call("call_1", "mcp__fx__echo", json!({"text": "hi"})),
    );
    mock.push_turn(Turn::text("Done."));
    let tools = deferred_list(
        DeferMode::ToolSearch,
        vec![spec("read_file", "Read a file")],
    );
    let (conversation, _) = run(&mock, ModelProvider::OpenAiResponses, tools).await;
    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_stable(&requests);
    let tools = requests[0].tools();
    assert_eq!(tools[0], json!({"type": "tool_search"}));
    assert_eq!(tools[1]["name"], "read_file");
    assert_eq!(tools[2]["name"], "mcp__fx__echo");
    assert_eq!(tools[2]["type"], "function");
    assert_eq!(tools[2]["defer_loading"], true);

    let items = conversation
        .iter()
        .find_map(|m| match m {
            Message::ProviderBlocks { provider, blocks } if provider == "openai-responses" => {
                Some(blocks.clone())
            }
            _ => None,
        })
        .expect("the hosted search items are kept");
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["type"], "tool_search_call");
    assert_eq!(items[1]["type"], "tool_search_output");
    assert_eq!(items[1]["tools"][0]["name"], "mcp__fx__echo");
    // Replayed in the next request's input, unchanged, before the function call.
    let input = requests[1].body["input"].as_array().unwrap();
    let at = input
        .iter()
        .position(|item| item == &items[0])
        .expect("tool_search_call replayed");
    assert_eq!(input[at + 1], items[1]);
    assert_eq!(input[at + 2]["type"], "function_call");
    assert_eq!(input[at + 3]["type"], "function_call_output");
}

#[tokio::test]
async fn reference_mode_answers_the_search_with_tool_references_and_never_changes_the_tools() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "toolu_s",
        "search_tools",
        json!({"query": "echo"}),
    ));
    mock.push_turn(Turn::tool_call(
        "toolu_e",
        "mcp__fx__echo",
        json!({"text": "hi"}),
    ));
    mock.push_turn(Turn::text("Done."));
    let tools = deferred_list(
        DeferMode::Reference,
        vec![
            spec("read_file", "Read a file"),
            spec("search_tools", "Searches deferred tools"),
        ],
    );
    let (_, executor) = run(&mock, ModelProvider::Anthropic, tools).await;
    assert_eq!(
        *executor.calls.lock().unwrap(),
        ["search_tools", "mcp__fx__echo"]
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    assert_stable(&requests);
    let names = requests[0].tool_names();
    assert_eq!(
        names,
        ["read_file", "search_tools", "mcp__fx__echo", "mcp__fx__add"]
    );
    let tools = requests[0].tools();
    assert!(tools[1].get("defer_loading").is_none());
    assert_eq!(tools[2]["defer_loading"], true);
    // No tool search tool of the provider's in this mode: warden's search answers.
    assert!(tools.iter().all(|tool| tool.get("type").is_none()));
    let result = &requests[1].body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_s");
    assert_eq!(
        result["content"],
        json!([{"type": "tool_reference", "tool_name": "mcp__fx__echo"}])
    );
    // The references stay in the history of later requests.
    assert_eq!(
        requests[2].body["messages"][2]["content"][0]["content"],
        result["content"]
    );
}

#[tokio::test]
async fn chat_completions_and_normal_mode_send_no_deferred_definitions() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Done."));
    let tools = deferred_list(DeferMode::Normal, vec![spec("read_file", "Read a file")]);
    run(&mock, ModelProvider::OpenAi, tools).await;
    let mock_anthropic = MockModel::start().await.unwrap();
    mock_anthropic.push_turn(Turn::text("Done."));
    let tools = deferred_list(DeferMode::Normal, vec![spec("read_file", "Read a file")]);
    run(&mock_anthropic, ModelProvider::Anthropic, tools).await;
    for request in mock
        .requests()
        .iter()
        .chain(mock_anthropic.requests().iter())
    {
        assert_eq!(request.tool_names(), ["read_file"]);
        assert!(!request.body.to_string().contains("defer_loading"));
    }
}

/// The recording helpers read the Chat Completions shapes too.
#[test]
fn recorded_requests_name_their_tools_in_every_api_shape() {
    let chat = RecordedRequest {
        api: Some(warden_mock_model::Api::ChatCompletions),
        path: "/v1/chat/completions".into(),
        headers: Vec::new(),
        body: json!({"messages": [{"role": "system", "content": "S"}],
            "tools": [{"type": "function", "function": {"name": "a"}}]}),
    };
    assert_eq!(chat.tool_names(), ["a"]);
    assert_eq!(chat.system_prompt().as_deref(), Some("S"));
}
