//! The service's PostgreSQL storage backend: [`PgStorage`] implements the async [`ServiceStorage`] contract of `warden-store` over tokio-postgres, awaiting a small pool of connections on its caller's runtime (it has none of its own), and knows no HTTP. Its schema is versioned like SQLite's and migrated at connect; a newer schema is refused. The gate's audit trail and the tenants' knowledge collections in the same database serve synchronous contracts, so they work on a bridge runtime of their own.

mod audit;
mod bridge;
mod knowledge;
mod pool;
mod schema;
mod signals;

pub use audit::{AUDIT_BATCH_MAX, PgAudit};
pub use knowledge::{PgKnowledge, PgKnowledgeStore};
pub use signals::{PgSignals, SIGNAL_CHANNEL};

use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio_postgres::Row;
use tokio_postgres::types::{FromSql, ToSql};
use warden_config::redact_database_url as redact_url;
use warden_store::{
    ApprovalRow, ClientCallRow, EventRow, IssuedKey, IssuedWidgetToken, KeyRow, Principal,
    PromptRow, Role, RunHold, SecretRow, ServerRow, ServiceSignals, ServiceStorage, SessionRow,
    SessionState, SkillRow, StoreError, StoreFuture, TenantRow, WidgetScope, now, random_id,
    secret_hash, session_owned, to_i64, to_u64,
};

use crate::bridge::Bridge;
use crate::pool::Pool;

/// Connections a [`PgStorage`] keeps at most unless told otherwise.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// The PostgreSQL backend: every instance of the service pointed at one database shares it.
pub struct PgStorage {
    /// The URL with its password redacted (for messages).
    target: String,
    pool: Arc<Pool>,
    /// LISTEN/NOTIFY: every instance on the database hears of a change at once (and waiters
    /// still look at the store periodically, should a notification be missed).
    signals: PgSignals,
    /// The bridge of the audit trail and the knowledge collections, shared while either lives
    /// (the storage itself holds no runtime).
    bridge: Mutex<Weak<Bridge>>,
}

impl std::fmt::Debug for PgStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStorage").finish_non_exhaustive()
    }
}

/// A statement's parameters.
type Params<'p> = [&'p (dyn ToSql + Sync)];

impl PgStorage {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/database`), with
    /// [`DEFAULT_POOL_SIZE`] connections at most, and brings its schema to the current version.
    /// Its connections are driven by the runtime this is awaited on.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, DEFAULT_POOL_SIZE).await
    }

    /// As [`connect`](Self::connect), with at most `pool_size` connections (at least 1).
    pub async fn connect_with(url: &str, pool_size: usize) -> Result<Self, StoreError> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|error| {
            StoreError::Backend(format!(
                "{} is not a PostgreSQL URL: {error}",
                redact_url(url)
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        config.application_name("warden");
        let target = redact_url(url);
        let pool = Arc::new(Pool::new(config, pool_size.max(1)));
        let migrated = async {
            let mut connection = pool.get().await?;
            schema::migrate(&mut connection).await
        };
        migrated.await.map_err(|error| match error {
            StoreError::Backend(message) => {
                StoreError::Backend(format!("connecting to {target}: {message}"))
            }
            other => other,
        })?;
        Ok(Self {
            signals: PgSignals::new(Arc::clone(&pool)),
            target,
            pool,
            bridge: Mutex::new(Weak::new()),
        })
    }

    /// The gate's audit trail in this database, shared by every instance on it: records are
    /// group-committed by a writer task with a connection of its own, and queries use the
    /// bridge's pool.
    pub fn audit(&self) -> Result<PgAudit, StoreError> {
        Ok(PgAudit::start(self.bridge()?, self.target.clone()))
    }

    /// The tenants' knowledge collections in this database, shared by every instance on it;
    /// its tables are made when missing, and its vectors' table when the database has pgvector.
    pub fn knowledge(&self) -> Result<PgKnowledgeStore, StoreError> {
        PgKnowledgeStore::open(self.bridge()?)
    }

    /// The bridge the audit trail and the knowledge collections share, made when neither has
    /// one alive.
    fn bridge(&self) -> Result<Arc<Bridge>, StoreError> {
        let mut held = self.bridge.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(bridge) = held.upgrade() {
            return Ok(bridge);
        }
        let bridge = Arc::new(Bridge::new(self.pool.config().clone(), self.pool.size())?);
        *held = Arc::downgrade(&bridge);
        Ok(bridge)
    }

    /// Whether `sql` (an INSERT, UPDATE or DELETE) changed a row.
    async fn changed(&self, sql: &str, params: &Params<'_>) -> Result<bool, StoreError> {
        let changed = self
            .pool
            .get()
            .await?
            .execute(sql, params)
            .await
            .map_err(db)?;
        Ok(changed > 0)
    }

    /// The rows `sql` selects, each read by `read`.
    async fn rows<T>(
        &self,
        sql: &str,
        params: &Params<'_>,
        read: impl Fn(&Row) -> Result<T, StoreError> + Send,
    ) -> Result<Vec<T>, StoreError> {
        let rows = self
            .pool
            .get()
            .await?
            .query(sql, params)
            .await
            .map_err(db)?;
        rows.iter().map(read).collect()
    }

    /// The row `sql` selects (by a key: one at most), if any, read by `read`.
    async fn row<T>(
        &self,
        sql: &str,
        params: &Params<'_>,
        read: impl Fn(&Row) -> Result<T, StoreError> + Send,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.rows(sql, params, read).await?.into_iter().next())
    }

    /// The first column of the one row `sql` answers with (a count, or an upsert's
    /// `RETURNING (xmax = 0)`: whether it inserted).
    async fn one<T: for<'r> FromSql<'r>>(
        &self,
        sql: &str,
        params: &Params<'_>,
    ) -> Result<T, StoreError> {
        let row = self
            .pool
            .get()
            .await?
            .query_one(sql, params)
            .await
            .map_err(db)?;
        col(&row, 0)
    }
}

/// A tokio-postgres error as the contract's error (its text names no password).
pub(crate) fn db(error: tokio_postgres::Error) -> StoreError {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    StoreError::Backend(message)
}

pub(crate) fn col<'a, T: FromSql<'a>>(row: &'a Row, index: usize) -> Result<T, StoreError> {
    row.try_get(index).map_err(db)
}

fn json_text(value: &impl serde::Serialize) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|error| StoreError::Corrupt(error.to_string()))
}

const SESSION_COLUMNS: &str = "id, agent, state, created_at, updated_at";

fn session_row(row: &Row) -> Result<SessionRow, StoreError> {
    Ok(SessionRow {
        id: col(row, 0)?,
        agent: col(row, 1)?,
        state: SessionState::parse(col(row, 2)?),
        created_at: to_u64(col(row, 3)?),
        updated_at: to_u64(col(row, 4)?),
    })
}

const CLIENT_CALL_COLUMNS: &str = "id, session_id, tool, arguments, state, answer, created_at";

fn client_call_row(row: &Row) -> Result<ClientCallRow, StoreError> {
    let arguments: &str = col(row, 3)?;
    let answer: Option<&str> = col(row, 5)?;
    Ok(ClientCallRow {
        id: col(row, 0)?,
        session: col(row, 1)?,
        tool: col(row, 2)?,
        arguments: serde_json::from_str(arguments).unwrap_or(serde_json::Value::Null),
        state: col(row, 4)?,
        answer: answer.and_then(|text| serde_json::from_str(text).ok()),
        created_at: to_u64(col(row, 6)?),
    })
}

const APPROVAL_COLUMNS: &str = "id, session_id, tool, arguments, classes, caller, reason, state, decided_by, created_at, requested_by";

fn approval_row(row: &Row) -> Result<ApprovalRow, StoreError> {
    let arguments: &str = col(row, 3)?;
    let classes: &str = col(row, 4)?;
    Ok(ApprovalRow {
        id: col(row, 0)?,
        session: col(row, 1)?,
        tool: col(row, 2)?,
        arguments: serde_json::from_str(arguments).unwrap_or(serde_json::Value::Null),
        classes: serde_json::from_str(classes).unwrap_or_default(),
        caller: col(row, 5)?,
        reason: col(row, 6)?,
        state: col(row, 7)?,
        decided_by: col(row, 8)?,
        created_at: to_u64(col(row, 9)?),
        requested_by: col(row, 10)?,
    })
}

fn prompt_row(row: &Row) -> Result<PromptRow, StoreError> {
    let snapshot: &str = col(row, 0)?;
    serde_json::from_str(snapshot)
        .map_err(|error| StoreError::Corrupt(format!("a prompt: {error}")))
}

/// The first column of a row, as text.
fn text(row: &Row) -> Result<String, StoreError> {
    col(row, 0)
}

/// States as the `state = ANY($n)` parameter takes them.
fn state_names(states: &[SessionState]) -> Vec<&'static str> {
    states.iter().map(|state| state.as_str()).collect()
}
/// Stores the next event of a session inside `transaction`: the session's counter row is
/// incremented (`UPDATE … RETURNING` holds its lock to the commit), so concurrent appends get
/// 1, 2, … without gaps or repeats.
async fn append_in(
    transaction: &tokio_postgres::Transaction<'_>,
    tenant: &str,
    id: &str,
    event: &str,
) -> Result<u64, StoreError> {
    let row = transaction
        .query_opt(
            "UPDATE sessions SET event_seq = event_seq + 1 WHERE tenant_id = $1 AND id = $2
             RETURNING event_seq",
            &[&tenant, &id],
        )
        .await
        .map_err(db)?;
    let Some(row) = row else {
        return Err(StoreError::Corrupt(format!(
            "session {id} of tenant {tenant} does not exist"
        )));
    };
    let seq: i64 = col(&row, 0)?;
    transaction
        .execute(
            "INSERT INTO events (session_id, seq, at, event) VALUES ($1, $2, $3, $4)",
            &[&id, &seq, &to_i64(now()), &event],
        )
        .await
        .map_err(db)?;
    Ok(to_u64(seq))
}

/// Moves a running session to interrupted inside `transaction`, gives its lease back and stores
/// a `run_interrupted` event saying `reason`; whether it was running.
async fn interrupt_in(
    transaction: &tokio_postgres::Transaction<'_>,
    tenant: &str,
    id: &str,
    reason: &str,
) -> Result<bool, StoreError> {
    // The lease first, as a run's fenced write takes it: the two never wait on each other.
    transaction
        .execute(
            "SELECT 1 FROM run_leases WHERE session_id = $1 FOR UPDATE",
            &[&id],
        )
        .await
        .map_err(db)?;
    let moved = transaction
        .execute(
            "UPDATE sessions SET state = 'interrupted', updated_at = $3
             WHERE tenant_id = $1 AND id = $2 AND state = 'running'",
            &[&tenant, &id, &to_i64(now())],
        )
        .await
        .map_err(db)?;
    if moved == 0 {
        return Ok(false);
    }
    transaction
        .execute("DELETE FROM run_leases WHERE session_id = $1", &[&id])
        .await
        .map_err(db)?;
    let event = serde_json::json!({"type": "run_interrupted", "reason": reason}).to_string();
    append_in(transaction, tenant, id, &event).await?;
    Ok(true)
}

impl ServiceStorage for PgStorage {
    fn signals(&self) -> &dyn ServiceSignals {
        &self.signals
    }

    /// Several instances may share a PostgreSQL database: runs are leased.
    fn is_shared(&self) -> bool {
        true
    }

    /// Its signals travel by LISTEN/NOTIFY to every instance on the database.
    fn signals_reach_every_instance(&self) -> bool {
        true
    }

    fn begin_run<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        from: &'a [SessionState],
        holder: &'a str,
        until: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut connection = self.pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            let changed = transaction
                .execute(
                    "UPDATE sessions SET state = 'running', updated_at = $3
                     WHERE tenant_id = $1 AND id = $2 AND state = ANY($4)",
                    &[&tenant, &id, &to_i64(now()), &state_names(from)],
                )
                .await
                .map_err(db)?;
            if changed > 0 {
                transaction
                    .execute(
                        "INSERT INTO run_leases (session_id, owner, lease_until) VALUES ($1, $2, $3)
                         ON CONFLICT (session_id) DO UPDATE SET owner = excluded.owner,
                             lease_until = excluded.lease_until",
                        &[&id, &holder, &to_i64(until)],
                    )
                    .await
                    .map_err(db)?;
            }
            transaction.commit().await.map_err(db)?;
            Ok(changed > 0)
        })
    }

    fn renew_runs<'a>(&'a self, runs: &'a [RunHold], until: u64) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            if runs.is_empty() {
                return Ok(Vec::new());
            }
            let sessions: Vec<&str> = runs.iter().map(|run| run.session.as_str()).collect();
            let holders: Vec<&str> = runs.iter().map(|run| run.holder.as_str()).collect();
            self.rows(
                "UPDATE run_leases l SET lease_until = $3
                 FROM UNNEST($1::text[], $2::text[]) AS held(session_id, owner)
                 WHERE l.session_id = held.session_id AND l.owner = held.owner
                 RETURNING l.session_id",
                &[&sessions, &holders, &to_i64(until)],
                text,
            )
            .await
        })
    }

    fn append_run_event<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        holder: &'a str,
        event: &'a serde_json::Value,
    ) -> StoreFuture<'a, Option<u64>> {
        Box::pin(async move {
            let mut connection = self.pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            // The lease row stays locked to the commit: an interruption waits for this event.
            let held = transaction
                .query_opt(
                    "SELECT 1 FROM run_leases WHERE session_id = $1 AND owner = $2 FOR SHARE",
                    &[&id, &holder],
                )
                .await
                .map_err(db)?;
            if held.is_none() {
                return Ok(None);
            }
            let seq = append_in(&transaction, tenant, id, &event.to_string()).await?;
            transaction.commit().await.map_err(db)?;
            Ok(Some(seq))
        })
    }

    fn save_run_messages<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        holder: &'a str,
        messages: &'a serde_json::Value,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            self.changed(
                "UPDATE sessions SET messages = $4, updated_at = $5
                 WHERE tenant_id = $1 AND id = $2 AND EXISTS
                     (SELECT 1 FROM run_leases WHERE session_id = $2 AND owner = $3)",
                &[&tenant, &id, &holder, &messages.to_string(), &to_i64(now())],
            )
            .await
        })
    }

    fn end_run<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        holder: &'a str,
        to: SessionState,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut connection = self.pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            let released = transaction
                .execute(
                    "DELETE FROM run_leases WHERE session_id = $1 AND owner = $2",
                    &[&id, &holder],
                )
                .await
                .map_err(db)?;
            let changed = if released > 0 {
                transaction
                    .execute(
                        "UPDATE sessions SET state = $3, updated_at = $4
                         WHERE tenant_id = $1 AND id = $2 AND state = 'running'",
                        &[&tenant, &id, &to.as_str(), &to_i64(now())],
                    )
                    .await
                    .map_err(db)?
            } else {
                0
            };
            transaction.commit().await.map_err(db)?;
            Ok(changed > 0)
        })
    }

    fn interrupt_lapsed<'a>(&'a self, now: u64, grace: u64) -> StoreFuture<'a, usize> {
        Box::pin(async move {
            let mut connection = self.pool.get().await?;
            let lapsed = connection
                .query(
                    "SELECT s.tenant_id, s.id FROM sessions s
                     LEFT JOIN run_leases l ON l.session_id = s.id
                     WHERE s.state = 'running'
                       AND (l.lease_until < $1 OR (l.session_id IS NULL AND s.updated_at < $2))",
                    &[&to_i64(now), &to_i64(now.saturating_sub(grace))],
                )
                .await
                .map_err(db)?;
            let mut interrupted = 0;
            for row in &lapsed {
                let tenant: &str = col(row, 0)?;
                let id: &str = col(row, 1)?;
                let transaction = connection.transaction().await.map_err(db)?;
                if interrupt_in(
                    &transaction,
                    tenant,
                    id,
                    "the instance running it stopped renewing its lease",
                )
                .await?
                {
                    interrupted += 1;
                    transaction
                        .execute(
                            "UPDATE approvals SET state = 'expired', decided_at = $2
                             WHERE session_id = $1 AND state = 'pending'",
                            &[&id, &to_i64(now)],
                        )
                        .await
                        .map_err(db)?;
                }
                transaction.commit().await.map_err(db)?;
            }
            Ok(interrupted)
        })
    }

    fn ensure_tenant<'a>(&'a self, name: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.changed(
                "INSERT INTO tenants (id, created_at) VALUES ($1, $2)
                 ON CONFLICT (id) DO NOTHING",
                &[&name, &to_i64(now())],
            )
            .await
            .map(drop)
        })
    }

    fn issue_key<'a>(
        &'a self,
        tenant: &'a str,
        caller: &'a str,
        role: Role,
    ) -> StoreFuture<'a, IssuedKey> {
        Box::pin(async move {
            self.ensure_tenant(tenant).await?;
            let id = random_id("key_")?;
            let secret = random_id("wsk_")?;
            self.changed(
                "INSERT INTO api_keys (id, tenant_id, caller, role, secret_sha256, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &id,
                    &tenant,
                    &caller,
                    &role.as_str(),
                    &secret_hash(&secret),
                    &to_i64(now()),
                ],
            )
            .await?;
            Ok(IssuedKey { id, secret })
        })
    }

    fn revoke_key<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            self.changed(
                "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                &[&id, &to_i64(now())],
            )
            .await
        })
    }

    fn resolve_key<'a>(&'a self, secret: &'a str) -> StoreFuture<'a, Option<Principal>> {
        Box::pin(async move {
            // Looked up by the hash: the comparison never touches the secret itself.
            let hash = secret_hash(secret);
            let key = self
                .row(
                    "SELECT tenant_id, caller, role, id FROM api_keys
                     WHERE secret_sha256 = $1 AND revoked_at IS NULL",
                    &[&hash],
                    |row| {
                        Ok(Principal {
                            tenant: col(row, 0)?,
                            caller: col(row, 1)?,
                            role: Role::parse(col(row, 2)?),
                            key: col(row, 3)?,
                            widget: None,
                        })
                    },
                )
                .await?;
            if key.is_some() {
                return Ok(key);
            }
            self.row(
                "SELECT id, tenant_id, caller, agent FROM widget_tokens
                 WHERE secret_sha256 = $1 AND expires_at > $2",
                &[&hash, &to_i64(now())],
                |row| {
                    Ok(Principal {
                        tenant: col(row, 1)?,
                        caller: col(row, 2)?,
                        role: Role::Widget,
                        key: col(row, 0)?,
                        widget: Some(WidgetScope {
                            token: col(row, 0)?,
                            agent: col(row, 3)?,
                        }),
                    })
                },
            )
            .await
        })
    }

    fn issue_widget_token<'a>(
        &'a self,
        tenant: &'a str,
        agent: &'a str,
        caller: &'a str,
        ttl_sec: u64,
    ) -> StoreFuture<'a, IssuedWidgetToken> {
        Box::pin(async move {
            let id = random_id("wid_")?;
            let secret = random_id("wwt_")?;
            let at = now();
            let expires_at = at.saturating_add(ttl_sec);
            let connection = self.pool.get().await?;
            // Tokens expired for a day are of no use to anyone: they go as new ones are made.
            connection
                .execute(
                    "DELETE FROM widget_tokens WHERE expires_at < $1",
                    &[&to_i64(at.saturating_sub(24 * 60 * 60))],
                )
                .await
                .map_err(db)?;
            connection
                .execute(
                    "INSERT INTO widget_tokens
                         (id, tenant_id, agent, caller, secret_sha256, created_at, expires_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7)",
                    &[
                        &id,
                        &tenant,
                        &agent,
                        &caller,
                        &secret_hash(&secret),
                        &to_i64(at),
                        &to_i64(expires_at),
                    ],
                )
                .await
                .map_err(db)?;
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
        Box::pin(async move {
            self.changed(
                "INSERT INTO widget_sessions (tenant_id, token_id, session_id)
                 VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                &[&tenant, &token, &session],
            )
            .await
            .map(drop)
        })
    }

    fn widget_owns_session<'a>(
        &'a self,
        tenant: &'a str,
        token: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let found = self
                .row(
                    "SELECT 1 FROM widget_sessions
                     WHERE tenant_id = $1 AND token_id = $2 AND session_id = $3",
                    &[&tenant, &token, &session],
                    |_| Ok(()),
                )
                .await?;
            Ok(found.is_some())
        })
    }

    fn create_session<'a>(
        &'a self,
        tenant: &'a str,
        agent: Option<&'a str>,
    ) -> StoreFuture<'a, SessionRow> {
        Box::pin(async move {
            let id = random_id("ses_")?;
            let at = now();
            self.changed(
                "INSERT INTO sessions (id, tenant_id, agent, state, created_at, updated_at)
                 VALUES ($1, $2, $3, 'idle', $4, $4)",
                &[&id, &tenant, &agent, &to_i64(at)],
            )
            .await?;
            Ok(SessionRow {
                id,
                agent: agent.map(str::to_owned),
                state: SessionState::Idle,
                created_at: at,
                updated_at: at,
            })
        })
    }

    fn list_sessions<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<SessionRow>> {
        Box::pin(async move {
            self.rows(
                &format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions
                     WHERE tenant_id = $1 ORDER BY created_at, id"
                ),
                &[&tenant],
                session_row,
            )
            .await
        })
    }

    fn count_sessions<'a>(
        &'a self,
        tenant: &'a str,
        creator: Option<&'a str>,
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let count: i64 = match creator {
                None => {
                    self.one(
                        "SELECT COUNT(*) FROM sessions WHERE tenant_id = $1",
                        &[&tenant],
                    )
                    .await?
                }
                Some(creator) => {
                    self.one(
                        "SELECT COUNT(*) FROM widget_sessions
                         WHERE tenant_id = $1 AND token_id = $2",
                        &[&tenant, &creator],
                    )
                    .await?
                }
            };
            Ok(to_u64(count))
        })
    }

    fn session<'a>(&'a self, tenant: &'a str, id: &'a str) -> StoreFuture<'a, Option<SessionRow>> {
        Box::pin(async move {
            self.row(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant_id = $1 AND id = $2"),
                &[&tenant, &id],
                session_row,
            )
            .await
        })
    }

    fn delete_session<'a>(&'a self, tenant: &'a str, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            self.changed(
                "DELETE FROM sessions WHERE tenant_id = $1 AND id = $2",
                &[&tenant, &id],
            )
            .await
        })
    }

    fn transition<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        from: &'a [SessionState],
        to: SessionState,
    ) -> StoreFuture<'a, bool> {
        // One statement: the row's lock makes it a compare-and-set across instances.
        Box::pin(async move {
            let mut connection = self.pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            let changed = transaction
                .execute(
                    "UPDATE sessions SET state = $3, updated_at = $4
                     WHERE tenant_id = $1 AND id = $2 AND state = ANY($5)",
                    &[
                        &tenant,
                        &id,
                        &to.as_str(),
                        &to_i64(now()),
                        &state_names(from),
                    ],
                )
                .await
                .map_err(db)?;
            // A run's lease ends with it; the next run leases afresh.
            if changed > 0 && to != SessionState::Running {
                transaction
                    .execute("DELETE FROM run_leases WHERE session_id = $1", &[&id])
                    .await
                    .map_err(db)?;
            }
            transaction.commit().await.map_err(db)?;
            Ok(changed > 0)
        })
    }

    fn messages<'a>(&'a self, tenant: &'a str, id: &'a str) -> StoreFuture<'a, serde_json::Value> {
        Box::pin(async move {
            let stored = self
                .row(
                    "SELECT messages FROM sessions WHERE tenant_id = $1 AND id = $2",
                    &[&tenant, &id],
                    text,
                )
                .await?;
            match stored {
                None => Ok(serde_json::Value::Array(Vec::new())),
                Some(stored) => serde_json::from_str(&stored)
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
        Box::pin(async move {
            let mut connection = self.pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            let seq = append_in(&transaction, tenant, id, &event.to_string()).await?;
            transaction.commit().await.map_err(db)?;
            Ok(seq)
        })
    }

    fn events_after<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        after: u64,
        limit: usize,
    ) -> StoreFuture<'a, Vec<EventRow>> {
        Box::pin(async move {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            self.rows(
                "SELECT events.seq, events.at, events.event FROM events
                 JOIN sessions ON sessions.id = events.session_id
                 WHERE sessions.tenant_id = $1 AND events.session_id = $2 AND events.seq > $3
                 ORDER BY events.seq LIMIT $4",
                &[&tenant, &id, &to_i64(after), &limit],
                |row| {
                    Ok(EventRow {
                        seq: to_u64(col(row, 0)?),
                        at: to_u64(col(row, 1)?),
                        event: serde_json::from_str(col(row, 2)?)
                            .map_err(|error| StoreError::Corrupt(error.to_string()))?,
                    })
                },
            )
            .await
        })
    }

    fn interrupt_running<'a>(&'a self) -> StoreFuture<'a, usize> {
        Box::pin(async move {
            let mut connection = self.pool.get().await?;
            let running = connection
                .query(
                    "SELECT tenant_id, id FROM sessions WHERE state = 'running'",
                    &[],
                )
                .await
                .map_err(db)?;
            connection
                .execute(
                    "UPDATE approvals SET state = 'expired', decided_at = $1
                     WHERE state = 'pending'",
                    &[&to_i64(now())],
                )
                .await
                .map_err(db)?;
            for row in &running {
                let tenant: &str = col(row, 0)?;
                let id: &str = col(row, 1)?;
                let transaction = connection.transaction().await.map_err(db)?;
                interrupt_in(
                    &transaction,
                    tenant,
                    id,
                    "the service stopped while the run was going",
                )
                .await?;
                transaction.commit().await.map_err(db)?;
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
        // `xmax = 0` only on a row this statement inserted (an update leaves its own xid).
        Box::pin(async move {
            self.one(
                "INSERT INTO skills (tenant_id, name, description, text, updated_at)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (tenant_id, name) DO UPDATE
                 SET description = excluded.description, text = excluded.text,
                     updated_at = excluded.updated_at
                 RETURNING (xmax = 0)",
                &[&tenant, &name, &description, &text, &to_i64(now())],
            )
            .await
        })
    }

    fn list_skills<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<SkillRow>> {
        Box::pin(async move {
            self.rows(
                "SELECT name, description, updated_at FROM skills
                 WHERE tenant_id = $1 ORDER BY name",
                &[&tenant],
                |row| {
                    Ok(SkillRow {
                        name: col(row, 0)?,
                        description: col(row, 1)?,
                        updated_at: to_u64(col(row, 2)?),
                    })
                },
            )
            .await
        })
    }

    fn skill_text<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, Option<String>> {
        Box::pin(self.named_text("SELECT text FROM skills", tenant, name))
    }

    fn delete_skill<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.delete_named("skills", tenant, name))
    }

    fn put_server<'a>(&'a self, tenant: &'a str, server: &'a ServerRow) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let headers = json_text(&server.headers)?;
            self.one(
                "INSERT INTO servers (tenant_id, name, url, headers, created_at)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (tenant_id, name) DO UPDATE SET url = excluded.url,
                     headers = excluded.headers
                 RETURNING (xmax = 0)",
                &[
                    &tenant,
                    &server.name,
                    &server.url,
                    &headers,
                    &to_i64(server.created_at),
                ],
            )
            .await
        })
    }

    fn list_servers<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<ServerRow>> {
        Box::pin(async move {
            self.rows(
                "SELECT name, url, headers, created_at FROM servers
                 WHERE tenant_id = $1 ORDER BY name",
                &[&tenant],
                |row| {
                    Ok(ServerRow {
                        name: col(row, 0)?,
                        url: col(row, 1)?,
                        headers: serde_json::from_str(col(row, 2)?).unwrap_or_default(),
                        created_at: to_u64(col(row, 3)?),
                    })
                },
            )
            .await
        })
    }

    fn delete_server<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.delete_named("servers", tenant, name))
    }

    fn put_tenant_secret<'a>(
        &'a self,
        tenant: &'a str,
        name: &'a str,
        value: &'a str,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            self.one(
                "INSERT INTO tenant_secrets (tenant_id, name, value, updated_at)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (tenant_id, name) DO UPDATE SET value = excluded.value,
                     updated_at = excluded.updated_at
                 RETURNING (xmax = 0)",
                &[&tenant, &name, &value, &to_i64(now())],
            )
            .await
        })
    }

    fn tenant_secret_names<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<SecretRow>> {
        Box::pin(async move {
            self.rows(
                "SELECT name, updated_at FROM tenant_secrets
                 WHERE tenant_id = $1 ORDER BY name",
                &[&tenant],
                |row| {
                    Ok(SecretRow {
                        name: col(row, 0)?,
                        updated_at: to_u64(col(row, 1)?),
                    })
                },
            )
            .await
        })
    }

    fn tenant_secret<'a>(
        &'a self,
        tenant: &'a str,
        name: &'a str,
    ) -> StoreFuture<'a, Option<String>> {
        Box::pin(self.named_text("SELECT value FROM tenant_secrets", tenant, name))
    }

    fn delete_tenant_secret<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.delete_named("tenant_secrets", tenant, name))
    }

    fn put_prompt<'a>(&'a self, tenant: &'a str, prompt: &'a PromptRow) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let snapshot = json_text(prompt)?;
            self.one(
                "INSERT INTO prompts (tenant_id, name, snapshot, created_at)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (tenant_id, name) DO UPDATE SET snapshot = excluded.snapshot,
                     created_at = excluded.created_at
                 RETURNING (xmax = 0)",
                &[&tenant, &prompt.name, &snapshot, &to_i64(prompt.created_at)],
            )
            .await
        })
    }

    fn list_prompts<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<PromptRow>> {
        Box::pin(async move {
            self.rows(
                "SELECT snapshot FROM prompts WHERE tenant_id = $1 ORDER BY name",
                &[&tenant],
                prompt_row,
            )
            .await
        })
    }

    fn prompt<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, Option<PromptRow>> {
        Box::pin(async move {
            self.row(
                "SELECT snapshot FROM prompts WHERE tenant_id = $1 AND name = $2",
                &[&tenant, &name],
                prompt_row,
            )
            .await
        })
    }

    fn delete_prompt<'a>(&'a self, tenant: &'a str, name: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(self.delete_named("prompts", tenant, name))
    }

    fn list_tenants<'a>(&'a self) -> StoreFuture<'a, Vec<TenantRow>> {
        Box::pin(async move {
            self.rows(
                "SELECT t.id, t.created_at,
                    (SELECT COUNT(*) FROM api_keys k
                     WHERE k.tenant_id = t.id AND k.revoked_at IS NULL),
                    (SELECT COUNT(*) FROM sessions s WHERE s.tenant_id = t.id)
                 FROM tenants t ORDER BY t.id",
                &[],
                |row| {
                    Ok(TenantRow {
                        name: col(row, 0)?,
                        created_at: to_u64(col(row, 1)?),
                        keys: to_u64(col(row, 2)?),
                        sessions: to_u64(col(row, 3)?),
                    })
                },
            )
            .await
        })
    }

    fn list_keys<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<KeyRow>> {
        Box::pin(async move {
            self.rows(
                "SELECT id, caller, role, created_at, revoked_at FROM api_keys
                 WHERE tenant_id = $1 ORDER BY created_at DESC, id",
                &[&tenant],
                |row| {
                    Ok(KeyRow {
                        id: col(row, 0)?,
                        caller: col(row, 1)?,
                        role: Role::parse(col(row, 2)?),
                        created_at: to_u64(col(row, 3)?),
                        revoked_at: col::<Option<i64>>(row, 4)?.map(to_u64),
                    })
                },
            )
            .await
        })
    }

    fn add_client_call<'a>(
        &'a self,
        tenant: &'a str,
        call: &'a ClientCallRow,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let added = self
                .changed(
                    "INSERT INTO client_calls
                         (id, tenant_id, session_id, tool, arguments, state, created_at)
                     SELECT $1, $2, $3, $4, $5, 'pending', $6
                     WHERE EXISTS (SELECT 1 FROM sessions WHERE tenant_id = $2 AND id = $3)",
                    &[
                        &call.id,
                        &tenant,
                        &call.session,
                        &call.tool,
                        &call.arguments.to_string(),
                        &to_i64(call.created_at),
                    ],
                )
                .await?;
            session_owned(added, tenant, &call.session)
        })
    }

    fn client_calls<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, Vec<ClientCallRow>> {
        Box::pin(self.client_calls_where(tenant, session, ""))
    }

    fn pending_client_calls<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, Vec<ClientCallRow>> {
        Box::pin(self.client_calls_where(tenant, session, " AND state = 'pending'"))
    }

    fn client_call<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
        id: &'a str,
    ) -> StoreFuture<'a, Option<ClientCallRow>> {
        Box::pin(async move {
            self.row(
                &format!(
                    "SELECT {CLIENT_CALL_COLUMNS} FROM client_calls
                     WHERE tenant_id = $1 AND session_id = $2 AND id = $3"
                ),
                &[&tenant, &session, &id],
                client_call_row,
            )
            .await
        })
    }

    fn answer_client_call<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
        id: &'a str,
        answer: &'a serde_json::Value,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            self.changed(
                "UPDATE client_calls SET state = 'answered', answer = $4, answered_at = $5
                 WHERE tenant_id = $1 AND session_id = $2 AND id = $3 AND state = 'pending'",
                &[&tenant, &session, &id, &answer.to_string(), &to_i64(now())],
            )
            .await
        })
    }

    fn add_approval<'a>(
        &'a self,
        tenant: &'a str,
        approval: &'a ApprovalRow,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let classes = json_text(&approval.classes)?;
            let added = self
                .changed(
                    "INSERT INTO approvals (id, tenant_id, session_id, tool, arguments, classes,
                                            caller, reason, state, created_at, requested_by)
                     SELECT $1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9, $10
                     WHERE EXISTS (SELECT 1 FROM sessions WHERE tenant_id = $2 AND id = $3)",
                    &[
                        &approval.id,
                        &tenant,
                        &approval.session,
                        &approval.tool,
                        &approval.arguments.to_string(),
                        &classes,
                        &approval.caller,
                        &approval.reason,
                        &to_i64(approval.created_at),
                        &approval.requested_by,
                    ],
                )
                .await?;
            session_owned(added, tenant, &approval.session)
        })
    }

    fn pending_approvals<'a>(&'a self, tenant: &'a str) -> StoreFuture<'a, Vec<ApprovalRow>> {
        Box::pin(async move {
            self.rows(
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals
                     WHERE tenant_id = $1 AND state = 'pending' ORDER BY created_at, id"
                ),
                &[&tenant],
                approval_row,
            )
            .await
        })
    }

    fn approval<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
    ) -> StoreFuture<'a, Option<ApprovalRow>> {
        Box::pin(async move {
            self.row(
                &format!(
                    "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE tenant_id = $1 AND id = $2"
                ),
                &[&tenant, &id],
                approval_row,
            )
            .await
        })
    }

    fn allowed_for_session<'a>(
        &'a self,
        tenant: &'a str,
        session: &'a str,
    ) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            self.rows(
                "SELECT DISTINCT tool FROM approvals
                 WHERE tenant_id = $1 AND session_id = $2 AND state = 'allowed_for_session'",
                &[&tenant, &session],
                text,
            )
            .await
        })
    }

    fn decide_approval<'a>(
        &'a self,
        tenant: &'a str,
        id: &'a str,
        state: &'a str,
        decided_by: &'a str,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            self.changed(
                "UPDATE approvals SET state = $3, decided_by = $4, decided_at = $5
                 WHERE tenant_id = $1 AND id = $2 AND state = 'pending'",
                &[&tenant, &id, &state, &decided_by, &to_i64(now())],
            )
            .await
        })
    }
}

impl PgStorage {
    /// The text column `select` (`SELECT column FROM table`) of the tenant's row `name`.
    async fn named_text(
        &self,
        select: &'static str,
        tenant: &str,
        name: &str,
    ) -> Result<Option<String>, StoreError> {
        self.row(
            &format!("{select} WHERE tenant_id = $1 AND name = $2"),
            &[&tenant, &name],
            text,
        )
        .await
    }

    /// Deletes the tenant's row `name` of a `(tenant_id, name)` table; whether there was one.
    async fn delete_named(
        &self,
        table: &'static str,
        tenant: &str,
        name: &str,
    ) -> Result<bool, StoreError> {
        self.changed(
            &format!("DELETE FROM {table} WHERE tenant_id = $1 AND name = $2"),
            &[&tenant, &name],
        )
        .await
    }

    /// The session's client calls (`and`: a further condition), oldest first.
    async fn client_calls_where(
        &self,
        tenant: &str,
        session: &str,
        and: &'static str,
    ) -> Result<Vec<ClientCallRow>, StoreError> {
        self.rows(
            &format!(
                "SELECT {CLIENT_CALL_COLUMNS} FROM client_calls
                 WHERE tenant_id = $1 AND session_id = $2{and} ORDER BY created_at, id"
            ),
            &[&tenant, &session],
            client_call_row,
        )
        .await
    }
}
