//! Host tools: tools defined in code (never by config) that the gate resolves beside MCP tools,
//! all through [`HostTool`] — the resource and prompt tools here, built as [`CodeTool`]s like
//! warden's other tools and an embedding application's.

use std::sync::Arc;
use std::time::Duration;

use crate::dispatch::{
    CallRelay, RelayedAnswer, convert_off_thread, current_relay, input_required_output,
};
use rmcp::model::{
    CallToolResult, ClientRequest, ContentBlock, GetPromptRequest, GetPromptRequestParams,
    ServerResult,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_mcp::ArtifactStore;
use warden_mcp::McpRuntime;
use warden_mcp::RelayError;
use warden_policy::{
    BoxFuture, CallKind, CallReach, CallSurface, CapabilityClass, CapabilitySet, DispatchError,
    ProgressSender, SurfaceSet, ToolOutput, ToolSource,
};

use crate::{CodeTool, Host};

/// A tool implemented by warden itself. Its classes are declared in code for the gate.
pub trait HostTool: Send + Sync {
    /// The model-visible name (no `mcp__` prefix).
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// The JSON Schema of its arguments.
    fn input_schema(&self) -> Value;
    /// The capability classes the gate uses.
    fn classes(&self) -> CapabilitySet;
    /// Whose code it is, as the audit names it: warden's own (`builtin`), an embedding
    /// application's (`code`), or a client-side tool's (`client`).
    fn source(&self) -> ToolSource {
        ToolSource::Builtin
    }
    /// What a call of it does, for the audit and the external authorizer (a resource read, a
    /// prompt get…); a plain tool call unless it says otherwise.
    fn kind(&self) -> CallKind {
        CallKind::Tool
    }
    /// The surfaces that may call it. To any other it does not resolve: the sampling answer
    /// serves only a server's request, a prompt only the person who picks it.
    fn surfaces(&self) -> SurfaceSet {
        SurfaceSet::CALLERS
    }
    /// The one MCP server a call with `arguments` reaches on the caller's behalf, if any: the
    /// audit, hooks and the external authorizer name it as the call's server.
    fn subject_server(&self, _arguments: &Value) -> Option<String> {
        None
    }
    /// What a call with these (validated) arguments reaches — a path outside the workspace, a
    /// protected path, classes the call adds — for the gate to weigh before approval.
    fn assess(&self, _arguments: &Value) -> CallReach {
        CallReach::default()
    }
    /// Whether a call runs only once its intent is on record in the audit trail (a skill
    /// script), whatever `[audit] required` says.
    fn requires_audit(&self) -> bool {
        false
    }
    /// The effect class its author declared, for the audit and approvers (a tool an embedding
    /// application defined, see [`crate::CodeTool`]); none by default.
    fn effect(&self) -> Option<CapabilityClass> {
        None
    }
    /// The permission a call requires, for the application's authorization handler.
    fn required_permission(&self) -> Option<&str> {
        None
    }
    /// Its execution timeout (None: the gate's default for host tools).
    fn timeout(&self) -> Option<Duration> {
        None
    }
    /// Whether the gate asks before every call, whatever the mode says.
    fn requires_approval(&self) -> bool {
        false
    }
    /// Whether the model's tool list offers it now (it stays callable through the gate either
    /// way): the skill tools, say, only once there is a skill to load.
    fn offered(&self) -> bool {
        true
    }
    /// Runs one admitted call.
    fn execute<'a>(
        &'a self,
        invocation: Invocation,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>>;
}

/// One admitted call of a host tool: the session's host (to reach other tools through the
/// gate, the catalogues, the skills), the validated arguments, where progress goes, and the
/// cancellation that stops it (the caller's, or the gate's timeout).
pub struct Invocation {
    /// The gate's proof that it admitted the call: an `Invocation` exists only for a call the
    /// gate let through, so no code holding a tool can run it around the gate.
    ///
    /// ```compile_fail
    /// fn run_around_the_gate(host: std::sync::Arc<warden_host::Host>) -> warden_host::Invocation {
    ///     warden_host::Invocation {
    ///         admission: warden_policy::Admission(()),
    ///         host,
    ///         surface: warden_policy::CallSurface::Agent,
    ///         caller: None,
    ///         tenant: None,
    ///         scope: String::new(),
    ///         arguments: serde_json::Value::Null,
    ///         progress: None,
    ///         cancel: Default::default(),
    ///     }
    /// }
    /// ```
    pub admission: warden_policy::Admission,
    pub host: Arc<Host>,
    /// The surface that made the call.
    pub surface: CallSurface,
    /// Who within the surface, if known.
    pub caller: Option<String>,
    /// The tenant the call belongs to, if the surface knows one.
    pub tenant: Option<String>,
    /// Where the call's approvals and grants are remembered (the session, or a serve client).
    pub scope: String,
    pub arguments: Value,
    pub progress: Option<ProgressSender>,
    pub cancel: CancellationToken,
}

/// The name of the tool that lists MCP resources.
pub const LIST_RESOURCES: &str = "list_mcp_resources";
/// The name of the tool that reads one MCP resource.
pub const READ_RESOURCE: &str = "read_mcp_resource";

/// The name of the tool through which a surface lists one server's prompts (never offered to
/// the model: a person picks prompts).
pub const LIST_PROMPTS: &str = "list_mcp_prompts";

/// The name of the tool through which every surface gets an MCP prompt.
pub const GET_PROMPT: &str = "get_mcp_prompt";

/// The resource tools and the prompt tools over `runtime`.
pub fn resource_tools(runtime: &McpRuntime, artifacts: &ArtifactStore) -> Vec<Arc<dyn HostTool>> {
    vec![
        Arc::new(list_resources(runtime.clone())),
        Arc::new(read_resource(runtime.clone(), artifacts.clone())),
        Arc::new(get_prompt(runtime.clone())),
        Arc::new(list_prompts(runtime.clone())),
    ]
}

/// `list_mcp_prompts {server}`: one server's prompts (never offered to the model).
fn list_prompts(runtime: McpRuntime) -> CodeTool {
    CodeTool::builtin(
        LIST_PROMPTS,
        "Lists the prompts one MCP server offers, with their arguments.",
        CapabilitySet::READ_ONLY,
        move |ListPromptsArguments { server }, _| {
            let runtime = runtime.clone();
            async move {
                let prompts = runtime.prompts(&server).await.map_err(dispatch_error)?;
                let names: Vec<&str> = prompts.iter().map(|prompt| prompt.name.as_str()).collect();
                let text = if names.is_empty() {
                    format!("{server} offers no prompts.")
                } else {
                    names.join("\n")
                };
                let mut output = ToolOutput::text(text);
                output.content = Some(json!({ "prompts": prompts }));
                Ok(output)
            }
        },
    )
    .subject_server_from(server_argument)
    .offered_when(|| false)
}

/// `get_mcp_prompt {server, name, arguments?}`: one prompt's messages. Prompts are chosen by the
/// user (a slash command, `warden mcp prompt`, a gateway client) — MCP's rule — so only the user
/// and gateway surfaces may call it and the model's tool list never offers it; it exists so that
/// getting a prompt, which reaches a server with arguments, passes the gate and is audited
/// (source `prompt-get`) like everything else.
fn get_prompt(runtime: McpRuntime) -> CodeTool {
    CodeTool::builtin(
        GET_PROMPT,
        "Gets one prompt an MCP server offers, with its arguments.",
        CapabilitySet::READ_ONLY,
        move |arguments: GetPromptArguments, _| {
            let runtime = runtime.clone();
            async move {
                let GetPromptArguments {
                    server,
                    name,
                    arguments,
                } = arguments;
                if let Some(relay) =
                    current_relay().filter(|relay| relay.request().pass_input_required)
                {
                    return relay_prompt(&runtime, &relay, &server, &name, arguments).await;
                }
                let result = runtime
                    .get_prompt(&server, &name, arguments)
                    .await
                    .map_err(dispatch_error)?;
                prompt_output(&result)
            }
        },
    )
    .subject_server_from(server_argument)
    .call_kind(CallKind::PromptGet)
    .only_for(SurfaceSet::of(&[CallSurface::User, CallSurface::Gateway]))
    .offered_when(|| false)
}

/// A relaying surface's prompt get (`warden serve`, stateless passthrough): the request goes
/// to the server as the client would have sent it, and the server's answer as it was sent —
/// a prompt, an `input_required` result for the client to answer, or its JSON-RPC error —
/// goes to the relay.
async fn relay_prompt(
    runtime: &McpRuntime,
    relay: &CallRelay,
    server: &str,
    name: &str,
    arguments: std::collections::BTreeMap<String, String>,
) -> Result<ToolOutput, DispatchError> {
    let mut params = GetPromptRequestParams::new(name);
    params.arguments = Some(
        arguments
            .into_iter()
            .map(|(key, value)| (key, Value::String(value)))
            .collect(),
    );
    params.input_responses = relay.request().input_responses.clone();
    params.request_state = relay.request().request_state.clone();
    let answer = runtime
        .relay_request(
            server,
            ClientRequest::GetPromptRequest(GetPromptRequest::new(params)),
            relay.request().meta.clone(),
        )
        .await;
    match answer {
        Ok(ServerResult::GetPromptResult(result)) => {
            let output = prompt_output(&result);
            relay.put(RelayedAnswer::Prompt(result));
            output
        }
        Ok(ServerResult::InputRequiredResult(input)) => {
            let output = input_required_output(&input);
            relay.put(RelayedAnswer::InputRequired(input));
            Ok(output)
        }
        Ok(_other) => Err(DispatchError::new(format!(
            "MCP {server}: answered prompts/get with something that is not a prompt"
        ))),
        Err(RelayError::Rpc(error)) => {
            let message = format!(
                "MCP {server}: prompt \"{name}\" failed: {} (JSON-RPC error {})",
                error.message, error.code.0
            );
            relay.put(RelayedAnswer::Error(error));
            Err(DispatchError::new(message))
        }
        Err(RelayError::Failed(error)) => Err(dispatch_error(error)),
    }
}

/// A prompt's messages as `(role, text)`: `user` or `assistant`, and the text of a text block or
/// the JSON of any other block. How every surface shows a prompt.
pub fn prompt_messages(result: &rmcp::model::GetPromptResult) -> Vec<(&'static str, String)> {
    result
        .messages
        .iter()
        .map(|message| {
            let role = match message.role {
                rmcp::model::Role::User => "user",
                rmcp::model::Role::Assistant => "assistant",
            };
            let text = match message.content.as_text() {
                Some(text) => text.text.clone(),
                None => serde_json::to_string(&message.content).unwrap_or_default(),
            };
            (role, text)
        })
        .collect()
}

/// A prompt as the gate's output: its messages as `[role] text` lines, and the whole result as
/// the structured content the surfaces read back.
fn prompt_output(result: &rmcp::model::GetPromptResult) -> Result<ToolOutput, DispatchError> {
    let text = prompt_messages(result)
        .into_iter()
        .map(|(role, text)| format!("[{role}] {text}"))
        .collect::<Vec<_>>()
        .join("\n");
    let content = serde_json::to_value(result)
        .map_err(|error| DispatchError::new(format!("encoding the prompt: {error}")))?;
    Ok(ToolOutput {
        size_bytes: content.to_string().len() as u64,
        text,
        is_error: false,
        content: Some(content),
        confinement: None,
    })
}

/// `get_mcp_prompt`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetPromptArguments {
    /// The server that offers it
    server: String,
    /// The prompt's name
    name: String,
    /// The prompt's arguments, by name
    #[serde(default)]
    arguments: std::collections::BTreeMap<String, String>,
}

/// `list_mcp_resources`' arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListResourcesArguments {
    /// Only this server's resources
    #[serde(default)]
    server: Option<String>,
}

/// `list_mcp_prompts`' arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ListPromptsArguments {
    /// The server whose prompts to list
    server: String,
}

/// `read_mcp_resource`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ReadResourceArguments {
    /// The server that advertised it
    server: String,
    /// The resource URI
    uri: String,
}

/// `list_mcp_resources {server?}`: rows of server, URI, name and MIME type.
fn list_resources(runtime: McpRuntime) -> CodeTool {
    CodeTool::builtin(
        LIST_RESOURCES,
        "Lists the resources MCP servers advertise (server, URI, name, MIME type). Read one with read_mcp_resource.",
        CapabilitySet::READ_ONLY,
        move |ListResourcesArguments { server }, _| {
            let runtime = runtime.clone();
            async move {
                let rows = runtime
                    .resources(server.as_deref())
                    .await
                    .map_err(dispatch_error)?;
                resources_output(&rows)
            }
        },
    )
    .subject_server_from(server_argument)
}

/// The advertised resources (skills' own left out) as the gate's output.
fn resources_output(rows: &[warden_mcp::ResourceRow]) -> Result<ToolOutput, DispatchError> {
    let rows: Vec<&warden_mcp::ResourceRow> = rows
        .iter()
        .filter(|row| {
            !row.resource
                .uri
                .to_ascii_lowercase()
                .starts_with("skill://")
        })
        .collect();
    let summaries: Vec<Value> = rows
        .iter()
        .map(|row| {
            json!({
                "server": row.server,
                "uri": row.resource.uri,
                "name": row.resource.name,
                "mimeType": row.resource.mime_type,
            })
        })
        .collect();
    let text = if summaries.is_empty() {
        "No resources are advertised.".to_owned()
    } else {
        serde_json::to_string_pretty(&summaries).map_err(dispatch_error)?
    };
    // The whole resources as their servers sent them, for a surface that relays them.
    let full: Vec<Value> = rows
        .iter()
        .map(|row| json!({"server": row.server, "resource": row.resource}))
        .collect();
    let mut output = ToolOutput::text(text);
    output.content = Some(json!({ "resources": full }));
    Ok(output)
}

/// `read_mcp_resource {server, uri}`: reads a URI the server advertised.
fn read_resource(runtime: McpRuntime, artifacts: ArtifactStore) -> CodeTool {
    CodeTool::builtin(
        READ_RESOURCE,
        "Reads one resource an MCP server advertised (listed, or matching one of its URI templates).",
        CapabilitySet::READ_ONLY,
        move |ReadResourceArguments { server, uri }, _| {
            let (runtime, artifacts) = (runtime.clone(), artifacts.clone());
            async move {
                let read = runtime
                    .read_resource(&server, &uri)
                    .await
                    .map_err(dispatch_error)?;
                // Shown like an embedded resource of a tool result: provenance, and large or
                // binary contents as artifacts.
                let result = CallToolResult::success(
                    read.contents
                        .into_iter()
                        .map(ContentBlock::resource)
                        .collect(),
                );
                convert_off_thread(result, server, READ_RESOURCE.to_owned(), artifacts).await
            }
        },
    )
    .subject_server_from(server_argument)
    .call_kind(CallKind::ResourceRead)
}

/// A failure the gate reports as the call's.
fn dispatch_error(error: impl std::fmt::Display) -> DispatchError {
    DispatchError::new(error.to_string())
}

/// The `server` argument of a tool that reaches one named MCP server.
fn server_argument(arguments: &Value) -> Option<String> {
    arguments
        .get("server")
        .and_then(Value::as_str)
        .map(str::to_owned)
}
