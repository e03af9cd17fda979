//! The provider-neutral conversation: messages with text, tool calls and tool results; tool specs; usage.

use serde::{Deserialize, Serialize};

/// One tool call the model asked for. `arguments` is the JSON text as the model produced it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl ToolCall {
    /// The arguments parsed; an empty string counts as `{}`.
    pub fn parsed_arguments(&self) -> Result<serde_json::Value, serde_json::Error> {
        if self.arguments.trim().is_empty() {
            Ok(serde_json::Value::Object(serde_json::Map::new()))
        } else {
            serde_json::from_str(&self.arguments)
        }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        text: String,
    },
    Assistant {
        text: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, sent back to the model.
    ToolResult {
        call_id: String,
        name: String,
        text: String,
        #[serde(default)]
        is_error: bool,
        /// True once the text was replaced by an elision notice to fit the context budget.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        elided: bool,
    },
    /// Blocks the provider produced in the assistant's turn and wants back as they were: its
    /// reasoning (Anthropic `thinking` blocks with their `signature`, `redacted_thinking`) and
    /// what it ran itself (its native tool search: Anthropic `server_tool_use` and
    /// `tool_search_tool_result`, OpenAI `tool_search_call` and `tool_search_output`). Sent
    /// back unchanged, before that turn's assistant message, and only to the provider that
    /// made them (`provider` is its config name, e.g. `anthropic`).
    ProviderBlocks {
        provider: String,
        blocks: Vec<serde_json::Value>,
    },
    /// The tools a search result (the call `call_id`) reveals, in `reference` defer mode: the
    /// Anthropic wire sends that tool result as `tool_reference` blocks the API expands into the
    /// deferred definitions. Other wires ignore it (the result's text stands).
    ToolReferences {
        call_id: String,
        tool_names: Vec<String>,
    },
}

impl Message {
    pub fn user(text: impl Into<String>) -> Self {
        Message::User { text: text.into() }
    }

    /// Rough size in bytes of what this message sends.
    pub fn byte_len(&self) -> usize {
        match self {
            Message::User { text } => text.len(),
            Message::Assistant { text, tool_calls } => {
                text.len()
                    + tool_calls
                        .iter()
                        .map(|c| c.id.len() + c.name.len() + c.arguments.len())
                        .sum::<usize>()
            }
            Message::ToolResult {
                call_id,
                name,
                text,
                ..
            } => call_id.len() + name.len() + text.len(),
            Message::ProviderBlocks { blocks, .. } => {
                blocks.iter().map(|block| block.to_string().len()).sum()
            }
            Message::ToolReferences {
                call_id,
                tool_names,
            } => call_id.len() + tool_names.iter().map(String::len).sum::<usize>(),
        }
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object.
    pub input_schema: serde_json::Value,
}

/// Tokens used, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache (part of `input_tokens` where the provider counts them there).
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Whether the provider reported usage at all: a server that sends none (many local ones)
    /// leaves it false, and the counts above are then unknown, not zero.
    #[serde(default)]
    pub reported: bool,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.reported |= other.reported;
    }

    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}
