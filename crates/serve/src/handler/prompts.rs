//! Prompts as published (flat names in the flat exposure, skills as prompts) and `prompts/get` through the gate.

use std::collections::BTreeMap;

use rmcp::model::{
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, ListPromptsResult, Prompt,
    ResultType,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Value, json};
use warden_host::{CallRelay, LIST_PROMPTS, RelayRequest, RelayedAnswer, with_relay};

use super::bridge::{BridgedRound, Finished};
use super::relay::{client_meta, is_stateless};
use super::{GatewayHandler, with_provenance};
use crate::approval::{ClientAsks, ClientChannel};

impl GatewayHandler {
    /// `prompts/list`.
    pub(super) async fn handle_list_prompts(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let mut prompts: Vec<Prompt> = Vec::new();
        for server in self.servers() {
            match self
                .gated_listing::<Prompt>(LIST_PROMPTS, &server, "prompts", context)
                .await
            {
                Ok(found) => prompts.extend(found.into_iter().map(|prompt| {
                    if self.flat() {
                        let mut prompt = with_provenance(prompt, &server);
                        prompt.name = flat_prompt_name(&server, &prompt.name);
                        prompt
                    } else {
                        prompt
                    }
                })),
                Err(error) => tracing::warn!("listing the prompts of {server}: {error}"),
            }
        }
        for skill in self.skills() {
            let mut prompt = Prompt::new(
                skill.name.clone(),
                Some(format!("[skill] {}", skill.description)),
                None,
            );
            prompt.title = Some(format!("Skill: {}", skill.name));
            prompts.push(prompt);
        }
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    /// `prompts/get`.
    pub(super) async fn handle_get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if self.skills().iter().any(|skill| skill.name == request.name) {
            let text = self.load_skill(&request.name, &context).await?;
            let mut result: GetPromptResult = serde_json::from_value(json!({
                "description": format!("The skill {}", request.name),
                "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            }))
            .map_err(|error| McpError::internal_error(error.to_string(), None))?;
            result.result_type = Some(ResultType::COMPLETE);
            return Ok(GetPromptResponse::Complete(result));
        }
        let runtime = self.gateway.host.servers();
        let mut target = None;
        if self.flat() {
            'servers: for server in self.servers() {
                for prompt in runtime.prompts(&server).await.unwrap_or_default() {
                    if flat_prompt_name(&server, &prompt.name) == request.name {
                        target = Some((server.clone(), prompt.name));
                        break 'servers;
                    }
                }
            }
        } else if let Some(upstream) = self.gateway.upstream() {
            target = Some((upstream.to_owned(), request.name.clone()));
        }
        let Some((server, name)) = target else {
            return Err(McpError::invalid_params(
                format!("unknown prompt `{}`", request.name),
                None,
            ));
        };
        let arguments: BTreeMap<String, String> = request
            .arguments
            .unwrap_or_default()
            .into_iter()
            .map(|(key, value)| {
                let text = match value {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                (key, text)
            })
            .collect();
        // Through the gate like every prompt get (audited as `prompt-get`, with this client).
        if self.passthrough_upstream().is_some() && self.bridges(&context, &server).await {
            let target = format!("prompts/get {name}");
            let round = self
                .bridged_round(
                    target,
                    request.input_responses,
                    request.request_state,
                    || {
                        self.start_bridged(&context, move |handler, detached, channel| async move {
                            Finished::Prompt(
                                handler
                                    .prompt_get_through(
                                        &server,
                                        &name,
                                        arguments,
                                        &detached,
                                        ClientChannel::Bridge(channel),
                                    )
                                    .await,
                            )
                        })
                    },
                )
                .await?;
            return match round {
                BridgedRound::Asked(input) => Ok(GetPromptResponse::InputRequired(input)),
                BridgedRound::Finished(Finished::Prompt(Ok(mut result))) => {
                    result.result_type = Some(ResultType::COMPLETE);
                    Ok(GetPromptResponse::Complete(result))
                }
                BridgedRound::Finished(Finished::Prompt(Err(refused))) => {
                    Err(McpError::invalid_params(refused, None))
                }
                BridgedRound::Finished(Finished::Tool(_)) => Err(McpError::internal_error(
                    "a bridged prompt get ended as a tool call",
                    None,
                )),
            };
        }
        let mut call = self.call_context(context.ct.clone());
        call.caller = Some(self.caller(&context));
        let host = &self.gateway.host;
        if is_stateless(&context) && self.passthrough_upstream().is_some() {
            // Relayed as it is: an `input_required` result or the upstream's JSON-RPC error
            // goes back to the client unchanged.
            let relay = CallRelay::new(RelayRequest {
                pass_input_required: true,
                input_responses: request.input_responses.clone(),
                request_state: request.request_state.clone(),
                meta: Some(client_meta(&context)),
            });
            let gated = with_relay(
                relay.clone(),
                host.get_prompt(call, &server, &name, arguments),
            )
            .await;
            return match (relay.take_answer(), gated) {
                (Some(RelayedAnswer::Prompt(mut result)), _) | (None, Ok(mut result)) => {
                    result.result_type = Some(ResultType::COMPLETE);
                    Ok(GetPromptResponse::Complete(result))
                }
                (Some(RelayedAnswer::InputRequired(input)), _) => {
                    Ok(GetPromptResponse::InputRequired(input))
                }
                (Some(RelayedAnswer::Error(error)), _) => Err(error),
                (_, Err(refused)) => Err(McpError::invalid_params(refused.to_string(), None)),
                (Some(RelayedAnswer::Tool(_)), Ok(_)) => Err(McpError::internal_error(
                    format!("{server} answered prompts/get with a tool result"),
                    None,
                )),
            };
        }
        let peer = ClientChannel::Peer(context.peer.clone());
        match self
            .prompt_get_through(&server, &name, arguments, &context, peer)
            .await
        {
            Ok(mut result) => {
                result.result_type = Some(ResultType::COMPLETE);
                Ok(GetPromptResponse::Complete(result))
            }
            Err(refused) => Err(McpError::invalid_params(refused, None)),
        }
    }

    /// A prompt get through the gate, the server's questions meanwhile going to this client
    /// over `channel`.
    async fn prompt_get_through(
        &self,
        server: &str,
        name: &str,
        arguments: BTreeMap<String, String>,
        context: &RequestContext<RoleServer>,
        channel: ClientChannel,
    ) -> Result<GetPromptResult, String> {
        let mut call = self.call_context(context.ct.clone());
        call.caller = Some(self.caller(context));
        let _running = self.gateway.peers.running_on(
            server,
            self.connection,
            channel,
            ClientAsks::of(context),
        );
        self.gateway
            .host
            .get_prompt(call, server, name, arguments)
            .await
            .map_err(|refused| refused.to_string())
    }
}

/// A prompt's name in flat exposure: `mcp__<server>__<prompt>`.
pub(super) fn flat_prompt_name(server: &str, prompt: &str) -> String {
    warden_mcp::public_name_for(server, prompt)
}
