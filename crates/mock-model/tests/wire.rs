//! The mock's non-streaming bodies, raw SSE shapes, failures, recording and script files, checked over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use warden_mock_model::{Api, MockModel, Script, Step, Turn};

fn http() -> reqwest::Client {
    warden_net::http_client().loopback().build().unwrap()
}

async fn post(mock: &MockModel, path: &str, body: Value) -> reqwest::Response {
    http()
        .post(format!("{}{path}", mock.base_url()))
        .header("x-api-key", "k")
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn non_streaming_bodies_have_each_api_shape() {
    let mock = MockModel::start().await.unwrap();
    let turn = Turn::text("hi").with_tool_call("c1", "echo", json!({"x": 1}));
    for _ in 0..3 {
        mock.push_turn(turn.clone());
    }
    let chat: Value = post(&mock, "/chat/completions", json!({"model": "m"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(chat["choices"][0]["message"]["content"], "hi");
    assert_eq!(
        chat["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"x":1}"#
    );
    assert_eq!(chat["choices"][0]["finish_reason"], "tool_calls");
    let responses: Value = post(&mock, "/responses", json!({"model": "m"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(responses["output"][0]["content"][0]["text"], "hi");
    assert_eq!(responses["output"][1]["type"], "function_call");
    assert_eq!(responses["usage"]["input_tokens"], 10);
    let messages: Value = post(&mock, "/messages", json!({"model": "m"}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(messages["content"][1]["input"]["x"], 1);
    assert_eq!(messages["stop_reason"], "tool_use");
    let requests = mock.requests();
    let apis: Vec<Option<Api>> = requests.iter().map(|r| r.api).collect();
    assert_eq!(
        apis,
        vec![
            Some(Api::ChatCompletions),
            Some(Api::Responses),
            Some(Api::Messages)
        ]
    );
    assert_eq!(requests[0].header("X-Api-Key"), Some("k"));
}

#[tokio::test]
async fn streams_use_the_exact_event_framing() {
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::text("hello"));
    mock.push_turn(Turn::text("hello"));
    let chat = post(
        &mock,
        "/chat/completions",
        json!({"stream": true, "stream_options": {"include_usage": true}}),
    )
    .await
    .text()
    .await
    .unwrap();
    assert!(chat.starts_with("data: {"));
    assert!(chat.ends_with("data: [DONE]\n\n"));
    assert!(chat.contains("\"prompt_tokens\":10"));
    let anthropic = post(&mock, "/messages", json!({"stream": true}))
        .await
        .text()
        .await
        .unwrap();
    let events: Vec<&str> = anthropic
        .lines()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(
        events,
        vec![
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
}

#[tokio::test]
async fn failures_carry_retry_after_and_an_empty_queue_is_a_500() {
    let mock = MockModel::start().await.unwrap();
    mock.push_failure(429, Some(7));
    let response = post(&mock, "/messages", json!({})).await;
    assert_eq!(response.status().as_u16(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    let empty = post(&mock, "/chat/completions", json!({})).await;
    assert_eq!(empty.status().as_u16(), 500);
    let unknown = post(&mock, "/embeddings", json!({})).await;
    assert_eq!(unknown.status().as_u16(), 404);
}

#[tokio::test]
async fn a_script_file_parses_and_requests_are_recorded_to_a_file() {
    let script: Script = serde_json::from_str(
        r#"{"steps": [
            {"kind": "fail", "status": 503},
            {"kind": "turn", "text": "hi", "tool_calls": [{"id": "c", "name": "echo", "arguments": "{}"}],
             "usage": {"input_tokens": 1, "output_tokens": 2}, "cut": "after_text"}
        ]}"#,
    )
    .unwrap();
    assert_eq!(script.steps.len(), 2);
    assert!(matches!(
        script.steps[0],
        Step::Fail {
            status: 503,
            retry_after_sec: None
        }
    ));
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("requests.jsonl");
    let mock = MockModel::start_on(0, Some(record.clone())).await.unwrap();
    mock.push_script(script);
    assert_eq!(
        post(&mock, "/responses", json!({"n": 1}))
            .await
            .status()
            .as_u16(),
        503
    );
    let lines = std::fs::read_to_string(&record).unwrap();
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["body"]["n"], 1);
    assert_eq!(first["api"], "responses");
    assert_eq!(mock.remaining(), 1);
}

#[tokio::test]
async fn failure_modes_hang_truncate_and_answer_raw_bodies() {
    let script: Script = serde_json::from_str(
        r#"{"steps": [
            {"kind": "hang_before_headers"},
            {"kind": "truncated", "turn": {"text": "a fairly long answer to cut in half"}, "hang": false},
            {"kind": "raw", "status": 200, "content_type": "text/html", "body": "<html>hi</html>"},
            {"kind": "turn", "text": "stalls", "cut": "stall_after_text"}
        ]}"#,
    )
    .unwrap();
    assert_eq!(script.steps[0], Step::HangBeforeHeaders);
    let mock = MockModel::start().await.unwrap();
    mock.push_script(script);
    let stream = json!({"model": "m", "stream": true});

    // No status line at all.
    let hung = tokio::time::timeout(
        std::time::Duration::from_millis(300),
        post(&mock, "/chat/completions", stream.clone()),
    )
    .await;
    assert!(hung.is_err(), "the answer never starts");

    // The promised length is never delivered.
    let truncated = post(&mock, "/chat/completions", stream.clone()).await;
    let promised: usize = truncated.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(promised > 0);
    assert!(truncated.bytes().await.is_err(), "the body ends early");

    let raw = post(&mock, "/messages", stream.clone()).await;
    assert_eq!(raw.status().as_u16(), 200);
    assert_eq!(raw.headers()["content-type"], "text/html");
    assert_eq!(raw.text().await.unwrap(), "<html>hi</html>");

    // The text arrives, then nothing: the stream stays open.
    let mut stalled = post(&mock, "/chat/completions", stream).await;
    let mut seen = String::new();
    let ended = tokio::time::timeout(std::time::Duration::from_millis(500), async {
        while let Some(chunk) = stalled.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await;
    assert!(ended.is_err(), "the stream stays open: {seen}");
    assert!(seen.contains("sta") && !seen.contains("[DONE]"), "{seen}");
    assert_eq!(mock.remaining(), 0);
}
