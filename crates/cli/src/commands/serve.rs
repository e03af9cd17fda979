//! `warden serve`: serves warden's gated tool surface as an MCP server over stdio or Streamable
//! HTTP (see the `warden-serve` crate); every call goes through the gate as source `gateway`.
//! With `--a2a ADDR` it serves warden's agents to other agents instead (see `commands::a2a`).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use warden_host::{Host, RemoteSkills, RemoteSkillsSettings};
use warden_mcp::ProtocolMode;
use warden_serve::{
    BearerToken, ElicitingApprover, Exposure, Gateway, HttpAuth, HttpSettings, MCP_PATH,
    SkillSummary, TOKEN_ENV, bind_http, relay_to_clients, serve_http, serve_stdio, token_from_env,
    too_short_message,
};
use warden_skills::{SkillRoots, discover};

use crate::Globals;
use crate::setup::{PolicyFlags, async_runtime, host_options, load_config};
use warden_session::{CODE_EXECUTE, CODE_SEARCH, code_tools};
use warden_session::{USE_SKILL, skill_tools};
use warden_session::{UsageError, ad_hoc_servers};

/// The exposure on the command line.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum ExposeArg {
    /// Every admitted tool under its namespaced name (`mcp__<server>__<tool>`).
    Flat,
    /// A small fixed set: search_tools, describe_tool, call_tool, code mode; skills as prompts.
    Progressive,
    /// One upstream server, names unchanged: a transparent, gated proxy.
    Passthrough,
}

/// The protocol lifecycle spoken upstream.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub(crate) enum UpstreamProtocolArg {
    /// Probe 2026-07-28 (`server/discover`), fall back to `initialize`.
    Auto,
    /// The 2025-11-25 `initialize` handshake only.
    #[value(name = "2025-11-25")]
    V2025_11_25,
    /// 2026-07-28 only.
    #[value(name = "2026-07-28")]
    V2026_07_28,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Serve one client over standard input and output (the default).
    #[arg(long, conflicts_with = "http")]
    stdio: bool,
    /// Serve warden's agents over A2A at ADDR (card at /.well-known/agent-card.json, JSON-RPC
    /// at /a2a) instead of its tools over MCP; without ADDR, 127.0.0.1:8766 (loopback).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8766",
          value_parser = listen_address, conflicts_with_all = ["stdio", "http", "server", "mcp"])]
    a2a: Option<SocketAddr>,
    /// With --a2a: a `[models.NAME]` entry for the agents instead of the default.
    #[arg(long, value_name = "NAME", requires = "a2a")]
    model: Option<String>,
    /// Serve Streamable HTTP at ADDR (path /mcp); without ADDR, 127.0.0.1:8765 (loopback).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8765",
          value_parser = listen_address)]
    http: Option<SocketAddr>,
    /// What to publish.
    #[arg(long, value_enum, default_value = "flat")]
    expose: ExposeArg,
    /// The upstream server of passthrough (default: the only server).
    #[arg(long, value_name = "NAME")]
    server: Option<String>,
    /// Ad-hoc servers for this run: `URL`, `COMMAND ARGS…`, or either behind `NAME=`.
    #[arg(long = "mcp", value_name = "CMD|URL")]
    mcp: Vec<String>,
    /// The protocol spoken to upstream servers: `auto` probes 2026-07-28 and falls back;
    /// `2025-11-25` lets upstream servers ask mid-call (elicitation, sampling), which warden
    /// relays to the client whose call is running.
    #[arg(long, value_enum, default_value = "auto", value_name = "REVISION")]
    upstream_protocol: UpstreamProtocolArg,
    /// Accept HTTP (or A2A) clients without a bearer token (loopback addresses only).
    #[arg(long)]
    insecure_no_auth: bool,
    /// With --http: close an MCP session after this many seconds without a request (default 1800).
    /// With --a2a: a context idle this long may be closed to make room for a new one.
    #[arg(long, value_name = "SECS", value_parser = session_idle_timeout)]
    session_idle_timeout: Option<std::time::Duration>,
    /// With --http: the most MCP sessions open at once; an initialize beyond it gets 503 (default
    /// 1000). With --a2a: the most A2A contexts (agent sessions) open at once (default 32).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: Option<u32>,
    #[command(flatten)]
    policy: PolicyFlags,
}

pub(crate) fn run(globals: &Globals, args: ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(addr) = args.a2a {
        return crate::commands::a2a::run(
            globals,
            addr,
            crate::commands::a2a::A2aFlags {
                insecure_no_auth: args.insecure_no_auth,
                max_contexts: args.max_sessions,
                idle_timeout: args.session_idle_timeout,
                model: args.model,
                policy: args.policy,
            },
        );
    }
    let (paths, workspace, config) = load_config(globals)?;
    let approver = ElicitingApprover::new();
    // Local skills, published as prompts and resources in progressive exposure; loading one
    // goes through the gate as the `use_skill` host tool (audited as a skill load).
    let skills = Arc::new(discover(&SkillRoots::standard(&paths, &workspace)));
    let remote_skills = Arc::new(RemoteSkills::new(RemoteSkillsSettings {
        extension_enabled: config.experimental.skills_extension,
        grants_path: Some(warden_skills::GrantStore::path_in(paths.state_dir())),
        reserved: skills
            .skills
            .iter()
            .map(|skill| skill.name.clone())
            .collect(),
    }));
    let mut options = host_options(paths, workspace, &config, &args.policy)?;
    options
        .tools
        .extend(skill_tools(skills.clone(), remote_skills.clone()));
    options.remote_skills = Some(remote_skills);
    // Code mode (progressive): its scripts' tool calls go through the gate as code mode.
    options.tools.extend(code_tools());
    relay_to_clients(&mut options, &approver);
    options.extra_servers = ad_hoc_servers(&args.mcp)?;
    options.protocol = match args.upstream_protocol {
        UpstreamProtocolArg::Auto => ProtocolMode::Auto,
        UpstreamProtocolArg::V2025_11_25 => ProtocolMode::Legacy,
        UpstreamProtocolArg::V2026_07_28 => ProtocolMode::Stateless,
    };
    let exposure = match args.expose {
        ExposeArg::Flat => Exposure::Flat,
        ExposeArg::Progressive => Exposure::Progressive,
        ExposeArg::Passthrough => Exposure::Passthrough,
    };
    if args.server.is_some() && exposure != Exposure::Passthrough {
        bail!("--server names the upstream of --expose passthrough");
    }
    if args.insecure_no_auth && args.http.is_none() {
        bail!("--insecure-no-auth applies to --http and --a2a only");
    }
    let host = Host::open(&config, options).context("opening the session")?;
    let summaries = skills
        .skills
        .iter()
        .map(|skill| SkillSummary {
            name: skill.name.clone(),
            description: skill.description.clone(),
        })
        .collect();
    let gateway = Arc::new(
        Gateway::new(
            host.clone(),
            exposure,
            args.server.clone(),
            approver.directory(),
        )?
        .with_skills(summaries, USE_SKILL)
        .with_progressive_host_tools(vec![CODE_SEARCH.to_owned(), CODE_EXECUTE.to_owned()]),
    );
    async_runtime()?.block_on(async {
        // A server marked `required = true` that cannot start: serve refuses to start.
        if let Err(failure) = host.servers().connect_required().await {
            host.shutdown().await;
            bail!(
                "a required MCP server did not start, so warden serve does not either: {failure}"
            );
        }
        gateway.prepare().await;
        let served = match args.http {
            None => serve_stdio(gateway)
                .await
                .context("serving over stdio")
                .map(|()| Ended::ByClient),
            Some(addr) => serve_over_http(gateway, addr, &args).await,
        };
        host.shutdown().await;
        // Ended by SIGINT or SIGTERM: 130, as every command ends on a stop signal.
        Ok(match served? {
            Ended::ByClient => ExitCode::SUCCESS,
            Ended::BySignal => ExitCode::from(crate::commands::run::exit::INTERRUPTED),
        })
    })
}

/// How serving ended.
enum Ended {
    /// The client went away (stdin closed).
    ByClient,
    /// A stop signal (SIGINT, SIGTERM, SIGHUP).
    BySignal,
}

async fn serve_over_http(
    gateway: Arc<Gateway>,
    addr: SocketAddr,
    args: &ServeArgs,
) -> anyhow::Result<Ended> {
    // Listening for the stop signals starts before "listening on" is said: a signal sent the
    // moment a supervisor reads that line is not lost.
    // (setup's, which registers the handlers when called; an `async fn` would wait to be polled)
    let stop = crate::setup::stop_signal();
    let (listener, auth) = bind_with_auth(addr, args.insecure_no_auth).await?;
    let bound = listener.local_addr()?;
    if args.insecure_no_auth {
        tracing::warn!(
            "--insecure-no-auth: any process on this machine that can reach http://{bound}{MCP_PATH} \
             may list and call every tool this gateway exposes, with no token"
        );
    }
    eprintln!("warden serve: listening on http://{bound}{MCP_PATH}");
    let mut settings = HttpSettings::new(auth);
    if let Some(idle) = args.session_idle_timeout {
        settings.session_idle_timeout = idle;
    }
    if let Some(max) = args.max_sessions {
        settings.max_sessions = max as usize;
    }
    let shutdown = settings.shutdown.clone();
    let signalled = shutdown.clone();
    tokio::spawn(async move {
        stop.await;
        shutdown.cancel();
    });
    serve_http(gateway, listener, settings)
        .await
        .context("serving over HTTP")?;
    // Only the signal cancels it: serving ends on nothing else.
    Ok(if signalled.is_cancelled() {
        Ended::BySignal
    } else {
        Ended::ByClient
    })
}

/// The authentication of `--http` and `--a2a` and the listener: the operator's token from
/// `WARDEN_SERVE_TOKEN`, or a fresh one written to a private file once the address is bound
/// (never printed), or none (`--insecure-no-auth`, loopback only).
pub(crate) async fn bind_with_auth(
    addr: SocketAddr,
    insecure_no_auth: bool,
) -> anyhow::Result<(tokio::net::TcpListener, HttpAuth)> {
    let mut generated = None;
    let auth = if insecure_no_auth {
        HttpAuth::InsecureNone
    } else {
        match token_from_env() {
            Some(Err(too_short)) => return Err(UsageError(too_short_message(&too_short)).into()),
            Some(Ok(token)) => HttpAuth::Bearer(token),
            None => {
                let token = BearerToken::generate()?;
                generated = Some(token.expose().to_owned());
                HttpAuth::Bearer(token)
            }
        }
    };
    let listener = bind_http(addr, &auth)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    // Only once the address is ours: a failed bind writes no token. The token goes to a private
    // file, never to stderr (which logs and terminals keep).
    if let Some(token) = generated {
        let file = write_token_file(&token)?;
        eprintln!(
            "warden serve: bearer token written to {} (mode 0600; set {TOKEN_ENV} to choose one)",
            file.display()
        );
    }
    Ok((listener, auth))
}

/// Ctrl-C, SIGTERM or SIGHUP: the HTTP server stops and the session's servers are shut down.
/// `--http ADDR`: an IP address and port, or `localhost:PORT` (the loopback address; the name is
/// never looked up elsewhere).
pub(crate) fn listen_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Ok(address);
    }
    match text.rsplit_once(':') {
        Some((host, port)) if host.eq_ignore_ascii_case("localhost") => port
            .parse::<u16>()
            .map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
            .map_err(|_| format!("\"{port}\" is not a port number")),
        _ => Err(format!(
            "expected IP:PORT (127.0.0.1:8765, [::1]:8765) or localhost:PORT, not \"{text}\""
        )),
    }
}

/// `--session-idle-timeout SECS`: at least a second, at most a week.
fn session_idle_timeout(text: &str) -> Result<std::time::Duration, String> {
    let seconds: u64 = text
        .parse()
        .map_err(|_| format!("expected a whole number of seconds, not \"{text}\""))?;
    warden_config::timeout_seconds(seconds, warden_serve::DEFAULT_SESSION_IDLE_TIMEOUT)
}

/// Writes a generated token to `STATE_DIR/serve/token` (a 0700 folder, a 0600 file, replaced
/// atomically) and returns the path.
fn write_token_file(token: &str) -> anyhow::Result<std::path::PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = crate::setup::paths()?.state_dir().join("serve");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("token");
    warden_config::atomic_write(&path, format!("{token}\n").as_bytes())
        .and_then(|()| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}
