//! The knowledge store on SQLite: collections, their documents (by path, with a content hash) and chunks with provenance, an FTS5 index for lexical (BM25) retrieval. A document's chunks are replaced in one transaction, so a search sees the old chunks or the new, never half of each.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use rusqlite::{Connection, OptionalExtension, params};

use crate::chunk::Chunk;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("the knowledge database failed: {0}")]
    Database(#[from] rusqlite::Error),
    #[error("no collection named {0:?} (make it with `warden knowledge add {0} PATH…`)")]
    UnknownCollection(String),
    #[error(
        "collection name {0:?}: letters, digits, `_` and `-`, starting with a letter or digit, at most 64"
    )]
    BadName(String),
}

/// A collection as listed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CollectionRow {
    pub name: String,
    pub documents: u64,
    pub chunks: u64,
    pub created_at: u64,
}

/// A document of a collection as shown.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DocumentRow {
    pub path: String,
    pub content_hash: String,
    pub chunks: u64,
    pub updated_at: u64,
}

/// One retrieved chunk with its provenance and score (higher is better).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    pub path: String,
    pub headings: Vec<String>,
    pub line_start: u64,
    pub line_end: u64,
    pub text: String,
    pub score: f64,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS collections (
    name TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    collection TEXT NOT NULL REFERENCES collections(name) ON DELETE CASCADE,
    path TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (collection, path)
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    collection TEXT NOT NULL,
    path TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    headings TEXT NOT NULL,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL,
    text TEXT NOT NULL,
    FOREIGN KEY (collection, path) REFERENCES documents(collection, path) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS chunks_by_document ON chunks(collection, path);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, headings, content='chunks', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS chunks_indexed AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text, headings) VALUES (new.id, new.text, new.headings);
END;
CREATE TRIGGER IF NOT EXISTS chunks_unindexed AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text, headings)
        VALUES ('delete', old.id, old.text, old.headings);
END;
";

/// The knowledge database (`STATE/knowledge.db`).
pub struct KnowledgeStore {
    connection: Mutex<Connection>,
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

fn to_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Whether `name` may name a collection.
pub fn check_collection_name(name: &str) -> Result<(), KnowledgeError> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(())
    } else {
        Err(KnowledgeError::BadName(name.to_owned()))
    }
}

/// A query as FTS5 terms: each word quoted (no operator of the query's own reaches FTS5), any
/// of them may match; BM25 ranks the chunks that match more and rarer terms first.
fn match_expression(query: &str) -> Option<String> {
    let terms: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|term| !term.is_empty())
        .map(|term| format!("\"{}\"", term.to_lowercase()))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" OR "))
}

impl KnowledgeStore {
    /// Opens (creating) the database at `path`, private to the user.
    pub fn open(path: &Path) -> Result<Self, KnowledgeError> {
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let connection = Connection::open(path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        Self::with_connection(connection)
    }

    /// A database in memory (tests).
    pub fn in_memory() -> Result<Self, KnowledgeError> {
        Self::with_connection(Connection::open_in_memory()?)
    }

    fn with_connection(connection: Connection) -> Result<Self, KnowledgeError> {
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "foreign_keys", "ON")?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        connection.execute_batch(SCHEMA)?;
        Ok(Self {
            connection: Mutex::new(connection),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the collection unless it exists.
    pub fn ensure_collection(&self, name: &str) -> Result<(), KnowledgeError> {
        check_collection_name(name)?;
        self.lock().execute(
            "INSERT OR IGNORE INTO collections (name, created_at) VALUES (?1, ?2)",
            params![name, to_i64(now())],
        )?;
        Ok(())
    }

    fn require_collection(&self, name: &str) -> Result<(), KnowledgeError> {
        let found = self
            .lock()
            .query_row(
                "SELECT 1 FROM collections WHERE name = ?1",
                params![name],
                |_| Ok(()),
            )
            .optional()?;
        found.ok_or_else(|| KnowledgeError::UnknownCollection(name.to_owned()))
    }

    /// Every collection with its counts.
    pub fn collections(&self) -> Result<Vec<CollectionRow>, KnowledgeError> {
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT c.name, c.created_at,
                (SELECT COUNT(*) FROM documents d WHERE d.collection = c.name),
                (SELECT COUNT(*) FROM chunks k WHERE k.collection = c.name)
             FROM collections c ORDER BY c.name",
        )?;
        let rows = statement.query_map([], |row| {
            Ok(CollectionRow {
                name: row.get(0)?,
                created_at: to_u64(row.get(1)?),
                documents: to_u64(row.get(2)?),
                chunks: to_u64(row.get(3)?),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The documents of `collection`.
    pub fn documents(&self, collection: &str) -> Result<Vec<DocumentRow>, KnowledgeError> {
        self.require_collection(collection)?;
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT d.path, d.content_hash, d.updated_at,
                (SELECT COUNT(*) FROM chunks k WHERE k.collection = d.collection AND k.path = d.path)
             FROM documents d WHERE d.collection = ?1 ORDER BY d.path",
        )?;
        let rows = statement.query_map(params![collection], |row| {
            Ok(DocumentRow {
                path: row.get(0)?,
                content_hash: row.get(1)?,
                updated_at: to_u64(row.get(2)?),
                chunks: to_u64(row.get(3)?),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The stored content hash of a document, if it is stored.
    pub fn content_hash(
        &self,
        collection: &str,
        path: &str,
    ) -> Result<Option<String>, KnowledgeError> {
        Ok(self
            .lock()
            .query_row(
                "SELECT content_hash FROM documents WHERE collection = ?1 AND path = ?2",
                params![collection, path],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Replaces a document's chunks in one transaction.
    pub fn replace_document(
        &self,
        collection: &str,
        path: &str,
        content_hash: &str,
        chunks: &[Chunk],
    ) -> Result<(), KnowledgeError> {
        let mut connection = self.lock();
        let transaction = connection.transaction()?;
        transaction.execute(
            "DELETE FROM chunks WHERE collection = ?1 AND path = ?2",
            params![collection, path],
        )?;
        transaction.execute(
            "INSERT INTO documents (collection, path, content_hash, updated_at)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (collection, path) DO UPDATE SET content_hash = excluded.content_hash,
                 updated_at = excluded.updated_at",
            params![collection, path, content_hash, to_i64(now())],
        )?;
        {
            let mut insert = transaction.prepare(
                "INSERT INTO chunks (collection, path, ordinal, headings, line_start, line_end, text)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for (ordinal, chunk) in chunks.iter().enumerate() {
                insert.execute(params![
                    collection,
                    path,
                    i64::try_from(ordinal).unwrap_or(i64::MAX),
                    chunk.headings.join(" › "),
                    i64::try_from(chunk.line_start).unwrap_or(0),
                    i64::try_from(chunk.line_end).unwrap_or(0),
                    chunk.text,
                ])?;
            }
        }
        transaction.commit()?;
        Ok(())
    }

    /// Removes a document and its chunks; whether it was there.
    pub fn remove_document(&self, collection: &str, path: &str) -> Result<bool, KnowledgeError> {
        let mut connection = self.lock();
        let transaction = connection.transaction()?;
        transaction.execute(
            "DELETE FROM chunks WHERE collection = ?1 AND path = ?2",
            params![collection, path],
        )?;
        let removed = transaction.execute(
            "DELETE FROM documents WHERE collection = ?1 AND path = ?2",
            params![collection, path],
        )?;
        transaction.commit()?;
        Ok(removed > 0)
    }

    /// Removes a collection with everything in it; whether it was there.
    pub fn remove_collection(&self, collection: &str) -> Result<bool, KnowledgeError> {
        let mut connection = self.lock();
        let transaction = connection.transaction()?;
        transaction.execute(
            "DELETE FROM chunks WHERE collection = ?1",
            params![collection],
        )?;
        transaction.execute(
            "DELETE FROM documents WHERE collection = ?1",
            params![collection],
        )?;
        let removed = transaction.execute(
            "DELETE FROM collections WHERE name = ?1",
            params![collection],
        )?;
        transaction.commit()?;
        Ok(removed > 0)
    }

    /// The `limit` chunks of `collection` that best match `query` lexically (BM25), best first.
    pub fn search_lexical(
        &self,
        collection: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<Hit>, KnowledgeError> {
        self.require_collection(collection)?;
        let Some(expression) = match_expression(query) else {
            return Ok(Vec::new());
        };
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT c.path, c.headings, c.line_start, c.line_end, c.text, bm25(chunks_fts, 1.0, 0.5)
             FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid
             WHERE chunks_fts MATCH ?1 AND c.collection = ?2
             ORDER BY bm25(chunks_fts, 1.0, 0.5) LIMIT ?3",
        )?;
        let rows = statement.query_map(
            params![
                expression,
                collection,
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
            |row| {
                let headings: String = row.get(1)?;
                let rank: f64 = row.get(5)?;
                Ok(Hit {
                    path: row.get(0)?,
                    headings: headings
                        .split(" › ")
                        .filter(|heading| !heading.is_empty())
                        .map(str::to_owned)
                        .collect(),
                    line_start: to_u64(row.get(2)?),
                    line_end: to_u64(row.get(3)?),
                    text: row.get(4)?,
                    // FTS5's bm25() is lower for better matches; a score reads higher-is-better.
                    score: -rank,
                })
            },
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn chunk(text: &str, heading: &str) -> Chunk {
        Chunk {
            text: text.to_owned(),
            headings: vec![heading.to_owned()],
            line_start: 1,
            line_end: 2,
        }
    }

    #[test]
    fn a_search_ranks_the_matching_chunk_first_and_sees_a_replacement_whole() {
        let store = KnowledgeStore::in_memory().unwrap();
        store.ensure_collection("manuals").unwrap();
        store
            .replace_document(
                "manuals",
                "returns.md",
                "sha256:1",
                &[
                    chunk("Orders can be returned within 30 days.", "Returns"),
                    chunk("Parcels leave the warehouse the same day.", "Shipping"),
                ],
            )
            .unwrap();
        let hits = store
            .search_lexical("manuals", "how do I return an order?", 5)
            .unwrap();
        assert_eq!(hits[0].headings, vec!["Returns"]);
        assert!(hits[0].score > 0.0);
        // A query of FTS5 syntax is only words.
        assert!(
            store
                .search_lexical("manuals", "NEAR(\"x\" OR) *", 5)
                .is_ok()
        );
        // Replaced: the old chunks are gone from the index, the new ones are there.
        store
            .replace_document(
                "manuals",
                "returns.md",
                "sha256:2",
                &[chunk("Refunds go to the original card.", "Refunds")],
            )
            .unwrap();
        assert!(
            store
                .search_lexical("manuals", "returned", 5)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            store.search_lexical("manuals", "refund card", 5).unwrap()[0].headings,
            vec!["Refunds"]
        );
        assert_eq!(
            store
                .content_hash("manuals", "returns.md")
                .unwrap()
                .as_deref(),
            Some("sha256:2")
        );
        assert!(store.remove_document("manuals", "returns.md").unwrap());
        assert!(
            store
                .search_lexical("manuals", "refund", 5)
                .unwrap()
                .is_empty()
        );
        assert!(matches!(
            store.search_lexical("nowhere", "x", 5),
            Err(KnowledgeError::UnknownCollection(_))
        ));
        assert!(store.ensure_collection("../etc").is_err());
    }
}
