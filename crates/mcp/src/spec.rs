//! Launch specifications the runtime owns: how to reach one MCP server, its deadlines and its tool filter.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use warden_vocab::{DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT};

/// A string that never prints: its `Debug` and `Display` show `[redacted]`. warden's one
/// secret type, [`warden_config::Secret`], under the name this crate has always used.
pub use warden_config::Secret as SecretString;

/// How the runtime reaches a server. `Debug` never shows env values or header values.
#[derive(Clone)]
pub enum TransportSpec {
    /// A child process speaking MCP over stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to the fixed safe environment (HOME, LOGNAME, PATH, SHELL, TERM, USER).
        env: BTreeMap<String, String>,
        /// Working folder; the workspace root when absent.
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP endpoint.
    StreamableHttp {
        url: String,
        /// Headers sent with every request (already expanded by the caller).
        headers: Vec<(String, SecretString)>,
        /// Where OAuth credentials come from, and whether a 401 may lead to a login.
        auth: HttpAuth,
    },
    /// The legacy HTTP+SSE transport (2024-11-05); only when the entry asks for it.
    LegacySse {
        url: String,
        headers: Vec<(String, SecretString)>,
    },
}

impl fmt::Debug for TransportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportSpec::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let env: BTreeMap<&str, &str> =
                    env.keys().map(|key| (key.as_str(), "[redacted]")).collect();
                f.debug_struct("Stdio")
                    .field("command", command)
                    .field("args", args)
                    .field("env", &env)
                    .field("cwd", cwd)
                    .finish()
            }
            TransportSpec::StreamableHttp { url, headers, auth } => f
                .debug_struct("StreamableHttp")
                .field("url", url)
                .field("headers", headers)
                .field("auth", auth)
                .finish(),
            TransportSpec::LegacySse { url, headers } => f
                .debug_struct("LegacySse")
                .field("url", url)
                .field("headers", headers)
                .finish(),
        }
    }
}

impl TransportSpec {
    /// `stdio`, `http` or `sse`, for status lines.
    pub fn kind(&self) -> &'static str {
        match self {
            TransportSpec::Stdio { .. } => "stdio",
            TransportSpec::StreamableHttp { .. } => "http",
            TransportSpec::LegacySse { .. } => "sse",
        }
    }
}

/// How a Streamable HTTP server is authorized. `Debug` never shows a secret.
#[derive(Clone, Debug, Default)]
pub enum HttpAuth {
    /// Nothing wired up (a spec built by hand): requests go out with the configured headers
    /// only, and a 401 is reported as "needs login".
    #[default]
    Unconfigured,
    /// Never OAuth (`auth = "none"`, or the entry carries its own Authorization header): a 401
    /// is a plain connection failure, explained by `reason`.
    Forbidden { reason: String },
    /// OAuth through the server's token store: stored tokens are sent and refreshed (before
    /// expiry, and once on a 401); without them a 401 means "needs login".
    OAuth(warden_oauth::OAuthSettings),
    /// Pre-provisioned tokens named by environment variables (read at each connect), refreshed
    /// at the entry's `refresh_url`.
    Provisioned(warden_oauth::ProvisionedEnv),
}

/// Exact-name tool filter: `allow` (when present) keeps only the listed tools, `deny` removes
/// tools; [`ToolFilter::admits`] tells whether a raw tool name passes. The config's own type.
pub use warden_config::ToolFilter;

/// Default deadline of one catalogue, resource or prompt request.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Everything the runtime needs to start, supervise and filter one server.
///
/// Build one with [`ServerSpec::stdio`] or [`ServerSpec::http`] and the `with_*` methods,
/// or a struct literal.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    pub name: String,
    pub transport: TransportSpec,
    /// Deadline for spawning/connecting plus the protocol handshake.
    pub startup_timeout: Duration,
    /// Deadline of one `tools/call`.
    pub tool_timeout: Duration,
    /// Deadline of other requests (lists, resource reads, prompts).
    pub request_timeout: Duration,
    /// Connect eagerly; a failure stops start-up.
    pub required: bool,
    /// Deferred loading: the one-line summary shown instead of the tools; stays unopened until used.
    pub deferred: Option<String>,
    pub tool_filter: ToolFilter,
    /// The operator enabled sampling for this server: its `sampling/createMessage` requests go
    /// to the session's model (when a frontend installed a handler); otherwise they are declined.
    pub sampling: bool,
    /// A server a tenant registered (HTTP transports): every connection its client makes, and
    /// every OAuth request for it, goes through this guard — public addresses only unless the
    /// operator allows more; the URL's literal host is checked before connecting. `None` (the
    /// default) for the operator's own servers.
    pub egress: Option<warden_net::EgressGuard>,
}

impl ServerSpec {
    /// A stdio server with default deadlines.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self::with_transport(
            name,
            TransportSpec::Stdio {
                command: command.into(),
                args: Vec::new(),
                env: BTreeMap::new(),
                cwd: None,
            },
        )
    }

    /// A Streamable HTTP server with default deadlines.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self::with_transport(
            name,
            TransportSpec::StreamableHttp {
                url: url.into(),
                headers: Vec::new(),
                auth: HttpAuth::default(),
            },
        )
    }

    /// A server reached through `transport`, with default deadlines.
    pub fn with_transport(name: impl Into<String>, transport: TransportSpec) -> Self {
        Self {
            name: name.into(),
            transport,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            required: false,
            deferred: None,
            tool_filter: ToolFilter::default(),
            sampling: false,
            egress: None,
        }
    }

    /// Sets the stdio arguments (ignored for other transports).
    pub fn with_args<I, S>(mut self, new_args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        if let TransportSpec::Stdio { args, .. } = &mut self.transport {
            *args = new_args.into_iter().map(Into::into).collect();
        }
        self
    }

    /// Adds one stdio environment variable (ignored for other transports).
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let TransportSpec::Stdio { env, .. } = &mut self.transport {
            env.insert(key.into(), value.into());
        }
        self
    }

    /// Sets the stdio working folder (ignored for other transports).
    pub fn with_cwd(mut self, folder: impl Into<PathBuf>) -> Self {
        if let TransportSpec::Stdio { cwd, .. } = &mut self.transport {
            *cwd = Some(folder.into());
        }
        self
    }

    /// Sets how a Streamable HTTP server is authorized (ignored for other transports).
    pub fn with_auth(mut self, new_auth: HttpAuth) -> Self {
        if let TransportSpec::StreamableHttp { auth, .. } = &mut self.transport {
            *auth = new_auth;
        }
        self
    }

    /// Adds one HTTP header (ignored for stdio).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<SecretString>) -> Self {
        match &mut self.transport {
            TransportSpec::StreamableHttp { headers, .. }
            | TransportSpec::LegacySse { headers, .. } => {
                headers.push((name.into(), value.into()));
            }
            TransportSpec::Stdio { .. } => {}
        }
        self
    }

    pub fn with_startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    pub fn with_tool_timeout(mut self, timeout: Duration) -> Self {
        self.tool_timeout = timeout;
        self
    }

    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    pub fn required(mut self, required: bool) -> Self {
        self.required = required;
        self
    }

    pub fn deferred(mut self, summary: impl Into<String>) -> Self {
        self.deferred = Some(summary.into());
        self
    }

    pub fn with_tool_filter(mut self, filter: ToolFilter) -> Self {
        self.tool_filter = filter;
        self
    }

    /// Lets this server's sampling requests reach the session's model.
    pub fn with_sampling(mut self, enabled: bool) -> Self {
        self.sampling = enabled;
        self
    }

    /// Puts this server under `guard` (a tenant's server): see [`ServerSpec::egress`]. Its OAuth
    /// requests use the guard too, whether or not its [`HttpAuth::OAuth`] settings carry it.
    pub fn with_egress_guard(mut self, guard: warden_net::EgressGuard) -> Self {
        self.egress = Some(guard);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_secrets() {
        let stdio = ServerSpec::stdio("db", "db-server").with_env("DB_PASSWORD", "hunter2");
        let http = ServerSpec::http("gh", "https://example.test/mcp")
            .with_header("Authorization", "Bearer ghp_secret");
        let printed = format!("{stdio:?} {http:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(!printed.contains("ghp_secret"), "{printed}");
        assert!(printed.contains("DB_PASSWORD"), "{printed}");
        assert!(printed.contains("Authorization"), "{printed}");
    }
}
