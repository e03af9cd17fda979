//! The ACP agent over stdio: `initialize`, `session/new`, `session/load`, `session/prompt`
//! (streamed as `session/update` notifications), `session/cancel`, and the gate's questions as
//! `session/request_permission`. Each request that waits on the model, a server or the editor
//! runs on its own task, so the connection keeps reading (a cancel reaches a running turn).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::Diff;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate,
    CancelNotification, Content, ContentBlock, ContentChunk, Implementation, InitializeRequest,
    InitializeResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer, Meta,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    SessionAdditionalDirectoriesCapabilities, SessionCapabilities, SessionId, SessionNotification,
    SessionUpdate, StopReason, TextContent, ToolCall, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, UnstructuredCommandInput,
};
use agent_client_protocol::{Client, Error, Responder, Stdio, V1};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio_util::sync::CancellationToken;
use warden_agent::{
    AgentEvent, EventSink, Message, PLAN_TOOL, Session as Transcript, ToolCallResult, ToolList,
};
use warden_host::CallContext;
use warden_policy::CallSurface;
use warden_policy::Decision;
use warden_session::{AgentSession, Turn, TurnError, clip_result};

use crate::approver::{EditorApprover, Live};
use crate::convert::{
    edit_diff, mcp_server_spec, prompt_text, tool_kind, tool_locations, tool_title,
};
use crate::files::EditorFiles;
use crate::{AcpError, OpenError, SessionOpener};

/// How often a running turn's streamed text is sent on while the model answers.
const FLUSH_INTERVAL: Duration = Duration::from_millis(20);

/// Serves ACP on standard input and output until the editor closes the connection.
pub async fn serve_stdio(opener: Arc<dyn SessionOpener>) -> Result<(), AcpError> {
    let state = Arc::new(State {
        opener,
        sessions: Mutex::new(HashMap::new()),
        loading: Mutex::new(HashSet::new()),
        editor_files: std::sync::atomic::AtomicBool::new(false),
        editor_terminal: std::sync::atomic::AtomicBool::new(false),
    });
    let on_initialize = state.clone();
    let on_new = state.clone();
    let on_load = state.clone();
    let on_prompt = state.clone();
    let on_cancel = state.clone();
    let served = agent_client_protocol::Agent
        .v1()
        .name("warden")
        .on_receive_request(
            async move |request: InitializeRequest,
                        responder: Responder<InitializeResponse, V1>,
                        _connection: ConnectionTo<Client>| {
                let fs = &request.client_capabilities.fs;
                on_initialize.editor_files.store(
                    fs.read_text_file && fs.write_text_file,
                    std::sync::atomic::Ordering::SeqCst,
                );
                on_initialize.editor_terminal.store(
                    request.client_capabilities.terminal,
                    std::sync::atomic::Ordering::SeqCst,
                );
                responder.respond(initialize_response())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest,
                        responder: Responder<NewSessionResponse, V1>,
                        connection: ConnectionTo<Client>| {
                let state = on_new.clone();
                tokio::spawn(async move {
                    let opened = state
                        .open(
                            &connection,
                            &request.cwd,
                            &request.additional_directories,
                            &request.mcp_servers,
                            None,
                        )
                        .await;
                    match opened {
                        Ok(entry) => {
                            let id = entry.id.clone();
                            let _ = responder.respond(NewSessionResponse::new(id));
                            entry.announce_commands(&connection);
                        }
                        Err(error) => {
                            let _ = responder.respond_with_error(error);
                        }
                    }
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest,
                        responder: Responder<LoadSessionResponse, V1>,
                        connection: ConnectionTo<Client>| {
                let state = on_load.clone();
                tokio::spawn(async move {
                    let id = request.session_id.0.to_string();
                    let opened = state
                        .open(
                            &connection,
                            &request.cwd,
                            &request.additional_directories,
                            &request.mcp_servers,
                            Some(id),
                        )
                        .await;
                    match opened {
                        Ok(entry) => {
                            entry.replay(&connection).await;
                            let _ = responder.respond(LoadSessionResponse::new());
                            entry.announce_commands(&connection);
                        }
                        Err(error) => {
                            let _ = responder.respond_with_error(error);
                        }
                    }
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest,
                        responder: Responder<PromptResponse, V1>,
                        connection: ConnectionTo<Client>| {
                let state = on_prompt.clone();
                tokio::spawn(async move {
                    match state.prompt(&connection, request).await {
                        Ok(stop) => {
                            let _ = responder.respond(PromptResponse::new(stop));
                        }
                        Err(error) => {
                            let _ = responder.respond_with_error(error);
                        }
                    }
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _connection: ConnectionTo<Client>| {
                if let Some(entry) = on_cancel.session(&notification.session_id) {
                    entry.live.cancel_turn();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await;
    let sessions: Vec<Arc<Entry>> = lock(&state.sessions).drain().map(|(_, s)| s).collect();
    // The editor went away: each session's turn is cancelled, its SessionEnd hooks run and its
    // servers are stopped.
    for entry in sessions {
        entry.live.cancel_turn();
        let open = entry.open.lock().await;
        let workspace = open.session.workspace.clone();
        open.session
            .host
            .session_event(warden_hooks::HookEvent::SessionEnd, &workspace, None)
            .await;
        open.session.host.shutdown().await;
    }
    served.map_err(|error| AcpError(error.to_string()))
}

/// What warden offers: protocol version 1 (whatever the editor asked: it disconnects when it
/// cannot speak it), text and embedded text resources in prompts, MCP servers over stdio,
/// Streamable HTTP and SSE, more workspace folders, and loading saved sessions.
fn initialize_response() -> InitializeResponse {
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(PromptCapabilities::new().embedded_context(true))
                .mcp_capabilities(McpCapabilities::new().http(true).sse(true))
                .session_capabilities(
                    SessionCapabilities::new()
                        .additional_directories(SessionAdditionalDirectoriesCapabilities::new()),
                ),
        )
        .agent_info(Implementation::new("warden", env!("CARGO_PKG_VERSION")))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The open sessions of this connection.
struct State {
    opener: Arc<dyn SessionOpener>,
    sessions: Mutex<HashMap<String, Arc<Entry>>>,
    /// Saved sessions being loaded now: a second `session/load` of one is refused, as of an
    /// open one.
    loading: Mutex<HashSet<String>>,
    /// The editor offered to read and write files (`initialize`): the file tools use them.
    editor_files: std::sync::atomic::AtomicBool,
    /// The editor offers `terminal/*` (used for `bash` only when the operator chose it).
    editor_terminal: std::sync::atomic::AtomicBool,
}

/// One open session.
struct Entry {
    id: String,
    live: Arc<Live>,
    /// The slash commands offered: name → what it runs.
    commands: Vec<(AvailableCommand, Command)>,
    open: tokio::sync::Mutex<Open>,
}

/// What a slash command runs.
#[derive(Clone)]
enum Command {
    /// An MCP prompt, fetched through the gate; its user messages become the prompt.
    Prompt { server: String, prompt: String },
    /// A skill, loaded through the gate (`use_skill`) and sent ahead of the rest of the line.
    Skill { name: String },
}

/// The session and its conversation, held by the running turn.
struct Open {
    session: AgentSession,
    tools: ToolList,
    system_prompt: String,
    conversation: Vec<Message>,
    transcript: Transcript,
    events: Arc<Forwarder>,
    executor: Arc<warden_session::GateExecutor>,
}

fn invalid_params(message: impl Into<String>) -> Error {
    Error::invalid_params().data(json!({ "message": message.into() }))
}

/// A saved session being loaded; dropped once it is open (or failed to open).
struct Loading<'a> {
    state: &'a State,
    id: String,
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        lock(&self.state.loading).remove(&self.id);
    }
}

impl State {
    /// Marks the saved session `id` as being loaded, unless it is open or being loaded already.
    fn reserve(&self, id: &str) -> Result<Loading<'_>, Error> {
        let sessions = lock(&self.sessions);
        let mut loading = lock(&self.loading);
        if sessions.contains_key(id) || !loading.insert(id.to_owned()) {
            return Err(Error::invalid_request().data(json!({
                "message": format!("session {id} is open already on this connection")
            })));
        }
        Ok(Loading {
            state: self,
            id: id.to_owned(),
        })
    }

    fn session(&self, id: &SessionId) -> Option<Arc<Entry>> {
        lock(&self.sessions).get(&*id.0).cloned()
    }

    /// Opens a new session, or a saved one (`resume`), in `cwd` with the editor's servers.
    async fn open(
        &self,
        connection: &ConnectionTo<Client>,
        cwd: &Path,
        add_dirs: &[std::path::PathBuf],
        servers: &[McpServer],
        resume: Option<String>,
    ) -> Result<Arc<Entry>, Error> {
        if !cwd.is_absolute() {
            return Err(invalid_params(format!(
                "cwd {} is not an absolute path; send the project's absolute folder",
                cwd.display()
            )));
        }
        if !cwd.is_dir() {
            return Err(invalid_params(format!(
                "cwd {}: no such folder",
                cwd.display()
            )));
        }
        let _loading = match &resume {
            Some(id) => Some(self.reserve(id)?),
            None => None,
        };
        let specs = servers
            .iter()
            .map(mcp_server_spec)
            .collect::<Result<Vec<_>, _>>()
            .map_err(invalid_params)?;
        let live = Arc::new(Live::default());
        let approver = Arc::new(EditorApprover {
            connection: connection.clone(),
            live: live.clone(),
        });
        let files = self
            .editor_files
            .load(std::sync::atomic::Ordering::SeqCst)
            .then(|| {
                Arc::new(EditorFiles {
                    connection: connection.clone(),
                    session_id: std::sync::OnceLock::new(),
                })
            });
        let terminal = self
            .editor_terminal
            .load(std::sync::atomic::Ordering::SeqCst)
            .then(|| {
                Arc::new(crate::terminal::EditorTerminal {
                    connection: connection.clone(),
                    session_id: std::sync::OnceLock::new(),
                    live: live.clone(),
                })
            });
        let spec = warden_session::SessionSpec {
            workspace: Some(cwd.to_path_buf()),
            add_dirs: add_dirs.to_vec(),
            servers: specs,
            approver: Some(approver),
            resume: resume.map_or(warden_session::Resume::New, warden_session::Resume::Id),
            editor: warden_session::EditorIo {
                text_files: files
                    .clone()
                    .map(|files| files as Arc<dyn warden_agent::TextFiles>),
                terminal: terminal
                    .clone()
                    .map(|terminal| terminal as Arc<dyn warden_agent::CommandTerminal>),
            },
            ..warden_session::SessionSpec::default()
        };
        let mut session = self.opener.open(spec).map_err(|error| match error {
            // An id that names no saved session is the editor's mistake, said as such.
            OpenError::Session(warden_session::SessionError::Resume(_)) => {
                invalid_params(error.to_string())
            }
            error if error.is_usage() => invalid_params(error.to_string()),
            error => Error::internal_error().data(json!({ "message": error.to_string() })),
        })?;
        let (tools, failures) = session.tool_list().await;
        for failure in &failures {
            tracing::warn!("{failure}");
        }
        let routing = session.execution_routing().await;
        let system_prompt = session.system_prompt(routing);
        let (transcript, conversation) = session.open_transcript().map_err(|error| {
            Error::internal_error().data(json!({ "message": format!("the transcript: {error}") }))
        })?;
        let id = session.host.session_id().to_owned();
        if let Some(files) = &files {
            let _ = files.session_id.set(id.clone());
        }
        if let Some(terminal) = &terminal {
            let _ = terminal.session_id.set(id.clone());
        }
        let (sender, receiver) = unbounded_channel();
        let events = Arc::new(Forwarder {
            connection: connection.clone(),
            session_id: id.clone(),
            sender,
            receiver: Mutex::new(receiver),
            live: live.clone(),
            workspace: session.workspace.clone(),
            diffs: Mutex::default(),
            plans: Mutex::default(),
        });
        let executor = session.executor(Some(events.clone() as warden_agent::Events));
        let workspace = session.workspace.clone();
        session
            .host
            .session_event(warden_hooks::HookEvent::SessionStart, &workspace, None)
            .await;
        let commands = slash_commands(&session).await;
        let entry = Arc::new(Entry {
            id: id.clone(),
            live,
            commands,
            open: tokio::sync::Mutex::new(Open {
                session,
                tools,
                system_prompt,
                conversation,
                transcript,
                events,
                executor,
            }),
        });
        lock(&self.sessions).insert(id, entry.clone());
        Ok(entry)
    }

    /// Runs one prompt turn: the model and its tool calls, streamed to the editor.
    async fn prompt(
        &self,
        connection: &ConnectionTo<Client>,
        request: PromptRequest,
    ) -> Result<StopReason, Error> {
        let Some(entry) = self.session(&request.session_id) else {
            return Err(invalid_params(format!(
                "unknown session {}; open one with session/new or session/load",
                request.session_id.0
            )));
        };
        let Some(cancel) = entry.live.start_turn() else {
            return Err(Error::invalid_request().data(json!({
                "message": format!(
                    "a prompt is already running in session {}; wait for its response or send \
                     session/cancel",
                    entry.id
                )
            })));
        };
        let _turn = TurnGuard(entry.live.clone());
        let text = prompt_text(&request.prompt).map_err(invalid_params)?;
        let mut open = entry.open.lock().await;
        let open = &mut *open;
        let text = match entry.expand(open, &text, &cancel).await {
            Ok(text) => text,
            Err(message) => {
                send(connection, &entry.id, agent_text(&message));
                return Ok(StopReason::Refusal);
            }
        };
        let events = open.events.clone();
        let tick = move || events.flush();
        let ended = open
            .session
            .run_turn(
                Turn {
                    conversation: &mut open.conversation,
                    transcript: &mut open.transcript,
                    executor: open.executor.clone(),
                    system_prompt: &open.system_prompt,
                    tools: &open.tools,
                    events: Some(open.events.clone() as warden_agent::Events),
                    cancel: &cancel,
                    tick: Some((FLUSH_INTERVAL, &tick)),
                },
                text,
            )
            .await;
        open.events.flush();
        let ended = match ended {
            Ok(ended) => ended,
            Err(TurnError::Blocked(reason)) => {
                send(
                    connection,
                    &entry.id,
                    agent_text(&format!(
                        "a UserPromptSubmit hook blocked the prompt: {reason}"
                    )),
                );
                return Ok(StopReason::Refusal);
            }
            Err(error) => {
                return Err(Error::internal_error().data(json!({ "message": error.to_string() })));
            }
        };
        Ok(match ended.outcome.stop {
            warden_agent::StopReason::Completed => StopReason::EndTurn,
            warden_agent::StopReason::MaxTurns => StopReason::MaxTurnRequests,
            warden_agent::StopReason::Cancelled => StopReason::Cancelled,
        })
    }
}

/// Ends the turn however the prompt returns.
struct TurnGuard(Arc<Live>);

impl Drop for TurnGuard {
    fn drop(&mut self) {
        self.0.end_turn();
    }
}

impl Entry {
    /// Tells the editor the slash commands: MCP prompts and skills.
    fn announce_commands(&self, connection: &ConnectionTo<Client>) {
        let commands = self
            .commands
            .iter()
            .map(|(command, _)| command.clone())
            .collect();
        send(
            connection,
            &self.id,
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
        );
    }

    /// The prompt with a leading slash command run: an MCP prompt's user messages, or a skill's
    /// body ahead of the rest of the line. Anything else is sent as typed.
    async fn expand(
        &self,
        open: &mut Open,
        text: &str,
        cancel: &CancellationToken,
    ) -> Result<String, String> {
        let Some(line) = text.strip_prefix('/') else {
            return Ok(text.to_owned());
        };
        let (name, rest) = line
            .split_once(char::is_whitespace)
            .map_or((line, ""), |(name, rest)| (name, rest.trim()));
        let Some((_, command)) = self.commands.iter().find(|(c, _)| c.name == name) else {
            return Ok(text.to_owned());
        };
        let host = open.session.host.clone();
        match command {
            Command::Prompt { server, prompt } => {
                let arguments = warden_mcp::parse_prompt_arguments(rest)
                    .map_err(|error| format!("/{name}: {error}"))?;
                let context = CallContext::new(CallSurface::User, cancel.child_token());
                let result = host
                    .get_prompt(context, server, prompt, arguments)
                    .await
                    .map_err(|error| format!("/{name}: {error}"))?;
                let mut texts = Vec::new();
                for (role, message) in warden_host::prompt_messages(&result) {
                    if role == "assistant" {
                        open.conversation.push(Message::Assistant {
                            text: message,
                            tool_calls: Vec::new(),
                        });
                    } else {
                        texts.push(message);
                    }
                }
                Ok(texts.join("\n\n"))
            }
            Command::Skill { name: skill } => {
                let outcome = host
                    .call(
                        CallSurface::User,
                        "use_skill",
                        json!({ "name": skill }),
                        cancel.child_token(),
                    )
                    .await;
                if outcome.is_error() {
                    return Err(format!("/{name}: {}", outcome.model_text()));
                }
                let body = outcome.model_text();
                Ok(
                    format!("<skill name=\"{skill}\">\n{body}\n</skill>\n\n{rest}")
                        .trim_end()
                        .to_owned(),
                )
            }
        }
    }

    /// Sends a loaded session's conversation to the editor, as `session/load` asks.
    async fn replay(&self, connection: &ConnectionTo<Client>) {
        let open = self.open.lock().await;
        let workspace = open.session.workspace.clone();
        for message in &open.conversation {
            match message {
                Message::User { text } => send(
                    connection,
                    &self.id,
                    SessionUpdate::UserMessageChunk(ContentChunk::new(text_block(text))),
                ),
                Message::Assistant { text, tool_calls } => {
                    if !text.is_empty() {
                        send(connection, &self.id, agent_text(text));
                    }
                    for call in tool_calls {
                        let arguments = call.parsed_arguments().unwrap_or(Value::Null);
                        send(
                            connection,
                            &self.id,
                            SessionUpdate::ToolCall(tool_call(
                                &call.id, &call.name, &arguments, &workspace,
                            )),
                        );
                    }
                }
                // The model's thoughts of that turn (Anthropic thinking blocks).
                Message::ProviderBlocks { blocks, .. } => {
                    for block in blocks {
                        if block["type"] == "thinking"
                            && let Some(thought) = block["thinking"].as_str()
                            && !thought.is_empty()
                        {
                            send(connection, &self.id, agent_thought(thought));
                        }
                    }
                }
                Message::ToolResult {
                    call_id,
                    text,
                    is_error,
                    ..
                } => send(
                    connection,
                    &self.id,
                    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        call_id.clone(),
                        ToolCallUpdateFields::new()
                            .status(if *is_error {
                                ToolCallStatus::Failed
                            } else {
                                ToolCallStatus::Completed
                            })
                            .content(vec![text_content(&clip_result(text))]),
                    )),
                ),
                _ => {}
            }
        }
    }
}

/// The slash commands of a session: each server's MCP prompts (`mcp__SERVER__PROMPT`, as in
/// `warden chat`), the local skills and the skills servers publish.
async fn slash_commands(session: &AgentSession) -> Vec<(AvailableCommand, Command)> {
    let mut commands = Vec::new();
    for status in session.host.servers().status() {
        // Through the gate, as the person's listing: a server the operator denies offers no
        // prompts here.
        let context = CallContext::new(CallSurface::User, CancellationToken::new());
        let Ok(prompts) = session.host.list_prompts(context, &status.name).await else {
            continue;
        };
        for prompt in prompts {
            let arguments: Vec<String> = prompt
                .arguments
                .iter()
                .flatten()
                .map(|argument| format!("{}=…", argument.name))
                .collect();
            let mut command = AvailableCommand::new(
                format!("mcp__{}__{}", status.name, prompt.name),
                prompt.description.clone().unwrap_or_else(|| {
                    format!("the MCP prompt {} of {}", prompt.name, status.name)
                }),
            );
            if !arguments.is_empty() {
                command = command.input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(arguments.join(" ")),
                ));
            }
            commands.push((
                command,
                Command::Prompt {
                    server: status.name.clone(),
                    prompt: prompt.name.clone(),
                },
            ));
        }
    }
    for skill in &session.skills.skills {
        commands.push((
            AvailableCommand::new(&skill.name, &skill.description).input(
                AvailableCommandInput::Unstructured(UnstructuredCommandInput::new(
                    "what to do with the skill",
                )),
            ),
            Command::Skill {
                name: skill.name.clone(),
            },
        ));
    }
    for remote in session.host.remote_skills().commands() {
        commands.push((
            AvailableCommand::new(&remote.command, &remote.description),
            Command::Skill {
                name: remote.command.clone(),
            },
        ));
    }
    commands
}

fn send(connection: &ConnectionTo<Client>, session_id: &str, update: SessionUpdate) {
    let notification = SessionNotification::new(session_id.to_owned(), update);
    if let Err(error) = connection.send_notification(notification) {
        tracing::warn!("sending a session update: {error}");
    }
}

fn text_block(text: &str) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text))
}

fn text_content(text: &str) -> ToolCallContent {
    ToolCallContent::Content(Content::new(text_block(text)))
}

fn agent_text(text: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(text_block(text)))
}

fn agent_thought(text: &str) -> SessionUpdate {
    SessionUpdate::AgentThoughtChunk(ContentChunk::new(text_block(text)))
}

fn tool_call(id: &str, public_name: &str, arguments: &Value, workspace: &Path) -> ToolCall {
    ToolCall::new(id.to_owned(), tool_title(public_name, arguments))
        .kind(tool_kind(public_name))
        .status(ToolCallStatus::InProgress)
        .locations(tool_locations(public_name, arguments, workspace))
        .raw_input(arguments.clone())
}

/// Sends the session's events on to the editor. Streamed text and MCP progress of the calls
/// still running wait for the next flush (every [`FLUSH_INTERVAL`] and before each call); each
/// call is announced as it starts (`tool_call`, with the diff of the file it is about to
/// change) and as it ends (`tool_call_update` with the result), in order with the permission
/// requests it causes, and known to the approver meanwhile. The model's plan is the editor's
/// plan, not a tool call.
struct Forwarder {
    connection: ConnectionTo<Client>,
    session_id: String,
    sender: tokio::sync::mpsc::UnboundedSender<AgentEvent>,
    receiver: Mutex<UnboundedReceiver<AgentEvent>>,
    live: Arc<Live>,
    workspace: std::path::PathBuf,
    /// The diff of each running edit, read before it ran.
    diffs: Mutex<HashMap<String, Diff>>,
    /// The running plan calls, with their arguments until their plan is shown.
    plans: Mutex<HashMap<String, Option<Value>>>,
}

impl EventSink for Forwarder {
    fn emit(&self, event: AgentEvent) {
        match event {
            AgentEvent::ToolCallStarted {
                id,
                name,
                arguments,
            } => self.call_started(id, &name, &arguments),
            AgentEvent::ToolCallFinished { id, name, result } => {
                self.call_finished(id, &name, &result);
            }
            AgentEvent::PlanUpdated { id, entries } => {
                lock(&self.plans).insert(id, None);
                send(
                    &self.connection,
                    &self.session_id,
                    crate::convert::plan_update(&entries),
                );
            }
            // Text and progress wait for the next flush, in the order they came.
            event => {
                let _ = self.sender.send(event);
            }
        }
    }
}

impl Forwarder {
    /// Sends what has arrived so far.
    fn flush(&self) {
        let mut receiver = lock(&self.receiver);
        while let Ok(event) = receiver.try_recv() {
            match event {
                AgentEvent::TextDelta { text } => {
                    send(&self.connection, &self.session_id, agent_text(&text));
                }
                AgentEvent::ThinkingDelta { text } => {
                    send(&self.connection, &self.session_id, agent_thought(&text));
                }
                AgentEvent::ToolProgress {
                    id,
                    message,
                    progress,
                    total,
                } if self.live.is_running(&id) => {
                    let amount = match (progress, total) {
                        (Some(done), Some(total)) => format!("{done}/{total}"),
                        (Some(done), None) => format!("{done}"),
                        _ => String::new(),
                    };
                    let line = [message.clone().unwrap_or_default(), amount]
                        .into_iter()
                        .filter(|part| !part.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ");
                    let mut meta = Meta::new();
                    meta.insert(
                        "warden/progress".to_owned(),
                        json!({"progress": progress, "total": total, "message": message}),
                    );
                    let update = ToolCallUpdate::new(
                        id,
                        ToolCallUpdateFields::new()
                            .status(ToolCallStatus::InProgress)
                            .content(vec![text_content(&line)]),
                    )
                    .meta(meta);
                    send(
                        &self.connection,
                        &self.session_id,
                        SessionUpdate::ToolCallUpdate(update),
                    );
                }
                _ => {}
            }
        }
    }
}

impl Forwarder {
    /// A call starts: what streamed before it goes first, then the call (unless it states the
    /// plan, which the editor shows as its plan once the gate let it through).
    fn call_started(&self, id: String, name: &str, arguments: &Value) {
        self.flush();
        self.live.call_started(&id, name, arguments);
        if name == PLAN_TOOL {
            lock(&self.plans).insert(id, Some(arguments.clone()));
            return;
        }
        send(
            &self.connection,
            &self.session_id,
            SessionUpdate::ToolCall(tool_call(&id, name, arguments, &self.workspace)),
        );
        if let Some(diff) = edit_diff(name, arguments, &self.workspace) {
            lock(&self.diffs).insert(id, diff);
        }
    }

    /// A call ended: its result (and the diff of an edit that went through).
    fn call_finished(&self, id: String, name: &str, result: &ToolCallResult) {
        self.flush();
        self.live.call_finished(&id);
        let diff = lock(&self.diffs).remove(&id);
        let failed = result.is_error || result.decision != Decision::Allowed;
        if name == PLAN_TOOL {
            let Some(Some(arguments)) = lock(&self.plans).remove(&id) else {
                // Shown as the editor's plan.
                return;
            };
            // The plan was refused or invalid: shown as the failed call it was.
            send(
                &self.connection,
                &self.session_id,
                SessionUpdate::ToolCall(tool_call(&id, name, &arguments, &self.workspace)),
            );
        }
        let status = if failed {
            ToolCallStatus::Failed
        } else {
            ToolCallStatus::Completed
        };
        let mut content = vec![text_content(&clip_result(&result.text))];
        if status == ToolCallStatus::Completed
            && let Some(diff) = diff
        {
            content.push(ToolCallContent::Diff(diff));
        }
        let fields = ToolCallUpdateFields::new()
            .status(status)
            .content(content)
            .raw_output(json!({
                "decision": result.decision,
                "denial": result.denial,
                "is_error": result.is_error,
            }));
        send(
            &self.connection,
            &self.session_id,
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id, fields)),
        );
    }
}
