//! Typed runtime failures whose `Display` is the one-line message a person reads.

use std::time::Duration;

pub use warden_vocab::FailureKind;

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
