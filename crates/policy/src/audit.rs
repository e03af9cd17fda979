//! The audit trail: one SQLite row per gate decision (WAL), and the query behind `warden audit`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OptionalExtension, params_from_iter};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use warden_vocab::{CapabilityClass, CapabilitySet};

use crate::approval::BoxFuture;
use crate::call::{CallKind, CallSurface, Layer};
use crate::capability::ToolAnnotations;
use crate::time::{rfc3339_millis, unix_millis};
use warden_vocab::Decision;

/// Why the audit trail could not be opened, written or read.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The folder for the database could not be created.
    #[error("cannot create the audit folder {path}: {source}")]
    CreateFolder {
        /// The folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The database file could not be created (mode 0600).
    #[error("cannot create the audit database {path}: {source}")]
    CreateFile {
        /// The database file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// SQLite refused.
    #[error("audit database {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The cause.
        source: rusqlite::Error,
    },
    /// The store's lock was poisoned by a panic elsewhere.
    #[error("audit database {0}: its lock was poisoned")]
    Poisoned(PathBuf),
    /// The writer thread could not be started.
    #[error("audit database {path}: cannot start its writer thread: {source}")]
    StartWriter {
        /// The database file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The writer thread stopped before it answered (it panicked).
    #[error("audit database {0}: its writer thread stopped")]
    WriterStopped(PathBuf),
    /// A database server (the service's PostgreSQL) refused or could not be reached; the
    /// message names no password.
    #[error("audit database {target}: {message}")]
    Backend {
        /// Where the records go (a URL with its password redacted).
        target: String,
        /// What went wrong.
        message: String,
    },
}

/// One decision as the gate reports it.
#[derive(Debug, Clone)]
pub struct AuditRecord {
    /// When the call entered the gate.
    pub time: SystemTime,
    /// The session.
    pub session_id: String,
    /// The calling surface (stored in the `source` column).
    pub surface: CallSurface,
    /// What the call does.
    pub kind: CallKind,
    /// The effect class the tool's author declared (a tool defined in code), if any.
    pub effect: Option<CapabilityClass>,
    /// The tenant the call belongs to (the service's), if any.
    pub tenant: Option<String>,
    /// Who within the surface, if known.
    pub caller: Option<String>,
    /// The server (`builtin` for built-ins); None when unresolved.
    pub server: Option<String>,
    /// The raw tool name; None when unresolved.
    pub tool: Option<String>,
    /// The name that was called.
    pub public_name: String,
    /// The annotations, when resolved.
    pub annotations: Option<ToolAnnotations>,
    /// The classes (empty when unresolved).
    pub classes: CapabilitySet,
    /// How it ended.
    pub decision: Decision,
    /// Which layer decided.
    pub layer: Layer,
    /// Why.
    pub reason: Option<String>,
    /// Time in the gate.
    pub gate_duration: Duration,
    /// Time executing, when it ran.
    pub execution_duration: Option<Duration>,
    /// Result size in bytes, when it ran.
    pub result_bytes: Option<u64>,
    /// Whether the tool reported an error, when it ran.
    pub result_is_error: Option<bool>,
    /// The dispatch or timeout error, if any.
    pub error: Option<String>,
    /// SHA-256 of the arguments' JSON text, hex.
    pub arguments_digest: String,
    /// The full arguments, only when the operator opted in.
    pub arguments: Option<Value>,
    /// What the kernel enforced around the process the call ran, when it ran one confined.
    pub confinement: Option<String>,
}

/// SHA-256 (hex) of a JSON value's compact text — what the audit trail stores by default.
pub fn arguments_digest(arguments: &Value) -> String {
    /// Feeds the text straight into the hash, so it is never built as a string.
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.update(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut hashing = Hashing(Sha256::new());
    // Writing a `Value` fails only when the writer does, and this one never does.
    let _ = serde_json::to_writer(&mut hashing, arguments);
    let digest = hashing.0.finalize();
    let mut text = String::with_capacity(digest.len() * 2);
    for byte in digest {
        text.push(char::from(HEX[usize::from(byte >> 4)]));
        text.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    text
}

/// Where the gate sends its one record per call. A failure is returned to the gate, which
/// reports it in the outcome and the log; it never fails the call.
pub trait AuditSink: Send + Sync {
    /// Stores one record, blocking the calling thread until it is stored.
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError>;

    /// Stores one record; the future resolves once it is stored. The record is handed over
    /// when this is called, so it is stored even if the future is dropped. The gate uses this,
    /// with `alone` true when no other call is in flight in it (then writing on the caller's
    /// thread delays nobody). By default it calls [`AuditSink::record`] at once; a sink that
    /// does I/O should override it so that async workers do not block.
    fn record_async(
        &self,
        record: AuditRecord,
        alone: bool,
    ) -> BoxFuture<'_, Result<(), AuditError>> {
        let _ = alone;
        let result = self.record(&record);
        Box::pin(std::future::ready(result))
    }

    /// Stores a call's intent — the record as it stands before dispatch, decision
    /// [`Decision::Started`] — and returns the entry its outcome completes, so that a process
    /// that dies mid-call leaves "started, outcome unknown" rather than nothing. A sink that
    /// cannot complete a record in place stores nothing here and returns
    /// [`AuditEntry::NONE`]; its outcome is then one new record, as without an intent.
    fn begin_async(
        &self,
        record: AuditRecord,
        alone: bool,
    ) -> BoxFuture<'_, Result<AuditEntry, AuditError>> {
        let _ = (record, alone);
        Box::pin(std::future::ready(Ok(AuditEntry::NONE)))
    }

    /// Stores a call's outcome: in place of its intent `entry` when there is one (the call
    /// keeps one record), else as a new record.
    fn complete_async(
        &self,
        entry: AuditEntry,
        record: AuditRecord,
        alone: bool,
    ) -> BoxFuture<'_, Result<(), AuditError>> {
        let _ = entry;
        self.record_async(record, alone)
    }
}

/// The record a call's intent was stored as, for its outcome to complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditEntry(Option<i64>);

impl AuditEntry {
    /// No intent was stored.
    pub const NONE: Self = Self(None);

    /// The intent stored as record `id` (for a sink outside this crate).
    pub fn stored(id: i64) -> Self {
        Self(Some(id))
    }

    /// The id of the intent's record, if one was stored.
    pub fn id(self) -> Option<i64> {
        self.0
    }
}

/// An audit trail that can be both written and read: what `warden service` queries for
/// `GET /v1/audit` (the SQLite [`AuditStore`], or the shared PostgreSQL one of several
/// instances).
pub trait AuditLog: AuditSink {
    /// Rows matching `query`, oldest first.
    fn query(&self, query: &AuditQuery) -> Result<Vec<AuditRow>, AuditError>;
    /// The highest record id so far (None when empty).
    fn last_id(&self) -> Result<Option<i64>, AuditError>;
}

/// A filter for [`AuditStore::query`] (`warden audit [--session ID] [--since T] [--denied]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only this session.
    pub session: Option<String>,
    /// Only records at or after this time (Unix ms; see [`crate::parse_since`]).
    pub since_unix_ms: Option<i64>,
    /// Only denied calls.
    pub denied_only: bool,
    /// Only calls of this tenant.
    pub tenant: Option<String>,
    /// Only calls of this public tool name.
    pub tool: Option<String>,
    /// Only calls from this surface (`agent`, `gateway`, …).
    pub source: Option<String>,
    /// Only calls that ended so (`allowed`, `denied`, `failed`, …).
    pub decision: Option<String>,
    /// Only records before this time (Unix ms).
    pub until_unix_ms: Option<i64>,
    /// Only records with an id above this one (`--follow` polls with the last id seen).
    pub after_id: Option<i64>,
    /// At most this many rows: the newest ones (the oldest ones with `oldest_first`), always
    /// returned oldest first.
    pub limit: Option<usize>,
    /// With `limit`: take the oldest matching rows (a page after a cursor) rather than the
    /// newest.
    pub oldest_first: bool,
}

/// One stored record, as `warden audit` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRow {
    /// Row id, increasing.
    pub id: i64,
    /// RFC 3339 UTC time.
    pub time: String,
    /// The same time in Unix ms.
    pub time_unix_ms: i64,
    /// The session.
    pub session_id: String,
    /// The calling surface (`agent`, `code-mode`, `gateway`, `user`, …).
    pub source: String,
    /// What the call does (`tool`, `resource-read`, `prompt-get`, …); None for a record written
    /// before the column existed (whose `source` then says either).
    pub kind: Option<String>,
    /// The effect class the tool's author declared (`read_only`, `write`, `destructive`,
    /// `external`); None for tools that declare none and for records written before the column.
    pub effect: Option<String>,
    /// The tenant the call belongs to (calls of `warden service`); `null` elsewhere.
    pub tenant: Option<String>,
    /// Who within the surface.
    pub caller: Option<String>,
    /// The server.
    pub server: Option<String>,
    /// The raw tool name.
    pub tool: Option<String>,
    /// The public name.
    pub public_name: String,
    /// The annotations as JSON.
    pub annotations: Option<Value>,
    /// The classes.
    pub classes: Vec<String>,
    /// `allowed`, `denied`, `timed_out`, `cancelled` or `failed`.
    pub decision: String,
    /// The deciding layer.
    pub layer: String,
    /// Why.
    pub reason: Option<String>,
    /// Gate time in ms.
    pub gate_ms: i64,
    /// Execution time in ms.
    pub execution_ms: Option<i64>,
    /// Result size in bytes.
    pub result_bytes: Option<i64>,
    /// Whether the tool reported an error.
    pub result_is_error: Option<bool>,
    /// Dispatch or timeout error.
    pub error: Option<String>,
    /// SHA-256 of the arguments.
    pub arguments_digest: String,
    /// Full arguments (only when the operator opted in).
    pub arguments: Option<Value>,
    /// What the kernel enforced around the call's process (a sandboxed command).
    pub confinement: Option<String>,
}

/// The audit table. `id` is a plain rowid: records are never deleted, so ids only grow, and a
/// commit writes no `sqlite_sequence` page (databases made before this keep their
/// `AUTOINCREMENT`, which behaves the same).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY,
    time_unix_ms INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    source TEXT NOT NULL,
    caller TEXT,
    server TEXT,
    tool TEXT,
    public_name TEXT NOT NULL,
    annotations TEXT,
    classes TEXT NOT NULL,
    decision TEXT NOT NULL,
    layer TEXT NOT NULL,
    reason TEXT,
    gate_ms INTEGER NOT NULL,
    execution_ms INTEGER,
    result_bytes INTEGER,
    result_is_error INTEGER,
    error TEXT,
    arguments_digest TEXT NOT NULL,
    arguments TEXT,
    confinement TEXT,
    kind TEXT,
    effect TEXT,
    tenant TEXT
);
CREATE INDEX IF NOT EXISTS audit_session ON audit (session_id, id);
CREATE INDEX IF NOT EXISTS audit_time ON audit (time_unix_ms);
";

/// Records one writer transaction may hold at most (a bound on a waiter's wait, not a target).
const MAX_BATCH: usize = 256;
/// How long the writer thread keeps looking for the next record (yielding its core between
/// looks) before it sleeps. Under concurrent calls records arrive tens of µs apart, and waking a
/// sleeping thread costs about as much again on a virtual machine; an idle store pays this once
/// per burst.
const LOOK_BEFORE_SLEEPING: Duration = Duration::from_micros(100);
/// Commits between two WAL checkpoints (each commit writes a few pages; SQLite's own default
/// is a checkpoint per 1,000 pages).
const COMMITS_PER_CHECKPOINT: u32 = 250;

/// The SQLite audit store (`<state>/audit.db`, WAL journal, 5 s busy timeout so several warden
/// processes can write to it).
///
/// Every record is committed before its writer hears back, so a call's record is stored and
/// visible to other processes by the time the call returns. Writes share one write connection.
/// A lone call (see [`AuditSink::record_async`]) finding it idle commits its one record at once
/// (a single INSERT, no thread hand-off, no waiting on a lock: `try_lock` only). Otherwise the
/// record goes to a writer thread (started on first need) that commits everything waiting in
/// one transaction (group commit) while the caller awaits its answer, so async workers never
/// queue on SQLite; after a commit it looks for the next record for [`LOOK_BEFORE_SLEEPING`]
/// before it sleeps.
/// WAL checkpoints (the only writes that `fsync`) run on a checkpoint thread of their own, off
/// every caller's path. Queries use a separate connection.
#[derive(Debug)]
pub struct AuditStore {
    path: PathBuf,
    /// For queries; opened on first use (or by [`AuditStore::open`]).
    reader: Mutex<Option<Connection>>,
    /// The write connection and its bookkeeping.
    shared: Arc<WriterShared>,
    /// The writer thread's queue; started on first need.
    writer: Mutex<Option<Sender<WriteJob>>>,
}

impl AuditStore {
    /// Opens (creating if needed) the store at `path`, failing now if it cannot.
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        let connection = connect(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            reader: Mutex::new(Some(connection)),
            shared: WriterShared::new(path),
            writer: Mutex::new(None),
        })
    }

    /// A store that connects on first use and retries on every write until it succeeds; each
    /// failed write returns its error (which the gate reports without failing the call).
    pub fn open_lazily(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            reader: Mutex::new(None),
            shared: WriterShared::new(path),
            writer: Mutex::new(None),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn with_reader<T>(
        &self,
        work: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, AuditError> {
        let mut guard = self
            .reader
            .lock()
            .map_err(|_| AuditError::Poisoned(self.path.clone()))?;
        let connection = match guard.take() {
            Some(connection) => guard.insert(connection),
            None => guard.insert(connect(&self.path)?),
        };
        work(connection).map_err(|source| AuditError::Sqlite {
            path: self.path.clone(),
            source,
        })
    }

    /// Commits `row` right here if the write connection is idle and nothing is queued (None:
    /// it is busy; the row is for the writer thread).
    fn write_if_idle(&self, row: &PendingRow) -> Option<Result<i64, AuditError>> {
        if self.shared.queued.load(Ordering::Acquire) != 0 {
            return None;
        }
        let mut state = self.shared.state.try_lock().ok()?;
        Some(state.write_one(&self.path, row))
    }

    /// Hands `row` to the writer thread (starting it if needed); `reply` hears how it went.
    fn submit(&self, row: PendingRow, reply: Reply) -> Result<(), AuditError> {
        let mut writer = self
            .writer
            .lock()
            .map_err(|_| AuditError::Poisoned(self.path.clone()))?;
        let sender = match writer.take() {
            Some(sender) => writer.insert(sender),
            None => writer.insert(start_writer(&self.shared)?),
        };
        self.shared.queued.fetch_add(1, Ordering::AcqRel);
        sender.send(WriteJob { row, reply }).map_err(|_| {
            // The thread is gone (it panicked): the next record starts a new one.
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            *writer = None;
            AuditError::WriterStopped(self.path.clone())
        })
    }

    /// The journal mode in force (`wal`).
    pub fn journal_mode(&self) -> Result<String, AuditError> {
        self.with_reader(|connection| {
            connection.query_row("PRAGMA journal_mode", [], |row| row.get(0))
        })
    }

    /// Rows matching `query`, oldest first.
    pub fn query(&self, query: &AuditQuery) -> Result<Vec<AuditRow>, AuditError> {
        let mut conditions = Vec::new();
        let mut values: Vec<rusqlite::types::Value> = Vec::new();
        if let Some(session) = &query.session {
            conditions.push("session_id = ?");
            values.push(session.clone().into());
        }
        if let Some(since) = query.since_unix_ms {
            conditions.push("time_unix_ms >= ?");
            values.push(since.into());
        }
        if query.denied_only {
            conditions.push("decision = 'denied'");
        }
        let exact = [
            ("tenant = ?", &query.tenant),
            ("public_name = ?", &query.tool),
            ("source = ?", &query.source),
            ("decision = ?", &query.decision),
        ];
        for (condition, value) in exact {
            if let Some(value) = value {
                conditions.push(condition);
                values.push(value.clone().into());
            }
        }
        if let Some(until) = query.until_unix_ms {
            conditions.push("time_unix_ms < ?");
            values.push(until.into());
        }
        if let Some(after) = query.after_id {
            conditions.push("id > ?");
            values.push(after.into());
        }
        let filter = if conditions.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conditions.join(" AND "))
        };
        let limit = query
            .limit
            .map_or(-1, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
        let taken = if query.oldest_first { "ASC" } else { "DESC" };
        let sql = format!(
            "SELECT * FROM (SELECT id, time_unix_ms, session_id, source, caller, server, tool, public_name, annotations, \
             classes, decision, layer, reason, gate_ms, execution_ms, result_bytes, result_is_error, error, \
             arguments_digest, arguments, confinement, kind, effect, tenant FROM audit {filter} ORDER BY id {taken} LIMIT {limit}) ORDER BY id ASC"
        );
        self.with_reader(|connection| {
            let mut statement = connection.prepare(&sql)?;
            let rows = statement.query_map(params_from_iter(values.iter()), row_from_sql)?;
            rows.collect()
        })
    }

    /// The highest row id so far (None when empty) — where `--follow` starts.
    pub fn last_id(&self) -> Result<Option<i64>, AuditError> {
        self.with_reader(|connection| {
            connection
                .query_row("SELECT MAX(id) FROM audit", [], |row| {
                    row.get::<_, Option<i64>>(0)
                })
                .optional()
                .map(Option::flatten)
        })
    }
}

impl AuditSink for AuditStore {
    /// Blocks the calling thread until the record is committed (for callers outside async code;
    /// the gate uses [`AuditSink::record_async`]).
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        let row = PendingRow::new(record.clone());
        if let Some(written) = self.write_if_idle(&row) {
            return written.map(drop);
        }
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.submit(row, Reply::Blocking(reply))?;
        answer
            .recv()
            .unwrap_or_else(|_| Err(AuditError::WriterStopped(self.path.clone())))
            .map(drop)
    }

    /// Alone (no other call in flight) and with the connection idle, the record is committed
    /// right here: one INSERT, cheaper than two thread hand-offs. Otherwise it joins the writer
    /// thread's next group commit and the async worker stays free for the other calls.
    fn record_async(
        &self,
        record: AuditRecord,
        alone: bool,
    ) -> BoxFuture<'_, Result<(), AuditError>> {
        let written = self.write_async(PendingRow::new(record), alone);
        Box::pin(async move { written.await.map(drop) })
    }

    /// The intent is a row of its own, committed before this resolves (so before dispatch).
    fn begin_async(
        &self,
        record: AuditRecord,
        alone: bool,
    ) -> BoxFuture<'_, Result<AuditEntry, AuditError>> {
        let written = self.write_async(PendingRow::new(record), alone);
        Box::pin(async move { written.await.map(|id| AuditEntry(Some(id))) })
    }

    /// The outcome overwrites the intent's row: one record per call, its id unchanged.
    fn complete_async(
        &self,
        entry: AuditEntry,
        record: AuditRecord,
        alone: bool,
    ) -> BoxFuture<'_, Result<(), AuditError>> {
        let mut row = PendingRow::new(record);
        row.replaces = entry.0;
        let written = self.write_async(row, alone);
        Box::pin(async move { written.await.map(drop) })
    }
}

impl AuditLog for AuditStore {
    fn query(&self, query: &AuditQuery) -> Result<Vec<AuditRow>, AuditError> {
        AuditStore::query(self, query)
    }

    fn last_id(&self) -> Result<Option<i64>, AuditError> {
        AuditStore::last_id(self)
    }
}

impl AuditStore {
    /// Writes `row` — at once when alone and the connection is idle (one statement, cheaper
    /// than two thread hand-offs), else in the writer thread's next group commit so the async
    /// worker stays free — and resolves to its row id once committed. The row is written or
    /// queued when this is called, so it is stored even if the caller stops waiting.
    fn write_async(&self, row: PendingRow, alone: bool) -> BoxFuture<'_, Result<i64, AuditError>> {
        if alone && let Some(written) = self.write_if_idle(&row) {
            return Box::pin(std::future::ready(written));
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        let submitted = self.submit(row, Reply::Async(reply));
        Box::pin(async move {
            submitted?;
            answer
                .await
                .unwrap_or_else(|_| Err(AuditError::WriterStopped(self.path.clone())))
        })
    }
}

/// A record as its columns are stored (its JSON parts rendered, its times in ms): what a
/// database-server backend binds to its INSERT, and the row a stored record is compared with.
/// The SQLite store renders the same columns as it binds them, straight from the record.
#[derive(Debug, Clone)]
pub struct AuditColumns {
    /// When the call entered the gate (Unix ms).
    pub time_unix_ms: i64,
    /// The session.
    pub session_id: String,
    /// The calling surface.
    pub source: &'static str,
    /// What the call does.
    pub kind: &'static str,
    /// The declared effect class.
    pub effect: Option<&'static str>,
    /// The tenant.
    pub tenant: Option<String>,
    /// Who within the surface.
    pub caller: Option<String>,
    /// The server.
    pub server: Option<String>,
    /// The raw tool name.
    pub tool: Option<String>,
    /// The name that was called.
    pub public_name: String,
    /// The annotations as JSON text.
    pub annotations: Option<String>,
    /// The classes, comma-separated.
    pub classes: String,
    /// How it ended.
    pub decision: &'static str,
    /// Which layer decided.
    pub layer: &'static str,
    /// Why.
    pub reason: Option<String>,
    /// Gate time in ms.
    pub gate_ms: i64,
    /// Execution time in ms.
    pub execution_ms: Option<i64>,
    /// Result size in bytes.
    pub result_bytes: Option<i64>,
    /// Whether the tool reported an error.
    pub result_is_error: Option<bool>,
    /// Dispatch or timeout error.
    pub error: Option<String>,
    /// SHA-256 of the arguments.
    pub arguments_digest: String,
    /// Full arguments as JSON text (only when the operator opted in).
    pub arguments: Option<String>,
    /// What the kernel enforced.
    pub confinement: Option<String>,
}

impl AuditColumns {
    /// The stored row these columns make under `id`, as a query returns it.
    pub fn to_row(&self, id: i64) -> AuditRow {
        AuditRow {
            id,
            time: rfc3339_millis(self.time_unix_ms),
            time_unix_ms: self.time_unix_ms,
            session_id: self.session_id.clone(),
            source: self.source.to_owned(),
            kind: Some(self.kind.to_owned()),
            effect: self.effect.map(str::to_owned),
            tenant: self.tenant.clone(),
            caller: self.caller.clone(),
            server: self.server.clone(),
            tool: self.tool.clone(),
            public_name: self.public_name.clone(),
            annotations: self
                .annotations
                .as_deref()
                .and_then(|text| serde_json::from_str(text).ok()),
            classes: split_classes(&self.classes),
            decision: self.decision.to_owned(),
            layer: self.layer.to_owned(),
            reason: self.reason.clone(),
            gate_ms: self.gate_ms,
            execution_ms: self.execution_ms,
            result_bytes: self.result_bytes,
            result_is_error: self.result_is_error,
            error: self.error.clone(),
            arguments_digest: self.arguments_digest.clone(),
            arguments: self
                .arguments
                .as_deref()
                .and_then(|text| serde_json::from_str(text).ok()),
            confinement: self.confinement.clone(),
        }
    }
}

/// Reads an [`AuditRow`] from a query row whose columns are `id` then the audit columns in
/// their stored order (`SELECT id, time_unix_ms, session_id, …`), with the row type's own getter
/// (`get` for rusqlite, `try_get` for tokio-postgres): one mapping for every audit store. The
/// caller's crate needs `serde_json`.
#[macro_export]
macro_rules! audit_row_from {
    ($row:expr, $get:ident) => {{
        let row = $row;
        let time_unix_ms: i64 = row.$get(1)?;
        let annotations: Option<String> = row.$get(8)?;
        let classes: String = row.$get(9)?;
        let arguments: Option<String> = row.$get(19)?;
        Ok($crate::AuditRow {
            id: row.$get(0)?,
            time: $crate::rfc3339_millis(time_unix_ms),
            time_unix_ms,
            session_id: row.$get(2)?,
            source: row.$get(3)?,
            caller: row.$get(4)?,
            server: row.$get(5)?,
            tool: row.$get(6)?,
            public_name: row.$get(7)?,
            annotations: annotations.and_then(|text| ::serde_json::from_str(&text).ok()),
            classes: $crate::split_classes(&classes),
            decision: row.$get(10)?,
            layer: row.$get(11)?,
            reason: row.$get(12)?,
            gate_ms: row.$get(13)?,
            execution_ms: row.$get(14)?,
            result_bytes: row.$get(15)?,
            result_is_error: row.$get(16)?,
            error: row.$get(17)?,
            arguments_digest: row.$get(18)?,
            arguments: arguments.and_then(|text| ::serde_json::from_str(&text).ok()),
            confinement: row.$get(20)?,
            kind: row.$get(21)?,
            effect: row.$get(22)?,
            tenant: row.$get(23)?,
        })
    }};
}

/// The classes column (`a,b`) as names.
pub fn split_classes(classes: &str) -> Vec<String> {
    classes
        .split(',')
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

impl From<&AuditRecord> for AuditColumns {
    fn from(record: &AuditRecord) -> Self {
        Self {
            time_unix_ms: unix_millis(record.time),
            session_id: record.session_id.clone(),
            source: record.surface.as_str(),
            kind: record.kind.as_str(),
            effect: record.effect.map(CapabilityClass::as_str),
            tenant: record.tenant.clone(),
            caller: record.caller.clone(),
            server: record.server.clone(),
            tool: record.tool.clone(),
            public_name: record.public_name.clone(),
            annotations: record
                .annotations
                .as_ref()
                .and_then(|annotations| serde_json::to_string(annotations).ok()),
            classes: record.classes.to_names(),
            decision: record.decision.as_str(),
            layer: record.layer.as_str(),
            reason: record.reason.clone(),
            gate_ms: millis(record.gate_duration),
            execution_ms: record.execution_duration.map(millis),
            result_bytes: record
                .result_bytes
                .map(|bytes| i64::try_from(bytes).unwrap_or(i64::MAX)),
            result_is_error: record.result_is_error,
            error: record.error.clone(),
            arguments_digest: record.arguments_digest.clone(),
            arguments: record.arguments.as_ref().map(Value::to_string),
            confinement: record.confinement.clone(),
        }
    }
}

/// A record waiting to be written (its columns are rendered as they are bound, only those the
/// statement needs), and the intent it completes.
#[derive(Debug)]
struct PendingRow {
    record: AuditRecord,
    /// The row this one completes (a call's intent), if any: written in its place.
    replaces: Option<i64>,
}

impl PendingRow {
    fn new(record: AuditRecord) -> Self {
        Self {
            record,
            replaces: None,
        }
    }
}

/// Where a record's outcome goes.
enum Reply {
    /// A task awaiting [`AuditSink::record_async`].
    Async(tokio::sync::oneshot::Sender<Result<i64, AuditError>>),
    /// A thread blocked in [`AuditSink::record`].
    Blocking(SyncSender<Result<i64, AuditError>>),
}

impl Reply {
    /// Tells the waiter the row's id, or why it was not written.
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

/// One record for the writer thread, and who waits for it.
struct WriteJob {
    row: PendingRow,
    reply: Reply,
}

fn start_writer(shared: &Arc<WriterShared>) -> Result<Sender<WriteJob>, AuditError> {
    let (sender, jobs) = std::sync::mpsc::channel();
    let thread_shared = shared.clone();
    std::thread::Builder::new()
        .name("warden-audit".to_owned())
        .spawn(move || write_queued(&thread_shared, &jobs))
        .map_err(|source| AuditError::StartWriter {
            path: shared.path.clone(),
            source,
        })?;
    Ok(sender)
}

/// What the writer thread and callers committing inline share.
#[derive(Debug)]
struct WriterShared {
    path: PathBuf,
    /// Records handed to the writer thread and not yet taken by it.
    queued: AtomicUsize,
    state: Mutex<WriterState>,
}

impl WriterShared {
    fn new(path: &Path) -> Arc<Self> {
        Arc::new(Self {
            path: path.to_path_buf(),
            queued: AtomicUsize::new(0),
            state: Mutex::new(WriterState::default()),
        })
    }
}

/// The write connection, held by whoever is committing.
#[derive(Debug, Default)]
struct WriterState {
    /// Opened by the first record; a failed open is retried by the next one.
    connection: Option<Connection>,
    commits_since_checkpoint: u32,
    /// Wakes the checkpoint thread (started by the first checkpoint).
    checkpointer: Option<SyncSender<()>>,
}

/// The writer thread: commits whatever is waiting, in batches, until every [`AuditStore`]
/// handle is gone.
fn write_queued(shared: &WriterShared, jobs: &Receiver<WriteJob>) {
    while let Some(first) = next_job(jobs) {
        // A caller committing inline holds the connection for one INSERT at most; whatever
        // arrives meanwhile joins this batch.
        let mut state = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        shared.queued.fetch_sub(batch.len(), Ordering::AcqRel);
        state.write(&shared.path, batch);
    }
}

/// The next record for the writer thread: looked for during [`LOOK_BEFORE_SLEEPING`], then
/// waited for asleep; None once every [`AuditStore`] handle is gone.
fn next_job(jobs: &Receiver<WriteJob>) -> Option<WriteJob> {
    let looking = std::time::Instant::now();
    while looking.elapsed() < LOOK_BEFORE_SLEEPING {
        match jobs.try_recv() {
            Ok(job) => return Some(job),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => return None,
            Err(std::sync::mpsc::TryRecvError::Empty) => std::thread::yield_now(),
        }
    }
    jobs.recv().ok()
}

impl WriterState {
    fn connection(&mut self, path: &Path) -> Result<&Connection, AuditError> {
        let connection = match self.connection.take() {
            Some(connection) => connection,
            None => connect_writer(path)?,
        };
        Ok(self.connection.insert(connection))
    }

    /// One record, in its own (autocommit) transaction.
    fn write_one(&mut self, path: &Path, row: &PendingRow) -> Result<i64, AuditError> {
        let written = insert(self.connection(path)?, row).map_err(|source| AuditError::Sqlite {
            path: path.to_path_buf(),
            source,
        });
        self.committed(path);
        written
    }

    /// Several records in one transaction; each caller hears its own outcome.
    fn write(&mut self, path: &Path, batch: Vec<WriteJob>) {
        if batch.len() == 1 {
            for job in batch {
                let written = self.write_one(path, &job.row);
                job.reply.send(written);
            }
            return;
        }
        let mut batch = batch.into_iter();
        let connection = loop {
            match self.connection(path) {
                Ok(_) => break self.connection.as_ref(),
                // Each record retries the open and hears its own error.
                Err(error) => match batch.next() {
                    Some(job) => job.reply.send(Err(error)),
                    None => return,
                },
            }
        };
        let Some(connection) = connection else {
            return;
        };
        let batch: Vec<WriteJob> = batch.collect();
        let sqlite = |source| AuditError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        match insert_all(connection, &batch) {
            Ok(ids) => {
                for (job, id) in batch.into_iter().zip(ids) {
                    job.reply.send(Ok(id));
                }
            }
            Err(error) => {
                // Rolled back: write each record alone so each caller hears its own outcome.
                tracing::debug!(%error, "audit batch failed; writing its records one by one");
                for job in batch {
                    job.reply.send(insert(connection, &job.row).map_err(sqlite));
                }
            }
        }
        self.committed(path);
    }

    /// Counts a commit; every so many, asks for a WAL checkpoint.
    fn committed(&mut self, path: &Path) {
        self.commits_since_checkpoint += 1;
        if self.commits_since_checkpoint >= COMMITS_PER_CHECKPOINT {
            self.commits_since_checkpoint = 0;
            self.request_checkpoint(path);
        }
    }

    /// Asks the checkpoint thread for a checkpoint (one pending request is enough).
    fn request_checkpoint(&mut self, path: &Path) {
        if self.checkpointer.is_none() {
            let (sender, requests) = std::sync::mpsc::sync_channel(1);
            let thread_path = path.to_path_buf();
            let started = std::thread::Builder::new()
                .name("warden-audit-checkpoint".to_owned())
                .spawn(move || checkpoint_on_request(&thread_path, &requests));
            match started {
                Ok(_) => self.checkpointer = Some(sender),
                Err(error) => {
                    // Without the thread, checkpoint here (as SQLite would inside a commit).
                    tracing::warn!(%error, "cannot start the audit checkpoint thread");
                    if let Some(connection) = &self.connection {
                        checkpoint(connection, path);
                    }
                    return;
                }
            }
        }
        if let Some(sender) = &self.checkpointer
            && let Err(TrySendError::Disconnected(())) = sender.try_send(())
        {
            self.checkpointer = None;
        }
    }
}

/// Runs a passive WAL checkpoint per request, on its own connection, until the writer is gone.
fn checkpoint_on_request(path: &Path, requests: &Receiver<()>) {
    let mut connection = None;
    while requests.recv().is_ok() {
        if connection.is_none() {
            match connect(path) {
                Ok(opened) => connection = Some(opened),
                Err(error) => {
                    tracing::warn!(%error, "audit checkpoint: cannot open the database");
                    continue;
                }
            }
        }
        if let Some(connection) = &connection {
            checkpoint(connection, path);
        }
    }
}

/// Copies committed WAL frames into the database without waiting for readers or writers.
fn checkpoint(connection: &Connection, path: &Path) {
    let done = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
        row.get::<_, i64>(0)
    });
    if let Err(error) = done {
        tracing::debug!(%error, path = %path.display(), "audit WAL checkpoint failed");
    }
}

/// A new record: the outcome's columns first (`?1`–`?9`, bound as [`COMPLETE`] binds them),
/// then the rest.
const INSERT: &str = "INSERT INTO audit (decision, layer, reason, gate_ms, execution_ms, result_bytes, \
     result_is_error, error, confinement, time_unix_ms, session_id, source, caller, server, tool, \
     public_name, annotations, classes, arguments_digest, arguments, kind, effect, tenant) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23)";

/// A call's outcome written over its intent, row `?10`: only the columns an outcome decides. The
/// others (the time the call entered the gate, the session, the tool, its classes, the
/// arguments) were final when the intent was written from the same call, and leaving them out
/// keeps the indexes on `session_id` and `time_unix_ms` untouched, so the commit writes the
/// table's page alone.
const COMPLETE: &str = "UPDATE audit SET decision = ?1, layer = ?2, reason = ?3, gate_ms = ?4, \
     execution_ms = ?5, result_bytes = ?6, result_is_error = ?7, error = ?8, confinement = ?9 WHERE id = ?10";

/// Writes `row` — in place of the intent it completes, or as a new record (also when that
/// intent is not there to complete) — and returns its id.
fn insert(connection: &Connection, pending: &PendingRow) -> rusqlite::Result<i64> {
    let record = &pending.record;
    let gate_ms = millis(record.gate_duration);
    let execution_ms = record.execution_duration.map(millis);
    let result_bytes = record
        .result_bytes
        .map(|bytes| i64::try_from(bytes).unwrap_or(i64::MAX));
    // The columns an outcome decides, `?1`–`?9` of both statements.
    let outcome: [&dyn rusqlite::ToSql; 9] = [
        &record.decision.as_str(),
        &record.layer.as_str(),
        &record.reason,
        &gate_ms,
        &execution_ms,
        &result_bytes,
        &record.result_is_error,
        &record.error,
        &record.confinement,
    ];
    // Prepared once per connection and reused (SQLite's statement cache).
    if let Some(id) = pending.replaces {
        let changed = connection
            .prepare_cached(COMPLETE)?
            .execute(rusqlite::params_from_iter(
                outcome.iter().copied().chain([&id as &dyn rusqlite::ToSql]),
            ))?;
        if changed == 1 {
            return Ok(id);
        }
    }
    let annotations = record
        .annotations
        .as_ref()
        .and_then(|annotations| serde_json::to_string(annotations).ok());
    let arguments = record.arguments.as_ref().map(Value::to_string);
    let rest: [&dyn rusqlite::ToSql; 14] = [
        &unix_millis(record.time),
        &record.session_id,
        &record.surface.as_str(),
        &record.caller,
        &record.server,
        &record.tool,
        &record.public_name,
        &annotations,
        &record.classes.to_names(),
        &record.arguments_digest,
        &arguments,
        &record.kind.as_str(),
        &record.effect.map(CapabilityClass::as_str),
        &record.tenant,
    ];
    connection
        .prepare_cached(INSERT)?
        .execute(rusqlite::params_from_iter(
            outcome.iter().chain(rest.iter()).copied(),
        ))?;
    Ok(connection.last_insert_rowid())
}

/// Every row of `batch` in one transaction: all stored, or none.
fn insert_all(connection: &Connection, batch: &[WriteJob]) -> rusqlite::Result<Vec<i64>> {
    // IMMEDIATE takes the write lock up front (waiting out other processes' writers).
    let transaction =
        rusqlite::Transaction::new_unchecked(connection, rusqlite::TransactionBehavior::Immediate)?;
    let ids = batch
        .iter()
        .map(|job| insert(&transaction, &job.row))
        .collect::<rusqlite::Result<Vec<i64>>>()?;
    transaction.commit()?;
    Ok(ids)
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A connection for the writer thread: WAL checkpoints are left to the checkpoint thread.
fn connect_writer(path: &Path) -> Result<Connection, AuditError> {
    let connection = connect(path)?;
    connection
        .pragma_update(None, "wal_autocheckpoint", 0)
        .map_err(|source| AuditError::Sqlite {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(connection)
}

/// Creates `path` empty with mode 0600 unless it exists.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}

fn connect(path: &Path) -> Result<Connection, AuditError> {
    if let Some(folder) = path
        .parent()
        .filter(|folder| !folder.as_os_str().is_empty())
    {
        std::fs::create_dir_all(folder).map_err(|source| AuditError::CreateFolder {
            path: folder.to_path_buf(),
            source,
        })?;
    }
    let sqlite = |source| AuditError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    // The trail names every tool, server and session: created 0600 (SQLite gives its WAL and
    // shared-memory files the same mode).
    create_private(path).map_err(|source| AuditError::CreateFile {
        path: path.to_path_buf(),
        source,
    })?;
    let connection = Connection::open(path).map_err(sqlite)?;
    connection
        .busy_timeout(Duration::from_secs(5))
        .map_err(sqlite)?;
    // A new database gets 1 KiB pages: a record is a few hundred bytes, and every commit writes
    // each page it touched to the WAL whole (ignored for an existing database).
    connection
        .pragma_update(None, "page_size", 1024)
        .map_err(sqlite)?;
    let mode: String = connection
        .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
        .map_err(sqlite)?;
    // NORMAL is durable across a crash of warden in WAL mode and avoids an fsync per record.
    connection
        .pragma_update(None, "synchronous", "NORMAL")
        .map_err(sqlite)?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(path = %path.display(), mode, "audit database is not in WAL mode");
    }
    connection.execute_batch(SCHEMA).map_err(sqlite)?;
    add_missing_columns(&connection).map_err(sqlite)?;
    Ok(connection)
}

/// Columns added after the first release, added to a database made before them.
const ADDED_COLUMNS: &[(&str, &str)] = &[
    ("confinement", "TEXT"),
    ("kind", "TEXT"),
    ("effect", "TEXT"),
    ("tenant", "TEXT"),
];

fn add_missing_columns(connection: &Connection) -> rusqlite::Result<()> {
    let mut statement = connection.prepare("SELECT name FROM pragma_table_info('audit')")?;
    let present: Vec<String> = statement
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for (name, kind) in ADDED_COLUMNS {
        if !present.iter().any(|column| column == name) {
            // Another process may add it at the same moment: "duplicate column" is success.
            match connection.execute_batch(&format!("ALTER TABLE audit ADD COLUMN {name} {kind}")) {
                Ok(()) => {}
                Err(error) if error.to_string().contains("duplicate column") => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(())
}

fn row_from_sql(row: &rusqlite::Row<'_>) -> rusqlite::Result<AuditRow> {
    crate::audit_row_from!(row, get)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn the_digest_is_the_sha256_of_the_compact_json_text() {
        let arguments = serde_json::json!({
            "path": "/tmp/ä \"quoted\"\n",
            "numbers": [1, 2.5, -3, null, true],
            "nested": {"b": {}, "a": []}
        });
        let text = arguments.to_string();
        assert_eq!(
            arguments_digest(&arguments),
            hex::encode(Sha256::digest(text.as_bytes()))
        );
        assert_eq!(
            arguments_digest(&serde_json::json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
    }

    fn record(public_name: &str) -> AuditRecord {
        AuditRecord {
            time: SystemTime::now(),
            session_id: "s".into(),
            surface: CallSurface::Agent,
            kind: CallKind::Tool,
            effect: None,
            tenant: None,
            caller: None,
            server: None,
            tool: None,
            public_name: public_name.into(),
            annotations: None,
            classes: CapabilitySet::EMPTY,
            decision: Decision::Denied,
            layer: Layer::Resolve,
            reason: None,
            gate_duration: Duration::ZERO,
            execution_duration: None,
            result_bytes: None,
            result_is_error: None,
            error: None,
            arguments_digest: arguments_digest(&Value::Null),
            arguments: None,
            confinement: None,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn records_arriving_while_the_connection_is_busy_are_committed_as_one_batch() {
        let dir = tempfile::tempdir().unwrap();
        let store = AuditStore::open(&dir.path().join("audit.db")).unwrap();
        store.record_async(record("inline"), true).await.unwrap();
        let commits_before = store.shared.state.lock().unwrap().commits_since_checkpoint;
        let busy = store.shared.state.lock().unwrap();
        let waiting: Vec<_> = (0..5)
            .map(|index| store.record_async(record(&format!("queued-{index}")), true))
            .collect();
        assert_eq!(store.shared.queued.load(Ordering::Acquire), 5);
        drop(busy);
        for written in futures::future::join_all(waiting).await {
            written.unwrap();
        }
        let commits_after = store.shared.state.lock().unwrap().commits_since_checkpoint;
        assert_eq!(
            commits_after,
            commits_before + 1,
            "one transaction for the five"
        );
        let names: Vec<String> = store
            .query(&AuditQuery::default())
            .unwrap()
            .into_iter()
            .map(|row| row.public_name)
            .collect();
        assert_eq!(
            names,
            [
                "inline", "queued-0", "queued-1", "queued-2", "queued-3", "queued-4"
            ]
        );
        assert_eq!(store.shared.queued.load(Ordering::Acquire), 0);
    }
}
