//! The bridge's wire format: versioned JSON requests and answers, the environment variable names
//! exported to the bash tool, and the request size limit.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The protocol version the handshake reports; a client refuses any other.
pub const PROTOCOL_VERSION: u32 = 1;
/// The bridge's address, exported to the bash tool after a successful handshake: a loopback
/// `http://127.0.0.1:PORT` URL, or `unix:/path/to/bridge.sock` (see [`UNIX_URL_PREFIX`]).
pub const URL_VAR: &str = "WARDEN_BRIDGE_URL";
/// A [`URL_VAR`] value of the form `unix:/absolute/path` names a Unix socket (the bridge's
/// `unix` mode); otherwise it is a loopback `http://` URL.
pub const UNIX_URL_PREFIX: &str = "unix:";
/// The bridge's bearer token, exported beside [`URL_VAR`].
pub const TOKEN_VAR: &str = "WARDEN_BRIDGE_TOKEN";
/// Inherited variables with this prefix are removed from the bash tool's environment.
pub const ENV_PREFIX: &str = "WARDEN_BRIDGE_";
/// Larger request bodies are refused with 413.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// `GET /v1/handshake`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handshake {
    pub protocol: u32,
    pub session: String,
}

/// One configured server, as `warden tool` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerRow {
    pub name: String,
    /// `stdio`, `http`, …; `None` for a server this session does not start.
    pub transport: Option<String>,
    pub state: String,
    /// The one-line summary of a deferred server.
    pub deferred: Option<String>,
    /// Why an idle server does not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One tool the gate shows, with everything its schema view needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolView {
    /// The server's own name for it.
    pub name: String,
    pub public_name: String,
    /// Capability classes, e.g. `read_only`.
    pub classes: String,
    pub description: Option<String>,
    pub annotations: Value,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
}

/// `POST /v1/call`: one tool call through the gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRequest {
    pub server: String,
    pub tool: String,
    pub arguments: Value,
}

/// The gate's answer to one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallView {
    pub public_name: String,
    pub decision: String,
    pub layer: String,
    pub reason: Option<String>,
    pub is_error: bool,
    /// What the model would read.
    pub text: String,
    /// The structured content blocks, when the tool returned any.
    pub result: Option<Value>,
}

impl CallView {
    /// Allowed and not an error result.
    pub fn succeeded(&self) -> bool {
        self.decision == "allowed" && !self.is_error
    }
}

/// `POST /v1/search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchRequest {
    pub query: String,
    pub limit: usize,
}

/// Ranked hits over every server's tools, deferred ones included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchView {
    /// The hits as `warden tool search --json` prints them.
    pub hits: Value,
    /// Each hit as one text entry.
    pub rendered: Vec<String>,
    /// One line per server that could not be searched.
    pub failures: Vec<String>,
}

/// `POST /v1/resources/{list,templates,read}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRequest {
    #[serde(default)]
    pub server: Option<String>,
    #[serde(default)]
    pub uri: Option<String>,
}

/// Any refusal or failure: a non-2xx status with this body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorView {
    pub error: String,
    /// The last stderr lines of a failed stdio server.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stderr_tail: Vec<String>,
}
