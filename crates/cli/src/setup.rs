//! What several subcommands share: paths, the workspace, the loaded config, the policy flags,
//! the async runtime and opening a session host.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use warden_config::{LoadedConfig, Paths, PolicySettings};
use warden_host::{Host, HostOptions};
use warden_policy::{
    ApprovalAnswer, ApprovalRequest, Approver, BoxFuture, GatePolicy, PermissionMode, ToolGlob,
};

use crate::Globals;
use warden_session::{
    AgentSession, ConfigOpener, OpenError, PolicyOverrides, Resume, SessionError, SessionOpener,
    SessionSpec, UsageError, ad_hoc_servers,
};

/// warden's folders, from `WARDEN_HOME`, the XDG variables or the defaults.
pub(crate) fn paths() -> anyhow::Result<Paths> {
    Paths::from_env().context("finding warden's folders (set HOME or WARDEN_HOME)")
}

/// The workspace: the current directory.
pub(crate) fn workspace() -> anyhow::Result<PathBuf> {
    std::env::current_dir().context("reading the current directory")
}

/// Every scope the command line selects, validated, with the global flags that stand for a
/// config key folded in (`--mcp-skills-extension` is `[experimental] skills_extension = true`),
/// so every surface that reads the config sees them.
pub(crate) fn load_config(globals: &Globals) -> anyhow::Result<(Paths, PathBuf, LoadedConfig)> {
    load_config_in(globals, workspace()?)
}

/// [`load_config`] for a workspace other than the current directory.
pub(crate) fn load_config_in(
    globals: &Globals,
    workspace: PathBuf,
) -> anyhow::Result<(Paths, PathBuf, LoadedConfig)> {
    let paths = paths()?;
    let config = ConfigOpener::new(paths.clone(), workspace.clone())
        .with_config_file(globals.config_file.clone())
        .with_skills_extension(globals.mcp_skills_extension)
        .load_config(workspace.clone())?;
    Ok((paths, workspace, config))
}

/// The sessions' opener for this command line: its configuration file, its policy flags and
/// its global flags, in the current directory.
pub(crate) fn config_opener(
    globals: &Globals,
    flags: &PolicyFlags,
) -> anyhow::Result<ConfigOpener> {
    Ok(ConfigOpener::new(paths()?, workspace()?)
        .with_config_file(globals.config_file.clone())
        .with_policy(flags.overrides()?)
        .with_skills_extension(globals.mcp_skills_extension))
}

/// Folds the global flags that override config keys into the loaded config.
pub(crate) fn apply_global_flags(globals: &Globals, config: &mut LoadedConfig) {
    if globals.mcp_skills_extension {
        config.experimental.skills_extension = true;
    }
}

/// The one way every surface (`warden run`, chat, `tool`, `serve`, `mcp prompt`, `code`,
/// `context`, probes) starts its [`HostOptions`]: the config's policy with the command line's
/// flags, the operator's hooks, and the SEP-2640 skills extension as the config (and
/// `--mcp-skills-extension`, folded in by [`load_config`]) says. The surface then adds its own
/// tools, approver and handlers.
pub(crate) fn host_options(
    paths: Paths,
    workspace: PathBuf,
    config: &LoadedConfig,
    flags: &PolicyFlags,
) -> anyhow::Result<HostOptions> {
    Ok(ConfigOpener::new(paths, workspace.clone())
        .with_policy(flags.overrides()?)
        .host_options(workspace, config)?)
}

/// What `warden run` and `warden chat` ask of their agent session on the command line.
pub(crate) struct AgentFlags<'a> {
    pub(crate) model: Option<&'a str>,
    pub(crate) agent: Option<&'a str>,
    /// `--mcp CMD|URL` (or `NAME=CMD|URL`) ad-hoc servers.
    pub(crate) mcp: &'a [String],
    pub(crate) policy: &'a PolicyFlags,
    /// `--add-dir`: more workspace roots for the built-in tools.
    pub(crate) add_dirs: &'a [PathBuf],
    pub(crate) resume: Option<&'a str>,
    pub(crate) continue_latest: bool,
}

/// Opens the agent session of `warden run` or `warden chat`: the config with the global flags,
/// the policy flags (checked first: a typo in a flag is the first thing to say), the ad-hoc
/// servers, and the frontend's approver and elicitation handler (`None`: headless).
pub(crate) fn open_agent_session(
    globals: &Globals,
    flags: AgentFlags<'_>,
    approver: Option<Arc<dyn Approver>>,
    elicitation: Option<Arc<dyn warden_mcp::ElicitationHandler>>,
) -> anyhow::Result<AgentSession> {
    let opener = config_opener(globals, flags.policy)?;
    let resume = match (flags.resume, flags.continue_latest) {
        (Some(id), _) => Resume::Id(id.to_owned()),
        (None, true) => Resume::Latest,
        (None, false) => Resume::New,
    };
    Ok(opener.open(SessionSpec {
        model: flags.model.map(str::to_owned),
        agent: flags.agent.map(str::to_owned),
        approver,
        elicitation,
        servers: ad_hoc_servers(flags.mcp)?,
        add_dirs: flags.add_dirs.to_vec(),
        resume,
        ..SessionSpec::default()
    })?)
}

/// Whether `error` is a usage or configuration problem (exit code 2) rather than a failure.
pub(crate) fn is_usage_error(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause.is::<UsageError>()
            || cause.is::<warden_config::ConfigError>()
            || cause.downcast_ref::<OpenError>().is_some_and(OpenError::is_usage)
            || cause
                .downcast_ref::<SessionError>()
                .is_some_and(SessionError::is_usage)
            // A name that is not there, arguments that are not valid: the request is wrong.
            || cause
                .downcast_ref::<warden_mcp::McpError>()
                .is_some_and(|mcp| mcp.kind() == warden_mcp::FailureKind::UnknownServer)
            || cause
                .downcast_ref::<warden_knowledge::KnowledgeError>()
                .is_some_and(names_nothing)
            || cause
                .downcast_ref::<warden_session::knowledge::RetrievalError>()
                .is_some_and(|error| {
                    use warden_session::knowledge::RetrievalError;
                    match error {
                        RetrievalError::Store(store) => names_nothing(store),
                        RetrievalError::UnknownEmbeddings(_)
                        | RetrievalError::UnknownReranker(_)
                        | RetrievalError::MissingKey { .. } => true,
                        RetrievalError::Endpoint { .. } | RetrievalError::Folder { .. } => false,
                    }
                })
            || cause
                .downcast_ref::<warden_bridge::views::ViewError>()
                .is_some_and(|view| view.kind == warden_bridge::views::ViewErrorKind::BadRequest)
            || cause.downcast_ref::<warden_config::EditError>().is_some_and(|edit| {
                matches!(
                    edit,
                    warden_config::EditError::Exists { .. }
                        | warden_config::EditError::NotFound { .. }
                        | warden_config::EditError::Invalid(_)
                        | warden_config::EditError::Syntax { .. }
                )
            })
    })
}

/// Whether a knowledge store's error is a name that names nothing (or no name at all).
fn names_nothing(error: &warden_knowledge::KnowledgeError) -> bool {
    matches!(
        error,
        warden_knowledge::KnowledgeError::UnknownCollection(_)
            | warden_knowledge::KnowledgeError::BadName(_)
    )
}

/// A usage error (exit code 2) saying `message`.
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    UsageError(message.into()).into()
}

/// A multi-threaded tokio runtime for one command.
pub(crate) fn async_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// `--permission-mode`: the config's names (`ask`, `read-only`, `auto`), listed with what each
/// does in `--help`.
fn permission_mode_parser() -> impl clap::builder::TypedValueParser<Value = PermissionMode> {
    use clap::builder::TypedValueParser;
    let values = PermissionMode::ALL.map(|mode| {
        let help = match mode {
            PermissionMode::Ask => {
                "Read-only tools run; anything else asks (denied when nobody can be asked)"
            }
            PermissionMode::ReadOnly => "Read-only tools run; anything else is denied",
            PermissionMode::Auto => {
                "Everything policy admits runs, except destructive tools, which ask"
            }
        };
        clap::builder::PossibleValue::new(mode.as_str()).help(help)
    });
    clap::builder::PossibleValuesParser::new(values).try_map(|name| {
        PermissionMode::from_name(&name).ok_or_else(|| format!("no permission mode \"{name}\""))
    })
}

/// `--permission-mode`, `--allowed-tools`, `--disallowed-tools`: the operator's policy flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct PolicyFlags {
    /// The permission mode for this run.
    #[arg(long, value_name = "MODE", value_parser = permission_mode_parser())]
    pub(crate) permission_mode: Option<PermissionMode>,
    /// Tools that run without asking: globs over public names (`mcp__github__*`);
    /// comma-separated or repeated.
    #[arg(long, value_name = "PATTERNS")]
    pub(crate) allowed_tools: Vec<String>,
    /// Tools that are denied: globs over public names; comma-separated or repeated.
    #[arg(long, value_name = "PATTERNS")]
    pub(crate) disallowed_tools: Vec<String>,
}

impl PolicyFlags {
    /// The session's policy: the config's settings with these flags applied (the command line
    /// is the operator's: its mode wins, its patterns are added).
    pub(crate) fn policy(&self, settings: &PolicySettings) -> anyhow::Result<GatePolicy> {
        Ok(self.overrides()?.policy(settings))
    }

    /// These flags as read: a typo in a pattern is refused here, before anything starts.
    pub(crate) fn overrides(&self) -> anyhow::Result<PolicyOverrides> {
        let mut overrides = PolicyOverrides {
            mode: self.permission_mode,
            ..PolicyOverrides::default()
        };
        for text in &self.allowed_tools {
            overrides
                .allow
                .extend(flag_patterns("--allowed-tools", text)?);
        }
        for text in &self.disallowed_tools {
            overrides
                .deny
                .extend(flag_patterns("--disallowed-tools", text)?);
        }
        Ok(overrides)
    }
}

/// A comma-separated list of tool patterns from the command line: each one is read by the same
/// grammar as `[permissions] allow`/`deny` and refused with the same words (a typo in a deny flag
/// must not quietly match nothing); blanks around a pattern and empty items are ignored.
pub(crate) fn flag_patterns(flag: &str, text: &str) -> anyhow::Result<Vec<ToolGlob>> {
    ToolGlob::parse_list(text)
        .map_err(|error| UsageError(format!("{flag} {text}: expected {error}")).into())
}

/// Opens a session host over the loaded config with these policy flags. When standard input
/// and standard error are a terminal, approvals are asked there; otherwise nobody is asked.
pub(crate) fn open_host(
    paths: Paths,
    workspace: PathBuf,
    config: &LoadedConfig,
    flags: &PolicyFlags,
) -> anyhow::Result<Arc<Host>> {
    let mut options = host_options(paths, workspace, config, flags)?;
    if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        options.approver = Some(Arc::new(TerminalApprover));
    }
    Host::open(config, options).context("opening the session")
}

/// Asks the person at the terminal: allow once, allow for this session, or deny.
struct TerminalApprover;

/// What the terminal approver shows about a call: who wants to run what, its classes, the
/// effect its author declared (a tool defined in code), why it asks and the arguments.
fn approval_question(request: &ApprovalRequest) -> String {
    let effect = request
        .effect
        .map(|effect| format!("; effect: {effect}"))
        .unwrap_or_default();
    format!(
        "warden: {} wants to run {} ({} on server {}; classes: {}{effect})\n  why: {}\n  arguments: {}",
        request.surface,
        request.public_name,
        request.identity.tool,
        request.identity.server(),
        request.classes.to_names(),
        request.reason,
        request.arguments,
    )
}

impl Approver for TerminalApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        let always = if request.offers_always {
            " / [a]lways"
        } else {
            ""
        };
        let prompt = format!(
            "{}\n  allow? [y]es once / [s]ession{always} / [N]o: ",
            approval_question(request)
        );
        let offers_always = request.offers_always;
        Box::pin(async move {
            let answer = tokio::task::spawn_blocking(move || {
                let mut stderr = std::io::stderr().lock();
                let _ = stderr.write_all(prompt.as_bytes());
                let _ = stderr.flush();
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line).map(|_| line)
            })
            .await;
            match answer {
                Ok(Ok(line)) => match line.trim().to_ascii_lowercase().as_str() {
                    "y" | "yes" => ApprovalAnswer::AllowOnce,
                    "s" | "session" => ApprovalAnswer::AllowForSession,
                    "a" | "always" if offers_always => ApprovalAnswer::AllowAlways,
                    _ => ApprovalAnswer::Deny { reason: None },
                },
                _ => ApprovalAnswer::NobodyToAsk {
                    reason: "the terminal could not be read".to_owned(),
                },
            }
        })
    }
}

/// Resolves at the first Ctrl-C (SIGINT), SIGTERM or SIGHUP: every command that runs tools stops
/// the same way for each — the running call is cancelled (the server told so), recorded, and the
/// servers' process groups are stopped. Listening starts when this is called, so call it before
/// anything slow.
pub(crate) fn stop_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let terminate = signal(SignalKind::terminate());
    let hangup = signal(SignalKind::hangup());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        let wait = |listener: std::io::Result<tokio::signal::unix::Signal>| async move {
            match listener {
                Ok(mut listener) => {
                    listener.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = wait(interrupt) => {}
            () = wait(terminate) => {}
            () = wait(hangup) => {}
        }
    }
}

/// A token cancelled at the first stop signal (see [`stop_signal`]); the watcher task ends with
/// the runtime.
pub(crate) fn cancel_on_stop_signal() -> tokio_util::sync::CancellationToken {
    let cancel = tokio_util::sync::CancellationToken::new();
    let stop = stop_signal();
    let token = cancel.clone();
    tokio::spawn(async move {
        stop.await;
        token.cancel();
    });
    cancel
}

/// An error and its causes on one line, each cause said once: many errors already include their
/// source in their own message (`cannot read X: Is a directory`), which `{:#}` would repeat.
pub(crate) fn error_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::path::Path;

    use warden_config::{Scope, parse_str};

    use super::*;

    fn approval_request(effect: Option<warden_policy::CapabilityClass>) -> ApprovalRequest {
        ApprovalRequest {
            session_id: "s".into(),
            surface: warden_policy::CallSurface::Agent,
            kind: warden_policy::CallKind::Tool,
            caller: None,
            identity: warden_policy::ToolIdentity::builtin("cancel_order"),
            public_name: "cancel_order".into(),
            annotations: Default::default(),
            classes: warden_policy::CapabilitySet::of(&[
                warden_policy::CapabilityClass::Destructive,
            ]),
            effect,
            arguments: serde_json::json!({"order_id": "A-1"}),
            reason: "cancel_order requires approval before every call".into(),
            guarded: None,
            requires_approval: false,
            offers_always: false,
            once_only: false,
        }
    }

    #[test]
    fn the_terminal_question_shows_a_declared_effect_and_why_it_asks() {
        let question = approval_question(&approval_request(Some(
            warden_policy::CapabilityClass::Destructive,
        )));
        assert!(
            question.contains("classes: destructive; effect: destructive)"),
            "{question}"
        );
        assert!(
            question.contains("why: cancel_order requires approval before every call"),
            "{question}"
        );
        let plain = approval_question(&approval_request(None));
        assert!(!plain.contains("effect"), "{plain}");
    }

    /// What `[permissions] allow = [PATTERN]` makes of one pattern: the glob, or the diagnostic.
    fn from_config(pattern: &str) -> Result<Vec<ToolGlob>, String> {
        let quoted = serde_json::to_string(pattern).unwrap();
        let text = format!("schema_version = 1\n[permissions]\nallow = [{quoted}]\n");
        match parse_str(&text, Path::new("/cfg/config.toml"), Scope::User) {
            Ok(file) => Ok(file.policy_settings.permissions.allow),
            Err(error) => {
                let diagnostics = error.diagnostics();
                assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
                assert_eq!(diagnostics[0].key, "permissions.allow[0]");
                Err(diagnostics[0].problem.to_string())
            }
        }
    }

    /// What `--allowed-tools PATTERN` makes of one pattern: the glob, or the usage error.
    fn from_flag(pattern: &str) -> Result<Vec<ToolGlob>, String> {
        flag_patterns("--allowed-tools", pattern).map_err(|error| {
            let prefix = format!("--allowed-tools {pattern}: ");
            let message = error.to_string();
            message
                .strip_prefix(&prefix)
                .unwrap_or_else(|| panic!("{message:?} lacks {prefix:?}"))
                .to_owned()
        })
    }

    #[test]
    fn config_and_flags_accept_and_refuse_the_same_patterns_with_the_same_words() {
        let accepted = ["*", "bash", "mcp__fs__*", "mcp__gh-2__get_?ssue", "A_b-9?*"];
        let refused = [
            "mcp.fs.*",
            "mcp__fs__[ab]",
            "mcp__fs__write file",
            "mcp__fs__*\\",
            "a/b",
            "x{y}",
            "é",
            "mcp__fs__(read|write)",
        ];
        for pattern in accepted {
            let config = from_config(pattern);
            assert_eq!(
                config,
                Ok(vec![ToolGlob::parse(pattern).unwrap()]),
                "{pattern}"
            );
            assert_eq!(from_flag(pattern), config, "{pattern}");
        }
        for pattern in refused {
            let config = from_config(pattern);
            let expected = format!("expected {}", ToolGlob::parse(pattern).unwrap_err());
            assert_eq!(config, Err(expected.clone()), "{pattern}");
            assert_eq!(from_flag(pattern), config, "{pattern}");
        }
    }

    #[test]
    fn a_flag_is_a_comma_list_of_those_patterns() {
        assert_eq!(
            from_flag(" mcp__a__*, mcp__b__x,,"),
            Ok(vec![
                ToolGlob::parse("mcp__a__*").unwrap(),
                ToolGlob::parse("mcp__b__x").unwrap(),
            ])
        );
        assert_eq!(from_flag(""), Ok(Vec::new()));
        assert!(from_flag("mcp__a__*,mcp.b").is_err());
        // A comma inside one config pattern is no list: the config refuses it.
        assert!(from_config("mcp__a__*,mcp__b__x").is_err());
    }
}
