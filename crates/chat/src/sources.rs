//! Where the model's tools come from, as `/tools` and `/mcp` show them: built-ins first, then
//! each server with its state, counts, endpoint, failure and stderr, read live from the host.

use std::collections::BTreeMap;
use std::time::Duration;

use warden_config::{ServerEntry, Transport};
use warden_host::Host;
use warden_mcp::{ServerSpec, ServerState, ServerStatus, TransportSpec};

/// What the config says about a server, for its page (never a secret: no env or header values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFacts {
    /// The full command line, or the URL.
    pub endpoint: String,
    pub transport: String,
    /// How it logs in: `none`, `oauth`, `headers`, …
    pub login: String,
    pub call_timeout: Duration,
}

impl SourceFacts {
    pub fn from_entry(entry: &ServerEntry) -> Self {
        let (endpoint, transport, login) = match &entry.transport {
            Transport::Stdio { command, args, .. } => (
                std::iter::once(command.as_str())
                    .chain(args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" "),
                "stdio".to_owned(),
                "none (local process)".to_owned(),
            ),
            Transport::Http {
                url,
                headers,
                auth,
                legacy_sse,
                ..
            } => (
                // No query string: it may carry a token.
                url.split('?').next().unwrap_or(url).to_owned(),
                if *legacy_sse { "sse" } else { "http" }.to_owned(),
                if headers
                    .keys()
                    .any(|key| key.eq_ignore_ascii_case("authorization"))
                {
                    "headers".to_owned()
                } else {
                    format!("{auth:?}").to_lowercase()
                },
            ),
        };
        Self {
            endpoint,
            transport,
            login,
            call_timeout: entry.tool_timeout,
        }
    }

    pub fn from_spec(spec: &ServerSpec) -> Self {
        let (endpoint, login) = match &spec.transport {
            TransportSpec::Stdio { command, args, .. } => (
                std::iter::once(command.as_str())
                    .chain(args.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(" "),
                "none (local process)".to_owned(),
            ),
            TransportSpec::StreamableHttp { url, .. } | TransportSpec::LegacySse { url, .. } => (
                url.split('?').next().unwrap_or(url).to_owned(),
                "auto".to_owned(),
            ),
        };
        Self {
            endpoint,
            transport: spec.transport.kind().to_owned(),
            login,
            call_timeout: spec.tool_timeout,
        }
    }
}

/// One line of `/tools` and the page behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRow {
    pub name: String,
    /// A server (Enter on its page reconnects it); built-ins are not.
    pub is_server: bool,
    /// `built in`, `connected`, `failed`, …
    pub state: String,
    pub connected: bool,
    pub tool_count: Option<usize>,
    /// Why it is not connected, in a few words.
    pub reason: Option<String>,
    pub page: SourcePage,
}

/// A source's page.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourcePage {
    pub endpoint: Option<String>,
    pub transport: Option<String>,
    pub login: Option<String>,
    pub call_timeout: Option<String>,
    pub protocol: Option<String>,
    pub tools: Vec<String>,
    /// The full failure, cause and hint.
    pub failure: Option<String>,
    pub stderr: Vec<String>,
    /// What went wrong while listing its catalogue (names that collided, a listing cut at
    /// the page limit, a refresh that failed), one line each.
    pub warnings: Vec<String>,
}

/// One line of `/mcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpRow {
    pub name: String,
    pub phase: String,
    pub generation: u64,
    pub tools: Option<usize>,
    pub resources: Option<usize>,
    pub prompts: Option<usize>,
    pub protocol: Option<String>,
}

impl McpRow {
    pub fn from_status(status: &ServerStatus) -> Self {
        Self {
            name: status.name.clone(),
            phase: status.state.label().to_owned(),
            generation: status.catalog_generation,
            tools: status.counts.tools,
            resources: status.counts.resources,
            prompts: status.counts.prompts,
            protocol: status.protocol_revision.clone(),
        }
    }
}

/// The failure without `MCP <server>: ` and without the hint: a few words.
pub(crate) fn short_reason(failure: &str) -> String {
    let what = failure
        .split_once(": ")
        .filter(|(head, _)| head.starts_with("MCP "))
        .map_or(failure, |(_, rest)| rest);
    what.split(" — ").next().unwrap_or(what).to_owned()
}

pub(crate) fn human_duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    if seconds >= 60 && seconds.is_multiple_of(60) {
        format!("{} min", seconds / 60)
    } else if seconds > 0 {
        format!("{seconds} s")
    } else {
        format!("{} ms", duration.as_millis())
    }
}

/// Whether a server in this state is a problem worth announcing.
pub(crate) fn is_failure(state: ServerState) -> bool {
    matches!(
        state,
        ServerState::Failed | ServerState::Down | ServerState::NeedsLogin
    )
}

/// The rows of `/tools`: built-ins first, then every server (idle ones with their reason).
/// `tool_names` maps a server (or `built-in`) to its tools' public names.
pub(crate) fn source_rows(
    host: &Host,
    facts: &BTreeMap<String, SourceFacts>,
    tool_names: &BTreeMap<String, Vec<String>>,
) -> Vec<SourceRow> {
    let builtins: Vec<String> = host
        .host_tools()
        .into_iter()
        .map(|descriptor| descriptor.public_name)
        .collect();
    let mut rows = vec![SourceRow {
        name: "built-in".to_owned(),
        is_server: false,
        state: "built in".to_owned(),
        connected: true,
        tool_count: Some(builtins.len()),
        reason: None,
        page: SourcePage {
            tools: builtins,
            ..SourcePage::default()
        },
    }];
    for status in host.servers().status() {
        let mut row = server_row(&status, facts.get(&status.name), tool_names);
        row.page.warnings = host.catalog_warnings(&status.name);
        rows.push(row);
    }
    for idle in host.idle_servers() {
        rows.push(SourceRow {
            name: idle.name.clone(),
            is_server: false,
            state: "not started".to_owned(),
            connected: false,
            tool_count: None,
            reason: Some(idle.reason.clone()),
            page: SourcePage {
                failure: Some(idle.reason.clone()),
                ..SourcePage::default()
            },
        });
    }
    rows
}

fn server_row(
    status: &ServerStatus,
    facts: Option<&SourceFacts>,
    tool_names: &BTreeMap<String, Vec<String>>,
) -> SourceRow {
    let connected = status.state == ServerState::Connected;
    let reason = match (&status.failure, status.state) {
        (Some(failure), state) if !connected && state != ServerState::NotConnected => {
            Some(short_reason(failure))
        }
        (_, ServerState::NotConnected) if status.deferred.is_some() => {
            Some("deferred: connects when its tools are searched".to_owned())
        }
        (_, ServerState::NotConnected) => Some("connects on first use".to_owned()),
        _ => None,
    };
    SourceRow {
        name: status.name.clone(),
        is_server: true,
        state: status.state.label().to_owned(),
        connected,
        tool_count: status.counts.tools,
        reason,
        page: SourcePage {
            endpoint: facts.map(|facts| facts.endpoint.clone()),
            transport: Some(status.transport.to_owned()),
            login: facts.map(|facts| facts.login.clone()),
            call_timeout: facts.map(|facts| human_duration(facts.call_timeout)),
            protocol: status.protocol_revision.clone(),
            tools: tool_names.get(&status.name).cloned().unwrap_or_default(),
            failure: status.failure.clone(),
            stderr: status.stderr_tail.clone(),
            warnings: Vec::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_needs_login_says_so_with_the_command_on_its_page() {
        let failure = "MCP gh: the server needs you to log in — run `warden mcp login gh`";
        let status = ServerStatus {
            name: "gh".to_owned(),
            transport: "http",
            state: ServerState::NeedsLogin,
            protocol_revision: None,
            server_name: None,
            server_version: None,
            counts: Default::default(),
            failure: Some(failure.to_owned()),
            failure_kind: None,
            stderr_tail: Vec::new(),
            catalog_generation: 0,
            warnings: Vec::new(),
            instructions: None,
            required: false,
            deferred: None,
            pid: None,
            connect_attempts: 1,
        };
        let row = server_row(&status, None, &BTreeMap::new());
        assert_eq!(row.state, "needs login");
        assert!(!row.connected);
        assert_eq!(
            row.reason.as_deref(),
            Some("the server needs you to log in")
        );
        assert_eq!(row.page.failure.as_deref(), Some(failure));
        assert!(is_failure(status.state));
    }

    #[test]
    fn short_reason_drops_the_server_and_the_hint() {
        assert_eq!(
            short_reason("MCP broken: command not found: nope — check the command"),
            "command not found: nope"
        );
        assert_eq!(short_reason("plain"), "plain");
    }
}
