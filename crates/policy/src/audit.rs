//! The audit trail: one SQLite row per gate decision (WAL), and the query behind `warden audit`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::call::{CallSource, Decision, Layer};
use crate::capability::{CapabilitySet, ToolAnnotations};
use crate::time::{rfc3339_millis, unix_millis};

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
}

/// One decision as the gate reports it.
#[derive(Debug, Clone)]
pub struct AuditRecord {
    /// When the call entered the gate.
    pub time: SystemTime,
    /// The session.
    pub session_id: String,
    /// The calling surface.
    pub source: CallSource,
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
}

/// SHA-256 (hex) of a JSON value's compact text — what the audit trail stores by default.
pub fn arguments_digest(arguments: &Value) -> String {
    hex::encode(Sha256::digest(arguments.to_string().as_bytes()))
}

/// Where the gate sends its one record per call. A failure is returned to the gate, which
/// reports it in the outcome and the log; it never fails the call.
pub trait AuditSink: Send + Sync {
    /// Stores one record.
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError>;
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
    /// Only records with an id above this one (`--follow` polls with the last id seen).
    pub after_id: Option<i64>,
    /// At most this many rows: the newest ones, still returned oldest first.
    pub limit: Option<usize>,
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
    /// The calling surface (`agent`, `code-mode`, …).
    pub source: String,
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
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
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
    arguments TEXT
);
CREATE INDEX IF NOT EXISTS audit_session ON audit (session_id, id);
CREATE INDEX IF NOT EXISTS audit_time ON audit (time_unix_ms);
";

/// The SQLite audit store (`<state>/audit.db`, WAL journal, 5 s busy timeout so several warden
/// processes can write to it).
#[derive(Debug)]
pub struct AuditStore {
    path: PathBuf,
    connection: Mutex<Option<Connection>>,
}

impl AuditStore {
    /// Opens (creating if needed) the store at `path`, failing now if it cannot.
    pub fn open(path: &Path) -> Result<Self, AuditError> {
        let connection = connect(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            connection: Mutex::new(Some(connection)),
        })
    }

    /// A store that connects on first use and retries on every write until it succeeds; each
    /// failed write returns its error (which the gate reports without failing the call).
    pub fn open_lazily(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            connection: Mutex::new(None),
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn with_connection<T>(
        &self,
        work: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, AuditError> {
        let mut guard = self
            .connection
            .lock()
            .map_err(|_| AuditError::Poisoned(self.path.clone()))?;
        if guard.is_none() {
            *guard = Some(connect(&self.path)?);
        }
        match guard.as_ref() {
            Some(connection) => work(connection).map_err(|source| AuditError::Sqlite {
                path: self.path.clone(),
                source,
            }),
            None => Err(AuditError::Poisoned(self.path.clone())),
        }
    }

    /// The journal mode in force (`wal`).
    pub fn journal_mode(&self) -> Result<String, AuditError> {
        self.with_connection(|connection| {
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
        let sql = format!(
            "SELECT * FROM (SELECT id, time_unix_ms, session_id, source, caller, server, tool, public_name, annotations, \
             classes, decision, layer, reason, gate_ms, execution_ms, result_bytes, result_is_error, error, \
             arguments_digest, arguments FROM audit {filter} ORDER BY id DESC LIMIT {limit}) ORDER BY id ASC"
        );
        self.with_connection(|connection| {
            let mut statement = connection.prepare(&sql)?;
            let rows = statement.query_map(params_from_iter(values.iter()), row_from_sql)?;
            rows.collect()
        })
    }

    /// The highest row id so far (None when empty) — where `--follow` starts.
    pub fn last_id(&self) -> Result<Option<i64>, AuditError> {
        self.with_connection(|connection| {
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
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        let annotations = record
            .annotations
            .as_ref()
            .and_then(|annotations| serde_json::to_string(annotations).ok());
        let arguments = record.arguments.as_ref().map(Value::to_string);
        self.with_connection(|connection| {
            // Prepared once per connection and reused (SQLite's statement cache).
            connection.prepare_cached(
                "INSERT INTO audit (time_unix_ms, session_id, source, caller, server, tool, public_name, annotations, \
                 classes, decision, layer, reason, gate_ms, execution_ms, result_bytes, result_is_error, error, \
                 arguments_digest, arguments) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
            )?.execute(params![
                    unix_millis(record.time),
                    record.session_id,
                    record.source.as_str(),
                    record.caller,
                    record.server,
                    record.tool,
                    record.public_name,
                    annotations,
                    record.classes.to_names(),
                    record.decision.as_str(),
                    record.layer.as_str(),
                    record.reason,
                    millis(record.gate_duration),
                    record.execution_duration.map(millis),
                    record.result_bytes.map(|bytes| i64::try_from(bytes).unwrap_or(i64::MAX)),
                    record.result_is_error,
                    record.error,
                    record.arguments_digest,
                    arguments,
                ],
            )?;
            Ok(())
        })
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
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
    let connection = Connection::open(path).map_err(sqlite)?;
    connection
        .busy_timeout(Duration::from_secs(5))
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
    Ok(connection)
}

fn row_from_sql(row: &rusqlite::Row<'_>) -> rusqlite::Result<AuditRow> {
    let time_unix_ms: i64 = row.get(1)?;
    let annotations: Option<String> = row.get(8)?;
    let classes: String = row.get(9)?;
    let arguments: Option<String> = row.get(19)?;
    Ok(AuditRow {
        id: row.get(0)?,
        time: rfc3339_millis(time_unix_ms),
        time_unix_ms,
        session_id: row.get(2)?,
        source: row.get(3)?,
        caller: row.get(4)?,
        server: row.get(5)?,
        tool: row.get(6)?,
        public_name: row.get(7)?,
        annotations: annotations.and_then(|text| serde_json::from_str(&text).ok()),
        classes: classes
            .split(',')
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect(),
        decision: row.get(10)?,
        layer: row.get(11)?,
        reason: row.get(12)?,
        gate_ms: row.get(13)?,
        execution_ms: row.get(14)?,
        result_bytes: row.get(15)?,
        result_is_error: row.get(16)?,
        error: row.get(17)?,
        arguments_digest: row.get(18)?,
        arguments: arguments.and_then(|text| serde_json::from_str(&text).ok()),
    })
}
