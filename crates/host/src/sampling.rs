//! Servers' sampling requests through the gate: with [`SamplingRoute::ThroughGate`] a request
//! from a server whose entry has `sampling = true` becomes a call of the host tool
//! [`SAMPLING_TOOL`] (surface `server`, kind `sampling`, the asking server as the caller), so it is authorized,
//! offered to hooks, timed and audited like every other call. The tool has one shape here
//! ([`sampling_tool`]: only the `server` surface may call it); the surface supplies only who
//! answers ([`SamplingAnswerer`]: the agent session's model, or serve's calling client).

use std::sync::{Arc, Weak};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use warden_policy::CallSurface;

use warden_policy::{BoxFuture, CallKind, CapabilitySet, DispatchError, SurfaceSet, ToolOutput};

use crate::tools::Invocation;
use crate::{CallContext, CodeTool, Host};
use warden_mcp::SamplingDeclined;

/// Who answers a sampling request the gate admitted.
pub trait SamplingAnswerer: Send + Sync {
    /// Whose model answers, for the tool's description.
    fn description(&self) -> &str;

    /// Answers `request`; the error is the reason the server is told.
    fn answer<'a>(
        &'a self,
        request: SamplingArguments,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<SamplingResult, String>>;
}

/// [`SAMPLING_TOOL`]: a server's sampling request answered by `answerer`. It admits only the
/// `server` surface — to the model and every other surface it is not there — and is never
/// offered. It reads nothing of the user's and changes nothing; the operator's `sampling = true`
/// on the server is the consent to spend a model on it.
pub fn sampling_tool<A: SamplingAnswerer + 'static>(answerer: A) -> CodeTool {
    let description = answerer.description().to_owned();
    let answerer = Arc::new(answerer);
    CodeTool::builtin(
        SAMPLING_TOOL,
        &description,
        CapabilitySet::READ_ONLY,
        move |request: SamplingArguments, invocation: Invocation| {
            let answerer = answerer.clone();
            async move {
                let result = answerer
                    .answer(request, invocation.cancel)
                    .await
                    .map_err(DispatchError::new)?;
                let content = serde_json::to_value(&result)
                    .map_err(|error| DispatchError::new(format!("encoding the answer: {error}")))?;
                let mut output = ToolOutput::text(result.text);
                output.content = Some(content);
                Ok(output)
            }
        },
    )
    .call_kind(CallKind::Sampling)
    .only_for(SurfaceSet::of(&[CallSurface::Server]))
    .offered_when(|| false)
}

/// The host tool that answers a server's sampling request (never offered to the model).
pub const SAMPLING_TOOL: &str = "answer_mcp_sampling";

/// Who answers the sampling requests of servers whose entry has `sampling = true`.
#[derive(Clone, Default)]
pub enum SamplingRoute {
    /// Every sampling request is declined.
    #[default]
    Declined,
    /// A call of the surface's [`SAMPLING_TOOL`] through the gate (the agent session answers
    /// with its model; serve relays to the client whose call runs on that server).
    ThroughGate,
}

/// One sampling request as the gate sees it: the tool's arguments.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SamplingArguments {
    /// The server asking.
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    pub turns: Vec<SamplingTurn>,
    pub max_tokens: u32,
}

/// One message of the conversation a server asks to continue.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SamplingTurn {
    /// `user` or `assistant`.
    #[schemars(regex(pattern = "^(user|assistant)$"))]
    pub role: String,
    pub text: String,
}

/// What the tool returns (as its structured content) besides the text the audit sees.
#[derive(Debug, Serialize, Deserialize)]
pub struct SamplingResult {
    pub text: String,
    pub model: String,
}

/// The runtime's sampling handler for [`SamplingRoute::ThroughGate`]: one gated call per request.
pub(crate) struct GatedSampler {
    pub(crate) host: Weak<Host>,
}

impl warden_mcp::SamplingHandler for GatedSampler {
    fn sample(
        &self,
        request: warden_mcp::SamplingRequest,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<warden_mcp::SamplingAnswer, warden_mcp::SamplingDeclined>,
                > + Send
                + '_,
        >,
    > {
        Box::pin(async move {
            // The runtime (and so this handler) lives inside the host: a request that arrives
            // while the host is being dropped finds nobody to answer.
            let Some(host) = self.host.upgrade() else {
                return Err(SamplingDeclined::Refused(
                    "the session is closing".to_owned(),
                ));
            };
            let mut context = CallContext::new(CallSurface::Server, CancellationToken::new());
            context.caller = Some(format!("mcp server {}", request.server));
            let arguments = SamplingArguments {
                server: request.server,
                system_prompt: request.system_prompt,
                turns: request
                    .turns
                    .into_iter()
                    .map(|turn| SamplingTurn {
                        role: match turn.role {
                            warden_mcp::SamplingRole::User => "user",
                            warden_mcp::SamplingRole::Assistant => "assistant",
                        }
                        .to_owned(),
                        text: turn.text,
                    })
                    .collect(),
                max_tokens: request.max_tokens,
            };
            let arguments = serde_json::to_value(&arguments).map_err(|error| {
                SamplingDeclined::Failed(format!("encoding the sampling request: {error}"))
            })?;
            let outcome = host.call_with(context, SAMPLING_TOOL, arguments).await;
            if outcome.is_error() {
                // Refused before the model was asked (a rule, a person), or the answer failed.
                return Err(if outcome.decision == warden_policy::Decision::Denied {
                    SamplingDeclined::Refused(outcome.model_text())
                } else {
                    SamplingDeclined::Failed(outcome.model_text())
                });
            }
            let result: SamplingResult = outcome
                .output
                .and_then(|output| output.content)
                .ok_or_else(|| {
                    SamplingDeclined::Failed("the model's answer came back empty".to_owned())
                })
                .and_then(|content| {
                    serde_json::from_value(content).map_err(|error| {
                        SamplingDeclined::Failed(format!("reading the model's answer: {error}"))
                    })
                })?;
            Ok(warden_mcp::SamplingAnswer {
                text: result.text,
                model: result.model,
                stop_reason: Some("endTurn".to_owned()),
            })
        })
    }
}
