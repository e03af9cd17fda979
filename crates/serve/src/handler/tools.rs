//! The tools a client sees (flat, progressive or passthrough) and `tools/call` through the gate.

use rmcp::model::{CallToolRequestParams, CallToolResponse, ListToolsResult, Tool};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;

use super::GatewayHandler;
use super::bridge::{BridgedRound, Finished};
use crate::{Exposure, progressive};

impl GatewayHandler {
    /// The published tools of this exposure.
    pub(super) async fn tools(&self) -> Vec<Tool> {
        let host = &self.gateway.host;
        match self.gateway.exposure {
            Exposure::Passthrough => {
                let Some(upstream) = self.gateway.upstream() else {
                    return Vec::new();
                };
                match host.server_tools(upstream).await {
                    Ok(tools) => tools.into_iter().map(|tool| tool.tool.definition).collect(),
                    Err(error) => {
                        tracing::warn!("listing the tools of {upstream}: {error}");
                        Vec::new()
                    }
                }
            }
            Exposure::Flat => {
                let (tools, failures) = host.all_tools().await;
                for failure in failures {
                    tracing::warn!("listing tools: {failure}");
                }
                self.gateway.remember_servers(
                    tools
                        .iter()
                        .map(|tool| (&tool.descriptor.public_name, &tool.tool.identity.server)),
                );
                tools
                    .into_iter()
                    .map(|visible| {
                        let mut definition = visible.tool.definition;
                        definition.name = visible.descriptor.public_name.into();
                        definition
                    })
                    .collect()
            }
            Exposure::Progressive => progressive::tools(self),
        }
    }

    /// The public name the gate knows for a downstream tool name.
    pub(super) async fn public_name(&self, name: &str) -> String {
        match (self.gateway.exposure, self.gateway.upstream()) {
            (Exposure::Passthrough, Some(upstream)) => {
                if let Some(public) = self.gateway.host.public_name(upstream, name) {
                    return public;
                }
                // The catalogue was not fetched yet in this process: fetch it, then resolve
                // (boxed: a large future that the common path should not carry).
                let _ = Box::pin(self.gateway.host.server_tools(upstream)).await;
                self.gateway
                    .host
                    .public_name(upstream, name)
                    .unwrap_or_else(|| warden_mcp::public_name_for(upstream, name))
            }
            _ => name.to_owned(),
        }
    }

    /// `tools/list`: the exposure's tools, remembered for `get_tool`.
    pub(super) async fn handle_list_tools(&self) -> Result<ListToolsResult, McpError> {
        let tools = self.tools().await;
        self.gateway.remember_tools(&tools);
        Ok(ListToolsResult::with_all_items(tools))
    }

    /// `tools/call` through the gate (progressive calls go to its meta-tools).
    pub(super) async fn handle_call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let arguments = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        if self.gateway.exposure == Exposure::Progressive {
            let result = Box::pin(progressive::call(
                self,
                request.name.as_ref(),
                arguments,
                &context,
            ))
            .await;
            return Ok(CallToolResponse::Complete(result));
        }
        let public_name = self.public_name(request.name.as_ref()).await;
        if let Some(upstream) = self.passthrough_upstream()
            && self.bridges(&context, upstream).await
        {
            let relay = self.relay_request(&context, None, None);
            let name = public_name.clone();
            let round = Box::pin(self.bridged_round(
                format!("tools/call {public_name}"),
                request.input_responses,
                request.request_state,
                || {
                    self.start_bridged(&context, move |handler, detached, channel| async move {
                        Finished::Tool(Box::new(
                            handler
                                .gated_call_through(
                                    &name,
                                    arguments,
                                    &detached,
                                    relay,
                                    Some(channel),
                                )
                                .await,
                        ))
                    })
                },
            ))
            .await?;
            return match round {
                BridgedRound::Asked(input) => Ok(CallToolResponse::InputRequired(input)),
                BridgedRound::Finished(Finished::Tool(gated)) => gated.response(),
                BridgedRound::Finished(Finished::Prompt(_)) => Err(McpError::internal_error(
                    "a bridged tool call ended as a prompt",
                    None,
                )),
            };
        }
        let relay = self.relay_request(
            &context,
            request.input_responses.clone(),
            request.request_state.clone(),
        );
        Box::pin(self.gated_call_with(&public_name, arguments, &context, relay))
            .await
            .response()
    }
}
