//! warden's progressive discovery: tool search, manifest token counts, code mode and execution routing.

pub mod code_mode;
pub mod corpus;
pub mod routing;
pub mod search;
pub mod signature;
pub mod text;
pub mod tokens;

pub use code_mode::{
    Callability, CodeCatalog, CodeModeError, CodeModeHost, CodeModeLimits, CodeSearchRequest,
    CodeTool, ExecutionReport, ExecutionStatus,
};
pub use corpus::{Corpora, CorpusError, SearchQuality, evaluate, quality_table, shared_dir};
pub use routing::{Availability, RoutingInputs, execution_routing_section};
pub use search::{
    MatchKind, Parameter, SearchHit, SearchIndex, SearchWeights, ServerDoc, ToolEntry,
};
pub use signature::{tool_signature, type_of};
pub use tokens::{
    DeferredServer, ManifestReport, ManifestTool, ServerTokens, count_tokens, manifest_tokens,
};
