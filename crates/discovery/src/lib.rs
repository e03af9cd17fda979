//! warden's progressive discovery: tool search, manifest token counts and execution routing
//! (code mode, which needs QuickJS, is its own crate, `warden-codemode`).
//!
//! - `search`: [`SearchIndex`] ranks tools by exact name, then name prefix, then BM25F over
//!   names, descriptions, parameters and the server's summary, with generic synonyms, a light
//!   stemmer and typo tolerance (`text`); results are compact and callable.
//! - `corpus`: loads the tool corpora (`tests/corpora/`) at run time and measures search quality.
//! - `tokens`: o200k token counts of the manifest, the shape of `warden context --json`.
//! - `signature`: the TypeScript-like signatures code mode's `code_search` shows.
//! - `routing`: the byte-stable `<execution_routing>` prompt section.

mod corpus;
mod routing;
mod search;
mod signature;
mod text;
mod tokens;

pub use corpus::{
    Corpora, Corpus, CorpusError, CorpusTool, LabelledQuery, QueryHalf, SearchQuality, corpora_dir,
    evaluate, load_single_server, quality_table,
};
pub use routing::{Availability, RoutingInputs, execution_routing_section};
pub use search::{
    MatchKind, Parameter, SUMMARY_CHARS, SearchHit, SearchIndex, SearchWeights, ServerDoc,
    ToolEntry, one_line, parameters_of,
};
pub use signature::{tool_signature, type_of};
pub use tokens::{
    DeferredServer, ManifestReport, ManifestTool, ServerTokens, count_tokens, manifest_tokens,
    tools_array_tokens,
};
