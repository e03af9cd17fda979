//! Client-side tools: declared in an agent profile with a description and a JSON Schema, and no body. The model's call passes the gate like any other (validated against the schema, asked of a person when the policy says so, audited with server `client`); then the run waits — the call stored and announced as an event — until the service's caller answers it with a result or an error. An answer is taken once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;
use warden_config::ClientToolSpec;
use warden_host::{HostTool, Invocation};
use warden_policy::{
    BoxFuture, CallSurface, CapabilityClass, CapabilitySet, DispatchError, SurfaceSet, ToolOutput,
    ToolSource,
};

use crate::runs::Runs;
use crate::signals::Signal;
use crate::store::{ClientCallRow, StoreError, now, random_id};

/// What a lapsed call's stored answer carries beside its error: a late answer is told why it is
/// refused.
const LAPSED: &str = "lapsed_after_sec";

/// How much longer the gate's own deadline for a client-side tool is than the call's wait, so
/// the wait lapses first and the call is marked.
const GATE_MARGIN: Duration = Duration::from_secs(60);

/// Why an answer was refused.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("no such client call")]
    Unknown,
    #[error("the client call was answered already")]
    Answered,
    /// No answer came within the wait (seconds): the model read an error and the run went on.
    #[error(
        "the client call lapsed: no answer came within {0} s, so the model was told so and the run went on without it"
    )]
    Lapsed(u64),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The runs' calls waiting for their caller, by call id.
#[derive(Default)]
pub(crate) struct WaitingCalls {
    answers: Mutex<HashMap<String, oneshot::Sender<Value>>>,
}

/// How often a waiting client call looks at the store itself (an answer's signal was lost).
const ANSWER_LOOK: Duration = Duration::from_secs(2);

impl WaitingCalls {
    /// How many client calls runs on this instance wait for now.
    pub(crate) fn pending(&self) -> usize {
        self.answers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    fn take(&self, id: &str) -> Option<oneshot::Sender<Value>> {
        self.answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
    }

    /// Hands the stored answer of call `id` to the run waiting for it, when this instance
    /// holds it.
    pub(crate) async fn deliver(
        &self,
        store: &dyn crate::store::ServiceStorage,
        tenant: &str,
        session: &str,
        id: &str,
    ) {
        let Some(waiting) = self.take(id) else {
            return;
        };
        match store.client_call(tenant, session, id).await {
            Ok(Some(ClientCallRow {
                answer: Some(answer),
                ..
            })) => {
                let _ = waiting.send(answer);
            }
            // Not readable now: put it back; the waiter's own look at the store follows.
            _ => {
                self.answers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(id.to_owned(), waiting);
            }
        }
    }
}

impl Runs {
    /// The caller's answer to a pending client call of `session`: `{"result": …}` or
    /// `{"error": "…"}`. The waiting run goes on with it.
    pub async fn answer_client_call(
        self: &Arc<Self>,
        tenant: &str,
        session: &str,
        id: &str,
        answer: &Value,
    ) -> Result<(), AnswerError> {
        let store = self.store();
        if store.client_call(tenant, session, id).await?.is_none() {
            return Err(AnswerError::Unknown);
        }
        if !store
            .answer_client_call(tenant, session, id, answer)
            .await?
        {
            let lapsed = store
                .client_call(tenant, session, id)
                .await?
                .and_then(|row| row.answer)
                .and_then(|stored| stored.get(LAPSED).and_then(Value::as_u64));
            return Err(match lapsed {
                Some(seconds) => AnswerError::Lapsed(seconds),
                None => AnswerError::Answered,
            });
        }
        self.record(
            tenant,
            session,
            &json!({"type": "client_call_answered", "call": id}),
        )
        .await;
        // The run waiting for it may be this instance's or another's.
        store.signals().publish(Signal::ClientCallAnswered {
            tenant: tenant.to_owned(),
            session: session.to_owned(),
            id: id.to_owned(),
        });
        // No run holds it when the session was interrupted (its instance stopped): the session
        // goes on once the turn's calls are all answered.
        if let Err(error) = self.resume_after_answers(tenant, session).await {
            tracing::warn!("session {session} could not resume: {error}");
        }
        Ok(())
    }
}

/// One client-side tool in one run.
pub(crate) struct ClientTool {
    pub(crate) spec: ClientToolSpec,
    pub(crate) runs: Arc<Runs>,
    pub(crate) tenant: String,
    pub(crate) session: String,
    /// The run's name in its session's lease.
    pub(crate) holder: String,
}

impl ClientTool {
    async fn call(
        &self,
        arguments: Value,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<ToolOutput, DispatchError> {
        let id = random_id("cc_").map_err(|error| DispatchError::new(error.to_string()))?;
        let row = ClientCallRow {
            id: id.clone(),
            session: self.session.clone(),
            tool: self.spec.name.clone(),
            arguments,
            state: "pending".to_owned(),
            answer: None,
            created_at: now(),
        };
        let (sender, answered) = oneshot::channel();
        self.runs
            .waiting_calls()
            .answers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id.clone(), sender);
        if let Err(error) = self.runs.store().add_client_call(&self.tenant, &row).await {
            self.runs.waiting_calls().take(&id);
            return Err(DispatchError::new(format!(
                "the call could not be handed to the caller: {error}"
            )));
        }
        self.runs
            .record_held(
                &self.tenant,
                &self.session,
                &self.holder,
                &json!({"type": "client_call_pending", "call": row}),
            )
            .await;
        let wait = self.runs.quotas().client_call_timeout();
        let answer = tokio::select! {
            answer = answered => answer.ok(),
            stored = self.stored_answer(&id) => Some(stored),
            () = tokio::time::sleep(wait) => Some(self.lapse(&id, wait.as_secs()).await),
            () = cancel.cancelled() => None,
        };
        self.runs.waiting_calls().take(&id);
        let answer = answer
            .ok_or_else(|| DispatchError::new("the run stopped before the caller answered"))?;
        Ok(output_of(&answer))
    }

    /// The call `id` waited `seconds` without an answer: it is marked lapsed in the store (a
    /// late answer is refused with the reason), and the model reads an error. An answer stored
    /// in the meantime wins.
    async fn lapse(&self, id: &str, seconds: u64) -> Value {
        let lapsed = json!({
            "error": format!("the client did not answer within {seconds} s"),
            LAPSED: seconds,
        });
        let store = self.runs.store();
        match store
            .answer_client_call(&self.tenant, &self.session, id, &lapsed)
            .await
        {
            Ok(true) => {
                self.runs
                    .record_held(
                        &self.tenant,
                        &self.session,
                        &self.holder,
                        &json!({"type": "client_call_lapsed", "call": id, "after_sec": seconds}),
                    )
                    .await;
                lapsed
            }
            Ok(false) => match store.client_call(&self.tenant, &self.session, id).await {
                Ok(Some(ClientCallRow {
                    answer: Some(answer),
                    ..
                })) => answer,
                _ => lapsed,
            },
            Err(error) => {
                tracing::warn!(
                    "session {}: the lapsed client call {id} could not be marked: {error}",
                    self.session
                );
                lapsed
            }
        }
    }

    /// The answer to call `id` once the store holds one (looked at every [`ANSWER_LOOK`]): what
    /// a lost signal falls back on.
    async fn stored_answer(&self, id: &str) -> Value {
        loop {
            tokio::time::sleep(ANSWER_LOOK).await;
            if let Ok(Some(ClientCallRow {
                answer: Some(answer),
                ..
            })) = self
                .runs
                .store()
                .client_call(&self.tenant, &self.session, id)
                .await
            {
                return answer;
            }
        }
    }
}

/// The model's view of an answer: the result as text (a string as it is, anything else as
/// JSON), or the error's text; and whether it is an error.
pub(crate) fn answer_text(answer: &Value) -> (String, bool) {
    let text = |value: &Value| match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match (answer.get("error"), answer.get("result")) {
        (Some(error), _) => (text(error), true),
        (None, Some(result)) => (text(result), false),
        (None, None) => (String::new(), false),
    }
}

fn output_of(answer: &Value) -> ToolOutput {
    let (text, is_error) = answer_text(answer);
    let mut output = ToolOutput::text(text);
    output.is_error = is_error;
    output
}

impl HostTool for ClientTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn description(&self) -> &str {
        &self.spec.description
    }

    fn input_schema(&self) -> Value {
        self.spec.input_schema.clone()
    }

    /// Its code runs in the caller, never on warden's machine: nothing here reads or changes
    /// anything, but the model's arguments leave warden for another party, so it is external
    /// too — it asks a person unless an allow rule names it (`[permissions] allow`).
    fn classes(&self) -> CapabilitySet {
        CapabilitySet::of(&[CapabilityClass::ReadOnly, CapabilityClass::External])
    }

    fn source(&self) -> ToolSource {
        ToolSource::Client
    }

    /// Only the model calls it (not code mode, not the tool CLI).
    fn surfaces(&self) -> SurfaceSet {
        SurfaceSet::of(&[CallSurface::Agent])
    }

    /// The call's own wait (`[service] client_call_timeout_sec`) lapses first; the gate's
    /// deadline is a backstop.
    fn timeout(&self) -> Option<Duration> {
        Some(self.runs.quotas().client_call_timeout() + GATE_MARGIN)
    }

    fn execute<'a>(
        &'a self,
        invocation: Invocation,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        Box::pin(self.call(invocation.arguments, invocation.cancel))
    }
}
