//! Bridges a 2026-07-28 client's tool call or prompt get to an upstream of an older revision: what the upstream asks mid-call (elicitation, sampling, roots) becomes an `input_required` result for the client, and the client's retry — its answers and the `requestState` warden issued — resumes the same upstream request. One gated call, one audit record, however many rounds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use std::future::Future;

use rmcp::model::{
    GetPromptResult, InputRequest, InputRequests, InputRequiredResult, InputResponses,
    ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::GatewayHandler;
use super::gated::Gated;
use super::relay::is_stateless;
use crate::approval::{AskedInput, BridgeChannel};

/// How long a held call waits for its client's retry; past it, the call is let go and its
/// questions declined (swept on the next bridged call).
const PARKED_CALL_WAIT: Duration = Duration::from_secs(600);
/// The most calls held at once; holding one more lets the oldest go.
const MAX_PARKED_CALLS: usize = 256;
/// After the upstream's first question, how long a moment of quiet must last before the round
/// goes to the client: questions asked together (a server awaiting several at once) make one
/// `input_required` result.
const ROUND_QUIET: Duration = Duration::from_millis(100);

/// What a bridged request comes to once its upstream answered.
pub(crate) enum Finished {
    Tool(Box<Gated>),
    Prompt(Result<GetPromptResult, String>),
}

/// What the client gets from one round of a bridged request.
pub(crate) enum BridgedRound {
    Finished(Finished),
    Asked(InputRequiredResult),
}

/// A bridged request on its way: the gated call, and the questions its upstream asks.
pub(crate) struct BridgedRun {
    task: tokio::task::JoinHandle<Finished>,
    asks: mpsc::UnboundedReceiver<AskedInput>,
    /// Set while the call is held for its client's retry (see [`BridgeChannel::held`]).
    held: Arc<AtomicBool>,
}

/// One question of a round, under the key the client answers it by.
struct Question {
    key: String,
    request: InputRequest,
    answer: oneshot::Sender<Value>,
}

/// A call waiting for its client's retry.
struct ParkedCall {
    /// The request it answers (`tools/call NAME`, `prompts/get NAME`): a retry must name it.
    target: String,
    questions: Vec<Question>,
    run: BridgedRun,
    since: Instant,
}

/// The calls held for their clients' retries, by the `requestState` handed out.
#[derive(Default)]
pub(crate) struct ParkedCalls {
    calls: Mutex<HashMap<String, ParkedCall>>,
}

impl ParkedCalls {
    /// Holds `call` and returns the unguessable handle its client sends back.
    fn hold(&self, call: ParkedCall) -> Result<String, McpError> {
        let handle = warden_net::random_hex(16)
            .map(|random| format!("warden-bridge-{random}"))
            .map_err(|error| McpError::internal_error(error.to_string(), None))?;
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.retain(|_, parked| parked.since.elapsed() < PARKED_CALL_WAIT);
        if calls.len() >= MAX_PARKED_CALLS
            && let Some(oldest) = calls
                .iter()
                .min_by_key(|(_, parked)| parked.since)
                .map(|(handle, _)| handle.clone())
        {
            calls.remove(&oldest);
        }
        calls.insert(handle.clone(), call);
        Ok(handle)
    }

    /// The call held under `handle`, taken out (a handle serves one retry).
    fn take(&self, handle: &str) -> Option<ParkedCall> {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.retain(|_, parked| parked.since.elapsed() < PARKED_CALL_WAIT);
        calls.remove(handle)
    }
}

impl GatewayHandler {
    /// Whether this request's call to `server` is bridged: a 2026-07-28 client, and a server
    /// whose connection speaks an older revision (it asks mid-call).
    pub(super) async fn bridges(&self, context: &RequestContext<RoleServer>, server: &str) -> bool {
        if !is_stateless(context) {
            return false;
        }
        self.gateway.prepare().await;
        self.gateway
            .host
            .servers()
            .protocol_revision(server)
            .ok()
            .flatten()
            .is_some_and(|revision| revision.as_str() < ProtocolVersion::V_2026_07_28.as_str())
    }

    /// Starts a bridged request: `run` gets a handler, the request's context with a
    /// cancellation of its own (the request outlives the client's first HTTP request) and the
    /// channel its upstream's questions go to.
    pub(super) fn start_bridged<F>(
        &self,
        context: &RequestContext<RoleServer>,
        run: impl FnOnce(GatewayHandler, RequestContext<RoleServer>, BridgeChannel) -> F,
    ) -> BridgedRun
    where
        F: Future<Output = Finished> + Send + 'static,
    {
        let (sender, asks) = mpsc::unbounded_channel();
        let held = Arc::new(AtomicBool::new(false));
        let channel = BridgeChannel {
            asks: sender,
            held: held.clone(),
        };
        let mut detached = context.clone();
        detached.ct = CancellationToken::new();
        let task = tokio::spawn(run(self.clone(), detached, channel));
        BridgedRun { task, asks, held }
    }

    /// One round of a bridged request for `target`: a new one (no `requestState`; `start`
    /// starts it), or the retry of a held one, resumed with the client's answers.
    pub(super) async fn bridged_round(
        &self,
        target: String,
        input_responses: Option<InputResponses>,
        request_state: Option<String>,
        start: impl FnOnce() -> BridgedRun,
    ) -> Result<BridgedRound, McpError> {
        let run = match request_state {
            Some(handle) => {
                let Some(parked) = self.gateway.parked.take(&handle) else {
                    return Err(McpError::invalid_params(
                        "requestState is unknown: warden did not issue it, it was used already, \
                         or the call it held has expired",
                        None,
                    ));
                };
                if parked.target != target {
                    return Err(McpError::invalid_params(
                        format!("requestState belongs to {}, not {target}", parked.target),
                        None,
                    ));
                }
                let responses = input_responses.unwrap_or_default();
                let mut unanswered = Vec::new();
                for question in parked.questions {
                    match responses.get(&question.key) {
                        Some(answer) if answer.is_object() => {
                            let _ = question.answer.send(answer.clone());
                        }
                        _ => unanswered.push(question),
                    }
                }
                if !unanswered.is_empty() {
                    // Asked again until answered, as the revision recommends.
                    return self.park(target, unanswered, parked.run);
                }
                parked.run.held.store(false, Ordering::SeqCst);
                parked.run
            }
            None => start(),
        };
        self.drive(target, run).await
    }

    /// Runs a bridged request until it ends (its answer) or its upstream asks (a round of
    /// questions for the client, the request held meanwhile).
    async fn drive(&self, target: String, mut run: BridgedRun) -> Result<BridgedRound, McpError> {
        let first = tokio::select! {
            done = &mut run.task => {
                return done.map(BridgedRound::Finished).map_err(|failed| {
                    McpError::internal_error(format!("the bridged request failed: {failed}"), None)
                });
            }
            Some(asked) = run.asks.recv() => asked,
        };
        let mut asked = vec![first];
        while let Ok(Some(more)) = tokio::time::timeout(ROUND_QUIET, run.asks.recv()).await {
            asked.push(more);
        }
        let questions = asked
            .into_iter()
            .enumerate()
            .map(|(index, asked)| Question {
                key: format!("{}-{}", kind_of(&asked.request), index + 1),
                request: asked.request,
                answer: asked.answer,
            })
            .collect();
        self.park(target, questions, run)
    }

    /// Holds the request and hands its questions to the client.
    fn park(
        &self,
        target: String,
        questions: Vec<Question>,
        run: BridgedRun,
    ) -> Result<BridgedRound, McpError> {
        run.held.store(true, Ordering::SeqCst);
        let mut requests = InputRequests::new();
        for question in &questions {
            requests.insert(question.key.clone(), question.request.clone());
        }
        let handle = self.gateway.parked.hold(ParkedCall {
            target,
            questions,
            run,
            since: Instant::now(),
        })?;
        Ok(BridgedRound::Asked(InputRequiredResult::new(
            Some(requests),
            Some(handle),
        )))
    }
}

/// A short name for what a question asks, for its key.
fn kind_of(request: &InputRequest) -> &'static str {
    match request {
        InputRequest::Elicitation(_) => "elicitation",
        InputRequest::CreateMessage(_) => "sampling",
        InputRequest::ListRoots(_) => "roots",
        _ => "input",
    }
}
