//! The gate's audit trail in PostgreSQL ([`PgAudit`]): every instance of the service writes its
//! records into one table, group-committed by a writer task, each record committed before its
//! writer hears back; any instance's queries see every instance's records.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row, Statement};
use warden_policy::{
    AuditColumns, AuditEntry, AuditError, AuditLog, AuditQuery, AuditRecord, AuditRow, AuditSink,
    BoxFuture,
};

use crate::bridge::Bridge;

/// Records one transaction holds at most (a bound on a waiter's wait, not a target).
pub const AUDIT_BATCH_MAX: usize = 256;

/// Held by each writing transaction while it draws ids and until it commits ("audit" in
/// ASCII): ids then grow in commit order across instances, so a reader paging after a cursor
/// never skips a record that commits later with a smaller id.
const AUDIT_ORDER_LOCK: i64 = 0x61_7564_6974;

const COLUMNS: &str = "time_unix_ms, session_id, source, caller, server, tool, public_name, annotations, \
     classes, decision, layer, reason, gate_ms, execution_ms, result_bytes, result_is_error, error, \
     arguments_digest, arguments, confinement, kind, effect, tenant";

/// A record's columns as `$1…$23` (their types from the table).
fn insert_sql() -> String {
    format!(
        "INSERT INTO audit ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, \
         $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23) RETURNING id"
    )
}

/// A call's outcome written over its intent `$24` — or, when that intent is not there, as a
/// new record — in one statement; returns the record's id.
fn complete_sql() -> String {
    format!(
        "WITH updated AS (
             UPDATE audit SET time_unix_ms = $1, session_id = $2, source = $3, caller = $4,
                 server = $5, tool = $6, public_name = $7, annotations = $8, classes = $9,
                 decision = $10, layer = $11, reason = $12, gate_ms = $13, execution_ms = $14,
                 result_bytes = $15, result_is_error = $16, error = $17, arguments_digest = $18,
                 arguments = $19, confinement = $20, kind = $21, effect = $22, tenant = $23
             WHERE id = $24 RETURNING id),
         inserted AS (
             INSERT INTO audit ({COLUMNS})
             SELECT $1::BIGINT, $2::TEXT, $3::TEXT, $4::TEXT, $5::TEXT, $6::TEXT, $7::TEXT,
                 $8::TEXT, $9::TEXT, $10::TEXT, $11::TEXT, $12::TEXT, $13::BIGINT, $14::BIGINT,
                 $15::BIGINT, $16::BOOLEAN, $17::TEXT, $18::TEXT, $19::TEXT, $20::TEXT,
                 $21::TEXT, $22::TEXT, $23::TEXT
             WHERE NOT EXISTS (SELECT 1 FROM updated) RETURNING id)
         SELECT id FROM updated UNION ALL SELECT id FROM inserted"
    )
}

/// The gate's audit trail in the service's PostgreSQL database, for every instance on it.
///
/// A record is handed to a writer task (on the bridge's runtime, with a connection of its
/// own) when the gate calls; the task commits everything that arrived while its last commit
/// was in flight in one transaction (group commit) and answers each waiter once that
/// transaction committed (`synchronous_commit` as the server sets it: on by default, so the
/// record is on the server's disk). A call's intent is a record of its own; its outcome
/// overwrites it in place, so a call keeps one record and an instance that dies mid-call
/// leaves "started" — the outcome unknown — rather than nothing.
pub struct PgAudit {
    shared: Arc<Shared>,
    sender: UnboundedSender<Job>,
}

struct Shared {
    /// The runtime its writer task and its queries run on, and the queries' pool.
    bridge: Arc<Bridge>,
    /// The URL with its password redacted.
    target: String,
    /// Transactions the writer committed (a batch or a record retried alone each count one).
    commits: AtomicU64,
}

impl std::fmt::Debug for PgAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgAudit")
            .field("target", &self.shared.target)
            .finish_non_exhaustive()
    }
}

/// One record for the writer, and who waits for it.
struct Job {
    columns: AuditColumns,
    /// The intent this record completes, if any.
    replaces: Option<i64>,
    reply: Reply,
}

enum Reply {
    Async(tokio::sync::oneshot::Sender<Result<i64, AuditError>>),
    Blocking(std::sync::mpsc::SyncSender<Result<i64, AuditError>>),
}

impl Reply {
    fn send(self, result: Result<i64, AuditError>) {
        // The caller may have stopped waiting; its record is stored all the same.
        match self {
            Reply::Async(sender) => {
                let _ = sender.send(result);
            }
            Reply::Blocking(sender) => {
                let _ = sender.send(result);
            }
        }
    }
}

impl PgAudit {
    pub(crate) fn start(bridge: Arc<Bridge>, target: String) -> Self {
        let shared = Arc::new(Shared {
            bridge,
            target,
            commits: AtomicU64::new(0),
        });
        let (sender, jobs) = tokio::sync::mpsc::unbounded_channel();
        shared
            .bridge
            .handle()
            .spawn(write_queued(Arc::clone(&shared), jobs));
        Self { shared, sender }
    }

    /// Transactions committed by this sink's writer so far (fewer than records when records
    /// arrived together: group commit).
    pub fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::Acquire)
    }

    /// Hands a record to the writer; `reply` hears its id once committed.
    fn submit(&self, columns: AuditColumns, replaces: Option<i64>, reply: Reply) {
        let job = Job {
            columns,
            replaces,
            reply,
        };
        if let Err(refused) = self.sender.send(job) {
            // The writer is gone only when the runtime is shutting down.
            refused.0.reply.send(Err(self.stopped()));
        }
    }

    fn stopped(&self) -> AuditError {
        AuditError::Backend {
            target: self.shared.target.clone(),
            message: "the audit writer stopped".to_owned(),
        }
    }

    fn write_async(
        &self,
        columns: AuditColumns,
        replaces: Option<i64>,
    ) -> BoxFuture<'_, Result<i64, AuditError>> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.submit(columns, replaces, Reply::Async(reply));
        Box::pin(async move { answer.await.unwrap_or_else(|_| Err(self.stopped())) })
    }

    /// Runs a query on the bridge's pool and waits for it on this thread.
    fn read<T, F, Fut>(&self, job: F) -> Result<T, AuditError>
    where
        F: FnOnce(Arc<crate::pool::Pool>) -> Fut,
        Fut: std::future::Future<Output = Result<T, String>> + Send + 'static,
        T: Send + 'static,
    {
        self.shared
            .bridge
            .run(job)
            .map_err(|_| self.stopped())?
            .map_err(|message| AuditError::Backend {
                target: self.shared.target.clone(),
                message,
            })
    }
}

impl AuditSink for PgAudit {
    /// Blocks the calling thread until the record is committed (not for async workers: the
    /// gate uses [`AuditSink::record_async`]).
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.submit(AuditColumns::from(record), None, Reply::Blocking(reply));
        answer
            .recv()
            .unwrap_or_else(|_| Err(self.stopped()))
            .map(drop)
    }

    /// Always through the writer: a lone record is a transaction of one, committed at once.
    fn record_async(
        &self,
        record: AuditRecord,
        _alone: bool,
    ) -> BoxFuture<'_, Result<(), AuditError>> {
        let written = self.write_async(AuditColumns::from(&record), None);
        Box::pin(async move { written.await.map(drop) })
    }

    /// The intent is a record of its own, committed before this resolves (so before dispatch).
    fn begin_async(
        &self,
        record: AuditRecord,
        _alone: bool,
    ) -> BoxFuture<'_, Result<AuditEntry, AuditError>> {
        let written = self.write_async(AuditColumns::from(&record), None);
        Box::pin(async move { written.await.map(AuditEntry::stored) })
    }

    /// The outcome overwrites the intent's record: one record per call, its id unchanged.
    fn complete_async(
        &self,
        entry: AuditEntry,
        record: AuditRecord,
        _alone: bool,
    ) -> BoxFuture<'_, Result<(), AuditError>> {
        let written = self.write_async(AuditColumns::from(&record), entry.id());
        Box::pin(async move { written.await.map(drop) })
    }
}

impl AuditLog for PgAudit {
    fn query(&self, query: &AuditQuery) -> Result<Vec<AuditRow>, AuditError> {
        let (sql, values) = query_sql(query);
        self.read(move |pool| async move {
            let connection = pool.get().await.map_err(|error| error.to_string())?;
            let parameters: Vec<&(dyn ToSql + Sync)> = values
                .iter()
                .map(|value| value.as_ref() as &(dyn ToSql + Sync))
                .collect();
            let rows = connection
                .query(&sql, &parameters)
                .await
                .map_err(|error| message(&error))?;
            rows.iter()
                .map(audit_row)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|error| message(&error))
        })
    }

    fn last_id(&self) -> Result<Option<i64>, AuditError> {
        self.read(|pool| async move {
            let connection = pool.get().await.map_err(|error| error.to_string())?;
            let row = connection
                .query_one("SELECT MAX(id) FROM audit", &[])
                .await
                .map_err(|error| message(&error))?;
            row.try_get(0).map_err(|error| message(&error))
        })
    }
}

/// A tokio-postgres error with its causes, on one line (it names no password).
fn message(error: &tokio_postgres::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

type Value = Box<dyn ToSql + Sync + Send>;

/// The SELECT for `query` and its parameters: the same filter, order and limit as SQLite's.
fn query_sql(query: &AuditQuery) -> (String, Vec<Value>) {
    let mut conditions: Vec<String> = Vec::new();
    let mut values: Vec<Value> = Vec::new();
    let mut add = |condition: &str, value: Value| {
        values.push(value);
        conditions.push(format!("{condition} ${}", values.len()));
    };
    if let Some(session) = &query.session {
        add("session_id =", Box::new(session.clone()));
    }
    if let Some(since) = query.since_unix_ms {
        add("time_unix_ms >=", Box::new(since));
    }
    let exact = [
        ("tenant =", &query.tenant),
        ("public_name =", &query.tool),
        ("source =", &query.source),
        ("decision =", &query.decision),
    ];
    for (condition, value) in exact {
        if let Some(value) = value {
            add(condition, Box::new(value.clone()));
        }
    }
    if let Some(until) = query.until_unix_ms {
        add("time_unix_ms <", Box::new(until));
    }
    if let Some(after) = query.after_id {
        add("id >", Box::new(after));
    }
    if query.denied_only {
        conditions.push("decision = 'denied'".to_owned());
    }
    let filter = if conditions.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", conditions.join(" AND "))
    };
    let limit = query
        .limit
        .map_or_else(|| "ALL".to_owned(), |limit| limit.to_string());
    let taken = if query.oldest_first { "ASC" } else { "DESC" };
    let sql = format!(
        "SELECT * FROM (SELECT id, {COLUMNS} FROM audit {filter} ORDER BY id {taken} LIMIT {limit}) page
         ORDER BY id ASC"
    );
    (sql, values)
}

fn audit_row(row: &Row) -> Result<AuditRow, tokio_postgres::Error> {
    warden_policy::audit_row_from!(row, try_get)
}

/// The writer's connection and its two statements, prepared once per connection.
struct Writer {
    client: Client,
    insert: Statement,
    complete: Statement,
}

impl Writer {
    async fn connect(shared: &Shared) -> Result<Self, String> {
        let (client, connection) = shared
            .bridge
            .pool()
            .config()
            .connect(NoTls)
            .await
            .map_err(|error| message(&error))?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::warn!("the audit writer's PostgreSQL connection ended: {error}");
            }
        });
        let insert = client
            .prepare(&insert_sql())
            .await
            .map_err(|error| message(&error))?;
        let complete = client
            .prepare(&complete_sql())
            .await
            .map_err(|error| message(&error))?;
        Ok(Self {
            client,
            insert,
            complete,
        })
    }

    /// Every job of `batch` in one transaction (its statements pipelined): all stored, or none.
    async fn commit(&mut self, batch: &[Job]) -> Result<Vec<i64>, tokio_postgres::Error> {
        let transaction = self.client.transaction().await?;
        transaction
            .execute("SELECT pg_advisory_xact_lock($1)", &[&AUDIT_ORDER_LOCK])
            .await?;
        let (insert, complete) = (&self.insert, &self.complete);
        let writes = batch.iter().map(|job| {
            let transaction = &transaction;
            async move {
                let columns = &job.columns;
                let mut values: Vec<&(dyn ToSql + Sync)> = vec![
                    &columns.time_unix_ms,
                    &columns.session_id,
                    &columns.source,
                    &columns.caller,
                    &columns.server,
                    &columns.tool,
                    &columns.public_name,
                    &columns.annotations,
                    &columns.classes,
                    &columns.decision,
                    &columns.layer,
                    &columns.reason,
                    &columns.gate_ms,
                    &columns.execution_ms,
                    &columns.result_bytes,
                    &columns.result_is_error,
                    &columns.error,
                    &columns.arguments_digest,
                    &columns.arguments,
                    &columns.confinement,
                    &columns.kind,
                    &columns.effect,
                    &columns.tenant,
                ];
                let row = match &job.replaces {
                    Some(id) => {
                        values.push(id);
                        transaction.query_one(complete, &values).await?
                    }
                    None => transaction.query_one(insert, &values).await?,
                };
                row.try_get::<_, i64>(0)
            }
        });
        // Pipelined on the one connection: the statements go out without waiting for each
        // other's answers.
        let ids = futures::future::try_join_all(writes).await?;
        transaction.commit().await?;
        Ok(ids)
    }
}

/// The writer task: commits whatever is waiting, in batches, until every [`PgAudit`] handle
/// is gone. A lost connection fails the batch in flight (each waiter hears it) and is opened
/// again for the next one.
async fn write_queued(shared: Arc<Shared>, mut jobs: UnboundedReceiver<Job>) {
    let mut writer: Option<Writer> = None;
    while let Some(first) = jobs.recv().await {
        let mut batch = vec![first];
        while batch.len() < AUDIT_BATCH_MAX {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let connected = match writer.take() {
            Some(open) if !open.client.is_closed() => Ok(open),
            _ => Writer::connect(&shared).await,
        };
        let mut open = match connected {
            Ok(open) => open,
            Err(message) => {
                for job in batch {
                    job.reply.send(Err(AuditError::Backend {
                        target: shared.target.clone(),
                        message: format!("cannot connect the audit writer: {message}"),
                    }));
                }
                continue;
            }
        };
        match open.commit(&batch).await {
            Ok(ids) => {
                shared.commits.fetch_add(1, Ordering::AcqRel);
                for (job, id) in batch.into_iter().zip(ids) {
                    job.reply.send(Ok(id));
                }
            }
            Err(error) if batch.len() > 1 && !open.client.is_closed() => {
                // Rolled back: each record alone, so each caller hears its own outcome.
                tracing::debug!(%error, "audit batch failed; writing its records one by one");
                for job in batch {
                    let written = open.commit(std::slice::from_ref(&job)).await;
                    if written.is_ok() {
                        shared.commits.fetch_add(1, Ordering::AcqRel);
                    }
                    job.reply.send(
                        written
                            .map(|ids| ids.first().copied().unwrap_or_default())
                            .map_err(|error| AuditError::Backend {
                                target: shared.target.clone(),
                                message: message(&error),
                            }),
                    );
                }
            }
            Err(error) => {
                let text = message(&error);
                for job in batch {
                    job.reply.send(Err(AuditError::Backend {
                        target: shared.target.clone(),
                        message: text.clone(),
                    }));
                }
            }
        }
        if !open.client.is_closed() {
            writer = Some(open);
        }
    }
}
