//! Runs of the service's sessions: one at a time per session, each an agent session opened from the session's profile, its events stored as they happen (so a client that reconnects misses nothing) and its messages kept when it ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use warden_agent::{Agent, AgentEvent, AgentOptions, Message};
use warden_session::AgentSession;
use warden_skills::GrantStoreError;
use warden_vocab::HookEvent;

use crate::approvals::{RunApprover, Waiting};
use crate::client_tools::{ClientTool, WaitingCalls};
use crate::signals::Signal;
use crate::store::{Principal, RunHold, ServiceStorage, SessionState, StoreError};
use crate::tenant_oauth::TenantTokens;

/// The most model turns in one run.
const MAX_TURNS: u32 = 50;

/// What the service needs of the application it runs in: the sessions' opener (whose
/// configuration, policy, tools and audit the service's tenant rules then narrow: see
/// [`OpenRequest::open`]) and the operator's environment around it. The binary supplies it;
/// so does an embedding application.
pub trait ServiceHost: warden_session::SessionOpener {
    /// The audit records matching `query` (the service sets its tenant).
    fn audit(
        &self,
        query: &warden_policy::AuditQuery,
    ) -> Result<Vec<warden_policy::AuditRow>, warden_policy::AuditError>;
    /// The client-side tools the agent profile declares.
    fn client_tools(&self, agent: Option<&str>) -> Vec<warden_config::ClientToolSpec>;
    /// Whether an agent profile of this name exists (a session naming another is refused).
    fn knows_agent(&self, agent: &str) -> bool;
    /// The folder a tenant's skills are written to before each of its runs (the opener adds it
    /// as a skill root of the tenant's sessions); `None`: the service keeps no skills.
    fn tenant_skill_root(&self, _tenant: &str) -> Option<std::path::PathBuf> {
        None
    }
    /// The operator's own server names (a tenant cannot register one of them).
    fn operator_servers(&self) -> Vec<String> {
        Vec::new()
    }
    /// The operator's skill grants and skill-script grants (files in the state folder).
    fn grants(
        &self,
    ) -> Result<(Vec<warden_skills::Grant>, Vec<warden_skills::ScriptGrant>), GrantStoreError> {
        Ok((Vec::new(), Vec::new()))
    }
    /// Revokes the grant of `server`'s skill at `resource_uri`; whether there was one.
    fn revoke_skill_grant(
        &self,
        _server: &str,
        _resource_uri: &str,
    ) -> Result<bool, GrantStoreError> {
        Ok(false)
    }
    /// Revokes the script grant of `skill` for `script` (`None`: every script grant of the
    /// skill); whether there was one.
    fn revoke_script_grant(
        &self,
        _skill: &str,
        _script: Option<&str>,
    ) -> Result<bool, GrantStoreError> {
        Ok(false)
    }
    /// The origins of product pages that may call the service with a widget token
    /// (`[service] widget_origins`); loopback origins are always allowed.
    fn widget_origins(&self) -> Vec<String> {
        Vec::new()
    }
    /// How the service is reached from outside (`[service] public_url`, `allowed_hosts`); by
    /// default only on loopback or its bound address.
    fn deployment(&self) -> crate::Deployment {
        crate::Deployment::default()
    }
    /// The agent profiles whose `skills` name `skill`.
    fn profiles_naming_skill(&self, _skill: &str) -> Vec<String> {
        Vec::new()
    }
    /// Where a tenant's knowledge collections live and the embeddings they use; `None`: this
    /// service keeps no knowledge.
    fn tenant_knowledge(&self, _tenant: &str) -> Option<crate::knowledge::TenantKnowledge> {
        None
    }
    /// Where the refresh locks of the tenants' in-memory OAuth tokens live (lock files hold
    /// no secret).
    fn oauth_lock_dir(&self) -> std::path::PathBuf {
        std::env::temp_dir().join("warden-service-oauth")
    }
    /// The folder under which every session gets its room
    /// (`<rooms>/<tenant hash>/sessions/<session>/`).
    fn rooms_dir(&self) -> std::path::PathBuf {
        std::env::temp_dir().join("warden-service-rooms")
    }
    /// `[service]`'s tenancy settings: what tenants' servers may read and reach, who decides
    /// approvals, the client-call wait and the quotas.
    fn tenancy(&self) -> warden_config::Tenancy {
        warden_config::Tenancy::default()
    }
    /// Records `record` in the service's audit trail (what the service itself refuses, such as
    /// a request over a quota); by default nothing is recorded.
    fn record_audit(&self, _record: &warden_policy::AuditRecord) {}
    /// The resolver of tenant servers' names (`None`: the system's); an embedder may pin names
    /// here. Every address it gives is checked by the egress rules before any connect.
    fn egress_resolver(&self) -> Option<Arc<dyn warden_net::NameResolver>> {
        None
    }
}

/// What a session of a tenant's profile would reach, as the console shows it.
pub struct Inspection {
    pub servers: Vec<warden_mcp::ServerStatus>,
    /// The tools a session offers, as the gate governs them (`[tool_settings]` applied).
    pub tools: Vec<warden_policy::ToolDescriptor>,
    /// Descriptions of the tools, by public name.
    pub descriptions: HashMap<String, String>,
}

/// What a person sends a session: text, or a prompt snapshot.
pub enum UserInput {
    Text(String),
    Prompt(crate::store::PromptRow),
}

/// What asking to cancel a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The run is told to stop (here, or on the instance that holds it).
    Cancelled,
    /// No run of the session is going.
    NotGoing,
    /// The run goes on another instance that this one's signals do not reach.
    Unreachable,
}

/// What a run continues the stored conversation with.
enum Continuation {
    /// The user's messages (text, or a prompt snapshot's messages).
    Messages(Vec<Message>),
    /// The results of the last turn's calls (a run resumed after a restart).
    ToolResults(Vec<Message>),
}

/// What a run's session is opened with.
pub(crate) struct OpenRequest {
    /// The service's session: the run's host takes its id, so the audit names it.
    pub session: String,
    /// The agent profile (`None`: the default agent).
    pub agent: Option<String>,
    /// The tenant, and the caller whose message started the run.
    pub principal: warden_host::SessionPrincipal,
    /// Who is asked about calls that need a person (the tenant's approvals queue).
    pub approver: Arc<dyn warden_policy::Approver>,
    /// Host tools beside the session's own (the profile's client-side tools).
    pub tools: Vec<Arc<dyn warden_host::HostTool>>,
    /// The tenant's registered remote servers as the session reaches them (headers from the
    /// variables the operator lists, connections held to the egress rules): beside the
    /// operator's, and each of their tools asks before every call.
    pub servers: Vec<warden_mcp::ServerSpec>,
    /// The session's own folder: its workspace and artifacts.
    pub room: warden_session::Room,
    /// The folder the tenant's skills were written to (a skill root of its sessions).
    pub skill_root: Option<std::path::PathBuf>,
    /// Where the tenant's own knowledge collections live (searched before the operator's).
    pub knowledge: Option<warden_knowledge::KnowledgePlace>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("no session {0}")]
    UnknownSession(String),
    #[error("session {0} has a run going; wait for it to finish or cancel it")]
    Busy(String),
    /// Over a quota of runs going (a 429).
    #[error(transparent)]
    Quota(#[from] crate::quota::QuotaRefusal),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The runs going on, and the wake-ups of those who follow a session's events.
pub struct Runs {
    store: Arc<dyn ServiceStorage>,
    opener: Arc<dyn ServiceHost>,
    going: Mutex<HashMap<String, GoingRun>>,
    wakeups: Mutex<HashMap<String, Arc<Notify>>>,
    waiting: Waiting,
    waiting_calls: WaitingCalls,
    /// Per tenant: the fingerprint of the skills its folder holds. Sessions open under the read
    /// lock; a rewrite (the skills changed) takes the write lock, so no session discovers a
    /// half-written folder and sessions of one tenant open side by side.
    skill_folders: Mutex<HashMap<String, Arc<RwLock<Option<String>>>>>,
    tokens: Arc<TenantTokens>,
    /// Set once the signal listener runs.
    listening: std::sync::OnceLock<()>,
    /// This instance, as its runs' leases name it.
    instance: String,
    /// How long its leases last (seconds).
    lease_ttl: u64,
    /// Numbers this instance's runs (a run's lease names its instance and its number).
    run_numbers: AtomicU64,
    /// When this instance last renewed its runs' leases.
    renewed_at: Mutex<std::time::Instant>,
    /// The quotas and what counts against them on this instance.
    quotas: crate::quota::QuotaBook,
    /// What this instance's requests, runs and tool calls count (`GET /metrics`).
    metrics: Arc<crate::metrics::ServiceMetrics>,
}

/// Which run a write comes from: its tenant, session, and its name in the session's lease.
pub(crate) struct RunTicket {
    pub(crate) tenant: String,
    pub(crate) session: String,
    pub(crate) holder: String,
    /// The key (or widget token) whose message started the run; `None` for a run resumed
    /// after a restart.
    pub(crate) started_by: Option<String>,
}

/// A run going in this instance: how to stop it, and the lease it holds.
struct GoingRun {
    cancel: CancellationToken,
    /// The run's name in its session's lease; its writes carry it (fencing).
    holder: String,
    /// Set once the run lost its lease: it is stopped and nothing it does is kept.
    fenced: AtomicBool,
}

/// How long a run's lease lasts without renewal (a shared store's instances), unless
/// [`LEASE_TTL_ENV`] says otherwise.
pub(crate) const LEASE_TTL_SECS: u64 = 60;
/// Environment variable setting the lease's length in seconds (at least 2; default 60): an
/// instance that died is noticed, and its runs marked interrupted, within this and a sixth of it.
pub const LEASE_TTL_ENV: &str = "WARDEN_SERVICE_LEASE_TTL_SECS";

/// The lease's length: [`LEASE_TTL_ENV`] when it holds a number of seconds (2 or more), else
/// [`LEASE_TTL_SECS`].
fn lease_ttl() -> u64 {
    match std::env::var(LEASE_TTL_ENV) {
        Ok(value) => match value.trim().parse::<u64>() {
            Ok(seconds) if seconds >= 2 => seconds,
            _ => {
                tracing::warn!(
                    "{LEASE_TTL_ENV}={value:?} is not a number of seconds of 2 or more; the lease lasts {LEASE_TTL_SECS} s"
                );
                LEASE_TTL_SECS
            }
        },
        Err(_) => LEASE_TTL_SECS,
    }
}

/// How often an instance renews its runs' leases and looks for others' lapsed ones: six times
/// per lease (every 10 s by default).
fn lease_renew(ttl: u64) -> std::time::Duration {
    std::time::Duration::from_secs((ttl / 6).max(1))
}

/// What a call in flight when its instance died reads as, for the model and in its event.
const OUTCOME_UNKNOWN: &str =
    "warden stopped before this call's result was kept; it may or may not have run";

impl Runs {
    pub fn new(store: Arc<dyn ServiceStorage>, opener: Arc<dyn ServiceHost>) -> Arc<Self> {
        let metrics = Arc::new(crate::metrics::ServiceMetrics::default());
        let runs = Arc::new(Self {
            store,
            going: Mutex::default(),
            wakeups: Mutex::default(),
            waiting: Waiting::default(),
            waiting_calls: WaitingCalls::default(),
            skill_folders: Mutex::default(),
            tokens: TenantTokens::new(opener.oauth_lock_dir()),
            listening: std::sync::OnceLock::new(),
            instance: format!("inst_{}", warden_host::new_session_id()),
            lease_ttl: lease_ttl(),
            run_numbers: AtomicU64::new(0),
            renewed_at: Mutex::new(std::time::Instant::now()),
            quotas: {
                let recorder = opener.clone();
                crate::quota::QuotaBook::new(opener.tenancy())
                    .auditing(Arc::new(move |record: &warden_policy::AuditRecord| {
                        recorder.record_audit(record)
                    }))
                    .counting(metrics.clone())
            },
            metrics,
            opener,
        });
        // Inside a runtime (the service), the heartbeat starts now: an instance that has run
        // nothing yet still notices another's runs whose lease lapsed.
        runs.listen();
        runs
    }

    /// The tenants' OAuth tokens and sign-ins.
    pub(crate) fn tokens(&self) -> &Arc<TenantTokens> {
        &self.tokens
    }

    pub(crate) fn quotas(&self) -> &crate::quota::QuotaBook {
        &self.quotas
    }

    /// This instance's metrics.
    pub(crate) fn metrics(&self) -> &crate::metrics::ServiceMetrics {
        &self.metrics
    }

    /// The metrics as OpenMetrics text, with the approvals and client calls waiting and the
    /// event streams open now.
    pub(crate) fn encode_metrics(&self) -> String {
        self.metrics.encode(
            self.waiting.pending(),
            self.waiting_calls.pending(),
            self.quotas.streams_open(),
        )
    }

    pub(crate) fn waiting_calls(&self) -> &WaitingCalls {
        &self.waiting_calls
    }

    /// The egress guard of `tenant`'s servers.
    pub(crate) fn egress_guard(&self, tenant: &str) -> warden_net::EgressGuard {
        crate::tenant_rules::egress_guard(
            &self.opener.tenancy(),
            tenant,
            self.opener.egress_resolver(),
        )
    }

    /// `[service]`'s tenancy settings, as the opener has them.
    pub(crate) fn tenancy(&self) -> warden_config::Tenancy {
        self.opener.tenancy()
    }

    pub(crate) fn store(&self) -> &dyn ServiceStorage {
        self.store.as_ref()
    }

    pub(crate) fn waiting(&self) -> &Waiting {
        &self.waiting
    }

    /// What a follower of `session`'s events waits on: notified after each stored event.
    pub fn wakeup(&self, session: &str) -> Arc<Notify> {
        self.wakeups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(session.to_owned())
            .or_default()
            .clone()
    }

    /// Stores an event of `session` and wakes its followers, on every instance.
    pub(crate) async fn record(&self, tenant: &str, session: &str, event: &serde_json::Value) {
        if let Err(error) = self.store.append_event(tenant, session, event).await {
            tracing::warn!("session {session}: an event could not be stored: {error}");
        }
        self.wakeup(session).notify_waiters();
        self.store.signals().publish(Signal::EventsAppended {
            session: session.to_owned(),
        });
    }

    /// Stores an event of the run `holder` of `session`, while the run holds the session's
    /// lease; a run that lost it is stopped instead (fenced), and the event is not stored.
    pub(crate) async fn record_held(
        &self,
        tenant: &str,
        session: &str,
        holder: &str,
        event: &serde_json::Value,
    ) {
        match self
            .store
            .append_run_event(tenant, session, holder, event)
            .await
        {
            Ok(Some(_)) => {
                self.wakeup(session).notify_waiters();
                self.store.signals().publish(Signal::EventsAppended {
                    session: session.to_owned(),
                });
            }
            Ok(None) => self.fence(
                session,
                holder,
                "another instance took it for dead and marked the session interrupted",
            ),
            Err(error) => {
                tracing::warn!("session {session}: an event could not be stored: {error}");
            }
        }
    }

    /// Stops the run `holder` of `session`, which no longer holds the session's lease: its
    /// session may be resumed elsewhere, so nothing more of it may run or be kept.
    fn fence(&self, session: &str, holder: &str, why: &str) {
        let going = self.going.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(run) = going.get(session).filter(|run| run.holder == holder) else {
            return;
        };
        if !run.fenced.swap(true, Ordering::SeqCst) {
            run.cancel.cancel();
            tracing::warn!(
                "session {session}: its run on this instance was stopped without keeping anything more: it lost its lease ({why})"
            );
        }
    }

    /// Listens to the other instances' signals (once per `Runs`, from the first call inside a
    /// runtime on): a decision, an answer, new events or a cancellation reach the run or the
    /// stream this instance holds.
    pub(crate) fn listen(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if self.listening.set(()).is_err() {
            return;
        }
        let mut signals = self.store.signals().subscribe();
        if self.store.is_shared() {
            let runs = Arc::downgrade(self);
            let ttl = self.lease_ttl;
            runtime.spawn(async move {
                let mut ticks = tokio::time::interval(lease_renew(ttl));
                loop {
                    ticks.tick().await;
                    let Some(runs) = runs.upgrade() else { return };
                    runs.renew_and_sweep().await;
                }
            });
        }
        let runs = Arc::downgrade(self);
        runtime.spawn(async move {
            loop {
                let signal = match signals.recv().await {
                    Ok(signal) => signal,
                    // Fallen behind: the waiters' periodic look at the store covers it.
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                let Some(runs) = runs.upgrade() else { return };
                runs.on_signal(signal).await;
            }
        });
    }

    /// Renews the leases of the runs going here (a run whose lease was taken is stopped; all
    /// are, once the leases could not be renewed for nearly their length, before another
    /// instance may take them for dead), and interrupts the runs whose instance stopped
    /// renewing theirs (it died): their sessions can be resumed through any instance.
    async fn renew_and_sweep(&self) {
        let held: Vec<RunHold> = self
            .going
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(_, run)| !run.fenced.load(Ordering::SeqCst))
            .map(|(session, run)| RunHold {
                session: session.clone(),
                holder: run.holder.clone(),
            })
            .collect();
        let now = crate::store::now();
        match self.store.renew_runs(&held, now + self.lease_ttl).await {
            Ok(renewed) => {
                *self
                    .renewed_at
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = std::time::Instant::now();
                for run in held.iter().filter(|run| !renewed.contains(&run.session)) {
                    self.fence(
                        &run.session,
                        &run.holder,
                        "another instance took it for dead and marked the session interrupted",
                    );
                }
            }
            Err(error) => {
                tracing::warn!("the runs' leases could not be renewed: {error}");
                let unrenewed = self
                    .renewed_at
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .elapsed();
                let safe = std::time::Duration::from_secs(self.lease_ttl)
                    .saturating_sub(lease_renew(self.lease_ttl));
                if unrenewed >= safe {
                    let why = format!(
                        "its lease could not be renewed for {} s, and lasts {} s",
                        unrenewed.as_secs(),
                        self.lease_ttl
                    );
                    for run in &held {
                        self.fence(&run.session, &run.holder, &why);
                    }
                }
            }
        }
        match self.store.interrupt_lapsed(now, self.lease_ttl).await {
            Ok(0) => {}
            Ok(count) => tracing::warn!(
                "{count} run(s) of a stopped instance were marked interrupted; their sessions resume with their next message"
            ),
            Err(error) => tracing::warn!("lapsed runs could not be looked for: {error}"),
        }
    }

    async fn on_signal(&self, signal: Signal) {
        match signal {
            Signal::ApprovalDecided {
                id,
                state,
                reason,
                decided_by,
                ..
            } => self.waiting().deliver(&id, &state, reason, decided_by),
            Signal::ClientCallAnswered {
                tenant,
                session,
                id,
            } => {
                self.waiting_calls()
                    .deliver(self.store(), &tenant, &session, &id)
                    .await;
            }
            Signal::EventsAppended { session } => self.wakeup(&session).notify_waiters(),
            Signal::CancelRun { session } => {
                self.cancel(&session);
            }
            // Only tenant event streams follow the sessions list (`api::tenant_events`).
            Signal::SessionsChanged { .. } => {}
        }
    }

    /// Whether a run of `session` is going on any instance (this one's, or the store says so).
    pub async fn is_going_anywhere(&self, tenant: &str, session: &str) -> bool {
        self.is_going(session)
            || self
                .store
                .session(tenant, session)
                .await
                .ok()
                .flatten()
                .is_some_and(|row| row.state == SessionState::Running)
    }

    /// Cancels the run of `session` wherever it goes.
    pub async fn cancel_anywhere(&self, tenant: &str, session: &str) -> CancelOutcome {
        if self.cancel(session) {
            return CancelOutcome::Cancelled;
        }
        if !self.is_going_anywhere(tenant, session).await {
            return CancelOutcome::NotGoing;
        }
        if !self.store.signals_reach_every_instance() {
            return CancelOutcome::Unreachable;
        }
        self.store.signals().publish(Signal::CancelRun {
            session: session.to_owned(),
        });
        CancelOutcome::Cancelled
    }

    /// Starts a run of `session` with the user's `text`; refused while one is going, or when
    /// the principal's tenant or key has as many runs going (here) as its quota allows.
    pub async fn start(
        self: &Arc<Self>,
        principal: &Principal,
        session: &str,
        input: UserInput,
    ) -> Result<(), RunError> {
        let ready = [
            SessionState::Idle,
            SessionState::Failed,
            SessionState::Interrupted,
        ];
        let (started, messages) = match input {
            UserInput::Text(text) => (
                json!({"type": "run_started", "message": text, "caller": principal.caller}),
                vec![Message::user(text)],
            ),
            UserInput::Prompt(prompt) => (
                json!({"type": "run_started", "prompt": prompt.name, "caller": principal.caller}),
                prompt
                    .messages
                    .into_iter()
                    .map(|message| match message.role.as_str() {
                        "assistant" => Message::Assistant {
                            text: message.text,
                            tool_calls: Vec::new(),
                        },
                        _ => Message::user(message.text),
                    })
                    .collect(),
            ),
        };
        // Counted until the run ends; refused before anything is stored.
        let slot = self.quotas.admit_run(principal)?;
        self.launch(
            &principal.tenant,
            session,
            &ready,
            Continuation::Messages(messages),
            Some((principal.caller.clone(), principal.key.clone())),
            started,
            slot,
        )
        .await
    }

    /// Starts a run from state `from`, continuing the stored conversation with `continuation`;
    /// `slot` is its place among the runs going (crate::quota), freed when it ends.
    #[allow(clippy::too_many_arguments)]
    async fn launch(
        self: &Arc<Self>,
        tenant: &str,
        session: &str,
        from: &[SessionState],
        continuation: Continuation,
        starter: Option<(String, String)>,
        started: serde_json::Value,
        slot: crate::quota::Slot,
    ) -> Result<(), RunError> {
        // Who started it: the caller the audit names, and the key that never decides its
        // approvals.
        let (caller, started_by) = starter.unzip();
        let row = self
            .store
            .session(tenant, session)
            .await?
            .ok_or_else(|| RunError::UnknownSession(session.to_owned()))?;
        let holder = format!(
            "{}/run_{}",
            self.instance,
            self.run_numbers.fetch_add(1, Ordering::Relaxed) + 1
        );
        if !self
            .store
            .begin_run(
                tenant,
                session,
                from,
                &holder,
                crate::store::now() + self.lease_ttl,
            )
            .await?
        {
            return Err(RunError::Busy(session.to_owned()));
        }
        self.listen();
        let cancel = CancellationToken::new();
        self.going
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                session.to_owned(),
                GoingRun {
                    cancel: cancel.clone(),
                    holder: holder.clone(),
                    fenced: AtomicBool::new(false),
                },
            );
        self.record_held(tenant, session, &holder, &started).await;
        self.metrics.run_started();
        let runs = self.clone();
        let run = RunTicket {
            tenant: tenant.to_owned(),
            session: session.to_owned(),
            holder,
            started_by,
        };
        tokio::spawn(async move {
            let (tenant, session, holder) = (&run.tenant, &run.session, &run.holder);
            let ended = runs
                .run(&run, row.agent.as_deref(), continuation, caller, cancel)
                .await;
            let (state, event) = match ended {
                Ok(event) => (SessionState::Idle, event),
                Err(reason) => (
                    SessionState::Failed,
                    json!({"type": "run_failed", "error": reason}),
                ),
            };
            // Counted before its end event is stored: whoever reads the end reads it counted.
            let fenced = runs
                .going
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(session)
                .is_some_and(|going| {
                    &going.holder == holder && going.fenced.load(Ordering::SeqCst)
                });
            runs.metrics.run_ended(if fenced {
                "interrupted"
            } else {
                crate::metrics::run_outcome(&event)
            });
            runs.record_held(tenant, session, holder, &event).await;
            if let Err(error) = runs.store.end_run(tenant, session, holder, state).await {
                tracing::warn!("session {session}: the run's end could not be stored: {error}");
            }
            runs.store.signals().publish(Signal::SessionsChanged {
                tenant: tenant.clone(),
            });
            {
                let mut going = runs.going.lock().unwrap_or_else(PoisonError::into_inner);
                // A later run of the session on this instance is not this one's to remove.
                if going
                    .get(session)
                    .is_some_and(|going| &going.holder == holder)
                {
                    going.remove(session);
                }
            }
            drop(slot);
            runs.wakeup(session).notify_waiters();
        });
        Ok(())
    }

    /// After a restart, a session whose run stopped while its last turn's client calls waited
    /// goes on once every one of them is answered: the answers become the turn's results (a
    /// call of another tool in that turn, whose result was not kept, reads as lost). Whether a
    /// run started.
    pub(crate) async fn resume_after_answers(
        self: &Arc<Self>,
        tenant: &str,
        session: &str,
    ) -> Result<bool, RunError> {
        let Some(row) = self.store.session(tenant, session).await? else {
            return Ok(false);
        };
        if row.state != SessionState::Interrupted {
            return Ok(false);
        }
        let stored = self.store.messages(tenant, session).await?;
        let conversation: Vec<Message> = serde_json::from_value(stored).unwrap_or_default();
        let Some(Message::Assistant { tool_calls, .. }) = conversation.last() else {
            return Ok(false);
        };
        let mut calls = self.store.client_calls(tenant, session).await?;
        let mut results = Vec::new();
        for call in tool_calls {
            let arguments = call.parsed_arguments().unwrap_or(serde_json::Value::Null);
            let matching = calls
                .iter()
                .position(|row| row.tool == call.name && row.arguments == arguments);
            let (text, is_error) = match matching.map(|index| calls.remove(index)) {
                Some(row) => match row.answer {
                    None => return Ok(false),
                    Some(answer) => crate::client_tools::answer_text(&answer),
                },
                None => (OUTCOME_UNKNOWN.to_owned(), true),
            };
            results.push(Message::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                text,
                is_error,
                elided: false,
            });
        }
        self.launch(
            tenant,
            session,
            &[SessionState::Interrupted],
            Continuation::ToolResults(results),
            None,
            json!({"type": "run_resumed", "reason": "every client call of the interrupted turn was answered"}),
            // Counted, never refused: the answers are stored, and nothing else resumes it.
            self.quotas.hold_run(tenant),
        )
        .await?;
        Ok(true)
    }

    /// The tenant's skills as the store holds them: each name with its SKILL.md text.
    async fn stored_skills(&self, tenant: &str) -> Result<Vec<(String, String)>, String> {
        let mut skills = Vec::new();
        for skill in self
            .store
            .list_skills(tenant)
            .await
            .map_err(|error| error.to_string())?
        {
            let text = self
                .store
                .skill_text(tenant, &skill.name)
                .await
                .map_err(|error| error.to_string())?;
            skills.push((skill.name, text));
        }
        Ok(skills
            .into_iter()
            .filter_map(|(name, text)| Some((name, text?)))
            .collect())
    }

    /// Writes the tenant's skills (as the store held them) into its skill folder, replacing
    /// what was there, so the run's session discovers exactly them with the usual checks.
    fn write_tenant_skills(&self, tenant: &str, skills: &[(String, String)]) -> Result<(), String> {
        let Some(root) = self.opener.tenant_skill_root(tenant) else {
            return Ok(());
        };
        let failed =
            |error: std::io::Error| format!("the tenant's skills could not be written: {error}");
        if root.exists() {
            std::fs::remove_dir_all(&root).map_err(failed)?;
        }
        std::fs::create_dir_all(&root).map_err(failed)?;
        for (name, text) in skills {
            let folder = root.join(name);
            std::fs::create_dir_all(&folder).map_err(failed)?;
            std::fs::write(folder.join("SKILL.md"), text).map_err(failed)?;
        }
        Ok(())
    }

    /// Keeps a run's conversation in the store as it grows, while the run holds its lease (the
    /// agent goes on once it is stored).
    fn checkpoint(self: &Arc<Self>, run: &RunTicket) -> warden_agent::Checkpoint {
        let runs = Arc::downgrade(self);
        let (tenant, session, holder) =
            (run.tenant.clone(), run.session.clone(), run.holder.clone());
        Arc::new(move |conversation: &[Message]| {
            let messages = serde_json::to_value(conversation);
            let (runs, tenant, session, holder) = (
                runs.clone(),
                tenant.clone(),
                session.clone(),
                holder.clone(),
            );
            Box::pin(async move {
                let Some(runs) = runs.upgrade() else { return };
                let kept = match messages {
                    Ok(messages) => {
                        runs.keep_messages(&tenant, &session, &holder, &messages)
                            .await
                    }
                    Err(error) => Err(error.to_string()),
                };
                if let Err(error) = kept {
                    tracing::warn!(
                        "session {session}: the conversation could not be kept: {error}"
                    );
                }
            })
        })
    }

    /// Stores the run's conversation, while the run holds its session's lease; a run that
    /// lost it is stopped (fenced) and its conversation is not stored.
    async fn keep_conversation(
        &self,
        tenant: &str,
        session: &str,
        holder: &str,
        conversation: &[Message],
    ) -> Result<(), String> {
        let messages = serde_json::to_value(conversation).map_err(|error| error.to_string())?;
        self.keep_messages(tenant, session, holder, &messages).await
    }

    /// [`Self::keep_conversation`] of a conversation already in JSON.
    async fn keep_messages(
        &self,
        tenant: &str,
        session: &str,
        holder: &str,
        messages: &serde_json::Value,
    ) -> Result<(), String> {
        let kept = self
            .store
            .save_run_messages(tenant, session, holder, messages)
            .await
            .map_err(|error| error.to_string())?;
        if !kept {
            self.fence(
                session,
                holder,
                "another instance took it for dead and marked the session interrupted",
            );
            return Err("the run lost its session's lease".to_owned());
        }
        Ok(())
    }

    /// Cancels the run of `session`, if one is going; whether there was one.
    pub fn cancel(&self, session: &str) -> bool {
        self.going
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(session)
            .inspect(|run| run.cancel.cancel())
            .is_some()
    }

    /// Whether a run of `session` is going in this instance.
    pub fn is_going(&self, session: &str) -> bool {
        self.going
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(session)
    }

    /// One run: the agent session opened, the conversation continued with `text`, every event
    /// stored; `Ok` is the run's last event, `Err` why it failed.
    async fn run(
        self: &Arc<Self>,
        run: &RunTicket,
        agent: Option<&str>,
        continuation: Continuation,
        caller: Option<String>,
        cancel: CancellationToken,
    ) -> Result<serde_json::Value, String> {
        let (tenant, session) = (run.tenant.as_str(), run.session.as_str());
        let approver = Arc::new(RunApprover {
            runs: self.clone(),
            tenant: tenant.to_owned(),
            session: session.to_owned(),
            holder: run.holder.clone(),
            requested_by: run.started_by.clone(),
        });
        let tools = self.client_tools(tenant, session, &run.holder, agent);
        let mut opened = self
            .open_session(tenant, session, agent, caller, approver, tools)
            .await?;
        // "Allow for this session" outlives the run that asked: earlier runs' answers hold here.
        let allowed = self
            .store
            .allowed_for_session(tenant, session)
            .await
            .map_err(|error| error.to_string())?;
        let identities: Vec<_> = allowed
            .iter()
            .filter_map(|name| opened.host.tool_identity(name))
            .collect();
        opened.host.allow_for_session(identities);
        // The operator's lifecycle hooks see a run as `warden run` shows them a session: it
        // starts, its prompt is submitted, it stops, it ends.
        opened.lifecycle_hook(HookEvent::SessionStart, None).await;
        let outcome = match self.submitted(&opened, run, continuation).await {
            Ok(continuation) => {
                let outcome = self.converse(&mut opened, run, continuation, &cancel).await;
                opened.lifecycle_hook(HookEvent::Stop, None).await;
                outcome
            }
            Err(blocked) => Ok(blocked),
        };
        opened.lifecycle_hook(HookEvent::SessionEnd, None).await;
        opened.host.shutdown().await;
        outcome
    }

    /// Offers the caller's new messages to the operator's UserPromptSubmit hooks. A hook that
    /// blocks keeps them from the model and the conversation: the caller reads its reason as a
    /// `prompt_blocked` event, and the run ends there (its end event is returned).
    async fn submitted(
        &self,
        opened: &AgentSession,
        run: &RunTicket,
        continuation: Continuation,
    ) -> Result<Continuation, serde_json::Value> {
        let Continuation::Messages(messages) = &continuation else {
            return Ok(continuation);
        };
        let prompt: Vec<&str> = messages
            .iter()
            .filter_map(|message| match message {
                Message::User { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if prompt.is_empty() {
            return Ok(continuation);
        }
        let verdict = opened
            .lifecycle_hook(HookEvent::UserPromptSubmit, Some(prompt.join("\n\n")))
            .await;
        let Some(reason) = verdict.block_reason() else {
            return Ok(continuation);
        };
        self.record_held(
            &run.tenant,
            &run.session,
            &run.holder,
            &json!({"type": "prompt_blocked", "reason": reason}),
        )
        .await;
        Err(json!({
            "type": "run_finished",
            "final_text": "",
            "stop": "prompt_blocked",
            "turns": 0,
            "usage": warden_agent::Usage::default(),
        }))
    }

    /// Opens an agent session of `tenant` for `agent`'s profile, as a run does: the tenant's
    /// skills written to its folder, its registered servers with their in-memory tokens.
    async fn open_session(
        &self,
        tenant: &str,
        session: &str,
        agent: Option<&str>,
        caller: Option<String>,
        approver: Arc<dyn warden_policy::Approver>,
        tools: Vec<Arc<dyn warden_host::HostTool>>,
    ) -> Result<AgentSession, String> {
        let principal = warden_host::SessionPrincipal {
            tenant: Some(tenant.to_owned()),
            caller,
        };
        let servers = self.tenant_servers(tenant).await?;
        let folder = self
            .skill_folders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(tenant.to_owned())
            .or_default()
            .clone();
        loop {
            // Read from the store first: the folder's lock is never held across a wait.
            let skills = self.stored_skills(tenant).await?;
            let wanted = skills_fingerprint(&skills);
            {
                let held = folder.read().unwrap_or_else(PoisonError::into_inner);
                if held.as_deref() == Some(wanted.as_str()) {
                    // Opened while the tenant's skill folder is held for reading.
                    return OpenRequest {
                        session: session.to_owned(),
                        agent: agent.map(str::to_owned),
                        principal,
                        approver,
                        tools,
                        servers,
                        room: self.room(tenant, session),
                        skill_root: self.opener.tenant_skill_root(tenant),
                        knowledge: self
                            .opener
                            .tenant_knowledge(tenant)
                            .map(|knowledge| knowledge.place),
                    }
                    .open(&*self.opener)
                    .map_err(|error| error.to_string());
                }
            }
            let mut held = folder.write().unwrap_or_else(PoisonError::into_inner);
            if held.as_deref() != Some(wanted.as_str()) {
                self.write_tenant_skills(tenant, &skills)?;
                *held = Some(wanted);
            }
        }
    }

    /// The tenant's registered servers as its sessions reach them: each header read from a
    /// variable the operator lists or a secret the operator stored for the tenant (the
    /// secrets its headers name are read from the store here).
    async fn tenant_servers(&self, tenant: &str) -> Result<Vec<warden_mcp::ServerSpec>, String> {
        let rows = self
            .store
            .list_servers(tenant)
            .await
            .map_err(|error| error.to_string())?;
        let mut secrets: HashMap<String, Option<String>> = HashMap::new();
        for row in &rows {
            for value in row.headers.values() {
                let Some((_, crate::tenant_rules::Reference::Secret(name))) =
                    crate::tenant_rules::header_reference(value)
                else {
                    continue;
                };
                if secrets.contains_key(name) {
                    continue;
                }
                let read = match self.store.tenant_secret(tenant, name).await {
                    Ok(value) => value,
                    Err(error) => {
                        tracing::warn!("a tenant's secret could not be read: {error}");
                        None
                    }
                };
                secrets.insert(name.to_owned(), read);
            }
        }
        let tenancy = self.opener.tenancy();
        let allowed_env = tenancy.env_for(tenant);
        let egress =
            crate::tenant_rules::egress_guard(&tenancy, tenant, self.opener.egress_resolver());
        Ok(rows
            .iter()
            .map(|row| {
                crate::tenant_rules::server_spec(
                    row,
                    self.tokens.store(tenant, &row.name),
                    &allowed_env,
                    &|name| secrets.get(name).cloned().flatten(),
                    egress.clone(),
                )
            })
            .collect())
    }

    /// The room of `tenant`'s session `session`.
    pub(crate) fn room(&self, tenant: &str, session: &str) -> warden_session::Room {
        crate::tenant_rules::room_in(&self.opener.rooms_dir(), tenant, session)
    }

    /// What a session of `tenant` for `agent`'s profile would reach: each server's state after
    /// connecting, and every tool offered with the settings the gate applies. Nothing is called.
    pub async fn inspect(
        self: &Arc<Self>,
        tenant: &str,
        agent: Option<&str>,
    ) -> Result<Inspection, String> {
        let probe = format!("inspect-{}", warden_host::new_session_id());
        // Declared first, dropped last: after the session that used it.
        let _room = crate::tenant_rules::ProbeRoom(self.room(tenant, &probe));
        let tools = self.client_tools(tenant, &probe, "", agent);
        let opened = self
            .open_session(
                tenant,
                &probe,
                agent,
                None,
                Arc::new(warden_policy::NoApprover),
                tools,
            )
            .await?;
        let host = opened.host.clone();
        let (mcp_tools, _failures) = host.all_tools().await;
        let mut descriptions = HashMap::new();
        let mut tools = Vec::new();
        for descriptor in host.host_tools() {
            if let Some(description) = host.host_tool_description(&descriptor.public_name) {
                descriptions.insert(descriptor.public_name.clone(), description);
            }
            tools.push(host.governed(descriptor));
        }
        for visible in mcp_tools {
            if let Some(description) = &visible.tool.definition.description {
                descriptions.insert(
                    visible.descriptor.public_name.clone(),
                    description.to_string(),
                );
            }
            tools.push(host.governed(visible.descriptor));
        }
        // Resources and prompts too, so each server's counts are whole.
        let servers = host.servers();
        let names = servers.names();
        futures::future::join_all(names.iter().map(|name| servers.catalog(name))).await;
        let servers = host.servers().status();
        host.shutdown().await;
        Ok(Inspection {
            servers,
            tools,
            descriptions,
        })
    }

    /// Gets prompt `prompt` of `tenant`'s `server` once, through the gate as a person's request
    /// (`caller`, who asked for the snapshot), for a snapshot.
    pub async fn get_prompt_once(
        self: &Arc<Self>,
        tenant: &str,
        caller: &str,
        server: &str,
        prompt: &str,
        arguments: std::collections::BTreeMap<String, String>,
    ) -> Result<(Option<String>, Vec<crate::store::PromptMessage>), String> {
        let probe = format!("snapshot-{}", warden_host::new_session_id());
        // Declared first, dropped last: after the session that used it.
        let _room = crate::tenant_rules::ProbeRoom(self.room(tenant, &probe));
        let opened = self
            .open_session(
                tenant,
                &probe,
                None,
                Some(caller.to_owned()),
                Arc::new(crate::approvals::RequesterApproves {
                    caller: caller.to_owned(),
                }),
                Vec::new(),
            )
            .await?;
        let host = opened.host.clone();
        let mut context = warden_host::CallContext::new(
            warden_policy::CallSurface::User,
            CancellationToken::new(),
        );
        context.caller = Some(caller.to_owned());
        let got = host
            .get_prompt(context, server, prompt, arguments)
            .await
            .map(|result| {
                let messages = warden_host::prompt_messages(&result)
                    .into_iter()
                    .map(|(role, text)| crate::store::PromptMessage {
                        role: role.to_owned(),
                        text,
                    })
                    .collect();
                (result.description, messages)
            })
            .map_err(|refused| refused.0);
        host.shutdown().await;
        got
    }

    /// The client-side tools of `agent`'s profile, answered through `session`.
    fn client_tools(
        self: &Arc<Self>,
        tenant: &str,
        session: &str,
        holder: &str,
        agent: Option<&str>,
    ) -> Vec<Arc<dyn warden_host::HostTool>> {
        self.opener
            .client_tools(agent)
            .into_iter()
            .map(|spec| {
                Arc::new(ClientTool {
                    spec,
                    runs: self.clone(),
                    tenant: tenant.to_owned(),
                    session: session.to_owned(),
                    holder: holder.to_owned(),
                }) as Arc<dyn warden_host::HostTool>
            })
            .collect()
    }

    async fn converse(
        self: &Arc<Self>,
        opened: &mut AgentSession,
        run: &RunTicket,
        continuation: Continuation,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Value, String> {
        let (tenant, session, holder) = (
            run.tenant.as_str(),
            run.session.as_str(),
            run.holder.as_str(),
        );
        let (tools, failures) = opened.tool_list().await;
        for failure in failures {
            self.record_held(
                tenant,
                session,
                holder,
                &json!({"type": "warning", "message": failure}),
            )
            .await;
        }
        let routing = opened.execution_routing().await;
        let system_prompt = opened.system_prompt(routing);
        let (sender, mut events) = tokio::sync::mpsc::unbounded_channel::<AgentEvent>();
        let executor = opened.executor(Some(Arc::new(sender.clone())));
        let agent = Agent::new(opened.client.clone(), executor, system_prompt, tools)
            .with_options(AgentOptions {
                max_turns: Some(MAX_TURNS),
                ..AgentOptions::default()
            })
            .with_events(sender)
            .with_checkpoint(self.checkpoint(run));
        let stored = self
            .store
            .messages(tenant, session)
            .await
            .map_err(|error| error.to_string())?;
        let mut conversation: Vec<Message> = serde_json::from_value(stored)
            .map_err(|error| format!("the session's stored messages are unreadable: {error}"))?;
        match continuation {
            Continuation::Messages(messages) => {
                // The last run stopped mid-turn (its instance died): its calls in flight are
                // answered "outcome unknown", never run again.
                for (id, name) in close_unanswered_calls(&mut conversation) {
                    self.record_held(
                        tenant,
                        session,
                        holder,
                        &json!({"type": "tool_call_outcome_unknown", "id": id, "name": name, "reason": OUTCOME_UNKNOWN}),
                    )
                    .await;
                }
                conversation.extend(messages);
            }
            Continuation::ToolResults(results) => conversation.extend(results),
        }
        // Kept before the model is asked: a crash meanwhile loses nothing the caller sent.
        self.keep_conversation(tenant, session, holder, &conversation)
            .await?;
        let recorder = {
            let runs = self.clone();
            let host = opened.host.clone();
            let (tenant, session, holder) =
                (tenant.to_owned(), session.to_owned(), holder.to_owned());
            tokio::spawn(async move {
                let mut counting = CountedEvents::default();
                while let Some(event) = events.recv().await {
                    counting.count(&runs.metrics, &host, &event);
                    match serde_json::to_value(&event) {
                        Ok(value) => runs.record_held(&tenant, &session, &holder, &value).await,
                        Err(error) => tracing::warn!("an event could not be encoded: {error}"),
                    }
                }
            })
        };
        let result = agent.run(&mut conversation, cancel).await;
        drop(agent);
        // Every event of the run is stored before its end is.
        let _ = recorder.await;
        self.keep_conversation(tenant, session, holder, &conversation)
            .await?;
        let outcome = result.map_err(|error| format!("the model request failed: {error}"))?;
        Ok(json!({
            "type": "run_finished",
            "final_text": outcome.final_text,
            "stop": outcome.stop,
            "turns": outcome.turns,
            "usage": outcome.usage,
        }))
    }
}

/// What a run's events count in the metrics: each tool call's result (timed from its start)
/// and the tokens each turn used.
#[derive(Default)]
struct CountedEvents {
    /// When each call in flight started, by call id.
    started: HashMap<String, std::time::Instant>,
}

impl CountedEvents {
    fn count(
        &mut self,
        metrics: &crate::metrics::ServiceMetrics,
        host: &warden_host::Host,
        event: &AgentEvent,
    ) {
        match event {
            AgentEvent::ToolCallStarted { id, .. } => {
                self.started.insert(id.clone(), std::time::Instant::now());
            }
            AgentEvent::ToolCallFinished { id, name, result } => {
                let elapsed = self.started.remove(id).map(|started| started.elapsed());
                let (source, server) = match host.tool_identity(name) {
                    Some(identity) => {
                        let source = match identity.source {
                            warden_policy::ToolSource::Mcp { .. } => "mcp",
                            _ => identity.source.server_name(),
                        };
                        (source.to_owned(), identity.source.server_name().to_owned())
                    }
                    None => (
                        crate::metrics::UNKNOWN_SERVER.to_owned(),
                        crate::metrics::UNKNOWN_SERVER.to_owned(),
                    ),
                };
                metrics.tool_call(
                    crate::metrics::ToolCallLabels {
                        source,
                        server,
                        decision: result.decision.to_string(),
                    },
                    elapsed,
                );
            }
            AgentEvent::Usage { usage, .. } if usage.reported => {
                metrics.model_tokens(usage.input_tokens, usage.output_tokens);
            }
            _ => {}
        }
    }
}

/// What identifies the tenant's skills as stored: a hash of every name and text.
fn skills_fingerprint(skills: &[(String, String)]) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    for (name, text) in skills {
        hash.update(name.as_bytes());
        hash.update([0]);
        hash.update(text.len().to_le_bytes());
        hash.update(text.as_bytes());
    }
    hex::encode(hash.finalize())
}

/// Answers the calls of the conversation's last assistant turn that have no result (the run
/// stopped while they were in flight) with an error saying their outcome is unknown; returns
/// each such call's id and name.
fn close_unanswered_calls(conversation: &mut Vec<Message>) -> Vec<(String, String)> {
    let Some(last_turn) = conversation
        .iter()
        .rposition(|message| matches!(message, Message::Assistant { .. }))
    else {
        return Vec::new();
    };
    let Message::Assistant { tool_calls, .. } = &conversation[last_turn] else {
        return Vec::new();
    };
    let answered: std::collections::HashSet<&str> = conversation[last_turn..]
        .iter()
        .filter_map(|message| match message {
            Message::ToolResult { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    let open: Vec<(String, String)> = tool_calls
        .iter()
        .filter(|call| !answered.contains(call.id.as_str()))
        .map(|call| (call.id.clone(), call.name.clone()))
        .collect();
    for (id, name) in &open {
        conversation.push(Message::ToolResult {
            call_id: id.clone(),
            name: name.clone(),
            text: OUTCOME_UNKNOWN.to_owned(),
            is_error: true,
            elided: false,
        });
    }
    open
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn call(id: &str, name: &str) -> warden_agent::ToolCall {
        warden_agent::ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            arguments: "{}".to_owned(),
        }
    }

    fn result(id: &str, name: &str) -> Message {
        Message::ToolResult {
            call_id: id.to_owned(),
            name: name.to_owned(),
            text: "done".to_owned(),
            is_error: false,
            elided: false,
        }
    }

    #[test]
    fn only_the_last_turn_s_calls_without_a_result_are_answered_outcome_unknown() {
        let mut conversation = vec![
            Message::user("go"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("old", "read_file")],
            },
            result("old", "read_file"),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call("kept", "read_file"), call("lost", "slow")],
            },
            result("kept", "read_file"),
        ];
        let open = close_unanswered_calls(&mut conversation);
        assert_eq!(open, [("lost".to_owned(), "slow".to_owned())]);
        let Some(Message::ToolResult {
            call_id,
            text,
            is_error,
            ..
        }) = conversation.last()
        else {
            panic!("a result was added: {conversation:?}");
        };
        assert_eq!(call_id, "lost");
        assert_eq!(text, OUTCOME_UNKNOWN);
        assert!(is_error);
        // Every call answered (a run that ended as it should): nothing is added.
        let before = conversation.len();
        assert!(close_unanswered_calls(&mut conversation).is_empty());
        assert_eq!(conversation.len(), before);
        let mut plain = vec![Message::user("hi")];
        assert!(close_unanswered_calls(&mut plain).is_empty());
    }
}
