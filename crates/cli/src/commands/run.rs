//! `warden run`: the headless agent. The final answer goes to stdout (or one JSON object, or one
//! JSON event per line); progress to stderr. Every tool call goes through the gate; with nobody
//! to ask, a call that needs approval is denied and the denial is reported. Calls the agent
//! makes through the tool bridge (`warden tool` in its bash tool) are written to the transcript
//! as they finish.

use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_agent::{
    Agent, AgentEvent, AgentOptions, Message, RunOutcome, Session, SessionRecord, StopReason,
};
use warden_bridge::{BridgeCall, CallObserver};
use warden_hooks::HookEvent;

use crate::Globals;
use crate::setup::{AgentFlags, PolicyFlags, async_runtime, is_usage_error, open_agent_session};
use warden_session::AgentSession;

/// Exit codes of `warden run`, documented in the README.
pub(crate) mod exit {
    /// The agent finished.
    pub(crate) const DONE: u8 = 0;
    /// The model or the session failed.
    pub(crate) const ERROR: u8 = 1;
    /// Bad usage or configuration (including no model configured).
    pub(crate) const USAGE: u8 = 2;
    /// Stopped at `--max-turns` before the model finished.
    pub(crate) const MAX_TURNS: u8 = 3;
    /// Interrupted (Ctrl-C).
    pub(crate) const INTERRUPTED: u8 = 130;
}

/// Model turns a run may take when `--max-turns` is not given: enough for long tasks, and a bound
/// on a model that loops.
pub(crate) const DEFAULT_MAX_TURNS: u32 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutputFormat {
    /// The final answer on stdout; progress on stderr.
    Text,
    /// One JSON object at the end: result, turns, tool calls with their decisions, usage, session id.
    Json,
    /// One JSON event per line as it happens, then the same summary as `json`.
    StreamJson,
}

#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The prompt; `-` (or nothing, with a pipe on stdin) reads it from standard input.
    prompt: Option<String>,
    /// A `[models.NAME]` entry to use instead of the default.
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// An `[agents.NAME]` profile: its model, instructions, skills and servers.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    #[arg(long, value_enum, default_value = "text")]
    output_format: OutputFormat,
    /// An extra MCP server for this run: a command line or a URL (legacy HTTP+SSE when its path
    /// ends in `/sse`), optionally `NAME=…`; repeatable.
    #[arg(long = "mcp", value_name = "CMD|URL")]
    mcp: Vec<String>,
    #[command(flatten)]
    policy: PolicyFlags,
    /// A folder the built-in tools may read and write beside the working folder (repeatable);
    /// anything else outside the workspace asks first.
    #[arg(long = "add-dir", value_name = "DIR")]
    add_dir: Vec<std::path::PathBuf>,
    /// Stop after this many model turns (default 100; at least 1).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TURNS,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_turns: u32,
    /// Continue the session with this id.
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    resume: Option<String>,
    /// Continue the latest session of this folder.
    #[arg(long = "continue")]
    continue_latest: bool,
}

pub(crate) fn run(globals: &Globals, args: RunArgs) -> anyhow::Result<ExitCode> {
    let prompt = match read_prompt(args.prompt.as_deref())? {
        Some(prompt) => prompt,
        None if args.prompt.as_deref() == Some("-") || !std::io::stdin().is_terminal() => {
            eprintln!(
                "warden run: standard input held no prompt (it was empty); pipe one in \
                 (echo 'list the files' | warden run -) or give it as an argument \
                 (warden run 'list the files')"
            );
            return Ok(ExitCode::from(exit::USAGE));
        }
        None => {
            eprintln!(
                "warden run: give a prompt as an argument (warden run 'list the files'), or `-` \
                 to read it from standard input"
            );
            return Ok(ExitCode::from(exit::USAGE));
        }
    };
    let runtime = async_runtime()?;
    let format = args.output_format;
    runtime.block_on(async {
        // Listening starts before anything slow: a stop signal while servers start is not lost.
        let cancel = crate::setup::cancel_on_stop_signal();
        let opened = open_agent_session(
            globals,
            AgentFlags {
                model: args.model.as_deref(),
                agent: args.agent.as_deref(),
                mcp: &args.mcp,
                policy: &args.policy,
                add_dirs: &args.add_dir,
                resume: args.resume.as_deref(),
                continue_latest: args.continue_latest,
            },
            None,
            None,
        );
        let mut session = match opened {
            Ok(session) => session,
            Err(error) => return Ok(usage_or_error(error, format)),
        };
        let outcome = run_session(&mut session, prompt, &args, cancel).await;
        session.host.shutdown().await;
        outcome
    })
}

fn usage_or_error(error: anyhow::Error, format: OutputFormat) -> ExitCode {
    let code = if is_usage_error(&error) {
        exit::USAGE
    } else {
        exit::ERROR
    };
    fail(format, &crate::setup::error_line(&error), code)
}

/// Reports a run that ended in an error: one line on stderr, and for the JSON formats the one
/// final object (`{"type":"result","stop":"error","error":…}`) so a reader always gets one.
fn fail(format: OutputFormat, message: &str, code: u8) -> ExitCode {
    eprintln!("warden: {message}");
    if format != OutputFormat::Text {
        let summary = json!({"type": "result", "stop": "error", "error": message});
        println!("{summary}");
    }
    ExitCode::from(code)
}

fn read_prompt(argument: Option<&str>) -> anyhow::Result<Option<String>> {
    let from_stdin = match argument {
        Some("-") => true,
        Some(text) => return Ok(Some(text.to_owned())),
        None => !std::io::stdin().is_terminal(),
    };
    if !from_stdin {
        return Ok(None);
    }
    let mut prompt = String::new();
    std::io::stdin()
        .read_to_string(&mut prompt)
        .context("reading the prompt from standard input")?;
    Ok((!prompt.trim().is_empty()).then_some(prompt))
}

async fn run_session(
    session: &mut AgentSession,
    prompt: String,
    args: &RunArgs,
    cancel: CancellationToken,
) -> anyhow::Result<ExitCode> {
    let format = args.output_format;
    let workspace = session.workspace.clone();
    session
        .host
        .session_event(HookEvent::SessionStart, &workspace, None)
        .await;
    let verdict = session
        .host
        .session_event(
            HookEvent::UserPromptSubmit,
            &workspace,
            Some(prompt.clone()),
        )
        .await;
    if let Some(reason) = verdict.block_reason() {
        session
            .host
            .session_event(HookEvent::SessionEnd, &workspace, None)
            .await;
        let message = format!("a UserPromptSubmit hook blocked the prompt: {reason}");
        return Ok(fail(format, &message, exit::ERROR));
    }
    // Servers marked `required = true` start first: one that cannot fails the run before the
    // model is asked. A stop signal meanwhile ends the run as interrupted.
    let started = tokio::select! {
        started = async {
            session.host.servers().connect_required().await?;
            Ok::<_, warden_mcp::McpError>(session.tool_list().await)
        } => Some(started),
        () = cancel.cancelled() => None,
    };
    let (tools, failures) = match started {
        Some(Ok(listed)) => listed,
        Some(Err(failure)) => {
            let message = format!("a required MCP server did not start: {failure}");
            return Ok(fail(format, &message, exit::ERROR));
        }
        None => {
            let message = "interrupted while the servers started; nothing was sent to the model";
            return Ok(fail(format, message, exit::INTERRUPTED));
        }
    };
    for failure in &failures {
        eprintln!("{failure}");
    }
    let sandbox = &session.bash_confinement;
    if sandbox.mode != warden_agent::SandboxMode::Off && !sandbox.enforced {
        eprintln!(
            "warden: the bash sandbox is not enforced on this machine ({}); bash calls still ask \
             before they run",
            sandbox.summary
        );
    }
    let routing = session.execution_routing().await;
    let system_prompt = session.system_prompt(routing);
    let (events_sender, mut events) = tokio::sync::mpsc::unbounded_channel();
    let executor = session.executor(Some(Arc::new(events_sender.clone())));
    let agent = Agent::new(session.client.clone(), executor, system_prompt, tools)
        .with_options(AgentOptions {
            max_turns: Some(args.max_turns),
            ..AgentOptions::default()
        })
        .with_events(events_sender);

    let (transcript, mut conversation) = open_transcript(session)?;
    let user = Message::user(prompt);
    lock(&transcript).append_message(&user)?;
    conversation.push(user);
    let already = conversation.len();

    // What went wrong on the way (start-up failures, catalogue warnings, lists that could not
    // be refreshed) goes into the JSON summary too.
    let mut warnings = failures;
    let printer = tokio::spawn(async move {
        let mut noticed = Vec::new();
        let mut progress = ProgressLines::default();
        while let Some(event) = events.recv().await {
            print_event(&event, format);
            if format == OutputFormat::Text
                && let Some(line) = progress.line_for(&event, std::time::Instant::now())
            {
                eprintln!("{line}");
            }
            if let AgentEvent::ToolsChanged { warnings, .. } = &event {
                noticed.extend(warnings.iter().cloned());
            }
        }
        noticed
    });
    let result = agent.run(&mut conversation, &cancel).await;
    drop(agent);
    warnings.extend(printer.await.unwrap_or_default());

    {
        let mut transcript = lock(&transcript);
        for message in &conversation[already..] {
            transcript.append_message(message)?;
        }
    }
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            let message = format!("the model request failed: {error}");
            return Ok(fail(format, &message, exit::ERROR));
        }
    };
    let session_id = {
        let mut transcript = lock(&transcript);
        transcript.append_event(&json!({"type": "run_finished", "outcome": &outcome}))?;
        transcript.id().to_owned()
    };
    session
        .host
        .session_event(HookEvent::Stop, &workspace, None)
        .await;
    report(&outcome, &session_id, &warnings, format)?;
    session
        .host
        .session_event(HookEvent::SessionEnd, &workspace, None)
        .await;
    Ok(ExitCode::from(match outcome.stop {
        StopReason::Completed => exit::DONE,
        StopReason::MaxTurns => exit::MAX_TURNS,
        StopReason::Cancelled => exit::INTERRUPTED,
    }))
}

/// A session's transcript, shared by the frontend and the tool bridge's observer.
pub(crate) type SharedTranscript = Arc<Mutex<Session>>;

/// Opens the session's transcript — the resumed one, or a new one under the session host's id,
/// so the transcript, the audit and the bridge name one session — with the resumed
/// conversation, and has the tool bridge write each call to it as it finishes.
pub(crate) fn open_transcript(
    session: &mut AgentSession,
) -> anyhow::Result<(SharedTranscript, Vec<Message>)> {
    let (transcript, conversation) = match session.resumed.take() {
        Some((id, messages)) => {
            let (transcript, _) = session.store.resume(&id)?;
            (transcript, messages)
        }
        None => (
            session.store.create_with_id(
                session.host.session_id(),
                &session.workspace,
                Some(&session.model.name),
            )?,
            Vec::new(),
        ),
    };
    let transcript = Arc::new(Mutex::new(transcript));
    session.observe_bridge_calls(Arc::new(TranscriptObserver {
        transcript: transcript.clone(),
    }));
    Ok((transcript, conversation))
}

/// The transcript, for one write.
pub(crate) fn lock(transcript: &Mutex<Session>) -> std::sync::MutexGuard<'_, Session> {
    transcript.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Writes each call the agent made through the tool bridge to the transcript (redacted like
/// every record), beside the audit record the gate wrote.
struct TranscriptObserver {
    transcript: Arc<Mutex<Session>>,
}

impl CallObserver for TranscriptObserver {
    fn call_finished(&self, call: &BridgeCall) {
        let record = tool_cli_record(call);
        if let Err(error) = lock(&self.transcript).append(&record) {
            tracing::warn!("writing a tool bridge call to the transcript: {error}");
        }
    }
}

/// The transcript record of one bridge call.
fn tool_cli_record(call: &BridgeCall) -> SessionRecord {
    SessionRecord::ToolCliCall {
        server: call.server.clone(),
        tool: call.tool.clone(),
        public_name: call.view.public_name.clone(),
        arguments: call.arguments.clone(),
        decision: call.view.decision.clone(),
        reason: call.view.reason.clone(),
        is_error: call.view.is_error,
        text: call.view.text.clone(),
    }
}

/// The shortest time between two progress lines of one call: a few a second at most.
const PROGRESS_LINE_INTERVAL: std::time::Duration = std::time::Duration::from_millis(250);

/// Text mode's progress lines: one per update of a running call, at most one per
/// [`PROGRESS_LINE_INTERVAL`] for each call.
#[derive(Default)]
struct ProgressLines {
    /// Running calls: their tool's name and when their last line was printed.
    calls: std::collections::HashMap<String, (String, Option<std::time::Instant>)>,
}

impl ProgressLines {
    /// The line to print for this event now, if any.
    fn line_for(&mut self, event: &AgentEvent, now: std::time::Instant) -> Option<String> {
        match event {
            AgentEvent::ToolCallStarted { id, name, .. } => {
                self.calls.insert(id.clone(), (name.clone(), None));
                None
            }
            AgentEvent::ToolCallFinished { id, .. } => {
                self.calls.remove(id);
                None
            }
            AgentEvent::ToolProgress {
                id,
                message,
                progress,
                total,
            } => {
                let (name, last) = self.calls.get_mut(id)?;
                if last.is_some_and(|last| now.duration_since(last) < PROGRESS_LINE_INTERVAL) {
                    return None;
                }
                *last = Some(now);
                let amount = match (progress, total) {
                    (Some(done), Some(total)) if *total > 0.0 => {
                        format!(" {:.0}%", done / total * 100.0)
                    }
                    (Some(done), _) => format!(" {done}"),
                    (None, _) => String::new(),
                };
                let message = message
                    .as_deref()
                    .map(|text| format!(" {text}"))
                    .unwrap_or_default();
                Some(format!("… {name}:{amount}{message}"))
            }
            _ => None,
        }
    }
}

fn print_event(event: &AgentEvent, format: OutputFormat) {
    match format {
        OutputFormat::StreamJson => {
            if let Ok(line) = serde_json::to_string(event) {
                let mut stdout = std::io::stdout().lock();
                let _ = writeln!(stdout, "{line}");
                let _ = stdout.flush();
            }
        }
        OutputFormat::Text | OutputFormat::Json => match event {
            AgentEvent::ToolCallStarted { name, .. } => eprintln!("→ {name}"),
            AgentEvent::ToolCallFinished { name, result, .. } => {
                for warning in &result.warnings {
                    eprintln!("warning: {name}: {warning}");
                }
                if let Some(denial) = &result.denial {
                    eprintln!("✗ {name}: {} — {denial}", result.decision);
                } else if result.is_error {
                    eprintln!("✗ {name}: error");
                }
            }
            AgentEvent::ModelRetry {
                attempt, reason, ..
            } => eprintln!("… retrying the model request ({attempt}): {reason}"),
            AgentEvent::ContextElided { results, .. } => {
                eprintln!("… {results} old tool result(s) elided to fit the context budget")
            }
            AgentEvent::ToolsChanged { added, warnings } => {
                for warning in warnings {
                    eprintln!("warning: {warning}");
                }
                if !added.is_empty() {
                    eprintln!("… now offered to the model: {}", added.join(", "));
                }
            }
            _ => {}
        },
    }
}

fn report(
    outcome: &RunOutcome,
    session_id: &str,
    warnings: &[String],
    format: OutputFormat,
) -> anyhow::Result<()> {
    match format {
        OutputFormat::Text => {
            // An interrupted turn may have no answer: say so on stderr, print no bare line.
            if outcome.stop != StopReason::Cancelled || !outcome.final_text.is_empty() {
                println!("{}", outcome.final_text);
            }
            if outcome.stop == StopReason::Cancelled {
                eprintln!(
                    "warden: interrupted after {} turn(s); the running call was cancelled and \
                     recorded (resume with `warden run --continue`)",
                    outcome.turns
                );
            }
            if outcome.stop == StopReason::MaxTurns {
                eprintln!(
                    "warden: stopped after {} turns (--max-turns)",
                    outcome.turns
                );
            }
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            let summary = json!({
                "type": "result",
                "result": outcome.final_text,
                "stop": outcome.stop,
                "turns": outcome.turns,
                "tool_calls": outcome.tool_calls,
                "usage": outcome.usage,
                "session_id": session_id,
                "warnings": warnings,
            });
            println!("{}", serde_json::to_string(&summary)?);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn progress(done: f64) -> AgentEvent {
        AgentEvent::ToolProgress {
            id: "call_1".to_owned(),
            message: Some("working".to_owned()),
            progress: Some(done),
            total: Some(10.0),
        }
    }

    #[test]
    fn progress_lines_are_limited_to_a_few_a_second_per_call() {
        let mut lines = ProgressLines::default();
        let start = Instant::now();
        let started = AgentEvent::ToolCallStarted {
            id: "call_1".to_owned(),
            name: "mcp__fx__slow".to_owned(),
            arguments: serde_json::Value::Null,
        };
        assert_eq!(lines.line_for(&started, start), None);
        assert_eq!(
            lines.line_for(&progress(1.0), start).as_deref(),
            Some("… mcp__fx__slow: 10% working")
        );
        // Updates inside the interval are dropped; the next one after it is printed.
        assert_eq!(
            lines.line_for(&progress(2.0), start + Duration::from_millis(100)),
            None
        );
        assert!(
            lines
                .line_for(&progress(3.0), start + PROGRESS_LINE_INTERVAL)
                .is_some()
        );
        // A finished call prints nothing more.
        let finished = AgentEvent::ToolCallFinished {
            id: "call_1".to_owned(),
            name: "mcp__fx__slow".to_owned(),
            result: warden_agent::ToolCallResult::error("x"),
        };
        assert_eq!(lines.line_for(&finished, start), None);
        assert_eq!(
            lines.line_for(&progress(4.0), start + Duration::from_secs(5)),
            None
        );
    }
}
