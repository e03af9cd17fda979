//! What went wrong with an MCP server or a call to it, as a type: the runtime reports it, the
//! gate's dispatch errors carry it, frontends choose their words and exit codes by it.

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
