//! `warden config`: print the JSON Schema, validate the files, show where they are, approve a project's agent profile.

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use warden_config::{
    ConfigError, Scope, TrustState, TrustStore, VarContext, read_file, schema_json,
};

use crate::Globals;
use crate::commands::mcp::Files;

/// Inspect and validate the configuration.
#[derive(Debug, Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Print the JSON Schema of the configuration file.
    #[command(after_help = "Example:\n  warden config schema > config.schema.json")]
    Schema,
    /// Validate the user and project files (or the -c file), including variable references.
    #[command(after_help = "Examples:\n  warden config check\n  warden -c ci.toml config check")]
    Check,
    /// Show which files and directories warden uses.
    #[command(after_help = "Example:\n  warden config paths")]
    Paths,
    /// Approve a project's `[agents.NAME]` profile exactly as it is now (it is not loaded before).
    #[command(after_help = "Example:\n  warden config trust-agent reviewer")]
    TrustAgent(TrustAgentArgs),
}

#[derive(Debug, Args)]
struct TrustAgentArgs {
    /// The profile's name in the project's `.warden/config.toml`.
    name: String,
}

pub(crate) fn run(globals: &Globals, args: ConfigArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ConfigCommand::Schema => {
            print!("{}", schema_json());
            Ok(ExitCode::SUCCESS)
        }
        ConfigCommand::Check => check(globals),
        ConfigCommand::TrustAgent(args) => trust_agent(globals, &args.name),
        ConfigCommand::Paths => {
            let files = Files::from_globals(globals)?;
            for (path, scope) in files.request().scopes() {
                let state = if path.exists() { "" } else { " (absent)" };
                println!("{} config: {}{state}", scope.as_str(), path.display());
            }
            println!("state dir: {}", files.paths.state_dir().display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Shows what the project's profile `name` grants and approves it as it is. A profile the user's
/// own file also defines is refused: the project's is ignored whatever its approval.
fn trust_agent(globals: &Globals, name: &str) -> anyhow::Result<ExitCode> {
    let files = Files::from_globals(globals)?;
    if let Some(file) = &files.explicit {
        println!(
            "{} is read with user authority (-c); its agent profiles need no approval",
            file.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let scopes = files.request().scopes();
    let file_of = |wanted: Scope| {
        scopes
            .iter()
            .find(|(_, scope)| *scope == wanted)
            .map(|(path, _)| path.clone())
    };
    let (Some(user_file), Some(project_file)) = (file_of(Scope::User), file_of(Scope::Project))
    else {
        bail!("no project configuration file is read here");
    };
    let project = read_file(&project_file, Scope::Project)?;
    let Some(profile) = project
        .as_ref()
        .and_then(|file| file.model_settings.agents.get(name))
    else {
        return Err(crate::setup::usage(format!(
            "no agent profile named `{name}` in {}",
            project_file.display()
        )));
    };
    let user = read_file(&user_file, Scope::User)?;
    if user
        .as_ref()
        .is_some_and(|file| file.model_settings.agents.contains_key(name))
    {
        bail!(
            "your user config ({}) defines the agent profile `{name}`, so the project's is \
             ignored whatever its approval; give it another name in {}",
            user_file.display(),
            project_file.display()
        );
    }
    let mut store = TrustStore::open(&files.paths)?;
    let before = store.agent_state(profile);
    store
        .trust_agent(profile)
        .with_context(|| format!("approving the project agent profile {name}"))?;
    println!(
        "approved project agent profile `{name}` from {} ({}); it grants:",
        project_file.display(),
        &profile.trust_hash()[..12]
    );
    crate::commands::mcp::print_trust_lines(&profile.trust_description());
    if before == TrustState::Trusted {
        println!("(it was already approved)");
    }
    Ok(ExitCode::SUCCESS)
}

fn check(globals: &Globals) -> anyhow::Result<ExitCode> {
    let files = Files::from_globals(globals)?;
    let vars = VarContext::from_process(&files.workspace);
    let store = TrustStore::open(&files.paths)?;
    let mut problems = 0usize;
    for (path, scope) in files.request().scopes() {
        match read_file(&path, scope) {
            Ok(None) if files.explicit.is_some() => {
                eprintln!("{}", ConfigError::ExplicitFileMissing(path));
                problems += 1;
            }
            Ok(None) => println!(
                "{}: absent ({} scope, no servers)",
                path.display(),
                scope.as_str()
            ),
            Ok(Some(parsed)) => {
                let mut file_problems = 0;
                for entry in parsed.servers.values() {
                    for error in entry.check_variables(&vars) {
                        eprintln!("{error}");
                        file_problems += 1;
                    }
                }
                problems += file_problems;
                if file_problems == 0 {
                    println!(
                        "{}: ok ({} scope, {} server(s))",
                        path.display(),
                        scope.as_str(),
                        parsed.servers.len()
                    );
                }
                for entry in parsed.servers.values() {
                    if let Some(reason) = store.state(entry).idle_reason(&entry.name) {
                        println!("note: {}: {reason}", entry.name);
                    }
                }
            }
            Err(ConfigError::Invalid(list)) => {
                for diagnostic in &list {
                    eprintln!("{diagnostic}");
                }
                problems += list.len();
            }
            Err(other) => {
                eprintln!("{other}");
                problems += 1;
            }
        }
    }
    if problems == 0 {
        problems += check_as_run_would(globals, &files, &vars);
    }
    if problems == 0 {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("warden: {problems} problem(s) found");
        Ok(ExitCode::from(2))
    }
}

/// The validations `run` makes beyond each file on its own: the scopes loaded together (a model
/// or an agent's model that no `[models.NAME]` declares), and each remote server's URL as the
/// runtime would check it (plain http only to loopback). Returns how many problems it printed.
fn check_as_run_would(globals: &Globals, files: &Files, vars: &VarContext) -> usize {
    let config = match crate::setup::load_config(globals) {
        Ok((_, _, config)) => config,
        Err(error) => {
            eprintln!("{}", crate::setup::error_line(&error));
            return 1;
        }
    };
    let mut problems = 0;
    for model in config.models.models.values() {
        if let Some(note) = small_window_note(model) {
            println!("note: {}: {note}", model.source.display());
        }
    }
    // Only the specs' URLs are checked: the file store stands in for the configured backend,
    // which keeps the check from probing the OS keyring.
    let oauth_context = warden_oauth::OAuthContext::new(files.paths.state_dir());
    for entry in config.servers.values() {
        match warden_host::server_spec(entry, vars, &oauth_context) {
            Ok(spec) => {
                if let warden_mcp::TransportSpec::StreamableHttp { url, .. }
                | warden_mcp::TransportSpec::LegacySse { url, .. } = &spec.transport
                    && let Err(error) = warden_mcp::check_url(&entry.name, url)
                {
                    eprintln!("{}: {error}", entry.source.display());
                    problems += 1;
                }
            }
            Err(error) => {
                eprintln!("{}: {error}", entry.source.display());
                problems += 1;
            }
        }
    }
    problems
}

/// The most tokens a turn's prompt, tool list and results may take before the window is too
/// small to be useful to an agent: a 2 KB tool result alone is about 512.
const ROOM_FOR_AN_AGENT: u64 = 3072;

/// A note when `model`'s context window leaves too little room for the prompt, the tools and
/// their results once the answer's share is kept free.
fn small_window_note(model: &warden_config::ModelEntry) -> Option<String> {
    let window = model.context_window?;
    let reserve = warden_agent::output_reserve(window);
    let room = window - reserve;
    (room < ROOM_FOR_AN_AGENT).then(|| {
        format!(
            "models.{}.context_window = {window} leaves {room} tokens for the system prompt, the \
             tool list and tool results once {reserve} are kept for the answer; tool results \
             will be elided to fit. Run the server with a context of 4096 tokens or more and \
             set context_window to it",
            model.name
        )
    })
}
