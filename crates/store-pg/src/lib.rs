//! The service's PostgreSQL storage backend: [`PgStorage`] implements the synchronous
//! [`ServiceStorage`] contract over tokio-postgres, on a runtime of its own (two worker threads)
//! with a small pool of connections, so any thread may call it, inside another runtime or not.
//! Its schema is versioned like SQLite's and migrated at connect; a newer schema is refused.

mod audit;
mod knowledge;
mod pool;
mod schema;
mod signals;

pub use audit::{AUDIT_BATCH_MAX, PgAudit};
pub use knowledge::{PgKnowledge, PgKnowledgeStore};
pub use signals::{PgSignals, SIGNAL_CHANNEL};

use std::future::Future;
use std::sync::Arc;

use tokio_postgres::Row;
use tokio_postgres::types::FromSql;
use warden_service::store_support::{now, random_id, secret_hash, session_owned};
use warden_service::{
    ApprovalRow, ClientCallRow, EventRow, IssuedKey, IssuedWidgetToken, KeyRow, Principal,
    PromptRow, Role, RunHold, SecretRow, ServerRow, ServiceSignals, ServiceStorage, SessionRow,
    SessionState, SkillRow, StoreError, TenantRow, WidgetScope,
};

use crate::pool::Pool;

use warden_config::redact_database_url as redact_url;

/// Connections a [`PgStorage`] keeps at most unless told otherwise.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// The PostgreSQL backend: every instance of the service pointed at one database shares it.
pub struct PgStorage {
    runtime: Arc<OwnedRuntime>,
    handle: tokio::runtime::Handle,
    /// The URL with its password redacted (for messages).
    target: String,
    pool: Arc<Pool>,
    /// LISTEN/NOTIFY: every instance on the database hears of a change at once (and waiters
    /// still look at the store periodically, should a notification be missed).
    signals: PgSignals,
}

impl std::fmt::Debug for PgStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStorage").finish_non_exhaustive()
    }
}

/// The runtime the storage and its audit sink share; shut down when the last of them goes.
pub(crate) struct OwnedRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        // Dropping a runtime inside another one's task panics; this one is let go in the
        // background instead (its connections close as their clients drop).
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl PgStorage {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/database`), with
    /// [`DEFAULT_POOL_SIZE`] connections at most, and brings its schema to the current version.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, DEFAULT_POOL_SIZE)
    }

    /// As [`connect`](Self::connect), with at most `pool_size` connections (at least 1).
    pub fn connect_with(url: &str, pool_size: usize) -> Result<Self, StoreError> {
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
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("warden-pg")
            .enable_all()
            .build()
            .map_err(|error| StoreError::Backend(format!("a runtime for PostgreSQL: {error}")))?;
        let where_to = redact_url(url);
        let pool = Arc::new(Pool::new(config, pool_size.max(1)));
        let storage = Self {
            handle: runtime.handle().clone(),
            signals: PgSignals::new(runtime.handle().clone(), Arc::clone(&pool)),
            runtime: Arc::new(OwnedRuntime(Some(runtime))),
            target: where_to.clone(),
            pool,
        };
        storage
            .run(|pool| async move {
                let mut connection = pool.get().await?;
                schema::migrate(&mut connection).await
            })
            .map_err(|error| match error {
                StoreError::Backend(message) => {
                    StoreError::Backend(format!("connecting to {where_to}: {message}"))
                }
                other => other,
            })?;
        Ok(storage)
    }

    /// The gate's audit trail in this database, shared by every instance on it: records are
    /// group-committed by a writer task with a connection of its own, and queries use the pool.
    pub fn audit(&self) -> PgAudit {
        PgAudit::start(
            Arc::clone(&self.runtime),
            self.handle.clone(),
            Arc::clone(&self.pool),
            self.target.clone(),
        )
    }

    /// The tenants' knowledge collections in this database, shared by every instance on it;
    /// its tables are made when missing, and its vectors' table when the database has pgvector.
    pub fn knowledge(&self) -> Result<PgKnowledgeStore, StoreError> {
        PgKnowledgeStore::open(
            Arc::clone(&self.runtime),
            self.handle.clone(),
            Arc::clone(&self.pool),
        )
    }

    fn run<T, F, Fut>(&self, job: F) -> Result<T, StoreError>
    where
        F: FnOnce(Arc<Pool>) -> Fut,
        Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        run_on(&self.handle, &self.pool, job)
    }
}

/// Runs `job` on the storage's own runtime and waits for its answer on this thread (never
/// `block_on`, which panics inside the caller's runtime).
pub(crate) fn run_on<T, F, Fut>(
    handle: &tokio::runtime::Handle,
    pool: &Arc<Pool>,
    job: F,
) -> Result<T, StoreError>
where
    F: FnOnce(Arc<Pool>) -> Fut,
    Fut: Future<Output = Result<T, StoreError>> + Send + 'static,
    T: Send + 'static,
{
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    let future = job(Arc::clone(pool));
    handle.spawn(async move {
        let _ = sender.send(future.await);
    });
    receiver.recv().map_err(|_| {
        StoreError::Backend("the PostgreSQL storage stopped before answering".to_owned())
    })?
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

fn col<'a, T: FromSql<'a>>(row: &'a Row, index: usize) -> Result<T, StoreError> {
    row.try_get(index).map_err(db)
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
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

    fn begin_run(
        &self,
        tenant: &str,
        id: &str,
        from: &[SessionState],
        holder: &str,
        until: u64,
    ) -> Result<bool, StoreError> {
        let (tenant, id, holder) = (tenant.to_owned(), id.to_owned(), holder.to_owned());
        let from: Vec<String> = from.iter().map(|state| state.as_str().to_owned()).collect();
        self.run(|pool| async move {
            let mut connection = pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            let changed = transaction
                .execute(
                    "UPDATE sessions SET state = 'running', updated_at = $3
                     WHERE tenant_id = $1 AND id = $2 AND state = ANY($4)",
                    &[&tenant, &id, &to_i64(now()), &from],
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

    fn renew_runs(&self, runs: &[RunHold], until: u64) -> Result<Vec<String>, StoreError> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let sessions: Vec<String> = runs.iter().map(|run| run.session.clone()).collect();
        let holders: Vec<String> = runs.iter().map(|run| run.holder.clone()).collect();
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "UPDATE run_leases l SET lease_until = $3
                     FROM UNNEST($1::text[], $2::text[]) AS held(session_id, owner)
                     WHERE l.session_id = held.session_id AND l.owner = held.owner
                     RETURNING l.session_id",
                    &[&sessions, &holders, &to_i64(until)],
                )
                .await
                .map_err(db)?;
            rows.iter().map(|row| col::<String>(row, 0)).collect()
        })
    }

    fn append_run_event(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        event: &serde_json::Value,
    ) -> Result<Option<u64>, StoreError> {
        let (tenant, id, holder) = (tenant.to_owned(), id.to_owned(), holder.to_owned());
        let event = event.to_string();
        self.run(|pool| async move {
            let mut connection = pool.get().await?;
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
            let seq = append_in(&transaction, &tenant, &id, &event).await?;
            transaction.commit().await.map_err(db)?;
            Ok(Some(seq))
        })
    }

    fn save_run_messages(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        messages: &serde_json::Value,
    ) -> Result<bool, StoreError> {
        let (tenant, id, holder) = (tenant.to_owned(), id.to_owned(), holder.to_owned());
        let messages = messages.to_string();
        self.run(|pool| async move {
            let changed = pool
                .get()
                .await?
                .execute(
                    "UPDATE sessions SET messages = $4, updated_at = $5
                     WHERE tenant_id = $1 AND id = $2 AND EXISTS
                         (SELECT 1 FROM run_leases WHERE session_id = $2 AND owner = $3)",
                    &[&tenant, &id, &holder, &messages, &to_i64(now())],
                )
                .await
                .map_err(db)?;
            Ok(changed > 0)
        })
    }

    fn end_run(
        &self,
        tenant: &str,
        id: &str,
        holder: &str,
        to: SessionState,
    ) -> Result<bool, StoreError> {
        let (tenant, id, holder) = (tenant.to_owned(), id.to_owned(), holder.to_owned());
        self.run(|pool| async move {
            let mut connection = pool.get().await?;
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

    fn interrupt_lapsed(&self, now: u64, grace: u64) -> Result<usize, StoreError> {
        self.run(|pool| async move {
            let mut connection = pool.get().await?;
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

    fn ensure_tenant(&self, name: &str) -> Result<(), StoreError> {
        let name = name.to_owned();
        self.run(|pool| async move {
            pool.get()
                .await?
                .execute(
                    "INSERT INTO tenants (id, created_at) VALUES ($1, $2)
                     ON CONFLICT (id) DO NOTHING",
                    &[&name, &to_i64(now())],
                )
                .await
                .map_err(db)?;
            Ok(())
        })
    }

    fn issue_key(&self, tenant: &str, caller: &str, role: Role) -> Result<IssuedKey, StoreError> {
        self.ensure_tenant(tenant)?;
        let id = random_id("key_")?;
        let secret = random_id("wsk_")?;
        let (tenant, caller, hash) = (tenant.to_owned(), caller.to_owned(), secret_hash(&secret));
        let key_id = id.clone();
        self.run(|pool| async move {
            pool.get()
                .await?
                .execute(
                    "INSERT INTO api_keys (id, tenant_id, caller, role, secret_sha256, created_at)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                    &[
                        &key_id,
                        &tenant,
                        &caller,
                        &role.as_str(),
                        &hash,
                        &to_i64(now()),
                    ],
                )
                .await
                .map_err(db)?;
            Ok(())
        })?;
        Ok(IssuedKey { id, secret })
    }

    fn revoke_key(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.run(|pool| async move {
            let changed = pool
                .get()
                .await?
                .execute(
                    "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                    &[&id, &to_i64(now())],
                )
                .await
                .map_err(db)?;
            Ok(changed > 0)
        })
    }

    fn resolve_key(&self, secret: &str) -> Result<Option<Principal>, StoreError> {
        // Looked up by the hash: the comparison never touches the secret itself.
        let hash = secret_hash(secret);
        self.run(|pool| async move {
            let connection = pool.get().await?;
            let key = connection
                .query_opt(
                    "SELECT tenant_id, caller, role, id FROM api_keys
                     WHERE secret_sha256 = $1 AND revoked_at IS NULL",
                    &[&hash],
                )
                .await
                .map_err(db)?;
            if let Some(row) = key {
                return Ok(Some(Principal {
                    tenant: col(&row, 0)?,
                    caller: col(&row, 1)?,
                    role: Role::parse(col(&row, 2)?),
                    key: col(&row, 3)?,
                    widget: None,
                }));
            }
            let widget = connection
                .query_opt(
                    "SELECT id, tenant_id, caller, agent FROM widget_tokens
                     WHERE secret_sha256 = $1 AND expires_at > $2",
                    &[&hash, &to_i64(now())],
                )
                .await
                .map_err(db)?;
            widget
                .map(|row| {
                    Ok(Principal {
                        tenant: col(&row, 1)?,
                        caller: col(&row, 2)?,
                        role: Role::Widget,
                        key: col(&row, 0)?,
                        widget: Some(WidgetScope {
                            token: col(&row, 0)?,
                            agent: col(&row, 3)?,
                        }),
                    })
                })
                .transpose()
        })
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
        let (tenant, agent, caller, hash, token_id) = (
            tenant.to_owned(),
            agent.to_owned(),
            caller.to_owned(),
            secret_hash(&secret),
            id.clone(),
        );
        self.run(|pool| async move {
            let connection = pool.get().await?;
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
                        &token_id,
                        &tenant,
                        &agent,
                        &caller,
                        &hash,
                        &to_i64(at),
                        &to_i64(expires_at),
                    ],
                )
                .await
                .map_err(db)?;
            Ok(())
        })?;
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
        let (tenant, token, session) = (tenant.to_owned(), token.to_owned(), session.to_owned());
        self.run(|pool| async move {
            pool.get()
                .await?
                .execute(
                    "INSERT INTO widget_sessions (tenant_id, token_id, session_id)
                     VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                    &[&tenant, &token, &session],
                )
                .await
                .map_err(db)?;
            Ok(())
        })
    }

    fn widget_owns_session(
        &self,
        tenant: &str,
        token: &str,
        session: &str,
    ) -> Result<bool, StoreError> {
        let (tenant, token, session) = (tenant.to_owned(), token.to_owned(), session.to_owned());
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_opt(
                    "SELECT 1 FROM widget_sessions
                     WHERE tenant_id = $1 AND token_id = $2 AND session_id = $3",
                    &[&tenant, &token, &session],
                )
                .await
                .map_err(db)?;
            Ok(row.is_some())
        })
    }

    fn create_session(&self, tenant: &str, agent: Option<&str>) -> Result<SessionRow, StoreError> {
        let id = random_id("ses_")?;
        let at = now();
        let (tenant, stored_agent, session_id) =
            (tenant.to_owned(), agent.map(str::to_owned), id.clone());
        self.run(|pool| async move {
            pool.get()
                .await?
                .execute(
                    "INSERT INTO sessions (id, tenant_id, agent, state, created_at, updated_at)
                     VALUES ($1, $2, $3, 'idle', $4, $4)",
                    &[&session_id, &tenant, &stored_agent, &to_i64(at)],
                )
                .await
                .map_err(db)?;
            Ok(())
        })?;
        Ok(SessionRow {
            id,
            agent: agent.map(str::to_owned),
            state: SessionState::Idle,
            created_at: at,
            updated_at: at,
        })
    }

    fn list_sessions(&self, tenant: &str) -> Result<Vec<SessionRow>, StoreError> {
        let tenant = tenant.to_owned();
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    &format!(
                        "SELECT {SESSION_COLUMNS} FROM sessions
                         WHERE tenant_id = $1 ORDER BY created_at, id"
                    ),
                    &[&tenant],
                )
                .await
                .map_err(db)?;
            rows.iter().map(session_row).collect()
        })
    }

    fn count_sessions(&self, tenant: &str, creator: Option<&str>) -> Result<u64, StoreError> {
        let (tenant, creator) = (tenant.to_owned(), creator.map(str::to_owned));
        self.run(|pool| async move {
            let connection = pool.get().await?;
            let row = match &creator {
                None => {
                    connection
                        .query_one(
                            "SELECT COUNT(*) FROM sessions WHERE tenant_id = $1",
                            &[&tenant],
                        )
                        .await
                }
                Some(creator) => {
                    connection
                        .query_one(
                            "SELECT COUNT(*) FROM widget_sessions
                             WHERE tenant_id = $1 AND token_id = $2",
                            &[&tenant, creator],
                        )
                        .await
                }
            }
            .map_err(db)?;
            let count: i64 = col(&row, 0)?;
            Ok(to_u64(count))
        })
    }

    fn session(&self, tenant: &str, id: &str) -> Result<Option<SessionRow>, StoreError> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_opt(
                    &format!(
                        "SELECT {SESSION_COLUMNS} FROM sessions WHERE tenant_id = $1 AND id = $2"
                    ),
                    &[&tenant, &id],
                )
                .await
                .map_err(db)?;
            row.as_ref().map(session_row).transpose()
        })
    }

    fn delete_session(&self, tenant: &str, id: &str) -> Result<bool, StoreError> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.run(|pool| async move {
            let changed = pool
                .get()
                .await?
                .execute(
                    "DELETE FROM sessions WHERE tenant_id = $1 AND id = $2",
                    &[&tenant, &id],
                )
                .await
                .map_err(db)?;
            Ok(changed > 0)
        })
    }

    fn transition(
        &self,
        tenant: &str,
        id: &str,
        from: &[SessionState],
        to: SessionState,
    ) -> Result<bool, StoreError> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        let from: Vec<String> = from.iter().map(|state| state.as_str().to_owned()).collect();
        // One statement: the row's lock makes it a compare-and-set across instances.
        self.run(|pool| async move {
            let mut connection = pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            let changed = transaction
                .execute(
                    "UPDATE sessions SET state = $3, updated_at = $4
                     WHERE tenant_id = $1 AND id = $2 AND state = ANY($5)",
                    &[&tenant, &id, &to.as_str(), &to_i64(now()), &from],
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

    fn messages(&self, tenant: &str, id: &str) -> Result<serde_json::Value, StoreError> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_opt(
                    "SELECT messages FROM sessions WHERE tenant_id = $1 AND id = $2",
                    &[&tenant, &id],
                )
                .await
                .map_err(db)?;
            match row {
                None => Ok(serde_json::Value::Array(Vec::new())),
                Some(row) => serde_json::from_str(col(&row, 0)?)
                    .map_err(|error| StoreError::Corrupt(error.to_string())),
            }
        })
    }

    fn append_event(
        &self,
        tenant: &str,
        id: &str,
        event: &serde_json::Value,
    ) -> Result<u64, StoreError> {
        let (tenant, id, event) = (tenant.to_owned(), id.to_owned(), event.to_string());
        self.run(|pool| async move {
            let mut connection = pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            let seq = append_in(&transaction, &tenant, &id, &event).await?;
            transaction.commit().await.map_err(db)?;
            Ok(seq)
        })
    }

    fn events_after(
        &self,
        tenant: &str,
        id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<EventRow>, StoreError> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT events.seq, events.at, events.event FROM events
                     JOIN sessions ON sessions.id = events.session_id
                     WHERE sessions.tenant_id = $1 AND events.session_id = $2 AND events.seq > $3
                     ORDER BY events.seq LIMIT $4",
                    &[&tenant, &id, &to_i64(after), &limit],
                )
                .await
                .map_err(db)?;
            rows.iter()
                .map(|row| {
                    Ok(EventRow {
                        seq: to_u64(col(row, 0)?),
                        at: to_u64(col(row, 1)?),
                        event: serde_json::from_str(col(row, 2)?)
                            .map_err(|error| StoreError::Corrupt(error.to_string()))?,
                    })
                })
                .collect()
        })
    }

    fn interrupt_running(&self) -> Result<usize, StoreError> {
        self.run(|pool| async move {
            let mut connection = pool.get().await?;
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

    fn put_skill(
        &self,
        tenant: &str,
        name: &str,
        description: &str,
        text: &str,
    ) -> Result<bool, StoreError> {
        let (tenant, name, description, text) = (
            tenant.to_owned(),
            name.to_owned(),
            description.to_owned(),
            text.to_owned(),
        );
        // `xmax = 0` only on a row this statement inserted (an update leaves its own xid).
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_one(
                    "INSERT INTO skills (tenant_id, name, description, text, updated_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (tenant_id, name) DO UPDATE
                     SET description = excluded.description, text = excluded.text,
                         updated_at = excluded.updated_at
                     RETURNING (xmax = 0)",
                    &[&tenant, &name, &description, &text, &to_i64(now())],
                )
                .await
                .map_err(db)?;
            col(&row, 0)
        })
    }

    fn list_skills(&self, tenant: &str) -> Result<Vec<SkillRow>, StoreError> {
        let tenant = tenant.to_owned();
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT name, description, updated_at FROM skills
                     WHERE tenant_id = $1 ORDER BY name",
                    &[&tenant],
                )
                .await
                .map_err(db)?;
            rows.iter()
                .map(|row| {
                    Ok(SkillRow {
                        name: col(row, 0)?,
                        description: col(row, 1)?,
                        updated_at: to_u64(col(row, 2)?),
                    })
                })
                .collect()
        })
    }

    fn skill_text(&self, tenant: &str, name: &str) -> Result<Option<String>, StoreError> {
        let (tenant, name) = (tenant.to_owned(), name.to_owned());
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_opt(
                    "SELECT text FROM skills WHERE tenant_id = $1 AND name = $2",
                    &[&tenant, &name],
                )
                .await
                .map_err(db)?;
            row.map(|row| col(&row, 0)).transpose()
        })
    }

    fn delete_skill(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        self.delete_named("skills", tenant, name)
    }

    fn put_server(&self, tenant: &str, server: &ServerRow) -> Result<bool, StoreError> {
        let headers = json_text(&server.headers)?;
        let (tenant, name, url, created_at) = (
            tenant.to_owned(),
            server.name.clone(),
            server.url.clone(),
            to_i64(server.created_at),
        );
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_one(
                    "INSERT INTO servers (tenant_id, name, url, headers, created_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (tenant_id, name) DO UPDATE SET url = excluded.url,
                         headers = excluded.headers
                     RETURNING (xmax = 0)",
                    &[&tenant, &name, &url, &headers, &created_at],
                )
                .await
                .map_err(db)?;
            col(&row, 0)
        })
    }

    fn list_servers(&self, tenant: &str) -> Result<Vec<ServerRow>, StoreError> {
        let tenant = tenant.to_owned();
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT name, url, headers, created_at FROM servers
                     WHERE tenant_id = $1 ORDER BY name",
                    &[&tenant],
                )
                .await
                .map_err(db)?;
            rows.iter()
                .map(|row| {
                    Ok(ServerRow {
                        name: col(row, 0)?,
                        url: col(row, 1)?,
                        headers: serde_json::from_str(col(row, 2)?).unwrap_or_default(),
                        created_at: to_u64(col(row, 3)?),
                    })
                })
                .collect()
        })
    }

    fn delete_server(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        self.delete_named("servers", tenant, name)
    }

    fn put_tenant_secret(&self, tenant: &str, name: &str, value: &str) -> Result<bool, StoreError> {
        let (tenant, name, value) = (tenant.to_owned(), name.to_owned(), value.to_owned());
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_one(
                    "INSERT INTO tenant_secrets (tenant_id, name, value, updated_at)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (tenant_id, name) DO UPDATE SET value = excluded.value,
                         updated_at = excluded.updated_at
                     RETURNING (xmax = 0)",
                    &[&tenant, &name, &value, &to_i64(now())],
                )
                .await
                .map_err(db)?;
            col(&row, 0)
        })
    }

    fn tenant_secret_names(&self, tenant: &str) -> Result<Vec<SecretRow>, StoreError> {
        let tenant = tenant.to_owned();
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT name, updated_at FROM tenant_secrets
                     WHERE tenant_id = $1 ORDER BY name",
                    &[&tenant],
                )
                .await
                .map_err(db)?;
            rows.iter()
                .map(|row| {
                    Ok(SecretRow {
                        name: col(row, 0)?,
                        updated_at: to_u64(col(row, 1)?),
                    })
                })
                .collect()
        })
    }

    fn tenant_secret(&self, tenant: &str, name: &str) -> Result<Option<String>, StoreError> {
        let (tenant, name) = (tenant.to_owned(), name.to_owned());
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_opt(
                    "SELECT value FROM tenant_secrets WHERE tenant_id = $1 AND name = $2",
                    &[&tenant, &name],
                )
                .await
                .map_err(db)?;
            row.map(|row| col(&row, 0)).transpose()
        })
    }

    fn delete_tenant_secret(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        self.delete_named("tenant_secrets", tenant, name)
    }

    fn put_prompt(&self, tenant: &str, prompt: &PromptRow) -> Result<bool, StoreError> {
        let snapshot = json_text(prompt)?;
        let (tenant, name, created_at) = (
            tenant.to_owned(),
            prompt.name.clone(),
            to_i64(prompt.created_at),
        );
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_one(
                    "INSERT INTO prompts (tenant_id, name, snapshot, created_at)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (tenant_id, name) DO UPDATE SET snapshot = excluded.snapshot,
                         created_at = excluded.created_at
                     RETURNING (xmax = 0)",
                    &[&tenant, &name, &snapshot, &created_at],
                )
                .await
                .map_err(db)?;
            col(&row, 0)
        })
    }

    fn list_prompts(&self, tenant: &str) -> Result<Vec<PromptRow>, StoreError> {
        let tenant = tenant.to_owned();
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT snapshot FROM prompts WHERE tenant_id = $1 ORDER BY name",
                    &[&tenant],
                )
                .await
                .map_err(db)?;
            rows.iter().map(prompt_row).collect()
        })
    }

    fn prompt(&self, tenant: &str, name: &str) -> Result<Option<PromptRow>, StoreError> {
        let (tenant, name) = (tenant.to_owned(), name.to_owned());
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_opt(
                    "SELECT snapshot FROM prompts WHERE tenant_id = $1 AND name = $2",
                    &[&tenant, &name],
                )
                .await
                .map_err(db)?;
            row.as_ref().map(prompt_row).transpose()
        })
    }

    fn delete_prompt(&self, tenant: &str, name: &str) -> Result<bool, StoreError> {
        self.delete_named("prompts", tenant, name)
    }

    fn list_tenants(&self) -> Result<Vec<TenantRow>, StoreError> {
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT t.id, t.created_at,
                        (SELECT COUNT(*) FROM api_keys k
                         WHERE k.tenant_id = t.id AND k.revoked_at IS NULL),
                        (SELECT COUNT(*) FROM sessions s WHERE s.tenant_id = t.id)
                     FROM tenants t ORDER BY t.id",
                    &[],
                )
                .await
                .map_err(db)?;
            rows.iter()
                .map(|row| {
                    Ok(TenantRow {
                        name: col(row, 0)?,
                        created_at: to_u64(col(row, 1)?),
                        keys: to_u64(col(row, 2)?),
                        sessions: to_u64(col(row, 3)?),
                    })
                })
                .collect()
        })
    }

    fn list_keys(&self, tenant: &str) -> Result<Vec<KeyRow>, StoreError> {
        let tenant = tenant.to_owned();
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT id, caller, role, created_at, revoked_at FROM api_keys
                     WHERE tenant_id = $1 ORDER BY created_at DESC, id",
                    &[&tenant],
                )
                .await
                .map_err(db)?;
            rows.iter()
                .map(|row| {
                    Ok(KeyRow {
                        id: col(row, 0)?,
                        caller: col(row, 1)?,
                        role: Role::parse(col(row, 2)?),
                        created_at: to_u64(col(row, 3)?),
                        revoked_at: col::<Option<i64>>(row, 4)?.map(to_u64),
                    })
                })
                .collect()
        })
    }

    fn add_client_call(&self, tenant: &str, call: &ClientCallRow) -> Result<(), StoreError> {
        let (id, tenant, session, tool, arguments, created_at) = (
            call.id.clone(),
            tenant.to_owned(),
            call.session.clone(),
            call.tool.clone(),
            call.arguments.to_string(),
            to_i64(call.created_at),
        );
        self.run(|pool| async move {
            let added = pool
                .get()
                .await?
                .execute(
                    "INSERT INTO client_calls
                         (id, tenant_id, session_id, tool, arguments, state, created_at)
                     SELECT $1, $2, $3, $4, $5, 'pending', $6
                     WHERE EXISTS (SELECT 1 FROM sessions WHERE tenant_id = $2 AND id = $3)",
                    &[&id, &tenant, &session, &tool, &arguments, &created_at],
                )
                .await
                .map_err(db)?;
            session_owned(added > 0, &tenant, &session)
        })
    }

    fn client_calls(&self, tenant: &str, session: &str) -> Result<Vec<ClientCallRow>, StoreError> {
        self.client_calls_where(tenant, session, false)
    }

    fn pending_client_calls(
        &self,
        tenant: &str,
        session: &str,
    ) -> Result<Vec<ClientCallRow>, StoreError> {
        self.client_calls_where(tenant, session, true)
    }

    fn client_call(
        &self,
        tenant: &str,
        session: &str,
        id: &str,
    ) -> Result<Option<ClientCallRow>, StoreError> {
        let (tenant, session, id) = (tenant.to_owned(), session.to_owned(), id.to_owned());
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_opt(
                    &format!(
                        "SELECT {CLIENT_CALL_COLUMNS} FROM client_calls
                         WHERE tenant_id = $1 AND session_id = $2 AND id = $3"
                    ),
                    &[&tenant, &session, &id],
                )
                .await
                .map_err(db)?;
            row.as_ref().map(client_call_row).transpose()
        })
    }

    fn answer_client_call(
        &self,
        tenant: &str,
        session: &str,
        id: &str,
        answer: &serde_json::Value,
    ) -> Result<bool, StoreError> {
        let (tenant, session, id, answer) = (
            tenant.to_owned(),
            session.to_owned(),
            id.to_owned(),
            answer.to_string(),
        );
        self.run(|pool| async move {
            let changed = pool
                .get()
                .await?
                .execute(
                    "UPDATE client_calls SET state = 'answered', answer = $4, answered_at = $5
                     WHERE tenant_id = $1 AND session_id = $2 AND id = $3 AND state = 'pending'",
                    &[&tenant, &session, &id, &answer, &to_i64(now())],
                )
                .await
                .map_err(db)?;
            Ok(changed > 0)
        })
    }

    fn add_approval(&self, tenant: &str, approval: &ApprovalRow) -> Result<(), StoreError> {
        let classes = json_text(&approval.classes)?;
        let tenant = tenant.to_owned();
        let approval = approval.clone();
        self.run(|pool| async move {
            let added = pool
                .get()
                .await?
                .execute(
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
                .await
                .map_err(db)?;
            session_owned(added > 0, &tenant, &approval.session)
        })
    }

    fn pending_approvals(&self, tenant: &str) -> Result<Vec<ApprovalRow>, StoreError> {
        let tenant = tenant.to_owned();
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    &format!(
                        "SELECT {APPROVAL_COLUMNS} FROM approvals
                         WHERE tenant_id = $1 AND state = 'pending' ORDER BY created_at, id"
                    ),
                    &[&tenant],
                )
                .await
                .map_err(db)?;
            rows.iter().map(approval_row).collect()
        })
    }

    fn approval(&self, tenant: &str, id: &str) -> Result<Option<ApprovalRow>, StoreError> {
        let (tenant, id) = (tenant.to_owned(), id.to_owned());
        self.run(|pool| async move {
            let row = pool
                .get()
                .await?
                .query_opt(
                    &format!(
                        "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE tenant_id = $1 AND id = $2"
                    ),
                    &[&tenant, &id],
                )
                .await
                .map_err(db)?;
            row.as_ref().map(approval_row).transpose()
        })
    }

    fn allowed_for_session(&self, tenant: &str, session: &str) -> Result<Vec<String>, StoreError> {
        let (tenant, session) = (tenant.to_owned(), session.to_owned());
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT DISTINCT tool FROM approvals
                     WHERE tenant_id = $1 AND session_id = $2 AND state = 'allowed_for_session'",
                    &[&tenant, &session],
                )
                .await
                .map_err(db)?;
            rows.iter().map(|row| col(row, 0)).collect()
        })
    }

    fn decide_approval(
        &self,
        tenant: &str,
        id: &str,
        state: &str,
        decided_by: &str,
    ) -> Result<bool, StoreError> {
        let (tenant, id, state, decided_by) = (
            tenant.to_owned(),
            id.to_owned(),
            state.to_owned(),
            decided_by.to_owned(),
        );
        self.run(|pool| async move {
            let changed = pool
                .get()
                .await?
                .execute(
                    "UPDATE approvals SET state = $3, decided_by = $4, decided_at = $5
                     WHERE tenant_id = $1 AND id = $2 AND state = 'pending'",
                    &[&tenant, &id, &state, &decided_by, &to_i64(now())],
                )
                .await
                .map_err(db)?;
            Ok(changed > 0)
        })
    }
}

impl PgStorage {
    /// Deletes the tenant's row `name` of a `(tenant_id, name)` table; whether there was one.
    fn delete_named(
        &self,
        table: &'static str,
        tenant: &str,
        name: &str,
    ) -> Result<bool, StoreError> {
        let (tenant, name) = (tenant.to_owned(), name.to_owned());
        self.run(|pool| async move {
            let changed = pool
                .get()
                .await?
                .execute(
                    &format!("DELETE FROM {table} WHERE tenant_id = $1 AND name = $2"),
                    &[&tenant, &name],
                )
                .await
                .map_err(db)?;
            Ok(changed > 0)
        })
    }

    fn client_calls_where(
        &self,
        tenant: &str,
        session: &str,
        pending_only: bool,
    ) -> Result<Vec<ClientCallRow>, StoreError> {
        let (tenant, session) = (tenant.to_owned(), session.to_owned());
        let pending = if pending_only {
            " AND state = 'pending'"
        } else {
            ""
        };
        self.run(|pool| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    &format!(
                        "SELECT {CLIENT_CALL_COLUMNS} FROM client_calls
                         WHERE tenant_id = $1 AND session_id = $2{pending}
                         ORDER BY created_at, id"
                    ),
                    &[&tenant, &session],
                )
                .await
                .map_err(db)?;
            rows.iter().map(client_call_row).collect()
        })
    }
}
