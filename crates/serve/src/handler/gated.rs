//! Calls through the gate as this client: the gated call itself, its progress and the upstream's log lines forwarded while it runs, and the answer built from its outcome.

use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, LoggingLevel, ProgressNotificationParam,
    ProgressToken, ResultType,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use serde_json::Value;
use warden_host::{CallRelay, RelayRequest, RelayedAnswer, with_relay};
use warden_mcp::UpstreamEvent;
use warden_policy::{Decision, GateOutcome, ProgressUpdate};

use super::GatewayHandler;
use super::relay::is_stateless;
use crate::approval::{BridgeChannel, ClientAsks, ClientChannel};

impl GatewayHandler {
    /// One server's listing through the gate (`list_mcp_resources`, `list_mcp_prompts`): the
    /// items the tool returned under `key`, as their server sent them; `Err` is the gate's or
    /// the server's reason.
    pub(super) async fn gated_listing<T: serde::de::DeserializeOwned>(
        &self,
        tool: &str,
        server: &str,
        key: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Vec<T>, String> {
        let gated = self
            .gated_call(tool, serde_json::json!({ "server": server }), context)
            .await;
        let outcome = gated.outcome;
        let items = outcome
            .output
            .as_ref()
            .filter(|output| !output.is_error)
            .and_then(|output| output.content.as_ref())
            .and_then(|content| content.get(key))
            .cloned()
            .ok_or_else(|| outcome.model_text())?;
        let rows: Vec<Value> = serde_json::from_value(items).map_err(|error| error.to_string())?;
        Ok(rows
            .into_iter()
            .filter_map(|row| {
                // Resources come with their server beside them; prompts as they are.
                let item = row.get("resource").cloned().unwrap_or(row);
                serde_json::from_value(item).ok()
            })
            .collect())
    }
}

/// A gated call's outcome, and the upstream's answer as it sent it when the call ran.
pub(crate) struct Gated {
    pub outcome: GateOutcome,
    pub answer: Option<RelayedAnswer>,
}

impl Gated {
    /// The gate's outcome, and the upstream's tool result as it sent it when the call ran and
    /// completed.
    pub(super) fn into_parts(self) -> (GateOutcome, Option<CallToolResult>) {
        let raw = match self.answer {
            Some(RelayedAnswer::Tool(result)) => Some(result),
            _ => None,
        };
        (self.outcome, raw)
    }

    /// The downstream answer of a gated tool call: the upstream's answer unchanged when the call
    /// ran (a result, an `input_required` result, or its JSON-RPC error), else an error result
    /// with the gate's reason.
    pub(crate) fn response(self) -> Result<CallToolResponse, McpError> {
        match self.answer {
            Some(RelayedAnswer::InputRequired(input)) => Ok(CallToolResponse::InputRequired(input)),
            Some(RelayedAnswer::Error(error)) => Err(error),
            answer => Ok(CallToolResponse::Complete(
                Self {
                    outcome: self.outcome,
                    answer,
                }
                .call_result(),
            )),
        }
    }

    /// The downstream result of a gated call: the upstream's result unchanged when it ran,
    /// else a result with the gate's text (an error result when it did not run).
    pub(crate) fn call_result(self) -> CallToolResult {
        let (outcome, raw) = self.into_parts();
        let mut result = match raw {
            Some(raw) => raw,
            None if outcome.decision == Decision::Allowed => {
                let text = outcome.model_text();
                if outcome.is_error() {
                    CallToolResult::error(vec![ContentBlock::text(text)])
                } else {
                    CallToolResult::success(vec![ContentBlock::text(text)])
                }
            }
            None => CallToolResult::error(vec![ContentBlock::text(outcome.model_text())]),
        };
        result.result_type = Some(ResultType::COMPLETE);
        result
    }
}

/// Which upstream log lines a call's client hears: those at or above its level. A 2026-07-28
/// request names its level in `_meta` (none: no log lines); a 2025-11-25 session's level is the
/// one it set with `logging/setLevel` (every line until it set one).
#[derive(Debug, Clone, Copy)]
pub(super) struct LogFilter(Option<LoggingLevel>);

impl LogFilter {
    fn of(context: &RequestContext<RoleServer>, session_level: LoggingLevel) -> Self {
        if is_stateless(context) {
            Self(context.meta.log_level())
        } else {
            Self(Some(session_level))
        }
    }

    /// Whether any log line may pass.
    fn admits_any(self) -> bool {
        self.0.is_some()
    }

    fn admits(self, level: LoggingLevel) -> bool {
        self.0
            .is_some_and(|threshold| severity(level) >= severity(threshold))
    }
}

/// A call's progress channel and the client's token for it.
pub(super) type ProgressFeed = (
    ProgressToken,
    tokio::sync::mpsc::UnboundedReceiver<ProgressUpdate>,
);

/// How long the feeds must stay quiet after a call's answer before it is sent on.
const TRAILING_NOTIFICATIONS_QUIET: std::time::Duration = std::time::Duration::from_millis(10);
/// The most notifications sent on after a call's answer arrived.
const MAX_TRAILING_NOTIFICATIONS: usize = 1024;
/// The longest a call's answer waits for trailing notifications.
const TRAILING_NOTIFICATIONS_CAP: std::time::Duration = std::time::Duration::from_millis(100);

/// The next progress update of the call, with its token; `None` when there is no feed or it
/// closed (a `select!` branch then stays idle).
async fn next_progress(feed: &mut Option<ProgressFeed>) -> Option<(ProgressToken, ProgressUpdate)> {
    let (token, receiver) = feed.as_mut()?;
    let update = receiver.recv().await?;
    Some((token.clone(), update))
}

impl GatewayHandler {
    /// Sends one call through the gate as this client; approvals are asked of it when it
    /// supports elicitation, and progress is forwarded to it.
    pub(crate) async fn gated_call(
        &self,
        public_name: &str,
        arguments: Value,
        context: &RequestContext<RoleServer>,
    ) -> Gated {
        self.gated_call_with(public_name, arguments, context, RelayRequest::default())
            .await
    }

    /// [`GatewayHandler::gated_call`] with what the relay asks of the upstream call (the
    /// client's input responses, say). The upstream server's log messages while the call runs
    /// are forwarded to this client.
    pub(crate) async fn gated_call_with(
        &self,
        public_name: &str,
        arguments: Value,
        context: &RequestContext<RoleServer>,
        request: RelayRequest,
    ) -> Gated {
        self.gated_call_through(public_name, arguments, context, request, None)
            .await
    }

    /// [`GatewayHandler::gated_call_with`], where what the upstream asks of the client mid-call
    /// goes to `bridge` when given (a 2026-07-28 client whose call warden holds open), else to
    /// the client's peer.
    pub(super) async fn gated_call_through(
        &self,
        public_name: &str,
        arguments: Value,
        context: &RequestContext<RoleServer>,
        request: RelayRequest,
        bridge: Option<BridgeChannel>,
    ) -> Gated {
        self.gateway.prepare().await;
        let caller = self.caller(context);
        let asks = ClientAsks::of(context);
        let _registration = asks
            .elicitation
            .then(|| self.gateway.peers.register(&caller, context.peer.clone()));
        let server = self.gateway.server_of(public_name);
        let channel = bridge.map_or_else(
            || ClientChannel::Peer(context.peer.clone()),
            ClientChannel::Bridge,
        );
        let _running = server.as_ref().map(|server| {
            self.gateway
                .peers
                .running_on(server, self.connection, channel.clone(), asks)
        });
        let mut call = self.call_context(context.ct.child_token());
        call.caller = Some(caller);
        // Progress goes to the client from this task, beside the call (no task per call), and
        // always before the call's answer.
        let mut progress = context.meta.get_progress_token().map(|token| {
            let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
            call.progress = Some(sender);
            (token, receiver)
        });
        let logs = LogFilter::of(context, self.session_log_level());
        // Only a call whose client may hear the server's log lines listens for them.
        let mut events = server
            .as_ref()
            .filter(|_| logs.admits_any())
            .map(|_| self.gateway.host.servers().upstream_events());
        let relay = CallRelay::new(request);
        // Boxed: the gate's future is large, and this one is polled beside the event feed.
        let mut gated = Box::pin(with_relay(
            relay.clone(),
            self.gateway.host.call_with(call, public_name, arguments),
        ));
        // Whether the server sent this call's client anything while it ran.
        let mut heard = false;
        let outcome = loop {
            tokio::select! {
                outcome = &mut gated => break outcome,
                Some((token, update)) = next_progress(&mut progress) => {
                    Box::pin(forward_progress(token, update, &context.peer)).await;
                    heard = true;
                }
                Some(event) = next_event(&mut events) => match event {
                    Ok(event) => {
                        let forwarded = forward_log(event, server.as_deref(), logs, &context.peer);
                        heard |= Box::pin(forwarded).await;
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => events = None,
                },
            }
        };
        // Progress and log lines the server sent just before its answer. The MCP client handles
        // each notification on a task of its own while the answer reaches the call directly, so
        // a notification sent before the answer may still be on its way. A call that heard
        // from its server waits until the feeds have been quiet for a moment (bounded); one that
        // heard nothing (most calls) only takes what has already arrived.
        let deadline = tokio::time::Instant::now()
            + if heard {
                TRAILING_NOTIFICATIONS_CAP
            } else {
                std::time::Duration::ZERO
            };
        // Bounded in count too, so a server that never stops talking cannot hold the answer.
        let mut trailing = 0usize;
        while (progress.is_some() || events.is_some()) && trailing < MAX_TRAILING_NOTIFICATIONS {
            trailing += 1;
            let quiet = (tokio::time::Instant::now() + TRAILING_NOTIFICATIONS_QUIET).min(deadline);
            let next = tokio::select! {
                biased;
                Some((token, update)) = next_progress(&mut progress) => {
                    Box::pin(forward_progress(token, update, &context.peer)).await;
                    true
                }
                Some(event) = next_event(&mut events) => {
                    match event {
                        Ok(event) => {
                            let peer = &context.peer;
                            Box::pin(forward_log(event, server.as_deref(), logs, peer)).await;
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => events = None,
                    }
                    true
                }
                () = tokio::time::sleep_until(quiet) => false,
            };
            // What is already queued is always taken (the select is biased towards it); past
            // the deadline nothing more is waited for.
            if !next {
                break;
            }
        }
        // The upstream's JSON-RPC error is a failed dispatch at the gate; any other answer is an
        // allowed call's.
        let answer = relay.take_answer().filter(|answer| match answer {
            RelayedAnswer::Error(_) => outcome.decision == Decision::Failed,
            _ => outcome.decision == Decision::Allowed,
        });
        Gated { outcome, answer }
    }
}

/// RFC 5424 order of log levels, least severe first.
pub(crate) fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// The next upstream event, when this call listens for them.
pub(super) async fn next_event(
    events: &mut Option<tokio::sync::broadcast::Receiver<UpstreamEvent>>,
) -> Option<Result<UpstreamEvent, tokio::sync::broadcast::error::RecvError>> {
    Some(events.as_mut()?.recv().await)
}

/// Sends one progress notification to the client of the call.
pub(super) async fn forward_progress(
    token: ProgressToken,
    update: ProgressUpdate,
    peer: &Peer<RoleServer>,
) {
    let mut param = ProgressNotificationParam::new(token, update.progress);
    if let Some(total) = update.total {
        param = param.with_total(total);
    }
    if let Some(message) = update.message {
        param = param.with_message(message);
    }
    let _ = peer.notify_progress(param).await;
}

/// Forwards an upstream log line to `peer` when it comes from `server` and the filter admits it;
/// returns whether it did.
pub(super) async fn forward_log(
    event: UpstreamEvent,
    server: Option<&str>,
    filter: LogFilter,
    peer: &Peer<RoleServer>,
) -> bool {
    if let UpstreamEvent::Log {
        server: from,
        message,
    } = event
        && server == Some(from.as_str())
        && filter.admits(message.level)
    {
        let _ = peer.notify_logging_message(message).await;
        return true;
    }
    false
}
