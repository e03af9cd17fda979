//! `warden chat`: the interactive terminal frontend. Asks about untrusted project servers, opens
//! the agent session with the chat's approver and elicitation handler, and runs the TUI.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use warden_agent::{client_for, select_model};
use warden_chat::{ChatSession, SourceFacts, TrustQuestion, ask_trust, run_chat, ui_channel};
use warden_config::{TrustState, TrustStore};
use warden_hooks::HookEvent;

use crate::Globals;
use crate::setup::{
    AgentFlags, PolicyFlags, async_runtime, is_usage_error, load_config, open_agent_session,
};
use warden_session::{AgentSession, ad_hoc_servers, model_switch_notice};

#[derive(Debug, clap::Args)]
pub(crate) struct ChatArgs {
    /// A `[models.NAME]` entry to use instead of the default.
    #[arg(long, value_name = "NAME")]
    model: Option<String>,
    /// An `[agents.NAME]` profile: its model, instructions, skills and servers.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// An extra MCP server for this session: a command line or a URL (legacy HTTP+SSE when its
    /// path ends in `/sse`), optionally `NAME=…`; repeatable.
    #[arg(long = "mcp", value_name = "CMD|URL")]
    mcp: Vec<String>,
    #[command(flatten)]
    policy: PolicyFlags,
    /// A folder the built-in tools may read and write beside the working folder (repeatable);
    /// anything else outside the workspace asks first.
    #[arg(long = "add-dir", value_name = "DIR")]
    add_dir: Vec<std::path::PathBuf>,
    /// Continue the session with this id.
    #[arg(long, value_name = "ID", conflicts_with = "continue_latest")]
    resume: Option<String>,
    /// Continue the latest session of this folder.
    #[arg(long = "continue")]
    continue_latest: bool,
}

pub(crate) fn run(globals: &Globals, args: ChatArgs) -> anyhow::Result<ExitCode> {
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        eprintln!("warden chat needs a terminal; use `warden run` for headless use");
        return Ok(ExitCode::from(2));
    }
    ask_about_project_servers(globals, args.agent.as_deref())?;
    let runtime = async_runtime()?;
    runtime.block_on(async {
        let (approver, elicitor, ui_requests) = ui_channel();
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
            Some(approver),
            Some(elicitor),
        );
        let mut session = match opened {
            Ok(session) => session,
            Err(error) => {
                eprintln!("warden: {}", crate::setup::error_line(&error));
                let usage = is_usage_error(&error);
                return Ok(ExitCode::from(if usage { 2 } else { 1 }));
            }
        };
        let outcome = chat(globals, &args, &mut session, ui_requests).await;
        session.host.shutdown().await;
        outcome
    })
}

/// The trust prompt: each enabled project server not approved as it is now — only those the
/// session will have (an `--agent` profile with `mcp_servers` leaves the others out).
fn ask_about_project_servers(globals: &Globals, agent: Option<&str>) -> anyhow::Result<()> {
    let (paths, _, config) = load_config(globals)?;
    let mut store = TrustStore::open(&paths)?;
    // An unknown profile is reported when the session opens.
    let profile_servers = agent
        .and_then(|name| config.models.agents.get(name))
        .and_then(|profile| profile.mcp_servers.as_ref());
    let pending: Vec<_> = config
        .servers
        .values()
        .filter(|entry| entry.enabled)
        .filter(|entry| profile_servers.is_none_or(|servers| servers.contains(&entry.name)))
        .filter_map(|entry| match store.state(entry) {
            state @ (TrustState::Untrusted | TrustState::Changed) => Some((entry, state)),
            _ => None,
        })
        .collect();
    if pending.is_empty() {
        return Ok(());
    }
    let questions = pending
        .iter()
        .map(|(entry, state)| TrustQuestion {
            name: entry.name.clone(),
            grants: entry.trust_description(),
            source: entry.source.display().to_string(),
            state: state.as_str().to_owned(),
        })
        .collect();
    let answers = ask_trust(questions, "warden").context("asking about project servers")?;
    for ((entry, _), trusted) in pending.iter().zip(answers) {
        if trusted {
            store
                .trust(entry)
                .with_context(|| format!("approving project server {}", entry.name))?;
        }
    }
    Ok(())
}

async fn chat(
    globals: &Globals,
    args: &ChatArgs,
    session: &mut AgentSession,
    ui_requests: tokio::sync::mpsc::UnboundedReceiver<warden_chat::UiRequest>,
) -> anyhow::Result<ExitCode> {
    let workspace = session.workspace.clone();
    session
        .host
        .session_event(HookEvent::SessionStart, &workspace, None)
        .await;
    let (tools, failures) = session.tool_list().await;
    let routing = session.execution_routing().await;
    let system_prompt = session.system_prompt(routing);
    let (events, event_receiver) = tokio::sync::mpsc::unbounded_channel();
    let executor = session.executor(Some(std::sync::Arc::new(events.clone())));

    // Tool bridge calls are written to the transcript as they finish.
    let (transcript, conversation) = crate::commands::run::open_transcript(session)?;

    let (_, _, config) = load_config(globals)?;
    let mut facts: BTreeMap<String, SourceFacts> = config
        .servers
        .values()
        .map(|entry| (entry.name.clone(), SourceFacts::from_entry(entry)))
        .collect();
    for spec in ad_hoc_servers(&args.mcp)? {
        facts.insert(spec.name.clone(), SourceFacts::from_spec(&spec));
    }
    let host = session.host.clone();
    let client = session.client.clone();
    let model_name = session.model.name.clone();
    let skills = session
        .skills
        .skills
        .iter()
        .map(|skill| (skill.name.clone(), skill.description.clone()))
        .collect();
    // `/model NAME`: the session keeps its defer mode (its tools array and prompt stay as they
    // are), and the notice says so; a model that cannot speak that mode is refused.
    let defer_mode = session.deferral.mode();
    let models = config.models.clone();
    let sampling_model = session.sampling_model.clone();
    let switch_model: warden_chat::ModelSwitch<'_> = Box::new(move |name: &str| {
        let env = |variable: &str| std::env::var(variable).ok();
        let mut model =
            select_model(&models, Some(name), None, &env).map_err(|error| error.to_string())?;
        let notice = model_switch_notice(defer_mode, &model)?;
        model.defer_mode = defer_mode;
        let label = model.name.clone();
        let client = client_for(model).map_err(|error| error.to_string())?;
        // Servers' sampling requests follow the switch too.
        sampling_model.switch_to(client.clone());
        Ok((client, label, notice))
    });

    let outcome = run_chat(ChatSession {
        host: host.clone(),
        client,
        model_name,
        system_prompt,
        tools,
        executor,
        events,
        event_receiver,
        ui_requests,
        facts,
        skills,
        switch_model,
        record: Box::new(|message| {
            if let Err(error) = crate::commands::run::lock(&transcript).append_message(message) {
                tracing::warn!("writing the transcript: {error}");
            }
        }),
        conversation,
        startup_notes: failures,
        workspace: workspace.clone(),
    })
    .await;
    host.session_event(HookEvent::SessionEnd, &workspace, None)
        .await;
    outcome.context("running the chat")?;
    eprintln!("session {}", crate::commands::run::lock(&transcript).id());
    Ok(ExitCode::SUCCESS)
}
