//! The chat's state: the conversation as shown, the input line, the open dialogs and pages, and
//! how keys and agent events change it. Pure: no terminal, no clock (durations are set by the
//! driver), so rendering it is deterministic.

use std::collections::VecDeque;
use std::time::Duration;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;
use warden_agent::AgentEvent;

use crate::commands::{PromptInfo, SlashCommand, completions, parse};
use crate::dialogs::{ApprovalDialog, ElicitationDialog, TrustDialog};
use crate::sources::{McpRow, SourceRow};

/// Where a tool call stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallState {
    Running,
    Done,
    Failed,
    Denied(String),
    Cancelled,
    /// Another gate decision (`timed_out`, …).
    Other(String),
}

/// The last progress notification of a call.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressView {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// One tool call as shown.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallView {
    pub id: String,
    pub public_name: String,
    /// `built-in` or the server's name.
    pub source: String,
    pub arguments: Value,
    pub elapsed: Duration,
    pub progress: Option<ProgressView>,
    pub state: CallState,
}

/// One block of the conversation as shown.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    User(String),
    /// Markdown from the model (streamed into the last one).
    Assistant(String),
    Tool(ToolCallView),
    /// A one-line note from warden.
    Notice(String),
    /// A one-line problem.
    Error(String),
    /// Messages an MCP prompt returned, rendered into the conversation.
    PromptMessage {
        role: String,
        text: String,
    },
}

/// A page over the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Page {
    /// `/tools`: the list of sources, `open` when one source's page is shown.
    Tools {
        selected: usize,
        open: Option<usize>,
    },
    /// `/mcp`.
    Mcp,
}

/// What the driver must do after a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Send this prompt to the model.
    Submit(String),
    /// Run this command.
    Command(SlashCommand),
    /// Ctrl-C: cancel the running turn (and its calls).
    CancelTurn,
    /// Ctrl-D: quit.
    Quit,
    /// Enter on a server's page: reconnect it in the background.
    Reconnect(String),
}

/// The whole chat state.
#[derive(Debug, Default)]
pub struct App {
    pub entries: Vec<Entry>,
    pub input: String,
    /// A turn is running.
    pub busy: bool,
    /// The model's name, shown in the status line.
    pub model: String,
    pub page: Option<Page>,
    /// Sources for `/tools` (refreshed by the driver while the page is open).
    pub sources: Vec<SourceRow>,
    /// Rows for `/mcp`.
    pub mcp_rows: Vec<McpRow>,
    pub approvals: VecDeque<ApprovalDialog>,
    pub elicitations: VecDeque<ElicitationDialog>,
    pub trust: VecDeque<TrustDialog>,
    /// Lines scrolled up from the bottom of the conversation.
    pub scroll: u16,
    pub prompts: Vec<PromptInfo>,
    pub skills: Vec<String>,
    /// Inputs sent before, for Up/Down.
    history: Vec<String>,
    history_index: Option<usize>,
    /// Whether the last entry may still receive streamed text.
    streaming: bool,
}

impl App {
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            ..Self::default()
        }
    }

    pub fn notice(&mut self, text: impl Into<String>) {
        self.streaming = false;
        self.entries.push(Entry::Notice(text.into()));
    }

    pub fn error(&mut self, text: impl Into<String>) {
        self.streaming = false;
        self.entries.push(Entry::Error(text.into()));
    }

    pub fn push(&mut self, entry: Entry) {
        self.streaming = false;
        self.entries.push(entry);
    }

    /// A note that arrives on its own, not in answer to the turn (a server's state changed,
    /// background work finished). While the model's reply is streaming it goes above that
    /// reply, which keeps receiving text as one block; otherwise it goes last.
    pub fn aside(&mut self, entry: Entry) {
        if self.streaming && matches!(self.entries.last(), Some(Entry::Assistant(_))) {
            let reply = self.entries.len() - 1;
            self.entries.insert(reply, entry);
        } else {
            self.push(entry);
        }
    }

    /// [`Self::aside`] for a one-line problem.
    pub fn aside_error(&mut self, text: impl Into<String>) {
        self.aside(Entry::Error(text.into()));
    }

    /// [`Self::aside`] for a one-line note.
    pub fn aside_notice(&mut self, text: impl Into<String>) {
        self.aside(Entry::Notice(text.into()));
    }

    /// Completion candidates for the input line.
    pub fn completions(&self) -> Vec<String> {
        completions(&self.input, &self.prompts, &self.skills)
    }

    /// The calls still running.
    pub fn running_calls(&mut self) -> impl Iterator<Item = &mut ToolCallView> {
        self.entries.iter_mut().filter_map(|entry| match entry {
            Entry::Tool(call) if call.state == CallState::Running => Some(call),
            _ => None,
        })
    }

    fn call_mut(&mut self, id: &str) -> Option<&mut ToolCallView> {
        self.entries.iter_mut().rev().find_map(|entry| match entry {
            Entry::Tool(call) if call.id == id => Some(call),
            _ => None,
        })
    }

    /// Applies an event of the agent loop; `source_of` names a tool's source.
    pub fn apply(&mut self, event: AgentEvent, source_of: &dyn Fn(&str) -> String) {
        match event {
            AgentEvent::TextDelta { text } => {
                if self.streaming
                    && let Some(Entry::Assistant(current)) = self.entries.last_mut()
                {
                    current.push_str(&text);
                } else {
                    self.entries.push(Entry::Assistant(text));
                    self.streaming = true;
                }
            }
            AgentEvent::ToolCallStarted {
                id,
                name,
                arguments,
            } => {
                let source = source_of(&name);
                self.push(Entry::Tool(ToolCallView {
                    id,
                    public_name: name,
                    source,
                    arguments,
                    elapsed: Duration::ZERO,
                    progress: None,
                    state: CallState::Running,
                }));
            }
            AgentEvent::ToolProgress {
                id,
                message,
                progress,
                total,
            } => {
                if let Some(call) = self.call_mut(&id) {
                    call.progress = Some(ProgressView {
                        progress: progress.unwrap_or(0.0),
                        total,
                        message,
                    });
                }
            }
            AgentEvent::ToolCallFinished { id, name, result } => {
                // What went wrong without deciding the call (a hook that could not run).
                for warning in &result.warnings {
                    self.notice(format!("warning: {name}: {warning}"));
                }
                let state = match (result.decision.as_str(), result.denial) {
                    ("allowed", _) if result.is_error => CallState::Failed,
                    ("allowed", _) => CallState::Done,
                    ("cancelled", _) => CallState::Cancelled,
                    (_, Some(reason)) => CallState::Denied(reason),
                    (other, None) => CallState::Other(other.to_owned()),
                };
                match self.call_mut(&id) {
                    Some(call) => call.state = state,
                    None => {
                        // Finished without starting (bad arguments, cancelled before it ran).
                        let source = source_of(&name);
                        self.push(Entry::Tool(ToolCallView {
                            id,
                            public_name: name,
                            source,
                            arguments: Value::Null,
                            elapsed: Duration::ZERO,
                            progress: None,
                            state,
                        }));
                    }
                }
            }
            AgentEvent::ModelRetry {
                attempt, reason, ..
            } => self.notice(format!("retrying the model request ({attempt}): {reason}")),
            AgentEvent::ContextElided { results, .. } => self.notice(format!(
                "{results} old tool result(s) elided to fit the context budget"
            )),
            AgentEvent::TurnStarted { .. } => self.streaming = false,
            AgentEvent::ToolsChanged { added, warnings } => {
                for warning in warnings {
                    self.aside_error(format!("warning: {warning}"));
                }
                if !added.is_empty() {
                    self.aside_notice(format!(
                        "now offered to the model (a server's tools changed): {}",
                        added.join(", ")
                    ));
                }
            }
            _ => {}
        }
    }

    /// Handles one key; the driver carries out the returned action.
    pub fn key(&mut self, key: KeyEvent) -> Option<Action> {
        let control = key.modifiers.contains(KeyModifiers::CONTROL);
        if control && key.code == KeyCode::Char('d') {
            return Some(Action::Quit);
        }
        if let Some(dialog) = self.trust.front_mut() {
            if dialog.key(key).is_some() {
                self.trust.pop_front();
            }
            return None;
        }
        if control && key.code == KeyCode::Char('c') {
            return self.interrupt();
        }
        if let Some(dialog) = self.approvals.front_mut() {
            if dialog.key(key).is_some() {
                self.approvals.pop_front();
            }
            return None;
        }
        if let Some(dialog) = self.elicitations.front_mut() {
            if dialog.key(key).is_some() {
                self.elicitations.pop_front();
            }
            return None;
        }
        if self.page.is_some() {
            return self.page_key(key);
        }
        self.input_key(key)
    }

    /// Ctrl-C: answer any open dialog with "no", cancel the turn, or clear the input.
    fn interrupt(&mut self) -> Option<Action> {
        for mut dialog in self.approvals.drain(..) {
            dialog.answer(warden_policy::ApprovalAnswer::Deny {
                reason: Some("the user cancelled the turn".to_owned()),
            });
        }
        for mut dialog in self.elicitations.drain(..) {
            dialog.answer(warden_mcp::ElicitationResponse::Cancel);
        }
        if self.busy {
            return Some(Action::CancelTurn);
        }
        if self.page.is_some() {
            self.page = None;
        } else if !self.input.is_empty() {
            self.input.clear();
        } else {
            self.notice("nothing is running; Ctrl-D quits");
        }
        None
    }

    fn page_key(&mut self, key: KeyEvent) -> Option<Action> {
        let count = self.sources.len();
        match (&mut self.page, key.code) {
            (Some(Page::Tools { open: Some(_), .. }), KeyCode::Esc) => {
                if let Some(Page::Tools { open, .. }) = &mut self.page {
                    *open = None;
                }
            }
            (
                Some(Page::Tools {
                    open: Some(index), ..
                }),
                KeyCode::Enter,
            ) => {
                let row = self.sources.get(*index)?;
                if row.is_server {
                    return Some(Action::Reconnect(row.name.clone()));
                }
            }
            (
                Some(Page::Tools {
                    selected,
                    open: None,
                }),
                code,
            ) => match code {
                KeyCode::Esc => self.page = None,
                KeyCode::Up if *selected > 0 => *selected -= 1,
                KeyCode::Down if *selected + 1 < count => *selected += 1,
                KeyCode::Enter if *selected < count => {
                    let index = *selected;
                    if let Some(Page::Tools { open, .. }) = &mut self.page {
                        *open = Some(index);
                    }
                }
                _ => {}
            },
            (Some(Page::Mcp), KeyCode::Esc) => self.page = None,
            _ => {}
        }
        None
    }

    fn input_key(&mut self, key: KeyEvent) -> Option<Action> {
        match key.code {
            KeyCode::Enter => {
                let line = std::mem::take(&mut self.input);
                let line = line.trim().to_owned();
                if line.is_empty() {
                    return None;
                }
                self.history.push(line.clone());
                self.history_index = None;
                self.scroll = 0;
                match parse(&line) {
                    Some(command) => Some(Action::Command(command)),
                    None => Some(Action::Submit(line)),
                }
            }
            KeyCode::Tab => {
                if let Some(first) = self.completions().first()
                    && !self.input.contains(char::is_whitespace)
                {
                    self.input = format!("{first} ");
                }
                None
            }
            KeyCode::Backspace => {
                self.input.pop();
                None
            }
            KeyCode::Up => {
                let next = match self.history_index {
                    None => self.history.len().checked_sub(1),
                    Some(index) => index.checked_sub(1).or(Some(index)),
                };
                if let Some(index) = next
                    && let Some(line) = self.history.get(index)
                {
                    self.input = line.clone();
                    self.history_index = Some(index);
                }
                None
            }
            KeyCode::Down => {
                if let Some(index) = self.history_index {
                    if let Some(line) = self.history.get(index + 1) {
                        self.input = line.clone();
                        self.history_index = Some(index + 1);
                    } else {
                        self.input.clear();
                        self.history_index = None;
                    }
                }
                None
            }
            KeyCode::PageUp => {
                self.scroll = self.scroll.saturating_add(10);
                None
            }
            KeyCode::PageDown => {
                self.scroll = self.scroll.saturating_sub(10);
                None
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                self.input.push(c);
                None
            }
            _ => None,
        }
    }
}

/// A compact one-line rendering of a call's arguments (folded).
pub(crate) fn fold_arguments(arguments: &Value, width: usize) -> String {
    let text = match arguments {
        Value::Null => String::new(),
        Value::Object(map) if map.is_empty() => String::new(),
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| match value {
                Value::String(text) => format!("{key}={text:?}"),
                other => format!("{key}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    };
    let text = text.replace('\n', "⏎");
    if text.chars().count() > width {
        let cut: String = text.chars().take(width.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// Arguments as `key: value` lines for a dialog.
pub(crate) fn argument_lines(arguments: &Value) -> Vec<String> {
    match arguments {
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| match value {
                Value::String(text) => format!("{key}: {text}"),
                other => format!("{key}: {other}"),
            })
            .collect(),
        Value::Null => Vec::new(),
        other => vec![other.to_string()],
    }
}
