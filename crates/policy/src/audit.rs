//! The audit trail: every gate decision appended to a hash-chained journal, folded into SQLite (WAL) for the queries behind `warden audit` and `GET /v1/audit`.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OptionalExtension, params_from_iter};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use warden_vocab::{CapabilityClass, CapabilitySet};

use crate::approval::BoxFuture;
use crate::call::{CallKind, CallSurface, Layer};
use crate::capability::ToolAnnotations;
use crate::journal::{Journal, JournalError, JournalPaths, JournalSync};
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
    /// The journal could not be written or read.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A record could not be encoded as a journal line.
    #[error("audit record could not be encoded: {0}")]
    Encode(String),
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
    /// cannot complete a record stores nothing here and returns [`AuditEntry::NONE`]; its
    /// outcome is then one new record, as without an intent.
    fn begin_async(
        &self,
        record: AuditRecord,
        alone: bool,
    ) -> BoxFuture<'_, Result<AuditEntry, AuditError>> {
        let _ = (record, alone);
        Box::pin(std::future::ready(Ok(AuditEntry::NONE)))
    }

    /// Stores a call's outcome, completing its intent `entry` when there is one (readers show
    /// the call as one record, under the intent's id), else as a new record.
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

    /// The id of the intent's record, if one was stored (for the SQLite store, its number in
    /// the journal, which is also its row id).
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

/// The audit table: a call's record (decision `started` while it runs) or a decision made
/// without dispatch. `id` is a plain rowid: records are never deleted, so ids only grow, and a
/// commit writes no `sqlite_sequence` page (databases made before this keep their
/// `AUTOINCREMENT`, which behaves the same). `seq` is the journal record the row was folded
/// from (None for rows written before the journal).
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
    tenant TEXT,
    seq INTEGER
);
CREATE INDEX IF NOT EXISTS audit_session ON audit (session_id, id);
CREATE INDEX IF NOT EXISTS audit_time ON audit (time_unix_ms);
";

/// What the journal adds beside the `audit` table (after its columns are complete): a call's
/// outcome as a row of its own, completing the intent `completes`; every folded journal
/// record's hash (what `warden audit verify` compares the journal with); how far the journal
/// is folded; and the view readers query, one row per call with its outcome folded onto its
/// intent.
const JOURNAL_SCHEMA: &str = "
CREATE UNIQUE INDEX IF NOT EXISTS audit_seq ON audit (seq) WHERE seq IS NOT NULL;
CREATE TABLE IF NOT EXISTS audit_outcome (
    seq INTEGER PRIMARY KEY,
    completes INTEGER NOT NULL,
    decision TEXT NOT NULL,
    layer TEXT NOT NULL,
    reason TEXT,
    gate_ms INTEGER NOT NULL,
    execution_ms INTEGER,
    result_bytes INTEGER,
    result_is_error INTEGER,
    error TEXT,
    confinement TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS audit_outcome_completes ON audit_outcome (completes);
CREATE TABLE IF NOT EXISTS audit_chain (seq INTEGER PRIMARY KEY, hash BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS audit_fold (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    segment INTEGER NOT NULL,
    offset INTEGER NOT NULL
);
CREATE VIEW IF NOT EXISTS audit_calls AS SELECT
    a.id AS id, a.time_unix_ms AS time_unix_ms, a.session_id AS session_id, a.source AS source,
    a.caller AS caller, a.server AS server, a.tool AS tool, a.public_name AS public_name,
    a.annotations AS annotations, a.classes AS classes,
    CASE WHEN o.seq IS NULL THEN a.decision ELSE o.decision END AS decision,
    CASE WHEN o.seq IS NULL THEN a.layer ELSE o.layer END AS layer,
    CASE WHEN o.seq IS NULL THEN a.reason ELSE o.reason END AS reason,
    CASE WHEN o.seq IS NULL THEN a.gate_ms ELSE o.gate_ms END AS gate_ms,
    CASE WHEN o.seq IS NULL THEN a.execution_ms ELSE o.execution_ms END AS execution_ms,
    CASE WHEN o.seq IS NULL THEN a.result_bytes ELSE o.result_bytes END AS result_bytes,
    CASE WHEN o.seq IS NULL THEN a.result_is_error ELSE o.result_is_error END AS result_is_error,
    CASE WHEN o.seq IS NULL THEN a.error ELSE o.error END AS error,
    a.arguments_digest AS arguments_digest, a.arguments AS arguments,
    CASE WHEN o.seq IS NULL THEN a.confinement ELSE o.confinement END AS confinement,
    a.kind AS kind, a.effect AS effect, a.tenant AS tenant
FROM audit a LEFT JOIN audit_outcome o ON o.completes = a.seq;
";

/// Journal bytes one fold transaction takes at most.
const FOLD_BATCH_BYTES: usize = 8 * 1024 * 1024;
/// How long the background folder lets records gather after the first one wakes it.
const FOLD_PAUSE: Duration = Duration::from_millis(200);
/// A folded segment at least this large is sealed and a new one started.
const SEGMENT_BYTES: u64 = 64 * 1024 * 1024;

/// How an [`AuditStore`] writes its journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditOptions {
    /// When an appended record counts as durable (`[audit] sync`).
    pub sync: JournalSync,
    /// A folded segment at least this large is sealed ([`SEGMENT_BYTES`] by default).
    pub segment_bytes: u64,
}

impl Default for AuditOptions {
    fn default() -> Self {
        Self {
            sync: JournalSync::Process,
            segment_bytes: SEGMENT_BYTES,
        }
    }
}

/// The SQLite audit store: an append-only, hash-chained journal (`<state>/audit.journal`,
/// see [`crate::journal`]) that every record is written to, and the database (`<state>/audit.db`,
/// WAL, 5 s busy timeout so several warden processes share it) the journal is folded into for
/// queries.
///
/// A record is one `O_APPEND` write of one line on the caller's thread, so it is on record (in
/// the kernel, surviving the process being killed; with `sync = "power"` also on the disk)
/// before the call goes on: no thread hand-off, no SQLite commit on the call's path. A call's
/// intent and its outcome are two records. A background folder (started by the first record)
/// inserts new journal lines into the database in large batches, off every call's path; a query
/// folds whatever is left first, so it sees every record written before it.
#[derive(Debug)]
pub struct AuditStore {
    path: PathBuf,
    /// For queries; opened on first use (or by [`AuditStore::open`]).
    reader: Mutex<Option<Connection>>,
    folding: Arc<Folding>,
    /// Wakes the background folder; started by the first record.
    folder: Mutex<Option<SyncSender<()>>>,
}

/// What the store and its background folder share.
#[derive(Debug)]
struct Folding {
    path: PathBuf,
    journal: Journal,
    segment_bytes: u64,
    /// The connection folds write with; opened on first use.
    connection: Mutex<Option<Connection>>,
}

impl AuditStore {
    /// Opens (creating if needed) the store at `path`, failing now if it cannot.
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        Self::open_with(path, AuditOptions::default())
    }

    /// [`AuditStore::open`] with `options`.
    pub fn open_with(path: &Path, options: AuditOptions) -> Result<Self, AuditError> {
        let connection = connect(path)?;
        let store = Self::open_lazily_with(path, options);
        if let Ok(mut reader) = store.reader.lock() {
            *reader = Some(connection);
        }
        Ok(store)
    }

    /// A store that opens its files on first use and retries on every write until it succeeds;
    /// each failed write returns its error (which the gate reports without failing the call).
    pub fn open_lazily(path: &Path) -> Self {
        Self::open_lazily_with(path, AuditOptions::default())
    }

    /// [`AuditStore::open_lazily`] with `options`.
    pub fn open_lazily_with(path: &Path, options: AuditOptions) -> Self {
        Self {
            path: path.to_path_buf(),
            reader: Mutex::new(None),
            folding: Arc::new(Folding {
                path: path.to_path_buf(),
                journal: Journal::new(JournalPaths::beside(path), options.sync, {
                    let database = path.to_path_buf();
                    Box::new(move || highest_id(&database))
                }),
                segment_bytes: options.segment_bytes,
                connection: Mutex::new(None),
            }),
            folder: Mutex::new(None),
        }
    }

    /// Whether a trail exists at `path` (its database or its journal).
    pub fn exists(path: &Path) -> bool {
        path.exists() || JournalPaths::beside(path).current.exists()
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The journal's files.
    pub fn journal_paths(&self) -> &JournalPaths {
        self.folding.journal.paths()
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

    /// The journal mode in force (`wal`).
    pub fn journal_mode(&self) -> Result<String, AuditError> {
        self.with_reader(|connection| {
            connection.query_row("PRAGMA journal_mode", [], |row| row.get(0))
        })
    }

    /// Folds every journal line not yet in the database into it (what a query does first).
    pub fn fold(&self) -> Result<(), AuditError> {
        self.folding.fold()
    }

    /// Rows matching `query`, oldest first: one per call, its outcome folded onto its intent.
    pub fn query(&self, query: &AuditQuery) -> Result<Vec<AuditRow>, AuditError> {
        self.fold()?;
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
             arguments_digest, arguments, confinement, kind, effect, tenant FROM audit_calls {filter} ORDER BY id {taken} LIMIT {limit}) ORDER BY id ASC"
        );
        self.with_reader(|connection| {
            let mut statement = connection.prepare(&sql)?;
            let rows = statement.query_map(params_from_iter(values.iter()), row_from_sql)?;
            rows.collect()
        })
    }

    /// The highest row id so far (None when empty) — where `--follow` starts.
    pub fn last_id(&self) -> Result<Option<i64>, AuditError> {
        self.fold()?;
        self.with_reader(|connection| {
            connection
                .query_row("SELECT MAX(id) FROM audit", [], |row| {
                    row.get::<_, Option<i64>>(0)
                })
                .optional()
                .map(Option::flatten)
        })
    }

    /// Appends one record to the journal (on this thread) and wakes the folder; returns its
    /// sequence number.
    fn append(&self, entry: JournalEntry<'_>, time_unix_ms: i64) -> Result<u64, AuditError> {
        let body = entry.body()?;
        let appended = self.folding.journal.append(&body, time_unix_ms)?;
        self.wake_folder();
        Ok(appended.seq)
    }

    /// Tells the background folder there is something to fold (starting it if needed).
    fn wake_folder(&self) {
        let Ok(mut folder) = self.folder.lock() else {
            return;
        };
        if let Some(sender) = folder.as_ref() {
            match sender.try_send(()) {
                Ok(()) | Err(TrySendError::Full(())) => return,
                Err(TrySendError::Disconnected(())) => *folder = None,
            }
        }
        let (sender, wakes) = std::sync::mpsc::sync_channel(1);
        let folding = self.folding.clone();
        let started = std::thread::Builder::new()
            .name("warden-audit-fold".to_owned())
            .spawn(move || fold_when_woken(&folding, &wakes));
        match started {
            Ok(_) => {
                let _ = sender.try_send(());
                *folder = Some(sender);
            }
            // Without the thread the next query folds everything.
            Err(error) => tracing::warn!(%error, "cannot start the audit folder thread"),
        }
    }
}

/// The highest row id the database at `path` holds (0 when it holds none or cannot be read):
/// a new journal numbers its records after it, so a folded record's row id is its number.
fn highest_id(path: &Path) -> u64 {
    if !path.exists() {
        return 0;
    }
    let highest = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|connection| {
            connection.query_row("SELECT MAX(id) FROM audit", [], |row| {
                row.get::<_, Option<i64>>(0)
            })
        });
    match highest {
        Ok(highest) => highest.and_then(|id| u64::try_from(id).ok()).unwrap_or(0),
        Err(error) => {
            tracing::debug!(%error, path = %path.display(), "audit: no highest id to number after");
            0
        }
    }
}

/// The background folder: after each wake (and a pause for more records to gather), folds the
/// journal into the database and seals a large folded segment; ends once the store is gone.
fn fold_when_woken(folding: &Folding, wakes: &Receiver<()>) {
    while wakes.recv().is_ok() {
        std::thread::sleep(FOLD_PAUSE);
        while wakes.try_recv().is_ok() {}
        if let Err(error) = folding.fold() {
            tracing::debug!(%error, "audit fold failed; the next one retries");
        }
    }
}

impl AuditSink for AuditStore {
    /// Appends the record to the journal on this thread.
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        self.append(JournalEntry::Call(record), unix_millis(record.time))
            .map(drop)
    }

    /// The record is appended right here, before this returns its (ready) future.
    fn record_async(
        &self,
        record: AuditRecord,
        alone: bool,
    ) -> BoxFuture<'_, Result<(), AuditError>> {
        let _ = alone;
        Box::pin(std::future::ready(self.record(&record)))
    }

    /// The intent is a journal record of its own, appended before this returns (so before
    /// dispatch); its sequence number is the entry.
    fn begin_async(
        &self,
        record: AuditRecord,
        alone: bool,
    ) -> BoxFuture<'_, Result<AuditEntry, AuditError>> {
        let _ = alone;
        let appended = self
            .append(JournalEntry::Intent(&record), unix_millis(record.time))
            .map(|seq| AuditEntry(i64::try_from(seq).ok()));
        Box::pin(std::future::ready(appended))
    }

    /// The outcome is a record of its own naming the intent it completes (readers fold it
    /// onto the intent); without an intent it is a whole record.
    fn complete_async(
        &self,
        entry: AuditEntry,
        record: AuditRecord,
        alone: bool,
    ) -> BoxFuture<'_, Result<(), AuditError>> {
        let _ = alone;
        let time = unix_millis(SystemTime::now());
        let appended = match entry.0.and_then(|id| u64::try_from(id).ok()) {
            Some(intent) => self.append(JournalEntry::Outcome(intent, &record), time),
            None => self.append(JournalEntry::Call(&record), unix_millis(record.time)),
        };
        Box::pin(std::future::ready(appended.map(drop)))
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

/// One record as the journal gets it.
enum JournalEntry<'a> {
    /// A decision made without an intent (refused before dispatch, or an intent that could not
    /// be recorded).
    Call(&'a AuditRecord),
    /// A call about to be dispatched (decision `started`).
    Intent(&'a AuditRecord),
    /// The outcome of the call whose intent is record `.0`.
    Outcome(u64, &'a AuditRecord),
}

impl JournalEntry<'_> {
    /// The line's members after `seq` and `prev`.
    fn body(&self) -> Result<String, AuditError> {
        let encoded = match self {
            JournalEntry::Call(record) => serde_json::to_string(&AuditColumns::from(*record))
                .map(|columns| format!("\"type\":\"call\",\"record\":{columns}")),
            JournalEntry::Intent(record) => serde_json::to_string(&AuditColumns::from(*record))
                .map(|columns| format!("\"type\":\"intent\",\"record\":{columns}")),
            JournalEntry::Outcome(intent, record) => {
                serde_json::to_string(&AuditColumns::from(*record)).map(|columns| {
                    format!("\"type\":\"outcome\",\"completes\":{intent},\"record\":{columns}")
                })
            }
        };
        encoded.map_err(|error| AuditError::Encode(error.to_string()))
    }
}

/// A record's columns as a line carries them (an outcome carries the whole record too: it
/// stands as a record of its own if its intent is not there).
#[derive(Debug, Clone, Deserialize)]
struct StoredColumns {
    time_unix_ms: i64,
    session_id: String,
    source: String,
    kind: String,
    effect: Option<String>,
    tenant: Option<String>,
    caller: Option<String>,
    server: Option<String>,
    tool: Option<String>,
    public_name: String,
    annotations: Option<String>,
    classes: String,
    decision: String,
    layer: String,
    reason: Option<String>,
    gate_ms: i64,
    execution_ms: Option<i64>,
    result_bytes: Option<i64>,
    result_is_error: Option<bool>,
    error: Option<String>,
    arguments_digest: String,
    arguments: Option<String>,
    confinement: Option<String>,
}

/// One journal line as the folder reads it.
#[derive(Debug, Deserialize)]
struct JournalLine {
    seq: i64,
    #[serde(rename = "type")]
    kind: String,
    completes: Option<i64>,
    record: Option<StoredColumns>,
}

/// A whole record folded into `audit`, its row id its journal number (or the next free id, should
/// an older row hold that one: a journal numbered without seeing the database's highest id).
const INSERT_CALL: &str = "INSERT INTO audit (id, time_unix_ms, session_id, source, kind, effect, tenant, \
     caller, server, tool, public_name, annotations, classes, decision, layer, reason, gate_ms, \
     execution_ms, result_bytes, result_is_error, error, arguments_digest, arguments, confinement, seq) \
     VALUES ((SELECT CASE WHEN EXISTS (SELECT 1 FROM audit WHERE id = ?24) THEN NULL ELSE ?24 END), ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)";

/// An outcome folded into `audit_outcome` (a second outcome for one intent keeps the first).
const INSERT_OUTCOME: &str = "INSERT OR IGNORE INTO audit_outcome (seq, completes, decision, layer, reason, gate_ms, \
     execution_ms, result_bytes, result_is_error, error, confinement) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

impl Folding {
    /// Folds every whole journal line past the fold mark into the database, a batch per
    /// transaction: the rows and the new mark commit together, and a line already folded (its
    /// `seq` in `audit_chain`) is skipped, so a fold cut short and redone stores each record
    /// once. Then seals the current segment if it is folded and large.
    fn fold(&self) -> Result<(), AuditError> {
        let mut guard = self
            .connection
            .lock()
            .map_err(|_| AuditError::Poisoned(self.path.clone()))?;
        let connection = match guard.take() {
            Some(connection) => guard.insert(connection),
            None => guard.insert(connect(&self.path)?),
        };
        let sqlite = |source| AuditError::Sqlite {
            path: self.path.clone(),
            source,
        };
        loop {
            let mark: Option<(i64, i64)> = connection
                .query_row("SELECT segment, offset FROM audit_fold", [], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .optional()
                .map_err(sqlite)?;
            let segments = self.journal.paths().segments()?;
            let mut firsts = Vec::with_capacity(segments.len());
            for segment in &segments {
                firsts.push(segment.first_seq()?);
            }
            // Where the mark is; a mark naming no segment there is folds from the start again
            // (nothing is stored twice).
            let (mut index, mut offset) = mark
                .and_then(|(first, offset)| {
                    let first = u64::try_from(first).ok()?;
                    let at = firsts.iter().position(|seen| *seen == Some(first))?;
                    Some((at, u64::try_from(offset).ok()?))
                })
                .unwrap_or((0, 0));
            let mut batch = None;
            while index < segments.len() {
                let Some(first) = firsts[index] else {
                    break;
                };
                let lines = read_whole_lines(&segments[index].path, offset)?;
                if !lines.is_empty() {
                    batch = Some((first, offset, lines));
                    break;
                }
                index += 1;
                offset = 0;
            }
            let Some((first, offset, lines)) = batch else {
                let folded_to = mark.and_then(|(first, offset)| {
                    Some((u64::try_from(first).ok()?, u64::try_from(offset).ok()?))
                });
                if let Some(folded_to) = folded_to {
                    self.journal.seal_if_folded(self.segment_bytes, folded_to)?;
                }
                return Ok(());
            };
            let end = offset + lines.len() as u64;
            let transaction = rusqlite::Transaction::new_unchecked(
                connection,
                rusqlite::TransactionBehavior::Immediate,
            )
            .map_err(sqlite)?;
            fold_lines(&transaction, &lines, &segments[index].path).map_err(sqlite)?;
            transaction
                .execute(
                    "INSERT INTO audit_fold (one, segment, offset) VALUES (1, ?1, ?2) \
                     ON CONFLICT (one) DO UPDATE SET segment = ?1, offset = ?2",
                    rusqlite::params![
                        i64::try_from(first).unwrap_or(i64::MAX),
                        i64::try_from(end).unwrap_or(i64::MAX)
                    ],
                )
                .map_err(sqlite)?;
            transaction.commit().map_err(sqlite)?;
        }
    }
}

/// The whole lines of `path` from `offset` on, at most about [`FOLD_BATCH_BYTES`] of them (an
/// unfinished last line is left for later).
fn read_whole_lines(path: &Path, offset: u64) -> Result<Vec<u8>, AuditError> {
    use std::io::{Read, Seek, SeekFrom};
    let journal_error = |source| {
        AuditError::Journal(JournalError::Io {
            path: path.to_path_buf(),
            source,
        })
    };
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(journal_error(error)),
    };
    file.seek(SeekFrom::Start(offset)).map_err(journal_error)?;
    let mut bytes = Vec::new();
    (&mut file)
        .take(FOLD_BATCH_BYTES as u64)
        .read_to_end(&mut bytes)
        .map_err(journal_error)?;
    let whole = bytes
        .iter()
        .rposition(|byte| *byte == b'\n')
        .map_or(0, |at| at + 1);
    if whole == 0 && bytes.len() == FOLD_BATCH_BYTES {
        // One line longer than a batch: read it whole.
        let mut rest = Vec::new();
        let mut reader = std::io::BufReader::new(file);
        std::io::BufRead::read_until(&mut reader, b'\n', &mut rest).map_err(journal_error)?;
        bytes.extend_from_slice(&rest);
        if bytes.last() == Some(&b'\n') {
            return Ok(bytes);
        }
        return Ok(Vec::new());
    }
    bytes.truncate(whole);
    Ok(bytes)
}

/// Inserts the records of `lines` not folded before.
fn fold_lines(connection: &Connection, lines: &[u8], path: &Path) -> rusqlite::Result<()> {
    let mut chain = connection
        .prepare_cached("INSERT OR IGNORE INTO audit_chain (seq, hash) VALUES (?1, ?2)")?;
    let mut calls = connection.prepare_cached(INSERT_CALL)?;
    let mut outcomes = connection.prepare_cached(INSERT_OUTCOME)?;
    let mut intent_of = connection.prepare_cached("SELECT 1 FROM audit WHERE seq = ?1")?;
    for line in lines.split(|byte| *byte == b'\n') {
        if line.is_empty() {
            continue;
        }
        let parsed: JournalLine = match serde_json::from_slice(line) {
            Ok(parsed) => parsed,
            Err(error) => {
                // `warden audit verify` names it; the fold goes on past it.
                tracing::warn!(path = %path.display(), %error, "audit journal: a line that is not a record is skipped");
                continue;
            }
        };
        let hash = crate::journal::line_hash(line);
        if chain.execute(rusqlite::params![parsed.seq, &hash[..]])? == 0 {
            continue;
        }
        let Some(record) = parsed.record else {
            // A checkpoint is in the chain only.
            continue;
        };
        // An outcome completes its intent when that is there; else it is a record of its own.
        let completes = match (parsed.kind.as_str(), parsed.completes) {
            ("outcome", Some(intent)) => intent_of
                .query_row([intent], |_| Ok(()))
                .optional()?
                .map(|()| intent),
            _ => None,
        };
        if let Some(intent) = completes {
            outcomes.execute(rusqlite::params![
                parsed.seq,
                intent,
                record.decision,
                record.layer,
                record.reason,
                record.gate_ms,
                record.execution_ms,
                record.result_bytes,
                record.result_is_error,
                record.error,
                record.confinement,
            ])?;
            continue;
        }
        calls.execute(rusqlite::params![
            record.time_unix_ms,
            record.session_id,
            record.source,
            record.kind,
            record.effect,
            record.tenant,
            record.caller,
            record.server,
            record.tool,
            record.public_name,
            record.annotations,
            record.classes,
            record.decision,
            record.layer,
            record.reason,
            record.gate_ms,
            record.execution_ms,
            record.result_bytes,
            record.result_is_error,
            record.error,
            record.arguments_digest,
            record.arguments,
            record.confinement,
            parsed.seq,
        ])?;
    }
    Ok(())
}

/// A record as its columns are stored (its JSON parts rendered, its times in ms): what a
/// database-server backend binds to its INSERT, and the row a stored record is compared with.
/// The SQLite store renders the same columns as it binds them, straight from the record.
#[derive(Debug, Clone, Serialize)]
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

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
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
    connection.execute_batch(JOURNAL_SCHEMA).map_err(sqlite)?;
    Ok(connection)
}

/// Columns added after the first release, added to a database made before them.
const ADDED_COLUMNS: &[(&str, &str)] = &[
    ("confinement", "TEXT"),
    ("kind", "TEXT"),
    ("effect", "TEXT"),
    ("tenant", "TEXT"),
    ("seq", "INTEGER"),
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
}
