//! The dialogs that put the operator in charge: approval of a tool call, an MCP elicitation
//! (a form built from the requested schema, or a URL to open), and trust of a project server.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::{Map, Value};
use tokio::sync::oneshot;
use warden_mcp::{ElicitationKind, ElicitationRequest, ElicitationResponse};
use warden_policy::{ApprovalAnswer, ApprovalRequest};

/// Asks whether one call may run.
#[derive(Debug)]
pub struct ApprovalDialog {
    pub public_name: String,
    pub tool: String,
    pub server: String,
    pub classes: String,
    /// The effect class the tool's author declared (a tool defined in code), if any.
    pub effect: Option<String>,
    pub arguments: Value,
    pub reason: String,
    /// Whether "always" is offered (a skill's tool grant), on `A`.
    pub offers_always: bool,
    /// `Some` while the operator types the reason for a denial.
    pub deny_reason: Option<String>,
    responder: Option<oneshot::Sender<ApprovalAnswer>>,
}

impl ApprovalDialog {
    pub fn new(
        request: &ApprovalRequest,
        responder: Option<oneshot::Sender<ApprovalAnswer>>,
    ) -> Self {
        Self {
            public_name: request.public_name.clone(),
            tool: request.identity.tool.clone(),
            server: request.identity.server().to_owned(),
            classes: request.classes.to_names().to_string(),
            effect: request.effect.map(|effect| effect.as_str().to_owned()),
            arguments: request.arguments.clone(),
            reason: request.reason.clone(),
            offers_always: request.offers_always,
            deny_reason: None,
            responder,
        }
    }

    /// Handles a key; `Some` once the operator has answered (the answer is already sent).
    pub fn key(&mut self, key: KeyEvent) -> Option<ApprovalAnswer> {
        if let Some(reason) = &mut self.deny_reason {
            match key.code {
                KeyCode::Enter => {
                    let text = reason.trim().to_owned();
                    return Some(self.answer(ApprovalAnswer::Deny {
                        reason: (!text.is_empty()).then_some(text),
                    }));
                }
                KeyCode::Esc => self.deny_reason = None,
                KeyCode::Backspace => {
                    reason.pop();
                }
                KeyCode::Char(c) => reason.push(c),
                _ => {}
            }
            return None;
        }
        match key.code {
            KeyCode::Char('y') | KeyCode::Char('a') | KeyCode::Enter => {
                Some(self.answer(ApprovalAnswer::AllowOnce))
            }
            KeyCode::Char('s') => Some(self.answer(ApprovalAnswer::AllowForSession)),
            KeyCode::Char('A') if self.offers_always => {
                Some(self.answer(ApprovalAnswer::AllowAlways))
            }
            KeyCode::Char('n') | KeyCode::Char('d') => {
                self.deny_reason = Some(String::new());
                None
            }
            KeyCode::Esc => Some(self.answer(ApprovalAnswer::Deny { reason: None })),
            _ => None,
        }
    }

    /// Sends `answer` to the gate (once) and returns it.
    pub fn answer(&mut self, answer: ApprovalAnswer) -> ApprovalAnswer {
        if let Some(responder) = self.responder.take() {
            let _ = responder.send(answer.clone());
        }
        answer
    }
}

/// How one form field is edited and converted.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    Text,
    Integer,
    Number,
    Boolean,
    /// One of these (value, label).
    Choice(Vec<(String, String)>),
    /// Several of these (value, label), typed comma-separated.
    MultiChoice(Vec<(String, String)>),
}

/// One field of an elicitation form.
#[derive(Debug, Clone, PartialEq)]
pub struct FormField {
    pub name: String,
    pub label: String,
    pub description: Option<String>,
    pub kind: FieldKind,
    pub required: bool,
    /// The value as typed (booleans: `true`/`false`; choices: the value).
    pub value: String,
}

/// What the server asked for.
#[derive(Debug)]
pub enum ElicitationBody {
    Form {
        fields: Vec<FormField>,
        focus: usize,
        error: Option<String>,
    },
    Url {
        url: String,
    },
}

/// A server's request for input.
#[derive(Debug)]
pub struct ElicitationDialog {
    pub server: String,
    pub message: String,
    pub body: ElicitationBody,
    responder: Option<oneshot::Sender<ElicitationResponse>>,
}

impl ElicitationDialog {
    pub fn new(
        request: &ElicitationRequest,
        responder: Option<oneshot::Sender<ElicitationResponse>>,
    ) -> Self {
        let (message, body) = match &request.kind {
            ElicitationKind::Form { message, schema } => (
                message.clone(),
                ElicitationBody::Form {
                    fields: form_fields(schema),
                    focus: 0,
                    error: None,
                },
            ),
            ElicitationKind::Url { message, url } => {
                (message.clone(), ElicitationBody::Url { url: url.clone() })
            }
        };
        Self {
            server: request.server.clone(),
            message,
            body,
            responder,
        }
    }

    /// Handles a key; `Some` once answered (the answer is already sent).
    pub fn key(&mut self, key: KeyEvent) -> Option<ElicitationResponse> {
        let control = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Esc => return Some(self.answer(ElicitationResponse::Cancel)),
            KeyCode::Char('x') if control => {
                return Some(self.answer(ElicitationResponse::Decline));
            }
            _ => {}
        }
        let response = match &mut self.body {
            ElicitationBody::Url { .. } => match key.code {
                KeyCode::Enter | KeyCode::Char('o') => {
                    Some(ElicitationResponse::Accept(Map::new()))
                }
                KeyCode::Char('n') => Some(ElicitationResponse::Decline),
                _ => None,
            },
            ElicitationBody::Form {
                fields,
                focus,
                error,
            } => {
                let count = fields.len();
                match key.code {
                    KeyCode::Enter => match form_content(fields) {
                        Ok(content) => Some(ElicitationResponse::Accept(content)),
                        Err(problem) => {
                            *error = Some(problem);
                            None
                        }
                    },
                    KeyCode::Tab | KeyCode::Down if count > 0 => {
                        *focus = (*focus + 1) % count;
                        None
                    }
                    KeyCode::BackTab | KeyCode::Up if count > 0 => {
                        *focus = (*focus + count - 1) % count;
                        None
                    }
                    _ => {
                        if let Some(field) = fields.get_mut(*focus) {
                            edit_field(field, key);
                        }
                        None
                    }
                }
            }
        };
        response.map(|response| self.answer(response))
    }

    /// Sends `response` to the server (once) and returns it.
    pub fn answer(&mut self, response: ElicitationResponse) -> ElicitationResponse {
        if let Some(responder) = self.responder.take() {
            let _ = responder.send(response.clone());
        }
        response
    }
}

fn edit_field(field: &mut FormField, key: KeyEvent) {
    match &field.kind {
        FieldKind::Boolean => {
            if matches!(
                key.code,
                KeyCode::Char(' ') | KeyCode::Left | KeyCode::Right
            ) {
                field.value = if field.value == "true" {
                    "false"
                } else {
                    "true"
                }
                .to_owned();
            }
        }
        FieldKind::Choice(options) => {
            let index = options.iter().position(|(value, _)| *value == field.value);
            let next = match (key.code, index) {
                (KeyCode::Right | KeyCode::Char(' '), Some(i)) => (i + 1) % options.len(),
                (KeyCode::Left, Some(i)) => (i + options.len() - 1) % options.len(),
                (KeyCode::Right | KeyCode::Left | KeyCode::Char(' '), None) => 0,
                _ => return,
            };
            if let Some((value, _)) = options.get(next) {
                field.value = value.clone();
            }
        }
        _ => match key.code {
            KeyCode::Backspace => {
                field.value.pop();
            }
            KeyCode::Char(c) => field.value.push(c),
            _ => {}
        },
    }
}

fn options_of(schema: &Value) -> Option<Vec<(String, String)>> {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let names = schema.get("enumNames").and_then(Value::as_array);
        return Some(
            values
                .iter()
                .enumerate()
                .filter_map(|(index, value)| {
                    let value = value.as_str()?.to_owned();
                    let label = names
                        .and_then(|names| names.get(index))
                        .and_then(Value::as_str)
                        .map_or_else(|| value.clone(), str::to_owned);
                    Some((value, label))
                })
                .collect(),
        );
    }
    let list = schema
        .get("oneOf")
        .or_else(|| schema.get("anyOf"))
        .and_then(Value::as_array)?;
    Some(
        list.iter()
            .filter_map(|option| {
                let value = option.get("const")?.as_str()?.to_owned();
                let label = option
                    .get("title")
                    .and_then(Value::as_str)
                    .map_or_else(|| value.clone(), str::to_owned);
                Some((value, label))
            })
            .collect(),
    )
}

/// The form fields of a requested schema (a flat object of primitives), defaults filled in.
pub(crate) fn form_fields(schema: &Value) -> Vec<FormField> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let kind = match property.get("type").and_then(Value::as_str) {
                Some("boolean") => FieldKind::Boolean,
                Some("integer") => FieldKind::Integer,
                Some("number") => FieldKind::Number,
                Some("array") => FieldKind::MultiChoice(
                    property
                        .get("items")
                        .and_then(options_of)
                        .unwrap_or_default(),
                ),
                _ => options_of(property).map_or(FieldKind::Text, FieldKind::Choice),
            };
            let value = match property.get("default") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(items)) => items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(","),
                Some(Value::Null) | None if kind == FieldKind::Boolean => "false".to_owned(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            FormField {
                name: name.clone(),
                label: property
                    .get("title")
                    .and_then(Value::as_str)
                    .unwrap_or(name)
                    .to_owned(),
                description: property
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                kind,
                required: required.contains(&name.as_str()),
                value,
            }
        })
        .collect()
}

/// The content of a filled form, typed by the schema; the first problem when a required field
/// is empty or a value does not fit its type.
pub(crate) fn form_content(fields: &[FormField]) -> Result<Map<String, Value>, String> {
    let mut content = Map::new();
    for field in fields {
        let text = field.value.trim();
        if text.is_empty() {
            if field.required {
                return Err(format!("{} is required", field.label));
            }
            continue;
        }
        let value = match &field.kind {
            FieldKind::Text | FieldKind::Choice(_) => Value::String(text.to_owned()),
            FieldKind::Boolean => Value::Bool(text == "true"),
            FieldKind::Integer => Value::from(
                text.parse::<i64>()
                    .map_err(|_| format!("{} must be a whole number", field.label))?,
            ),
            FieldKind::Number => Value::from(
                text.parse::<f64>()
                    .map_err(|_| format!("{} must be a number", field.label))?,
            ),
            FieldKind::MultiChoice(options) => {
                let mut chosen = Vec::new();
                for item in text
                    .split(',')
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                {
                    if !options.is_empty() && !options.iter().any(|(value, _)| value == item) {
                        return Err(format!("{} has no option \"{item}\"", field.label));
                    }
                    chosen.push(Value::String(item.to_owned()));
                }
                Value::Array(chosen)
            }
        };
        content.insert(field.name.clone(), value);
    }
    Ok(content)
}

/// Asks whether a project-scope server may start: approve this exact entry, or skip it.
#[derive(Debug)]
pub struct TrustDialog {
    pub name: String,
    /// What approving grants: command and args or URL, env and headers with their references,
    /// annotations, sampling, defer and the environment variables read.
    pub grants: Vec<warden_config::TrustLine>,
    /// The file that declares it.
    pub source: String,
    /// `untrusted` or `changed`.
    pub state: String,
    responder: Option<oneshot::Sender<bool>>,
}

impl TrustDialog {
    pub fn new(
        name: String,
        grants: Vec<warden_config::TrustLine>,
        source: String,
        state: String,
        responder: Option<oneshot::Sender<bool>>,
    ) -> Self {
        Self {
            name,
            grants,
            source,
            state,
            responder,
        }
    }

    /// `Some(true)` to trust, `Some(false)` to skip.
    pub fn key(&mut self, key: KeyEvent) -> Option<bool> {
        let answer = match key.code {
            KeyCode::Char('y') | KeyCode::Char('a') => true,
            KeyCode::Char('n') | KeyCode::Char('s') | KeyCode::Esc => false,
            _ => return None,
        };
        Some(self.answer(answer))
    }

    pub fn answer(&mut self, trust: bool) -> bool {
        if let Some(responder) = self.responder.take() {
            let _ = responder.send(trust);
        }
        trust
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn form_enforces_required_and_types() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "title": "Name"},
                "age": {"type": "integer", "default": 42},
                "ok": {"type": "boolean"},
                "pick": {"type": "string", "enum": ["a", "b"], "default": "a"}
            },
            "required": ["name"]
        });
        let mut fields = form_fields(&schema);
        assert_eq!(form_content(&fields), Err("Name is required".to_owned()));
        fields[0].value = "Ada".into();
        let content = form_content(&fields).unwrap();
        assert_eq!(
            Value::Object(content),
            json!({"name": "Ada", "age": 42, "ok": false, "pick": "a"})
        );
        fields[1].value = "many".into();
        assert!(form_content(&fields).unwrap_err().contains("whole number"));
    }
}
