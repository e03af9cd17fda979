//! warden MCP client runtime: connections, catalogues, calls and result conversion.

mod artifacts;
mod catalog;
mod client;
mod direct_call;
#[cfg(test)]
mod egress_tests;
mod error;
mod guard;
mod http;
mod http_auth;
mod naming;
mod prompt_args;
mod result;
mod runtime;
mod server;
mod spec;
mod sse_legacy;
mod stderr;
mod stdio;
mod stdio_transport;
mod upstream;

pub use artifacts::{
    Artifact, ArtifactError, ArtifactStore, RetentionPolicy, RetentionReport, SESSION_LOCK_FILE,
    StoredArtifact, apply_retention, is_artifact_id, stored_artifacts,
};
pub use catalog::{Catalog, McpTool, PAGE_LIMIT, ResourceRow, ToolIdentity, ToolSet};
pub use client::{
    ElicitationHandler, ElicitationKind, ElicitationRequest, ElicitationResponse, ListKind,
    Progress, SamplingAnswer, SamplingDeclined, SamplingHandler, SamplingRequest, SamplingRole,
    SamplingTurn,
};
pub use error::{CallError, ConnectError, FailureKind, McpError};
pub use guard::SseLimits;
pub use http::{check_url, install_crypto_provider};
pub use naming::{NameTable, NameWarning, public_name_for, sanitize_name_part};
pub use prompt_args::{PromptArgsError, parse_prompt_arguments};
pub use result::{
    ConversionContext, ConvertError, ConvertedResult, DEFAULT_INLINE_LIMIT_BYTES,
    STRUCTURED_CONTENT_LABEL, convert_tool_result,
};
pub use runtime::{ListEpochs, McpRuntime, ProtocolMode, RuntimeOptions, ToolListEpoch};
pub use server::{CallOptions, CallOutcome, CatalogCounts, ServerState, ServerStatus};
pub use spec::{HttpAuth, SecretString, ServerSpec, ToolFilter, TransportSpec};
pub use stderr::STDERR_LINES_KEPT;
pub use stdio::{INHERITED_ENV, child_environment};
pub use upstream::{RelayError, UpstreamEvent, UpstreamEvents};
