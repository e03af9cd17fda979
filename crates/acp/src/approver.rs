//! The gate's questions put to the editor: a call that needs approval becomes
//! `session/request_permission` with allow once / allow always / reject, and the editor's choice
//! becomes the gate's answer (which the gate audits as the user's).

use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_policy::{ApprovalAnswer, ApprovalRequest, Approver, BoxFuture};

use crate::convert::{tool_kind, tool_title};

/// The option ids warden offers.
pub(crate) const ALLOW_ONCE: &str = "allow_once";
pub(crate) const ALLOW_ALWAYS: &str = "allow_always";
pub(crate) const REJECT: &str = "reject_once";

/// What one session's approver and its turn share: the calls running now (so a question names
/// the editor's tool call) and the running turn's cancellation.
#[derive(Default)]
pub(crate) struct Live {
    /// Running calls: the model's call id, the public name and the arguments.
    calls: Mutex<Vec<(String, String, Value)>>,
    /// The running turn's token; `None` between turns.
    turn: Mutex<Option<CancellationToken>>,
}

impl Live {
    pub(crate) fn call_started(&self, id: &str, public_name: &str, arguments: &Value) {
        lock(&self.calls).push((id.to_owned(), public_name.to_owned(), arguments.clone()));
    }

    /// The running `bash` call that runs `command` (to show the editor's terminal in it).
    pub(crate) fn bash_call(&self, command: &str) -> Option<String> {
        lock(&self.calls)
            .iter()
            .find(|(_, name, arguments)| {
                name == "bash" && arguments.get("command").and_then(Value::as_str) == Some(command)
            })
            .map(|(id, _, _)| id.clone())
    }

    /// Whether the call is still running (progress after its end is not sent).
    pub(crate) fn is_running(&self, id: &str) -> bool {
        lock(&self.calls)
            .iter()
            .any(|(running, _, _)| running == id)
    }

    pub(crate) fn call_finished(&self, id: &str) {
        lock(&self.calls).retain(|(running, _, _)| running != id);
    }

    /// The running call this question is about: the one with the same tool and arguments, else
    /// the only one running (a deferred tool reached through `call_tool`).
    fn call_for(&self, request: &ApprovalRequest) -> Option<String> {
        let calls = lock(&self.calls);
        calls
            .iter()
            .find(|(_, name, arguments)| {
                *name == request.public_name && *arguments == request.arguments
            })
            .or_else(|| (calls.len() == 1).then(|| &calls[0]))
            .map(|(id, _, _)| id.clone())
    }

    /// Starts a turn: its token, or `None` when one is running already.
    pub(crate) fn start_turn(&self) -> Option<CancellationToken> {
        let mut turn = lock(&self.turn);
        if turn.is_some() {
            return None;
        }
        let token = CancellationToken::new();
        *turn = Some(token.clone());
        Some(token)
    }

    pub(crate) fn end_turn(&self) {
        lock(&self.turn).take();
    }

    /// Cancels the running turn, if any; whether there was one.
    pub(crate) fn cancel_turn(&self) -> bool {
        match lock(&self.turn).as_ref() {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    fn turn_token(&self) -> Option<CancellationToken> {
        lock(&self.turn).clone()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Asks the editor's user about one call of one session.
pub(crate) struct EditorApprover {
    pub(crate) connection: ConnectionTo<Client>,
    pub(crate) live: Arc<Live>,
}

/// The options of one question: "always" is remembered for this session only unless the gate
/// offers more (a skill's tool grant), and not offered at all for a call that may be allowed
/// once only (a command in the editor's terminal).
pub(crate) fn permission_options(offers_always: bool, once_only: bool) -> Vec<PermissionOption> {
    let always = if offers_always {
        "Always allow"
    } else {
        "Allow for this session"
    };
    let mut options = vec![PermissionOption::new(
        ALLOW_ONCE,
        "Allow once",
        PermissionOptionKind::AllowOnce,
    )];
    if !once_only {
        options.push(PermissionOption::new(
            ALLOW_ALWAYS,
            always,
            PermissionOptionKind::AllowAlways,
        ));
    }
    options.push(PermissionOption::new(
        REJECT,
        "Reject",
        PermissionOptionKind::RejectOnce,
    ));
    options
}

/// The gate's answer for the editor's outcome.
pub(crate) fn answer_for(
    outcome: &RequestPermissionOutcome,
    offers_always: bool,
) -> ApprovalAnswer {
    match outcome {
        RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
            ALLOW_ONCE => ApprovalAnswer::AllowOnce,
            ALLOW_ALWAYS if offers_always => ApprovalAnswer::AllowAlways,
            ALLOW_ALWAYS => ApprovalAnswer::AllowForSession,
            REJECT => ApprovalAnswer::Deny {
                reason: Some("the user rejected it in the editor".to_owned()),
            },
            other => ApprovalAnswer::Deny {
                reason: Some(format!(
                    "the editor answered with an option warden did not offer ({other:?})"
                )),
            },
        },
        RequestPermissionOutcome::Cancelled => ApprovalAnswer::Deny {
            reason: Some("the prompt turn was cancelled".to_owned()),
        },
        _ => ApprovalAnswer::Deny {
            reason: Some("the editor's answer was not understood".to_owned()),
        },
    }
}

impl Approver for EditorApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async move {
            let call_id = self
                .live
                .call_for(request)
                .unwrap_or_else(|| format!("approval-{}", request.public_name));
            let fields = ToolCallUpdateFields::new()
                .kind(tool_kind(&request.public_name))
                .status(ToolCallStatus::Pending)
                .title(format!(
                    "{} — {}",
                    tool_title(&request.public_name, &request.arguments),
                    request.reason
                ))
                .raw_input(request.arguments.clone());
            let question = RequestPermissionRequest::new(
                request.session_id.clone(),
                ToolCallUpdate::new(call_id, fields),
                permission_options(request.offers_always, request.once_only),
            );
            let cancelled = self.live.turn_token().unwrap_or_default();
            // Dropped unanswered (the turn was cancelled), the request is withdrawn: the SDK
            // sends `$/cancel_request` for it, and the editor can close its dialog.
            let sent = self.connection.send_request(question);
            let response = tokio::select! {
                response = sent.block_task() => response,
                () = cancelled.cancelled() => {
                    return ApprovalAnswer::Deny {
                        reason: Some("the prompt turn was cancelled".to_owned()),
                    };
                }
            };
            match response {
                Ok(response) => answer_for(&response.outcome, request.offers_always),
                Err(error) => ApprovalAnswer::NobodyToAsk {
                    reason: format!("the editor did not answer the permission request ({error})"),
                },
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use agent_client_protocol::v1::schema::SelectedPermissionOutcome;

    fn selected(id: &str) -> RequestPermissionOutcome {
        let id = id.to_owned();
        RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id))
    }

    #[test]
    fn the_editors_choice_maps_onto_the_gates_answers() {
        assert_eq!(
            answer_for(&selected(ALLOW_ONCE), false),
            ApprovalAnswer::AllowOnce
        );
        assert_eq!(
            answer_for(&selected(ALLOW_ALWAYS), false),
            ApprovalAnswer::AllowForSession
        );
        assert_eq!(
            answer_for(&selected(ALLOW_ALWAYS), true),
            ApprovalAnswer::AllowAlways
        );
        assert!(matches!(
            answer_for(&selected(REJECT), false),
            ApprovalAnswer::Deny { .. }
        ));
        assert!(matches!(
            answer_for(&selected("yes-please"), false),
            ApprovalAnswer::Deny { .. }
        ));
        assert!(matches!(
            answer_for(&RequestPermissionOutcome::Cancelled, false),
            ApprovalAnswer::Deny { .. }
        ));
        let once: Vec<_> = permission_options(false, true)
            .into_iter()
            .map(|option| option.kind)
            .collect();
        assert_eq!(
            once,
            [
                PermissionOptionKind::AllowOnce,
                PermissionOptionKind::RejectOnce
            ]
        );
        let kinds: Vec<_> = permission_options(false, false)
            .into_iter()
            .map(|option| option.kind)
            .collect();
        assert_eq!(
            kinds,
            [
                PermissionOptionKind::AllowOnce,
                PermissionOptionKind::AllowAlways,
                PermissionOptionKind::RejectOnce
            ]
        );
    }

    #[test]
    fn one_turn_at_a_time() {
        let live = Live::default();
        let token = live.start_turn().unwrap();
        assert!(live.start_turn().is_none());
        assert!(live.cancel_turn());
        assert!(token.is_cancelled());
        live.end_turn();
        assert!(!live.cancel_turn());
        assert!(live.start_turn().is_some());
    }
}
