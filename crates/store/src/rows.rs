//! The rows the service's storage contract reads and writes (tenants' keys and principals, sessions and their events, approvals, client calls, skills, servers, secrets, prompts), the roles a key may hold, and the typed error every backend answers with.

use serde::Serialize;

/// What a key may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A tenant's application or person: sessions, messages, client calls and its own events.
    /// (Keys made before roles existed, stored as `tenant`, read as callers.)
    Caller,
    /// A caller that also decides the tenant's approvals (never of a run it started, unless
    /// `[service] self_approval` says so).
    Approver,
    /// The operator: the operator endpoints (tenants, keys, status), across tenants.
    Operator,
    /// A tenant's administrator: what an approver reaches, and the tenant's servers, skills,
    /// knowledge, prompts and profiles.
    Admin,
    /// A widget's short-lived session token: one agent profile and one caller of one tenant;
    /// it reaches only the sessions it created (see [`WidgetScope`]).
    Widget,
}

impl Role {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Caller => "caller",
            Self::Approver => "approver",
            Self::Operator => "operator",
            Self::Admin => "admin",
            Self::Widget => "widget",
        }
    }

    /// From its stored name (an unknown name, or `tenant` of a key made before roles, is the
    /// least: a caller).
    pub fn parse(text: &str) -> Self {
        match text {
            "operator" => Self::Operator,
            "admin" => Self::Admin,
            "approver" => Self::Approver,
            _ => Self::Caller,
        }
    }

    /// Whether the key may decide its tenant's approvals.
    pub fn decides_approvals(self) -> bool {
        matches!(self, Self::Approver | Self::Admin | Self::Operator)
    }

    /// Whether the key administers its tenant (servers, skills, knowledge, prompts, profiles).
    pub fn administers(self) -> bool {
        matches!(self, Self::Admin | Self::Operator)
    }
}

/// Who a request is: the tenant and caller its key resolved to.
#[derive(Clone, PartialEq, Eq)]
pub struct Principal {
    pub tenant: String,
    pub caller: String,
    pub role: Role,
    /// The key's id (`key_…`) or the widget token's (`wid_…`): quotas count per key, and a
    /// key never decides an approval of a run it started.
    pub key: String,
    /// For a widget token (`Role::Widget`): the token and the agent profile it is scoped to.
    pub widget: Option<WidgetScope>,
}

/// What a widget token reaches: sessions of one agent profile, and only those it created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WidgetScope {
    /// The token's id (`wid_…`): the sessions it created are recorded under it.
    pub token: String,
    /// The agent profile its sessions are opened from.
    pub agent: String,
}

/// A newly minted widget token: the secret (shown once, stored hashed) and when it expires.
pub struct IssuedWidgetToken {
    pub id: String,
    pub secret: String,
    /// Seconds since the Unix epoch.
    pub expires_at: u64,
}

impl std::fmt::Debug for IssuedWidgetToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedWidgetToken")
            .field("id", &self.id)
            .field("secret", &"[redacted]")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

impl std::fmt::Debug for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Principal")
            .field("tenant", &self.tenant)
            .field("caller", &self.caller)
            .field("role", &self.role)
            .field("key", &self.key)
            .field("widget", &self.widget)
            .finish()
    }
}

/// A newly made API key: its id (to revoke it) and the secret, shown once.
pub struct IssuedKey {
    pub id: String,
    pub secret: String,
}

impl std::fmt::Debug for IssuedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedKey")
            .field("id", &self.id)
            .field("secret", &"[redacted]")
            .finish()
    }
}

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Created, or its last run finished: ready for a message.
    Idle,
    Running,
    /// Its last run failed (the events say why).
    Failed,
    /// The service stopped while a run was going: the run is lost, the messages up to it kept.
    Interrupted,
}

impl SessionState {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Running => "running",
            Self::Failed => "failed",
            Self::Interrupted => "interrupted",
        }
    }

    /// From its stored name.
    pub fn parse(text: &str) -> Self {
        match text {
            "running" => Self::Running,
            "failed" => Self::Failed,
            "interrupted" => Self::Interrupted,
            _ => Self::Idle,
        }
    }
}

/// A session as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SessionRow {
    pub id: String,
    pub agent: Option<String>,
    pub state: SessionState,
    /// Seconds since the Unix epoch.
    pub created_at: u64,
    pub updated_at: u64,
}

/// One stored event of a session; `seq` is its cursor (1, 2, …).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct EventRow {
    pub seq: u64,
    pub at: u64,
    pub event: serde_json::Value,
}

/// A call waiting for a person's decision, as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ApprovalRow {
    pub id: String,
    pub session: String,
    /// The model-visible tool name.
    pub tool: String,
    pub arguments: serde_json::Value,
    /// The capability classes the gate derived (`read`, `write`, `external`, …).
    pub classes: Vec<String>,
    /// Who made the call (the surface and caller the gate saw).
    pub caller: Option<String>,
    /// Why the gate asks.
    pub reason: String,
    /// `pending`, `allowed_once`, `allowed_for_session`, `denied`, or `expired`.
    pub state: String,
    /// Who decided, once decided.
    pub decided_by: Option<String>,
    pub created_at: u64,
    /// The key (or widget token) whose message started the run: it never decides this
    /// approval unless `[service] self_approval` allows it. Never shown.
    #[serde(skip)]
    #[schemars(skip)]
    pub requested_by: Option<String>,
}

/// A client-side tool call waiting for the caller's answer, as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ClientCallRow {
    pub id: String,
    pub session: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    /// `pending` or `answered`.
    pub state: String,
    /// The caller's answer once given: `{"result": …}` or `{"error": "…"}`.
    pub answer: Option<serde_json::Value>,
    pub created_at: u64,
}

/// A tenant's skill, as the API lists it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct SkillRow {
    pub name: String,
    pub description: String,
    pub updated_at: u64,
}

/// A remote MCP server a tenant admin registered: its URL and headers whose values only name
/// environment variables (`${env:NAME}`), read when a session opens.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ServerRow {
    pub name: String,
    pub url: String,
    pub headers: std::collections::BTreeMap<String, String>,
    pub created_at: u64,
}

impl ServerRow {
    /// Whether it authenticates with its own `Authorization` header (then never with OAuth).
    pub fn has_authorization_header(&self) -> bool {
        self.headers
            .keys()
            .any(|header| header.eq_ignore_ascii_case("authorization"))
    }
}

/// A secret the operator keeps for a tenant, as listed: its name and when it was set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SecretRow {
    pub name: String,
    pub updated_at: u64,
}

/// A prompt snapshot: an MCP prompt an admin copied in from a server, stored as the messages
/// it gave; a session's message can be one (the prompt is never pulled live).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct PromptRow {
    pub name: String,
    /// The server and prompt it was copied from, and the arguments it was got with.
    pub server: String,
    pub prompt: String,
    pub arguments: std::collections::BTreeMap<String, String>,
    pub description: Option<String>,
    /// The prompt's messages: `user` or `assistant` text, in order.
    pub messages: Vec<PromptMessage>,
    /// Who copied it in.
    pub copied_by: String,
    pub created_at: u64,
}

/// One message of a prompt snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    pub text: String,
}

/// A tenant as the operator sees it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TenantRow {
    pub name: String,
    pub created_at: u64,
    /// Live (unrevoked) API keys.
    pub keys: u64,
    pub sessions: u64,
}

/// An API key as the operator sees it (never its secret).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct KeyRow {
    pub id: String,
    pub caller: String,
    pub role: Role,
    pub created_at: u64,
    pub revoked_at: Option<u64>,
}

/// Why storage failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the service database failed: {0}")]
    Database(#[from] rusqlite::Error),
    #[error("the service database holds a bad value: {0}")]
    Corrupt(String),
    #[error("warden could not make a random id: {0}")]
    Random(String),
    /// A backend other than SQLite failed (its message, never a password).
    #[error("the service database failed: {0}")]
    Backend(String),
    /// The database was made by a newer warden: opening it would risk its data.
    #[error(
        "the service database has schema version {found}, newer than version {known} that this warden knows: run a newer warden against it"
    )]
    NewerSchema { found: i64, known: i64 },
}

/// A run's claim on its session's lease: the session, and the run holding it (its instance and
/// run, as [`ServiceStorage::begin_run`](crate::ServiceStorage::begin_run) was told).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHold {
    pub session: String,
    pub holder: String,
}
