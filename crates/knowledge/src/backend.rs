//! The knowledge store's contract: the types every backend stores and returns (collections, documents, chunks as hits with their provenance, filters) and [`KnowledgeBackend`], which SQLite ([`crate::KnowledgeStore`]) and PostgreSQL with pgvector (warden-store-pg) implement; the retrieval built on it — embeddings bound to a collection, BM25 and vectors fused by reciprocal rank — is written once here for both.

use std::collections::HashMap;

use crate::chunk::Chunk;

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("the knowledge database failed: {0}")]
    Database(#[from] rusqlite::Error),
    /// Another backend's failure (PostgreSQL), as its message.
    #[error("the knowledge database failed: {0}")]
    Backend(String),
    #[error(
        "collection {collection}: vectors need PostgreSQL's pgvector extension, which this database does not have ({reason}); install pgvector and run `CREATE EXTENSION vector` in it as a superuser, or keep the collection lexical"
    )]
    NoVectorSupport { collection: String, reason: String },
    #[error("no collection named {0:?} (make it with `warden knowledge add {0} PATH…`)")]
    UnknownCollection(String),
    #[error(
        "collection name {0:?}: letters, digits, `_` and `-`, starting with a letter or digit, at most 64"
    )]
    BadName(String),
    #[error(
        "collection {collection} holds vectors of {stored}; these are of {offered}: reindex it with the new embeddings, or use the same ones"
    )]
    EmbeddingMismatch {
        collection: String,
        stored: String,
        offered: String,
    },
    #[error("collection {collection} is embedded with {model}: add to it with the same embeddings")]
    EmbeddingsNeeded { collection: String, model: String },
    #[error(transparent)]
    Embed(#[from] crate::embed::EmbedError),
    #[error(
        "tag {0:?}: letters, digits, `_`, `-`, `.` and `:`, starting with a letter or digit, at most 64"
    )]
    BadTag(String),
    #[error(
        "path filter {0:?}: a glob of at most 512 characters (`*`, `?`, `[…]`), e.g. \"policies/*.md\""
    )]
    BadGlob(String),
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
    /// Its tags (`warden knowledge add … --tag T`), sorted.
    pub tags: Vec<String>,
}

/// Which documents a search looks in: their path matches a glob, and they carry every tag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// A glob (`*` any characters, `/` too; `?` one; `[…]` a set), matched against the whole
    /// stored path or any tail of it after a `/` (`policies/*.md` matches
    /// `/home/me/docs/policies/refunds.md`).
    pub path: Option<String>,
    /// Tags a document must all carry.
    pub tags: Vec<String>,
}

impl Filter {
    /// Whether it lets every document through.
    pub fn is_empty(&self) -> bool {
        self.path.is_none() && self.tags.is_empty()
    }

    /// Checks the glob and the tags.
    pub fn check(&self) -> Result<(), KnowledgeError> {
        if let Some(glob) = &self.path
            && (glob.is_empty() || glob.chars().count() > 512)
        {
            return Err(KnowledgeError::BadGlob(glob.clone()));
        }
        self.tags.iter().try_for_each(|tag| check_tag(tag))
    }
}

/// Whether `tag` may tag a document.
pub fn check_tag(tag: &str) -> Result<(), KnowledgeError> {
    let valid = !tag.is_empty()
        && tag.len() <= 64
        && tag
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
    if valid {
        Ok(())
    } else {
        Err(KnowledgeError::BadTag(tag.to_owned()))
    }
}

/// One retrieved chunk with its provenance and score (higher is better).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hit {
    pub path: String,
    pub headings: Vec<String>,
    pub line_start: u64,
    pub line_end: u64,
    /// The pages it spans, when its document has pages (a PDF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_start: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_end: Option<u64>,
    pub text: String,
    pub score: f64,
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

/// Reciprocal-rank fusion's constant: how much the first ranks outweigh the later ones.
pub const RRF_K: f64 = 60.0;
/// How many candidates each half of a hybrid search brings to the fusion.
pub const CANDIDATES: usize = 50;

/// Reciprocal-rank fusion of ranked lists: each chunk scores the sum of `1 / (k + rank)` over
/// the lists that hold it (a chunk is its path, line range and text).
pub fn fuse(lists: &[Vec<Hit>], limit: usize) -> Vec<Hit> {
    let mut fused: Vec<Hit> = Vec::new();
    for list in lists {
        for (rank, hit) in list.iter().enumerate() {
            let score = 1.0 / (RRF_K + rank as f64 + 1.0);
            match fused.iter_mut().find(|seen| {
                seen.path == hit.path
                    && seen.line_start == hit.line_start
                    && seen.line_end == hit.line_end
                    && seen.text == hit.text
            }) {
                Some(seen) => seen.score += score,
                None => fused.push(Hit {
                    score,
                    ..hit.clone()
                }),
            }
        }
    }
    fused.sort_by(|a, b| b.score.total_cmp(&a.score));
    fused.truncate(limit);
    fused
}

/// A vector as the stores keep it in a blob: little-endian `f32`s.
pub fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A vector from [`vector_bytes`]' blob.
pub fn vector_of(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|four| f32::from_le_bytes([four[0], four[1], four[2], four[3]]))
        .collect()
}

/// How a chunk's heading path is stored: its headings joined by ` › `.
pub const HEADING_SEPARATOR: &str = " › ";

/// A stored heading path as its headings.
pub fn headings_of(stored: &str) -> Vec<String> {
    stored
        .split(HEADING_SEPARATOR)
        .filter(|heading| !heading.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A query's words for a lexical search: letters and digits only (no operator of the query's
/// own reaches an index), lower case, each once.
pub fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for term in query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|term| !term.is_empty())
    {
        let term = term.to_lowercase();
        if !terms.contains(&term) {
            terms.push(term);
        }
    }
    terms
}

/// What a knowledge backend stores and answers. Every method blocks (call it off any async
/// worker); each write is one transaction, so a search sees a document's old chunks or its new
/// ones, never a mix. Hits are ranked best first and their scores are higher-is-better.
pub trait KnowledgeBackend: Send + Sync {
    /// Makes the collection unless it exists (its name checked first).
    fn ensure_collection(&self, name: &str) -> Result<(), KnowledgeError>;

    /// Whether a collection of this name exists.
    fn has_collection(&self, name: &str) -> Result<bool, KnowledgeError>;

    /// Every collection with its counts, by name.
    fn collections(&self) -> Result<Vec<CollectionRow>, KnowledgeError>;

    /// The documents of `collection`, by path.
    fn documents(&self, collection: &str) -> Result<Vec<DocumentRow>, KnowledgeError>;

    /// Gives a stored document exactly these tags (each checked); whether it is stored.
    fn set_tags(
        &self,
        collection: &str,
        path: &str,
        tags: &[String],
    ) -> Result<bool, KnowledgeError>;

    /// The stored content hash of a document, if it is stored.
    fn content_hash(&self, collection: &str, path: &str) -> Result<Option<String>, KnowledgeError>;

    /// Replaces a document's chunks (with their vectors, one per chunk, when the collection is
    /// embedded) in one transaction; the document keeps its tags.
    fn replace_document(
        &self,
        collection: &str,
        path: &str,
        content_hash: &str,
        chunks: &[Chunk],
        vectors: Option<&[Vec<f32>]>,
    ) -> Result<(), KnowledgeError>;

    /// The embeddings model a collection's vectors come from, and their dimension.
    fn collection_embedding(
        &self,
        collection: &str,
    ) -> Result<Option<(String, usize)>, KnowledgeError>;

    /// Records the model and dimension of a collection that has none (see
    /// [`Self::bind_embedding`], which checks first).
    fn record_embedding(
        &self,
        collection: &str,
        model: &str,
        dimension: usize,
    ) -> Result<(), KnowledgeError>;

    /// Forgets the collection's embeddings and vectors (before embedding it with others).
    fn unbind_embedding(&self, collection: &str) -> Result<(), KnowledgeError>;

    /// The cached vectors of `model` for texts of these hashes.
    fn cached_vectors(
        &self,
        model: &str,
        text_hashes: &[String],
    ) -> Result<HashMap<String, Vec<f32>>, KnowledgeError>;

    /// Keeps vectors of `model` by the hash of their text.
    fn cache_vectors(
        &self,
        model: &str,
        vectors: &[(String, Vec<f32>)],
    ) -> Result<(), KnowledgeError>;

    /// The `limit` chunks of `collection` that best match `query` lexically, among the
    /// documents `filter` lets through, best first. The query is only words: no syntax of the
    /// backend's index reaches it.
    fn search_lexical_in(
        &self,
        collection: &str,
        query: &str,
        limit: usize,
        filter: &Filter,
    ) -> Result<Vec<Hit>, KnowledgeError>;

    /// The `limit` chunks of `collection` whose vectors are nearest `query` (cosine; every
    /// vector is unit length, so the score is the cosine similarity), among the documents
    /// `filter` lets through, best first. A filter applies before the cut: a matching chunk is
    /// found however many nearer ones lie outside it.
    fn search_vectors_in(
        &self,
        collection: &str,
        query: &[f32],
        limit: usize,
        filter: &Filter,
    ) -> Result<Vec<Hit>, KnowledgeError>;

    /// Removes a document and its chunks; whether it was there.
    fn remove_document(&self, collection: &str, path: &str) -> Result<bool, KnowledgeError>;

    /// Removes a collection with everything in it; whether it was there.
    fn remove_collection(&self, collection: &str) -> Result<bool, KnowledgeError>;

    /// Records that `collection`'s vectors come from `model` with `dimension`; other embeddings
    /// than the stored ones are refused with the fix (reindex).
    fn bind_embedding(
        &self,
        collection: &str,
        model: &str,
        dimension: usize,
    ) -> Result<(), KnowledgeError> {
        match self.collection_embedding(collection)? {
            Some((stored, stored_dimension))
                if stored == model && stored_dimension == dimension =>
            {
                Ok(())
            }
            Some((stored, stored_dimension)) => Err(KnowledgeError::EmbeddingMismatch {
                collection: collection.to_owned(),
                stored: format!("{stored} ({stored_dimension} dimensions)"),
                offered: format!("{model} ({dimension} dimensions)"),
            }),
            None => self.record_embedding(collection, model, dimension),
        }
    }

    /// [`Self::search_lexical_in`] over every document.
    fn search_lexical(
        &self,
        collection: &str,
        query: &str,
        limit: usize,
    ) -> Result<Vec<Hit>, KnowledgeError> {
        self.search_lexical_in(collection, query, limit, &Filter::default())
    }

    /// [`Self::search_vectors_in`] over every document.
    fn search_vectors(
        &self,
        collection: &str,
        query: &[f32],
        limit: usize,
    ) -> Result<Vec<Hit>, KnowledgeError> {
        self.search_vectors_in(collection, query, limit, &Filter::default())
    }

    /// [`Self::search_in`] over every document.
    fn search(
        &self,
        collection: &str,
        query: &str,
        limit: usize,
        embedder: Option<&dyn crate::embed::Embedder>,
    ) -> Result<Vec<Hit>, KnowledgeError> {
        self.search_in(collection, query, limit, embedder, &Filter::default())
    }

    /// The `limit` best chunks for `query` among the documents `filter` lets through: the
    /// lexical half alone, or — when the collection is embedded and `embedder` makes its
    /// vectors — the lexical and vector halves fused by reciprocal rank (each half's top
    /// candidates, filtered before the cut; a chunk both rank high wins). The score is then the
    /// fused one.
    fn search_in(
        &self,
        collection: &str,
        query: &str,
        limit: usize,
        embedder: Option<&dyn crate::embed::Embedder>,
        filter: &Filter,
    ) -> Result<Vec<Hit>, KnowledgeError> {
        let candidates = CANDIDATES.max(limit);
        let embedded = match embedder {
            Some(embedder) => self
                .collection_embedding(collection)?
                .map(|stored| (embedder, stored)),
            None => None,
        };
        let Some((embedder, (model, dimension))) = embedded else {
            let lexical = self.search_lexical_in(collection, query, candidates, filter)?;
            return Ok(lexical.into_iter().take(limit).collect());
        };
        // The halves run side by side: the query's vector and the nearest chunks on a thread of
        // their own while the lexical half runs here.
        let (lexical, nearest) = std::thread::scope(|scope| {
            let vectors = scope.spawn(|| {
                let query_vector = embedder.embed_query(query)?;
                if embedder.model() != model || query_vector.len() != dimension {
                    return Err(KnowledgeError::EmbeddingMismatch {
                        collection: collection.to_owned(),
                        stored: format!("{model} ({dimension} dimensions)"),
                        offered: format!(
                            "{} ({} dimensions)",
                            embedder.model(),
                            query_vector.len()
                        ),
                    });
                }
                self.search_vectors_in(collection, &query_vector, candidates, filter)
            });
            let lexical = self.search_lexical_in(collection, query, candidates, filter);
            let nearest = vectors.join().unwrap_or_else(|_| {
                Err(KnowledgeError::Backend(
                    "the vector half of the search stopped".to_owned(),
                ))
            });
            (lexical, nearest)
        });
        let (lexical, nearest) = (lexical?, nearest?);
        Ok(fuse(&[lexical, nearest], limit))
    }
}
