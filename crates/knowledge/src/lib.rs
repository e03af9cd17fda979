//! Knowledge: document collections an agent and a person search — files chunked by structure with their provenance, stored in SQLite with an FTS5 index, and retrieved lexically (BM25). Embeddings and hybrid retrieval build on the same store.

mod chunk;
mod formats;
mod ingest;
mod store;

pub use chunk::{Chunk, ChunkBudget, chunk_text, estimate_tokens};
pub use formats::{document_text, html_to_text};
pub use ingest::{IngestSummary, MAX_FILE_BYTES, Progress, add, reindex};
pub use store::{
    CollectionRow, DocumentRow, Hit, KnowledgeError, KnowledgeStore, check_collection_name,
};
