//! What the gate knows about a tool: its identity, public name, schema, annotations and policy.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, Serializer};
use serde_json::Value;
use warden_vocab::{CapabilityClass, CapabilitySet};

use crate::call::{CallKind, SurfaceSet};
use crate::capability::{ToolAnnotations, classes_from_annotations, normalise_declared};

/// Where a tool comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolSource {
    /// Code in this repository.
    Builtin,
    /// Code of an application that embeds warden (a tool it registered).
    Code,
    /// A client-side tool: declared in config, answered by the service's caller.
    Client,
    /// A configured MCP server.
    Mcp {
        /// The server's config name.
        server: String,
    },
}

impl ToolSource {
    /// The server name used in audit records and hook input (`builtin` for built-ins, `code`
    /// for an embedding application's tools, `client` for client-side tools).
    pub fn server_name(&self) -> &str {
        match self {
            Self::Builtin => warden_vocab::HOST_TOOL_SOURCES[0],
            Self::Code => warden_vocab::HOST_TOOL_SOURCES[1],
            Self::Client => warden_vocab::HOST_TOOL_SOURCES[2],
            Self::Mcp { server } => server,
        }
    }

    /// Whether the tool's code is in the host (not an MCP server's).
    pub fn is_host(&self) -> bool {
        !matches!(self, Self::Mcp { .. })
    }
}

/// The raw identity of a tool: its source and its own name there.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolIdentity {
    /// Where it comes from.
    pub source: ToolSource,
    /// Its name on that source (unsanitised).
    pub tool: String,
}

impl ToolIdentity {
    /// A built-in tool's identity.
    pub fn builtin(tool: &str) -> Self {
        Self::host(ToolSource::Builtin, tool)
    }

    /// The identity of a tool whose code is in the host (`source` built-in, code or client).
    pub fn host(source: ToolSource, tool: &str) -> Self {
        Self {
            source,
            tool: tool.to_owned(),
        }
    }

    /// An MCP tool's identity.
    pub fn mcp(server: &str, tool: &str) -> Self {
        Self {
            source: ToolSource::Mcp {
                server: server.to_owned(),
            },
            tool: tool.to_owned(),
        }
    }

    /// The server name (`builtin` for built-ins).
    pub fn server(&self) -> &str {
        self.source.server_name()
    }
}

impl fmt::Display for ToolIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.server(), self.tool)
    }
}

impl Serialize for ToolIdentity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut state = serializer.serialize_struct("ToolIdentity", 2)?;
        state.serialize_field("server", self.server())?;
        state.serialize_field("tool", &self.tool)?;
        state.end()
    }
}

/// The operator's capability policy for one server.
///
/// Both levels are ceilings: a class must be admitted by the server-wide set (None = no limit)
/// *and* by the tool's own entry if it has one. Entries are keyed by the raw tool name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerPolicy {
    /// `policy.capabilities`: classes admitted for every tool of the server (None = all).
    pub capabilities: Option<CapabilitySet>,
    /// `policy.tools`: per-tool admitted classes, keyed by raw tool name.
    pub tools: BTreeMap<String, CapabilitySet>,
}

impl ServerPolicy {
    /// The classes this policy admits for `tool` (server set ∩ tool entry).
    pub fn admitted_for(&self, tool: &str) -> CapabilitySet {
        let server = self.capabilities.unwrap_or(CapabilitySet::ALL);
        let per_tool = self.tools.get(tool).copied().unwrap_or(CapabilitySet::ALL);
        server.intersection(per_tool)
    }
}

/// Everything the gate needs to know about one resolved tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDescriptor {
    /// The raw (source, tool) identity.
    pub identity: ToolIdentity,
    /// The sanitised name the model sees and patterns match (`mcp__fs__write_file`).
    pub public_name: String,
    /// The tool's JSON Schema for its arguments, shared: a catalogue hands out one allocation
    /// per tool and generation, so resolving a call copies no schema and the gate's compiled
    /// validator is found by the allocation alone.
    pub input_schema: Arc<Value>,
    /// Annotations as the server sent them.
    pub annotations: ToolAnnotations,
    /// Classes declared in code (built-ins). When present they are used instead of the
    /// annotations; an empty set fails closed to `destructive` + `external`.
    pub declared_classes: Option<CapabilitySet>,
    /// The operator's policy for the tool's server (default: no limits).
    pub server_policy: ServerPolicy,
    /// Whether annotations may relax the tool (true by default for user-scope entries).
    pub trust_annotations: bool,
    /// The permission a call requires — declared in code, or set by `[tool_settings]` — passed to
    /// the application's authorization handler and the external authorization command.
    pub required_permission: Option<String>,
    /// The effect class its author declared (a tool defined in code): recorded in the audit's
    /// `effect` column and shown to approvers; it decides nothing of its own.
    pub effect: Option<CapabilityClass>,
    /// The gate asks before every call, whatever the mode, the lists and the grants say (a
    /// remembered "allow for this session" answer still counts: a person gave it).
    pub requires_approval: bool,
    /// Execution timeout for this tool (None = the gate's default).
    pub timeout: Option<Duration>,
    /// What a call of it does (a tool call, a resource read, a sampling answer…): the audit's
    /// `kind` and the external authorizer's.
    pub kind: CallKind,
    /// The surfaces that may call it; to any other it does not resolve.
    pub surfaces: SurfaceSet,
    /// It runs only once its intent is on record (a skill script), whatever `[audit] required`
    /// says.
    pub audit_required: bool,
}

impl ToolDescriptor {
    /// The tool's capability classes (declared, or derived from annotations and trust).
    pub fn classes(&self) -> CapabilitySet {
        match self.declared_classes {
            Some(declared) => normalise_declared(declared),
            None => classes_from_annotations(&self.annotations, self.trust_annotations),
        }
    }
}
