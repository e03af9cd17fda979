//! Progressive exposure: a small fixed set of tools — `search_tools` (BM25 over every admitted
//! tool, deferred servers included), `describe_tool` (one tool's full schema) and `call_tool`
//! (a call through the gate) — instead of every schema up front.

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, model::JsonObject};
use serde_json::{Value, json};
use warden_host::{
    CALL_TOOL, CallToolArguments, DESCRIBE_TOOL, DescribeToolArguments, SEARCH_TOOLS,
    SearchArguments, SearchScope, search_schema,
};
use warden_mcp::McpTool;

use crate::handler::GatewayHandler;

fn schema(value: Value) -> std::sync::Arc<JsonObject> {
    match value {
        Value::Object(map) => std::sync::Arc::new(map),
        _ => std::sync::Arc::new(JsonObject::new()),
    }
}

/// The fixed tool set, then the host tools the gateway publishes beside it (code mode).
pub(crate) fn tools(handler: &GatewayHandler) -> Vec<Tool> {
    let host = handler.gateway().host();
    let mut tools = fixed_tools();
    for descriptor in host.host_tools() {
        if !handler
            .gateway()
            .progressive_host_tools
            .contains(&descriptor.public_name)
        {
            continue;
        }
        let description = host
            .host_tool_description(&descriptor.public_name)
            .unwrap_or_default();
        tools.push(Tool::new(
            descriptor.public_name.clone(),
            description,
            schema(Value::clone(&descriptor.input_schema)),
        ));
    }
    tools
}

fn fixed_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            SEARCH_TOOLS,
            "Searches every tool warden can reach (names, descriptions, parameters) and returns \
             the best matches with their names and parameters. Then describe_tool for the full \
             schema, or call_tool to run one.",
            schema(search_schema()),
        ),
        Tool::new(
            DESCRIBE_TOOL,
            "The full definition of one tool (description and input schema), by the name \
             search_tools returned.",
            schema(DescribeToolArguments::schema()),
        ),
        Tool::new(
            CALL_TOOL,
            "Calls one tool by the name search_tools returned, with its arguments; the call \
             goes through warden's policy and is audited.",
            schema(CallToolArguments::schema()),
        ),
    ]
}

/// Every tool reachable from this gateway with its public name: admitted tools of active
/// servers, and deferred servers' tools (loaded when called).
async fn reachable(handler: &GatewayHandler) -> (Vec<(McpTool, String)>, Vec<String>) {
    let (tools, failures) = handler.gateway().host().reachable_tools().await;
    handler.gateway().remember_servers(
        tools
            .iter()
            .map(|(tool, public)| (public, &tool.identity.server)),
    );
    (tools, failures.iter().map(ToString::to_string).collect())
}

fn text_result(text: String, is_error: bool) -> CallToolResult {
    let blocks = vec![ContentBlock::text(text)];
    let mut result = if is_error {
        CallToolResult::error(blocks)
    } else {
        CallToolResult::success(blocks)
    };
    result.result_type = Some(rmcp::model::ResultType::COMPLETE);
    result
}

/// Runs one of the fixed tools.
pub(crate) async fn call(
    handler: &GatewayHandler,
    name: &str,
    arguments: Value,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    match name {
        SEARCH_TOOLS => {
            let request = match SearchArguments::parse(arguments) {
                Ok(request) => request,
                Err(message) => return text_result(message, true),
            };
            let (query, limit) = (request.query.as_str(), request.limit());
            let search = handler
                .gateway()
                .host()
                .search_tools(SearchScope::Everything, query, limit)
                .await;
            handler.gateway().remember_servers(
                search
                    .candidates
                    .iter()
                    .map(|(tool, public)| (public, &tool.identity.server)),
            );
            text_result(
                search.render(&format!("No tool matches \"{query}\"."), ""),
                false,
            )
        }
        DESCRIBE_TOOL => {
            let wanted = match DescribeToolArguments::parse(arguments) {
                Ok(request) => request.name,
                Err(message) => return text_result(message, true),
            };
            let wanted = wanted.as_str();
            let (tools, _) = reachable(handler).await;
            match tools.into_iter().find(|(_, public)| public == wanted) {
                Some((tool, public)) => text_result(
                    json!({
                        "name": public,
                        "server": tool.identity.server,
                        "description": tool.definition.description,
                        "inputSchema": tool.definition.input_schema,
                        "annotations": tool.definition.annotations,
                    })
                    .to_string(),
                    false,
                ),
                None => text_result(
                    format!("No tool named \"{wanted}\"; search_tools finds names."),
                    true,
                ),
            }
        }
        CALL_TOOL => {
            let (wanted, tool_arguments) = match CallToolArguments::parse(arguments) {
                Ok(request) => request.into_call(),
                Err(message) => return text_result(message, true),
            };
            let host = handler.gateway().host();
            // A deferred server's tool becomes callable once named here.
            let (active, _) = host.all_tools().await;
            handler.gateway().remember_servers(
                active
                    .iter()
                    .map(|tool| (&tool.descriptor.public_name, &tool.tool.identity.server)),
            );
            if !active
                .iter()
                .any(|visible| visible.descriptor.public_name == wanted)
            {
                let (deferred, _) = host.deferred_tools().await;
                if let Some((tool, public)) = deferred.iter().find(|(_, public)| public == &wanted)
                {
                    host.load_tools(&tool.identity.server, std::slice::from_ref(tool));
                    handler
                        .gateway()
                        .remember_servers(std::iter::once((public, &tool.identity.server)));
                }
            }
            handler
                .gated_call(&wanted, tool_arguments, context)
                .await
                .call_result()
        }
        other
            if handler
                .gateway()
                .progressive_host_tools
                .iter()
                .any(|name| name == other) =>
        {
            handler
                .gated_call(other, arguments, context)
                .await
                .call_result()
        }
        other => text_result(
            format!(
                "unknown tool `{other}`: this server offers {SEARCH_TOOLS}, {DESCRIBE_TOOL} and {CALL_TOOL}"
            ),
            true,
        ),
    }
}
