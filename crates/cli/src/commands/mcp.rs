//! `warden mcp`: add, list, get, remove, import and trust MCP server entries in the configuration
//! files, and log in to (or out of) OAuth servers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};
use warden_config::{
    AuthMode, LoadRequest, LoadedConfig, Paths, RawServer, RemoteTransport, Scope, ServerEntry,
    TrustLine, TrustState, TrustStore, VarContext, add_servers_to_file, declares_server,
    is_reference_only, is_shareable_header_value, load, parse_mcp_json, read_file,
    remove_server_from_file, server_table,
};

use crate::Globals;
use crate::setup::async_runtime;

/// Manage MCP servers.
#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Add a server entry to a configuration file.
    #[command(
        after_help = "Examples:\n  warden mcp add fs -- npx -y @modelcontextprotocol/server-filesystem .\n  warden mcp add api --url https://mcp.example.com/mcp --header 'Authorization: Bearer ${env:API_TOKEN}'\n  warden mcp add local -e DEBUG=1 --scope project -- ./server"
    )]
    Add(Box<AddArgs>),
    /// List the configured servers.
    #[command(after_help = "Examples:\n  warden mcp list\n  warden mcp list --probe --json")]
    List(ListArgs),
    /// Show one server entry as declared (secrets as references, never values).
    #[command(after_help = "Example:\n  warden mcp get fs --json")]
    Get(GetArgs),
    /// Remove a server entry.
    #[command(after_help = "Example:\n  warden mcp remove fs --scope user")]
    Remove(RemoveArgs),
    /// Import servers from an `{"mcpServers": {...}}` JSON file (.mcp.json, claude_desktop_config.json).
    #[command(after_help = "Example:\n  warden mcp import .mcp.json --scope project")]
    Import(ImportArgs),
    /// Approve a project-scope server entry exactly as it is now.
    #[command(after_help = "Example:\n  warden mcp trust fs")]
    Trust(TrustArgs),
    /// Log in to a remote server with OAuth (opens the browser; the URL is printed either way).
    #[command(after_help = "Example:\n  warden mcp login github --no-browser")]
    Login(LoginArgs),
    /// Forget a remote server's OAuth tokens, revoking them where the server allows.
    #[command(after_help = "Example:\n  warden mcp logout github")]
    Logout(LogoutArgs),
    /// List a server's prompts, or get one: `warden mcp prompt SERVER NAME key=value…` (or JSON).
    #[command(
        after_help = "Examples:\n  warden mcp prompt everything\n  warden mcp prompt everything args-prompt city=Paris"
    )]
    Prompt(crate::commands::prompt::PromptArgs),
}

/// The file an edit goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ScopeArg {
    User,
    Project,
}

/// Which entries `list` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ListScope {
    User,
    Project,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum AuthArg {
    Auto,
    Oauth,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportArg {
    Sse,
    StreamableHttp,
}

#[derive(Debug, Args)]
struct AddArgs {
    /// The server's name (letters, digits, `_` and `-`).
    name: String,
    /// Which file to edit: user (default) or project (./.warden/config.toml).
    #[arg(long, value_enum)]
    scope: Option<ScopeArg>,
    /// An environment variable for a stdio server, K=V (repeatable; values may use ${env:VAR}).
    #[arg(short = 'e', long = "env", value_name = "K=V")]
    env: Vec<String>,
    /// An HTTP header for a remote server, 'K: V' (repeatable; values may use ${env:VAR}).
    #[arg(long = "header", value_name = "K: V")]
    headers: Vec<String>,
    /// Load the server's tools on demand; TEXT is the one-line summary the model sees.
    #[arg(long, value_name = "TEXT")]
    defer: Option<String>,
    /// Seconds allowed for one tool call (tool_timeout_sec; default 1800, at most a week).
    #[arg(long, value_name = "SECS", value_parser = timeout_arg)]
    timeout: Option<u64>,
    /// Authentication of a remote server.
    #[arg(long, value_enum)]
    auth: Option<AuthArg>,
    /// A pre-registered OAuth client id.
    #[arg(long, value_name = "ID")]
    client_id: Option<String>,
    /// The environment variable holding the OAuth client secret.
    #[arg(long, value_name = "VAR", requires = "client_id")]
    client_secret_env: Option<String>,
    /// A fixed loopback port for the OAuth redirect.
    #[arg(long, value_name = "N")]
    redirect_port: Option<u16>,
    /// `sse` for a legacy HTTP+SSE server.
    #[arg(long, value_enum)]
    transport: Option<TransportArg>,
    /// The URL of a remote server.
    #[arg(long, value_name = "URL", conflicts_with = "command")]
    url: Option<String>,
    /// Do not probe the new remote server or log in to it.
    #[arg(long, requires = "url")]
    no_login: bool,
    /// Print the login URL without opening a browser.
    #[arg(long, requires = "url")]
    no_browser: bool,
    /// The command (and its arguments) of a stdio server, after `--`.
    #[arg(last = true, value_name = "COMMAND ARGS")]
    command: Vec<String>,
}

#[derive(Debug, Args)]
struct ListArgs {
    /// Which entries: user, project or all (default: all, merged as a run sees them).
    #[arg(long, value_enum)]
    scope: Option<ListScope>,
    /// Print one JSON array (shape documented in docs/CONFIG.md).
    #[arg(long)]
    json: bool,
    /// Connect to each server and report its status.
    #[arg(long)]
    probe: bool,
}

#[derive(Debug, Args)]
struct GetArgs {
    name: String,
    /// Look only in this scope (default: the entry a run would use).
    #[arg(long, value_enum)]
    scope: Option<ScopeArg>,
    /// Print one JSON object (shape documented in docs/CONFIG.md).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct RemoveArgs {
    name: String,
    /// The file to edit (default: the one scope that has the name).
    #[arg(long, value_enum)]
    scope: Option<ScopeArg>,
}

#[derive(Debug, Args)]
struct ImportArgs {
    /// The JSON file to read.
    file: PathBuf,
    /// Which file to add the servers to (default user).
    #[arg(long, value_enum)]
    scope: Option<ScopeArg>,
}

#[derive(Debug, Args)]
struct LoginArgs {
    /// The remote server to log in to.
    name: String,
    /// Print the authorization URL without opening a browser (then paste the redirect URL back).
    #[arg(long)]
    no_browser: bool,
}

#[derive(Debug, Args)]
struct LogoutArgs {
    /// The remote server whose tokens to forget.
    name: String,
}

#[derive(Debug, Args)]
struct TrustArgs {
    /// The project-scope server to approve.
    name: String,
}

/// The files a command works on: the user and project files, or the one `-c` file.
pub(crate) struct Files {
    pub(crate) paths: Paths,
    pub(crate) workspace: PathBuf,
    pub(crate) explicit: Option<PathBuf>,
}

impl Files {
    pub(crate) fn from_globals(globals: &Globals) -> anyhow::Result<Self> {
        let paths = Paths::from_env()?;
        let workspace = std::env::current_dir().context("cannot read the current directory")?;
        Ok(Self {
            paths,
            workspace,
            explicit: globals.config_file.clone(),
        })
    }

    pub(crate) fn request(&self) -> LoadRequest {
        LoadRequest {
            paths: self.paths.clone(),
            workspace: self.workspace.clone(),
            explicit_file: self.explicit.clone(),
        }
    }

    fn scope_file(&self, scope: ScopeArg) -> (PathBuf, Scope) {
        match scope {
            ScopeArg::User => (self.paths.user_config_file(), Scope::User),
            ScopeArg::Project => (
                self.paths.project_config_file(&self.workspace),
                Scope::Project,
            ),
        }
    }

    /// The file an edit goes to: the `-c` file, else the scope's file (user by default).
    fn target(&self, scope: Option<ScopeArg>) -> anyhow::Result<(PathBuf, Scope)> {
        match (&self.explicit, scope) {
            (Some(_), Some(_)) => {
                bail!("-c FILE makes that file the only scope; leave out --scope")
            }
            (Some(file), None) => Ok((file.clone(), Scope::User)),
            (None, scope) => Ok(self.scope_file(scope.unwrap_or(ScopeArg::User))),
        }
    }
}

pub(crate) fn run(globals: &Globals, args: McpArgs) -> anyhow::Result<ExitCode> {
    let files = Files::from_globals(globals)?;
    match args.command {
        McpCommand::Add(args) => add(&files, *args),
        McpCommand::List(args) => list(globals, &files, args),
        McpCommand::Get(args) => get(&files, args),
        McpCommand::Remove(args) => remove(&files, args),
        McpCommand::Import(args) => import(&files, args),
        McpCommand::Trust(args) => trust(&files, args),
        McpCommand::Login(args) => login(&files, args),
        McpCommand::Logout(args) => logout(&files, args),
        McpCommand::Prompt(args) => crate::commands::prompt::run(globals, args),
    }
}

fn split_pair<'a>(
    text: &'a str,
    separator: char,
    flag: &str,
) -> anyhow::Result<(&'a str, &'a str)> {
    match text.split_once(separator) {
        Some((key, value)) if !key.trim().is_empty() => Ok((key.trim(), value)),
        _ => Err(crate::setup::usage(format!(
            "{flag} expects K{separator}V, got \"{text}\""
        ))),
    }
}

fn add(files: &Files, args: AddArgs) -> anyhow::Result<ExitCode> {
    let AddArgs {
        name,
        scope,
        env,
        headers,
        defer,
        timeout,
        auth,
        client_id,
        client_secret_env,
        redirect_port,
        transport,
        url,
        no_login,
        no_browser,
        command,
    } = args;
    let (file, scope) = files.target(scope)?;
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|pair| split_pair(pair, '=', "-e").map(|(k, v)| (k.to_string(), v.to_string())))
        .collect::<anyhow::Result<_>>()?;
    let headers: BTreeMap<String, String> = headers
        .iter()
        .map(|pair| {
            split_pair(pair, ':', "--header")
                .map(|(k, v)| (k.to_string(), v.trim_start().to_string()))
        })
        .collect::<anyhow::Result<_>>()?;
    let mut server = RawServer {
        env: (!env.is_empty()).then_some(env),
        headers: (!headers.is_empty()).then_some(headers),
        defer,
        tool_timeout_sec: timeout,
        auth: auth.map(|auth| match auth {
            AuthArg::Auto => AuthMode::Auto,
            AuthArg::Oauth => AuthMode::OAuth,
            AuthArg::None => AuthMode::None,
        }),
        client_id,
        client_secret_env,
        redirect_port,
        transport: transport.map(|t| match t {
            TransportArg::Sse => RemoteTransport::Sse,
            TransportArg::StreamableHttp => RemoteTransport::StreamableHttp,
        }),
        ..RawServer::default()
    };
    let is_remote = url.is_some() && transport != Some(TransportArg::Sse);
    match (url, command.split_first()) {
        (Some(url), None) => {
            // Refused now, as `config check` and the runtime would refuse it: an entry that can
            // never connect is never written (a URL built from `${env:…}` is checked at use).
            if !url.contains("${")
                && let Err(error) = warden_mcp::check_url(&name, &url)
            {
                return Err(warden_session::UsageError(format!(
                    "{error}; nothing was written. Use https://, or http:// to a loopback \
                     address (127.0.0.1, ::1, localhost) for a server on this machine"
                ))
                .into());
            }
            server.url = Some(url);
        }
        (None, Some((program, rest))) => {
            server.command = Some(program.clone());
            server.args = (!rest.is_empty()).then(|| rest.to_vec());
        }
        _ => bail!("give either --url URL or -- COMMAND ARGS..."),
    }
    add_servers_to_file(&file, scope, &[(name.clone(), server)])?;
    println!(
        "added {} server `{name}` to {}",
        scope.as_str(),
        file.display()
    );
    if scope == Scope::Project {
        println!(
            "project servers do not start until approved: review it and run `warden mcp trust {name}`"
        );
    }
    if is_remote && !no_login {
        login_after_add(files, &name, scope, no_browser)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The entry just written, as its scope loads it.
fn written_entry(files: &Files, name: &str, scope: Scope) -> anyhow::Result<ServerEntry> {
    let selection = match (&files.explicit, scope) {
        (Some(_), _) => None,
        (None, Scope::User) => Some(ListScope::User),
        (None, Scope::Project) => Some(ListScope::Project),
    };
    let config = selected_config(files, selection)?;
    config
        .servers
        .get(name)
        .cloned()
        .with_context(|| format!("the new entry `{name}` did not load"))
}

/// `add --url`: probe the endpoint; a 401 (or `auth = "oauth"`) starts the login right away, a
/// server that does not ask is left alone, an unreachable one stays written with a note.
fn login_after_add(
    files: &Files,
    name: &str,
    scope: Scope,
    no_browser: bool,
) -> anyhow::Result<()> {
    let entry = written_entry(files, name, scope)?;
    let oauth_context = match load(&files.request()) {
        Ok(config) => warden_oauth::OAuthContext::from_config(files.paths.state_dir(), &config),
        Err(_) => warden_oauth::OAuthContext::new(files.paths.state_dir()),
    };
    let vars = VarContext::from_process(&files.workspace);
    let settings = match warden_host::login_settings(&entry, &vars, &oauth_context) {
        Ok(settings) => settings,
        // auth = "none", an own credential, legacy SSE: nothing to log in to.
        Err(_) => return Ok(()),
    };
    let forced = matches!(
        &entry.transport,
        warden_config::Transport::Http {
            auth: AuthMode::OAuth,
            ..
        }
    );
    let probe = async_runtime()?.block_on(warden_oauth::probe(&settings.server_url));
    match probe {
        Err(error) => {
            println!(
                "note: could not reach {} ({error}); the entry is written anyway. Log in later with `warden mcp login {name}` if it asks.",
                settings.server_url
            );
            Ok(())
        }
        Ok(warden_oauth::Probe::AuthRequired { www_authenticate }) => {
            println!("`{name}` asks for authorization; logging in");
            run_login(&settings, no_browser, www_authenticate)
        }
        Ok(_) if forced => {
            println!("`{name}` has auth = \"oauth\"; logging in");
            run_login(&settings, no_browser, None)
        }
        Ok(_) => Ok(()),
    }
}

fn login(files: &Files, args: LoginArgs) -> anyhow::Result<ExitCode> {
    let config = selected_config(files, None)?;
    let oauth_context = warden_oauth::OAuthContext::from_config(files.paths.state_dir(), &config);
    let Some(entry) = config.servers.get(&args.name) else {
        return Err(no_such_server(&args.name, &config));
    };
    let vars = VarContext::from_process(&files.workspace);
    let settings = warden_host::login_settings(entry, &vars, &oauth_context)?;
    run_login(&settings, args.no_browser, None)?;
    Ok(ExitCode::SUCCESS)
}

/// Log in interactively: the loopback listener (or a pasted redirect URL) gets the code back.
fn run_login(
    settings: &warden_oauth::OAuthSettings,
    no_browser: bool,
    challenge: Option<String>,
) -> anyhow::Result<()> {
    let name = settings.server_name.clone();
    let show = move |url: &str| {
        eprintln!(
            "To authorize `{name}`, open this URL (or paste the redirect URL here when the browser cannot reach this machine):\n  {url}"
        );
        if !no_browser && let Err(error) = warden_oauth::open_in_browser(url) {
            eprintln!("could not open a browser ({error}); open the URL yourself");
        }
    };
    let mut options = warden_oauth::LoginOptions::new(warden_oauth::RedirectMode::Interactive {
        port: settings.redirect_port,
    });
    options.challenge = challenge;
    async_runtime()?
        .block_on(warden_oauth::login(settings, options, &show))
        .with_context(|| format!("logging in to `{}`", settings.server_name))?;
    println!(
        "logged in to `{}`; tokens saved in {}",
        settings.server_name,
        settings.store.describe()
    );
    Ok(())
}

fn logout(files: &Files, args: LogoutArgs) -> anyhow::Result<ExitCode> {
    let config = selected_config(files, None)?;
    let oauth_context = warden_oauth::OAuthContext::from_config(files.paths.state_dir(), &config);
    let Some(entry) = config.servers.get(&args.name) else {
        return Err(no_such_server(&args.name, &config));
    };
    let (url, oauth) = match &entry.transport {
        warden_config::Transport::Http { url, oauth, .. } => (url.clone(), oauth),
        warden_config::Transport::Stdio { .. } => {
            bail!("`{}` is a stdio server: it has no OAuth tokens", args.name)
        }
    };
    let vars = VarContext::from_process(&files.workspace);
    let url = warden_config::expand(&url, &vars).unwrap_or(url);
    let runtime = async_runtime()?;
    let provisioned = provisioned_env(oauth);
    if let Some(env) = &provisioned {
        let report = runtime
            .block_on(warden_oauth::logout_provisioned(env))
            .with_context(|| format!("revoking the pre-provisioned tokens of `{}`", args.name))?;
        match &report.revocation_note {
            None => println!(
                "{} pre-provisioned token(s) of `{}` revoked; warden stores none, so clear the variables that hold them yourself",
                report.revoked, args.name
            ),
            Some(note) => println!(
                "the pre-provisioned tokens of `{}` were not revoked: {note}",
                args.name
            ),
        }
    }
    let settings = oauth_context.settings(&entry.name, url);
    let report = runtime.block_on(warden_oauth::logout(&settings))?;
    if !report.had_tokens {
        if provisioned.is_none() {
            println!("no tokens were stored for `{}`", args.name);
        }
    } else {
        match &report.revocation_note {
            None => println!(
                "logged out of `{}`: {} token(s) revoked and forgotten",
                args.name, report.revoked
            ),
            Some(note) => println!(
                "logged out of `{}`: tokens forgotten (not revoked: {note})",
                args.name
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The pre-provisioned tokens an entry names (`access_token_env`, `refresh_token_env`), with
/// what revoking them needs.
fn provisioned_env(
    oauth: &warden_config::OAuthClientConfig,
) -> Option<warden_oauth::ProvisionedEnv> {
    (oauth.access_token_env.is_some() || oauth.refresh_token_env.is_some()).then(|| {
        warden_oauth::ProvisionedEnv {
            access_token_env: oauth.access_token_env.clone(),
            expires_at_env: oauth.expires_at_env.clone(),
            refresh_token_env: oauth.refresh_token_env.clone(),
            client_id: oauth.client_id.clone(),
            client_secret_env: oauth.client_secret_env.clone(),
            refresh_url: oauth.refresh_url.clone(),
            revoke_url: oauth.revoke_url.clone(),
        }
    })
}

/// The entries a `list` or `get` works on, and whether they replaced or were replaced.
fn selected_config(files: &Files, scope: Option<ListScope>) -> anyhow::Result<LoadedConfig> {
    match (&files.explicit, scope) {
        (Some(_), Some(ListScope::User | ListScope::Project)) => {
            bail!("-c FILE makes that file the only scope; leave out --scope")
        }
        (Some(_), _) | (None, None | Some(ListScope::All)) => Ok(load(&files.request())?),
        (None, Some(one)) => {
            let (path, scope) = files.scope_file(match one {
                ListScope::Project => ScopeArg::Project,
                _ => ScopeArg::User,
            });
            let parsed = read_file(&path, scope)?;
            Ok(LoadedConfig {
                files: parsed.iter().map(|f| f.path.clone()).collect(),
                servers: parsed.map(|f| f.servers).unwrap_or_default(),
                ..LoadedConfig::default()
            })
        }
    }
}

/// One row of `warden mcp list`.
struct Row<'a> {
    entry: &'a ServerEntry,
    trust: TrustState,
    overridden: bool,
}

impl Row<'_> {
    fn state(&self) -> &'static str {
        if self.overridden {
            "overridden"
        } else if !self.entry.enabled {
            "disabled"
        } else {
            match self.trust {
                TrustState::Untrusted => "untrusted",
                TrustState::Changed => "changed",
                TrustState::NotRequired | TrustState::Trusted => "ready",
            }
        }
    }

    fn reason(&self) -> Option<String> {
        let name = &self.entry.name;
        if self.overridden {
            Some("replaced by the project entry of the same name".into())
        } else if !self.entry.enabled {
            Some("disabled in the configuration (enabled = false)".into())
        } else {
            self.trust.idle_reason(name)
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "name": self.entry.name,
            "scope": self.entry.scope.as_str(),
            "transport": self.entry.transport_kind(),
            "file": self.entry.source.display().to_string(),
            "auth": self.entry.auth_state().as_str(),
            "enabled": self.entry.enabled,
            "trust": self.trust.as_str(),
            "state": self.state(),
            "reason": self.reason(),
        })
    }
}

fn list(globals: &Globals, files: &Files, args: ListArgs) -> anyhow::Result<ExitCode> {
    let config = selected_config(files, args.scope)?;
    if args.probe {
        return crate::commands::probe::run(globals, &config, args.json);
    }
    let store = TrustStore::open(&files.paths)?;
    let mut rows: Vec<Row> = config
        .servers
        .values()
        .map(|entry| Row {
            entry,
            trust: store.state(entry),
            overridden: false,
        })
        .chain(config.overridden.iter().map(|entry| Row {
            entry,
            trust: store.state(entry),
            overridden: true,
        }))
        .collect();
    rows.sort_by(|a, b| (&a.entry.name, a.entry.scope).cmp(&(&b.entry.name, b.entry.scope)));
    if args.json {
        let array: Vec<Value> = rows.iter().map(Row::to_json).collect();
        println!("{}", serde_json::to_string_pretty(&array)?);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("No MCP servers configured.");
        let searched: Vec<String> = files
            .request()
            .scopes()
            .iter()
            .map(|(path, _)| path.display().to_string())
            .collect();
        println!("Looked in: {}", searched.join(", "));
        return Ok(ExitCode::SUCCESS);
    }
    let header = ["NAME", "SCOPE", "TRANSPORT", "AUTH", "STATE", "FILE"];
    let table: Vec<[String; 6]> = rows
        .iter()
        .map(|row| {
            [
                row.entry.name.clone(),
                row.entry.scope.as_str().to_string(),
                row.entry.transport_kind().to_string(),
                row.entry.auth_state().as_str().to_string(),
                row.state().to_string(),
                row.entry.source.display().to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for line in &table {
        for (width, cell) in widths.iter_mut().zip(line) {
            *width = (*width).max(cell.len());
        }
    }
    let print_line = |cells: [&str; 6]| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        println!("{out}");
    };
    print_line(header);
    for line in &table {
        print_line([&line[0], &line[1], &line[2], &line[3], &line[4], &line[5]]);
    }
    let idle: Vec<(String, String)> = rows
        .iter()
        .filter_map(|row| row.reason().map(|reason| (row.entry.name.clone(), reason)))
        .collect();
    if !idle.is_empty() {
        println!();
        for (name, reason) in idle {
            println!("{name}: {reason}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The declared form of an entry with defaults made explicit and secret values masked: a value
/// made only of `${...}` references (or, in an authorization header, a scheme and one
/// `${env:NAME}`) is shown, any other env or header value is `[redacted]`.
fn masked_declaration(entry: &ServerEntry) -> RawServer {
    let mask = |map: Option<BTreeMap<String, String>>, shown: fn(&str, &str) -> bool| {
        map.map(|map| {
            map.into_iter()
                .map(|(key, value)| {
                    if shown(&key, &value) {
                        (key, value)
                    } else {
                        (key, "[redacted]".to_string())
                    }
                })
                .collect()
        })
    };
    let mut raw = RawServer::from(entry);
    raw.env = mask(raw.env.take(), |_, value| is_reference_only(value));
    raw.headers = mask(raw.headers.take(), is_shareable_header_value);
    raw
}

/// Leaves out empty lists and tables, which say nothing when read by a person.
fn without_empty_tables(mut raw: RawServer) -> RawServer {
    raw.args = raw.args.filter(|args| !args.is_empty());
    raw.env = raw.env.filter(|env| !env.is_empty());
    raw.headers = raw.headers.filter(|headers| !headers.is_empty());
    raw.tools = raw.tools.and_then(|mut tools| {
        tools.deny = tools.deny.filter(|deny| !deny.is_empty());
        (tools.allow.is_some() || tools.deny.is_some()).then_some(tools)
    });
    raw.policy = raw.policy.and_then(|mut policy| {
        policy.tools = policy.tools.filter(|tools| !tools.is_empty());
        (policy.capabilities.is_some() || policy.tools.is_some()).then_some(policy)
    });
    raw
}

fn get(files: &Files, args: GetArgs) -> anyhow::Result<ExitCode> {
    let config = match args.scope {
        Some(ScopeArg::User) => selected_config(files, Some(ListScope::User))?,
        Some(ScopeArg::Project) => selected_config(files, Some(ListScope::Project))?,
        None => selected_config(files, None)?,
    };
    let Some(entry) = config.servers.get(&args.name) else {
        return Err(no_such_server(&args.name, &config));
    };
    let trust = TrustStore::open(&files.paths)?.state(entry);
    let declared = masked_declaration(entry);
    if args.json {
        let object = json!({
            "name": entry.name,
            "scope": entry.scope.as_str(),
            "file": entry.source.display().to_string(),
            "transport": entry.transport_kind(),
            "auth": entry.auth_state().as_str(),
            "trust": trust.as_str(),
            "trust_hash": entry.trust_hash(),
            "entry": serde_json::to_value(&declared)?,
        });
        let mut object = object;
        if let Some(uri) = preregistered_redirect_uri(entry) {
            object["redirect_uri"] = Value::String(uri);
        }
        println!("{}", serde_json::to_string_pretty(&object)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut doc = toml_edit::DocumentMut::new();
    let mut servers = toml_edit::Table::new();
    servers.set_implicit(true);
    servers.insert(
        &entry.name,
        toml_edit::Item::Table(server_table(&without_empty_tables(declared))),
    );
    doc.insert("mcp_servers", toml_edit::Item::Table(servers));
    println!(
        "# {} scope, {}; trust: {}",
        entry.scope.as_str(),
        entry.source.display(),
        trust.as_str()
    );
    if let Some(reason) = trust.idle_reason(&entry.name) {
        println!("# {reason}");
    }
    if let Some(uri) = preregistered_redirect_uri(entry) {
        println!("# OAuth redirect URI to register for this client_id: {uri}");
    }
    print!("{doc}");
    Ok(ExitCode::SUCCESS)
}

/// The loopback redirect URI a pre-registered OAuth client must register.
fn preregistered_redirect_uri(entry: &ServerEntry) -> Option<String> {
    match &entry.transport {
        warden_config::Transport::Http { oauth, .. } if oauth.client_id.is_some() => Some(format!(
            "http://127.0.0.1:{}/callback",
            oauth
                .redirect_port
                .unwrap_or(warden_oauth::DEFAULT_PREREGISTERED_PORT)
        )),
        _ => None,
    }
}

fn file_declares(path: &Path, name: &str) -> anyhow::Result<bool> {
    match std::fs::read_to_string(path) {
        // A file that is not TOML is said to be so, not searched and found empty.
        Ok(text) => match text.parse::<toml_edit::DocumentMut>() {
            Ok(_) => Ok(declares_server(&text, name)),
            Err(error) => Err(warden_config::EditError::Syntax {
                path: path.to_path_buf(),
                message: error.message().to_owned(),
            }
            .into()),
        },
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn remove(files: &Files, args: RemoveArgs) -> anyhow::Result<ExitCode> {
    let file = if files.explicit.is_some() || args.scope.is_some() {
        files.target(args.scope)?.0
    } else {
        let (user, _) = files.scope_file(ScopeArg::User);
        let (project, _) = files.scope_file(ScopeArg::Project);
        match (
            file_declares(&user, &args.name)?,
            file_declares(&project, &args.name)?,
        ) {
            (true, true) => {
                return Err(crate::setup::usage(format!(
                    "`{}` exists in both {} and {}; pass --scope user or --scope project",
                    args.name,
                    user.display(),
                    project.display()
                )));
            }
            (true, false) => user,
            (false, true) => project,
            (false, false) => {
                return Err(crate::setup::usage(format!(
                    "no server named `{}` in {} or {}; `warden mcp list` shows the names",
                    args.name,
                    user.display(),
                    project.display()
                )));
            }
        }
    };
    remove_server_from_file(&file, &args.name)?;
    println!("removed server `{}` from {}", args.name, file.display());
    Ok(ExitCode::SUCCESS)
}

fn import(files: &Files, args: ImportArgs) -> anyhow::Result<ExitCode> {
    let (file, scope) = files.target(args.scope)?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let imported =
        parse_mcp_json(&text).with_context(|| format!("cannot import {}", args.file.display()))?;
    if imported.is_empty() {
        println!(
            "{} declares no servers; nothing imported",
            args.file.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    for server in &imported {
        if !server.ignored_keys.is_empty() {
            eprintln!(
                "warden: mcpServers.{}: not imported (no equivalent): {}",
                server.name,
                server.ignored_keys.join(", ")
            );
        }
    }
    let entries: Vec<(String, RawServer)> = imported
        .iter()
        .map(|s| (s.name.clone(), s.server.clone()))
        .collect();
    add_servers_to_file(&file, scope, &entries)?;
    let names: Vec<&str> = imported.iter().map(|s| s.name.as_str()).collect();
    println!(
        "imported {} server(s) into {}: {}",
        names.len(),
        file.display(),
        names.join(", ")
    );
    if scope == Scope::Project {
        println!(
            "project servers do not start until approved: run `warden mcp trust NAME` for each"
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn trust(files: &Files, args: TrustArgs) -> anyhow::Result<ExitCode> {
    let config = load(&files.request())?;
    let Some(entry) = config.servers.get(&args.name) else {
        return Err(no_such_server(&args.name, &config));
    };
    if !entry.needs_trust() {
        println!(
            "`{}` is a user-scope server ({}); it needs no approval",
            args.name,
            entry.source.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut store = TrustStore::open(&files.paths)?;
    let before = store.state(entry);
    store.trust(entry)?;
    let hash = entry.trust_hash();
    println!(
        "approved project server `{}` from {} ({}); it grants:",
        args.name,
        entry.source.display(),
        &hash[..12]
    );
    print_trust_lines(&entry.trust_description());
    if before == TrustState::Trusted {
        println!("(it was already approved)");
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints a trust description (what approving grants), one indented line each, labels aligned.
pub(crate) fn print_trust_lines(lines: &[TrustLine]) {
    let width = lines.iter().map(|line| line.label.len()).max().unwrap_or(0);
    for TrustLine { label, value } in lines {
        println!("  {label:<width$}  {value}");
    }
}

/// `--timeout SECS`, bounded as the config key is.
fn timeout_arg(text: &str) -> Result<u64, String> {
    let seconds: u64 = text
        .parse()
        .map_err(|_| format!("expected a whole number of seconds, not \"{text}\""))?;
    warden_config::timeout_seconds(seconds, warden_config::DEFAULT_TOOL_TIMEOUT)?;
    Ok(seconds)
}

/// "No server named …", with the nearest configured name when one is close.
fn no_such_server(name: &str, config: &warden_config::LoadedConfig) -> anyhow::Error {
    let names: Vec<&str> = config.servers.keys().map(String::as_str).collect();
    match warden_config::nearest(name, &names) {
        Some(near) => crate::setup::usage(format!(
            "no server named `{name}` is configured; did you mean `{near}`?"
        )),
        None => crate::setup::usage(format!(
            "no server named `{name}` is configured (`warden mcp list` shows them)"
        )),
    }
}
