//! The service's approvals: a call that needs a person waits in a queue — stored, and announced as an event of its session — until someone holding the tenant's key decides (allow once, allow for the session, deny with a reason); the audit record names who decided. A pending approval never times out: the run waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;
use tokio::sync::oneshot;
use warden_policy::{ApprovalAnswer, ApprovalRequest, Approver, BoxFuture};

use crate::runs::Runs;
use crate::signals::Signal;
use crate::store::{ApprovalRow, StoreError, now, random_id};

/// A decision on a pending approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    AllowOnce,
    AllowForSession,
    Deny { reason: Option<String> },
}

impl Decision {
    /// The approval's state once decided.
    fn state(&self) -> &'static str {
        match self {
            Self::AllowOnce => "allowed_once",
            Self::AllowForSession => "allowed_for_session",
            Self::Deny { .. } => "denied",
        }
    }
}

/// Why a decision was refused.
#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error("no such approval")]
    Unknown,
    #[error("the approval was decided already, or expired")]
    Decided,
    /// The deciding key started the run that asks (and `[service] self_approval` is off).
    #[error(
        "a key does not decide the approvals of a run it started; another approver of the tenant decides (or the operator sets [service] self_approval = true)"
    )]
    OwnRun,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The runs' waiting approvals, by id.
#[derive(Default)]
pub(crate) struct Waiting {
    answers: Mutex<HashMap<String, oneshot::Sender<(ApprovalAnswer, String)>>>,
}

/// How often a waiting approval looks at the store itself (a decision's signal was lost).
const DECISION_LOOK: Duration = Duration::from_secs(2);

/// The answer a stored decision gives (`reason`: the denial's, when known).
fn answer_of(state: &str, reason: Option<String>) -> Option<ApprovalAnswer> {
    match state {
        "allowed_once" => Some(ApprovalAnswer::AllowOnce),
        "allowed_for_session" => Some(ApprovalAnswer::AllowForSession),
        "denied" => Some(ApprovalAnswer::Deny { reason }),
        _ => None,
    }
}

impl Waiting {
    /// How many approvals runs on this instance wait for now.
    pub(crate) fn pending(&self) -> usize {
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Hands a decision to the run waiting for approval `id`, when this instance holds it.
    pub(crate) fn deliver(
        &self,
        id: &str,
        state: &str,
        reason: Option<String>,
        decided_by: String,
    ) {
        let Some(answer) = answer_of(state, reason) else {
            return;
        };
        let waiting = self
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        if let Some(waiting) = waiting {
            let _ = waiting.send((answer, decided_by));
        }
    }
}

impl Runs {
    /// Decides a pending approval of `tenant` as `decided_by`; the waiting run goes on.
    pub async fn decide(
        &self,
        tenant: &str,
        id: &str,
        decision: Decision,
        decider: &crate::store::Principal,
    ) -> Result<ApprovalRow, DecideError> {
        let decided_by = decider.caller.as_str();
        let store = self.store();
        let Some(row) = store.approval(tenant, id).await? else {
            return Err(DecideError::Unknown);
        };
        if row.requested_by.as_deref() == Some(decider.key.as_str())
            && !self.tenancy().self_approval
        {
            return Err(DecideError::OwnRun);
        }
        let state = decision.state();
        if !store.decide_approval(tenant, id, state, decided_by).await? {
            return Err(DecideError::Decided);
        }
        self.record(
            tenant,
            &row.session,
            &json!({"type": "approval_decided", "approval": id, "decision": state,
                    "decided_by": decided_by}),
        )
        .await;
        // The run waiting for it may be this instance's or another's.
        self.store().signals().publish(Signal::ApprovalDecided {
            tenant: tenant.to_owned(),
            id: id.to_owned(),
            state: state.to_owned(),
            reason: match decision {
                Decision::Deny { reason } => reason,
                Decision::AllowOnce | Decision::AllowForSession => None,
            },
            decided_by: decided_by.to_owned(),
        });
        Ok(ApprovalRow {
            state: state.to_owned(),
            decided_by: Some(decided_by.to_owned()),
            ..row
        })
    }
}

/// Forgets a waiting approval whose run stopped waiting (cancelled): it expires (stored by a
/// task of its own, since a drop cannot wait for the store).
struct Abandoned<'a> {
    approver: &'a RunApprover,
    id: String,
    armed: bool,
}

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.approver
            .runs
            .waiting()
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let runs = Arc::clone(&self.approver.runs);
        let (tenant, id) = (self.approver.tenant.clone(), std::mem::take(&mut self.id));
        runtime.spawn(async move {
            let _ = runs
                .store()
                .decide_approval(&tenant, &id, "expired", "warden (the run stopped waiting)")
                .await;
        });
    }
}

/// The approver of a call a person asked for through the API (an admin copying a prompt in):
/// the request is the approval, and the audit names who made it.
pub(crate) struct RequesterApproves {
    pub(crate) caller: String,
}

impl Approver for RequesterApproves {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async move { self.approve_naming(request).await.0 })
    }

    fn approve_naming<'a>(
        &'a self,
        _request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, (ApprovalAnswer, Option<String>)> {
        Box::pin(async move { (ApprovalAnswer::AllowOnce, Some(self.caller.clone())) })
    }
}

/// The approver of one run: its calls that need a person go to the tenant's queue.
pub(crate) struct RunApprover {
    pub(crate) runs: Arc<Runs>,
    pub(crate) tenant: String,
    pub(crate) session: String,
    /// The run's name in its session's lease.
    pub(crate) holder: String,
    /// The key (or widget token) whose message started the run.
    pub(crate) requested_by: Option<String>,
}

impl RunApprover {
    /// The decision on approval `id` once the store holds one (looked at every
    /// [`DECISION_LOOK`]): what a lost signal falls back on. The denial's reason travels only
    /// with the signal, so this one has none.
    async fn stored_decision(&self, id: &str) -> (ApprovalAnswer, String) {
        loop {
            tokio::time::sleep(DECISION_LOOK).await;
            if let Ok(Some(row)) = self.runs.store().approval(&self.tenant, id).await
                && let Some(answer) = answer_of(&row.state, None)
            {
                self.runs
                    .waiting()
                    .answers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(id);
                return (answer, row.decided_by.unwrap_or_default());
            }
        }
    }
}

impl Approver for RunApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(async move { self.approve_naming(request).await.0 })
    }

    fn approve_naming<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, (ApprovalAnswer, Option<String>)> {
        Box::pin(async move {
            let nobody = |reason: String| (ApprovalAnswer::NobodyToAsk { reason }, None);
            let id = match random_id("apr_") {
                Ok(id) => id,
                Err(error) => return nobody(error.to_string()),
            };
            let row = ApprovalRow {
                id: id.clone(),
                session: self.session.clone(),
                tool: request.public_name.clone(),
                arguments: request.arguments.clone(),
                classes: request
                    .classes
                    .iter()
                    .map(|class| class.as_str().to_owned())
                    .collect(),
                caller: request.caller.clone(),
                reason: request.reason.clone(),
                state: "pending".to_owned(),
                decided_by: None,
                created_at: now(),
                requested_by: self.requested_by.clone(),
            };
            let (sender, answered) = oneshot::channel();
            self.runs
                .waiting()
                .answers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(id.clone(), sender);
            if let Err(error) = self.runs.store().add_approval(&self.tenant, &row).await {
                self.runs
                    .waiting()
                    .answers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
                return nobody(format!("the approval could not be queued: {error}"));
            }
            let mut abandoned = Abandoned {
                approver: self,
                id: id.clone(),
                armed: true,
            };
            self.runs
                .record_held(
                    &self.tenant,
                    &self.session,
                    &self.holder,
                    &json!({"type": "approval_needed", "approval": row}),
                )
                .await;
            let answer = tokio::select! {
                answer = answered => answer.ok(),
                stored = self.stored_decision(&id) => Some(stored),
            };
            abandoned.armed = false;
            match answer {
                Some((answer, by)) => (answer, Some(by)),
                None => nobody("the approval was abandoned".to_owned()),
            }
        })
    }
}
