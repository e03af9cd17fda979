//! A2A v0.3's JSON shapes, converted at the edge: a v0.3 client's request (`message/send`,
//! `message/stream`, `tasks/get`, `tasks/cancel`) is turned into the v1.0 shapes warden keeps,
//! and what warden answers (tasks, messages, stream events, the agent card) is turned back.
//! v0.3 tags its objects with `kind` (`message`, `task`, `status-update`, `artifact-update`,
//! and `text`/`data`/`file` parts), spells states in kebab case (`input-required`) and roles
//! in lower case (`user`, `agent`), and has `configuration.blocking` where v1.0 has
//! `returnImmediately`. The tasks, their store and the gate are the same for both versions.

use serde_json::{Map, Value, json};

use crate::protocol::RpcError;

/// The protocol version of v0.3 cards (`protocolVersion` at the card's top level).
pub(crate) const CARD_PROTOCOL_VERSION: &str = "0.3.0";
/// The version a v0.3 interface is declared with in a v1.0 card's `supportedInterfaces`.
pub(crate) const INTERFACE_VERSION: &str = "0.3";

/// A v0.3 request's params in v1.0 shapes: the message's role and parts, and `blocking`.
pub(crate) fn request_in(mut params: Value) -> Result<Value, RpcError> {
    if let Some(message) = params.get_mut("message").filter(|m| m.is_object()) {
        *message = message_in(message.take())?;
    }
    if let Some(configuration) = params
        .get_mut("configuration")
        .and_then(Value::as_object_mut)
        && let Some(blocking) = configuration.remove("blocking").and_then(|b| b.as_bool())
    {
        configuration.insert("returnImmediately".to_owned(), json!(!blocking));
    }
    Ok(params)
}

/// A v0.3 message as v1.0 spells it.
fn message_in(message: Value) -> Result<Value, RpcError> {
    let Value::Object(mut message) = message else {
        return Ok(message);
    };
    message.remove("kind");
    if let Some(role) = message.get_mut("role") {
        let v1 = match role.as_str() {
            Some("user") => "ROLE_USER",
            Some("agent") => "ROLE_AGENT",
            other => {
                return Err(RpcError::invalid_params(format!(
                    "message.role is {}; a client's message has role \"user\"",
                    other.map_or_else(|| role.to_string(), str::to_owned)
                )));
            }
        };
        *role = json!(v1);
    }
    if let Some(Value::Array(parts)) = message.get_mut("parts") {
        for part in parts.iter_mut() {
            *part = part_in(part.take())?;
        }
    }
    Ok(Value::Object(message))
}

/// A v0.3 part (`{kind: "text", text}`, `{kind: "data", data}`, `{kind: "file", file}`) as a
/// v1.0 part.
fn part_in(part: Value) -> Result<Value, RpcError> {
    let Value::Object(mut part) = part else {
        return Err(RpcError::invalid_params(
            "message.parts holds something that is not a part object",
        ));
    };
    let kind = part.remove("kind");
    let mut v1 = Map::new();
    if let Some(metadata) = part.remove("metadata") {
        v1.insert("metadata".to_owned(), metadata);
    }
    match kind.as_ref().and_then(Value::as_str) {
        Some("text") => {
            v1.insert(
                "text".to_owned(),
                part.remove("text").unwrap_or_else(|| json!("")),
            );
        }
        Some("data") => {
            v1.insert(
                "data".to_owned(),
                part.remove("data").unwrap_or(Value::Null),
            );
        }
        Some("file") => {
            let file = part.remove("file").unwrap_or_default();
            for (from, to) in [
                ("uri", "url"),
                ("bytes", "raw"),
                ("mimeType", "mediaType"),
                ("name", "filename"),
            ] {
                if let Some(value) = file.get(from) {
                    v1.insert(to.to_owned(), value.clone());
                }
            }
        }
        other => {
            return Err(RpcError::invalid_params(format!(
                "a part of kind {}: A2A v0.3 parts are of kind \"text\", \"data\" or \"file\"",
                other.map_or_else(|| "(none)".to_owned(), |kind| format!("{kind:?}"))
            )));
        }
    }
    Ok(Value::Object(v1))
}

/// A v1.0 state name as v0.3 spells it (`TASK_STATE_INPUT_REQUIRED` → `input-required`).
pub(crate) fn state_out(state: &str) -> String {
    state
        .strip_prefix("TASK_STATE_")
        .unwrap_or(state)
        .to_ascii_lowercase()
        .replace('_', "-")
}

/// A v1.0 part as a v0.3 part.
fn part_out(part: &Value) -> Value {
    let mut v03 = Map::new();
    if let Some(metadata) = part.get("metadata") {
        v03.insert("metadata".to_owned(), metadata.clone());
    }
    if let Some(text) = part.get("text") {
        v03.insert("kind".to_owned(), json!("text"));
        v03.insert("text".to_owned(), text.clone());
    } else if let Some(data) = part.get("data") {
        v03.insert("kind".to_owned(), json!("data"));
        v03.insert("data".to_owned(), data.clone());
    } else {
        let mut file = Map::new();
        for (from, to) in [
            ("url", "uri"),
            ("raw", "bytes"),
            ("mediaType", "mimeType"),
            ("filename", "name"),
        ] {
            if let Some(value) = part.get(from) {
                file.insert(to.to_owned(), value.clone());
            }
        }
        v03.insert("kind".to_owned(), json!("file"));
        v03.insert("file".to_owned(), Value::Object(file));
    }
    Value::Object(v03)
}

fn parts_out(holder: &mut Map<String, Value>) {
    if let Some(Value::Array(parts)) = holder.get_mut("parts") {
        for part in parts.iter_mut() {
            *part = part_out(part);
        }
    }
}

/// A v1.0 message as a v0.3 message.
pub(crate) fn message_out(message: &Value) -> Value {
    let Some(mut message) = message.as_object().cloned() else {
        return message.clone();
    };
    message.insert("kind".to_owned(), json!("message"));
    if let Some(role) = message.get_mut("role") {
        let v03 = match role.as_str() {
            Some("ROLE_AGENT") => "agent",
            _ => "user",
        };
        *role = json!(v03);
    }
    parts_out(&mut message);
    Value::Object(message)
}

/// A v1.0 task status as a v0.3 status.
fn status_out(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(state) = status.get("state").and_then(Value::as_str) {
        status["state"] = json!(state_out(state));
    }
    if let Some(message) = status.get("message") {
        status["message"] = message_out(message);
    }
    status
}

/// A v1.0 artifact as a v0.3 artifact.
fn artifact_out(artifact: &Value) -> Value {
    let Some(mut artifact) = artifact.as_object().cloned() else {
        return artifact.clone();
    };
    parts_out(&mut artifact);
    Value::Object(artifact)
}

/// A v1.0 task as a v0.3 task.
pub(crate) fn task_out(task: &Value) -> Value {
    let mut task = task.clone();
    task["kind"] = json!("task");
    if let Some(status) = task.get("status") {
        task["status"] = status_out(status);
    }
    if let Some(Value::Array(history)) = task.get_mut("history") {
        for message in history.iter_mut() {
            *message = message_out(message);
        }
    }
    if let Some(Value::Array(artifacts)) = task.get_mut("artifacts") {
        for artifact in artifacts.iter_mut() {
            *artifact = artifact_out(artifact);
        }
    }
    task
}

/// A v1.0 stream event (`{task}`, `{statusUpdate}`, `{artifactUpdate}`, `{message}`) as the
/// v0.3 object it wraps; `last` marks the event after which the stream ends (`final`).
pub(crate) fn event_out(event: &Value, last: bool) -> Value {
    if let Some(task) = event.get("task") {
        return task_out(task);
    }
    if let Some(message) = event.get("message") {
        return message_out(message);
    }
    if let Some(update) = event.get("statusUpdate") {
        let mut update = update.clone();
        update["kind"] = json!("status-update");
        update["final"] = json!(last);
        if let Some(status) = update.get("status") {
            update["status"] = status_out(status);
        }
        return update;
    }
    if let Some(update) = event.get("artifactUpdate") {
        let mut update = update.clone();
        update["kind"] = json!("artifact-update");
        if let Some(artifact) = update.get("artifact") {
            update["artifact"] = artifact_out(artifact);
        }
        return update;
    }
    event.clone()
}

/// The v0.3 agent card made from warden's v1.0 card: v0.3's top-level `protocolVersion`,
/// `url` and `preferredTransport`, its security scheme spelling (`type: "http"`) and
/// requirements (`security`), with the v1.0 `supportedInterfaces` kept alongside so a v1.0
/// client that reads this card still finds its interface.
pub(crate) fn card_out(card: &Value) -> Value {
    let mut v03 = card.clone();
    let interface = card
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .and_then(|interfaces| {
            interfaces
                .iter()
                .find(|i| i["protocolVersion"] == INTERFACE_VERSION)
        });
    if let Some(interface) = interface {
        v03["url"] = interface["url"].clone();
        v03["preferredTransport"] = interface["protocolBinding"].clone();
        // v0.3 asks for every transport here, the preferred one included.
        v03["additionalInterfaces"] =
            json!([{"url": interface["url"], "transport": interface["protocolBinding"]}]);
    }
    v03["protocolVersion"] = json!(CARD_PROTOCOL_VERSION);
    if let Some(object) = v03.as_object_mut() {
        object.remove("securityRequirements");
    }
    if let Some(Value::Object(schemes)) = v03.get_mut("securitySchemes") {
        for scheme in schemes.values_mut() {
            if let Some(http) = scheme.get("httpAuthSecurityScheme").cloned() {
                let mut plain = json!({
                    "type": "http",
                    "scheme": http["scheme"].as_str().unwrap_or("Bearer").to_ascii_lowercase(),
                });
                if let Some(description) = http.get("description") {
                    plain["description"] = description.clone();
                }
                *scheme = plain;
            }
        }
        let names: Vec<String> = schemes.keys().cloned().collect();
        v03["security"] = Value::Array(names.into_iter().map(|name| json!({ name: [] })).collect());
    }
    v03
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::protocol::{self, TaskState};

    #[test]
    fn a_v03_request_becomes_the_v10_request() {
        let params = json!({
            "message": {
                "kind": "message", "messageId": "m1", "role": "user", "contextId": "c1",
                "parts": [
                    {"kind": "text", "text": "hello"},
                    {"kind": "data", "data": {"a": 1}},
                    {"kind": "file", "file": {"uri": "file:///x", "mimeType": "text/plain"}}
                ],
                "metadata": {"warden/agent": "reviewer"}
            },
            "configuration": {"blocking": false, "historyLength": 2}
        });
        let v1 = request_in(params).unwrap();
        assert_eq!(
            v1,
            json!({
                "message": {
                    "messageId": "m1", "role": "ROLE_USER", "contextId": "c1",
                    "parts": [
                        {"text": "hello"}, {"data": {"a": 1}},
                        {"url": "file:///x", "mediaType": "text/plain"}
                    ],
                    "metadata": {"warden/agent": "reviewer"}
                },
                "configuration": {"returnImmediately": true, "historyLength": 2}
            })
        );
        let bad =
            json!({"message": {"messageId": "m", "role": "user", "parts": [{"kind": "video"}]}});
        assert!(request_in(bad).unwrap_err().message.contains("\"video\""));
        let role = json!({"message": {"messageId": "m", "role": "boss", "parts": []}});
        assert!(request_in(role).unwrap_err().message.contains("boss"));
    }

    #[test]
    fn tasks_and_events_go_out_in_v03_shapes() {
        let question = protocol::agent_message("q1", "c1", "t1", "may I?");
        let task = json!({
            "id": "t1", "contextId": "c1",
            "status": protocol::status(TaskState::InputRequired, Some(&question)),
            "artifacts": [{"artifactId": "a1", "name": "answer", "parts": [{"text": "hi"}]}],
            "history": [{"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "go"}]}],
        });
        let v03 = task_out(&task);
        assert_eq!(v03["kind"], "task");
        assert_eq!(v03["status"]["state"], "input-required");
        assert_eq!(v03["status"]["message"]["kind"], "message");
        assert_eq!(v03["status"]["message"]["role"], "agent");
        assert_eq!(
            v03["status"]["message"]["parts"][0],
            json!({"kind": "text", "text": "may I?"})
        );
        assert_eq!(v03["history"][0]["role"], "user");
        assert_eq!(v03["artifacts"][0]["parts"][0]["kind"], "text");

        let update = json!({"statusUpdate": {
            "taskId": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_CANCELED"}, "metadata": {"k": 1}
        }});
        let event = event_out(&update, true);
        assert_eq!(event["kind"], "status-update");
        assert_eq!(event["final"], true);
        assert_eq!(event["status"]["state"], "canceled");
        assert_eq!(event["metadata"]["k"], 1);
        let artifact = json!({"artifactUpdate": {"taskId": "t1", "contextId": "c1",
            "artifact": {"artifactId": "a", "parts": [{"data": {"x": 1}}]}}});
        let event = event_out(&artifact, false);
        assert_eq!(event["kind"], "artifact-update");
        assert_eq!(event["artifact"]["parts"][0]["kind"], "data");
        assert_eq!(event_out(&json!({"task": task}), false)["kind"], "task");
        assert_eq!(state_out("TASK_STATE_WORKING"), "working");
    }

    #[test]
    fn the_v03_card_has_its_url_and_plain_security() {
        let card = protocol::agent_card("http://127.0.0.1:9/a2a", &[], true);
        let v03 = card_out(&card);
        assert_eq!(v03["protocolVersion"], CARD_PROTOCOL_VERSION);
        assert_eq!(v03["url"], "http://127.0.0.1:9/a2a");
        assert_eq!(v03["preferredTransport"], "JSONRPC");
        assert_eq!(
            v03["additionalInterfaces"],
            json!([{"url": "http://127.0.0.1:9/a2a", "transport": "JSONRPC"}])
        );
        assert_eq!(v03["securitySchemes"]["bearer"]["type"], "http");
        assert_eq!(v03["securitySchemes"]["bearer"]["scheme"], "bearer");
        assert_eq!(v03["security"], json!([{"bearer": []}]));
        assert!(v03.get("securityRequirements").is_none());
        assert_eq!(v03["supportedInterfaces"].as_array().unwrap().len(), 2);
        let open = card_out(&protocol::agent_card("http://127.0.0.1:9/a2a", &[], false));
        assert!(open.get("security").is_none());
    }
}
