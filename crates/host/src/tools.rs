//! Host tools: tools defined in code (never by config) that the gate resolves beside MCP tools —
//! the resource tools here, and the agent's built-ins plugged in through [`HostTool`].

use std::sync::Arc;

use crate::dispatch::convert_off_thread;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_mcp::McpRuntime;
use warden_mcp::artifacts::ArtifactStore;
use warden_policy::{BoxFuture, CallSource, CapabilitySet, DispatchError, ToolOutput};

/// A tool implemented by warden itself. Its classes are declared in code for the gate.
pub trait HostTool: Send + Sync {
    /// The model-visible name (no `mcp__` prefix).
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// The JSON Schema of its arguments.
    fn input_schema(&self) -> Value;
    /// The capability classes the gate uses.
    fn classes(&self) -> CapabilitySet;
    /// The audit source of calls to it when it is not the caller's own (a resource read).
    fn audit_source(&self) -> Option<CallSource> {
        None
    }
    /// Whether the model's tool list offers it now (it stays callable through the gate either
    /// way): the skill tools, say, only once there is a skill to load.
    fn offered(&self) -> bool {
        true
    }
    /// Runs one admitted call.
    fn execute<'a>(
        &'a self,
        arguments: Value,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>>;
}

/// The name of the tool that lists MCP resources.
pub const LIST_RESOURCES: &str = "list_mcp_resources";
/// The name of the tool that reads one MCP resource.
pub const READ_RESOURCE: &str = "read_mcp_resource";

/// `list_mcp_resources {server?}`: rows of server, URI, name and MIME type.
pub struct ListResources {
    runtime: McpRuntime,
}

/// `read_mcp_resource {server, uri}`: reads a URI the server advertised.
pub struct ReadResource {
    runtime: McpRuntime,
    artifacts: ArtifactStore,
}

/// The two resource tools over `runtime`.
pub fn resource_tools(runtime: &McpRuntime, artifacts: &ArtifactStore) -> Vec<Arc<dyn HostTool>> {
    vec![
        Arc::new(ListResources {
            runtime: runtime.clone(),
        }),
        Arc::new(ReadResource {
            runtime: runtime.clone(),
            artifacts: artifacts.clone(),
        }),
    ]
}

fn string_argument<'a>(arguments: &'a Value, key: &str) -> Option<&'a str> {
    arguments.get(key).and_then(Value::as_str)
}

impl HostTool for ListResources {
    fn name(&self) -> &str {
        LIST_RESOURCES
    }

    fn description(&self) -> &str {
        "Lists the resources MCP servers advertise (server, URI, name, MIME type). Read one with read_mcp_resource."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "server": {"type": "string", "description": "Only this server's resources"}
            },
            "additionalProperties": false
        })
    }

    fn classes(&self) -> CapabilitySet {
        CapabilitySet::READ_ONLY
    }

    fn execute<'a>(
        &'a self,
        arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        Box::pin(async move {
            let server = string_argument(&arguments, "server");
            let rows = self
                .runtime
                .resources(server)
                .await
                .map_err(|error| DispatchError::new(error.to_string()))?;
            let rows: Vec<Value> = rows
                .iter()
                .filter(|row| {
                    !row.resource
                        .uri
                        .to_ascii_lowercase()
                        .starts_with("skill://")
                })
                .map(|row| {
                    json!({
                        "server": row.server,
                        "uri": row.resource.uri,
                        "name": row.resource.name,
                        "mimeType": row.resource.mime_type,
                    })
                })
                .collect();
            let text = if rows.is_empty() {
                "No resources are advertised.".to_owned()
            } else {
                serde_json::to_string_pretty(&rows)
                    .map_err(|error| DispatchError::new(error.to_string()))?
            };
            Ok(ToolOutput::text(text))
        })
    }
}

impl HostTool for ReadResource {
    fn name(&self) -> &str {
        READ_RESOURCE
    }

    fn description(&self) -> &str {
        "Reads one resource an MCP server advertised (listed, or matching one of its URI templates)."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "server": {"type": "string", "description": "The server that advertised it"},
                "uri": {"type": "string", "description": "The resource URI"}
            },
            "required": ["server", "uri"],
            "additionalProperties": false
        })
    }

    fn classes(&self) -> CapabilitySet {
        CapabilitySet::READ_ONLY
    }

    fn audit_source(&self) -> Option<CallSource> {
        Some(CallSource::ResourceRead)
    }

    fn execute<'a>(
        &'a self,
        arguments: Value,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        Box::pin(async move {
            let (Some(server), Some(uri)) = (
                string_argument(&arguments, "server"),
                string_argument(&arguments, "uri"),
            ) else {
                return Err(DispatchError::new("server and uri are required"));
            };
            let read = self
                .runtime
                .read_resource(server, uri)
                .await
                .map_err(|error| DispatchError::new(error.to_string()))?;
            // Shown like an embedded resource of a tool result: provenance, and large or
            // binary contents as artifacts.
            let result = CallToolResult::success(
                read.contents
                    .into_iter()
                    .map(ContentBlock::resource)
                    .collect(),
            );
            convert_off_thread(
                result,
                server.to_owned(),
                READ_RESOURCE.to_owned(),
                self.artifacts.clone(),
            )
            .await
        })
    }
}
