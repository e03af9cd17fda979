//! warden's progressive discovery: tool search, manifest token counts, code mode and execution routing.

pub mod corpus;
pub mod search;
pub mod signature;
pub mod text;

pub use corpus::{Corpora, CorpusError, SearchQuality, evaluate, quality_table, shared_dir};
pub use search::{
    MatchKind, Parameter, SearchHit, SearchIndex, SearchWeights, ServerDoc, ToolEntry,
};
pub use signature::{tool_signature, type_of};
