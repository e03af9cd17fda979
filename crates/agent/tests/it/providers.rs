//! Each provider (Chat Completions, Responses, Anthropic Messages) against the mock model server: text, fragmented tool calls, usage, retries, broken streams, timeouts and the failures never retried.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_agent::{
    ApiKey, Message, ModelClient, ModelConfig, ModelDelta, ModelRequest, ModelResponse,
    NO_MODEL_MESSAGE, ProviderError, RetryPolicy, SelectError, ToolCall, ToolSpec, client_for,
    select_model,
};
use warden_agent::{DEFAULT_MAX_RETRY_AFTER, Timeouts};
use warden_config::{ModelProvider, ModelSettings, Secret};
use warden_mock_model::{Api, Cut, MockModel, ScriptedToolCall, Step, Turn};

const KEY: &str = "sk-test-0123456789";
const PROVIDERS: [ModelProvider; 3] = [
    ModelProvider::OpenAi,
    ModelProvider::OpenAiResponses,
    ModelProvider::Anthropic,
];

fn config(provider: ModelProvider, mock: &MockModel) -> ModelConfig {
    let mut config = ModelConfig::new(provider, "test-model", mock.base_url());
    config.api_key = ApiKey::Literal(Secret::new(KEY));
    config.retry = RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(50),
        max_retry_after: DEFAULT_MAX_RETRY_AFTER,
    };
    config
}

/// Timeouts short enough for a test to wait them out.
const SHORT: Timeouts = Timeouts {
    connect: Duration::from_secs(2),
    first_byte: Duration::from_millis(400),
    idle: Duration::from_millis(400),
};

/// [`config`] with [`SHORT`] timeouts.
fn impatient(provider: ModelProvider, mock: &MockModel) -> ModelConfig {
    let mut config = config(provider, mock);
    config.timeouts = SHORT;
    config
}

fn texts(deltas: &[ModelDelta]) -> String {
    deltas
        .iter()
        .filter_map(|d| match d {
            ModelDelta::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn retries(deltas: &[ModelDelta]) -> usize {
    deltas
        .iter()
        .filter(|d| matches!(d, ModelDelta::Retrying { .. }))
        .count()
}

const LONG_TEXT: &str = "A long answer that streams in many small fragments, so that half of its bytes hold some of the text and the rest is still to come when the stream breaks.";

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }]
}

async fn call(
    client: &Arc<dyn ModelClient>,
    messages: &[Message],
) -> (Result<ModelResponse, ProviderError>, Vec<ModelDelta>) {
    let deltas = Arc::new(Mutex::new(Vec::new()));
    let sink = deltas.clone();
    let on_delta = move |d: ModelDelta| sink.lock().unwrap().push(d);
    let tools = tools();
    let request = ModelRequest {
        system: "You are a test.",
        messages,
        tools: &tools,
    };
    let cancel = CancellationToken::new();
    let result = client.complete(request, &on_delta, &cancel).await;
    let deltas = deltas.lock().unwrap().clone();
    (result, deltas)
}

fn expected_api(provider: ModelProvider) -> Api {
    match provider {
        ModelProvider::OpenAi => Api::ChatCompletions,
        ModelProvider::OpenAiResponses => Api::Responses,
        ModelProvider::Anthropic => Api::Messages,
    }
}

#[tokio::test]
async fn text_streams_in_deltas_with_usage_and_the_request_carries_prompt_tools_and_key() {
    for provider in PROVIDERS {
        let mock = MockModel::start().await.unwrap();
        mock.push_turn(Turn::text("Hello there, general Kenobi").with_usage(12, 7));
        let client = client_for(config(provider, &mock)).unwrap();
        let (result, deltas) = call(&client, &[Message::user("hi")]).await;
        let response = result.unwrap();
        assert_eq!(response.text, "Hello there, general Kenobi", "{provider:?}");
        let texts: Vec<String> = deltas
            .iter()
            .filter_map(|d| match d {
                ModelDelta::Text { text } => Some(text.clone()),
                _ => None,
            })
            .collect();
        assert!(
            texts.len() > 1,
            "{provider:?}: streamed in pieces: {texts:?}"
        );
        assert_eq!(texts.concat(), response.text);
        assert_eq!(response.usage.input_tokens, 12, "{provider:?}");
        assert_eq!(response.usage.output_tokens, 7, "{provider:?}");
        assert!(response.tool_calls.is_empty());

        let requests = mock.requests();
        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        assert_eq!(request.api, Some(expected_api(provider)));
        assert_eq!(request.body["model"], "test-model");
        assert_eq!(request.body["stream"], true);
        let body = request.body.to_string();
        assert!(body.contains("You are a test."), "{provider:?}: {body}");
        assert!(body.contains("read_file"), "{provider:?}: {body}");
        match provider {
            ModelProvider::Anthropic => {
                assert_eq!(request.header("x-api-key"), Some(KEY));
                assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
                assert_eq!(request.body["system"], "You are a test.");
                assert_eq!(request.body["messages"][0]["content"][0]["text"], "hi");
                assert_eq!(request.body["tools"][0]["input_schema"]["type"], "object");
            }
            ModelProvider::OpenAi => {
                assert_eq!(
                    request.header("authorization"),
                    Some(format!("Bearer {KEY}").as_str())
                );
                assert_eq!(request.body["messages"][0]["role"], "system");
                assert_eq!(request.body["messages"][1]["content"], "hi");
                assert_eq!(request.body["tools"][0]["function"]["name"], "read_file");
            }
            ModelProvider::OpenAiResponses => {
                assert_eq!(
                    request.header("authorization"),
                    Some(format!("Bearer {KEY}").as_str())
                );
                assert_eq!(request.body["instructions"], "You are a test.");
                assert_eq!(request.body["input"][0]["content"][0]["text"], "hi");
                assert_eq!(request.body["tools"][0]["name"], "read_file");
            }
        }
    }
}

#[tokio::test]
async fn tool_calls_are_assembled_from_fragmented_arguments() {
    for provider in PROVIDERS {
        let mock = MockModel::start().await.unwrap();
        mock.set_fragment_size(3);
        let args_one = json!({"path": "src/main.rs", "limit": 5, "note": "ünïcode ✓"});
        let args_two = json!({"path": "README.md"});
        mock.push_turn(
            Turn::text("Let me look.")
                .with_tool_call("call_1", "read_file", args_one.clone())
                .with_tool_call("call_2", "read_file", args_two.clone())
                .with_usage(30, 20),
        );
        let client = client_for(config(provider, &mock)).unwrap();
        let (result, deltas) = call(&client, &[Message::user("look")]).await;
        let response = result.unwrap();
        assert_eq!(response.text, "Let me look.");
        assert_eq!(response.tool_calls.len(), 2, "{provider:?}");
        assert_eq!(response.tool_calls[0].id, "call_1");
        assert_eq!(response.tool_calls[0].name, "read_file");
        assert_eq!(response.tool_calls[0].parsed_arguments().unwrap(), args_one);
        assert_eq!(response.tool_calls[1].id, "call_2");
        assert_eq!(response.tool_calls[1].parsed_arguments().unwrap(), args_two);
        let started: Vec<&ModelDelta> = deltas
            .iter()
            .filter(|d| matches!(d, ModelDelta::ToolCallStarted { .. }))
            .collect();
        assert_eq!(started.len(), 2, "{provider:?}");
        assert_eq!(response.usage.total(), 50);
    }
}

#[tokio::test]
async fn tool_results_are_sent_back_in_each_wire_format() {
    for provider in PROVIDERS {
        let mock = MockModel::start().await.unwrap();
        mock.push_turn(Turn::text("done"));
        let client = client_for(config(provider, &mock)).unwrap();
        let conversation = vec![
            Message::user("read it"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_9".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a.txt"}"#.into(),
                }],
            },
            Message::ToolResult {
                call_id: "call_9".into(),
                name: "read_file".into(),
                text: "the secret of a.txt".into(),
                is_error: false,
                elided: false,
            },
        ];
        let (result, _) = call(&client, &conversation).await;
        assert_eq!(result.unwrap().text, "done");
        let body = &mock.requests()[0].body;
        match provider {
            ModelProvider::OpenAi => {
                let messages = body["messages"].as_array().unwrap();
                let tool = messages.last().unwrap();
                assert_eq!(tool["role"], "tool");
                assert_eq!(tool["tool_call_id"], "call_9");
                assert_eq!(tool["content"], "the secret of a.txt");
                assert_eq!(
                    messages[2]["tool_calls"][0]["function"]["arguments"],
                    r#"{"path":"a.txt"}"#
                );
            }
            ModelProvider::OpenAiResponses => {
                let input = body["input"].as_array().unwrap();
                assert_eq!(input[1]["type"], "function_call");
                assert_eq!(input[1]["call_id"], "call_9");
                assert_eq!(input[2]["type"], "function_call_output");
                assert_eq!(input[2]["output"], "the secret of a.txt");
            }
            ModelProvider::Anthropic => {
                let messages = body["messages"].as_array().unwrap();
                assert_eq!(messages.len(), 3);
                assert_eq!(messages[1]["content"][0]["type"], "tool_use");
                assert_eq!(messages[1]["content"][0]["input"]["path"], "a.txt");
                assert_eq!(messages[2]["role"], "user");
                assert_eq!(messages[2]["content"][0]["type"], "tool_result");
                assert_eq!(messages[2]["content"][0]["tool_use_id"], "call_9");
                assert_eq!(messages[2]["content"][0]["content"], "the secret of a.txt");
            }
        }
    }
}

#[tokio::test]
async fn a_429_and_a_500_are_retried_then_the_answer_arrives() {
    for provider in PROVIDERS {
        let mock = MockModel::start().await.unwrap();
        mock.push_failure(429, Some(0));
        mock.push_failure(500, None);
        mock.push_turn(Turn::text("third time lucky"));
        let client = client_for(config(provider, &mock)).unwrap();
        let (result, deltas) = call(&client, &[Message::user("hi")]).await;
        assert_eq!(result.unwrap().text, "third time lucky", "{provider:?}");
        assert_eq!(mock.requests().len(), 3);
        let retries: Vec<String> = deltas
            .iter()
            .filter_map(|d| match d {
                ModelDelta::Retrying { reason, .. } => Some(reason.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            retries,
            vec!["HTTP 429".to_string(), "HTTP 500".to_string()]
        );
    }
}

#[tokio::test]
async fn retry_after_is_honoured_up_to_the_cap() {
    let policy = RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(100),
        max_delay: Duration::from_secs(10),
        max_retry_after: Duration::from_secs(120),
    };
    assert_eq!(
        policy.delay(1, Some(Duration::from_secs(3))),
        Duration::from_secs(3)
    );
    assert_eq!(
        policy.delay(1, Some(Duration::from_secs(99))),
        Duration::from_secs(10)
    );
    for attempt in 1..=5 {
        let delay = policy.delay(attempt, None);
        let full = Duration::from_millis(100 * (1 << (attempt - 1))).min(Duration::from_secs(10));
        assert!(
            delay >= full / 2 && delay <= full,
            "attempt {attempt}: {delay:?}"
        );
    }
}

#[tokio::test]
async fn no_retry_once_a_tool_call_was_streamed() {
    for provider in PROVIDERS {
        let mock = MockModel::start().await.unwrap();
        mock.push_turn(
            Turn::tool_call(
                "call_1",
                "read_file",
                json!({"path": "a-long-path/file.txt"}),
            )
            .with_cut(Cut::AfterToolCallFragment),
        );
        mock.push_turn(Turn::text("must not be fetched"));
        let client = client_for(config(provider, &mock)).unwrap();
        let (result, deltas) = call(&client, &[Message::user("hi")]).await;
        assert!(
            matches!(result, Err(ProviderError::StreamInterrupted(_))),
            "{provider:?}: {result:?}"
        );
        assert!(
            deltas
                .iter()
                .any(|d| matches!(d, ModelDelta::ToolCallStarted { .. }))
        );
        assert_eq!(mock.requests().len(), 1, "{provider:?}");
        assert_eq!(mock.remaining(), 1);
    }
}

#[tokio::test]
async fn no_retry_once_text_was_streamed() {
    for provider in PROVIDERS {
        let mock = MockModel::start().await.unwrap();
        mock.push_turn(Turn::text("partial answer").with_cut(Cut::AfterText));
        mock.push_turn(Turn::text("must not be fetched"));
        let client = client_for(config(provider, &mock)).unwrap();
        let (result, _) = call(&client, &[Message::user("hi")]).await;
        assert!(
            matches!(result, Err(ProviderError::StreamInterrupted(_))),
            "{provider:?}: {result:?}"
        );
        assert_eq!(mock.requests().len(), 1);
    }
}

#[tokio::test]
async fn a_stream_dropped_before_any_content_is_retried() {
    for provider in PROVIDERS {
        let mock = MockModel::start().await.unwrap();
        mock.push_turn(Turn::text("lost").with_cut(Cut::BeforeContent));
        mock.push_turn(Turn::text("recovered"));
        let client = client_for(config(provider, &mock)).unwrap();
        let (result, deltas) = call(&client, &[Message::user("hi")]).await;
        assert_eq!(result.unwrap().text, "recovered", "{provider:?}");
        assert_eq!(mock.requests().len(), 2);
        let texts: String = deltas
            .iter()
            .filter_map(|d| match d {
                ModelDelta::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, "recovered");
    }
}

#[tokio::test]
async fn an_error_event_before_any_content_is_retried() {
    for provider in PROVIDERS {
        let mock = MockModel::start().await.unwrap();
        mock.push_step(Step::StreamError {
            message: "Overloaded".into(),
        });
        mock.push_turn(Turn::text("after the overload"));
        let client = client_for(config(provider, &mock)).unwrap();
        let (result, deltas) = call(&client, &[Message::user("hi")]).await;
        assert_eq!(result.unwrap().text, "after the overload", "{provider:?}");
        assert_eq!(mock.requests().len(), 2);
        assert!(deltas.iter().any(
            |d| matches!(d, ModelDelta::Retrying { reason, .. } if reason.contains("Overloaded"))
        ));
    }
}

#[tokio::test]
async fn client_errors_are_not_retried_and_retries_run_out() {
    let mock = MockModel::start().await.unwrap();
    mock.push_failure(400, None);
    let client = client_for(config(ModelProvider::Anthropic, &mock)).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    match result {
        Err(ProviderError::Http {
            status, message, ..
        }) => {
            assert_eq!(status, 400);
            assert_eq!(message, "scripted failure");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(mock.requests().len(), 1);

    let mock = MockModel::start().await.unwrap();
    for _ in 0..4 {
        mock.push_failure(503, None);
    }
    let client = client_for(config(ModelProvider::OpenAi, &mock)).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    assert!(
        matches!(result, Err(ProviderError::Http { status: 503, .. })),
        "{result:?}"
    );
    assert_eq!(mock.requests().len(), 4, "one attempt and three retries");
}

#[tokio::test]
async fn a_connection_refused_is_retried_then_reported() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut config = ModelConfig::new(
        ModelProvider::OpenAi,
        "m",
        format!("http://127.0.0.1:{port}/v1"),
    );
    config.retry = RetryPolicy {
        max_retries: 2,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_retry_after: DEFAULT_MAX_RETRY_AFTER,
    };
    let client = client_for(config).unwrap();
    let (result, deltas) = call(&client, &[Message::user("hi")]).await;
    assert!(
        matches!(result, Err(ProviderError::Connection(_))),
        "{result:?}"
    );
    let retries = deltas
        .iter()
        .filter(|d| matches!(d, ModelDelta::Retrying { .. }))
        .count();
    assert_eq!(retries, 2);
}

#[tokio::test]
async fn the_api_key_is_read_from_its_variable_when_the_request_is_made() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("x"));
    let mut config = config(ModelProvider::OpenAi, &mock);
    config.api_key = ApiKey::Env("WARDEN_TEST_KEY_THAT_IS_NEVER_SET_4711".into());
    let client = client_for(config).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    assert_eq!(
        result.unwrap_err(),
        ProviderError::MissingApiKey {
            env: "WARDEN_TEST_KEY_THAT_IS_NEVER_SET_4711".into()
        }
    );
    assert!(
        mock.requests().is_empty(),
        "nothing is sent without the key"
    );

    // The variable is looked up at request time: PATH is always set, so the request goes out.
    let mut config = ModelConfig::new(ModelProvider::OpenAi, "m", mock.base_url());
    config.api_key = ApiKey::Env("PATH".into());
    let client = client_for(config).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    assert_eq!(result.unwrap().text, "x");
    let path = std::env::var("PATH").unwrap();
    assert_eq!(
        mock.requests()[0].header("authorization"),
        Some(format!("Bearer {path}").as_str())
    );
}

#[test]
fn debug_output_never_shows_the_key() {
    let mut config = ModelConfig::new(ModelProvider::Anthropic, "m", "http://127.0.0.1:1/v1");
    config.api_key = ApiKey::Literal(Secret::new(KEY));
    let shown = format!("{config:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");
}

#[test]
fn model_selection_defaults_and_the_no_model_message() {
    let settings = ModelSettings::default();
    let none = |_: &str| None;
    let error = select_model(&settings, None, None, &none).unwrap_err();
    assert_eq!(error, SelectError::NoModel);
    let message = error.to_string();
    assert_eq!(message, NO_MODEL_MESSAGE);
    assert!(!message.contains('\n'));
    assert!(message.contains("OPENAI_API_KEY") && message.contains("ANTHROPIC_API_KEY"));
    assert!(message.contains("base_url"));

    let openai = |name: &str| (name == "OPENAI_API_KEY").then(|| "k".to_string());
    let chosen = select_model(&settings, None, None, &openai).unwrap();
    assert_eq!(chosen.provider, ModelProvider::OpenAiResponses);
    assert_eq!(chosen.api_key, ApiKey::Env("OPENAI_API_KEY".into()));
    assert_eq!(chosen.base_url, "https://api.openai.com/v1");

    let both = |_: &str| Some("k".to_string());
    let chosen = select_model(&settings, None, None, &both).unwrap();
    assert_eq!(chosen.provider, ModelProvider::Anthropic);
    assert_eq!(chosen.base_url, "https://api.anthropic.com/v1");

    let parsed = warden_config::parse_str(
        "schema_version = 1\nmodel = \"local\"\n[models.local]\nprovider = \"openai\"\nid = \"qwen3:8b\"\nbase_url = \"http://127.0.0.1:11434/v1/\"\ncontext_window = 32768\n",
        std::path::Path::new("/c.toml"),
        warden_config::Scope::User,
    )
    .unwrap();
    let chosen = select_model(&parsed.model_settings, None, None, &none).unwrap();
    assert_eq!(chosen.id, "qwen3:8b");
    assert_eq!(chosen.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(chosen.api_key, ApiKey::None, "a local server needs no key");
    assert_eq!(chosen.context_window, 32768);
    let unknown = select_model(&parsed.model_settings, Some("gpt"), None, &none).unwrap_err();
    assert!(
        unknown.to_string().contains("configured models: local"),
        "{unknown}"
    );
}

#[tokio::test]
async fn an_unfinished_scripted_tool_call_with_broken_json_still_arrives_verbatim() {
    let mock = MockModel::start().await.unwrap();
    let mut turn = Turn::default();
    turn.tool_calls.push(ScriptedToolCall {
        id: "c".into(),
        name: "read_file".into(),
        arguments: "{\"path\": ".into(),
    });
    mock.push_turn(turn);
    let client = client_for(config(ModelProvider::OpenAi, &mock)).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    let response = result.unwrap();
    assert_eq!(response.tool_calls[0].arguments, "{\"path\": ");
    assert!(response.tool_calls[0].parsed_arguments().is_err());
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_and_is_retried_once_only() {
    for provider in PROVIDERS {
        let mock = MockModel::start().await.unwrap();
        mock.push_step(Step::HangBeforeHeaders);
        mock.push_step(Step::HangBeforeHeaders);
        mock.push_turn(Turn::text("must not be fetched"));
        let client = client_for(impatient(provider, &mock)).unwrap();
        let started = Instant::now();
        let (result, deltas) = call(&client, &[Message::user("hi")]).await;
        assert_eq!(
            result,
            Err(ProviderError::NoAnswer {
                after: SHORT.first_byte
            }),
            "{provider:?}"
        );
        let message = result.unwrap_err().to_string();
        assert!(message.contains("0.4 s"), "{message}");
        assert_eq!(mock.requests().len(), 2, "{provider:?}: one retry only");
        assert_eq!(mock.remaining(), 1);
        assert_eq!(retries(&deltas), 1);
        assert!(started.elapsed() < Duration::from_secs(10), "{provider:?}");
    }
}

#[tokio::test]
async fn a_server_that_hangs_once_is_retried_and_the_answer_arrives() {
    let mock = MockModel::start().await.unwrap();
    mock.push_step(Step::HangBeforeHeaders);
    mock.push_turn(Turn::text("second time"));
    let client = client_for(impatient(ModelProvider::Anthropic, &mock)).unwrap();
    let (result, deltas) = call(&client, &[Message::user("hi")]).await;
    assert_eq!(result.unwrap().text, "second time");
    assert!(deltas.iter().any(
        |d| matches!(d, ModelDelta::Retrying { reason, .. } if reason.contains("first-byte timeout"))
    ));
}

#[tokio::test]
async fn a_stream_that_stalls_mid_answer_fails_on_the_idle_timeout_without_retry() {
    for provider in PROVIDERS {
        let mock = MockModel::start().await.unwrap();
        mock.push_turn(Turn::text(LONG_TEXT).with_cut(Cut::StallAfterText));
        mock.push_turn(Turn::text("must not be fetched"));
        let client = client_for(impatient(provider, &mock)).unwrap();
        let started = Instant::now();
        let (result, deltas) = call(&client, &[Message::user("hi")]).await;
        assert_eq!(
            result,
            Err(ProviderError::Stalled {
                after: SHORT.idle,
                after_output: true
            }),
            "{provider:?}"
        );
        assert_eq!(texts(&deltas), LONG_TEXT, "{provider:?}");
        assert_eq!(mock.requests().len(), 1, "{provider:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

#[tokio::test]
async fn a_stream_that_stalls_before_any_content_is_retried_once() {
    for provider in PROVIDERS {
        let mock = MockModel::start().await.unwrap();
        mock.push_turn(Turn::text("lost").with_cut(Cut::Hang));
        mock.push_turn(Turn::text("recovered"));
        let client = client_for(impatient(provider, &mock)).unwrap();
        let (result, _) = call(&client, &[Message::user("hi")]).await;
        assert_eq!(result.unwrap().text, "recovered", "{provider:?}");

        let mock = MockModel::start().await.unwrap();
        mock.push_turn(Turn::text("lost").with_cut(Cut::Hang));
        mock.push_turn(Turn::text("lost again").with_cut(Cut::Hang));
        mock.push_turn(Turn::text("must not be fetched"));
        let client = client_for(impatient(provider, &mock)).unwrap();
        let (result, deltas) = call(&client, &[Message::user("hi")]).await;
        assert_eq!(
            result,
            Err(ProviderError::Stalled {
                after: SHORT.idle,
                after_output: false
            }),
            "{provider:?}"
        );
        assert_eq!(texts(&deltas), "");
        assert_eq!(mock.requests().len(), 2, "{provider:?}");
    }
}

#[tokio::test]
async fn a_truncated_body_is_not_waited_on_forever_nor_retried_after_output() {
    for provider in PROVIDERS {
        // The connection stays open after half the promised bytes: the idle timeout ends it.
        let mock = MockModel::start().await.unwrap();
        mock.push_step(Step::Truncated {
            turn: Turn::text(LONG_TEXT),
            hang: true,
        });
        mock.push_turn(Turn::text("must not be fetched"));
        let client = client_for(impatient(provider, &mock)).unwrap();
        let (result, deltas) = call(&client, &[Message::user("hi")]).await;
        assert_eq!(
            result,
            Err(ProviderError::Stalled {
                after: SHORT.idle,
                after_output: true
            }),
            "{provider:?}"
        );
        let received = texts(&deltas);
        assert!(
            !received.is_empty() && LONG_TEXT.starts_with(&received) && received != LONG_TEXT,
            "{provider:?}: {received:?}"
        );
        assert_eq!(mock.requests().len(), 1, "{provider:?}");

        // The connection is dropped after half the promised bytes: reported at once.
        let mock = MockModel::start().await.unwrap();
        mock.push_step(Step::Truncated {
            turn: Turn::text(LONG_TEXT),
            hang: false,
        });
        mock.push_turn(Turn::text("must not be fetched"));
        let client = client_for(impatient(provider, &mock)).unwrap();
        let (result, _) = call(&client, &[Message::user("hi")]).await;
        assert!(
            matches!(result, Err(ProviderError::StreamInterrupted(_))),
            "{provider:?}: {result:?}"
        );
        assert_eq!(mock.requests().len(), 1, "{provider:?}");
    }
}

#[tokio::test]
async fn a_retry_after_beyond_the_cap_fails_at_once_saying_how_long() {
    for status in [429, 503] {
        let mock = MockModel::start().await.unwrap();
        mock.push_failure(status, Some(3600));
        mock.push_turn(Turn::text("must not be fetched"));
        let mut config = config(ModelProvider::OpenAiResponses, &mock);
        config.retry = RetryPolicy::default();
        let client = client_for(config).unwrap();
        let started = Instant::now();
        let (result, deltas) = call(&client, &[Message::user("hi")]).await;
        assert!(started.elapsed() < Duration::from_secs(5), "no waiting");
        let error = result.unwrap_err();
        assert_eq!(
            error,
            ProviderError::RetryAfterTooLong {
                status,
                retry_after_secs: 3600,
                max_wait: DEFAULT_MAX_RETRY_AFTER,
                message: "scripted failure".into(),
            }
        );
        let message = error.to_string();
        assert!(
            message.contains("asked to wait 3600 s") && message.contains("(60 s)"),
            "{message}"
        );
        assert_eq!(mock.requests().len(), 1);
        assert_eq!(retries(&deltas), 0);
    }
    // Up to the cap it is honoured, as before.
    let mock = MockModel::start().await.unwrap();
    mock.push_failure(429, Some(0));
    mock.push_turn(Turn::text("after waiting"));
    let client = client_for(config(ModelProvider::OpenAi, &mock)).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    assert_eq!(result.unwrap().text, "after waiting");
}

#[tokio::test]
async fn a_200_that_is_not_an_event_stream_is_reported_and_not_retried() {
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "text/html",
            "<html><body>Proxy says hello</body></html>",
            &["not an event stream", "(text/html)", "Proxy says hello"],
        ),
        (
            "application/json",
            r#"{"id": "c1", "object": "chat.completion", "choices": []}"#,
            &[
                "JSON (application/json) where an event stream was asked for",
                "\"stream\": true",
            ],
        ),
        (
            "application/json",
            r#"{"error": {"message": "streaming is not supported here"}}"#,
            &[
                "where an event stream was asked for",
                "streaming is not supported here",
            ],
        ),
        (
            "application/json",
            "{truncated json",
            &["neither an event stream nor valid JSON", "{truncated json"],
        ),
        (
            "text/event-stream",
            "data: {this is not json}\n\n",
            &["not JSON"],
        ),
    ];
    for provider in PROVIDERS {
        for (content_type, body, expected) in cases {
            let mock = MockModel::start().await.unwrap();
            mock.push_step(Step::raw(content_type, body));
            mock.push_turn(Turn::text("must not be fetched"));
            let client = client_for(config(provider, &mock)).unwrap();
            let (result, deltas) = call(&client, &[Message::user("hi")]).await;
            let Err(error @ ProviderError::Protocol(_)) = result else {
                panic!("{provider:?} {content_type} {body}: {result:?}");
            };
            let message = error.to_string();
            for part in expected {
                assert!(message.contains(part), "{provider:?}: {message}");
            }
            assert_eq!(mock.requests().len(), 1, "{provider:?} {body}: not retried");
            assert_eq!(retries(&deltas), 0);
        }
    }
}

#[tokio::test]
async fn a_long_json_body_is_not_read_to_the_end() {
    let mock = MockModel::start().await.unwrap();
    let long = format!(r#"{{"padding": "{}"}}"#, "x".repeat(200 * 1024));
    mock.push_step(Step::raw("application/json", long));
    let client = client_for(config(ModelProvider::OpenAi, &mock)).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("what looks like JSON (application/json) where an event stream was asked for (too long to read to the end)"),
        "{message}"
    );
    assert!(message.len() < 600, "the body is quoted briefly: {message}");
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn client_errors_other_than_408_and_429_are_never_retried() {
    for status in [400, 401, 403, 404, 413, 422] {
        let mock = MockModel::start().await.unwrap();
        mock.push_failure(status, None);
        mock.push_turn(Turn::text("must not be fetched"));
        let client = client_for(config(ModelProvider::OpenAi, &mock)).unwrap();
        let (result, _) = call(&client, &[Message::user("hi")]).await;
        assert!(
            matches!(result, Err(ProviderError::Http { status: s, .. }) if s == status),
            "{status}: {result:?}"
        );
        assert_eq!(mock.requests().len(), 1, "{status}");
    }
    let mock = MockModel::start().await.unwrap();
    mock.push_failure(408, None);
    mock.push_turn(Turn::text("after the request timeout"));
    let client = client_for(config(ModelProvider::OpenAi, &mock)).unwrap();
    let (result, deltas) = call(&client, &[Message::user("hi")]).await;
    assert_eq!(result.unwrap().text, "after the request timeout");
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(retries(&deltas), 1);
}

#[test]
fn the_default_timeouts_and_retry_after_cap() {
    let config = ModelConfig::new(ModelProvider::OpenAi, "m", "http://127.0.0.1:1/v1");
    assert_eq!(config.timeouts.connect, Duration::from_secs(10));
    assert_eq!(config.timeouts.first_byte, Duration::from_secs(300));
    assert_eq!(config.timeouts.idle, Duration::from_secs(300));
    assert_eq!(config.retry.max_retry_after, Duration::from_secs(60));
    let settings = ModelSettings::default();
    let openai = |name: &str| (name == "OPENAI_API_KEY").then(|| "k".to_string());
    let chosen = select_model(&settings, None, None, &openai).unwrap();
    assert_eq!(chosen.timeouts, Timeouts::default());
}

fn thoughts(deltas: &[ModelDelta]) -> String {
    deltas
        .iter()
        .filter_map(|d| match d {
            ModelDelta::Thinking { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn anthropic_thinking_streams_as_thoughts_and_its_block_goes_back_signed_first() {
    const THOUGHT: &str = "The file first, then the answer; nothing else is needed here.";
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(
        Turn::text("Reading it.")
            .with_thinking(THOUGHT)
            .with_tool_call("call_1", "read_file", json!({"path": "a.txt"})),
    );
    mock.push_turn(Turn::text("Done."));
    let mut config = config(ModelProvider::Anthropic, &mock);
    config.thinking_budget = Some(2048);
    let client = client_for(config).unwrap();
    let (result, deltas) = call(&client, &[Message::user("read a.txt")]).await;
    let response = result.unwrap();
    assert_eq!(thoughts(&deltas), THOUGHT);
    // Thoughts are not the answer.
    assert_eq!(response.text, "Reading it.");
    assert_eq!(texts(&deltas), "Reading it.");
    let (provider, blocks) = response.provider_blocks.clone().unwrap();
    assert_eq!(provider, "anthropic");
    assert_eq!(
        blocks,
        [json!({"type": "thinking", "thinking": THOUGHT,
            "signature": warden_mock_model::thinking_signature(THOUGHT)})]
    );
    let first = &mock.requests()[0].body;
    assert_eq!(
        first["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(first["max_tokens"], 8192 + 2048);

    // The next request: the thinking block first in the assistant turn, then text and tool use.
    let conversation = [
        Message::user("read a.txt"),
        Message::ProviderBlocks {
            provider,
            blocks: blocks.clone(),
        },
        Message::Assistant {
            text: response.text.clone(),
            tool_calls: response.tool_calls.clone(),
        },
        Message::ToolResult {
            call_id: "call_1".into(),
            name: "read_file".into(),
            text: "contents".into(),
            is_error: false,
            elided: false,
        },
    ];
    let (result, _) = call(&client, &conversation).await;
    result.unwrap();
    let second = &mock.requests()[1].body;
    let assistant = &second["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"][0], blocks[0]);
    assert_eq!(assistant["content"][1]["type"], "text");
    assert_eq!(assistant["content"][2]["type"], "tool_use");
}

#[tokio::test]
async fn reasoning_content_of_chat_completions_is_a_thought_and_never_sent_back() {
    const REASONING: &str = "Is a listing needed? It is.";
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("Listed.").with_thinking(REASONING));
    mock.push_turn(Turn::text("Again."));
    let client = client_for(config(ModelProvider::OpenAi, &mock)).unwrap();
    let (result, deltas) = call(&client, &[Message::user("list")]).await;
    let response = result.unwrap();
    assert_eq!(thoughts(&deltas), REASONING);
    assert_eq!(response.text, "Listed.");
    assert!(response.provider_blocks.is_none());
    let conversation = [
        Message::user("list"),
        Message::Assistant {
            text: response.text,
            tool_calls: Vec::new(),
        },
        Message::user("again"),
    ];
    call(&client, &conversation).await.0.unwrap();
    assert!(!mock.requests()[1].body.to_string().contains(REASONING));
}

#[tokio::test]
async fn a_404_names_the_url_tried_and_what_to_check() {
    let mock = MockModel::start().await.unwrap();
    mock.push_failure(404, None);
    let client = client_for(config(ModelProvider::OpenAi, &mock)).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    let error = result.unwrap_err().to_string();
    assert!(
        error.contains(&format!("{}/chat/completions", mock.base_url())),
        "{error}"
    );
    assert!(error.contains("base_url"), "{error}");
}

#[tokio::test]
async fn a_refused_connection_is_one_line_naming_the_url_with_a_hint() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = ModelConfig::new(
        ModelProvider::OpenAi,
        "local",
        format!("http://127.0.0.1:{port}/v1"),
    );
    config.retry = RetryPolicy {
        max_retries: 1,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
        max_retry_after: DEFAULT_MAX_RETRY_AFTER,
    };
    let client = client_for(config).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    let error = result.unwrap_err().to_string();
    assert!(!error.contains('\n'), "{error}");
    assert!(
        error.contains(&format!("127.0.0.1:{port}/v1/chat/completions")),
        "{error}"
    );
    assert!(error.contains("is the model server running"), "{error}");
}

#[tokio::test]
async fn an_empty_200_is_named_as_a_prompt_over_the_server_s_context_and_not_retried() {
    let mock = MockModel::start().await.unwrap();
    mock.push_step(Step::raw("text/event-stream", ""));
    mock.push_turn(Turn::text("must not be fetched"));
    let client = client_for(config(ModelProvider::OpenAi, &mock)).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    let error = result.unwrap_err();
    assert!(
        matches!(error, ProviderError::EmptyAnswer { .. }),
        "{error}"
    );
    assert!(error.to_string().contains("context"), "{error}");
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn a_stream_of_keep_alive_comments_only_is_named_and_retried() {
    let mock = MockModel::start().await.unwrap();
    mock.push_step(Step::raw("text/event-stream", ": ping\n\n: ping\n\n"));
    mock.push_turn(Turn::text("after the keep-alives"));
    let client = client_for(config(ModelProvider::OpenAi, &mock)).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    assert_eq!(result.unwrap().text, "after the keep-alives");
    assert_eq!(mock.requests().len(), 2);
    // Alone, it is said for what it is.
    let mock = MockModel::start().await.unwrap();
    for _ in 0..4 {
        mock.push_step(Step::raw("text/event-stream", ": ping\n\n"));
    }
    let client = client_for(config(ModelProvider::OpenAi, &mock)).unwrap();
    let (result, _) = call(&client, &[Message::user("hi")]).await;
    let error = result.unwrap_err().to_string();
    assert!(error.contains("keep-alive comments only"), "{error}");
}

#[tokio::test]
async fn stream_false_reads_a_whole_answer_with_its_tool_call_and_extra_fields_reach_the_body() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(
        Turn::tool_call("call_1", "read_file", json!({"path": "a.txt"})).with_usage(30, 7),
    );
    let mut config = config(ModelProvider::OpenAi, &mock);
    config.stream = false;
    config.extra_body = json!({"options": {"num_ctx": 4096}, "model": "not-this-one"})
        .as_object()
        .unwrap()
        .clone();
    let client = client_for(config).unwrap();
    let (result, _) = call(&client, &[Message::user("read a.txt")]).await;
    let response = result.unwrap();
    assert_eq!(response.tool_calls.len(), 1, "{response:?}");
    assert_eq!(response.tool_calls[0].name, "read_file");
    assert_eq!(response.tool_calls[0].arguments, r#"{"path":"a.txt"}"#);
    assert!(response.usage.reported);
    assert_eq!(response.usage.input_tokens, 30);
    let body = &mock.requests()[0].body;
    assert_eq!(body["stream"], false);
    assert!(body.get("stream_options").is_none(), "{body}");
    assert_eq!(body["options"]["num_ctx"], 4096);
    assert_eq!(body["model"], "test-model", "warden's own fields win");
    assert_eq!(body["tool_choice"], "auto");
}
