//! The tenant's activity as one Server-Sent Events stream: sessions created, deleted and changing state, runs starting and finishing, approvals and client calls waiting and settled, each naming its session — derived from the store, woken by any instance's signals.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::route::Route;
use super::{ApiError, Caller, ServiceState};
use crate::signals::Signal;
use crate::store::{SessionState, StoreError};

/// How often a stream looks at the store without being woken (a missed signal only delays).
const LOOK_EVERY: Duration = Duration::from_secs(5);
/// The least time between two looks: a run's many events (each text delta is one) wake a stream
/// once per gap, not once each.
const LOOK_GAP: Duration = Duration::from_millis(200);

/// The routes of this resource (in the order the OpenAPI document lists them).
pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::get(
            "/v1/events/stream",
            stream_tenant_events,
            "The tenant's activity as Server-Sent Events: `ready` once the stream watches, then `session_created`, `session_deleted`, `run_started`, `run_finished`, `session_state`, `approval_needed`, `approval_decided`, `client_call_pending` and `client_call_answered`, each naming its `session`. Changes between two looks at the store coalesce; a reconnecting client reloads what it shows on `ready`.",
        )
        .event_stream(),
    ]
}

/// What the tenant's lists hold at one look: each session's state, and the approvals and
/// client calls waiting (id → session and tool).
#[derive(Debug, Default, Clone, PartialEq)]
struct Snapshot {
    sessions: BTreeMap<String, SessionState>,
    approvals: BTreeMap<String, (String, String)>,
    client_calls: BTreeMap<String, (String, String)>,
}

impl Snapshot {
    /// The tenant's lists now, as `GET /v1/sessions`, `GET /v1/approvals` and each running
    /// session's `GET …/client-calls` show them to any of the tenant's keys.
    async fn take(state: &ServiceState, tenant: &str) -> Result<Self, StoreError> {
        let mut snapshot = Self::default();
        for session in state.store.list_sessions(tenant).await? {
            snapshot.sessions.insert(session.id, session.state);
        }
        for approval in state.store.pending_approvals(tenant).await? {
            snapshot
                .approvals
                .insert(approval.id, (approval.session, approval.tool));
        }
        let running: Vec<&String> = snapshot
            .sessions
            .iter()
            .filter(|(_, state)| **state == SessionState::Running)
            .map(|(id, _)| id)
            .collect();
        let mut client_calls = BTreeMap::new();
        for session in running {
            for call in state.store.pending_client_calls(tenant, session).await? {
                client_calls.insert(call.id, (call.session, call.tool));
            }
        }
        snapshot.client_calls = client_calls;
        Ok(snapshot)
    }
}

/// The events that lead from `before` to `after`; a settled approval's outcome comes from
/// `decided` (its stored state, when it is still stored).
fn changes(before: &Snapshot, after: &Snapshot, decided: &BTreeMap<String, String>) -> Vec<Value> {
    // In the order they happen: sessions come and runs start, approvals and client calls come
    // and go, runs end and sessions go.
    let mut starting = Vec::new();
    let mut ending = Vec::new();
    for (session, state) in &after.sessions {
        match before.sessions.get(session) {
            None => starting.push(json!({
                "type": "session_created",
                "session": session,
                "state": state.as_str(),
            })),
            Some(previous) if previous != state => {
                let (kind, list) = if *state == SessionState::Running {
                    ("run_started", &mut starting)
                } else if *previous == SessionState::Running {
                    ("run_finished", &mut ending)
                } else {
                    ("session_state", &mut ending)
                };
                list.push(json!({
                    "type": kind,
                    "session": session,
                    "state": state.as_str(),
                    "previous": previous.as_str(),
                }));
            }
            Some(_) => {}
        }
    }
    let mut events = starting;
    for (id, (session, tool)) in only_in(&after.approvals, &before.approvals) {
        events.push(json!({
            "type": "approval_needed",
            "session": session,
            "approval": id,
            "tool": tool,
        }));
    }
    for (id, (session, tool)) in only_in(&before.approvals, &after.approvals) {
        let mut event = json!({
            "type": "approval_decided",
            "session": session,
            "approval": id,
            "tool": tool,
        });
        if let Some(state) = decided.get(id) {
            event["state"] = json!(state);
        }
        events.push(event);
    }
    for (id, (session, tool)) in only_in(&after.client_calls, &before.client_calls) {
        events.push(json!({
            "type": "client_call_pending",
            "session": session,
            "call": id,
            "tool": tool,
        }));
    }
    for (id, (session, tool)) in only_in(&before.client_calls, &after.client_calls) {
        events.push(json!({
            "type": "client_call_answered",
            "session": session,
            "call": id,
            "tool": tool,
        }));
    }
    events.append(&mut ending);
    for session in before.sessions.keys() {
        if !after.sessions.contains_key(session) {
            events.push(json!({"type": "session_deleted", "session": session}));
        }
    }
    events
}

/// The entries of `these` whose id `those` does not hold: what appeared (or went) between two
/// looks.
fn only_in<'a, V>(
    these: &'a BTreeMap<String, V>,
    those: &'a BTreeMap<String, V>,
) -> impl Iterator<Item = (&'a String, &'a V)> {
    these.iter().filter(|(id, _)| !those.contains_key(*id))
}

/// Whether `signal` may change what `tenant`'s stream shows (`known`: its sessions).
fn concerns(signal: &Signal, tenant: &str, known: &Snapshot) -> bool {
    match signal {
        Signal::ApprovalDecided { tenant: of, .. }
        | Signal::ClientCallAnswered { tenant: of, .. }
        | Signal::SessionsChanged { tenant: of } => of == tenant,
        Signal::EventsAppended { session } => known.sessions.contains_key(session),
        Signal::CancelRun { .. } => false,
    }
}

/// One open tenant stream: what it last showed and the events it still has to send.
struct Follower {
    state: ServiceState,
    tenant: String,
    signals: broadcast::Receiver<Signal>,
    shown: Option<Snapshot>,
    pending: VecDeque<Value>,
    sent: u64,
    /// When the store was last looked at.
    looked: tokio::time::Instant,
}

impl Follower {
    /// The next event to send, waiting for a change when there is none.
    async fn next(&mut self) -> Event {
        loop {
            if let Some(event) = self.pending.pop_front() {
                self.sent += 1;
                return Event::default()
                    .id(self.sent.to_string())
                    .data(event.to_string());
            }
            if let Some(shown) = self.shown.take() {
                self.wait_for_change(&shown).await;
                self.shown = Some(shown);
            }
            self.look().await;
        }
    }

    /// Returns once a signal concerns this tenant (no sooner than [`LOOK_GAP`] after the last
    /// look), or after [`LOOK_EVERY`]; every signal queued by then is taken with it (one look
    /// covers them all).
    async fn wait_for_change(&mut self, shown: &Snapshot) {
        let deadline = self.looked + LOOK_EVERY;
        loop {
            match tokio::time::timeout_at(deadline, self.signals.recv()).await {
                Err(_) => return,
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => break,
                Ok(Err(broadcast::error::RecvError::Closed)) => {
                    tokio::time::sleep_until(deadline).await;
                    return;
                }
                Ok(Ok(signal)) if concerns(&signal, &self.tenant, shown) => break,
                Ok(Ok(_)) => {}
            }
        }
        tokio::time::sleep_until(self.looked + LOOK_GAP).await;
        while self.signals.try_recv().is_ok() {}
    }

    /// Looks at the store and queues what changed since the last look (the first look queues
    /// `ready`); a store that fails leaves everything as it was shown.
    async fn look(&mut self) {
        self.looked = tokio::time::Instant::now();
        let now = match Snapshot::take(&self.state, &self.tenant).await {
            Ok(now) => now,
            Err(error) => {
                tracing::debug!("tenant {} stream: the store failed: {error}", self.tenant);
                return;
            }
        };
        match &self.shown {
            None => self.pending.push_back(json!({"type": "ready"})),
            Some(before) => {
                let mut decided = BTreeMap::new();
                for id in before.approvals.keys() {
                    if now.approvals.contains_key(id) {
                        continue;
                    }
                    if let Ok(Some(row)) = self.state.store.approval(&self.tenant, id).await {
                        decided.insert(id.clone(), row.state);
                    }
                }
                self.pending.extend(changes(before, &now, &decided));
            }
        }
        self.shown = Some(now);
    }
}

/// `GET /v1/events/stream`: the tenant's activity from now on.
async fn stream_tenant_events(
    State(state): State<ServiceState>,
    Caller(principal): Caller,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    if query.is_some_and(|query| !query.is_empty()) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the tenant's event stream takes no query parameters",
        ));
    }
    // Counted until the stream's body is dropped (the client went away).
    let slot = state.runs.quotas().admit_stream(&principal)?;
    // Subscribed before the first look: a change after it wakes the stream.
    let signals = state.store.signals().subscribe();
    let follower = Follower {
        state,
        tenant: principal.tenant.clone(),
        signals,
        shown: None,
        pending: VecDeque::new(),
        sent: 0,
        looked: tokio::time::Instant::now(),
    };
    let stream = futures::stream::unfold(follower, |mut follower| async move {
        let event = follower.next().await;
        Some((Ok::<Event, Infallible>(event), follower))
    });
    let stream = futures::StreamExt::map(stream, move |event| {
        let _counted = &slot;
        event
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(sessions: &[(&str, SessionState)], approvals: &[(&str, &str)]) -> Snapshot {
        Snapshot {
            sessions: sessions
                .iter()
                .map(|(id, state)| ((*id).to_owned(), *state))
                .collect(),
            approvals: approvals
                .iter()
                .map(|(id, session)| ((*id).to_owned(), ((*session).to_owned(), "write".into())))
                .collect(),
            client_calls: BTreeMap::new(),
        }
    }

    #[test]
    fn the_changes_between_two_looks_name_their_sessions_and_what_became_of_them() {
        let before = snapshot(
            &[
                ("ses_a", SessionState::Idle),
                ("ses_b", SessionState::Running),
                ("ses_c", SessionState::Idle),
            ],
            &[("apr_1", "ses_b")],
        );
        let after = snapshot(
            &[
                ("ses_a", SessionState::Running),
                ("ses_b", SessionState::Failed),
                ("ses_d", SessionState::Idle),
            ],
            &[("apr_2", "ses_a")],
        );
        let decided = BTreeMap::from([("apr_1".to_owned(), "denied".to_owned())]);
        let kinds: Vec<(String, String)> = changes(&before, &after, &decided)
            .iter()
            .map(|event| {
                (
                    event["type"].as_str().unwrap_or_default().to_owned(),
                    event["session"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let expected = [
            ("run_started", "ses_a"),
            ("session_created", "ses_d"),
            ("approval_needed", "ses_a"),
            ("approval_decided", "ses_b"),
            ("run_finished", "ses_b"),
            ("session_deleted", "ses_c"),
        ];
        assert_eq!(
            kinds,
            expected.map(|(kind, session)| (kind.to_owned(), session.to_owned()))
        );
        let decision = changes(&before, &after, &decided)
            .into_iter()
            .find(|event| event["type"] == "approval_decided");
        assert_eq!(
            decision.map(|event| event["state"].clone()),
            Some(json!("denied"))
        );
        assert!(changes(&after, &after, &decided).is_empty());
    }

    #[test]
    fn a_stream_wakes_for_its_own_tenant_s_signals_only() {
        let known = snapshot(&[("ses_a", SessionState::Idle)], &[]);
        let ours = Signal::SessionsChanged {
            tenant: "acme".into(),
        };
        let theirs = Signal::SessionsChanged {
            tenant: "globex".into(),
        };
        assert!(concerns(&ours, "acme", &known));
        assert!(!concerns(&theirs, "acme", &known));
        let appended = |session: &str| Signal::EventsAppended {
            session: session.into(),
        };
        assert!(concerns(&appended("ses_a"), "acme", &known));
        assert!(!concerns(&appended("ses_other"), "acme", &known));
    }
}
