//! The knowledge store on SQLite: collections, their documents (by path, with a content hash) and chunks with provenance, an FTS5 index for lexical (BM25) retrieval. A document's chunks are replaced in one transaction, so a search sees the old chunks or the new, never half of each.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use rusqlite::{Connection, OptionalExtension, params};

use crate::backend::{
    CollectionRow, DocumentRow, Filter, HEADING_SEPARATOR, Hit, KnowledgeBackend, KnowledgeError,
    check_collection_name, check_tag, headings_of, query_terms, vector_bytes, vector_of,
};
use crate::chunk::Chunk;
use crate::quantised::{quantised, similarities};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS collections (
    name TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    embedding_model TEXT,
    dimension INTEGER
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
CREATE TABLE IF NOT EXISTS document_tags (
    collection TEXT NOT NULL,
    path TEXT NOT NULL,
    tag TEXT NOT NULL,
    PRIMARY KEY (collection, path, tag),
    FOREIGN KEY (collection, path) REFERENCES documents(collection, path) ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS chunks_collection_by_id ON chunks(id, collection);
CREATE TABLE IF NOT EXISTS chunk_vectors (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    collection TEXT NOT NULL,
    vector BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunk_vectors_by_collection ON chunk_vectors(collection);
CREATE TABLE IF NOT EXISTS embedding_cache (
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, text_hash)
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    text, headings, content='chunks', content_rowid='id', tokenize='porter unicode61'
);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts, 'row');
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
    /// Every write and the lexical searches.
    connection: Mutex<Connection>,
    /// A second, read-only connection to the same file for the vector half of a search, so it
    /// runs beside the lexical half instead of after it (WAL lets readers share the file).
    /// `None` for a database in memory, which one connection holds.
    reader: Option<Mutex<Connection>>,
    /// Each searched collection's vectors in one contiguous block, so a query scans memory
    /// instead of reading every row; dropped on this store's writes to the collection, and all
    /// of them when another connection committed (`PRAGMA data_version` of the connection that
    /// loaded them moved).
    vectors: Mutex<VectorBlocks>,
    /// The lexical half's counts, kept the same way (by the main connection's version).
    statistics: Mutex<LexicalStatistics>,
}

/// The loaded vector blocks, and the database version they were read at.
#[derive(Default)]
struct VectorBlocks {
    data_version: i64,
    collections: std::collections::HashMap<String, std::sync::Arc<VectorBlock>>,
}

/// What a lexical search counts once, and the database version it was counted at.
#[derive(Default)]
struct LexicalStatistics {
    data_version: i64,
    /// Every chunk of the database (BM25's N).
    chunk_count: Option<i64>,
    /// The collection that holds every chunk, when one does.
    sole_collection: Option<Option<String>>,
}

/// A collection's vectors, quantised to 8 bits for the first pass of a search: `ids[i]`'s
/// vector is about `scales[i] * codes[i * dimension..][..dimension]`. A quarter of the f32
/// vectors' memory, and a quarter of the bytes a query scans; the exact vectors stay in the
/// database for the rescoring of the shortlist.
struct VectorBlock {
    ids: Vec<i64>,
    codes: Vec<i8>,
    scales: Vec<f32>,
    dimension: usize,
}

/// How many candidates of the 8-bit pass per result the exact vectors rescore, and at least
/// how many: a collection no larger than the shortlist is ranked exactly.
const RESCORED_PER_RESULT: usize = 4;
const RESCORED_AT_LEAST: usize = 64;

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

/// From how many chunks a lexical search leaves out the words most chunks hold (below it,
/// walking their lists costs little).
const PRUNING_FROM: i64 = 10_000;

/// Terms as an FTS5 expression: each word quoted (no operator of the query's own reaches FTS5),
/// any of them may match; BM25 ranks the chunks that match more and rarer terms first.
fn match_expression(terms: &[String]) -> String {
    terms
        .iter()
        .map(|term| format!("\"{term}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// The SQL condition on chunks aliased `k` that `filter` sets, and its values, appended after
/// `values`.
fn filter_clause(filter: &Filter, values: &mut Vec<rusqlite::types::Value>) -> String {
    let mut clause = String::new();
    if let Some(glob) = &filter.path {
        values.push(glob.clone().into());
        let n = values.len();
        clause.push_str(&format!(
            " AND (k.path GLOB ?{n} OR k.path GLOB '*/' || ?{n})"
        ));
    }
    for tag in &filter.tags {
        values.push(tag.clone().into());
        clause.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM document_tags t WHERE t.collection = k.collection AND t.path = k.path AND t.tag = ?{})",
            values.len()
        ));
    }
    clause
}

/// The dot product, in eight lanes the compiler turns into vector instructions.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..8 {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

fn data_version(connection: &Connection) -> Result<i64, KnowledgeError> {
    Ok(connection.query_row("PRAGMA data_version", [], |row| row.get(0))?)
}

/// Whether a collection of this name exists (one indexed lookup; no counting).
fn has_collection_on(connection: &Connection, name: &str) -> Result<bool, KnowledgeError> {
    let found = connection
        .query_row(
            "SELECT 1 FROM collections WHERE name = ?1",
            params![name],
            |_| Ok(()),
        )
        .optional()?;
    Ok(found.is_some())
}

fn require_collection_on(connection: &Connection, name: &str) -> Result<(), KnowledgeError> {
    if has_collection_on(connection, name)? {
        Ok(())
    } else {
        Err(KnowledgeError::UnknownCollection(name.to_owned()))
    }
}

fn hit_of(row: &rusqlite::Row<'_>, score: f64) -> rusqlite::Result<Hit> {
    let headings: String = row.get(1)?;
    Ok(Hit {
        path: row.get(0)?,
        headings: headings_of(&headings),
        line_start: to_u64(row.get(2)?),
        line_end: to_u64(row.get(3)?),
        text: row.get(4)?,
        page_start: row.get::<_, Option<i64>>(5)?.map(to_u64),
        page_end: row.get::<_, Option<i64>>(6)?.map(to_u64),
        score,
    })
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
        let mut store = Self::with_connection(connection)?;
        // Opened after the schema is in place; read-only, so it can never write.
        let reader = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        reader.busy_timeout(std::time::Duration::from_secs(5))?;
        store.reader = Some(Mutex::new(reader));
        Ok(store)
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
        // Databases made before chunks had pages get the columns.
        let paged: i64 = connection.query_row(
            "SELECT COUNT(*) FROM pragma_table_info('chunks') WHERE name = 'page_start'",
            [],
            |row| row.get(0),
        )?;
        if paged == 0 {
            connection.execute_batch(
                "ALTER TABLE chunks ADD COLUMN page_start INTEGER;
                 ALTER TABLE chunks ADD COLUMN page_end INTEGER;",
            )?;
        }
        Ok(Self {
            connection: Mutex::new(connection),
            reader: None,
            vectors: Mutex::default(),
            statistics: Mutex::default(),
        })
    }

    /// Forgets the loaded vectors of `collection` and the counts (after a write to it).
    fn forget_vectors(&self, collection: &str) {
        let mut vectors = self.vectors.lock().unwrap_or_else(PoisonError::into_inner);
        vectors.collections.remove(collection);
        drop(vectors);
        let mut statistics = self
            .statistics
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        statistics.chunk_count = None;
        statistics.sole_collection = None;
    }

    /// The loaded vectors, emptied first when another connection committed since `connection`
    /// (the one that loads them) last looked.
    fn fresh_vectors(
        &self,
        connection: &Connection,
    ) -> Result<std::sync::MutexGuard<'_, VectorBlocks>, KnowledgeError> {
        let version = data_version(connection)?;
        let mut vectors = self.vectors.lock().unwrap_or_else(PoisonError::into_inner);
        if vectors.data_version != version {
            vectors.collections.clear();
            vectors.data_version = version;
        }
        Ok(vectors)
    }

    /// The lexical counts, emptied first when another connection committed since they were
    /// counted.
    fn fresh_statistics(
        &self,
        connection: &Connection,
    ) -> Result<std::sync::MutexGuard<'_, LexicalStatistics>, KnowledgeError> {
        let version = data_version(connection)?;
        let mut statistics = self
            .statistics
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if statistics.data_version != version {
            statistics.chunk_count = None;
            statistics.sole_collection = None;
            statistics.data_version = version;
        }
        Ok(statistics)
    }

    /// How many chunks the database holds, and whether `collection` holds all of them.
    fn lexical_statistics(
        &self,
        connection: &Connection,
        collection: &str,
    ) -> Result<(i64, bool), KnowledgeError> {
        let mut cache = self.fresh_statistics(connection)?;
        let count = match cache.chunk_count {
            Some(count) => count,
            None => {
                let count = connection.query_row("SELECT COUNT(*) FROM chunks", [], |row| {
                    row.get::<_, i64>(0)
                })?;
                cache.chunk_count = Some(count);
                count
            }
        };
        let sole = match &cache.sole_collection {
            Some(sole) => sole.clone(),
            None => {
                // Two seeks of the (collection, path) index: a chunk of a collection before it
                // or after it.
                let other = connection
                    .query_row(
                        "SELECT 1 FROM (SELECT 1 FROM chunks WHERE collection < ?1 LIMIT 1)
                         UNION ALL SELECT 1 FROM (SELECT 1 FROM chunks WHERE collection > ?1 LIMIT 1)",
                        params![collection],
                        |_| Ok(()),
                    )
                    .optional()?
                    .is_some();
                let sole = (!other).then(|| collection.to_owned());
                cache.sole_collection = Some(sole.clone());
                sole
            }
        };
        Ok((count, sole.as_deref() == Some(collection)))
    }

    /// The query's words that weigh in BM25, in a database of at least [`PRUNING_FROM`]
    /// chunks: a word in more than half the chunks has an inverse document frequency of zero
    /// (FTS5 counts it 1e-6), so it is left out — the ranking of the chunks that match the
    /// other words stays, and the index no longer walks a list as long as the collection; only
    /// chunks that match nothing but such words (scored ~0, last) are no longer returned. When
    /// every word is that common, the rarest one is kept. A word is looked up as written
    /// (lower case); one the stemmer changes is not found and is kept.
    fn weighing_terms(
        &self,
        connection: &Connection,
        terms: Vec<String>,
        chunks: i64,
    ) -> Result<Vec<String>, KnowledgeError> {
        if terms.len() < 2 || chunks < PRUNING_FROM {
            return Ok(terms);
        }
        let mut lookup = connection.prepare("SELECT doc FROM chunks_vocab WHERE term = ?1")?;
        let mut counted = Vec::with_capacity(terms.len());
        for term in terms {
            let documents: i64 = lookup
                .query_row(params![term], |row| row.get(0))
                .optional()?
                .unwrap_or(0);
            counted.push((documents, term));
        }
        counted.sort_by_key(|(documents, _)| *documents);
        let rarest = counted.first().map(|(_, term)| term.clone());
        let weighing: Vec<String> = counted
            .into_iter()
            .filter(|(documents, _)| documents.saturating_mul(2) <= chunks)
            .map(|(_, term)| term)
            .collect();
        Ok(if weighing.is_empty() {
            rarest.into_iter().collect()
        } else {
            weighing
        })
    }

    /// The vectors of `collection`, loaded once and kept while nothing changes them.
    fn vector_block(
        &self,
        connection: &Connection,
        collection: &str,
    ) -> Result<std::sync::Arc<VectorBlock>, KnowledgeError> {
        let mut cache = self.fresh_vectors(connection)?;
        if let Some(block) = cache.collections.get(collection) {
            return Ok(block.clone());
        }
        let mut statement = connection
            .prepare("SELECT chunk_id, vector FROM chunk_vectors WHERE collection = ?1")?;
        let mut rows = statement.query(params![collection])?;
        let mut block = VectorBlock {
            ids: Vec::new(),
            codes: Vec::new(),
            scales: Vec::new(),
            dimension: 0,
        };
        while let Some(row) = rows.next()? {
            let bytes: Vec<u8> = row.get(1)?;
            let vector = vector_of(&bytes);
            if block.ids.is_empty() {
                block.dimension = vector.len();
            }
            if vector.len() != block.dimension {
                continue;
            }
            let (codes, scale) = quantised(&vector);
            block.ids.push(row.get(0)?);
            block.codes.extend_from_slice(&codes);
            block.scales.push(scale);
        }
        let block = std::sync::Arc::new(block);
        cache
            .collections
            .insert(collection.to_owned(), block.clone());
        Ok(block)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The read-only connection, or the only one of a database in memory.
    fn read_lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        match &self.reader {
            Some(reader) => reader.lock().unwrap_or_else(PoisonError::into_inner),
            None => self.lock(),
        }
    }

    fn require_collection(&self, name: &str) -> Result<(), KnowledgeError> {
        require_collection_on(&self.lock(), name)
    }
}

impl KnowledgeBackend for KnowledgeStore {
    /// Makes the collection unless it exists.
    fn ensure_collection(&self, name: &str) -> Result<(), KnowledgeError> {
        check_collection_name(name)?;
        self.lock().execute(
            "INSERT OR IGNORE INTO collections (name, created_at) VALUES (?1, ?2)",
            params![name, to_i64(now())],
        )?;
        Ok(())
    }

    /// Whether a collection of this name exists (one indexed lookup; no counting).
    fn has_collection(&self, name: &str) -> Result<bool, KnowledgeError> {
        has_collection_on(&self.lock(), name)
    }

    /// Every collection with its counts.
    fn collections(&self) -> Result<Vec<CollectionRow>, KnowledgeError> {
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
    fn documents(&self, collection: &str) -> Result<Vec<DocumentRow>, KnowledgeError> {
        self.require_collection(collection)?;
        let connection = self.lock();
        let mut statement = connection.prepare(
            "SELECT d.path, d.content_hash, d.updated_at,
                (SELECT COUNT(*) FROM chunks k WHERE k.collection = d.collection AND k.path = d.path),
                (SELECT group_concat(tag, ' ') FROM (SELECT tag FROM document_tags t
                    WHERE t.collection = d.collection AND t.path = d.path ORDER BY tag))
             FROM documents d WHERE d.collection = ?1 ORDER BY d.path",
        )?;
        let rows = statement.query_map(params![collection], |row| {
            let tags: Option<String> = row.get(4)?;
            Ok(DocumentRow {
                path: row.get(0)?,
                content_hash: row.get(1)?,
                updated_at: to_u64(row.get(2)?),
                chunks: to_u64(row.get(3)?),
                tags: tags
                    .unwrap_or_default()
                    .split(' ')
                    .filter(|tag| !tag.is_empty())
                    .map(str::to_owned)
                    .collect(),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Gives a stored document exactly these tags (each checked); whether it is stored.
    fn set_tags(
        &self,
        collection: &str,
        path: &str,
        tags: &[String],
    ) -> Result<bool, KnowledgeError> {
        tags.iter().try_for_each(|tag| check_tag(tag))?;
        let mut connection = self.lock();
        let transaction = connection.transaction()?;
        let stored = transaction
            .query_row(
                "SELECT 1 FROM documents WHERE collection = ?1 AND path = ?2",
                params![collection, path],
                |_| Ok(()),
            )
            .optional()?
            .is_some();
        if stored {
            transaction.execute(
                "DELETE FROM document_tags WHERE collection = ?1 AND path = ?2",
                params![collection, path],
            )?;
            for tag in tags {
                transaction.execute(
                    "INSERT OR IGNORE INTO document_tags (collection, path, tag) VALUES (?1, ?2, ?3)",
                    params![collection, path, tag],
                )?;
            }
        }
        transaction.commit()?;
        Ok(stored)
    }

    /// The stored content hash of a document, if it is stored.
    fn content_hash(&self, collection: &str, path: &str) -> Result<Option<String>, KnowledgeError> {
        Ok(self
            .lock()
            .query_row(
                "SELECT content_hash FROM documents WHERE collection = ?1 AND path = ?2",
                params![collection, path],
                |row| row.get(0),
            )
            .optional()?)
    }

    /// Replaces a document's chunks (with their vectors, one per chunk, when the collection is
    /// embedded) in one transaction.
    fn replace_document(
        &self,
        collection: &str,
        path: &str,
        content_hash: &str,
        chunks: &[Chunk],
        vectors: Option<&[Vec<f32>]>,
    ) -> Result<(), KnowledgeError> {
        let mut connection = self.lock();
        self.forget_vectors(collection);
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
                "INSERT INTO chunks (collection, path, ordinal, headings, line_start, line_end, text,
                     page_start, page_end)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?;
            let mut insert_vector = transaction.prepare(
                "INSERT INTO chunk_vectors (chunk_id, collection, vector) VALUES (?1, ?2, ?3)",
            )?;
            for (ordinal, chunk) in chunks.iter().enumerate() {
                insert.execute(params![
                    collection,
                    path,
                    i64::try_from(ordinal).unwrap_or(i64::MAX),
                    chunk.headings.join(HEADING_SEPARATOR),
                    i64::try_from(chunk.line_start).unwrap_or(0),
                    i64::try_from(chunk.line_end).unwrap_or(0),
                    chunk.text,
                    chunk
                        .pages
                        .map(|(first, _)| i64::try_from(first).unwrap_or(0)),
                    chunk
                        .pages
                        .map(|(_, last)| i64::try_from(last).unwrap_or(0)),
                ])?;
                if let Some(vector) = vectors.and_then(|vectors| vectors.get(ordinal)) {
                    insert_vector.execute(params![
                        transaction.last_insert_rowid(),
                        collection,
                        vector_bytes(vector)
                    ])?;
                }
            }
        }
        transaction.commit()?;
        Ok(())
    }

    /// The embeddings a collection's vectors come from, and their dimension.
    fn collection_embedding(
        &self,
        collection: &str,
    ) -> Result<Option<(String, usize)>, KnowledgeError> {
        self.require_collection(collection)?;
        let found: Option<(Option<String>, Option<i64>)> = self
            .lock()
            .query_row(
                "SELECT embedding_model, dimension FROM collections WHERE name = ?1",
                params![collection],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        Ok(match found {
            Some((Some(model), Some(dimension))) => {
                Some((model, usize::try_from(dimension).unwrap_or(0)))
            }
            _ => None,
        })
    }

    fn record_embedding(
        &self,
        collection: &str,
        model: &str,
        dimension: usize,
    ) -> Result<(), KnowledgeError> {
        self.lock().execute(
            "UPDATE collections SET embedding_model = ?2, dimension = ?3 WHERE name = ?1",
            params![collection, model, i64::try_from(dimension).unwrap_or(0)],
        )?;
        Ok(())
    }

    /// Forgets the collection's embeddings and vectors (before embedding it with others).
    fn unbind_embedding(&self, collection: &str) -> Result<(), KnowledgeError> {
        let mut connection = self.lock();
        self.forget_vectors(collection);
        let transaction = connection.transaction()?;
        transaction.execute(
            "DELETE FROM chunk_vectors WHERE collection = ?1",
            params![collection],
        )?;
        transaction.execute(
            "UPDATE collections SET embedding_model = NULL, dimension = NULL WHERE name = ?1",
            params![collection],
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// The cached vectors of `model` for texts of these hashes.
    fn cached_vectors(
        &self,
        model: &str,
        text_hashes: &[String],
    ) -> Result<std::collections::HashMap<String, Vec<f32>>, KnowledgeError> {
        let connection = self.lock();
        let mut statement = connection
            .prepare("SELECT vector FROM embedding_cache WHERE model = ?1 AND text_hash = ?2")?;
        let mut found = std::collections::HashMap::new();
        for hash in text_hashes {
            let vector: Option<Vec<u8>> = statement
                .query_row(params![model, hash], |row| row.get(0))
                .optional()?;
            if let Some(vector) = vector {
                found.insert(hash.clone(), vector_of(&vector));
            }
        }
        Ok(found)
    }

    /// Keeps vectors of `model` by the hash of their text.
    fn cache_vectors(
        &self,
        model: &str,
        vectors: &[(String, Vec<f32>)],
    ) -> Result<(), KnowledgeError> {
        let mut connection = self.lock();
        let transaction = connection.transaction()?;
        {
            let mut insert = transaction.prepare(
                "INSERT OR REPLACE INTO embedding_cache (model, text_hash, vector) VALUES (?1, ?2, ?3)",
            )?;
            for (hash, vector) in vectors {
                insert.execute(params![model, hash, vector_bytes(vector)])?;
            }
        }
        transaction.commit()?;
        Ok(())
    }

    /// [`Self::search_vectors`] over the chunks of the documents `filter` lets through.
    fn search_vectors_in(
        &self,
        collection: &str,
        query: &[f32],
        limit: usize,
        filter: &Filter,
    ) -> Result<Vec<Hit>, KnowledgeError> {
        filter.check()?;
        let connection = self.read_lock();
        require_collection_on(&connection, collection)?;
        let block = self.vector_block(&connection, collection)?;
        // The chunks a filter lets through, as ids (from the documents' rows, never the vectors).
        let allowed: Option<std::collections::HashSet<i64>> = if filter.is_empty() {
            None
        } else {
            let mut values: Vec<rusqlite::types::Value> = vec![collection.to_owned().into()];
            let clause = filter_clause(filter, &mut values);
            let mut statement = connection.prepare(&format!(
                "SELECT k.id FROM chunks k WHERE k.collection = ?1{clause}"
            ))?;
            let ids = statement
                .query_map(rusqlite::params_from_iter(values), |row| row.get(0))?
                .collect::<Result<_, _>>()?;
            Some(ids)
        };
        // The first pass reads memory only: the connection is free meanwhile.
        drop(connection);
        if block.dimension != query.len() || block.dimension == 0 || limit == 0 {
            return Ok(Vec::new());
        }
        let (query_codes, _) = quantised(query);
        let mut shortlist: Vec<(f32, i64)> =
            similarities(&block.codes, &block.scales, block.dimension, &query_codes)
                .into_iter()
                .zip(&block.ids)
                .filter(|(_, id)| allowed.as_ref().is_none_or(|allowed| allowed.contains(id)))
                .map(|(similarity, id)| (similarity, *id))
                .collect();
        let rescored = limit
            .saturating_mul(RESCORED_PER_RESULT)
            .max(RESCORED_AT_LEAST);
        if shortlist.len() > rescored {
            shortlist.select_nth_unstable_by(rescored - 1, |a, b| b.0.total_cmp(&a.0));
            shortlist.truncate(rescored);
        }
        // The shortlist ranked by the exact vectors (a chunk removed meanwhile drops out).
        let connection = self.read_lock();
        let mut exact_vector =
            connection.prepare("SELECT vector FROM chunk_vectors WHERE chunk_id = ?1")?;
        let mut scored = Vec::with_capacity(shortlist.len());
        for (_, id) in shortlist {
            let bytes: Option<Vec<u8>> = exact_vector
                .query_row(params![id], |row| row.get(0))
                .optional()?;
            if let Some(bytes) = bytes {
                let vector = vector_of(&bytes);
                if vector.len() == query.len() {
                    scored.push((dot(query, &vector), id));
                }
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.truncate(limit);
        let mut statement = connection.prepare(
            "SELECT path, headings, line_start, line_end, text, page_start, page_end
             FROM chunks WHERE id = ?1",
        )?;
        let mut hits = Vec::with_capacity(scored.len());
        for (score, id) in scored {
            hits.push(statement.query_row(params![id], |row| hit_of(row, f64::from(score)))?);
        }
        Ok(hits)
    }

    /// Removes a document and its chunks; whether it was there.
    fn remove_document(&self, collection: &str, path: &str) -> Result<bool, KnowledgeError> {
        let mut connection = self.lock();
        self.forget_vectors(collection);
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
    fn remove_collection(&self, collection: &str) -> Result<bool, KnowledgeError> {
        let mut connection = self.lock();
        self.forget_vectors(collection);
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

    /// [`Self::search_lexical`] over the chunks of the documents `filter` lets through.
    fn search_lexical_in(
        &self,
        collection: &str,
        query: &str,
        limit: usize,
        filter: &Filter,
    ) -> Result<Vec<Hit>, KnowledgeError> {
        self.require_collection(collection)?;
        filter.check()?;
        let terms = query_terms(query);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let connection = self.lock();
        let (chunks, sole) = self.lexical_statistics(&connection, collection)?;
        let terms = self.weighing_terms(&connection, terms, chunks)?;
        let mut values: Vec<rusqlite::types::Value> = vec![
            match_expression(&terms).into(),
            collection.to_owned().into(),
            i64::try_from(limit).unwrap_or(i64::MAX).into(),
        ];
        let clause = filter_clause(filter, &mut values);
        // The best ids first, from the index alone when the collection holds every chunk, else
        // with the small (id, collection) index (a filter reads the candidates' paths too);
        // only those few rows are read whole.
        let best = if sole && filter.is_empty() {
            "SELECT f.rowid AS id, bm25(chunks_fts, 1.0, 0.5) AS rank
             FROM chunks_fts f WHERE chunks_fts MATCH ?1 AND ?2 IS NOT NULL
             ORDER BY rank LIMIT ?3"
                .to_owned()
        } else {
            format!(
                "SELECT f.rowid AS id, bm25(chunks_fts, 1.0, 0.5) AS rank
                 FROM chunks_fts f JOIN chunks k {} ON k.id = f.rowid
                 WHERE chunks_fts MATCH ?1 AND k.collection = ?2{clause}
                 ORDER BY rank LIMIT ?3",
                if filter.is_empty() {
                    "INDEXED BY chunks_collection_by_id"
                } else {
                    ""
                }
            )
        };
        let mut statement = connection.prepare(&format!(
            "SELECT c.path, c.headings, c.line_start, c.line_end, c.text, c.page_start, c.page_end,
                    best.rank
             FROM ({best}) best
             JOIN chunks c ON c.id = best.id
             ORDER BY best.rank"
        ))?;
        let rows = statement.query_map(rusqlite::params_from_iter(values), |row| {
            // FTS5's bm25() is lower for better matches; a score reads higher-is-better.
            let rank: f64 = row.get(7)?;
            hit_of(row, -rank)
        })?;
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
            pages: None,
        }
    }

    #[test]
    fn the_loaded_vectors_follow_this_store_s_writes_and_another_connection_s() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("knowledge.db");
        let store = KnowledgeStore::open(&path).unwrap();
        let other = KnowledgeStore::open(&path).unwrap();
        store.ensure_collection("c").unwrap();
        store.bind_embedding("c", "m", 2).unwrap();
        let put = |store: &KnowledgeStore, path: &str, text: &str, vector: [f32; 2]| {
            store
                .replace_document(
                    "c",
                    path,
                    text,
                    &[chunk(text, "H")],
                    Some(&[vector.to_vec()]),
                )
                .unwrap();
        };
        let nearest = |store: &KnowledgeStore, query: [f32; 2]| {
            store.search_vectors("c", &query, 1).unwrap()[0]
                .text
                .clone()
        };
        put(&store, "a.md", "east", [1.0, 0.0]);
        assert_eq!(nearest(&store, [1.0, 0.0]), "east");
        // This store's own write replaces what it had loaded.
        put(&store, "b.md", "north", [0.0, 1.0]);
        assert_eq!(nearest(&store, [0.0, 1.0]), "north");
        // Another connection's commit is seen too.
        put(&other, "c.md", "north-east", [0.6, 0.8]);
        assert_eq!(nearest(&store, [0.6, 0.8]), "north-east");
        assert!(store.remove_document("c", "c.md").unwrap());
        assert_eq!(nearest(&store, [0.8, 0.6]), "east");
        assert_eq!(dot(&[1.0; 19], &[2.0; 19]), 38.0, "lanes and the tail");
    }

    #[test]
    fn the_8_bit_first_pass_finds_the_same_nearest_chunks_as_an_exact_scan() {
        // 3,000 pseudo-random unit vectors of 384 dimensions, far more than the shortlist the
        // exact vectors rescore.
        let dimension = 384;
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut unit = || {
            let mut vector: Vec<f32> = (0..dimension)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state % 2001) as f32 / 1000.0 - 1.0
                })
                .collect();
            let norm = dot(&vector, &vector).sqrt();
            vector.iter_mut().for_each(|x| *x /= norm);
            vector
        };
        let store = KnowledgeStore::in_memory().unwrap();
        store.ensure_collection("c").unwrap();
        store.bind_embedding("c", "m", dimension).unwrap();
        let mut vectors = Vec::new();
        for document in 0..30 {
            let texts: Vec<String> = (0..100).map(|i| format!("chunk {document}-{i}")).collect();
            let chunks: Vec<Chunk> = texts.iter().map(|text| chunk(text, "H")).collect();
            let embedded: Vec<Vec<f32>> = texts.iter().map(|_| unit()).collect();
            for (text, vector) in texts.iter().zip(&embedded) {
                vectors.push((text.clone(), vector.clone()));
            }
            store
                .replace_document("c", &format!("{document}.md"), "", &chunks, Some(&embedded))
                .unwrap();
        }
        for _ in 0..20 {
            let query = unit();
            let mut exact: Vec<(f32, &str)> = vectors
                .iter()
                .map(|(text, vector)| (dot(&query, vector), text.as_str()))
                .collect();
            exact.sort_by(|a, b| b.0.total_cmp(&a.0));
            let found = store.search_vectors("c", &query, 10).unwrap();
            let found: Vec<(f64, &str)> = found
                .iter()
                .map(|hit| (hit.score, hit.text.as_str()))
                .collect();
            let expected: Vec<(f64, &str)> = exact[..10]
                .iter()
                .map(|(score, text)| (f64::from(*score), *text))
                .collect();
            assert_eq!(found, expected, "the exact order and the exact scores");
        }
    }

    #[test]
    fn words_most_chunks_hold_are_left_out_of_a_large_search_and_the_ranking_stays() {
        let store = KnowledgeStore::in_memory().unwrap();
        store.ensure_collection("big").unwrap();
        let chunks: Vec<Chunk> = (0..PRUNING_FROM as usize + 10)
            .map(|index| {
                let rare = match index % 1000 {
                    0 => " zephyr zephyr",
                    1 => " zephyr",
                    2 => " quasar",
                    _ => "",
                };
                chunk(&format!("common words here {index}{rare}"), "H")
            })
            .collect();
        store
            .replace_document("big", "all.md", "h", &chunks, None)
            .unwrap();
        let connection = store.lock();
        let terms = store
            .weighing_terms(
                &connection,
                query_terms("common zephyr Quasar here words"),
                PRUNING_FROM + 10,
            )
            .unwrap();
        // `words` is stored as its stem (`word`): not found as written, it is kept.
        assert_eq!(
            terms,
            vec!["words", "quasar", "zephyr"],
            "rarest first, common ones out"
        );
        let only_common = store
            .weighing_terms(&connection, query_terms("here common"), PRUNING_FROM + 10)
            .unwrap();
        assert_eq!(only_common.len(), 1, "the rarest of all-common words stays");
        // The ranking of the whole query, unpruned, straight from FTS5.
        let full: Vec<i64> = connection
            .prepare(
                "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?1
                 ORDER BY bm25(chunks_fts, 1.0, 0.5), rowid LIMIT 20",
            )
            .unwrap()
            .query_map(
                params![match_expression(&query_terms("common zephyr quasar here"))],
                |row| row.get(0),
            )
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        drop(connection);
        let hits = store
            .search_lexical("big", "common zephyr quasar here", 20)
            .unwrap();
        let zephyr_or_quasar = full
            .iter()
            .filter(|id| matches!((**id - 1) % 1000, 0..=2))
            .count();
        assert_eq!(hits.len(), zephyr_or_quasar, "{hits:?}");
        let texts: Vec<String> = {
            let connection = store.lock();
            full.iter()
                .take(zephyr_or_quasar)
                .map(|id| {
                    connection
                        .query_row("SELECT text FROM chunks WHERE id = ?1", [id], |row| {
                            row.get(0)
                        })
                        .unwrap()
                })
                .collect()
        };
        assert_eq!(
            hits.iter().map(|hit| hit.text.clone()).collect::<Vec<_>>(),
            texts,
            "the same order as the whole query's"
        );
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
                None,
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
                None,
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
