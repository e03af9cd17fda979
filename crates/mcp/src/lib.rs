//! warden MCP client runtime: connections, catalogues, calls and result conversion.

pub mod artifacts;
pub mod catalog;
pub mod client;
pub mod error;
pub mod guard;
pub mod http;
mod http_auth;
pub mod naming;
pub mod prompt_args;
pub mod result;
pub mod runtime;
pub mod server;
pub mod spec;
pub mod sse_legacy;
pub mod stderr;
pub mod stdio;
mod stdio_transport;
pub mod upstream;

pub use catalog::{Catalog, McpTool, PAGE_LIMIT, ResourceRow, ToolIdentity, ToolSet};
pub use client::{
    ElicitationHandler, ElicitationKind, ElicitationRequest, ElicitationResponse, ListKind,
    Progress, SamplingAnswer, SamplingHandler, SamplingRequest, SamplingRole, SamplingTurn,
};
pub use error::{CallError, ConnectError, FailureKind, McpError};
pub use guard::SseLimits;
pub use prompt_args::{PromptArgsError, parse_prompt_arguments};
pub use runtime::{ListEpochs, McpRuntime, ProtocolMode, RuntimeOptions};
pub use server::{CallOptions, CallOutcome, CatalogCounts, ServerState, ServerStatus};
pub use spec::{HttpAuth, SecretString, ServerSpec, ToolFilter, TransportSpec};
pub use upstream::{RelayError, UpstreamEvent, UpstreamEvents};
