//! Knowledge: document collections an agent and a person search — files chunked by structure with their provenance, stored in SQLite with an FTS5 index, and retrieved by BM25, or by BM25 and vector nearness fused by reciprocal rank when the collection is embedded (an OpenAI-compatible embeddings endpoint, its vectors cached by text).

mod chunk;
mod embed;
mod formats;
mod ingest;
mod store;

pub use chunk::{Chunk, ChunkBudget, chunk_text, estimate_tokens};
pub use embed::{
    DEFAULT_ATTEMPTS, DEFAULT_BATCH, EmbedError, Embedder, EmbeddingsEndpoint, normalised,
};
pub use formats::{document_text, html_to_text};
pub use ingest::{IngestSummary, MAX_FILE_BYTES, Progress, add, add_document, reindex};
pub use store::{
    CollectionRow, DocumentRow, Hit, KnowledgeError, KnowledgeStore, check_collection_name, fuse,
};
