//! Calls to a connected server: tool calls with `input_required` rounds and URL elicitations, a renewed session after a lost one, resource reads, prompt gets and custom requests.

use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, CustomRequest, GetPromptRequestParams, GetPromptResult, InputRequest,
    InputRequiredResult, InputResponses, ProgressToken, ReadResourceRequestParams,
    ReadResourceResult, RequestId, RequestMetaObject, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, RequestHandle, RoleClient};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::catalog_cache::ListWhich;
use super::failure::bounded;
use super::state::{CallOptions, CallOutcome, ServerState};
use super::{Live, ServerSlot};
use crate::catalog::ToolIdentity;
use crate::client::Progress;
use crate::direct_call::DirectCall;
use crate::error::{FailureKind, McpError};
use crate::upstream::{RelayError, relay_failure, within_own_capabilities};

/// `input_required` rounds driven per call before giving up.
pub(super) const MAX_INPUT_ROUNDS: usize = 8;

/// JSON-RPC error code of `URLElicitationRequiredError` (MCP 2025-11-25): the server did not
/// run the request; the user must first complete the URL elicitation(s) in its `data`.
pub(crate) const URL_ELICITATION_REQUIRED: i32 = -32042;

/// Retries of one call after the user completed the URL elicitations a -32042 asked for.
pub(super) const URL_ELICITATION_RETRIES: u32 = 1;

/// One URL elicitation named in the data of a -32042 error.
#[derive(Debug, Clone)]
pub(super) struct UrlElicitation {
    pub(super) url: String,
    pub(super) message: String,
}

/// A tool call sent and not answered yet: through rmcp's service loop, or written directly to a
/// stdio server's pipe.
enum Pending {
    /// Boxed: the direct call is the common one, and its future stays small.
    Rmcp(Box<RequestHandle<RoleClient>>),
    Direct(DirectCall),
}

impl Pending {
    fn id(&self) -> RequestId {
        match self {
            Self::Rmcp(handle) => handle.id.clone(),
            Self::Direct(call) => call.id(),
        }
    }

    fn progress_token(&self) -> ProgressToken {
        match self {
            Self::Rmcp(handle) => handle.progress_token.clone(),
            Self::Direct(call) => call.progress_token(),
        }
    }

    /// The answer; a direct call that times out tells the server, as rmcp does for its own.
    async fn response(
        self,
        timeout: std::time::Duration,
        peer: &Peer<RoleClient>,
    ) -> Result<ServerResult, ServiceError> {
        match self {
            Self::Rmcp(handle) => (*handle).await_response().await,
            Self::Direct(mut call) => {
                let answer = call.response(timeout).await;
                if matches!(answer, Err(ServiceError::Timeout { .. })) {
                    let _ = Box::pin(peer.notify_cancelled(CancelledNotificationParam::new(
                        Some(call.id()),
                        Some("request timeout".to_owned()),
                    )))
                    .await;
                }
                answer
            }
        }
    }
}

/// Why a tool call's request got no answer from the server.
enum ToolRequestStop {
    /// It could not be sent.
    NotSent(ServiceError),
    /// The caller cancelled it first (the server was told).
    Cancelled,
}

impl ServerSlot {
    /// One `tools/call` request on `live` — written straight to a stdio server's pipe when the
    /// connection has one, else through rmcp's service loop — and the server's answer to it
    /// (a tool result, an `input_required` result, an error) under `timeout`, its progress
    /// routed to `progress` meanwhile. Nothing in the answer is acted on here.
    async fn tool_request(
        &self,
        live: &Live,
        params: &CallToolRequestParams,
        meta: Option<RequestMetaObject>,
        timeout: std::time::Duration,
        progress: Option<tokio::sync::mpsc::Sender<Progress>>,
        cancel: &CancellationToken,
    ) -> Result<Result<ServerResult, ServiceError>, ToolRequestStop> {
        let pending = match &live.direct {
            Some(direct) => Pending::Direct(
                direct
                    .send_tool_call(params, meta)
                    .await
                    .map_err(ToolRequestStop::NotSent)?,
            ),
            None => {
                let request = ClientRequest::CallToolRequest(CallToolRequest::new(params.clone()));
                let mut request_options = PeerRequestOptions::with_timeout(timeout);
                request_options.meta = meta;
                Pending::Rmcp(Box::new(
                    live.service
                        .peer()
                        .send_request_with_option(request, request_options)
                        .await
                        .map_err(ToolRequestStop::NotSent)?,
                ))
            }
        };
        let _route = progress.map(|sender| {
            live.context
                .route_progress(pending.progress_token(), sender)
        });
        let request_id = pending.id();
        let peer = live.service.peer();
        tokio::select! {
            response = pending.response(timeout, peer) => Ok(response),
            () = cancel.cancelled() => {
                let _ = Box::pin(peer.notify_cancelled(CancelledNotificationParam::new(
                    Some(request_id),
                    Some("cancelled by the caller".to_owned()),
                )))
                .await;
                Err(ToolRequestStop::Cancelled)
            }
        }
    }

    /// The failure of a call its caller cancelled.
    fn cancelled_call(&self, tool: &str) -> McpError {
        McpError::new(
            self.name(),
            FailureKind::Cancelled,
            format!("the call to \"{tool}\" was cancelled"),
            None,
        )
    }

    /// Sends one `tools/call` with `params` as they are (input responses and request state
    /// included) and returns the server's answer unchanged, over the same path as
    /// [`Self::call_tool`]'s requests. The caller's `_meta` is cut down to the client
    /// capabilities warden itself offers this server.
    pub(crate) async fn relay_tool_call(
        &self,
        params: CallToolRequestParams,
        options: CallOptions,
    ) -> Result<ServerResult, RelayError> {
        let live = self.connection().await.map_err(RelayError::Failed)?;
        let meta = options
            .meta
            .map(|meta| within_own_capabilities(meta, &live.context));
        let response = self
            .tool_request(
                &live,
                &params,
                meta,
                self.spec.tool_timeout,
                options.progress,
                &options.cancel,
            )
            .await;
        let what = || format!("\"{}\"", params.name);
        match response {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) | Err(ToolRequestStop::NotSent(error)) => {
                Err(relay_failure(self.name(), &what(), error))
            }
            Err(ToolRequestStop::Cancelled) => {
                Err(RelayError::Failed(self.cancelled_call(&params.name)))
            }
        }
    }

    /// Whether this server offers `tool` and its filter admits it, by the tools already listed:
    /// a call waits for a first listing, never for a fresh one (the listing is refreshed when
    /// the server says its tools changed, or when a client lists them).
    pub(crate) async fn offers_tool(&self, tool: &str) -> Result<bool, McpError> {
        let has_tools = self.lock_catalog().tools.is_some();
        if !has_tools {
            // Boxed: a call's future is moved whole when it is boxed, so the rare steps are
            // built only when taken.
            Box::pin(self.ensure_list(ListWhich::Tools)).await?;
        }
        let catalog = self.lock_catalog();
        let listed = catalog
            .tools
            .as_ref()
            .is_some_and(|cached| cached.items.iter().any(|known| known.name == tool));
        Ok(listed && self.spec.tool_filter.admits(tool))
    }

    /// The failure of a call to a tool this server does not offer.
    pub(crate) fn unknown_tool(&self, tool: &str) -> McpError {
        McpError::new(
            self.name(),
            FailureKind::UnknownTool,
            format!("offers no tool named \"{tool}\""),
            Some("list the server's tools to see what it offers"),
        )
    }

    /// Calls one tool: resolves it in the discovered, filtered set first; never re-sends.
    pub(crate) async fn call_tool(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        options: CallOptions,
    ) -> Result<CallOutcome, McpError> {
        if !self.offers_tool(tool).await? {
            return Err(self.unknown_tool(tool));
        }
        let live = self.connection().await.map_err(|failure| {
            if failure.kind() == FailureKind::Stopped {
                McpError::new(
                    self.name(),
                    FailureKind::Stopped,
                    format!("was stopped by the operator; \"{tool}\" was not called"),
                    Some(&self.reconnect_hint()),
                )
            } else {
                failure
            }
        })?;
        let deadline = tokio::time::Instant::now() + self.spec.tool_timeout;
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let mut url_retries_left = URL_ELICITATION_RETRIES;
        for _round in 0..MAX_INPUT_ROUNDS {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            if remaining.is_zero() {
                return Err(McpError::timeout(
                    self.name(),
                    &format!("\"{tool}\""),
                    self.spec.tool_timeout,
                ));
            }
            let response = match self
                .tool_request(
                    &live,
                    &params,
                    options.meta.clone(),
                    remaining,
                    options.progress.clone(),
                    &options.cancel,
                )
                .await
            {
                Ok(response) => response,
                Err(ToolRequestStop::NotSent(error)) => {
                    return Err(self.request_failure(tool, &error));
                }
                Err(ToolRequestStop::Cancelled) => return Err(self.cancelled_call(tool)),
            };
            match response {
                Ok(ServerResult::CallToolResult(result)) => {
                    return Ok(CallOutcome {
                        identity: ToolIdentity::new(self.spec.name.clone(), tool.to_owned()),
                        result,
                    });
                }
                Ok(ServerResult::InputRequiredResult(input)) => {
                    let (responses, state) =
                        Box::pin(self.answer_input_requests(&live, tool, input)).await?;
                    params.input_responses = responses;
                    params.request_state = state;
                }
                Ok(ServerResult::EmptyResult(_)) => {
                    return Ok(CallOutcome {
                        identity: ToolIdentity::new(self.spec.name.clone(), tool.to_owned()),
                        result: CallToolResult::success(Vec::new()),
                    });
                }
                Ok(_other) => {
                    return Err(McpError::new(
                        self.name(),
                        FailureKind::Protocol,
                        format!(
                            "answered the call to \"{tool}\" with something that is not a tool result"
                        ),
                        Some("check the server's version and logs"),
                    ));
                }
                Err(ServiceError::Timeout { .. }) => {
                    return Err(McpError::timeout(
                        self.name(),
                        &format!("\"{tool}\""),
                        self.spec.tool_timeout,
                    ));
                }
                // Retrying here is not an implicit re-send of a call that may have applied an
                // effect: -32042 (URLElicitationRequiredError) means the server refused to run
                // the request until the user completes the URL elicitation(s) it names. The
                // call is sent again only after the user said they completed them, at most
                // `URL_ELICITATION_RETRIES` times and within the call's own deadline.
                Err(ServiceError::McpError(data)) if data.code.0 == URL_ELICITATION_REQUIRED => {
                    let elicitations = url_elicitations(&data);
                    Box::pin(self.complete_url_elicitations(
                        &live,
                        tool,
                        &data.message,
                        &elicitations,
                        url_retries_left,
                        deadline,
                        &options.cancel,
                    ))
                    .await?;
                    url_retries_left -= 1;
                }
                Err(error) => return Err(Box::pin(self.call_failure(&live, tool, &error)).await),
            }
        }
        Err(McpError::new(
            self.name(),
            FailureKind::Protocol,
            format!("kept asking for input on \"{tool}\" for {MAX_INPUT_ROUNDS} rounds"),
            Some("check the server's logs"),
        ))
    }

    /// A call answered -32042: asks the installed handler to have the user open each URL. `Ok`
    /// when the user completed every one and a retry is still allowed; otherwise the failure,
    /// which names every URL (headless: no handler, so fail closed with where to go).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn complete_url_elicitations(
        &self,
        live: &Live,
        tool: &str,
        server_message: &str,
        elicitations: &[UrlElicitation],
        retries_left: u32,
        deadline: tokio::time::Instant,
        cancel: &CancellationToken,
    ) -> Result<(), McpError> {
        let urls = elicitations
            .iter()
            .map(|elicitation| elicitation.url.as_str())
            .collect::<Vec<_>>()
            .join(" and ");
        let needs = |why: &str| {
            let what = if urls.is_empty() {
                format!(
                    "\"{tool}\" needs a URL elicitation the server did not describe ({server_message}); {why}"
                )
            } else {
                format!("\"{tool}\" needs you to open {urls} first ({server_message}); {why}")
            };
            McpError::new(
                self.name(),
                FailureKind::ElicitationRequired,
                what,
                Some("open the URL in a browser, finish what it asks, then call the tool again"),
            )
        };
        if elicitations.is_empty() {
            return Err(needs("the server did not run the call"));
        }
        let Some(handler) = live.context.elicitation.clone() else {
            return Err(needs("the server did not run the call"));
        };
        if retries_left == 0 {
            return Err(needs(
                "the server asked again after the retry, so the call was not sent a third time",
            ));
        }
        for elicitation in elicitations {
            let request = crate::client::ElicitationRequest {
                server: self.name().to_owned(),
                kind: crate::client::ElicitationKind::Url {
                    message: elicitation.message.clone(),
                    url: elicitation.url.clone(),
                },
            };
            let answer = tokio::select! {
                answer = tokio::time::timeout_at(deadline, handler.elicit(request)) => answer,
                () = cancel.cancelled() => {
                    return Err(McpError::new(
                        self.name(),
                        FailureKind::Cancelled,
                        format!("the call to \"{tool}\" was cancelled while waiting for {}", elicitation.url),
                        None,
                    ));
                }
            };
            match answer {
                Ok(crate::client::ElicitationResponse::Accept(_)) => {}
                Ok(_declined_or_cancelled) => {
                    return Err(needs(
                        "the user did not complete it, so the call was not sent again",
                    ));
                }
                Err(_elapsed) => {
                    return Err(McpError::timeout(
                        self.name(),
                        &format!("\"{tool}\" (waiting for {})", elicitation.url),
                        self.spec.tool_timeout,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Answers an `input_required` result: elicitation through the installed handler, roots; sampling declined.
    pub(super) async fn answer_input_requests(
        &self,
        live: &Live,
        tool: &str,
        input: InputRequiredResult,
    ) -> Result<(Option<InputResponses>, Option<String>), McpError> {
        let requests = input.input_requests.unwrap_or_default();
        if requests.is_empty() && input.request_state.is_none() {
            return Err(McpError::new(
                self.name(),
                FailureKind::Protocol,
                format!("asked for input on \"{tool}\" without saying what it needs"),
                None,
            ));
        }
        let mut responses = InputResponses::new();
        for (key, request) in requests {
            let answer = match request {
                InputRequest::Elicitation(request) => {
                    serde_json::to_value(live.context.elicit(request.params).await)
                }
                InputRequest::ListRoots(_) => serde_json::to_value(live.context.roots()),
                InputRequest::CreateMessage(request) => {
                    match live.context.sample(request.params).await {
                        Ok(result) => serde_json::to_value(result),
                        Err(declined) => {
                            return Err(McpError::new(
                                self.name(),
                                FailureKind::Protocol,
                                format!(
                                    "\"{tool}\" asked the client to sample a model: {}",
                                    declined.message
                                ),
                                Some(
                                    "only for a server you trust: set `sampling = true` in its entry",
                                ),
                            ));
                        }
                    }
                }
                _ => {
                    return Err(McpError::new(
                        self.name(),
                        FailureKind::Protocol,
                        format!("\"{tool}\" asked for a kind of input warden does not know"),
                        Some("check the server's version"),
                    ));
                }
            };
            let answer = answer.map_err(|error| {
                McpError::new(
                    self.name(),
                    FailureKind::Protocol,
                    format!("can't encode an input response: {error}"),
                    None,
                )
            })?;
            responses.insert(key, answer);
        }
        Ok((
            (!responses.is_empty()).then_some(responses),
            input.request_state,
        ))
    }

    /// Replaces the connection of `epoch` by a new one, unless that already happened. A failed
    /// reconnect leaves the server down under supervision.
    pub(super) async fn renew_session(&self, epoch: u64) -> Result<(), McpError> {
        let _connecting = self.connect_lock.lock().await;
        let previous = {
            let mut state = self.lock_state();
            if state.shut_down {
                return Err(McpError::shut_down(self.name()));
            }
            if state.stopped {
                return Err(self.stopped_failure());
            }
            if state.live.as_ref().is_none_or(|live| live.epoch != epoch) {
                return Ok(());
            }
            state.live.take()
        };
        if let Some(previous) = previous {
            previous.close().await;
        }
        let outcome = self.connect_now(true).await.map(|_| ());
        if outcome.is_err() {
            let supervise = {
                let mut state = self.lock_state();
                if state.recoveries_left > 0 && state.phase == ServerState::Down {
                    state.recoveries_left -= 1;
                    true
                } else {
                    false
                }
            };
            if supervise && let Some(slot) = self.weak_self.upgrade() {
                tokio::spawn(async move { slot.supervise().await });
            }
        }
        outcome
    }

    /// Reads one resource; the caller checked it is advertised.
    pub(crate) async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult, McpError> {
        let live = self.connection().await?;
        let params = ReadResourceRequestParams::new(uri.to_owned());
        bounded(
            self.name(),
            uri,
            self.spec.request_timeout,
            live.service.read_resource(params),
        )
        .await
    }

    /// The server's declared capabilities as JSON (connecting it if needed).
    pub(crate) async fn server_capabilities(&self) -> Result<Value, McpError> {
        let live = self.connection().await?;
        Ok(live
            .peer_info()
            .and_then(|info| serde_json::to_value(&info.capabilities).ok())
            .unwrap_or(Value::Null))
    }

    /// One raw `skills/list` page, whatever its shape: the skills layer validates it.
    pub(crate) async fn skills_list_page(&self, cursor: Option<&str>) -> Result<Value, McpError> {
        let live = self.connection().await?;
        let params = cursor.map(|cursor| serde_json::json!({ "cursor": cursor }));
        let request = ClientRequest::CustomRequest(CustomRequest::new("skills/list", params));
        let result = bounded(
            self.name(),
            "skills/list",
            self.spec.request_timeout,
            live.service.send_request(request),
        )
        .await?;
        serde_json::to_value(&result).map_err(|error| {
            McpError::new(
                self.name(),
                FailureKind::Protocol,
                format!("skills/list answered with an unreadable result: {error}"),
                None,
            )
        })
    }

    /// Gets one prompt with its arguments.
    pub(crate) async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<GetPromptResult, McpError> {
        let live = self.connection().await?;
        let params = GetPromptRequestParams::new(name.to_owned()).with_arguments(arguments);
        bounded(
            self.name(),
            name,
            self.spec.request_timeout,
            live.service.get_prompt(params),
        )
        .await
    }
}

/// The URL elicitations of a -32042 error (`data.elicitations[]`, each `mode: "url"` with `url`,
/// `message`, `elicitationId`); entries without a URL are skipped.
pub(super) fn url_elicitations(error: &rmcp::model::ErrorData) -> Vec<UrlElicitation> {
    error
        .data
        .as_ref()
        .and_then(|data| data.get("elicitations"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|entry| {
            entry
                .get("mode")
                .and_then(Value::as_str)
                .is_none_or(|mode| mode == "url")
        })
        .filter_map(|entry| {
            let url = entry.get("url").and_then(Value::as_str)?;
            Some(UrlElicitation {
                url: url.to_owned(),
                message: entry
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            })
        })
        .collect()
}
