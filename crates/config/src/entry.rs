//! Validated server entries: built from the raw structs with `TryFrom`, resolved (variables expanded) at connect time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use sha2::{Digest, Sha256};
use warden_vocab::{CapabilityClass, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, MAX_TIMEOUT};

use crate::error::{Diagnostic, Problem};
use crate::expand::{
    ExpandError, Secret, Segment, VarContext, expand, is_authorization_header, is_env_name,
    is_reference_only, is_scheme_word, is_shareable_header_value, parse_template,
};
use crate::raw::{KnownValues, RawPolicy, RawServer, RawToolFilter, RawToolPolicy, key_path};

/// `seconds` as a timeout, or what is expected instead (0 and more than [`MAX_TIMEOUT`] are
/// refused; there is no "never").
pub fn timeout_seconds(seconds: u64, default: Duration) -> Result<Duration, String> {
    if seconds == 0 {
        Err(format!(
            "a positive number of seconds; 0 is refused: there is no 'never' (the default is {})",
            default.as_secs()
        ))
    } else if seconds > MAX_TIMEOUT.as_secs() {
        Err(format!(
            "at most {} seconds (a week), not {seconds}",
            MAX_TIMEOUT.as_secs()
        ))
    } else {
        Ok(Duration::from_secs(seconds))
    }
}

/// Longest server name.
pub const MAX_SERVER_NAME_LEN: usize = 64;

/// Which file an entry came from, and so how much authority it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The operator's own file (or the file given with `-c`): trusted.
    User,
    /// `.warden/config.toml` in the workspace: input that needs the operator's approval.
    Project,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }
}

impl KnownValues for CapabilityClass {
    const VALUES: &'static [&'static str] = CapabilityClass::NAMES;
    fn from_name(name: &str) -> Option<Self> {
        CapabilityClass::from_name(name)
    }
}

/// How a remote server is authenticated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum AuthMode {
    /// OAuth when the server asks for it (a 401 with `WWW-Authenticate`).
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// Always OAuth.
    #[serde(rename = "oauth")]
    OAuth,
    /// Never OAuth (headers, if any, are sent as configured).
    #[serde(rename = "none")]
    None,
}

impl KnownValues for AuthMode {
    const VALUES: &'static [&'static str] = &["auto", "oauth", "none"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "auto" => Some(Self::Auto),
            "oauth" => Some(Self::OAuth),
            "none" => Some(Self::None),
            _ => None,
        }
    }
}

/// The wire protocol of a remote server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, JsonSchema)]
pub enum RemoteTransport {
    /// Streamable HTTP (the default).
    #[default]
    #[serde(rename = "streamable-http")]
    StreamableHttp,
    /// The legacy HTTP+SSE transport.
    #[serde(rename = "sse")]
    Sse,
}

impl KnownValues for RemoteTransport {
    const VALUES: &'static [&'static str] = &["streamable-http", "sse"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "streamable-http" => Some(Self::StreamableHttp),
            "sse" => Some(Self::Sse),
            _ => None,
        }
    }
}

/// OAuth client settings and pre-provisioned credentials of a remote server; names of
/// environment variables, never their values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthClientConfig {
    pub client_id: Option<String>,
    pub client_secret_env: Option<String>,
    pub redirect_port: Option<u16>,
    pub client_metadata_url: Option<String>,
    pub header_env: Option<String>,
    pub access_token_env: Option<String>,
    pub expires_at_env: Option<String>,
    pub refresh_token_env: Option<String>,
    pub refresh_url: Option<String>,
    pub revoke_url: Option<String>,
}

/// How warden talks to a server, as declared (strings unexpanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: BTreeMap<String, String>,
        auth: AuthMode,
        legacy_sse: bool,
        oauth: OAuthClientConfig,
    },
}

/// `tools = { allow, deny }`: a filter over the tools a server publishes today.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// `None` (absent or empty in the file) lets every tool through.
    pub allow: Option<Vec<String>>,
    /// Never exposed; wins over `allow`.
    pub deny: Vec<String>,
}

impl ToolFilter {
    /// Whether a tool of this name passes the filter.
    pub fn admits(&self, tool: &str) -> bool {
        !self.deny.iter().any(|t| t == tool)
            && self
                .allow
                .as_ref()
                .is_none_or(|allow| allow.iter().any(|t| t == tool))
    }
}

/// `policy`: capability bounds binding the server, including tools not yet published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerPolicy {
    /// `None`: no server-level bound (the host ceiling still applies).
    pub capabilities: Option<Vec<CapabilityClass>>,
    pub tools: BTreeMap<String, ToolPolicy>,
}

/// The bounds of one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    pub capabilities: Option<Vec<CapabilityClass>>,
}

/// One validated `[mcp_servers.NAME]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerEntry {
    pub name: String,
    pub scope: Scope,
    /// The file that declared it.
    pub source: PathBuf,
    pub transport: Transport,
    pub enabled: bool,
    pub required: bool,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
    /// The one-line summary of a deferred server.
    pub defer: Option<String>,
    /// Never deferred automatically (`always_load = true`).
    pub always_load: bool,
    pub tools: ToolFilter,
    pub policy: ServerPolicy,
    /// As declared; see [`ServerEntry::effective_trust_annotations`].
    pub trust_annotations: Option<bool>,
    /// The operator lets this server sample the session's model (`sampling = true`).
    pub sampling: bool,
}

/// Where auth for a server comes from, as `warden mcp list` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthState {
    None,
    #[serde(rename = "oauth")]
    OAuth,
    Headers,
}

impl AuthState {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthState::None => "none",
            AuthState::OAuth => "oauth",
            AuthState::Headers => "headers",
        }
    }
}

/// A transport with every variable expanded, ready to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResolvedTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, Secret>,
        /// Relative directories are joined onto the workspace folder.
        cwd: Option<PathBuf>,
    },
    Http {
        url: String,
        headers: Vec<(String, Secret)>,
        auth: AuthMode,
        legacy_sse: bool,
        oauth: OAuthClientConfig,
    },
}

impl ServerEntry {
    /// Whether annotations may relax checks: as declared, else true for user scope, false for project.
    pub fn effective_trust_annotations(&self) -> bool {
        self.trust_annotations
            .unwrap_or(matches!(self.scope, Scope::User))
    }

    /// Project entries need the operator's approval before they start.
    pub fn needs_trust(&self) -> bool {
        matches!(self.scope, Scope::Project)
    }

    /// `stdio`, `http` or `sse`.
    pub fn transport_kind(&self) -> &'static str {
        match &self.transport {
            Transport::Stdio { .. } => "stdio",
            Transport::Http {
                legacy_sse: true, ..
            } => "sse",
            Transport::Http { .. } => "http",
        }
    }

    /// Where credentials come from: headers (or pre-provisioned tokens), OAuth, or nothing.
    pub fn auth_state(&self) -> AuthState {
        match &self.transport {
            Transport::Stdio { .. } => AuthState::None,
            Transport::Http {
                headers,
                auth,
                oauth,
                ..
            } => {
                if !headers.is_empty()
                    || oauth.header_env.is_some()
                    || oauth.access_token_env.is_some()
                {
                    AuthState::Headers
                } else if *auth == AuthMode::None {
                    AuthState::None
                } else {
                    AuthState::OAuth
                }
            }
        }
    }

    /// The key path of this entry, `mcp_servers.NAME`.
    pub fn key_path(&self) -> String {
        key_path("mcp_servers", &self.name)
    }

    /// SHA-256 (hex) of a canonical serialization of the name and every setting (defaults made
    /// explicit); scope and file are not part of it. An edited entry gets a new hash.
    pub fn trust_hash(&self) -> String {
        let canonical =
            serde_json::to_vec(&("warden.mcp_server.v1", &self.name, RawServer::from(self)))
                .unwrap_or_default();
        hex::encode(Sha256::digest(&canonical))
    }

    /// Expands the variables of command, args, env, url and headers.
    pub fn resolve(&self, vars: &VarContext) -> Result<ResolvedTransport, ExpandError> {
        let base = self.key_path();
        let expand_at = |key: String, text: &str| -> Result<String, ExpandError> {
            expand(text, vars).map_err(|kind| ExpandError {
                file: self.source.clone(),
                key,
                kind,
            })
        };
        match &self.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let command = expand_at(key_path(&base, "command"), command)?;
                let args = args
                    .iter()
                    .enumerate()
                    .map(|(i, arg)| expand_at(format!("{}[{i}]", key_path(&base, "args")), arg))
                    .collect::<Result<Vec<_>, _>>()?;
                let env_path = key_path(&base, "env");
                let env = env
                    .iter()
                    .map(|(k, v)| {
                        Ok((
                            k.clone(),
                            Secret::new(expand_at(key_path(&env_path, k), v)?),
                        ))
                    })
                    .collect::<Result<BTreeMap<_, _>, ExpandError>>()?;
                let cwd = cwd.as_ref().map(|dir| vars.workspace_folder.join(dir));
                Ok(ResolvedTransport::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                })
            }
            Transport::Http {
                url,
                headers,
                auth,
                legacy_sse,
                oauth,
            } => {
                let url = expand_at(key_path(&base, "url"), url)?;
                let headers_path = key_path(&base, "headers");
                let headers = headers
                    .iter()
                    .map(|(k, v)| {
                        Ok((
                            k.clone(),
                            Secret::new(expand_at(key_path(&headers_path, k), v)?),
                        ))
                    })
                    .collect::<Result<Vec<_>, ExpandError>>()?;
                Ok(ResolvedTransport::Http {
                    url,
                    headers,
                    auth: *auth,
                    legacy_sse: *legacy_sse,
                    oauth: oauth.clone(),
                })
            }
        }
    }

    /// Every value that cannot be expanded with `vars` (what `warden config check` reports).
    pub fn check_variables(&self, vars: &VarContext) -> Vec<ExpandError> {
        self.expandable_values()
            .into_iter()
            .filter_map(|(key, text)| {
                expand(text, vars).err().map(|kind| ExpandError {
                    file: self.source.clone(),
                    key,
                    kind,
                })
            })
            .collect()
    }

    /// The values that are expanded, with their key paths.
    fn expandable_values(&self) -> Vec<(String, &str)> {
        let base = self.key_path();
        let mut out = Vec::new();
        match &self.transport {
            Transport::Stdio {
                command, args, env, ..
            } => {
                out.push((key_path(&base, "command"), command.as_str()));
                for (i, arg) in args.iter().enumerate() {
                    out.push((format!("{}[{i}]", key_path(&base, "args")), arg.as_str()));
                }
                let env_path = key_path(&base, "env");
                for (k, v) in env {
                    out.push((key_path(&env_path, k), v.as_str()));
                }
            }
            Transport::Http { url, headers, .. } => {
                out.push((key_path(&base, "url"), url.as_str()));
                let headers_path = key_path(&base, "headers");
                for (k, v) in headers {
                    out.push((key_path(&headers_path, k), v.as_str()));
                }
            }
        }
        out
    }
}

/// Whether `text` is a web origin as a browser sends it: `http` or `https`, `://`, a host
/// (letters, digits, `.`, `-`, or a bracketed IPv6 address) and an optional `:port`; no path.
pub fn is_web_origin(text: &str) -> bool {
    let Some(rest) = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
    else {
        return false;
    };
    let (host, port) = match rest.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((address, "")) => (address, None),
            Some((address, after)) => match after.strip_prefix(':') {
                Some(port) => (address, Some(port)),
                None => return false,
            },
            None => return false,
        },
        None => match rest.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (rest, None),
        },
    };
    let host_ok = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'));
    let port_ok = port.is_none_or(|port| {
        !port.is_empty() && port.len() <= 5 && port.chars().all(|c| c.is_ascii_digit())
    });
    host_ok && port_ok
}

/// Whether `name` may name a server.
/// A server name: letters, digits, `_` and `-`, starting with a letter or digit, and never `__`
/// (public tool names are `mcp__SERVER__TOOL`: a `__` in a server name would let `a` + `b__echo`
/// and `a__b` + `echo` become the same name, and `mcp__a__*` match the other server's tools).
pub fn is_valid_server_name(name: &str) -> bool {
    !name.contains("__")
        && name.len() <= MAX_SERVER_NAME_LEN
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A raw entry with what validation needs to know about where it came from.
#[derive(Debug, Clone)]
pub struct ScopedRawServer {
    pub name: String,
    pub scope: Scope,
    pub source: PathBuf,
    pub raw: RawServer,
}

impl TryFrom<ScopedRawServer> for ServerEntry {
    type Error = Vec<Diagnostic>;

    fn try_from(scoped: ScopedRawServer) -> Result<Self, Self::Error> {
        let ScopedRawServer {
            name,
            scope,
            source,
            raw,
        } = scoped;
        let mut check = Checker {
            file: &source,
            base: key_path("mcp_servers", &name),
            diagnostics: Vec::new(),
        };
        if !is_valid_server_name(&name) {
            check.report(
                "",
                Problem::InvalidValue {
                    expected: format!(
                        "a server name of letters, digits, `_` and `-` (starting with a letter or digit, no `__`, at most {MAX_SERVER_NAME_LEN} characters)"
                    ),
                },
            );
        } else if warden_vocab::HOST_TOOL_SOURCES.contains(&name.as_str()) {
            check.report(
                "",
                Problem::InvalidValue {
                    expected: format!(
                        "another server name: \"{name}\" names warden's own tools in the audit (reserved: {})",
                        warden_vocab::HOST_TOOL_SOURCES.join(", ")
                    ),
                },
            );
        }
        let RawServer {
            command,
            args,
            env,
            cwd,
            url,
            transport,
            headers,
            auth,
            client_id,
            client_secret_env,
            redirect_port,
            client_metadata_url,
            header_env,
            access_token_env,
            expires_at_env,
            refresh_token_env,
            refresh_url,
            revoke_url,
            enabled,
            required,
            startup_timeout_sec,
            tool_timeout_sec,
            defer,
            always_load,
            tools,
            policy,
            trust_annotations,
            sampling,
        } = raw;

        let remote_present: Vec<&'static str> = [
            ("url", url.is_some()),
            ("transport", transport.is_some()),
            ("headers", headers.is_some()),
            ("auth", auth.is_some()),
            ("client_id", client_id.is_some()),
            ("client_secret_env", client_secret_env.is_some()),
            ("redirect_port", redirect_port.is_some()),
            ("client_metadata_url", client_metadata_url.is_some()),
            ("header_env", header_env.is_some()),
            ("access_token_env", access_token_env.is_some()),
            ("expires_at_env", expires_at_env.is_some()),
            ("refresh_token_env", refresh_token_env.is_some()),
            ("refresh_url", refresh_url.is_some()),
            ("revoke_url", revoke_url.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, present)| present.then_some(key))
        .collect();
        let stdio_present: Vec<&'static str> = [
            ("command", command.is_some()),
            ("args", args.is_some()),
            ("env", env.is_some()),
            ("cwd", cwd.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, present)| present.then_some(key))
        .collect();

        let transport = match (command, url) {
            (Some(_), Some(_)) => {
                check.report(
                    "url",
                    Problem::InvalidValue {
                        expected:
                            "either `command` (a stdio server) or `url` (a remote server), not both"
                                .into(),
                    },
                );
                None
            }
            (None, None) => {
                check.report(
                    "",
                    Problem::Missing {
                        expected: "`command` (a stdio server) or `url` (a remote server)",
                    },
                );
                None
            }
            (Some(command), None) => {
                for key in remote_present {
                    check.report(
                        key,
                        Problem::WrongTransport {
                            belongs_to: "remote (url)",
                            entry_is: "stdio (command)",
                        },
                    );
                }
                check.template("command", &command);
                if command.trim().is_empty() {
                    check.report(
                        "command",
                        Problem::InvalidValue {
                            expected: "a program to run, not an empty string".into(),
                        },
                    );
                }
                let args = args.unwrap_or_default();
                for (i, arg) in args.iter().enumerate() {
                    check.template_at(format!("{}[{i}]", key_path(&check.base, "args")), arg);
                }
                let env = env.unwrap_or_default();
                for (key, value) in &env {
                    let here = key_path(&key_path(&check.base, "env"), key);
                    if key.is_empty() || key.contains('=') || key.contains('\0') {
                        check.report_at(
                            here.clone(),
                            Problem::InvalidValue {
                                expected: "an environment variable name (no `=`)".into(),
                            },
                        );
                    }
                    let variable = if is_env_name(key) {
                        key.as_str()
                    } else {
                        "NAME"
                    };
                    let reference = format!("{key} = \"${{env:{variable}}}\"");
                    check.secret_value(here, value, scope, false, reference);
                }
                Some(Transport::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                })
            }
            (None, Some(url)) => {
                for key in stdio_present {
                    check.report(
                        key,
                        Problem::WrongTransport {
                            belongs_to: "stdio (command)",
                            entry_is: "remote (url)",
                        },
                    );
                }
                if check.template("url", &url) {
                    check.url("url", &url, false);
                }
                let headers = headers.unwrap_or_default();
                for (key, value) in &headers {
                    let here = key_path(&key_path(&check.base, "headers"), key);
                    if !is_header_name(key) {
                        check.report_at(
                            here.clone(),
                            Problem::InvalidValue {
                                expected:
                                    "an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)"
                                        .into(),
                            },
                        );
                    }
                    if value.contains(['\r', '\n', '\0']) {
                        check.report_at(
                            here.clone(),
                            Problem::InvalidValue {
                                expected: "a header value on one line".into(),
                            },
                        );
                    }
                    let shareable = is_shareable_header_value(key, value);
                    // `Bearer abc`: keep the scheme, move the credential into a variable.
                    let scheme = value
                        .split_once(' ')
                        .map(|(scheme, _)| scheme)
                        .filter(|scheme| is_authorization_header(key) && is_scheme_word(scheme));
                    let suggested = match scheme {
                        Some(_) => env_name_from(&format!("{name}_TOKEN")),
                        None => env_name_from(&format!("{name}_{key}")),
                    };
                    let reference = match scheme {
                        Some(scheme) => format!("{key} = \"{scheme} ${{env:{suggested}}}\""),
                        None => format!("{key} = \"${{env:{suggested}}}\""),
                    };
                    check.secret_value(here, value, scope, shareable, reference);
                }
                for (key, value) in [
                    ("client_secret_env", &client_secret_env),
                    ("header_env", &header_env),
                    ("access_token_env", &access_token_env),
                    ("expires_at_env", &expires_at_env),
                    ("refresh_token_env", &refresh_token_env),
                ] {
                    if let Some(value) = value
                        && !is_env_name(value)
                    {
                        check.report(
                            key,
                            Problem::InvalidValue {
                                expected: format!(
                                    "the name of an environment variable (like GITHUB_TOKEN), not \"{value}\"; the value is read from the environment when it is used"
                                ),
                            },
                        );
                    }
                }
                if let Some(value) = &client_metadata_url {
                    check.url("client_metadata_url", value, true);
                }
                for (key, value) in [("refresh_url", &refresh_url), ("revoke_url", &revoke_url)] {
                    if let Some(value) = value {
                        check.url(key, value, false);
                    }
                }
                let auth = auth.unwrap_or_default();
                if auth == AuthMode::None {
                    for (key, present) in [
                        ("client_id", client_id.is_some()),
                        ("client_secret_env", client_secret_env.is_some()),
                        ("redirect_port", redirect_port.is_some()),
                        ("client_metadata_url", client_metadata_url.is_some()),
                    ] {
                        if present {
                            check.report(
                                key,
                                Problem::InvalidValue {
                                    expected: "no OAuth client settings when auth = \"none\""
                                        .into(),
                                },
                            );
                        }
                    }
                }
                if client_secret_env.is_some() && client_id.is_none() {
                    check.report(
                        "client_secret_env",
                        Problem::InvalidValue {
                            expected: "`client_id` beside `client_secret_env` (a secret belongs to a pre-registered client)".into(),
                        },
                    );
                }
                Some(Transport::Http {
                    url,
                    headers,
                    auth,
                    legacy_sse: transport == Some(RemoteTransport::Sse),
                    oauth: OAuthClientConfig {
                        client_id,
                        client_secret_env,
                        redirect_port,
                        client_metadata_url,
                        header_env,
                        access_token_env,
                        expires_at_env,
                        refresh_token_env,
                        refresh_url,
                        revoke_url,
                    },
                })
            }
        };

        let mut timeout = |key: &str, seconds: Option<u64>, default: Duration| match seconds
            .map(|seconds| timeout_seconds(seconds, default))
        {
            None => default,
            Some(Ok(timeout)) => timeout,
            Some(Err(expected)) => {
                check.report(key, Problem::InvalidValue { expected });
                default
            }
        };
        let startup_timeout = timeout(
            "startup_timeout_sec",
            startup_timeout_sec,
            DEFAULT_STARTUP_TIMEOUT,
        );
        let tool_timeout = timeout("tool_timeout_sec", tool_timeout_sec, DEFAULT_TOOL_TIMEOUT);
        if let Some(summary) = &defer
            && (summary.trim().is_empty() || summary.contains(['\n', '\r']))
        {
            check.report(
                "defer",
                Problem::InvalidValue {
                    expected: "a one-line, non-empty summary of the server".into(),
                },
            );
        }
        if always_load == Some(true) && defer.is_some() {
            check.report(
                "always_load",
                Problem::InvalidValue {
                    expected: "false, or no `defer`: a server cannot be deferred and always loaded; remove one of the two keys".into(),
                },
            );
        }
        let RawToolFilter { allow, deny } = tools.unwrap_or_default();
        for (list_name, list) in [("allow", &allow), ("deny", &deny)] {
            for (i, tool) in list.iter().flatten().enumerate() {
                if tool.trim().is_empty() {
                    check.report_at(
                        format!(
                            "{}[{i}]",
                            key_path(&key_path(&check.base, "tools"), list_name)
                        ),
                        Problem::InvalidValue {
                            expected: "a tool name, not an empty string".into(),
                        },
                    );
                }
            }
        }
        let tools = ToolFilter {
            allow: allow.filter(|list| !list.is_empty()),
            deny: deny.unwrap_or_default(),
        };
        let RawPolicy {
            capabilities,
            tools: tool_policies,
        } = policy.unwrap_or_default();
        let policy = ServerPolicy {
            capabilities: capabilities.map(dedup),
            tools: tool_policies
                .unwrap_or_default()
                .into_iter()
                .map(|(tool, RawToolPolicy { capabilities })| {
                    (
                        tool,
                        ToolPolicy {
                            capabilities: capabilities.map(dedup),
                        },
                    )
                })
                .collect(),
        };

        match transport {
            Some(transport) if check.diagnostics.is_empty() => Ok(ServerEntry {
                name,
                scope,
                source,
                transport,
                enabled: enabled.unwrap_or(true),
                required: required.unwrap_or(false),
                startup_timeout,
                tool_timeout,
                defer,
                always_load: always_load.unwrap_or(false),
                tools,
                policy,
                trust_annotations,
                sampling: sampling.unwrap_or(false),
            }),
            _ => Err(check.diagnostics),
        }
    }
}

/// An environment variable name made from `text`: upper case, anything else `_`, `NAME` when
/// that is still not a name.
fn env_name_from(text: &str) -> String {
    let name: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if is_env_name(&name) {
        name
    } else {
        "NAME".to_string()
    }
}

fn dedup(list: Vec<CapabilityClass>) -> Vec<CapabilityClass> {
    let mut out: Vec<CapabilityClass> = Vec::with_capacity(list.len());
    for capability in list {
        if !out.contains(&capability) {
            out.push(capability);
        }
    }
    out
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

struct Checker<'a> {
    file: &'a Path,
    base: String,
    diagnostics: Vec<Diagnostic>,
}

impl Checker<'_> {
    fn report(&mut self, key: &str, problem: Problem) {
        let at = if key.is_empty() {
            self.base.clone()
        } else {
            key_path(&self.base, key)
        };
        self.report_at(at, problem);
    }

    fn report_at(&mut self, key: String, problem: Problem) {
        self.diagnostics.push(Diagnostic {
            file: self.file.to_path_buf(),
            key,
            problem,
        });
    }

    /// Checks template syntax; true when well formed.
    fn template(&mut self, key: &str, text: &str) -> bool {
        let at = key_path(&self.base, key);
        self.template_at(at, text)
    }

    fn template_at(&mut self, key: String, text: &str) -> bool {
        match parse_template(text) {
            Ok(_) => true,
            Err(error) => {
                self.report_at(key, Problem::Template(error));
                false
            }
        }
    }

    /// An env or header value: a well-formed template, and in a project file only `${...}`
    /// references (or a value the caller found `shareable`, such as `Bearer ${env:TOKEN}` in an
    /// authorization header); `reference` is the form the refusal suggests.
    fn secret_value(
        &mut self,
        key: String,
        value: &str,
        scope: Scope,
        shareable: bool,
        reference: String,
    ) {
        if !self.template_at(key.clone(), value) {
            return;
        }
        if scope == Scope::Project && !shareable && !is_reference_only(value) {
            self.report_at(key, Problem::LiteralSecret { reference });
        }
    }

    /// An http(s) URL (https only when `https_only`); a URL starting with a variable is checked when expanded.
    fn url(&mut self, key: &str, text: &str, https_only: bool) {
        let Ok(segments) = parse_template(text) else {
            return;
        };
        let (head, more) = match segments.first() {
            Some(Segment::Variable(_)) => return,
            Some(Segment::Literal(literal)) => (literal.as_str(), segments.len() > 1),
            None => ("", false),
        };
        let rest = head.strip_prefix("https://").or_else(|| {
            if https_only {
                None
            } else {
                head.strip_prefix("http://")
            }
        });
        let ok = rest.is_some_and(|rest| more || (!rest.is_empty() && !rest.starts_with('/')));
        if !ok {
            let expected = if https_only {
                format!("an https:// URL, not \"{text}\"")
            } else {
                format!("an http:// or https:// URL, not \"{text}\"")
            };
            self.report(key, Problem::InvalidValue { expected });
        }
    }
}

/// Converts an entry back to its declared form with every default made explicit (for
/// `warden mcp get` and the trust hash).
impl From<&ServerEntry> for RawServer {
    fn from(entry: &ServerEntry) -> Self {
        let ServerEntry {
            name: _,
            scope: _,
            source: _,
            transport,
            enabled,
            required,
            startup_timeout,
            tool_timeout,
            defer,
            always_load,
            tools,
            policy,
            trust_annotations,
            sampling,
        } = entry;
        let mut raw = RawServer {
            enabled: Some(*enabled),
            required: Some(*required),
            startup_timeout_sec: Some(startup_timeout.as_secs()),
            tool_timeout_sec: Some(tool_timeout.as_secs()),
            defer: defer.clone(),
            // Only when set: an absent key keeps the trust hash of existing entries unchanged.
            always_load: always_load.then_some(true),
            tools: Some(RawToolFilter {
                allow: tools.allow.clone(),
                deny: Some(tools.deny.clone()),
            }),
            policy: Some(RawPolicy {
                capabilities: policy.capabilities.clone(),
                tools: Some(
                    policy
                        .tools
                        .iter()
                        .map(|(tool, ToolPolicy { capabilities })| {
                            (
                                tool.clone(),
                                RawToolPolicy {
                                    capabilities: capabilities.clone(),
                                },
                            )
                        })
                        .collect(),
                ),
            }),
            trust_annotations: *trust_annotations,
            // Only when set: an absent key keeps the trust hash of existing entries unchanged.
            sampling: sampling.then_some(true),
            ..RawServer::default()
        };
        match transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                raw.command = Some(command.clone());
                raw.args = Some(args.clone());
                raw.env = Some(env.clone());
                raw.cwd = cwd.clone();
            }
            Transport::Http {
                url,
                headers,
                auth,
                legacy_sse,
                oauth,
            } => {
                let OAuthClientConfig {
                    client_id,
                    client_secret_env,
                    redirect_port,
                    client_metadata_url,
                    header_env,
                    access_token_env,
                    expires_at_env,
                    refresh_token_env,
                    refresh_url,
                    revoke_url,
                } = oauth.clone();
                raw.url = Some(url.clone());
                raw.transport = Some(if *legacy_sse {
                    RemoteTransport::Sse
                } else {
                    RemoteTransport::StreamableHttp
                });
                raw.headers = Some(headers.clone());
                raw.auth = Some(*auth);
                raw.client_id = client_id;
                raw.client_secret_env = client_secret_env;
                raw.redirect_port = redirect_port;
                raw.client_metadata_url = client_metadata_url;
                raw.header_env = header_env;
                raw.access_token_env = access_token_env;
                raw.expires_at_env = expires_at_env;
                raw.refresh_token_env = refresh_token_env;
                raw.refresh_url = refresh_url;
                raw.revoke_url = revoke_url;
            }
        }
        raw
    }
}
