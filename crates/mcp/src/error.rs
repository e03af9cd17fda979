//! Typed runtime failures whose `Display` is the one-line message a person reads.

use std::time::Duration;

/// What went wrong, as a type (never derived from message text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// No server of that name is configured.
    UnknownServer,
    /// The stdio command could not be found.
    CommandNotFound,
    /// The stdio command could not be started for another reason (permissions, bad cwd, …).
    SpawnFailed,
    /// The process exited before the handshake finished.
    ExitedDuringStartup,
    /// Connect plus handshake did not finish within the start-up deadline.
    StartupTimeout,
    /// The peer answered, but not with a usable MCP handshake.
    HandshakeFailed,
    /// A connected server's process exited or its connection closed.
    Exited,
    /// Connection refused, host not found, network unreachable.
    Unreachable,
    /// TLS handshake or certificate failure.
    Tls,
    /// HTTP 404 where the MCP endpoint should be.
    NotFound,
    /// HTTP 5xx.
    ServerError,
    /// An HTML page (or another non-MCP body) where the endpoint should be.
    NotMcpEndpoint,
    /// HTTP 401/403 without an OAuth challenge: a header (token) was rejected.
    Rejected,
    /// The server asks for an OAuth login.
    NeedsLogin,
    /// The server answered with a redirect, which is never followed.
    Redirected,
    /// Plain `http://` to a non-loopback host, or a malformed url.
    InsecureUrl,
    /// The egress guard of a tenant's server refused its address (or one its DNS name, a
    /// redirect or its OAuth metadata led to): not public, and not allowed by the operator.
    EgressRefused,
    /// Something the runtime does not support yet.
    Unsupported,
    /// No tool of that name in the discovered, filtered set.
    UnknownTool,
    /// A request exceeded its deadline (and was cancelled).
    Timeout,
    /// The caller cancelled the request.
    Cancelled,
    /// The server answered with a JSON-RPC error.
    Rpc,
    /// The server answered with something the protocol does not allow here.
    Protocol,
    /// The resource URI was not advertised by the server, or is not readable this way.
    NotAdvertised,
    /// Prompt or tool arguments were rejected before the request.
    InvalidArguments,
    /// The runtime was shut down.
    ShutDown,
    /// A response went past a bound (SSE events per stream, total SSE bytes) and was ended.
    ResponseLimit,
    /// The server forgot the session (404) while a request that may have applied an effect
    /// was on its way; it was not re-sent.
    SessionForgotten,
    /// The operator stopped the server; it stays down until reconnected.
    Stopped,
    /// The server needs the user to complete a URL elicitation (JSON-RPC error -32042) before it
    /// runs the call, and no interactive frontend could ask (or the user declined).
    ElicitationRequired,
}

/// One runtime failure. `Display` is one line: `MCP <server>: <what went wrong> — <what to check>`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("MCP {server}: {what}{}", hint_suffix(.hint))]
pub struct McpError {
    server: String,
    kind: FailureKind,
    what: String,
    hint: Option<String>,
}

fn hint_suffix(hint: &Option<String>) -> String {
    match hint {
        Some(hint) => format!(" — {hint}"),
        None => String::new(),
    }
}

/// The error of a connect attempt.
pub type ConnectError = McpError;
/// The error of a tool call.
pub type CallError = McpError;

impl McpError {
    pub(crate) fn new(
        server: impl Into<String>,
        kind: FailureKind,
        what: impl Into<String>,
        hint: Option<&str>,
    ) -> Self {
        Self {
            server: server.into(),
            kind,
            what: single_line(&what.into()),
            hint: hint.map(str::to_owned),
        }
    }

    /// The server this failure belongs to.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// What went wrong, as a type.
    pub fn kind(&self) -> FailureKind {
        self.kind
    }

    /// The part after `MCP <server>: `, without the hint.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// No server is configured under `server`; `known` are the names that are, for a
    /// "did you mean" when one is close.
    pub(crate) fn unknown_server(server: &str, known: &[String]) -> Self {
        let candidates: Vec<&str> = known.iter().map(String::as_str).collect();
        let what = match warden_config::nearest(server, &candidates) {
            Some(near) => format!("no server of that name is configured; did you mean `{near}`?"),
            None => "no server of that name is configured".to_owned(),
        };
        Self::new(
            server,
            FailureKind::UnknownServer,
            what,
            Some("check the name with `warden mcp list`"),
        )
    }

    pub(crate) fn timeout(server: &str, what: &str, after: Duration) -> Self {
        Self::new(
            server,
            FailureKind::Timeout,
            format!(
                "{what} timed out after {} and was cancelled",
                human_duration(after)
            ),
            Some("the server stays connected; raise the timeout if it needs longer"),
        )
    }

    pub(crate) fn shut_down(server: &str) -> Self {
        Self::new(
            server,
            FailureKind::ShutDown,
            "the MCP runtime is shut down",
            None,
        )
    }
}

/// `30s`, `2m`, `1.5s` — short and readable.
pub(crate) fn human_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis.is_multiple_of(60_000) && millis >= 60_000 {
        format!("{}m", millis / 60_000)
    } else if millis.is_multiple_of(1000) {
        format!("{}s", millis / 1000)
    } else {
        format!("{:.1}s", duration.as_secs_f64())
    }
}

/// Collapses newlines and bounds the length so the message stays on one line.
pub(crate) fn single_line(text: &str) -> String {
    const MAX: usize = 400;
    let mut line: String = text
        .chars()
        .map(|c| {
            if c == '\n' || c == '\r' || c == '\t' {
                ' '
            } else {
                c
            }
        })
        .collect();
    if line.len() > MAX {
        let mut end = MAX;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        line.truncate(end);
        line.push('…');
    }
    line
}
