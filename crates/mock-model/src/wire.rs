//! The exact JSON and SSE shapes of the three APIs, for a scripted turn.

use serde_json::{Value, json};

use crate::{Api, Cut, Turn};

/// The SSE frames of one streamed turn and where a cut, if any, falls.
pub(crate) struct Frames {
    pub frames: Vec<String>,
    pub cut_at: usize,
}

fn chunks(text: &str, size: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        current.push(c);
        if current.len() >= size {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

fn event(name: &str, value: &Value) -> String {
    format!("event: {name}\ndata: {value}\n\n")
}

pub(crate) fn error_body(api: Api, status: u16, message: &str) -> Value {
    match api {
        Api::Messages => {
            let kind = match status {
                429 => "rate_limit_error",
                529 => "overloaded_error",
                400 => "invalid_request_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        _ => {
            let kind = if status == 429 {
                "rate_limit_exceeded"
            } else {
                "server_error"
            };
            json!({"error": {"message": message, "type": kind, "code": kind}})
        }
    }
}

/// A stream's in-band error event.
pub(crate) fn error_event(api: Api, message: &str) -> String {
    match api {
        Api::Messages => event(
            "error",
            &json!({"type": "error", "error": {"type": "overloaded_error", "message": message}}),
        ),
        Api::Responses => event(
            "error",
            &json!({"type": "error", "code": "server_error", "message": message,
                "param": null, "sequence_number": 0}),
        ),
        Api::ChatCompletions => {
            data(&json!({"error": {"message": message, "type": "server_error"}}))
        }
    }
}

fn finish_reason(api: Api, turn: &Turn) -> &'static str {
    let calls = !turn.tool_calls.is_empty();
    match (api, calls) {
        (Api::ChatCompletions, true) => "tool_calls",
        (Api::ChatCompletions, false) => "stop",
        (Api::Messages, true) => "tool_use",
        (Api::Messages, false) => "end_turn",
        (Api::Responses, _) => "completed",
    }
}

struct Marks {
    after_start: usize,
    after_text: usize,
    after_fragment: Option<usize>,
}

impl Marks {
    /// The frames of a turn, to be cut where `cut` says (all of them when `None`).
    fn cut(self, frames: Vec<String>, cut: Option<Cut>) -> Frames {
        let total = frames.len();
        let cut_at = match cut {
            None => total,
            Some(Cut::BeforeContent | Cut::Hang) => self.after_start,
            Some(Cut::AfterText | Cut::StallAfterText) => self.after_text,
            Some(Cut::AfterToolCallFragment) => self.after_fragment.unwrap_or(total),
        };
        Frames { frames, cut_at }
    }
}

pub(crate) fn stream_frames(
    api: Api,
    turn: &Turn,
    model: &str,
    fragment: usize,
    include_usage: bool,
    request: &Value,
) -> Frames {
    match api {
        Api::ChatCompletions => chat_frames(turn, model, fragment, include_usage),
        Api::Responses => responses_frames(turn, model, fragment, request),
        Api::Messages => messages_frames(turn, model, fragment),
    }
}

/// Anthropic's two blocks of a server tool search: the call and its result.
fn anthropic_search_blocks(turn: &Turn) -> Option<(Value, Value)> {
    let search = turn.tool_search.as_ref()?;
    let call = json!({"type": "server_tool_use", "id": "srvtoolu_mock_1",
        "name": "tool_search_tool_bm25", "input": {"query": search.query}});
    let result = json!({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_mock_1",
        "content": {"type": "tool_search_tool_search_result",
            "tool_references": search.tool_names.iter()
                .map(|name| json!({"type": "tool_reference", "tool_name": name}))
                .collect::<Vec<_>>()}});
    Some((call, result))
}

/// The Responses hosted search items: the call and its output, whose `tools` are the request's
/// deferred definitions of the found names.
fn responses_search_items(turn: &Turn, request: &Value) -> Vec<Value> {
    let Some(search) = &turn.tool_search else {
        return Vec::new();
    };
    let found: Vec<Value> = request
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|tool| {
            tool.get("name")
                .and_then(Value::as_str)
                .is_some_and(|name| search.tool_names.iter().any(|wanted| wanted == name))
        })
        .cloned()
        .collect();
    vec![
        json!({"type": "tool_search_call", "id": "tsc_mock_1", "execution": "server",
            "call_id": null, "status": "completed", "arguments": {"query": search.query}}),
        json!({"type": "tool_search_output", "id": "tso_mock_1", "execution": "server",
            "call_id": null, "status": "completed", "tools": found}),
    ]
}

fn chat_frames(turn: &Turn, model: &str, fragment: usize, include_usage: bool) -> Frames {
    let chunk = |delta: Value, finish: Value| {
        data(&json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }))
    };
    let mut frames = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    let after_start = frames.len();
    if let Some(thinking) = &turn.thinking {
        for piece in chunks(thinking, fragment) {
            frames.push(chunk(json!({"reasoning_content": piece}), Value::Null));
        }
    }
    if let Some(text) = &turn.text {
        for piece in chunks(text, fragment) {
            frames.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    let after_text = frames.len();
    let mut after_fragment = None;
    for (index, call) in turn.tool_calls.iter().enumerate() {
        frames.push(chunk(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": ""}}]}),
            Value::Null,
        ));
        for piece in chunks(&call.arguments, fragment) {
            frames.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
            after_fragment.get_or_insert(frames.len());
        }
    }
    frames.push(chunk(
        json!({}),
        json!(finish_reason(Api::ChatCompletions, turn)),
    ));
    if include_usage {
        let usage = turn.usage;
        frames.push(data(&json!({
            "id": "chatcmpl-mock",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": {
                "prompt_tokens": usage.input_tokens,
                "completion_tokens": usage.output_tokens,
                "total_tokens": usage.input_tokens + usage.output_tokens,
            },
        })));
    }
    frames.push("data: [DONE]\n\n".to_string());
    Marks {
        after_start,
        after_text,
        after_fragment,
    }
    .cut(frames, turn.cut)
}

fn responses_output(turn: &Turn, request: &Value) -> Vec<Value> {
    let mut output = responses_search_items(turn, request);
    if let Some(text) = &turn.text {
        output.push(json!({
            "type": "message", "id": "msg_mock", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }));
    }
    for (i, call) in turn.tool_calls.iter().enumerate() {
        output.push(json!({
            "type": "function_call", "id": format!("fc_mock_{i}"), "status": "completed",
            "call_id": call.id, "name": call.name, "arguments": call.arguments,
        }));
    }
    output
}

fn responses_object(turn: &Turn, model: &str, status: &str, output: Vec<Value>) -> Value {
    let usage = turn.usage;
    let mut value = json!({
        "id": "resp_mock", "object": "response", "created_at": 0, "status": status,
        "model": model, "output": output,
    });
    if status == "completed" {
        value["usage"] = json!({
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input_tokens + usage.output_tokens,
        });
    }
    value
}

fn responses_frames(turn: &Turn, model: &str, fragment: usize, request: &Value) -> Frames {
    let mut seq = 0u64;
    let mut frames = Vec::new();
    let mut push = |frames: &mut Vec<String>, name: &str, mut value: Value| {
        value["type"] = json!(name);
        value["sequence_number"] = json!(seq);
        seq += 1;
        frames.push(event(name, &value));
    };
    push(
        &mut frames,
        "response.created",
        json!({"response": responses_object(turn, model, "in_progress", vec![])}),
    );
    push(
        &mut frames,
        "response.in_progress",
        json!({"response": responses_object(turn, model, "in_progress", vec![])}),
    );
    let after_start = frames.len();
    let output = responses_output(turn, request);
    let mut output_index = 0usize;
    for item in responses_search_items(turn, request) {
        push(
            &mut frames,
            "response.output_item.added",
            json!({"output_index": output_index, "item": item}),
        );
        push(
            &mut frames,
            "response.output_item.done",
            json!({"output_index": output_index, "item": item}),
        );
        output_index += 1;
    }
    if let Some(text) = &turn.text {
        push(
            &mut frames,
            "response.output_item.added",
            json!({"output_index": output_index, "item": {"type": "message", "id": "msg_mock",
                "status": "in_progress", "role": "assistant", "content": []}}),
        );
        push(
            &mut frames,
            "response.content_part.added",
            json!({"item_id": "msg_mock", "output_index": output_index, "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
        for piece in chunks(text, fragment) {
            push(
                &mut frames,
                "response.output_text.delta",
                json!({"item_id": "msg_mock", "output_index": output_index, "content_index": 0,
                    "delta": piece}),
            );
        }
        push(
            &mut frames,
            "response.output_text.done",
            json!({"item_id": "msg_mock", "output_index": output_index, "content_index": 0,
                "text": text}),
        );
        push(
            &mut frames,
            "response.content_part.done",
            json!({"item_id": "msg_mock", "output_index": output_index, "content_index": 0,
                "part": {"type": "output_text", "text": text, "annotations": []}}),
        );
        push(
            &mut frames,
            "response.output_item.done",
            json!({"output_index": output_index, "item": output[output_index]}),
        );
        output_index += 1;
    }
    let after_text = frames.len();
    let mut after_fragment = None;
    for (i, call) in turn.tool_calls.iter().enumerate() {
        let item_id = format!("fc_mock_{i}");
        push(
            &mut frames,
            "response.output_item.added",
            json!({"output_index": output_index, "item": {"type": "function_call", "id": item_id,
                "status": "in_progress", "call_id": call.id, "name": call.name, "arguments": ""}}),
        );
        for piece in chunks(&call.arguments, fragment) {
            push(
                &mut frames,
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": output_index, "delta": piece}),
            );
            after_fragment.get_or_insert(frames.len());
        }
        push(
            &mut frames,
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": output_index, "arguments": call.arguments}),
        );
        push(
            &mut frames,
            "response.output_item.done",
            json!({"output_index": output_index, "item": output[output_index]}),
        );
        output_index += 1;
    }
    push(
        &mut frames,
        "response.completed",
        json!({"response": responses_object(turn, model, "completed", output.clone())}),
    );
    Marks {
        after_start,
        after_text,
        after_fragment,
    }
    .cut(frames, turn.cut)
}

fn messages_frames(turn: &Turn, model: &str, fragment: usize) -> Frames {
    let usage = turn.usage;
    let mut frames = vec![event(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": "msg_mock", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": usage.input_tokens, "output_tokens": 1,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
        }}),
    )];
    frames.push(event("ping", &json!({"type": "ping"})));
    let after_start = frames.len();
    let mut index = 0usize;
    if let Some(thinking) = &turn.thinking {
        frames.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ));
        for piece in chunks(thinking, fragment) {
            frames.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "thinking_delta", "thinking": piece}}),
            ));
        }
        frames.push(event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "signature_delta",
                    "signature": crate::thinking_signature(thinking)}}),
        ));
        frames.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    if let Some((call, result)) = anthropic_search_blocks(turn) {
        let mut opening = call.clone();
        opening["input"] = json!({});
        frames.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": opening}),
        ));
        frames.push(event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": call["input"].to_string()}}),
        ));
        frames.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
        frames.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": result}),
        ));
        frames.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    if let Some(text) = &turn.text {
        frames.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "text", "text": ""}}),
        ));
        for piece in chunks(text, fragment) {
            frames.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": piece}}),
            ));
        }
        frames.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    let after_text = frames.len();
    let mut after_fragment = None;
    for call in &turn.tool_calls {
        frames.push(event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
        ));
        for piece in chunks(&call.arguments, fragment) {
            frames.push(event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": piece}}),
            ));
            after_fragment.get_or_insert(frames.len());
        }
        frames.push(event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    frames.push(event(
        "message_delta",
        &json!({"type": "message_delta",
            "delta": {"stop_reason": finish_reason(Api::Messages, turn), "stop_sequence": null},
            "usage": {"output_tokens": usage.output_tokens}}),
    ));
    frames.push(event("message_stop", &json!({"type": "message_stop"})));
    Marks {
        after_start,
        after_text,
        after_fragment,
    }
    .cut(frames, turn.cut)
}

pub(crate) fn complete_body(api: Api, turn: &Turn, model: &str, request: &Value) -> Value {
    let usage = turn.usage;
    match api {
        Api::ChatCompletions => {
            let mut message = json!({"role": "assistant", "content": turn.text});
            if let Some(thinking) = &turn.thinking {
                message["reasoning_content"] = json!(thinking);
            }
            if !turn.tool_calls.is_empty() {
                message["tool_calls"] = Value::Array(
                    turn.tool_calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                "function": {"name": c.name, "arguments": c.arguments}})
                        })
                        .collect(),
                );
            }
            json!({
                "id": "chatcmpl-mock", "object": "chat.completion", "created": 0, "model": model,
                "choices": [{"index": 0, "message": message,
                    "finish_reason": finish_reason(api, turn)}],
                "usage": {"prompt_tokens": usage.input_tokens,
                    "completion_tokens": usage.output_tokens,
                    "total_tokens": usage.input_tokens + usage.output_tokens},
            })
        }
        Api::Responses => {
            responses_object(turn, model, "completed", responses_output(turn, request))
        }
        Api::Messages => {
            let mut content = Vec::new();
            if let Some(thinking) = &turn.thinking {
                content.push(json!({"type": "thinking", "thinking": thinking,
                    "signature": crate::thinking_signature(thinking)}));
            }
            if let Some((call, result)) = anthropic_search_blocks(turn) {
                content.push(call);
                content.push(result);
            }
            if let Some(text) = &turn.text {
                content.push(json!({"type": "text", "text": text}));
            }
            for call in &turn.tool_calls {
                let input: Value =
                    serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
                content.push(json!({"type": "tool_use", "id": call.id, "name": call.name,
                    "input": input}));
            }
            json!({
                "id": "msg_mock", "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": finish_reason(api, turn), "stop_sequence": null,
                "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
            })
        }
    }
}
