//! The agent loop: ask the model, run the tool calls it makes through a `ToolExecutor` (read-only ones concurrently), repeat until it stops; events to an `EventSink`, in order.

use std::sync::Arc;

use futures::future::{BoxFuture, join_all};
use serde::Serialize;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::budget::{TokenBudget, elide_oldest_tool_results};
use crate::conversation::{Message, ToolCall, ToolSpec, Usage};
use crate::provider::{DeferredTools, ModelClient, ModelDelta, ModelRequest, ProviderError};
use warden_config::DeferMode;
use warden_vocab::Decision;

/// A tool call handed to the executor.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallRequest {
    /// The model's id for this call.
    pub id: String,
    /// The name the model used (as offered in the tool list).
    pub public_name: String,
    pub arguments: serde_json::Value,
}

/// What a tool call came to, as the model and the frontends see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolCallResult {
    /// The text sent back to the model.
    pub text: String,
    pub is_error: bool,
    /// The gate's decision (serialized as its audit name: `allowed`, `denied`, `timed_out`…).
    pub decision: Decision,
    /// Why it was denied, when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denial: Option<String>,
    /// Deferred tools this result reveals (a search in `reference` defer mode): sent to the model
    /// as `tool_reference` blocks where the wire can (see [`Message::ToolReferences`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_references: Vec<String>,
    /// What went wrong without deciding the call (a hook that could not run), for the frontend
    /// to show.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl ToolCallResult {
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
            decision: Decision::Allowed,
            denial: None,
            tool_references: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
            decision: Decision::Allowed,
            denial: None,
            tool_references: Vec::new(),
            warnings: Vec::new(),
        }
    }

    pub fn denied(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self {
            text: format!("denied: {reason}"),
            is_error: true,
            decision: Decision::Denied,
            denial: Some(reason),
            tool_references: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn cancelled() -> Self {
        Self {
            text: "cancelled by the user before it finished".into(),
            is_error: true,
            decision: Decision::Cancelled,
            denial: None,
            tool_references: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// Runs tool calls. The lead's gate implements this; the loop never runs a tool itself.
pub trait ToolExecutor: Send + Sync {
    /// Whether calls to this tool may run concurrently with other read-only calls.
    fn is_read_only(&self, public_name: &str) -> bool;

    /// Runs one call. It should return promptly once `cancel` fires.
    fn execute<'a>(
        &'a self,
        call: ToolCallRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, ToolCallResult>;

    /// Called before each model request: brings the shared tool list up to date with what
    /// changed since the last request (a server's `list_changed`, a reconnect). Returns what
    /// changed, for the frontends; the default changes nothing.
    fn refresh_tools(&self) -> BoxFuture<'_, ToolRefresh> {
        Box::pin(async { ToolRefresh::default() })
    }
}

/// What [`ToolExecutor::refresh_tools`] changed before a model request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolRefresh {
    /// Public names appended to the tool list.
    pub added: Vec<String>,
    /// Lists that could not be brought up to date, or catalogue warnings noticed meanwhile
    /// (one line each).
    pub warnings: Vec<String>,
}

impl ToolRefresh {
    /// Whether nothing changed and nothing went wrong.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.warnings.is_empty()
    }
}

/// The tools a run offers the model. Shared, so a tool that loads others (a deferred-tool
/// search) can append them; entries are never removed or rewritten, so the bytes the model saw
/// before stay the same and a prompt cache survives. Beside them, the session's deferred tools
/// for the wire formats that send definitions with `defer_loading` (set once, never changed).
#[derive(Debug, Clone, Default)]
pub struct ToolList(Arc<std::sync::RwLock<OfferedTools>>);

#[derive(Debug, Default)]
struct OfferedTools {
    tools: Vec<ToolSpec>,
    mode: DeferMode,
    deferred: Vec<ToolSpec>,
}

impl ToolList {
    /// The tools offered now.
    pub fn snapshot(&self) -> Vec<ToolSpec> {
        self.0
            .read()
            .map(|offered| offered.tools.clone())
            .unwrap_or_default()
    }

    /// Whether a tool of this name is offered (not counting deferred definitions).
    pub fn contains(&self, name: &str) -> bool {
        self.0
            .read()
            .is_ok_and(|offered| offered.tools.iter().any(|tool| tool.name == name))
    }

    /// Appends the tools not offered yet (by name); returns how many were added.
    pub fn append(&self, specs: impl IntoIterator<Item = ToolSpec>) -> usize {
        let Ok(mut offered) = self.0.write() else {
            return 0;
        };
        let mut added = 0;
        for spec in specs {
            if !offered.tools.iter().any(|tool| tool.name == spec.name)
                && !offered.deferred.iter().any(|tool| tool.name == spec.name)
            {
                offered.tools.push(spec);
                added += 1;
            }
        }
        added
    }

    /// Sets the defer mode and the deferred definitions the wire sends with `defer_loading`
    /// (`reference` and `tool-search`; empty for the other modes). Done once, before the first
    /// request: changing them later would rewrite the tools array.
    pub fn set_deferred(&self, mode: DeferMode, deferred: Vec<ToolSpec>) {
        if let Ok(mut offered) = self.0.write() {
            offered.mode = mode;
            offered.deferred = deferred;
        }
    }

    /// The defer mode and the deferred definitions.
    pub fn deferred(&self) -> (DeferMode, Vec<ToolSpec>) {
        self.0
            .read()
            .map(|offered| (offered.mode, offered.deferred.clone()))
            .unwrap_or_default()
    }
}

impl From<Vec<ToolSpec>> for ToolList {
    fn from(tools: Vec<ToolSpec>) -> Self {
        Self(Arc::new(std::sync::RwLock::new(OfferedTools {
            tools,
            ..OfferedTools::default()
        })))
    }
}

/// Limits of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentOptions {
    /// Model turns allowed in one `run` (`None`: unlimited).
    pub max_turns: Option<u32>,
    /// Token budget for the request (system + tools + messages); `None`: the model's context window.
    pub context_budget: Option<u64>,
    /// Tokens kept free for the answer when the budget comes from the context window; `None`:
    /// a quarter of the window, 8,192 at most ([`crate::output_reserve`]).
    pub reserve_output_tokens: Option<u64>,
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered without calling tools.
    Completed,
    MaxTurns,
    Cancelled,
}

/// Where a session's events go. [`EventSink::emit`] is called in order on the task that runs
/// the loop, before the call it announces starts and after it ends: a frontend that must act
/// before a call runs (an editor's diff of the file about to change) does it there. Send
/// anything slow on; a channel's sender is a sink.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: AgentEvent);
}

impl EventSink for UnboundedSender<AgentEvent> {
    fn emit(&self, event: AgentEvent) {
        // A closed receiver: nobody follows this session any more.
        let _ = self.send(event);
    }
}

/// A shared event sink.
pub type Events = Arc<dyn EventSink>;

/// Something that happened, for frontends (text, json, stream-json, TUI).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    TurnStarted {
        turn: u32,
    },
    TextDelta {
        text: String,
    },
    /// The model's reasoning as it streams (where the provider gives it): not the answer.
    ThinkingDelta {
        text: String,
    },
    /// The model began a tool call (arguments still streaming).
    ToolCallStreaming {
        id: String,
        name: String,
    },
    ModelRetry {
        attempt: u32,
        delay_ms: u64,
        reason: String,
    },
    ToolCallStarted {
        id: String,
        name: String,
        arguments: serde_json::Value,
    },
    ToolCallFinished {
        id: String,
        name: String,
        result: ToolCallResult,
    },
    /// Progress of a running call; sent by the executor (e.g. MCP progress notifications)
    /// through a clone of the events sender.
    ToolProgress {
        id: String,
        message: Option<String>,
        progress: Option<f64>,
        total: Option<f64>,
    },
    Usage {
        turn: u32,
        usage: Usage,
        total: Usage,
    },
    ContextElided {
        results: usize,
        estimated_tokens_before: u64,
        estimated_tokens_after: u64,
    },
    TurnEnded {
        turn: u32,
        /// `tool_calls` when the loop goes on; otherwise the stop reason.
        reason: String,
    },
    /// The gate asks a person about call `id` before it runs, and says why.
    ToolApprovalAsked {
        id: String,
        name: String,
        reason: String,
    },
    /// The answer to [`AgentEvent::ToolApprovalAsked`]: whether call `id` runs, who answered
    /// (none: the wait was cancelled or there was nobody to ask), and the reason as the audit
    /// records it.
    ToolApprovalDecided {
        id: String,
        name: String,
        allowed: bool,
        answered_by: Option<String>,
        reason: String,
    },
    /// The model stated its plan (`update_plan`, once the gate let the call through): the
    /// whole plan each time.
    PlanUpdated {
        id: String,
        entries: Vec<crate::PlanEntry>,
    },
    /// Before a model request the tool list changed (tools a server added since are offered
    /// from this request on), or a list could not be refreshed.
    ToolsChanged {
        added: Vec<String>,
        warnings: Vec<String>,
    },
}

/// One finished tool call, for summaries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallRecord {
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
    pub result: ToolCallResult,
}

/// The end of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunOutcome {
    /// The text of the last assistant message.
    pub final_text: String,
    pub turns: u32,
    pub stop: StopReason,
    pub usage: Usage,
    pub tool_calls: Vec<ToolCallRecord>,
}

/// A run failed (the conversation keeps everything up to the failure).
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Model(#[from] ProviderError),
}

/// The loop, configured.
pub struct Agent {
    client: Arc<dyn ModelClient>,
    executor: Arc<dyn ToolExecutor>,
    system_prompt: String,
    tools: ToolList,
    options: AgentOptions,
    events: Option<Events>,
    checkpoint: Option<Checkpoint>,
}

/// Called with the whole conversation each time a run adds to it (the model's answer, then a
/// turn's tool results), so a frontend can keep it as it happens: the run goes on once the
/// returned future is done, so a crash loses at most the turn in flight.
pub type Checkpoint = Arc<dyn Fn(&[Message]) -> BoxFuture<'static, ()> + Send + Sync>;

impl Agent {
    pub fn new(
        client: Arc<dyn ModelClient>,
        executor: Arc<dyn ToolExecutor>,
        system_prompt: String,
        tools: impl Into<ToolList>,
    ) -> Self {
        Self {
            client,
            executor,
            system_prompt,
            tools: tools.into(),
            options: AgentOptions::default(),
            events: None,
            checkpoint: None,
        }
    }

    /// Keeps the conversation with `checkpoint` as the run adds to it.
    pub fn with_checkpoint(mut self, checkpoint: Checkpoint) -> Self {
        self.checkpoint = Some(checkpoint);
        self
    }

    async fn checkpoint(&self, conversation: &[Message]) {
        if let Some(checkpoint) = &self.checkpoint {
            checkpoint(conversation).await;
        }
    }

    pub fn with_options(mut self, options: AgentOptions) -> Self {
        self.options = options;
        self
    }

    /// Events go to `events` as they happen (a channel's sender, or any [`EventSink`]).
    pub fn with_events(mut self, events: impl EventSink + 'static) -> Self {
        self.events = Some(Arc::new(events));
        self
    }

    /// [`Agent::with_events`] with a sink already shared (with the executor, which reports
    /// [`AgentEvent::ToolProgress`] and [`AgentEvent::PlanUpdated`]).
    pub fn with_event_sink(mut self, events: Events) -> Self {
        self.events = Some(events);
        self
    }

    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    /// The tools offered now (tools loaded during the run are appended).
    pub fn tools(&self) -> Vec<ToolSpec> {
        self.tools.snapshot()
    }

    fn emit(&self, event: AgentEvent) {
        if let Some(events) = &self.events {
            events.emit(event);
        }
    }

    /// Runs turns on `conversation` (which ends with the user's message) until the model stops,
    /// `max_turns` is reached or `cancel` fires. Messages are appended to `conversation` as they
    /// are final; a cancelled model call leaves nothing behind, a cancelled tool batch leaves a
    /// result for every call.
    pub async fn run(
        &self,
        conversation: &mut Vec<Message>,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, AgentError> {
        let mut total = Usage::default();
        let mut records = Vec::new();
        let mut turn = 0u32;
        let budget = TokenBudget {
            tokens: self.options.context_budget.unwrap_or_else(|| {
                let window = self.client.context_window();
                let reserve = self
                    .options
                    .reserve_output_tokens
                    .unwrap_or_else(|| crate::budget::output_reserve(window));
                window.saturating_sub(reserve)
            }),
        };
        loop {
            if cancel.is_cancelled() {
                return Ok(self.outcome(conversation, turn, StopReason::Cancelled, total, records));
            }
            if let Some(max) = self.options.max_turns
                && turn >= max
            {
                return Ok(self.outcome(conversation, turn, StopReason::MaxTurns, total, records));
            }
            turn += 1;
            self.emit(AgentEvent::TurnStarted { turn });
            // Tools a server added since the last request join the list before it is read.
            let refresh = self.executor.refresh_tools().await;
            if !refresh.is_empty() {
                self.emit(AgentEvent::ToolsChanged {
                    added: refresh.added,
                    warnings: refresh.warnings,
                });
            }
            // Read once per turn: a tool loaded by a call of this turn is offered from the next.
            let tools = self.tools.snapshot();
            let (defer_mode, deferred_tools) = self.tools.deferred();
            if let Some(elision) =
                elide_oldest_tool_results(&self.system_prompt, &tools, conversation, budget)
            {
                self.emit(AgentEvent::ContextElided {
                    results: elision.results,
                    estimated_tokens_before: elision.before,
                    estimated_tokens_after: elision.after,
                });
            }
            let events = self.events.clone();
            let on_delta = move |delta: ModelDelta| {
                if let Some(events) = &events {
                    events.emit(match delta {
                        ModelDelta::Text { text } => AgentEvent::TextDelta { text },
                        ModelDelta::Thinking { text } => AgentEvent::ThinkingDelta { text },
                        ModelDelta::ToolCallStarted { id, name } => {
                            AgentEvent::ToolCallStreaming { id, name }
                        }
                        ModelDelta::Retrying {
                            attempt,
                            delay_ms,
                            reason,
                        } => AgentEvent::ModelRetry {
                            attempt,
                            delay_ms,
                            reason,
                        },
                    });
                }
            };
            let request = ModelRequest {
                system: &self.system_prompt,
                messages: conversation,
                tools: &tools,
            };
            let deferred = DeferredTools {
                mode: defer_mode,
                tools: &deferred_tools,
            };
            let response = match self
                .client
                .complete_with(request, deferred, &on_delta, cancel)
                .await
            {
                Ok(response) => response,
                Err(ProviderError::Cancelled) => {
                    self.emit(AgentEvent::TurnEnded {
                        turn,
                        reason: "cancelled".into(),
                    });
                    return Ok(self.outcome(
                        conversation,
                        turn,
                        StopReason::Cancelled,
                        total,
                        records,
                    ));
                }
                Err(error) => {
                    self.emit(AgentEvent::TurnEnded {
                        turn,
                        reason: "error".into(),
                    });
                    return Err(error.into());
                }
            };
            total.add(response.usage);
            self.emit(AgentEvent::Usage {
                turn,
                usage: response.usage,
                total,
            });
            let calls = response.tool_calls.clone();
            if let Some((provider, blocks)) = response.provider_blocks {
                conversation.push(Message::ProviderBlocks { provider, blocks });
            }
            conversation.push(Message::Assistant {
                text: response.text,
                tool_calls: response.tool_calls,
            });
            self.checkpoint(conversation).await;
            if calls.is_empty() {
                self.emit(AgentEvent::TurnEnded {
                    turn,
                    reason: "completed".into(),
                });
                return Ok(self.outcome(conversation, turn, StopReason::Completed, total, records));
            }
            let results = self.run_calls(&calls, cancel).await;
            for (call, (arguments, result)) in calls.iter().zip(results) {
                conversation.push(Message::ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    text: result.text.clone(),
                    is_error: result.is_error,
                    elided: false,
                });
                if !result.tool_references.is_empty() {
                    conversation.push(Message::ToolReferences {
                        call_id: call.id.clone(),
                        tool_names: result.tool_references.clone(),
                    });
                }
                records.push(ToolCallRecord {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    arguments,
                    result,
                });
            }
            self.checkpoint(conversation).await;
            if cancel.is_cancelled() {
                self.emit(AgentEvent::TurnEnded {
                    turn,
                    reason: "cancelled".into(),
                });
                return Ok(self.outcome(conversation, turn, StopReason::Cancelled, total, records));
            }
            self.emit(AgentEvent::TurnEnded {
                turn,
                reason: "tool_calls".into(),
            });
        }
    }

    fn outcome(
        &self,
        conversation: &[Message],
        turns: u32,
        stop: StopReason,
        usage: Usage,
        tool_calls: Vec<ToolCallRecord>,
    ) -> RunOutcome {
        let final_text = conversation
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant { text, .. } if !text.is_empty() => Some(text.clone()),
                _ => None,
            })
            .unwrap_or_default();
        RunOutcome {
            final_text,
            turns,
            stop,
            usage,
            tool_calls,
        }
    }

    /// Runs the calls of one turn: consecutive read-only calls together, the others one at a
    /// time in order. Results come back in call order.
    async fn run_calls(
        &self,
        calls: &[ToolCall],
        cancel: &CancellationToken,
    ) -> Vec<(serde_json::Value, ToolCallResult)> {
        let mut results: Vec<(serde_json::Value, ToolCallResult)> = Vec::with_capacity(calls.len());
        let mut index = 0;
        while index < calls.len() {
            let read_only = self.executor.is_read_only(&calls[index].name);
            let end = if read_only {
                calls[index..]
                    .iter()
                    .position(|c| !self.executor.is_read_only(&c.name))
                    .map_or(calls.len(), |offset| index + offset)
            } else {
                index + 1
            };
            let batch = &calls[index..end];
            let futures = batch.iter().map(|call| self.run_one(call, cancel));
            results.extend(join_all(futures).await);
            index = end;
        }
        results
    }

    async fn run_one(
        &self,
        call: &ToolCall,
        cancel: &CancellationToken,
    ) -> (serde_json::Value, ToolCallResult) {
        // Every call the model made reaches the executor (the gate, which records it), even
        // one whose arguments are not JSON — passed as the raw text, which no tool's schema
        // admits — or one cancelled before it started.
        let (arguments, malformed) = match call.parsed_arguments() {
            Ok(arguments) => (arguments, None),
            Err(error) => (
                serde_json::Value::String(call.arguments.clone()),
                Some(error),
            ),
        };
        self.emit(AgentEvent::ToolCallStarted {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: arguments.clone(),
        });
        let request = ToolCallRequest {
            id: call.id.clone(),
            public_name: call.name.clone(),
            arguments: arguments.clone(),
        };
        let mut result = self.executor.execute(request, cancel.child_token()).await;
        if let Some(error) = malformed {
            result = ToolCallResult::error(format!(
                "the arguments of this call are not valid JSON ({error}); send a JSON object"
            ));
        } else if cancel.is_cancelled() && result.text.is_empty() {
            result = ToolCallResult::cancelled();
        }
        self.emit(AgentEvent::ToolCallFinished {
            id: call.id.clone(),
            name: call.name.clone(),
            result: result.clone(),
        });
        (arguments, result)
    }
}
