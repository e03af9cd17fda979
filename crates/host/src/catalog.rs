//! The session's catalogue and dispatcher as the gate sees them: host tools beside MCP tools,
//! each call routed by its identity's source.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_policy::{
    BoxFuture, CallReach, Catalog, DispatchCall, DispatchError, Dispatcher, ServerPolicy,
    ToolAnnotations, ToolDescriptor, ToolIdentity, ToolOutput, ToolSource,
};

use crate::Host;
use crate::dispatch::McpDispatcher;
use crate::index::ToolIndex;
use crate::tools::{HostTool, Invocation};

/// Host tools by name.
pub type HostTools = BTreeMap<String, Arc<dyn HostTool>>;

/// Resolves host tools by name and MCP tools through the index.
pub struct SessionCatalog {
    pub host_tools: Arc<HostTools>,
    pub index: Arc<ToolIndex>,
}

/// The gate's descriptor of a host tool.
pub fn host_tool_descriptor(tool: &dyn HostTool) -> ToolDescriptor {
    ToolDescriptor {
        identity: ToolIdentity::host(tool.source(), tool.name()),
        public_name: tool.name().to_owned(),
        input_schema: Arc::new(tool.input_schema()),
        annotations: ToolAnnotations::default(),
        declared_classes: Some(tool.classes()),
        server_policy: ServerPolicy::default(),
        trust_annotations: true,
        required_permission: tool.required_permission().map(str::to_owned),
        effect: tool.effect(),
        requires_approval: tool.requires_approval(),
        timeout: tool.timeout(),
        kind: tool.kind(),
        surfaces: tool.surfaces(),
        audit_required: tool.requires_audit(),
    }
}

impl Catalog for SessionCatalog {
    fn resolve(&self, public_name: &str) -> Option<ToolDescriptor> {
        match self.host_tools.get(public_name) {
            Some(tool) => Some(host_tool_descriptor(tool.as_ref())),
            None => self.index.resolve(public_name),
        }
    }

    fn explain_unresolved(&self, public_name: &str) -> Option<String> {
        self.index.explain_unresolved(public_name)
    }

    fn assess(&self, descriptor: &ToolDescriptor, arguments: &Value) -> CallReach {
        match &descriptor.identity.source {
            ToolSource::Builtin | ToolSource::Code | ToolSource::Client => self
                .host_tools
                .get(&descriptor.identity.tool)
                .map(|tool| tool.assess(arguments))
                .unwrap_or_default(),
            ToolSource::Mcp { .. } => CallReach::default(),
        }
    }
}

/// Sends host-tool calls to their code (with the host they run in) and MCP calls to the runtime.
pub struct SessionDispatcher {
    pub host_tools: Arc<HostTools>,
    pub mcp: McpDispatcher,
    /// The host this dispatcher belongs to: a call in flight holds it, so it is there for
    /// every dispatch but one racing the host's own drop.
    pub host: Weak<Host>,
}

impl Dispatcher for SessionDispatcher {
    fn dispatch<'a>(
        &'a self,
        call: DispatchCall,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        match &call.descriptor.identity.source {
            ToolSource::Builtin | ToolSource::Code | ToolSource::Client => {
                let tool = self.host_tools.get(&call.descriptor.identity.tool);
                match (tool, self.host.upgrade()) {
                    (Some(tool), Some(host)) => tool.execute(Invocation {
                        admission: call.admission,
                        host,
                        surface: call.surface,
                        caller: call.caller,
                        tenant: call.tenant,
                        scope: call.scope,
                        arguments: call.arguments,
                        progress: call.progress,
                        cancel,
                    }),
                    (None, _) => Box::pin(async move {
                        Err(DispatchError::new(format!(
                            "no built-in tool named {}",
                            call.descriptor.identity.tool
                        )))
                    }),
                    (Some(_), None) => {
                        Box::pin(async move { Err(DispatchError::new("the session has closed")) })
                    }
                }
            }
            ToolSource::Mcp { .. } => self.mcp.dispatch(call, cancel),
        }
    }
}
