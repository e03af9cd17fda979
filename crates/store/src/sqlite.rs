//! The embedded SQLite backend of the storage contract: `<state>/service.db`, WAL, its one connection on a thread of its own that takes the calls in turn, so no call blocks the caller's thread (an async worker awaits the answer). Its schema is versioned and migrated at open; a newer one is refused.

use std::path::Path;
use std::sync::mpsc;

use rusqlite::{Connection, OptionalExtension, params};

use crate::signals::{LocalSignals, ServiceSignals};
use crate::{
    ApprovalRow, ClientCallRow, EventRow, IssuedKey, IssuedWidgetToken, KeyRow, Principal,
    PromptRow, Role, RunHold, SecretRow, ServerRow, ServiceStorage, SessionRow, SessionState,
    SkillRow, StoreError, StoreFuture, TenantRow, WidgetScope, migrations_due, now, random_id,
    secret_hash, session_owned, to_i64, to_u64,
};

/// One call's work on the connection; it sends its own answer.
type Job = Box<dyn FnOnce(&mut Connection) + Send>;

/// The SQLite backend: one connection, owned by a thread that runs the calls one at a time
/// (SQLite writes one at a time anyway); the thread ends when the storage is dropped.
pub struct SqliteStorage {
    jobs: mpsc::Sender<Job>,
    /// One file, one instance: signals stay in the process.
    signals: LocalSignals,
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

impl SqliteStorage {
    /// Opens (creating) the database at `path`; its file is private to the user. It migrates
    /// the schema on the calling thread, once, before the storage serves.
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
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("warden-sqlite".to_owned())
            .spawn(move || serve(connection, &queue))
            .map_err(|error| {
                StoreError::Backend(format!("a thread for the service database: {error}"))
            })?;
        Ok(Self {
            jobs,
            signals: LocalSignals::default(),
        })
    }

    /// Runs `job` on the connection's thread; the future answers once it ran. A job handed over
    /// runs to its end even when its caller stops waiting.
    fn call<T: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> StoreFuture<'static, T> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let queued = self
            .jobs
            .send(Box::new(move |connection: &mut Connection| {
                let _ = reply.send(job(connection));
            }))
            .is_ok();
        Box::pin(async move {
            let stopped =
                || StoreError::Backend("the service database's thread stopped".to_owned());
            if !queued {
                return Err(stopped());
            }
            answer.await.map_err(|_| stopped())?
        })
    }
}

/// The connection's thread: each job in turn, until the storage is dropped.
fn serve(mut connection: Connection, queue: &mpsc::Receiver<Job>) {
    while let Ok(job) = queue.recv() {
        // A job that panics loses its own answer only (its caller hears that the thread
        // stopped); the connection goes on serving the next.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&mut connection)));
    }
}

/// Brings the database to [`SCHEMA_VERSION`](crate::SCHEMA_VERSION), one transaction per
/// migration (those `warden-store`'s driver finds due); refuses a database whose version is newer.
fn migrate(connection: &mut Connection) -> Result<(), StoreError> {
    connection
        .execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")?;
    let found: i64 = connection.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_version",
        [],
        |row| row.get(0),
    )?;
    for (version, migration) in migrations_due(found, MIGRATIONS)? {
        let transaction = connection.transaction()?;
        transaction.execute_batch(migration)?;
        transaction.execute("DELETE FROM schema_version", [])?;
        transaction.execute(
            "INSERT INTO schema_version (version) VALUES (?1)",
            params![version],
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

fn ensure_tenant(connection: &Connection, name: &str) -> Result<(), StoreError> {
    connection.execute(
        "INSERT OR IGNORE INTO tenants (id, created_at) VALUES (?1, ?2)",
        params![name, to_i64(now())],
    )?;
    Ok(())
}

/// Moves a session to `to` only from one of `from` (compare-and-set); whether it moved.
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

/// [`move_state`], and a run's lease ends with its run (the next run leases afresh).
fn transition(
    connection: &Connection,
    tenant: &str,
    id: &str,
    from: &[SessionState],
    to: SessionState,
) -> Result<bool, StoreError> {
    let moved = move_state(connection, tenant, id, from, to)?;
    if moved && to != SessionState::Running {
        connection.execute("DELETE FROM run_leases WHERE session_id = ?1", params![id])?;
    }
    Ok(moved)
}

/// Stores the next event of a session; with a `holder`, only while that run holds the
/// session's lease. `None`: no such session, or (with a holder) its lease is not held.
fn append_held(
    connection: &mut Connection,
    tenant: &str,
    id: &str,
    holder: Option<&str>,
    event: &serde_json::Value,
) -> Result<Option<u64>, StoreError> {
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

/// Stores the next event of a session (which must exist); returns its cursor.
fn append_event(
    connection: &mut Connection,
    tenant: &str,
    id: &str,
    event: &serde_json::Value,
) -> Result<u64, StoreError> {
    append_held(connection, tenant, id, None, event)?.ok_or_else(|| {
        StoreError::Corrupt(format!("session {id} of tenant {tenant} does not exist"))
    })
}

/// Whether the tenant has a row named `name` in `table` (a `(tenant_id, name)` table).
fn has_named(
    connection: &Connection,
    table: &str,
    tenant: &str,
    name: &str,
) -> Result<bool, StoreError> {
    Ok(connection
        .query_row(
            &format!("SELECT 1 FROM {table} WHERE tenant_id = ?1 AND name = ?2"),
            params![tenant, name],
            |_| Ok(true),
        )
        .optional()?
        .unwrap_or(false))
}

/// The rows `sql` selects with `values`, each read by `read`.
fn rows<T>(
    connection: &Connection,
    sql: &str,
    values: impl rusqlite::Params,
    read: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, StoreError> {
    let mut statement = connection.prepare(sql)?;
    let rows = statement.query_map(values, read)?;
    Ok(rows.collect::<Result<_, _>>()?)
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

const SESSION_COLUMNS: &str = "id, agent, state, created_at, updated_at";

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

/// A JSON text of `value` (a row's part stored as text).
fn json_text(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|error| StoreError::Corrupt(error.to_string()))
}

impl ServiceStorage for SqliteStorage {
    fn signals(&self) -> &dyn ServiceSignals {
        &self.signals
    }

    fn ensure_tenant<'a>(&'a self, name: &'a str) -> StoreFuture<'a, ()> {
        let name = name.to_owned();
        self.call(move |connection| ensure_tenant(connection, &name))
    }

    fn issue_key<'a>(
        &'a self,
        tenant: &'a str,
        caller: &'a str,
        role: Role,
    ) -> StoreFuture<'a, IssuedKey> {
        let (tenant, caller) = (tenant.to_owned(), caller.to_owned());
        self.call(move |connection| {
            ensure_tenant(connection, &tenant)?;
            let id = random_id("key_")?;
            let secret = random_id("wsk_")?;
            connection.execute(
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
        })
    }

    fn revoke_key<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        let id = id.to_owned();
        self.call(move |connection| {
            let changed = connection.execute(
                "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                params![id, to_i64(now())],
            )?;
            Ok(changed > 0)
        })
    }

    fn resolve_key<'a>(&'a self, secret: &'a str) -> StoreFuture<'a, Option<Principal>> {
        // Looked up by the hash: the comparison never touches the secret itself.
        let hash = secret_hash(secret);
        self.call(move |connection| {
            let found = connection
                .query_row(
                    "SELECT tenant_id, caller, role, id FROM api_keys
                     WHERE secret_sha256 = ?1 AND revoked_at IS NULL",
                    params![hash],
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
                    params![hash, to_i64(now())],
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
        })
    }

    fn issue_widget_token<'a>(
        &'a self,
        tenant: &'a str,
        agent: &'a str,
        caller: &'a str,
        ttl_sec: u64,
    ) -> StoreFuture<'a, IssuedWidgetToken> {
        let (tenant, agent, caller) = (tenant.to_owned(), agent.to_owned(), caller.to_owned());
        self.call(move |connection| {
            let id = random_id("wid_")?;
            let secret = random_id("wwt_")?;
            let at = now();
            let expires_at = at.saturating_add(ttl_sec);
            // Tokens expired for a day are of no use to anyone: they go as new ones are made.
            connection.execute(
                "DELETE FROM widget_tokens WHERE expires_at < ?1",
                params![to_i64(at.saturating_sub(24 * 60 * 60))],
            )?;
            connection.execute(
                "INSERT INTO widget_tokens
                     (id, tenant_id, agent, caller, secret_sha256, created_at, expires_at)
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
        })
    }

    fn add_widget_session<'a>(
        &'a self,
        tenant: &'a str,
        token: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, ()> {
        let (tenant, token, session) = (tenant.to_owned(), token.to_owned(), session.to_owned());
        self.call(move |connection| {
            connection.execute(
                "INSERT OR IGNORE INTO widget_sessions (tenant_id, token_id, session_id)
                 VALUES (?1, ?2, ?3)",
                params![tenant, token, session],
            )?;
            Ok(())
        })
    }

    fn widget_owns_session<'a>(
        &'a self,
        tenant: &'a str,
        token: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, bool> {
        let (tenant, token, session) = (tenant.to_owned(), token.to_owned(), session.to_owned());
        self.call(move |connection| {
            let found: Option<i64> = connection
                .query_row(
                    "SELECT 1 FROM widget_sessions
                     WHERE tenant_id = ?1 AND token_id = ?2 AND session_id = ?3",
                    params![tenant, token, session],
                    |row| row.get(0),
                )
                .optional()?;
            Ok(found.is_some())
        })
    }

    fn create_session<'a>(
        &'a self,
        tenant: &'a str,
        agent: Option<&'a str>,
    ) -> StoreFuture<'a, SessionRow> {
        let (tenant, agent) = (tenant.to_owned(), agent.map(str::to_owned));
        self.call(move |connection| {
            let id = random_id("ses_")?;
            let at = now();
            connection.execute(
                "INSERT INTO sessions (id, tenant_id, agent, state, created_at, updated_at)
                 VALUES (?1, ?2, ?3, 'idle', ?4, ?4)",
                params![id, tenant, agent, to_i64(at)],
            )?;
            Ok(SessionRow {
                id,
                agent,
                state: SessionState::Idle,
                created_at: at,
                updated_at: at,
            })
        })
    }

    fn list_sessions<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<SessionRow>> {
        let tenant = tenant.to_owned();
        self.call(move |connection| {
            rows(
                connection,
                &format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions
                     WHERE tenant_id = ?1 ORDER BY created_at, id"
                ),
                params![tenant],
                session_row,
            )
        })
    }

    fn count_sessions<'a>(
        &'a self,
        tenant: &'a str,
        creator: Option<&'a str>,
    ) -> StoreFuture<'a, u64> {
        let (tenant, creator) = (tenant.to_owned(), creator.map(str::to_owned));
        self.call(move |connection| {
            let count: i64 = match creator {
                None => connection.query_row(
                    "SELECT COUNT(*) FROM sessions WHERE tenant_id = ?1",
                    params![tenant],
                    |row| row.get(0),
                )?,
                Some(creator) => connection.query_row(
                    "SELECT COUNT(*) FROM widget_sessions WHERE tenant_id = ?1 AND token_id = ?2",
                    params![tenant, creator],
                    |row| row.get(0),
                )?,
            };
            Ok(to_u64(count))
        })
    }

    fn session<'a>(&'a self, tenant: &'a str, id: &'a str) -> StoreFuture<'a, Option<SessionRow>> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.call(move |connection| {
            Ok(connection
                .query_row(
                    &format!(
                        "SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant_id = ?1 AND id = ?2"
                    ),
                    params![tenant, id],
                    session_row,
                )
                .optional()?)
        })
    }

    fn delete_session<'a>(&'a self, tenant: &'a str, id: &'a str) -> StoreFuture<'a, bool> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.call(move |connection| {
            let changed = connection.execute(
                "DELETE FROM sessions WHERE tenant_id = ?1 AND id = ?2",
                params![tenant, id],
            )?;
            Ok(changed > 0)
        })
    }

    fn transition<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        from: &'a [SessionState],
        to: SessionState,
    ) -> StoreFuture<'a, bool> {
        let (tenant, id, from) = (tenant.to_owned(), id.to_owned(), from.to_vec());
        self.call(move |connection| transition(connection, &tenant, &id, &from, to))
    }

    fn messages<'a>(&'a self, tenant: &'a str, id: &'a str) -> StoreFuture<'a, serde_json::Value> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.call(move |connection| {
            let text: Option<String> = connection
                .query_row(
                    "SELECT messages FROM sessions WHERE tenant_id = ?1 AND id = ?2",
                    params![tenant, id],
                    |row| row.get(0),
                )
                .optional()?;
            match text {
                None => Ok(serde_json::Value::Array(Vec::new())),
                Some(text) => serde_json::from_str(&text)
                    .map_err(|error| StoreError::Corrupt(error.to_string())),
            }
        })
    }

    fn append_event<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        event: &'a serde_json::Value,
    ) -> StoreFuture<'a, u64> {
        let (tenant, id, event) = (tenant.to_owned(), id.to_owned(), event.clone());
        self.call(move |connection| append_event(connection, &tenant, &id, &event))
    }

    fn events_after<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        after: u64,
        limit: usize,
    ) -> StoreFuture<'a, Vec<EventRow>> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.call(move |connection| {
            let stored = rows(
                connection,
                "SELECT events.seq, events.at, events.event FROM events
                 JOIN sessions ON sessions.id = events.session_id
                 WHERE sessions.tenant_id = ?1 AND events.session_id = ?2 AND events.seq > ?3
                 ORDER BY events.seq LIMIT ?4",
                params![tenant, id, to_i64(after), limit],
                |row| {
                    let text: String = row.get(2)?;
                    Ok((to_u64(row.get(0)?), to_u64(row.get(1)?), text))
                },
            )?;
            stored
                .into_iter()
                .map(|(seq, at, text)| {
                    let event = serde_json::from_str(&text)
                        .map_err(|error| StoreError::Corrupt(error.to_string()))?;
                    Ok(EventRow { seq, at, event })
                })
                .collect()
        })
    }

    fn begin_run<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        from: &'a [SessionState],
        holder: &'a str,
        until: u64,
    ) -> StoreFuture<'a, bool> {
        let (tenant, id, from, holder) = (
            tenant.to_owned(),
            id.to_owned(),
            from.to_vec(),
            holder.to_owned(),
        );
        self.call(move |connection| {
            let transaction = connection.transaction()?;
            if !move_state(&transaction, &tenant, &id, &from, SessionState::Running)? {
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
        })
    }

    fn renew_runs<'a>(&'a self, runs: &'a [RunHold], until: u64) -> StoreFuture<'a, Vec<String>> {
        let runs = runs.to_vec();
        self.call(move |connection| {
            let mut renewed = Vec::new();
            for run in runs {
                let changed = connection.execute(
                    "UPDATE run_leases SET lease_until = ?3 WHERE session_id = ?1 AND owner = ?2",
                    params![run.session, run.holder, to_i64(until)],
                )?;
                if changed > 0 {
                    renewed.push(run.session);
                }
            }
            Ok(renewed)
        })
    }

    fn append_run_event<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        holder: &'a str,
        event: &'a serde_json::Value,
    ) -> StoreFuture<'a, Option<u64>> {
        let (tenant, id, holder, event) = (
            tenant.to_owned(),
            id.to_owned(),
            holder.to_owned(),
            event.clone(),
        );
        self.call(move |connection| append_held(connection, &tenant, &id, Some(&holder), &event))
    }

    fn save_run_messages<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        holder: &'a str,
        messages: &'a serde_json::Value,
    ) -> StoreFuture<'a, bool> {
        let (tenant, id, holder, messages) = (
            tenant.to_owned(),
            id.to_owned(),
            holder.to_owned(),
            messages.to_string(),
        );
        self.call(move |connection| {
            let changed = connection.execute(
                "UPDATE sessions SET messages = ?4, updated_at = ?5
                 WHERE tenant_id = ?1 AND id = ?2 AND EXISTS
                     (SELECT 1 FROM run_leases WHERE session_id = ?2 AND owner = ?3)",
                params![tenant, id, holder, messages, to_i64(now())],
            )?;
            Ok(changed > 0)
        })
    }

    fn end_run<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        holder: &'a str,
        to: SessionState,
    ) -> StoreFuture<'a, bool> {
        let (tenant, id, holder) = (tenant.to_owned(), id.to_owned(), holder.to_owned());
        self.call(move |connection| {
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
        })
    }

    fn interrupt_lapsed<'a>(&'a self, now: u64, grace: u64) -> StoreFuture<'a, usize> {
        self.call(move |connection| {
            let lapsed: Vec<(String, String)> = rows(
                connection,
                "SELECT s.tenant_id, s.id FROM sessions s
                 LEFT JOIN run_leases l ON l.session_id = s.id
                 WHERE s.state = 'running'
                   AND (l.lease_until < ?1 OR (l.session_id IS NULL AND s.updated_at < ?2))",
                params![to_i64(now), to_i64(now.saturating_sub(grace))],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            let mut interrupted = 0;
            for (tenant, id) in &lapsed {
                if transition(
                    connection,
                    tenant,
                    id,
                    &[SessionState::Running],
                    SessionState::Interrupted,
                )? {
                    interrupted += 1;
                    connection.execute(
                        "UPDATE approvals SET state = 'expired', decided_at = ?2
                         WHERE session_id = ?1 AND state = 'pending'",
                        params![id, to_i64(now)],
                    )?;
                    append_event(
                        connection,
                        tenant,
                        id,
                        &serde_json::json!({"type": "run_interrupted",
                            "reason": "the instance running it stopped renewing its lease"}),
                    )?;
                }
            }
            Ok(interrupted)
        })
    }

    fn interrupt_running<'a>(&'a self) -> StoreFuture<'a, usize> {
        self.call(move |connection| {
            let running: Vec<(String, String)> = rows(
                connection,
                "SELECT tenant_id, id FROM sessions WHERE state = 'running'",
                [],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )?;
            connection.execute(
                "UPDATE approvals SET state = 'expired', decided_at = ?1 WHERE state = 'pending'",
                params![to_i64(now())],
            )?;
            for (tenant, id) in &running {
                if transition(
                    connection,
                    tenant,
                    id,
                    &[SessionState::Running],
                    SessionState::Interrupted,
                )? {
                    append_event(
                        connection,
                        tenant,
                        id,
                        &serde_json::json!({"type": "run_interrupted",
                            "reason": "the service stopped while the run was going"}),
                    )?;
                }
            }
            Ok(running.len())
        })
    }

    fn put_skill<'a>(
        &'a self,
        tenant: &'a str,
        name: &'a str,
        description: &'a str,
        text: &'a str,
    ) -> StoreFuture<'a, bool> {
        let (tenant, name, description, text) = (
            tenant.to_owned(),
            name.to_owned(),
            description.to_owned(),
            text.to_owned(),
        );
        self.call(move |connection| {
            let existed = has_named(connection, "skills", &tenant, &name)?;
            connection.execute(
                "INSERT INTO skills (tenant_id, name, description, text, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (tenant_id, name) DO UPDATE
                 SET description = excluded.description, text = excluded.text,
                     updated_at = excluded.updated_at",
                params![tenant, name, description, text, to_i64(now())],
            )?;
            Ok(!existed)
        })
    }

    fn list_skills<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<SkillRow>> {
        let tenant = tenant.to_owned();
        self.call(move |connection| {
            rows(
                connection,
                "SELECT name, description, updated_at FROM skills WHERE tenant_id = ?1 ORDER BY name",
                params![tenant],
                |row| {
                    Ok(SkillRow {
                        name: row.get(0)?,
                        description: row.get(1)?,
                        updated_at: to_u64(row.get(2)?),
                    })
                },
            )
        })
    }

    fn skill_text<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, Option<String>> {
        self.named_text("SELECT text FROM skills", tenant, name)
    }

    fn delete_skill<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool> {
        self.delete_named("skills", tenant, name)
    }

    fn put_server<'a>(&'a self, tenant: &'a str, server: &'a ServerRow) -> StoreFuture<'a, bool> {
        let (tenant, server) = (tenant.to_owned(), server.clone());
        self.call(move |connection| {
            let headers = json_text(&server.headers)?;
            let existed = has_named(connection, "servers", &tenant, &server.name)?;
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
        })
    }

    fn list_servers<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<ServerRow>> {
        let tenant = tenant.to_owned();
        self.call(move |connection| {
            rows(
                connection,
                "SELECT name, url, headers, created_at FROM servers WHERE tenant_id = ?1 ORDER BY name",
                params![tenant],
                |row| {
                    let headers: String = row.get(2)?;
                    Ok(ServerRow {
                        name: row.get(0)?,
                        url: row.get(1)?,
                        headers: serde_json::from_str(&headers).unwrap_or_default(),
                        created_at: to_u64(row.get(3)?),
                    })
                },
            )
        })
    }

    fn delete_server<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool> {
        self.delete_named("servers", tenant, name)
    }

    fn put_tenant_secret<'a>(
        &'a self,
        tenant: &'a str,
        name: &'a str,
        value: &'a str,
    ) -> StoreFuture<'a, bool> {
        let (tenant, name, value) = (tenant.to_owned(), name.to_owned(), value.to_owned());
        self.call(move |connection| {
            let existed = has_named(connection, "tenant_secrets", &tenant, &name)?;
            connection.execute(
                "INSERT INTO tenant_secrets (tenant_id, name, value, updated_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (tenant_id, name) DO UPDATE SET value = excluded.value,
                     updated_at = excluded.updated_at",
                params![tenant, name, value, to_i64(now())],
            )?;
            Ok(!existed)
        })
    }

    fn tenant_secret_names<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<SecretRow>> {
        let tenant = tenant.to_owned();
        self.call(move |connection| {
            rows(
                connection,
                "SELECT name, updated_at FROM tenant_secrets WHERE tenant_id = ?1 ORDER BY name",
                params![tenant],
                |row| {
                    Ok(SecretRow {
                        name: row.get(0)?,
                        updated_at: to_u64(row.get(1)?),
                    })
                },
            )
        })
    }

    fn tenant_secret<'a>(
        &'a self,
        tenant: &'a str,
        name: &'a str,
    ) -> StoreFuture<'a, Option<String>> {
        self.named_text("SELECT value FROM tenant_secrets", tenant, name)
    }

    fn delete_tenant_secret<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool> {
        self.delete_named("tenant_secrets", tenant, name)
    }

    fn put_prompt<'a>(&'a self, tenant: &'a str, prompt: &'a PromptRow) -> StoreFuture<'a, bool> {
        let (tenant, name, created_at) = (
            tenant.to_owned(),
            prompt.name.clone(),
            to_i64(prompt.created_at),
        );
        let snapshot = json_text(prompt);
        self.call(move |connection| {
            let snapshot = snapshot?;
            let existed = has_named(connection, "prompts", &tenant, &name)?;
            connection.execute(
                "INSERT INTO prompts (tenant_id, name, snapshot, created_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (tenant_id, name) DO UPDATE SET snapshot = excluded.snapshot,
                     created_at = excluded.created_at",
                params![tenant, name, snapshot, created_at],
            )?;
            Ok(!existed)
        })
    }

    fn list_prompts<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<PromptRow>> {
        let tenant = tenant.to_owned();
        self.call(move |connection| {
            rows(
                connection,
                "SELECT snapshot FROM prompts WHERE tenant_id = ?1 ORDER BY name",
                params![tenant],
                |row| row.get::<_, String>(0),
            )?
            .iter()
            .map(|snapshot| prompt_row(snapshot))
            .collect()
        })
    }

    fn prompt<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, Option<PromptRow>> {
        let snapshot = self.named_text("SELECT snapshot FROM prompts", tenant, name);
        Box::pin(async move { snapshot.await?.as_deref().map(prompt_row).transpose() })
    }

    fn delete_prompt<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool> {
        self.delete_named("prompts", tenant, name)
    }

    fn list_tenants<'a>(&'a self) -> StoreFuture<'a, Vec<TenantRow>> {
        self.call(move |connection| {
            rows(
                connection,
                "SELECT t.id, t.created_at,
                    (SELECT COUNT(*) FROM api_keys k
                     WHERE k.tenant_id = t.id AND k.revoked_at IS NULL),
                    (SELECT COUNT(*) FROM sessions s WHERE s.tenant_id = t.id)
                 FROM tenants t ORDER BY t.id",
                [],
                |row| {
                    Ok(TenantRow {
                        name: row.get(0)?,
                        created_at: to_u64(row.get(1)?),
                        keys: to_u64(row.get(2)?),
                        sessions: to_u64(row.get(3)?),
                    })
                },
            )
        })
    }

    fn list_keys<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<KeyRow>> {
        let tenant = tenant.to_owned();
        self.call(move |connection| {
            rows(
                connection,
                "SELECT id, caller, role, created_at, revoked_at FROM api_keys
                 WHERE tenant_id = ?1 ORDER BY created_at DESC, id",
                params![tenant],
                |row| {
                    let role: String = row.get(2)?;
                    Ok(KeyRow {
                        id: row.get(0)?,
                        caller: row.get(1)?,
                        role: Role::parse(&role),
                        created_at: to_u64(row.get(3)?),
                        revoked_at: row.get::<_, Option<i64>>(4)?.map(to_u64),
                    })
                },
            )
        })
    }

    fn add_client_call<'a>(
        &'a self,
        tenant: &'a str,
        call: &'a ClientCallRow,
    ) -> StoreFuture<'a, ()> {
        let (tenant, call) = (tenant.to_owned(), call.clone());
        self.call(move |connection| {
            let added = connection.execute(
                "INSERT INTO client_calls
                     (id, tenant_id, session_id, tool, arguments, state, created_at)
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
            session_owned(added > 0, &tenant, &call.session)
        })
    }

    fn client_calls<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, Vec<ClientCallRow>> {
        self.client_calls_where(tenant, session, "")
    }

    fn pending_client_calls<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, Vec<ClientCallRow>> {
        self.client_calls_where(tenant, session, " AND state = 'pending'")
    }

    fn client_call<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
        id: &'a str,
    ) -> StoreFuture<'a, Option<ClientCallRow>> {
        let (tenant, session, id) = (tenant.to_owned(), session.to_owned(), id.to_owned());
        self.call(move |connection| {
            Ok(connection
                .query_row(
                    &format!(
                        "SELECT {CLIENT_CALL_COLUMNS} FROM client_calls
                         WHERE tenant_id = ?1 AND session_id = ?2 AND id = ?3"
                    ),
                    params![tenant, session, id],
                    client_call_row,
                )
                .optional()?)
        })
    }

    fn answer_client_call<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
        id: &'a str,
        answer: &'a serde_json::Value,
    ) -> StoreFuture<'a, bool> {
        let (tenant, session, id, answer) = (
            tenant.to_owned(),
            session.to_owned(),
            id.to_owned(),
            answer.to_string(),
        );
        self.call(move |connection| {
            let changed = connection.execute(
                "UPDATE client_calls SET state = 'answered', answer = ?4, answered_at = ?5
                 WHERE tenant_id = ?1 AND session_id = ?2 AND id = ?3 AND state = 'pending'",
                params![tenant, session, id, answer, to_i64(now())],
            )?;
            Ok(changed > 0)
        })
    }

    fn add_approval<'a>(
        &'a self,
        tenant: &'a str,
        approval: &'a ApprovalRow,
    ) -> StoreFuture<'a, ()> {
        let (tenant, approval) = (tenant.to_owned(), approval.clone());
        self.call(move |connection| {
            let classes = json_text(&approval.classes)?;
            let added = connection.execute(
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
            session_owned(added > 0, &tenant, &approval.session)
        })
    }

    fn pending_approvals<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<ApprovalRow>> {
        let tenant = tenant.to_owned();
        self.call(move |connection| {
            rows(
                connection,
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals
                     WHERE tenant_id = ?1 AND state = 'pending' ORDER BY created_at, id"
                ),
                params![tenant],
                approval_row,
            )
        })
    }

    fn approval<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> StoreFuture<'a, Option<ApprovalRow>> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.call(move |connection| {
            Ok(connection
                .query_row(
                    &format!(
                        "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE tenant_id = ?1 AND id = ?2"
                    ),
                    params![tenant, id],
                    approval_row,
                )
                .optional()?)
        })
    }

    fn allowed_for_session<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, Vec<String>> {
        let (tenant, session) = (tenant.to_owned(), session.to_owned());
        self.call(move |connection| {
            rows(
                connection,
                "SELECT DISTINCT tool FROM approvals
                 WHERE tenant_id = ?1 AND session_id = ?2 AND state = 'allowed_for_session'",
                params![tenant, session],
                |row| row.get(0),
            )
        })
    }

    fn decide_approval<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        state: &'a str,
        decided_by: &'a str,
    ) -> StoreFuture<'a, bool> {
        let (tenant, id, state, decided_by) = (
            tenant.to_owned(),
            id.to_owned(),
            state.to_owned(),
            decided_by.to_owned(),
        );
        self.call(move |connection| {
            let changed = connection.execute(
                "UPDATE approvals SET state = ?3, decided_by = ?4, decided_at = ?5
                 WHERE tenant_id = ?1 AND id = ?2 AND state = 'pending'",
                params![tenant, id, state, decided_by, to_i64(now())],
            )?;
            Ok(changed > 0)
        })
    }
}

impl SqliteStorage {
    /// The text column `select` (`SELECT column FROM table`) of the tenant's row `name`.
    fn named_text(
        &self,
        select: &'static str,
        tenant: &str,
        name: &str,
    ) -> StoreFuture<'static, Option<String>> {
        let (tenant, name) = (tenant.to_owned(), name.to_owned());
        self.call(move |connection| {
            Ok(connection
                .query_row(
                    &format!("{select} WHERE tenant_id = ?1 AND name = ?2"),
                    params![tenant, name],
                    |row| row.get(0),
                )
                .optional()?)
        })
    }

    /// Deletes the tenant's row `name` of a `(tenant_id, name)` table; whether there was one.
    fn delete_named(
        &self,
        table: &'static str,
        tenant: &str,
        name: &str,
    ) -> StoreFuture<'static, bool> {
        let (tenant, name) = (tenant.to_owned(), name.to_owned());
        self.call(move |connection| {
            let changed = connection.execute(
                &format!("DELETE FROM {table} WHERE tenant_id = ?1 AND name = ?2"),
                params![tenant, name],
            )?;
            Ok(changed > 0)
        })
    }

    /// The session's client calls (`and`: a further condition), oldest first.
    fn client_calls_where(
        &self,
        tenant: &str,
        session: &str,
        and: &'static str,
    ) -> StoreFuture<'static, Vec<ClientCallRow>> {
        let (tenant, session) = (tenant.to_owned(), session.to_owned());
        self.call(move |connection| {
            rows(
                connection,
                &format!(
                    "SELECT {CLIENT_CALL_COLUMNS} FROM client_calls
                     WHERE tenant_id = ?1 AND session_id = ?2{and} ORDER BY created_at, id"
                ),
                params![tenant, session],
                client_call_row,
            )
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// One runtime thread: were a call to block it, the runtime could do nothing else.
    #[tokio::test(flavor = "current_thread")]
    async fn a_call_runs_on_the_connection_s_thread_even_when_its_caller_stops_waiting() {
        let store = SqliteStorage::in_memory().unwrap();
        drop(store.ensure_tenant("acme"));
        let tenants = store.list_tenants().await.unwrap();
        assert_eq!(tenants.len(), 1);
        assert_eq!(tenants[0].name, "acme");
        let (ours, other) = tokio::join!(store.create_session("acme", None), async { 7 });
        assert_eq!(ours.unwrap().state, SessionState::Idle);
        assert_eq!(other, 7);
    }

    #[tokio::test]
    async fn a_new_database_takes_every_migration() {
        let store = SqliteStorage::in_memory().unwrap();
        let version = store
            .call(|connection| {
                Ok(
                    connection.query_row("SELECT version FROM schema_version", [], |row| {
                        row.get::<_, i64>(0)
                    })?,
                )
            })
            .await
            .unwrap();
        assert_eq!(version, crate::SCHEMA_VERSION);
        assert_eq!(
            MIGRATIONS.len(),
            usize::try_from(crate::SCHEMA_VERSION).unwrap()
        );
    }
}
