//! Knowledge: document collections an agent and a person search — files chunked by structure with their provenance (lines, headings, and pages for a converted PDF), stored in SQLite with an FTS5 index (or, through [`KnowledgeBackend`], PostgreSQL with pgvector), and retrieved by BM25, or by BM25 and vector nearness fused by reciprocal rank when the collection is embedded (an OpenAI-compatible embeddings endpoint, its vectors cached by text), within a path glob and tags, optionally reordered by a `/v1/rerank` endpoint.

mod backend;
mod chunk;
mod embed;
mod formats;
mod ingest;
mod place;
mod quantised;
mod rerank;
mod store;

pub use backend::{
    CANDIDATES, CollectionRow, DocumentRow, Filter, HEADING_SEPARATOR, Hit, KnowledgeBackend,
    KnowledgeError, RRF_K, check_collection_name, check_tag, fuse, headings_of, query_terms,
    vector_bytes, vector_of,
};
pub use chunk::{Chunk, ChunkBudget, chunk_text, estimate_tokens};
pub use embed::{
    DEFAULT_ATTEMPTS, DEFAULT_BATCH, EmbedError, Embedder, EmbeddingsEndpoint, normalised,
};
pub use formats::{Converters, DocumentText, document_text, html_to_text, paged};
pub use ingest::{
    IngestOptions, IngestSummary, MAX_FILE_BYTES, Progress, add, add_document, reindex,
};
pub use place::{KnowledgePlace, shared_store};
pub use rerank::{RerankEndpoint, RerankError};
pub use store::KnowledgeStore;
