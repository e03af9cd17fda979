//! Tasks and contexts: a context is one agent session, a task is one turn of it, run on its own
//! tokio task. A task's status changes are kept (for `GetTask`) and sent to whoever streams it;
//! tool calls and MCP progress go out as status updates with `warden/tool` and
//! `warden/progress` metadata; the gate's questions make the task `input-required` until the
//! client's next message in the task answers.

use std::collections::HashMap;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::Stream;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, oneshot, watch};
use tokio_util::sync::CancellationToken;
use warden_agent::{AgentEvent, EventSink, Events, Message, Session as Transcript, ToolList};
use warden_policy::{ApprovalAnswer, ApprovalRequest, Approver, BoxFuture, CallSurface, Decision};
use warden_session::{AgentSession, Turn, clip_result};

use crate::protocol::{self, Incoming, RpcError, TaskState, code};
use crate::{Profile, SessionOpener};

/// Events kept for a slow stream reader before it skips some.
const EVENT_BUFFER: usize = 1024;
/// How long `CancelTask` waits for the turn to stop before it answers with the task as it is.
const CANCEL_WAIT: Duration = Duration::from_secs(30);
/// Finished tasks kept for `GetTask` beyond which the oldest are forgotten.
const KEPT_TASKS: usize = 1000;
/// The metadata key that picks an agent profile in a context's first message.
pub(crate) const AGENT_KEY: &str = "warden/agent";
/// The answers to an approval question.
const ANSWERS: [&str; 3] = ["allow", "allow always", "deny"];

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn new_id() -> String {
    warden_net::random_hex(16).unwrap_or_else(|_| {
        // The system generator failed: a unique, if guessable, id still works; ids are no
        // secrets (every request needs the token).
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        format!("id-{}", NEXT.fetch_add(1, Ordering::Relaxed))
    })
}

/// Every context and task of one server.
pub(crate) struct Agent {
    opener: Arc<dyn SessionOpener>,
    /// The agents the card offers.
    profiles: Vec<Profile>,
    /// Who the token's holder is, for the audit (the token's fingerprint).
    identity: String,
    contexts: Mutex<HashMap<String, Arc<Context>>>,
    tasks: Mutex<HashMap<String, Arc<TaskEntry>>>,
    /// Held while a message finds or opens its context and claims it, so two first messages of
    /// one context open it once and no context is closed between being found and claimed.
    opening: tokio::sync::Mutex<()>,
    limits: Limits,
    /// Task ids, oldest first, for forgetting finished tasks beyond [`KEPT_TASKS`].
    order: Mutex<VecDeque<String>>,
}

/// How many contexts a server keeps open, and when an idle one may be closed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_contexts: usize,
    pub(crate) idle: Duration,
}

/// One context: an agent session and its conversation.
struct Context {
    id: String,
    agent: Option<String>,
    live: Arc<Live>,
    /// When its last task ended (or it opened).
    last_used: Mutex<Instant>,
    open: tokio::sync::Mutex<Open>,
}

/// The session and its conversation, held by the running turn.
struct Open {
    session: AgentSession,
    tools: ToolList,
    system_prompt: String,
    conversation: Vec<Message>,
    transcript: Transcript,
    executor: Arc<warden_session::GateExecutor>,
    /// Where the session's events go: the running task's streams.
    events: Events,
}

/// What a context's approver, executor and progress forwarder share: its running task and the
/// calls running in it.
#[derive(Default)]
struct Live {
    task: Mutex<Option<Arc<TaskEntry>>>,
    calls: Mutex<Vec<String>>,
}

impl Live {
    fn current(&self) -> Option<Arc<TaskEntry>> {
        lock(&self.task).clone()
    }

    /// Makes `task` the context's running task, unless one runs already.
    fn claim(&self, task: &Arc<TaskEntry>) -> Result<(), Arc<TaskEntry>> {
        let mut current = lock(&self.task);
        match &*current {
            Some(running) => Err(running.clone()),
            None => {
                *current = Some(task.clone());
                Ok(())
            }
        }
    }

    fn release(&self) {
        lock(&self.task).take();
        lock(&self.calls).clear();
    }

    fn is_running(&self, id: &str) -> bool {
        lock(&self.calls).iter().any(|running| running == id)
    }
}

/// A question of the gate waiting for the client.
struct Question {
    answer: oneshot::Sender<ApprovalAnswer>,
    offers_always: bool,
}

/// What `GetTask` shows of a task.
struct Record {
    status: Value,
    artifacts: Vec<Value>,
    history: Vec<Value>,
}

/// One task: its record, its state for waiters, its event feed for streams.
pub(crate) struct TaskEntry {
    id: String,
    context_id: String,
    record: Mutex<Record>,
    state: watch::Sender<TaskState>,
    /// Stream events (`StreamResponse` objects) and whether each ends a stream.
    events: broadcast::Sender<(Value, bool)>,
    cancel: CancellationToken,
    question: Mutex<Option<Question>>,
}

impl TaskEntry {
    fn new(context_id: &str, first: Value) -> Arc<Self> {
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        Arc::new(Self {
            id: new_id(),
            context_id: context_id.to_owned(),
            record: Mutex::new(Record {
                status: protocol::status(TaskState::Submitted, None),
                artifacts: Vec::new(),
                history: vec![first],
            }),
            state: watch::Sender::new(TaskState::Submitted),
            events,
            cancel: CancellationToken::new(),
            question: Mutex::new(None),
        })
    }

    fn state(&self) -> TaskState {
        *self.state.borrow()
    }

    /// The task as `GetTask` returns it, with the last `history` messages (all when `None`).
    fn snapshot(&self, history: Option<usize>) -> Value {
        let record = lock(&self.record);
        let mut task = json!({
            "id": self.id,
            "contextId": self.context_id,
            "status": record.status,
        });
        if !record.artifacts.is_empty() {
            task["artifacts"] = Value::Array(record.artifacts.clone());
        }
        let skip = history.map_or(0, |keep| record.history.len().saturating_sub(keep));
        let kept: Vec<Value> = record.history.iter().skip(skip).cloned().collect();
        if !kept.is_empty() {
            task["history"] = Value::Array(kept);
        }
        task
    }

    fn agent_message(&self, text: &str) -> Value {
        protocol::agent_message(&new_id(), &self.context_id, &self.id, text)
    }

    /// Moves the task to `state`, with the agent's `text` about it and `metadata`, and tells
    /// the streams.
    fn set_state(&self, state: TaskState, text: Option<&str>, metadata: Option<Value>) {
        let message = text.map(|text| self.agent_message(text));
        let status = protocol::status(state, message.as_ref());
        {
            let mut record = lock(&self.record);
            if let Some(message) = message {
                record.history.push(message);
            }
            record.status = status.clone();
        }
        self.state.send_replace(state);
        self.publish_status(status, metadata, state.ends_a_request());
    }

    /// A status update that keeps the state: tool activity and progress, in its metadata.
    fn publish_activity(&self, metadata: Value) {
        let status = lock(&self.record).status.clone();
        self.publish_status(status, Some(metadata), false);
    }

    fn publish_status(&self, status: Value, metadata: Option<Value>, last: bool) {
        let mut update = json!({
            "taskId": self.id,
            "contextId": self.context_id,
            "status": status,
        });
        if let Some(metadata) = metadata {
            update["metadata"] = metadata;
        }
        let _ = self.events.send((json!({ "statusUpdate": update }), last));
    }

    fn add_artifact(&self, text: &str) {
        let artifact = json!({
            "artifactId": new_id(),
            "name": "answer",
            "parts": [{"text": text}],
        });
        lock(&self.record).artifacts.push(artifact.clone());
        let update = json!({
            "taskId": self.id,
            "contextId": self.context_id,
            "artifact": artifact,
            "lastChunk": true,
        });
        let _ = self
            .events
            .send((json!({ "artifactUpdate": update }), false));
    }
}

/// A started (or answered) task and the feed of what happens to it from then on.
pub(crate) struct Started {
    task: Arc<TaskEntry>,
    events: broadcast::Receiver<(Value, bool)>,
}

impl Agent {
    pub(crate) fn new(
        opener: Arc<dyn SessionOpener>,
        identity: String,
        limits: Limits,
        profiles: Vec<Profile>,
    ) -> Self {
        Self {
            opener,
            profiles,
            identity,
            limits,
            order: Mutex::new(VecDeque::new()),
            contexts: Mutex::new(HashMap::new()),
            tasks: Mutex::new(HashMap::new()),
            opening: tokio::sync::Mutex::new(()),
        }
    }

    /// The card's skills: the agents the opener offers.
    pub(crate) fn skills(&self) -> Vec<Value> {
        self.profiles
            .iter()
            .map(|profile| {
                let name = if profile.id == "default" {
                    "warden (default agent)".to_owned()
                } else {
                    format!("warden agent {}", profile.id)
                };
                protocol::skill(&profile.id, &name, &profile.description)
            })
            .collect()
    }

    /// `SendMessage`: the task once it is done or waits for the client (or at once, when the
    /// client asked `returnImmediately`).
    pub(crate) async fn send(&self, params: &Value) -> Result<Value, RpcError> {
        let started = self.start(params).await?;
        let immediately = params
            .pointer("/configuration/returnImmediately")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if !immediately {
            let mut state = started.task.state.subscribe();
            let _ = state.wait_for(|state| state.ends_a_request()).await;
        }
        Ok(started.task.snapshot(history_length(params)))
    }

    /// `SendStreamingMessage`: the task, then its status and artifact updates until it is done
    /// or waits for the client; each with whether the stream ends after it.
    pub(crate) async fn stream(
        &self,
        params: &Value,
    ) -> Result<impl Stream<Item = (Value, bool)> + Send + 'static, RpcError> {
        let Started { task, events } = self.start(params).await?;
        let done = task.state().ends_a_request();
        let first = (json!({ "task": task.snapshot(None) }), done);
        Ok(futures::stream::unfold(
            (Some(first), events, done),
            |(first, mut events, done)| async move {
                if let Some(first) = first {
                    return Some((first, (None, events, done)));
                }
                if done {
                    return None;
                }
                loop {
                    match events.recv().await {
                        Ok((event, last)) => return Some(((event, last), (None, events, last))),
                        Err(broadcast::error::RecvError::Lagged(skipped)) => {
                            tracing::debug!("an A2A stream skipped {skipped} events");
                        }
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            },
        ))
    }

    /// `GetTask`.
    pub(crate) fn get(&self, params: &Value) -> Result<Value, RpcError> {
        let task = self.task(params)?;
        Ok(task.snapshot(history_length(params)))
    }

    /// `CancelTask`: the running tool and turn are cancelled; the task, once stopped.
    pub(crate) async fn cancel(&self, params: &Value) -> Result<Value, RpcError> {
        let task = self.task(params)?;
        let state = task.state();
        if state.is_terminal() {
            return Err(RpcError::new(
                code::TASK_NOT_CANCELABLE,
                format!("task {} is {} already", task.id, state.as_str()),
            ));
        }
        task.cancel.cancel();
        let mut watch = task.state.subscribe();
        let _ =
            tokio::time::timeout(CANCEL_WAIT, watch.wait_for(|state| state.is_terminal())).await;
        Ok(task.snapshot(history_length(params)))
    }

    fn task(&self, params: &Value) -> Result<Arc<TaskEntry>, RpcError> {
        let id = params
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("params.id is missing: name the task"))?;
        lock(&self.tasks)
            .get(id)
            .cloned()
            .ok_or_else(|| RpcError::task_not_found(id))
    }

    /// A new task in a new or existing context, or the answer to a waiting task's question.
    async fn start(&self, params: &Value) -> Result<Started, RpcError> {
        let incoming = protocol::incoming(params)?;
        let original = params.get("message").cloned().unwrap_or(Value::Null);
        if let Some(task_id) = &incoming.task_id {
            return self.answer(task_id, &incoming, original);
        }
        // Held until the task has claimed its context, so no other message closes the context
        // (to make room) in between.
        let opening = self.opening.lock().await;
        let context = self.context(&incoming).await?;
        let task = TaskEntry::new(&context.id, original);
        let claimed = context.live.claim(&task);
        drop(opening);
        if let Err(running) = claimed {
            return Err(RpcError::new(
                code::UNSUPPORTED_OPERATION,
                format!(
                    "task {} is still running in context {}: wait for it, answer it, or cancel \
                     it (CancelTask) before the next message",
                    running.id, context.id
                ),
            ));
        }
        self.remember(&task);
        let events = task.events.subscribe();
        tokio::spawn(run_task(context, task.clone(), incoming.text));
        Ok(Started { task, events })
    }

    /// Keeps `task` for `GetTask`, forgetting the oldest finished tasks beyond [`KEPT_TASKS`].
    fn remember(&self, task: &Arc<TaskEntry>) {
        let mut tasks = lock(&self.tasks);
        let mut order = lock(&self.order);
        tasks.insert(task.id.clone(), task.clone());
        order.push_back(task.id.clone());
        while tasks.len() > KEPT_TASKS {
            let Some(position) = order
                .iter()
                .position(|id| tasks.get(id).is_none_or(|task| task.state().is_terminal()))
            else {
                break;
            };
            if let Some(id) = order.remove(position) {
                tasks.remove(&id);
            }
        }
    }

    /// At the cap of contexts, closes the one idle longest if it has been idle for the idle
    /// timeout; how many are open then.
    fn make_room(&self) -> usize {
        let closed = {
            let mut contexts = lock(&self.contexts);
            if contexts.len() < self.limits.max_contexts {
                return contexts.len();
            }
            let idlest = contexts
                .values()
                .filter(|context| context.live.current().is_none())
                .map(|context| (*lock(&context.last_used), context.id.clone()))
                .min();
            match idlest {
                Some((since, id)) if since.elapsed() >= self.limits.idle => contexts.remove(&id),
                _ => None,
            }
        };
        if let Some(context) = closed {
            tracing::info!("closing the A2A context {} (idle)", context.id);
            tokio::spawn(close(context));
        }
        lock(&self.contexts).len()
    }

    /// The client's answer to the question `task_id` waits on.
    fn answer(
        &self,
        task_id: &str,
        incoming: &Incoming,
        original: Value,
    ) -> Result<Started, RpcError> {
        let task = lock(&self.tasks)
            .get(task_id)
            .cloned()
            .ok_or_else(|| RpcError::task_not_found(task_id))?;
        if incoming
            .context_id
            .as_ref()
            .is_some_and(|context| *context != task.context_id)
        {
            return Err(RpcError::invalid_params(format!(
                "task {task_id} belongs to context {}, not {}",
                task.context_id,
                incoming.context_id.as_deref().unwrap_or_default()
            )));
        }
        let mut waiting = lock(&task.question);
        let Some(question) = waiting.take() else {
            let state = task.state();
            let next = if state.is_terminal() {
                "send a new message without taskId (same contextId) to continue the conversation"
            } else {
                "it asks nothing now; wait for it or cancel it"
            };
            return Err(RpcError::new(
                code::UNSUPPORTED_OPERATION,
                format!("task {task_id} is {}: {next}", state.as_str()),
            ));
        };
        let Some(answer) = parse_answer(&incoming.text, question.offers_always) else {
            *waiting = Some(question);
            return Err(RpcError::invalid_params(format!(
                "task {task_id} waits for an approval: answer `allow`, `allow always` or `deny` \
                 (a reason may follow `deny`), not {:?}",
                incoming.text
            )));
        };
        drop(waiting);
        lock(&task.record).history.push(original);
        let events = task.events.subscribe();
        task.set_state(TaskState::Working, None, None);
        let _ = question.answer.send(answer);
        Ok(Started { task, events })
    }

    /// The message's context: an open one, or one opened now (under the id the client chose,
    /// or a new one). The caller holds `opening`.
    async fn context(&self, incoming: &Incoming) -> Result<Arc<Context>, RpcError> {
        let agent = match incoming.metadata.get(AGENT_KEY) {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(name.clone()),
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "metadata[{AGENT_KEY:?}] is {other}; give an agent's name (a skill id of the card)"
                )));
            }
        };
        if let Some(id) = &incoming.context_id
            && let Some(context) = lock(&self.contexts).get(id).cloned()
        {
            if agent.is_some() && agent != context.agent {
                return Err(RpcError::invalid_params(format!(
                    "context {id} runs agent {}; a context keeps the agent it started with \
                     (start a new context for another)",
                    context.agent.as_deref().unwrap_or("default")
                )));
            }
            return Ok(context);
        }
        let open = self.make_room();
        if open >= self.limits.max_contexts {
            return Err(RpcError::new(
                code::UNSUPPORTED_OPERATION,
                format!(
                    "{open} contexts are open, the most this server keeps (--max-sessions), and \
                     none has been idle for --session-idle-timeout: continue one of them (its \
                     contextId), or try again later"
                ),
            ));
        }
        let id = match &incoming.context_id {
            Some(id) if valid_id(id) => id.clone(),
            Some(id) => {
                return Err(RpcError::invalid_params(format!(
                    "contextId {id:?}: use up to 128 letters, digits, `-`, `_` and `.`"
                )));
            }
            None => new_id(),
        };
        let context = self.open(id, agent).await?;
        lock(&self.contexts).insert(context.id.clone(), context.clone());
        Ok(context)
    }

    async fn open(&self, id: String, agent: Option<String>) -> Result<Arc<Context>, RpcError> {
        let agent = agent.filter(|name| name != "default");
        let live = Arc::new(Live::default());
        let spec = warden_session::SessionSpec {
            agent: agent.clone(),
            approver: Some(Arc::new(ClientApprover { live: live.clone() })),
            principal: warden_session::SessionPrincipal {
                tenant: None,
                caller: Some(format!("a2a {} context={id}", self.identity)),
            },
            ..warden_session::SessionSpec::default()
        };
        let mut session = self.opener.open(spec).map_err(|error| {
            if error.is_usage() {
                RpcError::invalid_params(error.to_string())
            } else {
                RpcError::new(code::INTERNAL_ERROR, error.to_string())
            }
        })?;
        let (tools, failures) = session.tool_list().await;
        for failure in &failures {
            tracing::warn!("{failure}");
        }
        let routing = session.execution_routing().await;
        let system_prompt = session.system_prompt(routing);
        let (transcript, conversation) = session.open_transcript().map_err(|error| {
            RpcError::new(code::INTERNAL_ERROR, format!("the transcript: {error}"))
        })?;
        let events: Events = live.clone();
        let executor = session.executor_as(CallSurface::A2a, Some(events.clone()));
        let workspace = session.workspace.clone();
        session
            .host
            .session_event(warden_hooks::HookEvent::SessionStart, &workspace, None)
            .await;
        Ok(Arc::new(Context {
            id,
            agent,
            live,
            last_used: Mutex::new(Instant::now()),
            open: tokio::sync::Mutex::new(Open {
                session,
                tools,
                system_prompt,
                conversation,
                transcript,
                executor,
                events,
            }),
        }))
    }

    /// The server stops: running tasks are cancelled, each session's SessionEnd hooks run and
    /// its servers are stopped.
    pub(crate) async fn shutdown(&self) {
        let contexts: Vec<Arc<Context>> = lock(&self.contexts).drain().map(|(_, c)| c).collect();
        for context in contexts {
            close(context).await;
        }
    }
}

/// Ends a context: its running task is cancelled, its session's SessionEnd hooks run and its
/// servers stop.
async fn close(context: Arc<Context>) {
    if let Some(task) = context.live.current() {
        task.cancel.cancel();
    }
    let open = context.open.lock().await;
    let workspace = open.session.workspace.clone();
    open.session
        .host
        .session_event(warden_hooks::HookEvent::SessionEnd, &workspace, None)
        .await;
    open.session.host.shutdown().await;
}

/// `historyLength` of the request, if given.
fn history_length(params: &Value) -> Option<usize> {
    params
        .get("historyLength")
        .or_else(|| params.pointer("/configuration/historyLength"))
        .and_then(Value::as_u64)
        .map(|length| usize::try_from(length).unwrap_or(usize::MAX))
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The gate's answer for the client's words, or `None` when they are none of the answers.
pub(crate) fn parse_answer(text: &str, offers_always: bool) -> Option<ApprovalAnswer> {
    let text = text.trim();
    let end = text
        .find(|c: char| !c.is_ascii_alphabetic())
        .unwrap_or(text.len());
    let first = text[..end].to_ascii_lowercase();
    let rest = text[end..].trim_start_matches([':', ',', '-', ' ']).trim();
    let always = if offers_always {
        ApprovalAnswer::AllowAlways
    } else {
        ApprovalAnswer::AllowForSession
    };
    match (first.as_str(), rest.to_ascii_lowercase().as_str()) {
        ("allow" | "yes", "" | "once") => Some(ApprovalAnswer::AllowOnce),
        ("allow", "always") | ("always", "") => Some(always),
        ("deny" | "no" | "reject", _) => Some(ApprovalAnswer::Deny {
            reason: Some(if rest.is_empty() {
                "the A2A client denied it".to_owned()
            } else {
                format!("the A2A client denied it: {rest}")
            }),
        }),
        _ => None,
    }
}

/// Runs one task: the agent turn, then its end state.
async fn run_task(context: Arc<Context>, task: Arc<TaskEntry>, text: String) {
    let mut open = context.open.lock().await;
    task.set_state(TaskState::Working, None, None);
    let result = turn(&mut open, &task, text).await;
    drop(open);
    *lock(&context.last_used) = Instant::now();
    context.live.release();
    match result {
        Ok(Ended::Answered(answer)) => {
            if !answer.is_empty() {
                task.add_artifact(&answer);
            }
            task.set_state(TaskState::Completed, None, None);
        }
        Ok(Ended::Canceled) => task.set_state(
            TaskState::Canceled,
            Some("the task was canceled; its running tool call was stopped"),
            None,
        ),
        Err(reason) => task.set_state(TaskState::Failed, Some(&reason), None),
    }
}

enum Ended {
    /// The agent's text of this turn.
    Answered(String),
    Canceled,
}

/// One agent turn on the context's conversation: the agent's text of it, or why it failed.
async fn turn(open: &mut Open, task: &TaskEntry, text: String) -> Result<Ended, String> {
    let ended = open
        .session
        .run_turn(
            Turn {
                conversation: &mut open.conversation,
                transcript: &mut open.transcript,
                executor: open.executor.clone(),
                system_prompt: &open.system_prompt,
                tools: &open.tools,
                events: Some(open.events.clone()),
                cancel: &task.cancel,
                tick: None,
            },
            text,
        )
        .await
        .map_err(|error| error.to_string())?;
    if ended.outcome.stop == warden_agent::StopReason::Cancelled {
        return Ok(Ended::Canceled);
    }
    let said: Vec<&str> = open.conversation[ended.first_new..]
        .iter()
        .filter_map(|message| match message {
            Message::Assistant { text, .. } if !text.trim().is_empty() => Some(text.trim()),
            _ => None,
        })
        .collect();
    Ok(Ended::Answered(said.join("\n\n")))
}

impl Live {
    /// Publishes `activity` to the running task's streams, if a task runs.
    fn publish(&self, activity: Value) {
        if let Some(task) = self.current() {
            task.publish_activity(activity);
        }
    }
}

/// The session's events as the running task's activity: each call as it starts and as it ends
/// (`warden/tool`), MCP progress of the calls still running (`warden/progress`) and the model's
/// plan (`warden/plan`).
impl EventSink for Live {
    fn emit(&self, event: AgentEvent) {
        match event {
            AgentEvent::ToolCallStarted {
                id,
                name,
                arguments,
            } => {
                lock(&self.calls).push(id.clone());
                self.publish(json!({ "warden/tool": {
                    "toolCallId": id,
                    "name": name,
                    "arguments": arguments,
                    "status": "running",
                }}));
            }
            AgentEvent::ToolCallFinished { id, name, result } => {
                lock(&self.calls).retain(|running| *running != id);
                let status = if result.decision == Decision::Cancelled {
                    "canceled"
                } else if result.is_error {
                    "failed"
                } else {
                    "completed"
                };
                self.publish(json!({ "warden/tool": {
                    "toolCallId": id,
                    "name": name,
                    "status": status,
                    "decision": result.decision,
                    "denial": result.denial,
                    "result": clip_result(&result.text),
                }}));
            }
            AgentEvent::PlanUpdated { entries, .. } => {
                self.publish(json!({"warden/plan": {"entries": entries}}));
            }
            AgentEvent::ToolProgress {
                id,
                message,
                progress,
                total,
            } if self.is_running(&id) => {
                self.publish(json!({"warden/progress": {
                    "toolCallId": id,
                    "progress": progress,
                    "total": total,
                    "message": message,
                }}));
            }
            _ => {}
        }
    }
}

/// Asks the A2A client: the running task turns `input-required` with the question, and the
/// client's next message in the task is the answer.
struct ClientApprover {
    live: Arc<Live>,
}

impl Approver for ClientApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async move {
            let Some(task) = self.live.current() else {
                return ApprovalAnswer::NobodyToAsk {
                    reason: "no A2A task is running in this context to ask".to_owned(),
                };
            };
            if task.cancel.is_cancelled() {
                return ApprovalAnswer::Deny {
                    reason: Some("the task was canceled".to_owned()),
                };
            }
            let (sender, receiver) = oneshot::channel();
            *lock(&task.question) = Some(Question {
                answer: sender,
                offers_always: request.offers_always,
            });
            let text = format!(
                "warden asks before the call {} ({}). Answer in this task with `allow`, \
                 `allow always` or `deny` (a reason may follow `deny`).",
                request.public_name, request.reason
            );
            let mut approval = Map::new();
            approval.insert("tool".to_owned(), json!(request.public_name));
            approval.insert("arguments".to_owned(), request.arguments.clone());
            approval.insert("reason".to_owned(), json!(request.reason));
            approval.insert("answers".to_owned(), json!(ANSWERS));
            task.set_state(
                TaskState::InputRequired,
                Some(&text),
                Some(json!({ "warden/approval": approval })),
            );
            let answer = tokio::select! {
                answer = receiver => answer.unwrap_or(ApprovalAnswer::Deny {
                    reason: Some("the question was withdrawn".to_owned()),
                }),
                () = task.cancel.cancelled() => ApprovalAnswer::Deny {
                    reason: Some("the task was canceled".to_owned()),
                },
            };
            lock(&task.question).take();
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_clients_words_become_the_gates_answers() {
        assert_eq!(
            parse_answer(" Allow ", false),
            Some(ApprovalAnswer::AllowOnce)
        );
        assert_eq!(
            parse_answer("allow always", false),
            Some(ApprovalAnswer::AllowForSession)
        );
        assert_eq!(
            parse_answer("allow always", true),
            Some(ApprovalAnswer::AllowAlways)
        );
        assert_eq!(
            parse_answer("deny: not on a Friday", false),
            Some(ApprovalAnswer::Deny {
                reason: Some("the A2A client denied it: not on a Friday".to_owned())
            })
        );
        assert!(matches!(
            parse_answer("no", false),
            Some(ApprovalAnswer::Deny { .. })
        ));
        assert_eq!(parse_answer("sure, go ahead", false), None);
        assert_eq!(parse_answer("allow everything forever", false), None);
        assert_eq!(parse_answer("nothing", false), None);
        assert_eq!(parse_answer("", false), None);
    }

    #[test]
    fn a_snapshot_keeps_the_last_history_messages() {
        let task = TaskEntry::new("c1", json!({"messageId": "m1"}));
        task.set_state(TaskState::InputRequired, Some("may I?"), None);
        let full = task.snapshot(None);
        assert_eq!(full["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        assert_eq!(full["history"].as_array().unwrap().len(), 2);
        let last = task.snapshot(Some(1));
        assert_eq!(last["history"][0]["parts"][0]["text"], "may I?");
        assert!(task.snapshot(Some(0)).get("history").is_none());
    }

    #[test]
    fn context_ids_are_plain_words() {
        assert!(valid_id("ctx-1.a_b"));
        assert!(!valid_id("../etc"));
        assert!(!valid_id(""));
        assert!(!valid_id(&"x".repeat(129)));
    }
}
