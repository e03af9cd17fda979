//! The embedding application's authorization handler: asked about every call once its arguments
//! are valid, before hooks, approval and execution; an error or a panic denies (fail closed).

use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use serde_json::Value;
use warden_vocab::{CapabilityClass, CapabilitySet};

use crate::approval::BoxFuture;
use crate::call::{CallKind, CallSurface};

/// What the handler is asked about one call.
#[derive(Debug, Clone, Copy)]
pub struct AuthorizationQuestion<'a> {
    /// The session.
    pub session_id: &'a str,
    /// The tenant the call belongs to, when the surface knows one (the service fills it).
    pub tenant: Option<&'a str>,
    /// The surface that made the call.
    pub surface: CallSurface,
    /// Who within the surface, if known.
    pub caller: Option<&'a str>,
    /// What the call does (`tool`, `resource-read`, …).
    pub kind: CallKind,
    /// The server the call reaches (`builtin` for tools defined in code).
    pub server: &'a str,
    /// The raw tool name.
    pub tool: &'a str,
    /// The name the model sees.
    pub public_name: &'a str,
    /// The tool's capability classes as the gate derived them.
    pub classes: CapabilitySet,
    /// The effect class the tool's author declared (a tool defined in code), if any.
    pub effect: Option<CapabilityClass>,
    /// The permission the tool requires: declared in code, or set by `[tool_settings]`.
    pub required_permission: Option<&'a str>,
    /// The call's arguments, valid against the tool's schema.
    pub arguments: &'a Value,
}

/// The handler's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorizationVerdict {
    /// The call may go on to hooks and approval.
    Allow,
    /// The call is refused; the reason is what the model (and the audit trail) reads.
    Deny {
        /// Why, in a sentence.
        reason: String,
    },
}

impl AuthorizationVerdict {
    /// A denial with this reason.
    pub fn deny(reason: impl Into<String>) -> Self {
        Self::Deny {
            reason: reason.into(),
        }
    }
}

/// Why a handler could not decide (a lookup that failed…): the call is denied with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthorizationError(pub String);

/// Decides whether a call may run, on the application's own terms (who the caller is, what
/// permission the tool requires, what the arguments touch). It adds to the operator's policy and
/// never widens it: a call the ceiling, a rule or the external command refused never reaches it.
pub trait AuthorizationHandler: Send + Sync {
    /// Answers one question. An `Err` — or a panic — denies the call.
    fn authorize<'a>(
        &'a self,
        question: &'a AuthorizationQuestion<'a>,
    ) -> BoxFuture<'a, Result<AuthorizationVerdict, AuthorizationError>>;
}

/// The handler a host has when the application registers none: it allows every call.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowEveryCall;

impl AuthorizationHandler for AllowEveryCall {
    fn authorize<'a>(
        &'a self,
        _question: &'a AuthorizationQuestion<'a>,
    ) -> BoxFuture<'a, Result<AuthorizationVerdict, AuthorizationError>> {
        Box::pin(async { Ok(AuthorizationVerdict::Allow) })
    }
}

/// Asks `handler`; `Err` with the reason to record when the call is refused: a denial, an error
/// or a panic (fail closed).
pub async fn ask_handler(
    handler: &dyn AuthorizationHandler,
    question: &AuthorizationQuestion<'_>,
) -> Result<(), String> {
    let public_name = question.public_name;
    let panicked = || {
        tracing::error!(%public_name, "the authorization handler panicked");
        format!("{public_name} is refused: the application's authorization handler failed")
    };
    // Building the future may panic as well as polling it.
    let answer = match std::panic::catch_unwind(AssertUnwindSafe(|| handler.authorize(question))) {
        Ok(future) => AssertUnwindSafe(future).catch_unwind().await,
        Err(_panic) => return Err(panicked()),
    };
    match answer {
        Ok(Ok(AuthorizationVerdict::Allow)) => Ok(()),
        Ok(Ok(AuthorizationVerdict::Deny { reason })) => Err(format!(
            "{public_name} is denied by the application: {reason}"
        )),
        Ok(Err(error)) => Err(format!(
            "{public_name} is refused: the application's authorization handler could not \
             decide ({error})"
        )),
        Err(_panic) => Err(panicked()),
    }
}
