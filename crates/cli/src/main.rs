//! The `warden` binary: parses the command line and hands each subcommand to its module.

mod commands;
mod setup;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// An agent host that puts every tool call behind one authorization boundary.
#[derive(Debug, Parser)]
#[command(
    name = "warden",
    version,
    about = "An agent host: a model's tools — built-in, MCP servers, skills, hooks — behind one \
             authorization boundary that authorizes, approves, times and audits every call",
    after_help = "Start here:\n  \
        warden mcp add everything -- npx -y @modelcontextprotocol/server-everything\n  \
        warden tool everything echo '{\"message\": \"hi\"}'     # a gated call, no model needed\n  \
        warden run 'list the files here'                       # needs a model: docs/MODELS.md\n\n\
        Exit codes: 0 done, 1 failed at run time, 2 bad usage or configuration, 3 --max-turns,\n\
        130 interrupted, 141 standard output closed."
)]
struct Cli {
    /// Use FILE as the only configuration scope (it has user authority).
    #[arg(short = 'c', long = "config", global = true, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Advertise the SEP-2640 skills extension (draft) to the MCP servers this command starts
    /// (same as `[experimental] skills_extension = true`). Given before the subcommand, so the
    /// help of commands that start no server does not offer it.
    #[arg(long)]
    mcp_skills_extension: bool,

    /// More log detail: `-v` warden's info and the libraries' warnings, `-vv` debug (warden's
    /// own warnings are always shown; `RUST_LOG` overrides).
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the agent headless on one prompt (the answer on stdout).
    #[command(
        after_help = "Examples:\n  warden run 'summarise README.md'\n  git diff | warden run - --allowed-tools read_file --output-format json\n  warden run --continue 'and now the tests'"
    )]
    Run(commands::run::RunArgs),
    /// Serve warden as an Agent Client Protocol agent on stdio, for editors (Zed, JetBrains, Neovim).
    #[command(
        after_help = "Example (Zed's settings.json):\n  \"agent_servers\": { \"warden\": { \"command\": \"warden\", \"args\": [\"acp\"] } }"
    )]
    Acp(commands::acp::AcpArgs),
    /// The interactive terminal chat: streamed answers, tool calls, approvals, /tools, /mcp.
    #[command(
        after_help = "Examples:\n  warden chat\n  warden chat --model local --agent reviewer"
    )]
    Chat(commands::chat::ChatArgs),
    /// Manage MCP servers: add, list, get, remove, import, trust, login, logout, prompt.
    #[command(
        after_help = "Examples:\n  warden mcp add fs -- npx -y @modelcontextprotocol/server-filesystem .\n  warden mcp add github --url https://api.githubcopilot.com/mcp/\n  warden mcp list --probe"
    )]
    Mcp(commands::mcp::McpArgs),
    /// Inspect and validate the configuration.
    #[command(
        after_help = "Examples:\n  warden config check\n  warden config paths\n  warden config schema > config.schema.json"
    )]
    Config(commands::config::ConfigArgs),
    /// Browse and call MCP tools: servers → tools → schema → call (through the gate).
    #[command(
        after_help = "Examples:\n  warden tool                                   # the servers\n  warden tool fs                                # its tools\n  warden tool fs read_text_file '{\"path\": \"README.md\"}'\n  warden tool search 'create an issue'"
    )]
    Tool(commands::tool::ToolArgs),
    /// What confines the agent's tools here: workspace roots, protected paths, the bash sandbox.
    #[command(after_help = "Examples:\n  warden doctor\n  warden doctor --json | jq .sandbox")]
    Doctor(commands::doctor::DoctorArgs),
    /// Token counts of the MCP manifest the model would get, per server and in total.
    #[command(after_help = "Example:\n  warden context")]
    Context(commands::context::ContextArgs),
    /// Run JavaScript in the code-mode sandbox; its tool calls go through the gate.
    #[command(
        after_help = "Example:\n  echo 'return (await tools.call(\"fs\", \"list_directory\", {path: \".\"})).length' > count.js\n  warden code count.js"
    )]
    Code(commands::code::CodeArgs),
    /// Skills: list, show, check, grants, revoke.
    #[command(
        after_help = "Examples:\n  warden skills list\n  warden skills check ./skills/release"
    )]
    Skills(commands::skills::SkillsArgs),
    /// Show the audit trail: one record per gate decision.
    #[command(
        after_help = "Examples:\n  warden audit --since 1h --denied\n  warden audit --json | jq 'select(.public_name == \"bash\")'\n  warden audit --follow"
    )]
    Audit(commands::audit::AuditArgs),
    /// Serve the gated tool surface as an MCP server (stdio or Streamable HTTP).
    #[command(
        after_help = "Examples:\n  warden serve                                  # stdio, for an MCP client's config\n  warden serve --http 127.0.0.1:8765            # a bearer token is written and printed"
    )]
    Serve(commands::serve::ServeArgs),
    /// warden as an HTTP service: `run` the API, `key create|revoke` its tenants' API keys.
    #[command(
        after_help = "Examples:\n  warden service key create --tenant acme --caller web-app\n  warden service run --listen 127.0.0.1:8780"
    )]
    Service(commands::service::ServiceArgs),
    /// Document collections: add files, list, show, remove, search (BM25), reindex.
    #[command(
        after_help = "Examples:\n  warden knowledge add docs docs/*.md\n  warden knowledge search docs 'how do I rotate a key'"
    )]
    Knowledge(commands::knowledge::KnowledgeArgs),
    /// Print a shell completion script for bash, zsh, fish, elvish or powershell.
    #[command(
        after_help = "Example:\n  warden completions bash > ~/.local/share/bash-completion/completions/warden"
    )]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

/// What every subcommand may need from the global flags.
#[derive(Debug, Clone)]
pub(crate) struct Globals {
    /// `-c FILE`: the only configuration scope when set.
    pub(crate) config_file: Option<PathBuf>,
    /// `--mcp-skills-extension`: advertise the SEP-2640 skills extension.
    pub(crate) mcp_skills_extension: bool,
}

fn main() -> ExitCode {
    quiet_when_stdout_closes();
    // A reader that closed standard output (`warden mcp list | head -1`) ends the command the
    // way it ends any Unix tool: quietly, with 141 (128 + SIGPIPE), after unwinding (so the
    // session's servers are stopped by their owners' destructors).
    match std::panic::catch_unwind(run_command) {
        Ok(code) => code,
        Err(_) if STDOUT_CLOSED.load(std::sync::atomic::Ordering::SeqCst) => ExitCode::from(141),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Set when printing to standard output failed because its reader went away.
static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `print!` panics when standard output is a closed pipe (warden keeps SIGPIPE ignored: a server
/// that dies must not kill warden through the pipe to it). That one panic is recognised by the
/// message the standard library documents for it, recorded, and not reported.
fn quiet_when_stdout_closes() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        let closed = message.starts_with("failed printing to stdout")
            && message.ends_with(&std::io::Error::from_raw_os_error(libc::EPIPE).to_string());
        if closed {
            STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::SeqCst);
        } else {
            report(info);
        }
    }));
}

fn run_command() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli);
    let globals = Globals {
        config_file: cli.config,
        mcp_skills_extension: cli.mcp_skills_extension,
    };
    let outcome = match cli.command {
        Command::Run(args) => commands::run::run(&globals, args),
        Command::Chat(args) => commands::chat::run(&globals, args),
        Command::Acp(args) => commands::acp::run(&globals, args),
        Command::Mcp(args) => commands::mcp::run(&globals, args),
        Command::Config(args) => commands::config::run(&globals, args),
        Command::Tool(args) => commands::tool::run(&globals, args),
        Command::Context(args) => commands::context::run(&globals, args),
        Command::Doctor(args) => commands::doctor::run(&globals, args),
        Command::Code(args) => commands::code::run(&globals, args),
        Command::Skills(args) => commands::skills::run(&globals, args),
        Command::Audit(args) => commands::audit::run(&globals, args),
        Command::Serve(args) => commands::serve::run(&globals, args),
        Command::Service(args) => commands::service::run(&globals, args),
        Command::Knowledge(args) => commands::knowledge::run(&globals, args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            use std::io::Write;
            // Into memory first: clap_complete panics when its writer fails, and a closed pipe
            // is no failure of warden's.
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "warden", &mut script);
            std::io::stdout()
                .lock()
                .write_all(&script)
                .map(|()| ExitCode::SUCCESS)
                .map_err(anyhow::Error::from)
        }
    };
    match outcome {
        Ok(code) => code,
        // Its reader went away (`warden audit | head -1`): quiet, as any Unix tool ends.
        Err(error) if stdout_closed(&error) => ExitCode::from(141),
        Err(error) => {
            eprintln!("warden: {}", setup::error_line(&error));
            exit_code_of(&error)
        }
    }
}

/// Installs the log sink, so a warning of warden's is never dropped: stderr at `warn` for
/// warden's own crates (the libraries' warnings and more detail with `-v`, `RUST_LOG` wins), except for `warden chat`, whose screen stderr would tear: it logs to
/// `STATE_DIR/logs/chat.log` (0600) instead.
fn init_logging(cli: &Cli) {
    use tracing_subscriber::EnvFilter;
    // warden's own warnings always; the libraries' (rmcp's worker errors, reqwest's) only with
    // `-v`, where warden's one-line reports already say what went wrong and what to check.
    let level = match cli.verbose {
        0 => "warden=warn",
        1 => "warn,warden=info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .without_time()
        .with_target(false);
    if matches!(cli.command, Command::Chat(_)) {
        if let Some(file) = chat_log_file() {
            let _ = builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .try_init();
        }
        return;
    }
    let _ = builder
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .try_init();
}

/// `STATE_DIR/logs/chat.log`, appended to, created 0600.
fn chat_log_file() -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let paths = setup::paths().ok()?;
    let dir = paths.state_dir().join("logs");
    std::fs::create_dir_all(&dir).ok()?;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(dir.join("chat.log"))
        .ok()
}

/// Whether `error` is a write to a standard output whose reader went away.
fn stdout_closed(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The one exit-code table of every command (documented in the README): 2 for bad usage or
/// configuration, 1 for a failure at run time (130 for an interrupted run is returned by the
/// commands that run).
fn exit_code_of(error: &anyhow::Error) -> ExitCode {
    if setup::is_usage_error(error) {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}
