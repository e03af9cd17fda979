//! The tenants' knowledge collections on PostgreSQL: the [`KnowledgeBackend`] contract over the service's database, every row scoped by tenant, lexical retrieval by PostgreSQL's full-text search (English stemming, `ts_rank`) and vector retrieval by pgvector (cosine, an HNSW index per dimension, iterative scans so a filter does not empty the result). Without the pgvector extension collections stay lexical and embedding one is refused with the fix.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_postgres::types::ToSql;
use warden_knowledge::{
    Chunk, CollectionRow, DocumentRow, Filter, HEADING_SEPARATOR, Hit, KnowledgeBackend,
    KnowledgeError, check_collection_name, check_tag, headings_of, query_terms, vector_bytes,
    vector_of,
};
use warden_store::{StoreError, now, to_i64, to_u64};

use crate::bridge::Bridge;
use crate::pool::Pool;
use crate::{col, db};

/// The tables, made at connect when missing (several instances starting together make them
/// once: the migration's advisory lock is held).
const TABLES: &str = "
CREATE TABLE IF NOT EXISTS knowledge_collections (
    tenant TEXT NOT NULL,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    embedding_model TEXT,
    dimension INTEGER,
    PRIMARY KEY (tenant, name)
);
CREATE TABLE IF NOT EXISTS knowledge_documents (
    tenant TEXT NOT NULL,
    collection TEXT NOT NULL,
    path TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, collection, path),
    FOREIGN KEY (tenant, collection) REFERENCES knowledge_collections (tenant, name)
        ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS knowledge_document_tags (
    tenant TEXT NOT NULL,
    collection TEXT NOT NULL,
    path TEXT NOT NULL,
    tag TEXT NOT NULL,
    PRIMARY KEY (tenant, collection, path, tag),
    FOREIGN KEY (tenant, collection, path) REFERENCES knowledge_documents (tenant, collection, path)
        ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS knowledge_chunks (
    id BIGSERIAL PRIMARY KEY,
    tenant TEXT NOT NULL,
    collection TEXT NOT NULL,
    path TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    headings TEXT NOT NULL,
    line_start BIGINT NOT NULL,
    line_end BIGINT NOT NULL,
    page_start BIGINT,
    page_end BIGINT,
    text TEXT NOT NULL,
    search tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', text), 'A') || setweight(to_tsvector('english', headings), 'B')
    ) STORED,
    FOREIGN KEY (tenant, collection, path) REFERENCES knowledge_documents (tenant, collection, path)
        ON DELETE CASCADE
);
CREATE INDEX IF NOT EXISTS knowledge_chunks_by_document ON knowledge_chunks (tenant, collection, path);
CREATE INDEX IF NOT EXISTS knowledge_chunks_search ON knowledge_chunks USING gin (search);
CREATE TABLE IF NOT EXISTS knowledge_embedding_cache (
    tenant TEXT NOT NULL,
    model TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    vector BYTEA NOT NULL,
    PRIMARY KEY (tenant, model, text_hash)
);
";

/// The vectors' table, made when the database has pgvector.
const VECTOR_TABLE: &str = "
CREATE TABLE IF NOT EXISTS knowledge_vectors (
    chunk_id BIGINT PRIMARY KEY REFERENCES knowledge_chunks (id) ON DELETE CASCADE,
    tenant TEXT NOT NULL,
    collection TEXT NOT NULL,
    dimension INTEGER NOT NULL,
    embedding vector NOT NULL
);
CREATE INDEX IF NOT EXISTS knowledge_vectors_by_collection ON knowledge_vectors (tenant, collection);
";

/// The advisory lock the table set-up holds (the migrations' key plus one).
const TABLES_LOCK: i64 = 0x7761_7264_656f;

/// pgvector's HNSW index takes vectors of at most this many dimensions; a larger one is
/// searched by an exact scan.
const HNSW_MAX_DIMENSIONS: usize = 2000;

/// The knowledge part of one PostgreSQL database, for every tenant; [`Self::tenant`] gives one
/// tenant's view.
pub struct PgKnowledgeStore {
    /// The runtime and pool its synchronous contract works on.
    bridge: Arc<Bridge>,
    /// Why vectors cannot be stored (no pgvector), or `None` when they can.
    no_vectors: Option<String>,
}

impl std::fmt::Debug for PgKnowledgeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgKnowledgeStore")
            .field("vectors", &self.no_vectors.is_none())
            .finish_non_exhaustive()
    }
}

/// One tenant's collections: no query it makes reads or writes another tenant's rows.
#[derive(Clone)]
pub struct PgKnowledge {
    store: Arc<PgKnowledgeStore>,
    tenant: String,
}

impl std::fmt::Debug for PgKnowledge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgKnowledge").finish_non_exhaustive()
    }
}

fn knowledge_error(error: StoreError) -> KnowledgeError {
    KnowledgeError::Backend(error.to_string())
}

impl PgKnowledgeStore {
    /// Makes the tables when missing, and the vectors' table when the database has (or can
    /// make) the pgvector extension.
    pub(crate) fn open(bridge: Arc<Bridge>) -> Result<Self, StoreError> {
        let made = bridge.run(|pool| async move {
            let mut connection = pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            transaction
                .execute("SELECT pg_advisory_xact_lock($1)", &[&TABLES_LOCK])
                .await
                .map_err(db)?;
            transaction.batch_execute(TABLES).await.map_err(db)?;
            transaction.commit().await.map_err(db)?;
            // The extension in a transaction of its own: a database without it (or a user who
            // may not make it) keeps the lexical tables.
            let made = connection
                .batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
                .await;
            if let Err(error) = made {
                let present = connection
                    .query_opt("SELECT 1 FROM pg_extension WHERE extname = 'vector'", &[])
                    .await
                    .map_err(db)?
                    .is_some();
                if !present {
                    return Ok(Some(db(error).to_string()));
                }
            }
            let transaction = connection.transaction().await.map_err(db)?;
            transaction
                .execute("SELECT pg_advisory_xact_lock($1)", &[&TABLES_LOCK])
                .await
                .map_err(db)?;
            transaction.batch_execute(VECTOR_TABLE).await.map_err(db)?;
            transaction.commit().await.map_err(db)?;
            Ok::<_, StoreError>(None)
        })?;
        let no_vectors = made?;
        if let Some(reason) = &no_vectors {
            tracing::warn!(
                "the service database has no pgvector ({reason}): knowledge collections stay lexical"
            );
        }
        Ok(Self { bridge, no_vectors })
    }

    /// Whether vectors can be stored (the database has pgvector).
    pub fn has_vectors(&self) -> bool {
        self.no_vectors.is_none()
    }

    /// One tenant's collections.
    pub fn tenant(self: &Arc<Self>, tenant: &str) -> PgKnowledge {
        PgKnowledge {
            store: Arc::clone(self),
            tenant: tenant.to_owned(),
        }
    }
}

/// A vector as pgvector's text input: `[0.1,0.2,…]`.
fn vector_text(vector: &[f32]) -> String {
    let mut text = String::with_capacity(vector.len() * 10 + 2);
    text.push('[');
    for (index, value) in vector.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        // A non-finite value is not a vector component; an embedding never holds one.
        let value = if value.is_finite() { *value } else { 0.0 };
        text.push_str(&value.to_string());
    }
    text.push(']');
    text
}

/// A glob (`*` any characters, `/` too; `?` one; `[…]` a set, `[^…]` its complement)
/// as a POSIX regular expression matching the whole path or any tail of it after a `/`, as
/// SQLite's `GLOB` does in the SQLite store.
fn glob_regex(glob: &str) -> String {
    let mut regex = String::from("^(.*/)?(");
    let chars: Vec<char> = glob.chars().collect();
    let mut index = 0;
    while index < chars.len() {
        match chars[index] {
            '*' => regex.push_str(".*"),
            '?' => regex.push('.'),
            '[' => match set_end(&chars, index) {
                Some(end) => {
                    regex.push('[');
                    let mut inner = index + 1;
                    if chars.get(inner) == Some(&'^') {
                        regex.push('^');
                        inner += 1;
                    }
                    for &c in &chars[inner..end] {
                        if c == '\\' || c == '[' {
                            regex.push('\\');
                        }
                        regex.push(c);
                    }
                    regex.push(']');
                    index = end;
                }
                None => regex.push_str("\\["),
            },
            c if c.is_alphanumeric() || c == '/' || c == '_' || c == '-' || c == ' ' => {
                regex.push(c)
            }
            c => {
                regex.push('\\');
                regex.push(c);
            }
        }
        index += 1;
    }
    regex.push_str(")$");
    regex
}

/// Where the set opened at `chars[open]` closes (a `]` right after the opening, or after its
/// `^`, is a member).
fn set_end(chars: &[char], open: usize) -> Option<usize> {
    let mut index = open + 1;
    if chars.get(index) == Some(&'^') {
        index += 1;
    }
    if chars.get(index) == Some(&']') {
        index += 1;
    }
    chars[index.min(chars.len())..]
        .iter()
        .position(|&c| c == ']')
        .map(|found| index + found)
}

/// The condition on chunks aliased `k` that `filter` sets, with its values appended (their
/// placeholders numbered after those already in `values`).
fn filter_clause(filter: &Filter, values: &mut Vec<Box<dyn ToSql + Sync + Send>>) -> String {
    let mut clause = String::new();
    if let Some(glob) = &filter.path {
        values.push(Box::new(glob_regex(glob)));
        clause.push_str(&format!(" AND k.path ~ ${}", values.len()));
    }
    for tag in &filter.tags {
        values.push(Box::new(tag.clone()));
        clause.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM knowledge_document_tags t WHERE t.tenant = k.tenant AND t.collection = k.collection AND t.path = k.path AND t.tag = ${})",
            values.len()
        ));
    }
    clause
}

/// A query as a `to_tsquery` text: its words (letters and digits only, so no operator of the
/// query's own reaches PostgreSQL), any of which may match.
fn tsquery_text(query: &str) -> Option<String> {
    let terms = query_terms(query);
    (!terms.is_empty()).then(|| terms.join(" | "))
}

const HIT_COLUMNS: &str =
    "k.path, k.headings, k.line_start, k.line_end, k.text, k.page_start, k.page_end";

fn hit_of(row: &tokio_postgres::Row, score: f64) -> Result<Hit, StoreError> {
    let headings: String = col(row, 1)?;
    Ok(Hit {
        path: col(row, 0)?,
        headings: headings_of(&headings),
        line_start: to_u64(col(row, 2)?),
        line_end: to_u64(col(row, 3)?),
        text: col(row, 4)?,
        page_start: col::<Option<i64>>(row, 5)?.map(to_u64),
        page_end: col::<Option<i64>>(row, 6)?.map(to_u64),
        score,
    })
}

fn params(values: &[Box<dyn ToSql + Sync + Send>]) -> Vec<&(dyn ToSql + Sync)> {
    values
        .iter()
        .map(|value| value.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

impl PgKnowledge {
    fn run<T, F, Fut>(&self, job: F) -> Result<T, KnowledgeError>
    where
        F: FnOnce(Arc<Pool>, String) -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        let tenant = self.tenant.clone();
        self.store
            .bridge
            .run(move |pool| job(pool, tenant))
            .map_err(StoreError::from)
            .and_then(|answer| answer)
            .map_err(knowledge_error)
    }

    fn require_collection(&self, name: &str) -> Result<(), KnowledgeError> {
        if self.has_collection(name)? {
            Ok(())
        } else {
            Err(KnowledgeError::UnknownCollection(name.to_owned()))
        }
    }

    fn require_vectors(&self, collection: &str) -> Result<(), KnowledgeError> {
        match &self.store.no_vectors {
            None => Ok(()),
            Some(reason) => Err(KnowledgeError::NoVectorSupport {
                collection: collection.to_owned(),
                reason: reason.clone(),
            }),
        }
    }
}

impl KnowledgeBackend for PgKnowledge {
    fn ensure_collection(&self, name: &str) -> Result<(), KnowledgeError> {
        check_collection_name(name)?;
        let name = name.to_owned();
        self.run(move |pool, tenant| async move {
            pool.get()
                .await?
                .execute(
                    "INSERT INTO knowledge_collections (tenant, name, created_at) VALUES ($1, $2, $3)
                     ON CONFLICT DO NOTHING",
                    &[&tenant, &name, &to_i64(now())],
                )
                .await
                .map_err(db)?;
            Ok(())
        })
    }

    fn has_collection(&self, name: &str) -> Result<bool, KnowledgeError> {
        let name = name.to_owned();
        self.run(move |pool, tenant| async move {
            Ok(pool
                .get()
                .await?
                .query_opt(
                    "SELECT 1 FROM knowledge_collections WHERE tenant = $1 AND name = $2",
                    &[&tenant, &name],
                )
                .await
                .map_err(db)?
                .is_some())
        })
    }

    fn collections(&self) -> Result<Vec<CollectionRow>, KnowledgeError> {
        self.run(move |pool, tenant| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT c.name, c.created_at,
                        (SELECT COUNT(*) FROM knowledge_documents d
                            WHERE d.tenant = c.tenant AND d.collection = c.name),
                        (SELECT COUNT(*) FROM knowledge_chunks k
                            WHERE k.tenant = c.tenant AND k.collection = c.name)
                     FROM knowledge_collections c WHERE c.tenant = $1 ORDER BY c.name COLLATE \"C\"",
                    &[&tenant],
                )
                .await
                .map_err(db)?;
            rows.iter()
                .map(|row| {
                    Ok(CollectionRow {
                        name: col(row, 0)?,
                        created_at: to_u64(col(row, 1)?),
                        documents: to_u64(col(row, 2)?),
                        chunks: to_u64(col(row, 3)?),
                    })
                })
                .collect()
        })
    }

    fn documents(&self, collection: &str) -> Result<Vec<DocumentRow>, KnowledgeError> {
        self.require_collection(collection)?;
        let collection = collection.to_owned();
        self.run(move |pool, tenant| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT d.path, d.content_hash, d.updated_at,
                        (SELECT COUNT(*) FROM knowledge_chunks k WHERE k.tenant = d.tenant
                            AND k.collection = d.collection AND k.path = d.path),
                        ARRAY(SELECT t.tag FROM knowledge_document_tags t WHERE t.tenant = d.tenant
                            AND t.collection = d.collection AND t.path = d.path ORDER BY t.tag)
                     FROM knowledge_documents d WHERE d.tenant = $1 AND d.collection = $2
                     ORDER BY d.path COLLATE \"C\"",
                    &[&tenant, &collection],
                )
                .await
                .map_err(db)?;
            rows.iter()
                .map(|row| {
                    Ok(DocumentRow {
                        path: col(row, 0)?,
                        content_hash: col(row, 1)?,
                        updated_at: to_u64(col(row, 2)?),
                        chunks: to_u64(col(row, 3)?),
                        tags: col(row, 4)?,
                    })
                })
                .collect()
        })
    }

    fn set_tags(
        &self,
        collection: &str,
        path: &str,
        tags: &[String],
    ) -> Result<bool, KnowledgeError> {
        tags.iter().try_for_each(|tag| check_tag(tag))?;
        let (collection, path, tags) = (collection.to_owned(), path.to_owned(), tags.to_vec());
        self.run(move |pool, tenant| async move {
            let mut connection = pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            let stored = transaction
                .query_opt(
                    "SELECT 1 FROM knowledge_documents
                     WHERE tenant = $1 AND collection = $2 AND path = $3 FOR UPDATE",
                    &[&tenant, &collection, &path],
                )
                .await
                .map_err(db)?
                .is_some();
            if stored {
                transaction
                    .execute(
                        "DELETE FROM knowledge_document_tags
                         WHERE tenant = $1 AND collection = $2 AND path = $3",
                        &[&tenant, &collection, &path],
                    )
                    .await
                    .map_err(db)?;
                transaction
                    .execute(
                        "INSERT INTO knowledge_document_tags (tenant, collection, path, tag)
                         SELECT $1, $2, $3, tag FROM UNNEST($4::text[]) AS tag
                         ON CONFLICT DO NOTHING",
                        &[&tenant, &collection, &path, &tags],
                    )
                    .await
                    .map_err(db)?;
            }
            transaction.commit().await.map_err(db)?;
            Ok(stored)
        })
    }

    fn content_hash(&self, collection: &str, path: &str) -> Result<Option<String>, KnowledgeError> {
        let (collection, path) = (collection.to_owned(), path.to_owned());
        self.run(move |pool, tenant| async move {
            let row = pool
                .get()
                .await?
                .query_opt(
                    "SELECT content_hash FROM knowledge_documents
                     WHERE tenant = $1 AND collection = $2 AND path = $3",
                    &[&tenant, &collection, &path],
                )
                .await
                .map_err(db)?;
            row.map(|row| col(&row, 0)).transpose()
        })
    }

    fn replace_document(
        &self,
        collection: &str,
        path: &str,
        content_hash: &str,
        chunks: &[Chunk],
        vectors: Option<&[Vec<f32>]>,
    ) -> Result<(), KnowledgeError> {
        if vectors.is_some() {
            self.require_vectors(collection)?;
        }
        let (collection, path, content_hash) = (
            collection.to_owned(),
            path.to_owned(),
            content_hash.to_owned(),
        );
        let ordinals: Vec<i32> = (0..chunks.len())
            .map(|ordinal| i32::try_from(ordinal).unwrap_or(i32::MAX))
            .collect();
        let headings: Vec<String> = chunks
            .iter()
            .map(|chunk| chunk.headings.join(HEADING_SEPARATOR))
            .collect();
        let line_starts: Vec<i64> = chunks
            .iter()
            .map(|chunk| i64::try_from(chunk.line_start).unwrap_or(0))
            .collect();
        let line_ends: Vec<i64> = chunks
            .iter()
            .map(|chunk| i64::try_from(chunk.line_end).unwrap_or(0))
            .collect();
        let page_starts: Vec<Option<i64>> = chunks
            .iter()
            .map(|chunk| {
                chunk
                    .pages
                    .map(|(first, _)| i64::try_from(first).unwrap_or(0))
            })
            .collect();
        let page_ends: Vec<Option<i64>> = chunks
            .iter()
            .map(|chunk| {
                chunk
                    .pages
                    .map(|(_, last)| i64::try_from(last).unwrap_or(0))
            })
            .collect();
        let texts: Vec<String> = chunks.iter().map(|chunk| chunk.text.clone()).collect();
        let vectors: Option<Vec<(i32, String, i32)>> = vectors.map(|vectors| {
            vectors
                .iter()
                .enumerate()
                .take(chunks.len())
                .map(|(ordinal, vector)| {
                    (
                        i32::try_from(ordinal).unwrap_or(i32::MAX),
                        vector_text(vector),
                        i32::try_from(vector.len()).unwrap_or(i32::MAX),
                    )
                })
                .collect()
        });
        self.run(move |pool, tenant| async move {
            let mut connection = pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            transaction
                .execute(
                    "DELETE FROM knowledge_chunks WHERE tenant = $1 AND collection = $2 AND path = $3",
                    &[&tenant, &collection, &path],
                )
                .await
                .map_err(db)?;
            transaction
                .execute(
                    "INSERT INTO knowledge_documents (tenant, collection, path, content_hash, updated_at)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (tenant, collection, path) DO UPDATE
                         SET content_hash = excluded.content_hash, updated_at = excluded.updated_at",
                    &[&tenant, &collection, &path, &content_hash, &to_i64(now())],
                )
                .await
                .map_err(db)?;
            let inserted = transaction
                .query(
                    "INSERT INTO knowledge_chunks (tenant, collection, path, ordinal, headings,
                         line_start, line_end, page_start, page_end, text)
                     SELECT $1, $2, $3, c.ordinal, c.headings, c.line_start, c.line_end,
                         c.page_start, c.page_end, c.text
                     FROM UNNEST($4::int[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[],
                         $9::bigint[], $10::text[])
                         AS c (ordinal, headings, line_start, line_end, page_start, page_end, text)
                     RETURNING id, ordinal",
                    &[
                        &tenant,
                        &collection,
                        &path,
                        &ordinals,
                        &headings,
                        &line_starts,
                        &line_ends,
                        &page_starts,
                        &page_ends,
                        &texts,
                    ],
                )
                .await
                .map_err(db)?;
            if let Some(vectors) = vectors {
                let ids: HashMap<i32, i64> = inserted
                    .iter()
                    .map(|row| Ok((col(row, 1)?, col(row, 0)?)))
                    .collect::<Result<_, StoreError>>()?;
                let mut chunk_ids = Vec::with_capacity(vectors.len());
                let mut texts = Vec::with_capacity(vectors.len());
                let mut dimensions = Vec::with_capacity(vectors.len());
                for (ordinal, text, dimension) in vectors {
                    if let Some(id) = ids.get(&ordinal) {
                        chunk_ids.push(*id);
                        texts.push(text);
                        dimensions.push(dimension);
                    }
                }
                transaction
                    .execute(
                        "INSERT INTO knowledge_vectors (chunk_id, tenant, collection, dimension, embedding)
                         SELECT v.chunk_id, $1, $2, v.dimension, v.embedding::vector
                         FROM UNNEST($3::bigint[], $4::int[], $5::text[])
                             AS v (chunk_id, dimension, embedding)",
                        &[&tenant, &collection, &chunk_ids, &dimensions, &texts],
                    )
                    .await
                    .map_err(db)?;
            }
            transaction.commit().await.map_err(db)?;
            Ok(())
        })
    }

    fn collection_embedding(
        &self,
        collection: &str,
    ) -> Result<Option<(String, usize)>, KnowledgeError> {
        self.require_collection(collection)?;
        let collection = collection.to_owned();
        self.run(move |pool, tenant| async move {
            let row = pool
                .get()
                .await?
                .query_opt(
                    "SELECT embedding_model, dimension FROM knowledge_collections
                     WHERE tenant = $1 AND name = $2",
                    &[&tenant, &collection],
                )
                .await
                .map_err(db)?;
            let Some(row) = row else {
                return Ok(None);
            };
            let model: Option<String> = col(&row, 0)?;
            let dimension: Option<i32> = col(&row, 1)?;
            Ok(model
                .zip(dimension)
                .map(|(model, dimension)| (model, usize::try_from(dimension).unwrap_or(0))))
        })
    }

    fn record_embedding(
        &self,
        collection: &str,
        model: &str,
        dimension: usize,
    ) -> Result<(), KnowledgeError> {
        self.require_vectors(collection)?;
        let (collection, model) = (collection.to_owned(), model.to_owned());
        let dimension_value = i32::try_from(dimension).unwrap_or(i32::MAX);
        // One HNSW index per dimension, partial on it: the searches of every collection of that
        // dimension use it. The dimension is a number, so it is safe in the statement's text.
        let index = (dimension > 0 && dimension <= HNSW_MAX_DIMENSIONS).then(|| {
            format!(
                "CREATE INDEX IF NOT EXISTS knowledge_vectors_hnsw_{dimension} ON knowledge_vectors
                 USING hnsw ((embedding::vector({dimension})) vector_cosine_ops)
                 WHERE dimension = {dimension}"
            )
        });
        self.run(move |pool, tenant| async move {
            let mut connection = pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            if let Some(index) = index {
                transaction
                    .execute("SELECT pg_advisory_xact_lock($1)", &[&TABLES_LOCK])
                    .await
                    .map_err(db)?;
                transaction.batch_execute(&index).await.map_err(db)?;
            }
            transaction
                .execute(
                    "UPDATE knowledge_collections SET embedding_model = $3, dimension = $4
                     WHERE tenant = $1 AND name = $2",
                    &[&tenant, &collection, &model, &dimension_value],
                )
                .await
                .map_err(db)?;
            transaction.commit().await.map_err(db)?;
            Ok(())
        })
    }

    fn unbind_embedding(&self, collection: &str) -> Result<(), KnowledgeError> {
        let collection = collection.to_owned();
        let vectors = self.store.no_vectors.is_none();
        self.run(move |pool, tenant| async move {
            let mut connection = pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            if vectors {
                transaction
                    .execute(
                        "DELETE FROM knowledge_vectors WHERE tenant = $1 AND collection = $2",
                        &[&tenant, &collection],
                    )
                    .await
                    .map_err(db)?;
            }
            transaction
                .execute(
                    "UPDATE knowledge_collections SET embedding_model = NULL, dimension = NULL
                     WHERE tenant = $1 AND name = $2",
                    &[&tenant, &collection],
                )
                .await
                .map_err(db)?;
            transaction.commit().await.map_err(db)?;
            Ok(())
        })
    }

    fn cached_vectors(
        &self,
        model: &str,
        text_hashes: &[String],
    ) -> Result<HashMap<String, Vec<f32>>, KnowledgeError> {
        let (model, hashes) = (model.to_owned(), text_hashes.to_vec());
        self.run(move |pool, tenant| async move {
            let rows = pool
                .get()
                .await?
                .query(
                    "SELECT text_hash, vector FROM knowledge_embedding_cache
                     WHERE tenant = $1 AND model = $2 AND text_hash = ANY($3)",
                    &[&tenant, &model, &hashes],
                )
                .await
                .map_err(db)?;
            rows.iter()
                .map(|row| {
                    let bytes: &[u8] = col(row, 1)?;
                    Ok((col(row, 0)?, vector_of(bytes)))
                })
                .collect()
        })
    }

    fn cache_vectors(
        &self,
        model: &str,
        vectors: &[(String, Vec<f32>)],
    ) -> Result<(), KnowledgeError> {
        let model = model.to_owned();
        let hashes: Vec<String> = vectors.iter().map(|(hash, _)| hash.clone()).collect();
        let blobs: Vec<Vec<u8>> = vectors
            .iter()
            .map(|(_, vector)| vector_bytes(vector))
            .collect();
        self.run(move |pool, tenant| async move {
            pool.get()
                .await?
                .execute(
                    "INSERT INTO knowledge_embedding_cache (tenant, model, text_hash, vector)
                     SELECT $1, $2, c.text_hash, c.vector FROM UNNEST($3::text[], $4::bytea[])
                         AS c (text_hash, vector)
                     ON CONFLICT (tenant, model, text_hash) DO UPDATE SET vector = excluded.vector",
                    &[&tenant, &model, &hashes, &blobs],
                )
                .await
                .map_err(db)?;
            Ok(())
        })
    }

    fn search_lexical_in(
        &self,
        collection: &str,
        query: &str,
        limit: usize,
        filter: &Filter,
    ) -> Result<Vec<Hit>, KnowledgeError> {
        self.require_collection(collection)?;
        filter.check()?;
        let Some(terms) = tsquery_text(query) else {
            return Ok(Vec::new());
        };
        let mut values: Vec<Box<dyn ToSql + Sync + Send>> = vec![
            Box::new(self.tenant.clone()),
            Box::new(collection.to_owned()),
            Box::new(terms),
            Box::new(i64::try_from(limit).unwrap_or(i64::MAX)),
        ];
        let clause = filter_clause(filter, &mut values);
        let statement = format!(
            "SELECT {HIT_COLUMNS}, ts_rank(k.search, q) AS rank
             FROM knowledge_chunks k, to_tsquery('english', $3) q
             WHERE k.tenant = $1 AND k.collection = $2 AND k.search @@ q{clause}
             ORDER BY rank DESC, k.id LIMIT $4"
        );
        self.run(move |pool, _| async move {
            let rows = pool
                .get()
                .await?
                .query(&statement, &params(&values))
                .await
                .map_err(db)?;
            rows.iter()
                .map(|row| {
                    let rank: f32 = col(row, 7)?;
                    hit_of(row, f64::from(rank))
                })
                .collect()
        })
    }

    fn search_vectors_in(
        &self,
        collection: &str,
        query: &[f32],
        limit: usize,
        filter: &Filter,
    ) -> Result<Vec<Hit>, KnowledgeError> {
        self.require_collection(collection)?;
        filter.check()?;
        if self.store.no_vectors.is_some() || query.is_empty() {
            return Ok(Vec::new());
        }
        let dimension = query.len();
        let mut values: Vec<Box<dyn ToSql + Sync + Send>> = vec![
            Box::new(self.tenant.clone()),
            Box::new(collection.to_owned()),
            Box::new(vector_text(query)),
            Box::new(i64::try_from(limit).unwrap_or(i64::MAX)),
        ];
        let clause = filter_clause(filter, &mut values);
        // The dimension is written into the statement (a number): the partial HNSW index of
        // that dimension matches only a literal.
        let statement = format!(
            "SELECT {HIT_COLUMNS}, 1 - (v.embedding::vector({dimension}) <=> $3::text::vector({dimension})) AS similarity
             FROM knowledge_vectors v JOIN knowledge_chunks k ON k.id = v.chunk_id
             WHERE v.dimension = {dimension} AND v.tenant = $1 AND v.collection = $2{clause}
             ORDER BY v.embedding::vector({dimension}) <=> $3::text::vector({dimension}), k.id
             LIMIT $4"
        );
        // An HNSW scan that a filter thins keeps going (up to pgvector's scan limit) until it
        // has enough rows; ef_search at least the candidates asked for.
        let settings = format!(
            "SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.ef_search = {}",
            limit.clamp(40, 1000)
        );
        self.run(move |pool, _| async move {
            let mut connection = pool.get().await?;
            let transaction = connection.transaction().await.map_err(db)?;
            transaction.batch_execute(&settings).await.map_err(db)?;
            let rows = transaction
                .query(&statement, &params(&values))
                .await
                .map_err(db)?;
            transaction.commit().await.map_err(db)?;
            let mut hits = rows
                .iter()
                .map(|row| {
                    let similarity: f64 = col(row, 7)?;
                    hit_of(row, similarity)
                })
                .collect::<Result<Vec<_>, _>>()?;
            // A relaxed iterative scan may return rows slightly out of order.
            hits.sort_by(|a, b| b.score.total_cmp(&a.score));
            Ok(hits)
        })
    }

    fn remove_document(&self, collection: &str, path: &str) -> Result<bool, KnowledgeError> {
        let (collection, path) = (collection.to_owned(), path.to_owned());
        self.run(move |pool, tenant| async move {
            let removed = pool
                .get()
                .await?
                .execute(
                    "DELETE FROM knowledge_documents WHERE tenant = $1 AND collection = $2 AND path = $3",
                    &[&tenant, &collection, &path],
                )
                .await
                .map_err(db)?;
            Ok(removed > 0)
        })
    }

    fn remove_collection(&self, collection: &str) -> Result<bool, KnowledgeError> {
        let collection = collection.to_owned();
        self.run(move |pool, tenant| async move {
            let removed = pool
                .get()
                .await?
                .execute(
                    "DELETE FROM knowledge_collections WHERE tenant = $1 AND name = $2",
                    &[&tenant, &collection],
                )
                .await
                .map_err(db)?;
            Ok(removed > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_glob_becomes_a_regex_that_matches_the_whole_path_or_a_tail_after_a_slash() {
        assert_eq!(glob_regex("policies/*.md"), "^(.*/)?(policies/.*\\.md)$");
        assert_eq!(glob_regex("a?[^x]b"), "^(.*/)?(a.[^x]b)$");
        assert_eq!(glob_regex("[!x]"), "^(.*/)?([!x])$");
        assert_eq!(glob_regex("[]x]"), "^(.*/)?([]x])$");
        assert_eq!(glob_regex("(x|y)+"), "^(.*/)?(\\(x\\|y\\)\\+)$");
        assert_eq!(glob_regex("[open"), "^(.*/)?(\\[open)$");
        assert_eq!(vector_text(&[0.5, -1.0, f32::NAN]), "[0.5,-1,0]");
        assert_eq!(
            tsquery_text("refund: it's (fast)!").unwrap(),
            "refund | it | s | fast"
        );
        assert!(tsquery_text("!!").is_none());
    }
}
