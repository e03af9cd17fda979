//! The SEP-2322 multi round-trip tools and prompt of the 2026-07-28 scenarios: each first answers
//! with an `InputRequiredResult`, then completes once the client retries with its input responses.
//!
//! `requestState` values are opaque handles to state kept here, so a tampered or invented one
//! is simply unknown and rejected.

use std::{
    collections::HashMap,
    hash::{BuildHasher, RandomState},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
};

use rmcp::{
    ErrorData as McpError,
    model::{
        CallToolResult, ClientCapabilities, GetPromptResult, InputRequest, InputRequests,
        InputRequiredResult, InputResponses,
    },
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Issued `requestState` handles and the state each stands for.
#[derive(Debug, Default, Clone)]
pub(super) struct RequestStates {
    issued: Arc<Mutex<HashMap<String, Value>>>,
    counter: Arc<AtomicU64>,
    hasher: Arc<RandomState>,
}

impl RequestStates {
    /// Keeps `state` and returns a fresh, unguessable handle for it.
    fn issue(&self, state: Value) -> String {
        let number = self.counter.fetch_add(1, Ordering::Relaxed);
        let nonce = self.hasher.hash_one(number);
        let handle = format!("rs-{number}-{nonce:016x}");
        self.issued
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(handle.clone(), state);
        handle
    }

    /// The state behind `handle`, if this server issued it.
    fn lookup(&self, handle: &str) -> Option<Value> {
        self.issued
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(handle)
            .cloned()
    }
}

/// What a multi round-trip handler answers.
pub(super) enum Round<T> {
    Complete(T),
    InputRequired(InputRequiredResult),
}

fn decode<T: DeserializeOwned>(value: Value) -> Result<T, McpError> {
    serde_json::from_value(value).map_err(|error| {
        McpError::internal_error(format!("fixture built a bad value: {error}"), None)
    })
}

fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {field: {"type": kind}},
                "required": [field]
            }
        }
    })
}

fn sample(text: &str, max_tokens: u32) -> Value {
    json!({
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens
        }
    })
}

fn list_roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

fn input_required<T>(
    requests: Vec<(&str, Value)>,
    state: Option<String>,
) -> Result<Round<T>, McpError> {
    let mut input_requests = InputRequests::new();
    for (key, request) in requests {
        input_requests.insert(key.to_owned(), decode::<InputRequest>(request)?);
    }
    Ok(Round::InputRequired(InputRequiredResult::new(
        Some(input_requests),
        state,
    )))
}

fn text_result(text: impl Into<String>) -> Result<Round<CallToolResult>, McpError> {
    Ok(Round::Complete(super::decode_complete(
        json!({"content": [{"type": "text", "text": text.into()}]}),
    )?))
}

/// `content.<field>` of an elicitation response, as text.
fn elicited_text(response: Option<&Value>, field: &str) -> String {
    response
        .and_then(|response| response.pointer(&format!("/content/{field}")))
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_owned()
}

/// The text a sampling response carries.
fn sampled_text(response: Option<&Value>) -> Option<String> {
    response
        .and_then(|response| response.pointer("/content/text"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn roots_count(response: Option<&Value>) -> usize {
    response
        .and_then(|response| response.get("roots"))
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// One `tools/call` of a multi round-trip tool.
pub(super) struct ToolRound<'a> {
    pub name: &'a str,
    pub responses: Option<&'a InputResponses>,
    pub request_state: Option<&'a str>,
    pub client_capabilities: Option<&'a ClientCapabilities>,
}

impl ToolRound<'_> {
    fn response(&self, key: &str) -> Option<&Value> {
        self.responses.and_then(|responses| responses.get(key))
    }

    /// The state behind the echoed `requestState`, if it is one this server issued.
    fn state(&self, states: &RequestStates) -> Option<Value> {
        self.request_state.and_then(|handle| states.lookup(handle))
    }
}

/// Rejects input responses that are not result objects (each answers one input request).
fn validate_responses(responses: Option<&InputResponses>) -> Result<(), McpError> {
    for (key, response) in responses.into_iter().flatten() {
        if !response.is_object() {
            return Err(McpError::invalid_params(
                format!("inputResponses.{key} must be a result object"),
                Some(json!({"key": key})),
            ));
        }
    }
    Ok(())
}

/// Answers one round of tool `round.name`, or `None` when it is not a multi round-trip tool.
pub(super) fn call_tool(
    round: &ToolRound<'_>,
    states: &RequestStates,
) -> Option<Result<Round<CallToolResult>, McpError>> {
    if !round.name.starts_with("test_input_required_result_") {
        return None;
    }
    if let Err(error) = validate_responses(round.responses) {
        return Some(Err(error));
    }
    let answer = match round.name {
        "test_input_required_result_elicitation" => match round.response("user_name") {
            Some(response) => {
                text_result(format!("Hello, {}!", elicited_text(Some(response), "name")))
            }
            None => input_required(
                vec![("user_name", elicit("What is your name?", "name", "string"))],
                None,
            ),
        },
        "test_input_required_result_sampling" => match round.response("sample_request") {
            Some(response) => text_result(format!(
                "Sampling result: {}",
                sampled_text(Some(response)).unwrap_or_else(|| "no response".into())
            )),
            None => input_required(
                vec![(
                    "sample_request",
                    sample("What is the capital of France?", 100),
                )],
                None,
            ),
        },
        "test_input_required_result_list_roots" => match round.response("roots_request") {
            Some(response) => text_result(format!("Found {} root(s)", roots_count(Some(response)))),
            None => input_required(vec![("roots_request", list_roots())], None),
        },
        "test_input_required_result_request_state" => {
            let confirmed = round
                .response("confirm")
                .and_then(|response| response.pointer("/content/ok"))
                .and_then(Value::as_bool)
                == Some(true);
            let state_ok = round
                .state(states)
                .is_some_and(|state| state["kind"] == "request-state");
            if confirmed && state_ok {
                text_result("state-ok: requestState validated")
            } else {
                input_required(
                    vec![("confirm", elicit("Please confirm", "ok", "boolean"))],
                    Some(states.issue(json!({"kind": "request-state"}))),
                )
            }
        }
        "test_input_required_result_multiple_inputs" => {
            let state_ok = round
                .state(states)
                .is_some_and(|state| state["kind"] == "multiple-inputs");
            let (name, greeting, roots) = (
                round.response("user_name"),
                round.response("greeting"),
                round.response("client_roots"),
            );
            if state_ok && name.is_some() && greeting.is_some() && roots.is_some() {
                text_result(format!(
                    "Name: {}; Greeting: {}; Roots: {}",
                    elicited_text(name, "name"),
                    sampled_text(greeting).unwrap_or_else(|| "Hello there!".into()),
                    roots_count(roots)
                ))
            } else {
                input_required(
                    vec![
                        ("user_name", elicit("What is your name?", "name", "string")),
                        ("greeting", sample("Generate a greeting", 50)),
                        ("client_roots", list_roots()),
                    ],
                    Some(states.issue(json!({"kind": "multiple-inputs"}))),
                )
            }
        }
        "test_input_required_result_multi_round" => {
            let state = round.state(states);
            let round_number = state.as_ref().and_then(|state| state["round"].as_u64());
            match (
                round_number,
                round.response("step1"),
                round.response("step2"),
            ) {
                (Some(1), Some(step1), _) => input_required(
                    vec![(
                        "step2",
                        elicit("Step 2: What is your favorite color?", "color", "string"),
                    )],
                    Some(
                        states
                            .issue(json!({"round": 2, "name": elicited_text(Some(step1), "name")})),
                    ),
                ),
                (Some(2), _, Some(step2)) => {
                    let name = state
                        .as_ref()
                        .and_then(|state| state["name"].as_str())
                        .unwrap_or("friend")
                        .to_owned();
                    text_result(format!(
                        "Multi-round complete for {name} who likes {}",
                        elicited_text(Some(step2), "color")
                    ))
                }
                _ => input_required(
                    vec![(
                        "step1",
                        elicit("Step 1: What is your name?", "name", "string"),
                    )],
                    Some(states.issue(json!({"round": 1}))),
                ),
            }
        }
        "test_input_required_result_tampered_state" => match round.request_state {
            Some(handle) => match states.lookup(handle) {
                None => Err(McpError::invalid_params(
                    "requestState integrity check failed",
                    None,
                )),
                Some(state)
                    if state["kind"] == "tamper-test" && round.response("confirm").is_some() =>
                {
                    text_result("integrity-ok: state verified")
                }
                Some(_) => tamper_test_request(states),
            },
            None => tamper_test_request(states),
        },
        "test_input_required_result_capabilities" => {
            let capabilities = round.client_capabilities;
            let mut requests = Vec::new();
            if capabilities.is_some_and(|caps| caps.elicitation.is_some()) {
                requests.push((
                    "elicit_input",
                    elicit("Elicitation input", "value", "string"),
                ));
            }
            if capabilities.is_some_and(|caps| caps.sampling.is_some()) {
                requests.push(("sample_input", sample("Sample request", 50)));
            }
            match round.responses.filter(|responses| !responses.is_empty()) {
                Some(responses) => text_result(format!(
                    "capabilities-ok: received {}",
                    responses.keys().cloned().collect::<Vec<_>>().join(",")
                )),
                None if requests.is_empty() => text_result("No supported capabilities declared"),
                None => input_required(
                    requests,
                    Some(states.issue(json!({"kind": "capabilities-test"}))),
                ),
            }
        }
        _ => return None,
    };
    Some(answer)
}

fn tamper_test_request(states: &RequestStates) -> Result<Round<CallToolResult>, McpError> {
    input_required(
        vec![("confirm", elicit("Please confirm", "ok", "boolean"))],
        Some(states.issue(json!({"kind": "tamper-test"}))),
    )
}

/// The 2025-11-25 tools that ask the client mid-call (`test_sampling`, `test_elicitation*`),
/// answered on a 2026-07-28 request the way that revision allows: an `InputRequiredResult` with
/// the same request, then the same text once the client retries with its answer. `None` for any
/// other tool. `message`/`prompt` are the call's arguments of those names.
pub(super) fn asking_tool(
    round: &ToolRound<'_>,
    prompt: &str,
    message: &str,
) -> Option<Result<Round<CallToolResult>, McpError>> {
    const KEY: &str = "answer";
    let answer = match round.name {
        "test_sampling" => match round.response(KEY) {
            Some(response) => text_result(format!(
                "LLM response: {}",
                sampled_text(Some(response)).unwrap_or_else(|| "No response".into())
            )),
            None => input_required(vec![(KEY, sample(prompt, 100))], None),
        },
        "test_elicitation"
        | "test_elicitation_sep1034_defaults"
        | "test_elicitation_sep1330_enums" => match round.response(KEY) {
            Some(response) => {
                let prefix = if round.name == "test_elicitation" {
                    "User response"
                } else {
                    "Elicitation completed"
                };
                let action = response["action"].as_str().unwrap_or("unknown");
                let content = response
                    .get("content")
                    .cloned()
                    .unwrap_or_else(|| json!({}));
                text_result(format!("{prefix}: action={action}, content={content}"))
            }
            None => match super::catalog::elicitation_params(round.name, message) {
                Some(params) => input_required(
                    vec![(
                        KEY,
                        json!({"method": "elicitation/create", "params": params}),
                    )],
                    None,
                ),
                None => Err(McpError::internal_error(
                    "no elicitation for this tool",
                    None,
                )),
            },
        },
        _ => return None,
    };
    Some(answer)
}

/// The multi round-trip tools on a 2025-11-25 session, where a server cannot answer with an
/// `InputRequiredResult`: each asks the same questions mid-call instead (several at once where
/// the 2026-07-28 tool asks them together) and answers with the same text. `None` for any other
/// tool.
pub(super) async fn ask_mid_call(
    name: &str,
    peer: &rmcp::Peer<rmcp::RoleServer>,
    client_capabilities: Option<&ClientCapabilities>,
) -> Option<Result<CallToolResult, McpError>> {
    let elicit_text = |message: &'static str, field: &'static str, kind: &'static str| async move {
        let params = decode::<rmcp::model::ElicitRequestParams>(
            elicit(message, field, kind)["params"].clone(),
        )?;
        let answer = peer.create_elicitation(params).await.map_err(|error| {
            McpError::internal_error(format!("elicitation failed: {error}"), None)
        })?;
        Ok::<Value, McpError>(serde_json::to_value(answer).unwrap_or_default())
    };
    let sample_text = |text: &'static str, max_tokens: u32| async move {
        let params = decode::<rmcp::model::CreateMessageRequestParams>(
            sample(text, max_tokens)["params"].clone(),
        )?;
        let answer = peer
            .create_message(params)
            .await
            .map_err(|error| McpError::internal_error(format!("sampling failed: {error}"), None))?;
        Ok::<Value, McpError>(serde_json::to_value(answer).unwrap_or_default())
    };
    let roots = || async move {
        let answer = peer.list_roots().await.map_err(|error| {
            McpError::internal_error(format!("roots/list failed: {error}"), None)
        })?;
        Ok::<Value, McpError>(serde_json::to_value(answer).unwrap_or_default())
    };
    let text = |text: String| {
        super::decode_complete::<CallToolResult>(
            json!({"content": [{"type": "text", "text": text}]}),
        )
    };
    let answer = match name {
        "test_input_required_result_elicitation" => {
            async {
                let name = elicit_text("What is your name?", "name", "string").await?;
                text(format!("Hello, {}!", elicited_text(Some(&name), "name")))
            }
            .await
        }
        "test_input_required_result_sampling" => {
            async {
                let said = sample_text("What is the capital of France?", 100).await?;
                text(format!(
                    "Sampling result: {}",
                    sampled_text(Some(&said)).unwrap_or_else(|| "no response".into())
                ))
            }
            .await
        }
        "test_input_required_result_list_roots" => {
            async {
                let listed = roots().await?;
                text(format!("Found {} root(s)", roots_count(Some(&listed))))
            }
            .await
        }
        "test_input_required_result_request_state" => {
            async {
                let confirmed = elicit_text("Please confirm", "ok", "boolean").await?;
                if confirmed.pointer("/content/ok").and_then(Value::as_bool) == Some(true) {
                    text("state-ok: confirmed".to_owned())
                } else {
                    text("not confirmed".to_owned())
                }
            }
            .await
        }
        "test_input_required_result_tampered_state" => {
            async {
                elicit_text("Please confirm", "ok", "boolean").await?;
                text("integrity-ok: state verified".to_owned())
            }
            .await
        }
        "test_input_required_result_multiple_inputs" => {
            async {
                let (name, greeting, listed) = tokio::join!(
                    elicit_text("What is your name?", "name", "string"),
                    sample_text("Generate a greeting", 50),
                    roots()
                );
                let (name, greeting, listed) = (name?, greeting?, listed?);
                text(format!(
                    "Name: {}; Greeting: {}; Roots: {}",
                    elicited_text(Some(&name), "name"),
                    sampled_text(Some(&greeting)).unwrap_or_else(|| "Hello there!".into()),
                    roots_count(Some(&listed))
                ))
            }
            .await
        }
        "test_input_required_result_multi_round" => {
            async {
                let name = elicit_text("Step 1: What is your name?", "name", "string").await?;
                let color =
                    elicit_text("Step 2: What is your favorite color?", "color", "string").await?;
                text(format!(
                    "Multi-round complete for {} who likes {}",
                    elicited_text(Some(&name), "name"),
                    elicited_text(Some(&color), "color")
                ))
            }
            .await
        }
        "test_input_required_result_capabilities" => {
            async {
                let mut received = Vec::new();
                if client_capabilities.is_some_and(|caps| caps.elicitation.is_some()) {
                    elicit_text("Elicitation input", "value", "string").await?;
                    received.push("elicit_input");
                }
                if client_capabilities.is_some_and(|caps| caps.sampling.is_some()) {
                    sample_text("Sample request", 50).await?;
                    received.push("sample_input");
                }
                if received.is_empty() {
                    text("No supported capabilities declared".to_owned())
                } else {
                    text(format!("capabilities-ok: received {}", received.join(",")))
                }
            }
            .await
        }
        _ => return None,
    };
    Some(answer)
}

/// `test_input_required_result_prompt` on a 2025-11-25 session: its question asked mid-call.
pub(super) async fn prompt_asking_mid_call(
    peer: &rmcp::Peer<rmcp::RoleServer>,
) -> Result<GetPromptResult, McpError> {
    let params = decode::<rmcp::model::ElicitRequestParams>(
        elicit("What context should the prompt use?", "context", "string")["params"].clone(),
    )?;
    let answer = peer
        .create_elicitation(params)
        .await
        .map_err(|error| McpError::internal_error(format!("elicitation failed: {error}"), None))?;
    let answer = serde_json::to_value(answer).unwrap_or_default();
    super::decode_complete(json!({"messages": [{
        "role": "user",
        "content": {"type": "text", "text": format!("Prompt with context: {}", elicited_text(Some(&answer), "context"))}
    }]}))
}

/// The multi round-trip prompt `test_input_required_result_prompt`.
pub(super) fn get_prompt(
    responses: Option<&InputResponses>,
) -> Result<Round<GetPromptResult>, McpError> {
    validate_responses(responses)?;
    match responses.and_then(|responses| responses.get("user_context")) {
        Some(response) => Ok(Round::Complete(super::decode_complete(
            json!({"messages": [{
                "role": "user",
                "content": {"type": "text", "text": format!("Prompt with context: {}", elicited_text(Some(response), "context"))}
            }]}),
        )?)),
        None => input_required(
            vec![(
                "user_context",
                elicit("What context should the prompt use?", "context", "string"),
            )],
            None,
        ),
    }
}
