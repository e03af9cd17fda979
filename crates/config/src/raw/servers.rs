//! `[mcp_servers.NAME]` as written (transport, auth, tool filter and per-tool policy), and its walk.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;
use toml::{Table, Value};
use warden_vocab::CapabilityClass;

use super::walk::{Walk, key_path};
use crate::entry::{AuthMode, RemoteTransport};
use crate::error::Problem;

/// One `[mcp_servers.NAME]` entry: a stdio server (`command`) or a remote one (`url`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// stdio: the program to start (expanded: `${env:VAR}`, `${workspaceFolder}`, `${HOME}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// stdio: its arguments (expanded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// stdio: extra environment variables for the child (values expanded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<BTreeMap<String, String>>,
    /// stdio: the child's working directory (not expanded; relative to the workspace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// remote: the server's http(s) URL (expanded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// remote: `streamable-http` (default) or `sse` for legacy HTTP+SSE servers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transport: Option<RemoteTransport>,
    /// remote: HTTP headers sent with every request (values expanded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// remote: `auto` (default: OAuth when the server asks), `oauth` or `none`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthMode>,
    /// remote, OAuth: a pre-registered client id (otherwise the client registers itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// remote, OAuth: the environment variable holding the client secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// remote, OAuth: fixed loopback port for the redirect listener (default: any free port).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub redirect_port: Option<u16>,
    /// remote, OAuth: an https URL of a client ID metadata document (CIMD).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// remote, pre-provisioned: environment variable whose value is sent as the `Authorization` header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub header_env: Option<String>,
    /// remote, pre-provisioned: environment variable holding a bearer access token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_token_env: Option<String>,
    /// remote, pre-provisioned: environment variable holding the token's expiry (Unix seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_env: Option<String>,
    /// remote, pre-provisioned: environment variable holding a refresh token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_token_env: Option<String>,
    /// remote, pre-provisioned: token endpoint used to refresh the access token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refresh_url: Option<String>,
    /// remote, pre-provisioned: token revocation endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoke_url: Option<String>,
    /// Whether warden uses this server (default true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Whether a run fails when this server cannot start (default false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Seconds allowed for start-up and the handshake (default 30; at least 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub startup_timeout_sec: Option<u64>,
    /// Seconds allowed for one tool call (default 1800; at least 1: there is no "never").
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub tool_timeout_sec: Option<u64>,
    /// Load this server's tools on demand; the text is the one-line summary the model sees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defer: Option<String>,
    /// Never defer this server automatically, however large its tools are (default false; cannot be combined with `defer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always_load: Option<bool>,
    /// Filter over the tools the server publishes today.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<RawToolFilter>,
    /// Capability bounds for the server, including tools it has not published yet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<RawPolicy>,
    /// Whether the server's tool annotations may relax checks (default: true for user scope, false for project scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_annotations: Option<bool>,
    /// Answer the server's sampling requests (`sampling/createMessage`) with the session's model (default false: declined).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampling: Option<bool>,
}

impl RawServer {
    pub const KEYS: &'static [&'static str] = &[
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "transport",
        "headers",
        "auth",
        "client_id",
        "client_secret_env",
        "redirect_port",
        "client_metadata_url",
        "header_env",
        "access_token_env",
        "expires_at_env",
        "refresh_token_env",
        "refresh_url",
        "revoke_url",
        "enabled",
        "required",
        "startup_timeout_sec",
        "tool_timeout_sec",
        "defer",
        "always_load",
        "tools",
        "policy",
        "trust_annotations",
        "sampling",
    ];
}

/// `tools = { allow = [...], deny = [...] }`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawToolFilter {
    /// Only these tools are exposed; absent or empty lets every tool through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow: Option<Vec<String>>,
    /// These tools are never exposed (deny wins over allow).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny: Option<Vec<String>>,
}

impl RawToolFilter {
    pub const KEYS: &'static [&'static str] = &["allow", "deny"];
}

/// `policy = { capabilities = [...], tools = { NAME = { capabilities = [...] } } }`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawPolicy {
    /// The capability classes any tool of this server may exercise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<CapabilityClass>>,
    /// Per-tool bounds, by tool name (the tool need not exist yet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<BTreeMap<String, RawToolPolicy>>,
}

impl RawPolicy {
    pub const KEYS: &'static [&'static str] = &["capabilities", "tools"];
}

/// The bounds of one tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawToolPolicy {
    /// The capability classes this tool may exercise (intersected with the server's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<CapabilityClass>>,
}

impl RawToolPolicy {
    pub const KEYS: &'static [&'static str] = &["capabilities"];
}

impl<'a> Walk<'a> {
    /// One server entry; problems are reported, wrongly typed keys left out.
    pub(crate) fn server(&mut self, t: &Table, p: &str) -> RawServer {
        self.unknown_keys(t, p, RawServer::KEYS);
        const SECONDS: &str = "a whole number of seconds";
        RawServer {
            command: self.string(t, p, "command"),
            args: self.strings(t, p, "args"),
            env: self.string_map(t, p, "env"),
            cwd: self.string(t, p, "cwd"),
            url: self.string(t, p, "url"),
            transport: self.known(t, p, "transport"),
            headers: self.string_map(t, p, "headers"),
            auth: self.known(t, p, "auth"),
            client_id: self.string(t, p, "client_id"),
            client_secret_env: self.string(t, p, "client_secret_env"),
            redirect_port: self
                .unsigned(t, p, "redirect_port", "a port number (1-65535)")
                .and_then(|port| self.port(key_path(p, "redirect_port"), port)),
            client_metadata_url: self.string(t, p, "client_metadata_url"),
            header_env: self.string(t, p, "header_env"),
            access_token_env: self.string(t, p, "access_token_env"),
            expires_at_env: self.string(t, p, "expires_at_env"),
            refresh_token_env: self.string(t, p, "refresh_token_env"),
            refresh_url: self.string(t, p, "refresh_url"),
            revoke_url: self.string(t, p, "revoke_url"),
            enabled: self.boolean(t, p, "enabled"),
            required: self.boolean(t, p, "required"),
            startup_timeout_sec: self.unsigned(t, p, "startup_timeout_sec", SECONDS),
            tool_timeout_sec: self.unsigned(t, p, "tool_timeout_sec", SECONDS),
            defer: self.string(t, p, "defer"),
            always_load: self.boolean(t, p, "always_load"),
            tools: self.table(t, p, "tools").map(|inner| {
                let here = key_path(p, "tools");
                self.unknown_keys(inner, &here, RawToolFilter::KEYS);
                RawToolFilter {
                    allow: self.strings(inner, &here, "allow"),
                    deny: self.strings(inner, &here, "deny"),
                }
            }),
            policy: self
                .table(t, p, "policy")
                .map(|inner| self.policy(inner, p)),
            trust_annotations: self.boolean(t, p, "trust_annotations"),
            sampling: self.boolean(t, p, "sampling"),
        }
    }

    pub(super) fn port(&mut self, here: String, port: u64) -> Option<u16> {
        match u16::try_from(port) {
            Ok(port) if port > 0 => Some(port),
            _ => {
                self.report(
                    here,
                    Problem::InvalidValue {
                        expected: format!("a port number (1-65535), not {port}"),
                    },
                );
                None
            }
        }
    }

    pub(super) fn policy(&mut self, inner: &Table, server_path: &str) -> RawPolicy {
        let here = key_path(server_path, "policy");
        self.unknown_keys(inner, &here, RawPolicy::KEYS);
        let capabilities = self.known_list(inner, &here, "capabilities");
        let tools = self.table(inner, &here, "tools").map(|tools| {
            let tools_path = key_path(&here, "tools");
            let mut out = BTreeMap::new();
            for (tool, value) in tools {
                let tool_path = key_path(&tools_path, tool);
                match value {
                    Value::Table(tool_table) => {
                        self.unknown_keys(tool_table, &tool_path, RawToolPolicy::KEYS);
                        let capabilities = self.known_list(tool_table, &tool_path, "capabilities");
                        out.insert(tool.clone(), RawToolPolicy { capabilities });
                    }
                    other => {
                        self.wrong_type(tool_path, "a table like { capabilities = [...] }", other)
                    }
                }
            }
            out
        });
        RawPolicy {
            capabilities,
            tools,
        }
    }
}
