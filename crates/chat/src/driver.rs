//! The chat's event loop: terminal input, agent events, approval and elicitation questions,
//! background work (reconnects, prompts, skills) and a tick that refreshes pages and announces
//! servers that fail mid-session.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use warden_hooks::HookEvent;

use ratatui::crossterm::event::{self, Event, KeyEventKind};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use warden_agent::{
    Agent, AgentError, AgentEvent, Message, ModelClient, RunOutcome, StopReason, ToolList, ToolSpec,
};
use warden_host::{CallContext, Host};
use warden_mcp::{FailureKind, ListKind, ServerState, UpstreamEvent, parse_prompt_arguments};
use warden_policy::CallSurface;

use crate::app::{Action, App, CallState, Entry, Page};
use crate::commands::{COMMANDS, PromptInfo, SlashCommand, missing_arguments};
use crate::dialogs::{ApprovalDialog, ElicitationDialog};
use crate::gate_hooks::{ToolSources, UiRequest};
use crate::sources::{McpRow, SourceFacts, is_failure, short_reason, source_rows};
use crate::view::draw;

/// Switches the model: the new client, its name and the line to show (which says that the
/// session keeps its defer mode), or why not.
pub type ModelSwitch<'a> =
    Box<dyn FnMut(&str) -> Result<(Arc<dyn ModelClient>, String, String), String> + 'a>;

/// Records a finished message in the session's transcript.
pub type Recorder<'a> = Box<dyn FnMut(&Message) + 'a>;

/// Everything the chat needs from an opened session.
pub struct ChatSession<'a> {
    pub host: Arc<Host>,
    pub client: Arc<dyn ModelClient>,
    pub model_name: String,
    pub system_prompt: String,
    pub tools: ToolList,
    /// The gate executor (which sends progress on `events`, and cancels a server's calls for
    /// `/mcp cancel`).
    pub executor: Arc<warden_session::GateExecutor>,
    pub events: mpsc::UnboundedSender<AgentEvent>,
    pub event_receiver: mpsc::UnboundedReceiver<AgentEvent>,
    pub ui_requests: mpsc::UnboundedReceiver<UiRequest>,
    pub facts: BTreeMap<String, SourceFacts>,
    /// (name, description) of the workspace's skills.
    pub skills: Vec<(String, String)>,
    pub switch_model: ModelSwitch<'a>,
    pub record: Recorder<'a>,
    /// The conversation so far (resumed sessions).
    pub conversation: Vec<Message>,
    /// One line each, shown first (start-up failures of servers).
    pub startup_notes: Vec<String>,
    /// The session's working folder (given to hooks).
    pub workspace: std::path::PathBuf,
}

/// The terminal could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("the terminal: {0}")]
    Terminal(#[from] std::io::Error),
}

enum Background {
    Reconnected {
        server: String,
        outcome: Result<Vec<ToolSpec>, String>,
    },
    /// `/mcp stop` finished.
    Stopped {
        server: String,
        outcome: Result<(), String>,
    },
    /// `/mcp restart` finished (the server reconnects on the next request).
    Restarted {
        server: String,
        outcome: Result<(), String>,
    },
    Prompts(Vec<PromptInfo>),
    PromptReady {
        label: String,
        messages: Vec<(String, String)>,
    },
    SkillReady {
        name: String,
        body: Result<String, String>,
        rest: String,
    },
    Failed(String),
}

type TurnResult = (Vec<Message>, Result<RunOutcome, TurnStop>);

/// Why a turn ended without an outcome.
enum TurnStop {
    /// The model request failed.
    Model(AgentError),
    /// A UserPromptSubmit hook blocked the prompt (its reason); the model was not asked.
    Blocked(String),
}

/// Registers every tool the session offers with its source.
pub(crate) async fn learn_sources(host: &Host, sources: &ToolSources) {
    for descriptor in host.host_tools() {
        sources.set(descriptor.public_name, "built-in".to_owned());
    }
    let (tools, _) = host.all_tools().await;
    for tool in tools {
        sources.set(
            tool.descriptor.public_name.clone(),
            tool.descriptor.identity.server().to_owned(),
        );
    }
}

/// Runs the chat until Ctrl-D.
pub async fn run_chat(session: ChatSession<'_>) -> Result<(), ChatError> {
    let mut terminal = ratatui::try_init()?;
    let result = Chat::new(session).run(&mut terminal).await;
    ratatui::restore();
    result
}

struct Chat<'a> {
    session: ChatSession<'a>,
    app: App,
    sources: ToolSources,
    turn: Option<tokio::task::JoinHandle<TurnResult>>,
    turn_cancel: CancellationToken,
    recorded_upto: usize,
    call_starts: HashMap<String, Instant>,
    server_states: HashMap<String, ServerState>,
    server_attempts: HashMap<String, u64>,
    /// Servers this chat is reconnecting (not announced as stopped).
    own_reconnects: std::collections::HashSet<String>,
    /// Servers restarted with `/mcp restart` whose tools the next turn lists afresh.
    restarted: std::collections::BTreeSet<String>,
    /// Servers restarted with `/mcp restart`: their next (lazy) connect is not announced as an
    /// unexpected restart.
    own_restarts: std::collections::HashSet<String>,
    background: (
        mpsc::UnboundedSender<Background>,
        mpsc::UnboundedReceiver<Background>,
    ),
    /// Skill text that goes before the next prompt.
    pending_context: Vec<String>,
    /// The servers' catalogue changes: a prompts `list_changed` reloads the slash commands.
    catalog_changes: tokio::sync::broadcast::Receiver<UpstreamEvent>,
}

impl<'a> Chat<'a> {
    fn new(session: ChatSession<'a>) -> Self {
        let sources = ToolSources::default();
        let mut app = App::new(session.model_name.clone());
        app.skills = session
            .skills
            .iter()
            .map(|(name, _)| name.clone())
            .collect();
        let recorded_upto = session.conversation.len();
        let catalog_changes = session.host.servers().upstream_events();
        Self {
            catalog_changes,
            session,
            app,
            sources,
            turn: None,
            turn_cancel: CancellationToken::new(),
            recorded_upto,
            call_starts: HashMap::new(),
            server_states: HashMap::new(),
            server_attempts: HashMap::new(),
            own_reconnects: Default::default(),
            restarted: Default::default(),
            own_restarts: Default::default(),
            background: mpsc::unbounded_channel(),
            pending_context: Vec::new(),
        }
    }

    async fn run(mut self, terminal: &mut ratatui::DefaultTerminal) -> Result<(), ChatError> {
        learn_sources(&self.session.host, &self.sources).await;
        for note in std::mem::take(&mut self.session.startup_notes) {
            self.app
                .error(format!("{} — see /tools", first_line(&note)));
        }
        for status in self.session.host.servers().status() {
            self.server_states.insert(status.name.clone(), status.state);
            self.server_attempts
                .insert(status.name, status.connect_attempts);
        }
        self.app.notice(format!(
            "warden chat · model {} · /help for commands · Ctrl-C cancels · Ctrl-D quits",
            self.session.model_name
        ));
        self.load_prompts();

        let (keys_sender, mut keys) = mpsc::unbounded_channel();
        let stop = Arc::new(AtomicBool::new(false));
        let reader_stop = stop.clone();
        let reader = std::thread::spawn(move || {
            while !reader_stop.load(Ordering::Relaxed) {
                match event::poll(Duration::from_millis(100)) {
                    Ok(true) => match event::read() {
                        Ok(event) => {
                            if keys_sender.send(event).is_err() {
                                break;
                            }
                        }
                        Err(_) => break,
                    },
                    Ok(false) => {}
                    Err(_) => break,
                }
            }
        });
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let outcome = loop {
            terminal.draw(|frame| draw(frame, &self.app))?;
            tokio::select! {
                Some(input) = keys.recv() => {
                    if let Event::Key(key) = input
                        && key.kind != KeyEventKind::Release
                        && let Some(action) = self.key(key)
                        && self.act(action)
                    {
                        break Ok(());
                    }
                }
                Some(event) = self.session.event_receiver.recv() => self.agent_event(event),
                Some(request) = self.session.ui_requests.recv() => self.ui_request(request),
                Some(done) = self.background.1.recv() => self.background_done(done),
                finished = wait_turn(&mut self.turn) => self.turn_finished(finished),
                _ = tick.tick() => self.tick(),
            }
        };
        stop.store(true, Ordering::Relaxed);
        self.answer_everything();
        self.turn_cancel.cancel();
        if let Some(turn) = self.turn.take()
            && let Ok(result) = turn.await
        {
            self.turn_finished(Ok(result));
        }
        let _ = reader.join();
        outcome
    }

    /// Hands a key to the app. A call's duration counts from its approval, not from the
    /// moment it started waiting for one.
    fn key(&mut self, key: ratatui::crossterm::event::KeyEvent) -> Option<Action> {
        let asking = self
            .app
            .approvals
            .front()
            .map(|dialog| dialog.public_name.clone());
        let pending = self.app.approvals.len();
        let action = self.app.key(key);
        if let Some(name) = asking
            && self.app.approvals.len() < pending
            && let Some(id) = self.app.entries.iter().rev().find_map(|entry| match entry {
                Entry::Tool(call)
                    if call.public_name == name && call.state == CallState::Running =>
                {
                    Some(call.id.clone())
                }
                _ => None,
            })
        {
            self.call_starts.insert(id, Instant::now());
        }
        action
    }

    /// On quit: every open or queued question gets "no", and no new one can be asked.
    fn answer_everything(&mut self) {
        for mut dialog in self.app.approvals.drain(..) {
            dialog.answer(warden_policy::ApprovalAnswer::NobodyToAsk {
                reason: "the chat is closing".to_owned(),
            });
        }
        for mut dialog in self.app.elicitations.drain(..) {
            dialog.answer(warden_mcp::ElicitationResponse::Cancel);
        }
        self.session.ui_requests.close();
        while let Ok(request) = self.session.ui_requests.try_recv() {
            match request {
                UiRequest::Approval(_, answer) => {
                    let _ = answer.send(warden_policy::ApprovalAnswer::NobodyToAsk {
                        reason: "the chat is closing".to_owned(),
                    });
                }
                UiRequest::Elicitation(_, answer) => {
                    let _ = answer.send(warden_mcp::ElicitationResponse::Cancel);
                }
            }
        }
    }

    /// Carries out an action; `true` to quit.
    fn act(&mut self, action: Action) -> bool {
        match action {
            Action::Quit => return true,
            Action::CancelTurn => {
                self.turn_cancel.cancel();
                self.app.notice("cancelling the turn…");
            }
            Action::Submit(text) => self.submit(text),
            Action::Reconnect(server) => self.reconnect(server),
            Action::Command(command) => self.command(command),
        }
        false
    }

    fn submit(&mut self, text: String) {
        if self.turn.is_some() {
            self.app
                .notice("a turn is running; wait for it or cancel it with Ctrl-C");
            return;
        }
        self.app.push(Entry::User(text.clone()));
        let mut prompt = std::mem::take(&mut self.pending_context);
        prompt.push(text);
        let prompt = prompt.join("\n\n");
        self.session
            .conversation
            .push(Message::user(prompt.clone()));
        self.start_turn(Some(prompt));
    }

    /// Runs one turn. `prompt` is the user's new prompt (already the conversation's last
    /// message): UserPromptSubmit hooks see it first and may block it, as in `warden run`; Stop
    /// hooks run when the model has finished.
    fn start_turn(&mut self, prompt: Option<String>) {
        let agent = Agent::new(
            self.session.client.clone(),
            self.session.executor.clone(),
            self.session.system_prompt.clone(),
            self.session.tools.clone(),
        )
        .with_events(self.session.events.clone());
        let mut conversation = std::mem::take(&mut self.session.conversation);
        self.turn_cancel = CancellationToken::new();
        let cancel = self.turn_cancel.clone();
        self.app.busy = true;
        // Servers restarted with `/mcp restart` connect on this turn's first request and list
        // afresh: tools they added since join the model's list before it is asked.
        let restarted = std::mem::take(&mut self.restarted);
        let (host, sources, tools) = (
            self.session.host.clone(),
            self.sources.clone(),
            self.session.tools.clone(),
        );
        let workspace = self.session.workspace.clone();
        self.turn = Some(tokio::spawn(async move {
            if let Some(prompt) = prompt {
                let verdict = host
                    .session_event(HookEvent::UserPromptSubmit, &workspace, Some(prompt))
                    .await;
                if let Some(reason) = verdict.block_reason() {
                    // The prompt is withdrawn: the model never sees it.
                    conversation.pop();
                    return (conversation, Err(TurnStop::Blocked(reason.to_owned())));
                }
            }
            for server in restarted {
                // A server that fails to come back is announced by the status watch.
                if let Ok(specs) = offered_tools(&host, &server, &sources).await {
                    tools.append(specs);
                }
            }
            let result = agent.run(&mut conversation, &cancel).await;
            host.session_event(HookEvent::Stop, &workspace, None).await;
            (conversation, result.map_err(TurnStop::Model))
        }));
    }

    fn turn_finished(&mut self, finished: Result<TurnResult, tokio::task::JoinError>) {
        self.turn = None;
        self.app.busy = false;
        let (conversation, result) = match finished {
            Ok(done) => done,
            Err(error) => {
                self.app
                    .error(format!("the turn stopped unexpectedly: {error}"));
                return;
            }
        };
        self.session.conversation = conversation;
        for message in
            &self.session.conversation[self.recorded_upto.min(self.session.conversation.len())..]
        {
            (self.session.record)(message);
        }
        self.recorded_upto = self.session.conversation.len();
        self.tick();
        match result {
            Ok(outcome) if outcome.stop == StopReason::Cancelled => {
                self.app.notice("turn cancelled");
            }
            Ok(outcome) if outcome.stop == StopReason::MaxTurns => {
                self.app.notice("stopped at the turn limit");
            }
            Ok(_) => {}
            Err(TurnStop::Model(error)) => {
                self.app.error(format!("the model request failed: {error}"))
            }
            Err(TurnStop::Blocked(reason)) => self.app.error(format!(
                "a UserPromptSubmit hook blocked the prompt: {reason}"
            )),
        }
    }

    fn agent_event(&mut self, event: AgentEvent) {
        match &event {
            AgentEvent::ToolCallStarted { id, .. } => {
                self.call_starts.insert(id.clone(), Instant::now());
            }
            AgentEvent::ToolCallFinished { id, .. } => {
                let elapsed = self.call_starts.remove(id).map(|start| start.elapsed());
                let sources = self.sources.clone();
                self.app
                    .apply(event.clone(), &|name| sources.source_of(name));
                if let Some(elapsed) = elapsed {
                    for entry in self.app.entries.iter_mut().rev() {
                        if let Entry::Tool(call) = entry
                            && call.id == *id
                        {
                            call.elapsed = elapsed;
                            break;
                        }
                    }
                }
                return;
            }
            // Each tool a server added is filed under its server for `/tools`.
            AgentEvent::ToolsChanged { added, .. } => {
                for name in added {
                    let source = self.sources.source_of(name);
                    self.sources.set(name.clone(), source);
                }
            }
            _ => {}
        }
        let sources = self.sources.clone();
        self.app.apply(event, &|name| sources.source_of(name));
    }

    fn ui_request(&mut self, request: UiRequest) {
        match request {
            UiRequest::Approval(request, answer) => {
                self.app
                    .approvals
                    .push_back(ApprovalDialog::new(&request, Some(answer)));
            }
            UiRequest::Elicitation(request, answer) => {
                self.app
                    .elicitations
                    .push_back(ElicitationDialog::new(&request, Some(answer)));
            }
        }
    }

    fn tick(&mut self) {
        self.reload_prompts_on_change();
        let starts = &self.call_starts;
        for call in self.app.running_calls() {
            if let Some(start) = starts.get(&call.id) {
                call.elapsed = start.elapsed();
            }
        }
        let statuses = self.session.host.servers().status();
        for status in &statuses {
            let previous = self.server_states.insert(status.name.clone(), status.state);
            let was_failing = previous.is_some_and(is_failure);
            let attempts_before = self
                .server_attempts
                .insert(status.name.clone(), status.connect_attempts);
            // Supervision may have brought it back between two ticks: more connect attempts
            // than before, not ours, and no failure seen in between.
            let mut restarted_unseen = !was_failing
                && attempts_before
                    .is_some_and(|before| before >= 1 && status.connect_attempts > before)
                && !self.own_reconnects.contains(&status.name);
            // The lazy reconnect after `/mcp restart` is the operator's doing.
            if restarted_unseen && self.own_restarts.remove(&status.name) {
                restarted_unseen = false;
            }
            // `/mcp stop` says so itself; the tick does not announce it again.
            let stopped_here = status.failure_kind == Some(FailureKind::Stopped);
            let reason = status
                .failure
                .as_deref()
                .map(short_reason)
                .unwrap_or_else(|| status.state.label().to_owned());
            if is_failure(status.state) && !was_failing && !stopped_here {
                self.app.aside_error(format!(
                    "MCP {} is {}: {reason} — see /tools",
                    status.name,
                    status.state.label()
                ));
            } else if restarted_unseen {
                self.app.aside_error(format!(
                    "MCP {} stopped and was reconnected automatically ({reason}) — see /tools",
                    status.name
                ));
            }
        }
        match &self.app.page {
            Some(Page::Tools { .. }) => self.refresh_sources(),
            Some(Page::Mcp) => {
                self.app.mcp_rows = statuses.iter().map(McpRow::from_status).collect();
            }
            None => {}
        }
    }

    fn refresh_sources(&mut self) {
        self.app.sources = source_rows(
            &self.session.host,
            &self.session.facts,
            &self.sources.by_source(),
        );
    }

    fn reconnect(&mut self, server: String) {
        self.app
            .notice(format!("reconnecting MCP {server} in the background…"));
        self.own_reconnects.insert(server.clone());
        let host = self.session.host.clone();
        let done = self.background.0.clone();
        let sources = self.sources.clone();
        tokio::spawn(async move {
            let outcome = match host.servers().reconnect(&server).await {
                Ok(()) => offered_tools(&host, &server, &sources).await,
                Err(error) => Err(error.to_string()),
            };
            let _ = done.send(Background::Reconnected { server, outcome });
        });
    }

    /// `/mcp stop SERVER`: disconnects it in the background and keeps it down.
    fn stop(&mut self, server: String) {
        if self.session.host.servers().server_status(&server).is_err() {
            self.app.error(format!(
                "/mcp stop: no MCP server named {server} (/mcp lists them)"
            ));
            return;
        }
        let host = self.session.host.clone();
        let done = self.background.0.clone();
        tokio::spawn(async move {
            let outcome = host
                .servers()
                .stop(&server)
                .await
                .map_err(|error| error.to_string());
            let _ = done.send(Background::Stopped { server, outcome });
        });
    }

    /// `/mcp restart SERVER`: drops its connection and retained catalogue; the next request
    /// connects it again.
    fn restart(&mut self, server: String) {
        if self.session.host.servers().server_status(&server).is_err() {
            self.app.error(format!(
                "/mcp restart: no MCP server named {server} (/mcp lists them)"
            ));
            return;
        }
        self.own_restarts.insert(server.clone());
        let host = self.session.host.clone();
        let done = self.background.0.clone();
        tokio::spawn(async move {
            let outcome = host
                .servers()
                .restart(&server)
                .await
                .map_err(|error| error.to_string());
            let _ = done.send(Background::Restarted { server, outcome });
        });
    }

    fn background_done(&mut self, done: Background) {
        match done {
            Background::Stopped { server, outcome } => match outcome {
                Ok(()) => {
                    self.server_states.insert(server.clone(), ServerState::Down);
                    self.app.aside_notice(format!(
                        "MCP {server} stopped: it stays down and its tools answer that it was stopped — /mcp restart {server} reconnects it"
                    ));
                }
                Err(error) => self.app.aside_error(format!(
                    "MCP {server} did not stop: {}",
                    short_reason(&error)
                )),
            },
            Background::Restarted { server, outcome } => match outcome {
                Ok(()) => {
                    self.server_states
                        .insert(server.clone(), ServerState::NotConnected);
                    self.app.aside_notice(format!(
                        "MCP {server} restarted: its catalogue is cleared and it reconnects on the next request"
                    ));
                    self.restarted.insert(server);
                }
                Err(error) => {
                    self.own_restarts.remove(&server);
                    self.app.aside_error(format!(
                        "MCP {server} did not restart: {}",
                        short_reason(&error)
                    ));
                }
            },
            Background::Reconnected { server, outcome } => {
                self.own_reconnects.remove(&server);
                if let Some(status) = self
                    .session
                    .host
                    .servers()
                    .status()
                    .into_iter()
                    .find(|status| status.name == server)
                {
                    self.server_attempts
                        .insert(server.clone(), status.connect_attempts);
                }
                match outcome {
                    Ok(specs) => {
                        let count = specs.len();
                        self.session.tools.append(specs);
                        self.server_states
                            .insert(server.clone(), ServerState::Connected);
                        self.app
                            .aside_notice(format!("MCP {server} reconnected: {count} tools"));
                    }
                    Err(error) => {
                        self.server_states
                            .insert(server.clone(), ServerState::Failed);
                        self.app.aside_error(format!(
                            "MCP {server} did not reconnect: {}",
                            short_reason(&error)
                        ));
                    }
                }
            }
            Background::Prompts(prompts) => self.app.prompts = prompts,
            Background::PromptReady { label, messages } => {
                self.app.notice(format!("prompt {label}"));
                let mut texts = Vec::new();
                for (role, text) in messages {
                    self.app.push(Entry::PromptMessage {
                        role: role.clone(),
                        text: text.clone(),
                    });
                    if role == "assistant" {
                        self.session.conversation.push(Message::Assistant {
                            text,
                            tool_calls: Vec::new(),
                        });
                    } else {
                        texts.push(text);
                    }
                }
                if self.turn.is_none() {
                    let prompt = (!texts.is_empty()).then(|| texts.join("\n\n"));
                    if let Some(prompt) = &prompt {
                        self.session
                            .conversation
                            .push(Message::user(prompt.clone()));
                    }
                    self.start_turn(prompt);
                }
            }
            Background::SkillReady { name, body, rest } => match body {
                Ok(body) => {
                    self.app.notice(format!("skill {name} loaded"));
                    self.pending_context
                        .push(format!("<skill name=\"{name}\">\n{body}\n</skill>"));
                    if !rest.is_empty() {
                        self.submit(rest);
                    } else {
                        self.app.notice("it goes with your next message");
                    }
                }
                Err(error) => self.app.error(format!("skill {name}: {error}")),
            },
            Background::Failed(message) => self.app.aside_error(message),
        }
    }

    /// Reloads the prompts' slash commands when a server said its prompts changed (or when
    /// changes were missed).
    fn reload_prompts_on_change(&mut self) {
        use tokio::sync::broadcast::error::TryRecvError;
        let mut changed = false;
        loop {
            match self.catalog_changes.try_recv() {
                Ok(UpstreamEvent::CatalogChanged {
                    kind: ListKind::Prompts,
                    ..
                })
                | Err(TryRecvError::Lagged(_)) => changed = true,
                Ok(_) => {}
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        if changed {
            self.load_prompts();
        }
    }

    fn load_prompts(&self) {
        let host = self.session.host.clone();
        let done = self.background.0.clone();
        tokio::spawn(async move {
            let mut infos = Vec::new();
            for status in host.servers().status() {
                if status.state != ServerState::Connected || status.counts.prompts == Some(0) {
                    continue;
                }
                // Through the gate, as the person's listing: a server the operator denies
                // offers no prompts here.
                let context = warden_host::CallContext::new(
                    warden_policy::CallSurface::User,
                    CancellationToken::new(),
                );
                let Ok(prompts) = host.list_prompts(context, &status.name).await else {
                    continue;
                };
                for prompt in prompts {
                    infos.push(PromptInfo {
                        server: status.name.clone(),
                        name: prompt.name.to_string(),
                        description: prompt.description.clone().unwrap_or_default(),
                        arguments: prompt
                            .arguments
                            .iter()
                            .flatten()
                            .map(|argument| {
                                (argument.name.clone(), argument.required.unwrap_or(false))
                            })
                            .collect(),
                    });
                }
            }
            let _ = done.send(Background::Prompts(infos));
        });
    }

    fn command(&mut self, command: SlashCommand) {
        match command {
            SlashCommand::Tools => {
                self.refresh_sources();
                self.app.page = Some(Page::Tools {
                    selected: 0,
                    open: None,
                });
            }
            SlashCommand::Mcp => {
                self.app.mcp_rows = self
                    .session
                    .host
                    .servers()
                    .status()
                    .iter()
                    .map(McpRow::from_status)
                    .collect();
                self.app.page = Some(Page::Mcp);
            }
            SlashCommand::McpCancel(server) => {
                let count = self.session.executor.cancel_calls_to(&server);
                self.app.notice(format!(
                    "cancelled {count} call(s) in flight to MCP {server}"
                ));
            }
            SlashCommand::McpRestart(server) => self.restart(server),
            SlashCommand::McpStop(server) => self.stop(server),
            SlashCommand::Skills => {
                if self.session.skills.is_empty() {
                    self.app
                        .notice("no skills are installed for this workspace");
                }
                for (name, description) in &self.session.skills {
                    self.app.notice(format!("${name} — {description}"));
                }
            }
            SlashCommand::Model(None) => self
                .app
                .notice(format!("model: {} (/model NAME switches)", self.app.model)),
            SlashCommand::Model(Some(name)) => match (self.session.switch_model)(&name) {
                Ok((client, label, notice)) => {
                    self.session.client = client;
                    self.app.model = label;
                    self.app.notice(notice);
                }
                Err(error) => self.app.error(error),
            },
            SlashCommand::Help => {
                for (command, what) in COMMANDS {
                    self.app.notice(format!("{command} — {what}"));
                }
                self.app.notice(
                    "/mcp__SERVER__PROMPT key=value … — an MCP prompt (Tab completes) · $SKILL — load a skill",
                );
                self.app
                    .notice("Ctrl-C cancels the running turn · Ctrl-D quits · PgUp/PgDn scroll");
            }
            SlashCommand::Prompt {
                server,
                prompt,
                arguments,
            } => self.prompt(server, prompt, arguments),
            SlashCommand::Skill { name, rest } => self.skill(name, rest),
            SlashCommand::Unknown(line) => self
                .app
                .error(format!("unknown command {line}; /help lists the commands")),
        }
    }

    fn prompt(&mut self, server: String, prompt: String, arguments: String) {
        if self.turn.is_some() {
            self.app
                .notice("a turn is running; wait for it or cancel it with Ctrl-C");
            return;
        }
        let arguments = match parse_prompt_arguments(&arguments) {
            Ok(arguments) => arguments,
            Err(error) => {
                self.app.error(format!("prompt arguments: {error}"));
                return;
            }
        };
        if let Some(info) = self
            .app
            .prompts
            .iter()
            .find(|info| info.server == server && info.name == prompt)
        {
            let missing = missing_arguments(info, &arguments);
            if !missing.is_empty() {
                self.app.error(format!(
                    "{} needs {}",
                    info.command(),
                    missing
                        .iter()
                        .map(|name| format!("{name}=…"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ));
                return;
            }
        }
        let host = self.session.host.clone();
        let done = self.background.0.clone();
        let label = format!("/mcp__{server}__{prompt}");
        tokio::spawn(async move {
            let context = CallContext::new(CallSurface::User, CancellationToken::new());
            let outcome = host.get_prompt(context, &server, &prompt, arguments).await;
            let _ = done.send(match outcome {
                Ok(result) => Background::PromptReady {
                    label,
                    messages: warden_host::prompt_messages(&result)
                        .into_iter()
                        .map(|(role, text)| (role.to_owned(), text))
                        .collect(),
                },
                Err(error) => Background::Failed(error.to_string()),
            });
        });
    }

    fn skill(&mut self, name: String, rest: String) {
        let host = self.session.host.clone();
        let done = self.background.0.clone();
        tokio::spawn(async move {
            let outcome = host
                .call(
                    CallSurface::User,
                    "use_skill",
                    json!({ "name": name }),
                    CancellationToken::new(),
                )
                .await;
            let body = if outcome.is_error() {
                Err(first_line(&outcome.model_text()).to_owned())
            } else {
                Ok(outcome.model_text())
            };
            let _ = done.send(Background::SkillReady { name, body, rest });
        });
    }
}

async fn wait_turn(
    turn: &mut Option<tokio::task::JoinHandle<TurnResult>>,
) -> Result<TurnResult, tokio::task::JoinError> {
    match turn {
        Some(handle) => handle.await,
        None => std::future::pending().await,
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text)
}

/// Connects `server` (if it is not) and returns its tools as the model's list offers them,
/// recording each tool's source for /tools. A deferred server offers none here: its tools are
/// reached through search, as at the start of the session.
async fn offered_tools(
    host: &Host,
    server: &str,
    sources: &ToolSources,
) -> Result<Vec<ToolSpec>, String> {
    let tools = host
        .server_tools(server)
        .await
        .map_err(|error| error.to_string())?;
    // Configured or automatic deferral alike.
    let deferred = host
        .deferred_servers()
        .iter()
        .any(|(name, _summary)| name == server);
    if deferred {
        return Ok(Vec::new());
    }
    Ok(tools
        .into_iter()
        .map(|tool| {
            sources.set(tool.descriptor.public_name.clone(), server.to_owned());
            ToolSpec {
                description: tool
                    .tool
                    .definition
                    .description
                    .as_deref()
                    .unwrap_or("")
                    .to_owned(),
                name: tool.descriptor.public_name,
                input_schema: std::sync::Arc::unwrap_or_clone(tool.descriptor.input_schema),
            }
        })
        .collect())
}
