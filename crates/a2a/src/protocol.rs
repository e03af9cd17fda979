//! A2A v1.0's JSON shapes as warden reads and writes them (the JSON-RPC binding, protobuf JSON
//! names): task states, messages and their parts, tasks, stream events, the agent card, and the
//! protocol's error codes. v0.3 requests and answers are converted to and from these shapes at
//! the edge (`v03`).

use serde_json::{Map, Value, json};

/// The protocol version warden speaks (the card's interface and the `A2A-Version` header).
pub const PROTOCOL_VERSION: &str = "1.0";

/// JSON-RPC's and A2A's error codes.
pub(crate) mod code {
    pub(crate) const PARSE_ERROR: i64 = -32700;
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    pub(crate) const INTERNAL_ERROR: i64 = -32603;
    pub(crate) const TASK_NOT_FOUND: i64 = -32001;
    pub(crate) const TASK_NOT_CANCELABLE: i64 = -32002;
    pub(crate) const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    pub(crate) const UNSUPPORTED_OPERATION: i64 = -32004;
    pub(crate) const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    pub(crate) const VERSION_NOT_SUPPORTED: i64 = -32009;
}

/// A JSON-RPC error: its code and a message that says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} ({code})")]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    pub(crate) fn task_not_found(id: &str) -> Self {
        Self::new(
            code::TASK_NOT_FOUND,
            format!("no task {id:?} on this server; tasks live as long as the server runs"),
        )
    }

    /// The `error` member of a JSON-RPC response.
    pub(crate) fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Failed,
    Canceled,
}

impl TaskState {
    /// The protobuf JSON name (`TASK_STATE_WORKING`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submitted => "TASK_STATE_SUBMITTED",
            Self::Working => "TASK_STATE_WORKING",
            Self::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            Self::Completed => "TASK_STATE_COMPLETED",
            Self::Failed => "TASK_STATE_FAILED",
            Self::Canceled => "TASK_STATE_CANCELED",
        }
    }

    /// Nothing more happens to the task.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Canceled)
    }

    /// The task waits: for good (terminal) or for the client's next message.
    pub fn ends_a_request(self) -> bool {
        self.is_terminal() || self == Self::InputRequired
    }
}

/// What warden reads of a client's message.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Incoming {
    pub(crate) message_id: String,
    pub(crate) context_id: Option<String>,
    pub(crate) task_id: Option<String>,
    /// The text of its parts: text as it is, data parts as JSON.
    pub(crate) text: String,
    pub(crate) metadata: Map<String, Value>,
}

/// Reads `params.message` of `SendMessage`: a user message with text or data parts. Files
/// (raw bytes, URLs) are refused with the reason.
pub(crate) fn incoming(params: &Value) -> Result<Incoming, RpcError> {
    let message = params
        .get("message")
        .filter(|message| message.is_object())
        .ok_or_else(|| RpcError::invalid_params("params.message is missing: send a Message"))?;
    let string = |key: &str| {
        message
            .get(key)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
    };
    let message_id = string("messageId")
        .ok_or_else(|| RpcError::invalid_params("message.messageId is missing"))?;
    if let Some(role) = message.get("role").and_then(Value::as_str)
        && role != "ROLE_USER"
    {
        return Err(RpcError::invalid_params(format!(
            "message.role is {role}; a client's message is ROLE_USER"
        )));
    }
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .filter(|parts| !parts.is_empty())
        .ok_or_else(|| RpcError::invalid_params("message.parts is empty: send a text part"))?;
    let mut texts = Vec::new();
    for part in parts {
        if let Some(text) = part.get("text").and_then(Value::as_str) {
            texts.push(text.to_owned());
        } else if let Some(data) = part.get("data") {
            texts.push(data.to_string());
        } else {
            return Err(RpcError::new(
                code::CONTENT_TYPE_NOT_SUPPORTED,
                "a file part (raw bytes or a URL): warden takes text and data parts only",
            ));
        }
    }
    Ok(Incoming {
        message_id,
        context_id: string("contextId"),
        task_id: string("taskId"),
        text: texts.join("\n\n"),
        metadata: message
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
    })
}

/// An agent message of a task, with one text part.
pub(crate) fn agent_message(id: &str, context_id: &str, task_id: &str, text: &str) -> Value {
    json!({
        "messageId": id,
        "contextId": context_id,
        "taskId": task_id,
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
    })
}

/// A task's status: its state and, when there is one, the agent's message about it.
pub(crate) fn status(state: TaskState, message: Option<&Value>) -> Value {
    let mut status = json!({"state": state.as_str()});
    if let Some(message) = message {
        status["message"] = message.clone();
    }
    status
}

/// The agent card (v1.0 shapes): warden's profiles as skills, the JSON-RPC interface at `url`
/// for v1.0 and v0.3, streaming, and bearer authentication when the server takes a token.
pub(crate) fn agent_card(url: &str, skills: &[Value], bearer: bool) -> Value {
    let mut card = json!({
        "name": "warden",
        "description": "An agent host: each task is a turn of a warden agent session, every \
                        tool call behind warden's gate (policy, approvals, audit).",
        "version": env!("CARGO_PKG_VERSION"),
        // One endpoint speaks both versions: the method names tell them apart.
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": crate::v03::INTERFACE_VERSION},
        ],
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    });
    if bearer {
        card["securitySchemes"] = json!({
            "bearer": {"httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "The token of `warden serve` (WARDEN_SERVE_TOKEN, or the file it \
                                names at start)",
            }}
        });
        card["securityRequirements"] = json!([{"schemes": {"bearer": {"list": []}}}]);
    }
    card
}

/// One skill of the card: an agent profile (or the default agent).
pub(crate) fn skill(id: &str, name: &str, description: &str) -> Value {
    json!({
        "id": id,
        "name": name,
        "description": description,
        "tags": ["warden", "agent"],
        "inputModes": ["text/plain", "application/json"],
        "outputModes": ["text/plain"],
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_message_becomes_text_and_files_are_refused() {
        let params = json!({"message": {
            "messageId": "m1", "role": "ROLE_USER", "contextId": "c1",
            "parts": [{"text": "hello"}, {"data": {"a": 1}}],
            "metadata": {"warden/agent": "reviewer"}
        }});
        let message = incoming(&params).unwrap();
        assert_eq!(message.text, "hello\n\n{\"a\":1}");
        assert_eq!(message.context_id.as_deref(), Some("c1"));
        assert_eq!(message.task_id, None);
        assert_eq!(message.metadata["warden/agent"], "reviewer");
        let file =
            json!({"message": {"messageId": "m2", "parts": [{"url": "file:///etc/passwd"}]}});
        assert_eq!(
            incoming(&file).unwrap_err().code,
            code::CONTENT_TYPE_NOT_SUPPORTED
        );
        let agent =
            json!({"message": {"messageId": "m3", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}});
        assert_eq!(incoming(&agent).unwrap_err().code, code::INVALID_PARAMS);
        assert!(
            incoming(&json!({}))
                .unwrap_err()
                .message
                .contains("params.message")
        );
    }

    #[test]
    fn states_have_their_protobuf_names_and_end_requests() {
        assert_eq!(
            TaskState::InputRequired.as_str(),
            "TASK_STATE_INPUT_REQUIRED"
        );
        assert!(TaskState::InputRequired.ends_a_request());
        assert!(!TaskState::InputRequired.is_terminal());
        assert!(TaskState::Canceled.is_terminal());
        assert!(!TaskState::Working.ends_a_request());
    }

    #[test]
    fn the_card_names_its_interface_and_the_bearer_scheme() {
        let card = agent_card(
            "http://127.0.0.1:9/a2a",
            &[skill("default", "warden", "d")],
            true,
        );
        assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
        assert_eq!(
            card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
        let open = agent_card("http://127.0.0.1:9/a2a", &[], false);
        assert!(open.get("securitySchemes").is_none());
    }
}
