//! The answers `warden tool` prints, computed from a session host. The bridge serves them and
//! the standalone `warden tool` calls them directly, so both modes print the same thing; every
//! call goes through [`Host::call`] with source `tool-cli`.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_host::{Host, LIST_RESOURCES, READ_RESOURCE, SearchScope, VisibleTool, search_limit};
use warden_policy::{CallSurface, GateOutcome};

use crate::protocol::{CallRequest, CallView, SearchView, ServerRow, ToolView};

/// Why a view could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ViewError {
    pub kind: ViewErrorKind,
    pub message: String,
    /// The last stderr lines of a failed stdio server.
    pub stderr_tail: Vec<String>,
}

/// The kind of a [`ViewError`] (the bridge maps it to an HTTP status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewErrorKind {
    /// The request itself is wrong (no such tool, bad arguments).
    BadRequest,
    /// The server is idle, failed or unreachable.
    Unavailable,
}

impl ViewError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            kind: ViewErrorKind::BadRequest,
            message: message.into(),
            stderr_tail: Vec::new(),
        }
    }

    pub fn unavailable(message: impl Into<String>, stderr_tail: Vec<String>) -> Self {
        Self {
            kind: ViewErrorKind::Unavailable,
            message: message.into(),
            stderr_tail,
        }
    }
}

/// Every configured server: the session's, then the idle ones with their reason.
pub fn servers(host: &Host) -> Vec<ServerRow> {
    let mut rows: Vec<ServerRow> = host
        .servers()
        .status()
        .into_iter()
        .map(|status| ServerRow {
            name: status.name,
            transport: Some(status.transport.to_owned()),
            state: status.state.label().to_owned(),
            deferred: status.deferred,
            reason: None,
        })
        .collect();
    rows.extend(host.idle_servers().iter().map(|idle| ServerRow {
        name: idle.name.clone(),
        transport: None,
        state: "idle".to_owned(),
        deferred: None,
        reason: Some(idle.reason.clone()),
    }));
    rows
}

/// Whether the session has a server by this name (a server may shadow a verb like `search`).
pub fn has_server(host: &Host, name: &str) -> bool {
    host.servers().names().iter().any(|known| known == name)
        || host.idle_servers().iter().any(|idle| idle.name == name)
}

/// Connects `server` and returns its visible tools.
async fn visible_tools(host: &Host, server: &str) -> Result<Vec<VisibleTool>, ViewError> {
    if let Some(idle) = host.idle_servers().iter().find(|idle| idle.name == server) {
        return Err(ViewError::unavailable(
            format!("MCP {}: not started: {}", idle.name, idle.reason),
            Vec::new(),
        ));
    }
    host.server_tools(server).await.map_err(|error| {
        // A name that is not configured is a wrong request, not a server that failed.
        if error.kind() == warden_mcp::FailureKind::UnknownServer {
            return ViewError::bad_request(error.to_string());
        }
        let stderr_tail = host
            .servers()
            .server_status(server)
            .map(|status| status.stderr_tail)
            .unwrap_or_default();
        ViewError::unavailable(error.to_string(), stderr_tail)
    })
}

/// One server's tools as the gate shows them.
pub async fn tools(host: &Host, server: &str) -> Result<Vec<ToolView>, ViewError> {
    Ok(visible_tools(host, server)
        .await?
        .iter()
        .map(tool_view)
        .collect())
}

fn tool_view(visible: &VisibleTool) -> ToolView {
    let definition = &visible.tool.definition;
    ToolView {
        name: visible.tool.identity.tool.clone(),
        public_name: visible.descriptor.public_name.clone(),
        classes: visible.descriptor.classes().to_names(),
        description: definition.description.as_deref().map(str::to_owned),
        annotations: serde_json::to_value(&definition.annotations).unwrap_or(Value::Null),
        input_schema: Value::Object((*definition.input_schema).clone()),
        output_schema: definition
            .output_schema
            .as_ref()
            .map(|schema| Value::Object((**schema).clone())),
    }
}

/// The tool named `tool` among `tools`, or why it is not there.
pub fn find_tool(tools: Vec<ToolView>, server: &str, tool: &str) -> Result<ToolView, ViewError> {
    let names: Vec<String> = tools.iter().map(|view| view.name.clone()).collect();
    tools
        .into_iter()
        .find(|view| view.name == tool)
        .ok_or_else(|| {
            let candidates: Vec<&str> = names.iter().map(String::as_str).collect();
            let near = warden_config::nearest(tool, &candidates)
                .map(|near| format!("did you mean `{near}`? "))
                .unwrap_or_default();
            ViewError::bad_request(format!(
                "MCP {server}: no tool `{tool}` is available (it is not published, filtered out, \
                 or hidden by policy); {near}list them with `warden tool {server}`"
            ))
        })
}

/// One call through the gate with source `tool-cli`.
pub async fn call(
    host: &Host,
    request: CallRequest,
    cancel: CancellationToken,
) -> Result<CallView, ViewError> {
    if !request.arguments.is_object() {
        return Err(ViewError::bad_request(
            "the arguments must be a JSON object, like '{\"key\": \"value\"}'",
        ));
    }
    // Record the server's catalogue so the name resolves; an unknown tool still goes to the
    // gate, which answers "unknown tool" and audits it without contacting the server.
    visible_tools(host, &request.server).await?;
    let public_name = host
        .public_name(&request.server, &request.tool)
        .unwrap_or_else(|| warden_mcp::public_name_for(&request.server, &request.tool));
    let outcome = host
        .call(
            CallSurface::ToolCli,
            &public_name,
            request.arguments,
            cancel,
        )
        .await;
    Ok(call_view(&outcome))
}

/// What `warden tool … --json` prints for a call.
pub fn call_view(outcome: &GateOutcome) -> CallView {
    CallView {
        public_name: outcome.public_name.clone(),
        decision: outcome.decision.as_str().to_owned(),
        layer: outcome.layer.as_str().to_owned(),
        reason: outcome.reason.clone(),
        is_error: outcome.is_error(),
        text: outcome.model_text(),
        result: outcome
            .output
            .as_ref()
            .and_then(|output| output.content.clone()),
    }
}

/// Ranks every server's tools (deferred ones included) against `query`.
pub async fn search(host: &Host, query: &str, limit: usize) -> Result<SearchView, ViewError> {
    if query.trim().is_empty() {
        return Err(ViewError::bad_request(
            "give a query: warden tool search \"create an issue\"",
        ));
    }
    let limit = search_limit(u64::try_from(limit).ok());
    let search = host
        .search_tools(SearchScope::Everything, query, limit)
        .await;
    Ok(SearchView {
        hits: serde_json::to_value(&search.hits).unwrap_or(Value::Null),
        rendered: search.hits.iter().map(|hit| hit.render()).collect(),
        failures: search.failures,
    })
}

/// Lists advertised resources through the gate (`list_mcp_resources`).
pub async fn list_resources(
    host: &Host,
    server: Option<&str>,
    cancel: CancellationToken,
) -> CallView {
    let arguments = match server {
        Some(server) => json!({ "server": server }),
        None => json!({}),
    };
    call_view(
        &host
            .call(CallSurface::ToolCli, LIST_RESOURCES, arguments, cancel)
            .await,
    )
}

/// Reads one resource through the gate (`read_mcp_resource`, audited as a resource read).
pub async fn read_resource(
    host: &Host,
    server: &str,
    uri: &str,
    cancel: CancellationToken,
) -> CallView {
    call_view(
        &host
            .call(
                CallSurface::ToolCli,
                READ_RESOURCE,
                json!({ "server": server, "uri": uri }),
                cancel,
            )
            .await,
    )
}

/// Resource templates of one server, or of every non-deferred server (failures skipped).
pub async fn resource_templates(host: &Host, server: Option<&str>) -> Result<Value, ViewError> {
    let targets: Vec<String> = match server {
        Some(server) => vec![server.to_owned()],
        None => host
            .servers()
            .status()
            .into_iter()
            .filter(|status| status.deferred.is_none())
            .map(|status| status.name)
            .collect(),
    };
    let fetched = futures::future::join_all(
        targets
            .iter()
            .map(|name| async move { host.servers().resource_templates(name).await }),
    )
    .await;
    let mut rows = Vec::new();
    for (name, result) in targets.iter().zip(fetched) {
        match result {
            Ok(templates) => rows.extend(templates.iter().map(|template| {
                let mut row = json!({ "server": name });
                if let (Some(row), Ok(Value::Object(fields))) =
                    (row.as_object_mut(), serde_json::to_value(template))
                {
                    row.extend(fields);
                }
                row
            })),
            Err(failure) if server.is_some() => {
                return Err(ViewError::unavailable(failure.to_string(), Vec::new()));
            }
            Err(_) => {}
        }
    }
    Ok(Value::Array(rows))
}
