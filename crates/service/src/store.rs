//! The service's storage contract and its embedded SQLite backend: tenants, API keys (stored hashed), sessions with their conversation, and each session's events in order. Every function that reads or writes a tenant's rows takes the tenant: tenancy is part of every query, not a filter at the edge.

use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

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
/// run, as [`ServiceStorage::begin_run`] was told).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunHold {
    pub session: String,
    pub holder: String,
}

/// The schema version this warden's backends write (each backend's migrations end at it).
pub const SCHEMA_VERSION: i64 = 4;

/// The storage every instance of the service shares. SQLite is the embedded backend; a
/// PostgreSQL one implements the same contract for several instances.
pub trait ServiceStorage: Send + Sync + 'static {
    /// How the instances sharing this store signal each other.
    fn signals(&self) -> &dyn crate::signals::ServiceSignals;
    /// Whether [`ServiceStorage::signals`] reach every instance that shares the store (an
    /// embedded store's in-process signals reach all of its one process's instances; a shared
    /// store's reach only as far as it carries them).
    fn signals_reach_every_instance(&self) -> bool {
        true
    }
    /// Makes a tenant (named `name`, which is also its id) unless it exists.
    fn ensure_tenant(&self, name: &str) -> Result<(), StoreError>;
    /// Makes an API key for `caller` of `tenant`; the secret is returned once and stored hashed.
    fn issue_key(&self, tenant: &str, caller: &str, role: Role) -> Result<IssuedKey, StoreError>;
    /// Revokes a key by id; whether there was one.
    fn revoke_key(&self, id: &str) -> Result<bool, StoreError>;
    /// The principal of a presented secret: an API key, or a widget token before it expires
    /// (`None`: unknown, revoked or expired).
    fn resolve_key(&self, secret: &str) -> Result<Option<Principal>, StoreError>;
    /// Mints a widget token for `caller` of `tenant`, scoped to the agent profile `agent`, that
    /// expires `ttl_sec` from now; the secret is returned once and stored hashed.
    fn issue_widget_token(
        &self,
        tenant: &str,
        agent: &str,
        caller: &str,
        ttl_sec: u64,
    ) -> Result<IssuedWidgetToken, StoreError>;
    /// Records that the widget token `token` created `session` (an API key's id too: the
    /// sessions a key created count against its `sessions_per_key` quota).
    fn add_widget_session(
        &self,
        tenant: &str,
        token: &str,
        session: &str,
    ) -> Result<(), StoreError>;
    /// Whether the widget token `token` created `session` (of `tenant`).
    fn widget_owns_session(
        &self,
        tenant: &str,
        token: &str,
        session: &str,
    ) -> Result<bool, StoreError>;
    fn create_session(&self, tenant: &str, agent: Option<&str>) -> Result<SessionRow, StoreError>;
    fn list_sessions(&self, tenant: &str) -> Result<Vec<SessionRow>, StoreError>;
    /// How many sessions `tenant` keeps; with `creator`, only those recorded as created by
    /// that key or widget token ([`ServiceStorage::add_widget_session`]). The quotas count
    /// with it; a backend should answer with one query.
    fn count_sessions(&self, tenant: &str, creator: Option<&str>) -> Result<u64, StoreError> {
        let sessions = self.list_sessions(tenant)?;
        let mut count = 0;
        for session in &sessions {
            if match creator {
                None => true,
                Some(creator) => self.widget_owns_session(tenant, creator, &session.id)?,
            } {
                count += 1;
            }
        }
        Ok(count)
    }
    fn session(&self, tenant: &str, id: &str) -> Result<Option<SessionRow>, StoreError>;
    /// Deletes a session with its events; whether there was one.
    fn delete_session(&self, tenant: &str, id: &str) -> Result<bool, StoreError>;
    /// Moves a session to `to` only from `from` (compare-and-set); whether it moved.
    fn transition(
        &self,
        tenant: &str,
        id: &str,
        from: &[SessionState],
        to: SessionState,
    ) -> Result<bool, StoreError>;
    /// The session's conversation (a JSON array of messages).
    fn messages(&self, tenant: &str, id: &str) -> Result<serde_json::Value, StoreError>;
    /// Stores the next event of a session; returns its cursor.
    fn append_event(
        &self,
        tenant: &str,
        id: &str,
        event: &serde_json::Value,
    ) -> Result<u64, StoreError>;
    /// The events after cursor `after`, at most `limit`, in order.
    fn events_after(
        &self,
        tenant: &str,
        id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<EventRow>, StoreError>;
    /// At start: every session left running by a stopped instance becomes interrupted, with an
    /// event saying so, and its pending approvals expire; returns how many sessions.
    fn interrupt_running(&self) -> Result<usize, StoreError>;
    /// Whether several instances share this store: their runs are then leased, and each
    /// instance interrupts the runs whose lease lapsed. An embedded store has one instance,
    /// which interrupts every running session when it starts instead.
    fn is_shared(&self) -> bool {
        false
    }
    /// Starts a run: moves the session to running from one of `from` (compare-and-set) and
    /// leases it to `holder` (one run of one instance) until `until` (seconds since the epoch),
    /// in one step; whether it moved. The run's own writes then name `holder`, and are refused
    /// once the lease is no longer its own (fencing).
    fn begin_run(
        &self,
        tenant: &str,
        id: &str,
        from: &[SessionState],
        holder: &str,
        until: u64,
    ) -> Result<bool, StoreError>;
    /// Renews the leases of `runs` (session, holder) until `until`, each only while its holder
    /// still holds it; returns the sessions renewed. A run missing from the answer lost its
    /// lease (its instance was taken for dead and the session interrupted) and must stop.
    fn renew_runs(&self, runs: &[RunHold], until: u64) -> Result<Vec<String>, StoreError>;
    /// Stores the next event of a run's session while `holder` holds its lease; `None` when it
    /// does not (nothing is stored).
    fn append_run_event(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        event: &serde_json::Value,
    ) -> Result<Option<u64>, StoreError>;
    /// Keeps a run's conversation while `holder` holds the session's lease; whether it did.
    fn save_run_messages(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        messages: &serde_json::Value,
    ) -> Result<bool, StoreError>;
    /// Ends a run: moves its session from running to `to` and gives the lease back, only while
    /// `holder` holds it; whether it did.
    fn end_run(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        to: SessionState,
    ) -> Result<bool, StoreError>;
    /// Marks interrupted, with a `run_interrupted` event and their pending approvals expired,
    /// the running sessions whose instance stopped renewing: a lease that lapsed before `now`,
    /// or none at all for `grace` seconds after the session last changed. Returns how many.
    fn interrupt_lapsed(&self, now: u64, grace: u64) -> Result<usize, StoreError>;
    /// Creates or replaces the tenant's skill `name` (its SKILL.md text, already validated);
    /// whether it was new.
    fn put_skill(
        &self,
        tenant: &str,
        name: &str,
        description: &str,
        text: &str,
    ) -> Result<bool, StoreError>;
    /// The tenant's skills, by name.
    fn list_skills(&self, tenant: &str) -> Result<Vec<SkillRow>, StoreError>;
    /// The SKILL.md text of the tenant's skill `name`.
    fn skill_text(&self, tenant: &str, name: &str) -> Result<Option<String>, StoreError>;
    /// Deletes the tenant's skill; whether there was one.
    fn delete_skill(&self, tenant: &str, name: &str) -> Result<bool, StoreError>;
    /// Registers (or replaces) a tenant's remote server; whether it was new.
    fn put_server(&self, tenant: &str, server: &ServerRow) -> Result<bool, StoreError>;
    /// The tenant's registered servers, by name.
    fn list_servers(&self, tenant: &str) -> Result<Vec<ServerRow>, StoreError>;
    /// Removes a registered server; whether there was one.
    fn delete_server(&self, tenant: &str, name: &str) -> Result<bool, StoreError>;
    /// Stores a secret the operator keeps for `tenant`'s server headers (replacing one of that
    /// name); whether it is new. Never returned by the API.
    fn put_tenant_secret(&self, tenant: &str, name: &str, value: &str) -> Result<bool, StoreError>;
    /// The names of `tenant`'s secrets with when each was set, by name (never a value).
    fn tenant_secret_names(&self, tenant: &str) -> Result<Vec<SecretRow>, StoreError>;
    /// The value of `tenant`'s secret `name`, read when a session connects its servers.
    fn tenant_secret(&self, tenant: &str, name: &str) -> Result<Option<String>, StoreError>;
    /// Removes one; whether there was one.
    fn delete_tenant_secret(&self, tenant: &str, name: &str) -> Result<bool, StoreError>;
    /// Stores a prompt snapshot (replacing one of that name); whether it is new.
    fn put_prompt(&self, tenant: &str, prompt: &PromptRow) -> Result<bool, StoreError>;
    fn list_prompts(&self, tenant: &str) -> Result<Vec<PromptRow>, StoreError>;
    fn prompt(&self, tenant: &str, name: &str) -> Result<Option<PromptRow>, StoreError>;
    /// Whether there was one.
    fn delete_prompt(&self, tenant: &str, name: &str) -> Result<bool, StoreError>;
    /// Every tenant, with its live keys and sessions counted (the operator's view).
    fn list_tenants(&self) -> Result<Vec<TenantRow>, StoreError>;
    /// The keys of `tenant`, revoked ones too, newest first (never a secret).
    fn list_keys(&self, tenant: &str) -> Result<Vec<KeyRow>, StoreError>;
    /// Records a client-side tool call waiting for the caller (state `pending`).
    fn add_client_call(&self, tenant: &str, call: &ClientCallRow) -> Result<(), StoreError>;
    /// Every client call of the session, oldest first.
    fn client_calls(&self, tenant: &str, session: &str) -> Result<Vec<ClientCallRow>, StoreError>;
    /// The session's client calls still pending, oldest first.
    fn pending_client_calls(
        &self,
        tenant: &str,
        session: &str,
    ) -> Result<Vec<ClientCallRow>, StoreError>;
    fn client_call(
        &self,
        tenant: &str,
        session: &str,
        id: &str,
    ) -> Result<Option<ClientCallRow>, StoreError>;
    /// Records the caller's answer to a pending call; whether it was pending (an answer is
    /// taken once).
    fn answer_client_call(
        &self,
        tenant: &str,
        session: &str,
        id: &str,
        answer: &serde_json::Value,
    ) -> Result<bool, StoreError>;
    /// Records a call waiting for approval (state `pending`).
    fn add_approval(&self, tenant: &str, approval: &ApprovalRow) -> Result<(), StoreError>;
    /// The tenant's approvals still pending, oldest first.
    fn pending_approvals(&self, tenant: &str) -> Result<Vec<ApprovalRow>, StoreError>;
    fn approval(&self, tenant: &str, id: &str) -> Result<Option<ApprovalRow>, StoreError>;
    /// The tools a person allowed for the rest of `session` (its approvals decided
    /// `allowed_for_session`), by public name.
    fn allowed_for_session(&self, tenant: &str, session: &str) -> Result<Vec<String>, StoreError>;
    /// Records the decision on a pending approval; whether it was pending.
    fn decide_approval(
        &self,
        tenant: &str,
        id: &str,
        state: &str,
        decided_by: &str,
    ) -> Result<bool, StoreError>;
}

/// The SQLite backend: `<state>/service.db`, WAL, one connection behind a lock.
pub struct SqliteStorage {
    connection: Mutex<Connection>,
    /// One file, one instance: signals stay in the process.
    signals: crate::signals::LocalSignals,
}

/// SQLite's migrations: entry `n` takes a database from version `n` to `n + 1`. Version 1 is
/// written with `IF NOT EXISTS`, so a database made before versions were recorded takes it too.
const MIGRATIONS: &[&str] = &[SCHEMA_V1, SCHEMA_V2, SCHEMA_V3, SCHEMA_V4];

/// Version 4: the secrets the operator keeps for each tenant's server headers.
const SCHEMA_V4: &str = "
CREATE TABLE tenant_secrets (
    tenant_id TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
);";

/// Version 3: each approval names the key (or widget token) whose message started its run, so
/// that key never decides it (unless `[service] self_approval`).
const SCHEMA_V3: &str = "ALTER TABLE approvals ADD COLUMN requested_by TEXT;";

/// Version 2 put the gate's audit in PostgreSQL's database; SQLite keeps it in `audit.db`, so
/// nothing changes here.
const SCHEMA_V2: &str = "";

const SCHEMA_V1: &str = "
CREATE TABLE IF NOT EXISTS tenants (
    id TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    caller TEXT NOT NULL,
    role TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    agent TEXT,
    state TEXT NOT NULL,
    messages TEXT NOT NULL DEFAULT '[]',
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_by_tenant ON sessions(tenant_id, created_at);
CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    classes TEXT NOT NULL,
    caller TEXT,
    reason TEXT NOT NULL,
    state TEXT NOT NULL,
    decided_by TEXT,
    created_at INTEGER NOT NULL,
    decided_at INTEGER
);
CREATE INDEX IF NOT EXISTS approvals_by_tenant ON approvals(tenant_id, state, created_at);
CREATE TABLE IF NOT EXISTS client_calls (
    id TEXT NOT NULL,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    state TEXT NOT NULL,
    answer TEXT,
    created_at INTEGER NOT NULL,
    answered_at INTEGER,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE IF NOT EXISTS skills (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    text TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
CREATE TABLE IF NOT EXISTS servers (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    url TEXT NOT NULL,
    headers TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
CREATE TABLE IF NOT EXISTS widget_tokens (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    agent TEXT NOT NULL,
    caller TEXT NOT NULL,
    secret_sha256 TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS widget_sessions (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    token_id TEXT NOT NULL,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    PRIMARY KEY (token_id, session_id)
);
CREATE TABLE IF NOT EXISTS prompts (
    tenant_id TEXT NOT NULL REFERENCES tenants(id),
    name TEXT NOT NULL,
    snapshot TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, name)
);
CREATE TABLE IF NOT EXISTS run_leases (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    owner TEXT NOT NULL,
    lease_until INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    at INTEGER NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
";

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// `prefix` and 32 random hex digits.
pub fn random_id(prefix: &str) -> Result<String, StoreError> {
    warden_net::random_hex(16)
        .map(|random| format!("{prefix}{random}"))
        .map_err(|error| StoreError::Random(error.to_string()))
}

/// How a key's secret is stored: its SHA-256, in hex.
pub fn secret_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Moves a session to `to` only from one of `from` (compare-and-set on `connection`, which the
/// caller holds); whether it moved.
fn move_state(
    connection: &Connection,
    tenant: &str,
    id: &str,
    from: &[SessionState],
    to: SessionState,
) -> Result<bool, StoreError> {
    let current: Option<String> = connection
        .query_row(
            "SELECT state FROM sessions WHERE tenant_id = ?1 AND id = ?2",
            params![tenant, id],
            |row| row.get(0),
        )
        .optional()?;
    let Some(current) = current else {
        return Ok(false);
    };
    if !from.contains(&SessionState::parse(&current)) {
        return Ok(false);
    }
    let changed = connection.execute(
        "UPDATE sessions SET state = ?3, updated_at = ?4
         WHERE tenant_id = ?1 AND id = ?2 AND state = ?5",
        params![tenant, id, to.as_str(), to_i64(now()), current],
    )?;
    Ok(changed > 0)
}

impl SqliteStorage {
    /// Opens (creating) the database at `path`; its file is private to the user.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let connection = Connection::open(path)?;
        restrict_to_owner(path);
        Self::with_connection(connection)
    }

    /// A database in memory (tests).
    pub fn in_memory() -> Result<Self, StoreError> {
        Self::with_connection(Connection::open_in_memory()?)
    }

    fn with_connection(mut connection: Connection) -> Result<Self, StoreError> {
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "foreign_keys", "ON")?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        migrate(&mut connection)?;
        Ok(Self {
            connection: Mutex::new(connection),
            signals: crate::signals::LocalSignals::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores the next event of a session; with a `holder`, only while that run holds the
    /// session's lease. `None`: no such session, or (with a holder) its lease is not held.
    fn append_held(
        &self,
        tenant: &str,
        id: &str,
        holder: Option<&str>,
        event: &serde_json::Value,
    ) -> Result<Option<u64>, StoreError> {
        let mut connection = self.lock();
        let transaction = connection.transaction()?;
        let allowed: bool = match holder {
            None => transaction
                .query_row(
                    "SELECT 1 FROM sessions WHERE tenant_id = ?1 AND id = ?2",
                    params![tenant, id],
                    |_| Ok(true),
                )
                .optional()?
                .unwrap_or(false),
            Some(holder) => transaction
                .query_row(
                    "SELECT 1 FROM sessions s JOIN run_leases l ON l.session_id = s.id
                     WHERE s.tenant_id = ?1 AND s.id = ?2 AND l.owner = ?3",
                    params![tenant, id, holder],
                    |_| Ok(true),
                )
                .optional()?
                .unwrap_or(false),
        };
        if !allowed {
            return Ok(None);
        }
        let seq: i64 = transaction.query_row(
            "SELECT COALESCE(MAX(seq), 0) + 1 FROM events WHERE session_id = ?1",
            params![id],
            |row| row.get(0),
        )?;
        transaction.execute(
            "INSERT INTO events (session_id, seq, at, event) VALUES (?1, ?2, ?3, ?4)",
            params![id, seq, to_i64(now()), event.to_string()],
        )?;
        transaction.commit()?;
        Ok(Some(to_u64(seq)))
    }
}

/// Brings the database to [`SCHEMA_VERSION`], one transaction per migration; refuses a database
/// whose version is newer.
fn migrate(connection: &mut Connection) -> Result<(), StoreError> {
    connection
        .execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")?;
    let found: i64 = connection.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_version",
        [],
        |row| row.get(0),
    )?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            found,
            known: SCHEMA_VERSION,
        });
    }
    for (from, migration) in (0_i64..)
        .zip(MIGRATIONS)
        .skip(usize::try_from(found).unwrap_or(0))
    {
        let transaction = connection.transaction()?;
        transaction.execute_batch(migration)?;
        transaction.execute("DELETE FROM schema_version", [])?;
        transaction.execute(
            "INSERT INTO schema_version (version) VALUES (?1)",
            params![from + 1],
        )?;
        transaction.commit()?;
    }
    Ok(())
}

#[cfg(unix)]
fn restrict_to_owner(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
}

#[cfg(not(unix))]
fn restrict_to_owner(_path: &Path) {}

/// A row added under a session: `Ok` when the insert (guarded by the session belonging to the
/// tenant) added one.
pub fn session_owned(added: bool, tenant: &str, session: &str) -> Result<(), StoreError> {
    if added {
        Ok(())
    } else {
        Err(StoreError::Corrupt(format!(
            "session {session} of tenant {tenant} does not exist"
        )))
    }
}

const CLIENT_CALL_COLUMNS: &str = "id, session_id, tool, arguments, state, answer, created_at";

fn client_call_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ClientCallRow> {
    let arguments: String = row.get(3)?;
    let answer: Option<String> = row.get(5)?;
    Ok(ClientCallRow {
        id: row.get(0)?,
        session: row.get(1)?,
        tool: row.get(2)?,
        arguments: serde_json::from_str(&arguments).unwrap_or(serde_json::Value::Null),
        state: row.get(4)?,
        answer: answer.and_then(|text| serde_json::from_str(&text).ok()),
        created_at: to_u64(row.get(6)?),
    })
}

const APPROVAL_COLUMNS: &str = "id, session_id, tool, arguments, classes, caller, reason, state, decided_by, created_at, requested_by";

fn approval_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ApprovalRow> {
    let arguments: String = row.get(3)?;
    let classes: String = row.get(4)?;
    Ok(ApprovalRow {
        id: row.get(0)?,
        session: row.get(1)?,
        tool: row.get(2)?,
        arguments: serde_json::from_str(&arguments).unwrap_or(serde_json::Value::Null),
        classes: serde_json::from_str(&classes).unwrap_or_default(),
        caller: row.get(5)?,
        reason: row.get(6)?,
        state: row.get(7)?,
        decided_by: row.get(8)?,
        created_at: to_u64(row.get(9)?),
        requested_by: row.get(10)?,
    })
}

fn prompt_row(snapshot: &str) -> Result<PromptRow, StoreError> {
    serde_json::from_str(snapshot)
        .map_err(|error| StoreError::Corrupt(format!("a prompt: {error}")))
}

fn session_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    let state: String = row.get(2)?;
    Ok(SessionRow {
        id: row.get(0)?,
        agent: row.get(1)?,
        state: SessionState::parse(&state),
        created_at: to_u64(row.get(3)?),
        updated_at: to_u64(row.get(4)?),
    })
}

impl ServiceStorage for SqliteStorage {
    fn signals(&self) -> &dyn crate::signals::ServiceSignals {
        &self.signals
    }

    fn ensure_tenant(&self, name: &str) -> Result<(), StoreError> {
        self.lock().execute(
            "INSERT OR IGNORE INTO tenants (id, created_at) VALUES (?1, ?2)",
            params![name, to_i64(now())],
        )?;
        Ok(())
    }

    fn issue_key(&self, tenant: &str, caller: &str, role: Role) -> Result<IssuedKey, StoreError> {
        self.ensure_tenant(tenant)?;
        let id = random_id("key_")?;
        let secret = random_id("wsk_")?;
        self.lock().execute(
            "INSERT INTO api_keys (id, tenant_id, caller, role, secret_sha256, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                id,
                tenant,
                caller,
                role.as_str(),
                secret_hash(&secret),
                to_i64(now())
            ],
        )?;
        Ok(IssuedKey { id, secret })
    }

    fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        let changed = self.lock().execute(
            "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
            params![id, to_i64(now())],
        )?;
        Ok(changed > 0)
    }

    fn resolve_key(&self, secret: &str) -> Result<Option<Principal>, StoreError> {
        // Looked up by the hash: the comparison never touches the secret itself.
        let connection = self.lock();
        let found = connection
            .query_row(
                "SELECT tenant_id, caller, role, id FROM api_keys
                 WHERE secret_sha256 = ?1 AND revoked_at IS NULL",
                params![secret_hash(secret)],
                |row| {
                    let role: String = row.get(2)?;
                    Ok(Principal {
                        tenant: row.get(0)?,
                        caller: row.get(1)?,
                        role: Role::parse(&role),
                        key: row.get(3)?,
                        widget: None,
                    })
                },
            )
            .optional()?;
        if found.is_some() {
            return Ok(found);
        }
        let widget = connection
            .query_row(
                "SELECT id, tenant_id, caller, agent FROM widget_tokens
                 WHERE secret_sha256 = ?1 AND expires_at > ?2",
                params![secret_hash(secret), to_i64(now())],
                |row| {
                    Ok(Principal {
                        tenant: row.get(1)?,
                        caller: row.get(2)?,
                        role: Role::Widget,
                        key: row.get(0)?,
                        widget: Some(WidgetScope {
                            token: row.get(0)?,
                            agent: row.get(3)?,
                        }),
                    })
                },
            )
            .optional()?;
        Ok(widget)
    }

    fn issue_widget_token(
        &self,
        tenant: &str,
        agent: &str,
        caller: &str,
        ttl_sec: u64,
    ) -> Result<IssuedWidgetToken, StoreError> {
        let id = random_id("wid_")?;
        let secret = random_id("wwt_")?;
        let at = now();
        let expires_at = at.saturating_add(ttl_sec);
        let connection = self.lock();
        // Tokens expired for a day are of no use to anyone: they go as new ones are made.
        connection.execute(
            "DELETE FROM widget_tokens WHERE expires_at < ?1",
            params![to_i64(at.saturating_sub(24 * 60 * 60))],
        )?;
        connection.execute(
            "INSERT INTO widget_tokens (id, tenant_id, agent, caller, secret_sha256, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                id,
                tenant,
                agent,
                caller,
                secret_hash(&secret),
                to_i64(at),
                to_i64(expires_at)
            ],
        )?;
        Ok(IssuedWidgetToken {
            id,
            secret,
            expires_at,
        })
    }

    fn add_widget_session(
        &self,
        tenant: &str,
        token: &str,
        session: &str,
    ) -> Result<(), StoreError> {
        self.lock().execute(
            "INSERT OR IGNORE INTO widget_sessions (tenant_id, token_id, session_id)
             VALUES (?1, ?2, ?3)",
            params![tenant, token, session],
        )?;
        Ok(())
    }

    fn widget_owns_session(
        &self,
        tenant: &str,
        token: &str,
        session: &str,
    ) -> Result<bool, StoreError> {
        let found: Option<i64> = self
            .lock()
            .query_row(
                "SELECT 1 FROM widget_sessions
                 WHERE tenant_id = ?1 AND token_id = ?2 AND session_id = ?3",
                params![tenant, token, session],
                |row| row.get(0),
            )
            .optional()?;
        Ok(found.is_some())
    }

    fn create_session(&self, tenant: &str, agent: Option<&str>) -> Result<SessionRow, StoreError> {
        let id = random_id("ses_")?;
        let at = now();
        self.lock().execute(
            "INSERT INTO sessions (id, tenant_id, agent, state, created_at, updated_at)
             VALUES (?1, ?2, ?3, 'idle', ?4, ?4)",
            params![id, tenant, agent, to_i64(at)],
        )?;
        Ok(SessionRow {
            id,
            agent: agent.map(str::to_owned),
            state: SessionState::Idle,
            created_at: at,
            updated_at: at,
        })
    }

    fn list_sessions(&self, tenant: &str) -> Result<Vec<SessionRow>, StoreError> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT id, agent, state, created_at, updated_at FROM sessions
             WHERE tenant_id = ?1 ORDER BY created_at, id",
        )?;
        let rows = statement.query_map(params![tenant], session_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn count_sessions(&self, tenant: &str, creator: Option<&str>) -> Result<u64, StoreError> {
        let count: i64 = match creator {
            None => self.lock().query_row(
                "SELECT COUNT(*) FROM sessions WHERE tenant_id = ?1",
                params![tenant],
                |row| row.get(0),
            )?,
            Some(creator) => self.lock().query_row(
                "SELECT COUNT(*) FROM widget_sessions WHERE tenant_id = ?1 AND token_id = ?2",
                params![tenant, creator],
                |row| row.get(0),
            )?,
        };
        Ok(to_u64(count))
    }

    fn session(&self, tenant: &str, id: &str) -> Result<Option<SessionRow>, StoreError> {
        Ok(self
            .lock()
            .query_row(
                "SELECT id, agent, state, created_at, updated_at FROM sessions
                 WHERE tenant_id = ?1 AND id = ?2",
                params![tenant, id],
                session_row,
            )
            .optional()?)
    }

    fn delete_session(&self, tenant: &str, id: &str) -> Result<bool, StoreError> {
        let changed = self.lock().execute(
            "DELETE FROM sessions WHERE tenant_id = ?1 AND id = ?2",
            params![tenant, id],
        )?;
        Ok(changed > 0)
    }

    fn transition(
        &self,
        tenant: &str,
        id: &str,
        from: &[SessionState],
        to: SessionState,
    ) -> Result<bool, StoreError> {
        let connection = self.lock();
        let moved = move_state(&connection, tenant, id, from, to)?;
        // A run's lease ends with it; the next run leases afresh.
        if moved && to != SessionState::Running {
            connection.execute("DELETE FROM run_leases WHERE session_id = ?1", params![id])?;
        }
        Ok(moved)
    }

    fn messages(&self, tenant: &str, id: &str) -> Result<serde_json::Value, StoreError> {
        let text: Option<String> = self
            .lock()
            .query_row(
                "SELECT messages FROM sessions WHERE tenant_id = ?1 AND id = ?2",
                params![tenant, id],
                |row| row.get(0),
            )
            .optional()?;
        match text {
            None => Ok(serde_json::Value::Array(Vec::new())),
            Some(text) => {
                serde_json::from_str(&text).map_err(|error| StoreError::Corrupt(error.to_string()))
            }
        }
    }

    fn append_event(
        &self,
        tenant: &str,
        id: &str,
        event: &serde_json::Value,
    ) -> Result<u64, StoreError> {
        self.append_held(tenant, id, None, event)?.ok_or_else(|| {
            StoreError::Corrupt(format!("session {id} of tenant {tenant} does not exist"))
        })
    }

    fn events_after(
        &self,
        tenant: &str,
        id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<EventRow>, StoreError> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT events.seq, events.at, events.event FROM events
             JOIN sessions ON sessions.id = events.session_id
             WHERE sessions.tenant_id = ?1 AND events.session_id = ?2 AND events.seq > ?3
             ORDER BY events.seq LIMIT ?4",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = statement.query_map(params![tenant, id, to_i64(after), limit], |row| {
            let text: String = row.get(2)?;
            Ok((to_u64(row.get(0)?), to_u64(row.get(1)?), text))
        })?;
        let mut events = Vec::new();
        for row in rows {
            let (seq, at, text) = row?;
            let event = serde_json::from_str(&text)
                .map_err(|error| StoreError::Corrupt(error.to_string()))?;
            events.push(EventRow { seq, at, event });
        }
        Ok(events)
    }

    fn begin_run(
        &self,
        tenant: &str,
        id: &str,
        from: &[SessionState],
        holder: &str,
        until: u64,
    ) -> Result<bool, StoreError> {
        let mut connection = self.lock();
        let transaction = connection.transaction()?;
        if !move_state(&transaction, tenant, id, from, SessionState::Running)? {
            return Ok(false);
        }
        transaction.execute(
            "INSERT INTO run_leases (session_id, owner, lease_until) VALUES (?1, ?2, ?3)
             ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner,
                 lease_until = excluded.lease_until",
            params![id, holder, to_i64(until)],
        )?;
        transaction.commit()?;
        Ok(true)
    }

    fn renew_runs(&self, runs: &[RunHold], until: u64) -> Result<Vec<String>, StoreError> {
        let connection = self.lock();
        let mut renewed = Vec::new();
        for run in runs {
            let changed = connection.execute(
                "UPDATE run_leases SET lease_until = ?3 WHERE session_id = ?1 AND owner = ?2",
                params![run.session, run.holder, to_i64(until)],
            )?;
            if changed > 0 {
                renewed.push(run.session.clone());
            }
        }
        Ok(renewed)
    }

    fn append_run_event(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        event: &serde_json::Value,
    ) -> Result<Option<u64>, StoreError> {
        self.append_held(tenant, id, Some(holder), event)
    }

    fn save_run_messages(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        messages: &serde_json::Value,
    ) -> Result<bool, StoreError> {
        let changed = self.lock().execute(
            "UPDATE sessions SET messages = ?4, updated_at = ?5
             WHERE tenant_id = ?1 AND id = ?2 AND EXISTS
                 (SELECT 1 FROM run_leases WHERE session_id = ?2 AND owner = ?3)",
            params![tenant, id, holder, messages.to_string(), to_i64(now())],
        )?;
        Ok(changed > 0)
    }

    fn end_run(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        to: SessionState,
    ) -> Result<bool, StoreError> {
        let mut connection = self.lock();
        let transaction = connection.transaction()?;
        let changed = transaction.execute(
            "UPDATE sessions SET state = ?4, updated_at = ?5
             WHERE tenant_id = ?1 AND id = ?2 AND state = 'running' AND EXISTS
                 (SELECT 1 FROM run_leases WHERE session_id = ?2 AND owner = ?3)",
            params![tenant, id, holder, to.as_str(), to_i64(now())],
        )?;
        if changed > 0 {
            transaction.execute("DELETE FROM run_leases WHERE session_id = ?1", params![id])?;
        }
        transaction.commit()?;
        Ok(changed > 0)
    }

    fn interrupt_lapsed(&self, now: u64, grace: u64) -> Result<usize, StoreError> {
        let lapsed: Vec<(String, String)> = {
            let connection = self.lock();
            let mut statement = connection.prepare(
                "SELECT s.tenant_id, s.id FROM sessions s
                 LEFT JOIN run_leases l ON l.session_id = s.id
                 WHERE s.state = 'running'
                   AND (l.lease_until < ?1 OR (l.session_id IS NULL AND s.updated_at < ?2))",
            )?;
            let rows = statement.query_map(
                params![to_i64(now), to_i64(now.saturating_sub(grace))],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            rows.collect::<Result<_, _>>()?
        };
        let mut interrupted = 0;
        for (tenant, id) in &lapsed {
            if self.transition(
                tenant,
                id,
                &[SessionState::Running],
                SessionState::Interrupted,
            )? {
                interrupted += 1;
                self.lock().execute(
                    "UPDATE approvals SET state = 'expired', decided_at = ?2
                     WHERE session_id = ?1 AND state = 'pending'",
                    params![id, to_i64(now)],
                )?;
                self.append_event(
                    tenant,
                    id,
                    &serde_json::json!({"type": "run_interrupted",
                        "reason": "the instance running it stopped renewing its lease"}),
                )?;
            }
        }
        Ok(interrupted)
    }

    fn interrupt_running(&self) -> Result<usize, StoreError> {
        let running: Vec<(String, String)> = {
            let connection = self.lock();
            let mut statement =
                connection.prepare("SELECT tenant_id, id FROM sessions WHERE state = 'running'")?;
            let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        self.lock().execute(
            "UPDATE approvals SET state = 'expired', decided_at = ?1 WHERE state = 'pending'",
            params![to_i64(now())],
        )?;
        for (tenant, id) in &running {
            if self.transition(
                tenant,
                id,
                &[SessionState::Running],
                SessionState::Interrupted,
            )? {
                self.append_event(
                    tenant,
                    id,
                    &serde_json::json!({"type": "run_interrupted",
                        "reason": "the service stopped while the run was going"}),
                )?;
            }
        }
        Ok(running.len())
    }

    fn put_skill(
        &self,
        tenant: &str,
        name: &str,
        description: &str,
        text: &str,
    ) -> Result<bool, StoreError> {
        let connection = self.lock();
        let existed: bool = connection
            .query_row(
                "SELECT 1 FROM skills WHERE tenant_id = ?1 AND name = ?2",
                params![tenant, name],
                |_| Ok(true),
            )
            .optional()?
            .unwrap_or(false);
        connection.execute(
            "INSERT INTO skills (tenant_id, name, description, text, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (tenant_id, name) DO UPDATE
             SET description = excluded.description, text = excluded.text,
                 updated_at = excluded.updated_at",
            params![tenant, name, description, text, to_i64(now())],
        )?;
        Ok(!existed)
    }

    fn list_skills(&self, tenant: &str) -> Result<Vec<SkillRow>, StoreError> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT name, description, updated_at FROM skills WHERE tenant_id = ?1 ORDER BY name",
        )?;
        let rows = statement.query_map(params![tenant], |row| {
            Ok(SkillRow {
                name: row.get(0)?,
                description: row.get(1)?,
                updated_at: to_u64(row.get(2)?),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn skill_text(&self, tenant: &str, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .lock()
            .query_row(
                "SELECT text FROM skills WHERE tenant_id = ?1 AND name = ?2",
                params![tenant, name],
                |row| row.get(0),
            )
            .optional()?)
    }

    fn delete_skill(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        let changed = self.lock().execute(
            "DELETE FROM skills WHERE tenant_id = ?1 AND name = ?2",
            params![tenant, name],
        )?;
        Ok(changed > 0)
    }

    fn put_server(&self, tenant: &str, server: &ServerRow) -> Result<bool, StoreError> {
        let headers = serde_json::to_string(&server.headers)
            .map_err(|error| StoreError::Corrupt(error.to_string()))?;
        let connection = self.lock();
        let existed: bool = connection
            .query_row(
                "SELECT 1 FROM servers WHERE tenant_id = ?1 AND name = ?2",
                params![tenant, server.name],
                |_| Ok(true),
            )
            .optional()?
            .unwrap_or(false);
        connection.execute(
            "INSERT INTO servers (tenant_id, name, url, headers, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (tenant_id, name) DO UPDATE SET url = excluded.url,
                 headers = excluded.headers",
            params![
                tenant,
                server.name,
                server.url,
                headers,
                to_i64(server.created_at)
            ],
        )?;
        Ok(!existed)
    }

    fn list_servers(&self, tenant: &str) -> Result<Vec<ServerRow>, StoreError> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT name, url, headers, created_at FROM servers WHERE tenant_id = ?1 ORDER BY name",
        )?;
        let rows = statement.query_map(params![tenant], |row| {
            let headers: String = row.get(2)?;
            Ok(ServerRow {
                name: row.get(0)?,
                url: row.get(1)?,
                headers: serde_json::from_str(&headers).unwrap_or_default(),
                created_at: to_u64(row.get(3)?),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn delete_server(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        let changed = self.lock().execute(
            "DELETE FROM servers WHERE tenant_id = ?1 AND name = ?2",
            params![tenant, name],
        )?;
        Ok(changed > 0)
    }

    fn put_tenant_secret(&self, tenant: &str, name: &str, value: &str) -> Result<bool, StoreError> {
        let connection = self.lock();
        let existed = connection
            .query_row(
                "SELECT 1 FROM tenant_secrets WHERE tenant_id = ?1 AND name = ?2",
                params![tenant, name],
                |_| Ok(true),
            )
            .optional()?
            .unwrap_or(false);
        connection.execute(
            "INSERT INTO tenant_secrets (tenant_id, name, value, updated_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (tenant_id, name) DO UPDATE SET value = excluded.value,
                 updated_at = excluded.updated_at",
            params![tenant, name, value, to_i64(now())],
        )?;
        Ok(!existed)
    }

    fn tenant_secret_names(&self, tenant: &str) -> Result<Vec<SecretRow>, StoreError> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT name, updated_at FROM tenant_secrets WHERE tenant_id = ?1 ORDER BY name",
        )?;
        let rows = statement.query_map(params![tenant], |row| {
            Ok(SecretRow {
                name: row.get(0)?,
                updated_at: to_u64(row.get(1)?),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn tenant_secret(&self, tenant: &str, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .lock()
            .query_row(
                "SELECT value FROM tenant_secrets WHERE tenant_id = ?1 AND name = ?2",
                params![tenant, name],
                |row| row.get(0),
            )
            .optional()?)
    }

    fn delete_tenant_secret(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        let changed = self.lock().execute(
            "DELETE FROM tenant_secrets WHERE tenant_id = ?1 AND name = ?2",
            params![tenant, name],
        )?;
        Ok(changed > 0)
    }

    fn put_prompt(&self, tenant: &str, prompt: &PromptRow) -> Result<bool, StoreError> {
        let snapshot = serde_json::to_string(&prompt)
            .map_err(|error| StoreError::Corrupt(error.to_string()))?;
        let connection = self.lock();
        let existed = connection
            .query_row(
                "SELECT 1 FROM prompts WHERE tenant_id = ?1 AND name = ?2",
                params![tenant, prompt.name],
                |_| Ok(true),
            )
            .optional()?
            .unwrap_or(false);
        connection.execute(
            "INSERT INTO prompts (tenant_id, name, snapshot, created_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (tenant_id, name) DO UPDATE SET snapshot = excluded.snapshot,
                 created_at = excluded.created_at",
            params![tenant, prompt.name, snapshot, to_i64(prompt.created_at)],
        )?;
        Ok(!existed)
    }

    fn list_prompts(&self, tenant: &str) -> Result<Vec<PromptRow>, StoreError> {
        let connection = self.lock();
        let mut statement = connection
            .prepare("SELECT snapshot FROM prompts WHERE tenant_id = ?1 ORDER BY name")?;
        let rows = statement.query_map(params![tenant], |row| row.get::<_, String>(0))?;
        rows.map(|row| prompt_row(&row?)).collect()
    }

    fn prompt(&self, tenant: &str, name: &str) -> Result<Option<PromptRow>, StoreError> {
        let snapshot: Option<String> = self
            .lock()
            .query_row(
                "SELECT snapshot FROM prompts WHERE tenant_id = ?1 AND name = ?2",
                params![tenant, name],
                |row| row.get(0),
            )
            .optional()?;
        snapshot.as_deref().map(prompt_row).transpose()
    }

    fn delete_prompt(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        let changed = self.lock().execute(
            "DELETE FROM prompts WHERE tenant_id = ?1 AND name = ?2",
            params![tenant, name],
        )?;
        Ok(changed > 0)
    }

    fn list_tenants(&self) -> Result<Vec<TenantRow>, StoreError> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT t.id, t.created_at,
                (SELECT COUNT(*) FROM api_keys k WHERE k.tenant_id = t.id AND k.revoked_at IS NULL),
                (SELECT COUNT(*) FROM sessions s WHERE s.tenant_id = t.id)
             FROM tenants t ORDER BY t.id",
        )?;
        let rows = statement.query_map([], |row| {
            Ok(TenantRow {
                name: row.get(0)?,
                created_at: to_u64(row.get(1)?),
                keys: to_u64(row.get(2)?),
                sessions: to_u64(row.get(3)?),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn list_keys(&self, tenant: &str) -> Result<Vec<KeyRow>, StoreError> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT id, caller, role, created_at, revoked_at FROM api_keys
             WHERE tenant_id = ?1 ORDER BY created_at DESC, id",
        )?;
        let rows = statement.query_map(params![tenant], |row| {
            let role: String = row.get(2)?;
            Ok(KeyRow {
                id: row.get(0)?,
                caller: row.get(1)?,
                role: Role::parse(&role),
                created_at: to_u64(row.get(3)?),
                revoked_at: row.get::<_, Option<i64>>(4)?.map(to_u64),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn add_client_call(&self, tenant: &str, call: &ClientCallRow) -> Result<(), StoreError> {
        let added = self.lock().execute(
            "INSERT INTO client_calls (id, tenant_id, session_id, tool, arguments, state, created_at)
             SELECT ?1, ?2, ?3, ?4, ?5, 'pending', ?6
             WHERE EXISTS (SELECT 1 FROM sessions WHERE tenant_id = ?2 AND id = ?3)",
            params![
                call.id,
                tenant,
                call.session,
                call.tool,
                call.arguments.to_string(),
                to_i64(call.created_at)
            ],
        )?;
        session_owned(added > 0, tenant, &call.session)
    }

    fn client_calls(&self, tenant: &str, session: &str) -> Result<Vec<ClientCallRow>, StoreError> {
        let connection = self.lock();
        let mut statement = connection.prepare(&format!(
            "SELECT {CLIENT_CALL_COLUMNS} FROM client_calls
             WHERE tenant_id = ?1 AND session_id = ?2 ORDER BY created_at, id"
        ))?;
        let rows = statement.query_map(params![tenant, session], client_call_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn pending_client_calls(
        &self,
        tenant: &str,
        session: &str,
    ) -> Result<Vec<ClientCallRow>, StoreError> {
        let connection = self.lock();
        let mut statement = connection.prepare(&format!(
            "SELECT {CLIENT_CALL_COLUMNS} FROM client_calls
             WHERE tenant_id = ?1 AND session_id = ?2 AND state = 'pending'
             ORDER BY created_at, id"
        ))?;
        let rows = statement.query_map(params![tenant, session], client_call_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn client_call(
        &self,
        tenant: &str,
        session: &str,
        id: &str,
    ) -> Result<Option<ClientCallRow>, StoreError> {
        Ok(self
            .lock()
            .query_row(
                &format!(
                    "SELECT {CLIENT_CALL_COLUMNS} FROM client_calls
                     WHERE tenant_id = ?1 AND session_id = ?2 AND id = ?3"
                ),
                params![tenant, session, id],
                client_call_row,
            )
            .optional()?)
    }

    fn answer_client_call(
        &self,
        tenant: &str,
        session: &str,
        id: &str,
        answer: &serde_json::Value,
    ) -> Result<bool, StoreError> {
        let changed = self.lock().execute(
            "UPDATE client_calls SET state = 'answered', answer = ?4, answered_at = ?5
             WHERE tenant_id = ?1 AND session_id = ?2 AND id = ?3 AND state = 'pending'",
            params![tenant, session, id, answer.to_string(), to_i64(now())],
        )?;
        Ok(changed > 0)
    }

    fn add_approval(&self, tenant: &str, approval: &ApprovalRow) -> Result<(), StoreError> {
        let classes = serde_json::to_string(&approval.classes)
            .map_err(|error| StoreError::Corrupt(error.to_string()))?;
        let added = self.lock().execute(
            "INSERT INTO approvals (id, tenant_id, session_id, tool, arguments, classes, caller,
                                    reason, state, created_at, requested_by)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, ?10
             WHERE EXISTS (SELECT 1 FROM sessions WHERE tenant_id = ?2 AND id = ?3)",
            params![
                approval.id,
                tenant,
                approval.session,
                approval.tool,
                approval.arguments.to_string(),
                classes,
                approval.caller,
                approval.reason,
                to_i64(approval.created_at),
                approval.requested_by
            ],
        )?;
        session_owned(added > 0, tenant, &approval.session)
    }

    fn allowed_for_session(&self, tenant: &str, session: &str) -> Result<Vec<String>, StoreError> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT DISTINCT tool FROM approvals
             WHERE tenant_id = ?1 AND session_id = ?2 AND state = 'allowed_for_session'",
        )?;
        let rows = statement.query_map(params![tenant, session], |row| row.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn pending_approvals(&self, tenant: &str) -> Result<Vec<ApprovalRow>, StoreError> {
        let connection = self.lock();
        let mut statement = connection.prepare(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals
             WHERE tenant_id = ?1 AND state = 'pending' ORDER BY created_at, id"
        ))?;
        let rows = statement.query_map(params![tenant], approval_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn approval(&self, tenant: &str, id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        Ok(self
            .lock()
            .query_row(
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE tenant_id = ?1 AND id = ?2"
                ),
                params![tenant, id],
                approval_row,
            )
            .optional()?)
    }

    fn decide_approval(
        &self,
        tenant: &str,
        id: &str,
        state: &str,
        decided_by: &str,
    ) -> Result<bool, StoreError> {
        let changed = self.lock().execute(
            "UPDATE approvals SET state = ?3, decided_by = ?4, decided_at = ?5
             WHERE tenant_id = ?1 AND id = ?2 AND state = 'pending'",
            params![tenant, id, state, decided_by, to_i64(now())],
        )?;
        Ok(changed > 0)
    }
}
