//! The one gate every call crosses: resolve, authorize, validate, PreToolUse hooks, approve,
//! execute under a timeout, PostToolUse hooks, and exactly one audit record.

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_hooks::{HookEvent, HookInput, HookRunner, HookTool, HookVerdict, result_value};
use warden_vocab::{CapabilityClass, CapabilitySet};

use crate::approval::{
    ApprovalAnswer, ApprovalFacts, ApprovalNeed, ApprovalRequest, ApprovalVerdict, Approver,
    BoxFuture, approval_need,
};
use crate::audit::{AuditEntry, AuditRecord, AuditSink, arguments_digest};
use crate::authorize::{check_ceiling, check_rules};
use crate::call::{CallKind, CallRequest, CallSurface, GateOutcome, Layer, ToolOutput};
use crate::capability::ToolAnnotations;
use crate::external::{ExternalQuestion, ask_external};
use crate::handler::{AllowEveryCall, AuthorizationHandler, AuthorizationQuestion, ask_handler};
use crate::permissions::GatePolicy;
use crate::reach::{CallReach, GuardedPath};
use crate::schema_cache::SchemaCache;
use crate::tool::{ToolDescriptor, ToolIdentity};
use crate::tool_settings::settings_for;
use warden_vocab::Decision;

/// The tools a call may name: the discovered, filtered, un-gated set. Tools hidden behind a
/// deferral or a skill that has not been loaded resolve to `None`.
pub trait Catalog: Send + Sync {
    /// The tool the model knows as `public_name`, if it is currently callable.
    fn resolve(&self, public_name: &str) -> Option<ToolDescriptor>;

    /// Why a name that does not resolve is not callable, when the catalogue knows better than
    /// "unknown tool" (a tool its server withdrew, a tool behind a deferral…).
    fn explain_unresolved(&self, _public_name: &str) -> Option<String> {
        None
    }

    /// What a call of `descriptor` with these (validated) arguments reaches: a path outside the
    /// workspace, a protected path, classes the call adds. Required, with no default, so that a
    /// catalogue wrapping another cannot forget to pass the question on.
    fn assess(&self, descriptor: &ToolDescriptor, arguments: &Value) -> CallReach;
}

/// A call the gate has admitted (neither made nor copied outside the gate: see [`Admission`]).
#[derive(Debug)]
pub struct DispatchCall {
    /// The gate's proof that it admitted this call: only the gate makes one, so only a call
    /// the gate admitted can reach a dispatcher, and through it a tool.
    pub admission: Admission,
    /// The session.
    pub session_id: String,
    /// The surface that made it.
    pub surface: CallSurface,
    /// Who within the surface, if known.
    pub caller: Option<String>,
    /// The tenant the call belongs to, if the surface knows one.
    pub tenant: Option<String>,
    /// Where the call's approvals and grants are remembered (see [`CallRequest::scope`]).
    pub scope: String,
    /// The resolved tool.
    pub descriptor: ToolDescriptor,
    /// The validated arguments.
    pub arguments: Value,
    /// Where progress notifications of this call go (the caller's channel, if it gave one).
    pub progress: Option<ProgressSender>,
}

/// The gate's proof that a call went through every layer: the field of [`DispatchCall`]
/// without which a dispatcher cannot run a host tool (`warden_host::Invocation` carries it).
/// Nothing outside the gate can make one:
///
/// ```compile_fail
/// let forged = warden_policy::Admission(());
/// ```
///
/// ```compile_fail
/// let forged: warden_policy::Admission = Default::default();
/// ```
#[derive(Debug)]
pub struct Admission(());

/// One progress notification of a running call.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// The channel a caller gives for a call's progress notifications.
pub type ProgressSender = tokio::sync::mpsc::UnboundedSender<ProgressUpdate>;

/// Why an admitted call did not run to a result. Each kind is audited as its decision says
/// and its text reaches the model as the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    /// The tool could not do what was asked, in words the model can act on (a skill that is
    /// not there, a file too large): the call failed.
    #[error("{0}")]
    ToModel(String),
    /// The dispatcher's own deadline passed and the call was cancelled: a timeout, not a
    /// failure.
    #[error("{0}")]
    TimedOut(String),
    /// The server could not be reached or failed (its process exited, its connection closed):
    /// what kind of failure, and the line said about it.
    #[error("{message}")]
    Server {
        kind: warden_vocab::FailureKind,
        message: String,
    },
}

impl DispatchError {
    /// A dispatch error the model reads as `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self::ToModel(message.into())
    }

    /// The dispatcher's own deadline passed and the call was cancelled.
    pub fn timed_out(message: impl Into<String>) -> Self {
        Self::TimedOut(message.into())
    }

    /// The decision the gate records for this error.
    pub fn decision(&self) -> Decision {
        match self {
            Self::TimedOut(_) => Decision::TimedOut,
            Self::ToModel(_) | Self::Server { .. } => Decision::Failed,
        }
    }
}

/// Executes admitted calls (built-in tools, MCP servers). Only the gate calls it.
pub trait Dispatcher: Send + Sync {
    /// Runs one call; stop early when `cancel` fires (timeout or caller cancellation).
    fn dispatch<'a>(
        &'a self,
        call: DispatchCall,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>>;
}

/// How long a cancelled or timed-out dispatch may take to wind down before it is dropped.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

tokio::task_local! {
    /// When the call being dispatched on this task times out.
    static CALL_DEADLINE: std::time::Instant;
}

/// The deadline of the gated call this task is dispatching, if any. A dispatcher that holds its
/// task while it works (code mode's sandbox) cannot be stopped by the gate's timer, so it keeps
/// to this deadline itself and reports [`DispatchError::timed_out`] when it stops there.
pub fn call_deadline() -> Option<std::time::Instant> {
    CALL_DEADLINE.try_with(|deadline| *deadline).ok()
}

/// What a gate is built from.
pub struct GateParts {
    /// Resolves public names.
    pub catalog: Arc<dyn Catalog>,
    /// Executes admitted calls.
    pub dispatcher: Arc<dyn Dispatcher>,
    /// Asks a person ([`crate::NoApprover`] when headless).
    pub approver: Arc<dyn Approver>,
    /// Receives one record per call.
    pub audit: Arc<dyn AuditSink>,
    /// PreToolUse and PostToolUse hooks (others are run by their surfaces).
    pub hooks: HookRunner,
    /// The operator's decisions.
    pub policy: GatePolicy,
    /// The session's working folder (given to hooks).
    pub cwd: PathBuf,
}

/// The single authorization boundary.
pub struct Gate {
    catalog: Arc<dyn Catalog>,
    dispatcher: Arc<dyn Dispatcher>,
    approver: Arc<dyn Approver>,
    audit: Arc<dyn AuditSink>,
    hooks: HookRunner,
    policy: GatePolicy,
    cwd: PathBuf,
    /// The embedding application's authorization handler ([`AllowEveryCall`] unless one is set).
    authorization: Arc<dyn AuthorizationHandler>,
    /// Per session: tools the user allowed for the rest of the session.
    remembered: Mutex<HashMap<String, HashSet<ToolIdentity>>>,
    /// Per session: tools the user allowed on a guarded path (outside the workspace, a
    /// credential file, a file that runs later), each on that path.
    remembered_guarded: Mutex<HashMap<String, Vec<(ToolIdentity, GuardedPath)>>>,
    /// Per session: tools unlocked by approved skill grants.
    granted: Mutex<HashMap<String, HashSet<ToolIdentity>>>,
    /// Compiled input schemas by tool identity (a changed schema is compiled afresh).
    schemas: SchemaCache,
    /// Calls inside [`Gate::call`] right now (the audit store writes a lone call's record on
    /// its own thread, and hands others to its group-commit writer).
    in_flight: AtomicUsize,
}

/// Counts a call in flight until it is dropped (also when the caller drops the call).
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn enter(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::AcqRel);
        Self(counter)
    }

    /// Whether this is the only call in flight.
    fn alone(&self) -> bool {
        self.0.load(Ordering::Acquire) == 1
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("policy", &self.policy)
            .field("cwd", &self.cwd)
            .finish_non_exhaustive()
    }
}

/// Everything known about a call so far, turned into one outcome and one audit record at the end.
struct Trace {
    started: Instant,
    time: SystemTime,
    /// The resolved tool's identity and annotations (None when it did not resolve).
    resolved: Option<(ToolIdentity, ToolAnnotations)>,
    classes: CapabilitySet,
    /// What the resolved tool does (a tool call until it resolves to something else).
    kind: CallKind,
    /// The effect class the resolved tool's author declared.
    effect: Option<CapabilityClass>,
    execution_duration: Option<Duration>,
    /// What went wrong on the way without deciding the call (a hook that could not run).
    warnings: Vec<String>,
    /// The record the call's intent was stored as, which its outcome completes.
    entry: AuditEntry,
    /// Why the intent could not be stored, when it could not.
    intent_error: Option<String>,
    /// The arguments' digest, computed once for the intent and the outcome.
    arguments_digest: String,
}

impl Gate {
    /// Builds the gate.
    pub fn new(parts: GateParts) -> Self {
        let GateParts {
            catalog,
            dispatcher,
            approver,
            audit,
            hooks,
            policy,
            cwd,
        } = parts;
        Self {
            catalog,
            dispatcher,
            approver,
            audit,
            hooks,
            policy,
            cwd,
            authorization: Arc::new(AllowEveryCall),
            remembered: Mutex::new(HashMap::new()),
            remembered_guarded: Mutex::new(HashMap::new()),
            granted: Mutex::new(HashMap::new()),
            schemas: SchemaCache::default(),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// The gate with the embedding application's authorization handler, asked about every call
    /// once its arguments are valid (see [`AuthorizationHandler`]).
    pub fn with_authorization(mut self, handler: Arc<dyn AuthorizationHandler>) -> Self {
        self.authorization = handler;
        self
    }

    /// The operator's policy in force.
    pub fn policy(&self) -> &GatePolicy {
        &self.policy
    }

    /// Whether the model should be shown this tool at all. Hidden: a tool whose classes are not
    /// all admitted by the ceiling, one whose first matching rule denies, and one on the deny list.
    /// (Visible does not mean it runs without asking.)
    pub fn visible(&self, descriptor: &ToolDescriptor) -> bool {
        check_ceiling(descriptor, self.policy.permissions.mode).is_ok()
            && self
                .operator_refusal(std::slice::from_ref(&descriptor.public_name))
                .is_none()
    }

    /// Why the operator's policy refuses anything named `names` (a rule that denies, a deny
    /// list entry), if it does: what a server publishes beside its tools (its skills) is read
    /// only where a call to the server's resources would be admitted.
    pub fn operator_refusal(&self, names: &[String]) -> Option<String> {
        for name in names {
            if let Err(reason) = check_rules(&self.policy.rules, name) {
                return Some(reason);
            }
            if let Some(pattern) = self
                .policy
                .permissions
                .deny
                .iter()
                .find(|pattern| pattern.matches(name))
            {
                return Some(format!(
                    "{name} is on the operator's deny list (pattern \"{pattern}\")"
                ));
            }
        }
        None
    }

    /// `descriptor` as the gate governs a call of it: the operator's `[tool_settings]` for its
    /// public name applied (the permission and timeout they set replace the tool's own, and
    /// `requires_approval` only ever adds asking). What a console shows of a tool.
    pub fn governed(&self, mut descriptor: ToolDescriptor) -> ToolDescriptor {
        let names = [descriptor.public_name.clone()];
        apply_tool_settings(&mut descriptor, &self.policy.tool_settings, &names);
        descriptor
    }

    /// Unlocks tools for a session after the user approved a skill's grant: they are not asked
    /// about again. Grants pass approval only; they never widen authorization.
    pub fn grant_for_session(
        &self,
        session_id: &str,
        identities: impl IntoIterator<Item = ToolIdentity>,
    ) {
        if let Ok(mut granted) = self.granted.lock() {
            granted
                .entry(session_id.to_owned())
                .or_default()
                .extend(identities);
        }
    }

    /// Carries "allow for this session" answers given before this gate existed (an earlier run
    /// of the same service session) into it: those tools are not asked about again in
    /// `session_id`. Like the answer itself, it passes approval only.
    pub fn remember_for_session(
        &self,
        session_id: &str,
        identities: impl IntoIterator<Item = ToolIdentity>,
    ) {
        if let Ok(mut remembered) = self.remembered.lock() {
            remembered
                .entry(session_id.to_owned())
                .or_default()
                .extend(identities);
        }
    }

    /// Forgets the remembered answers and grants of a session or of one
    /// [approval scope](CallRequest::approval_scope) (a serve client that went away).
    pub fn end_session(&self, session_id: &str) {
        if let Ok(mut remembered) = self.remembered.lock() {
            remembered.remove(session_id);
        }
        if let Ok(mut remembered) = self.remembered_guarded.lock() {
            remembered.remove(session_id);
        }
        if let Ok(mut granted) = self.granted.lock() {
            granted.remove(session_id);
        }
    }

    fn session_has(
        &self,
        map: &Mutex<HashMap<String, HashSet<ToolIdentity>>>,
        session_id: &str,
        identity: &ToolIdentity,
    ) -> bool {
        map.lock().is_ok_and(|map| {
            map.get(session_id)
                .is_some_and(|set| set.contains(identity))
        })
    }

    /// Runs one call through every layer, in order, and writes exactly one audit record.
    /// Never fails: every refusal, timeout and dispatch error is a [`GateOutcome`] with a reason.
    pub async fn call(&self, mut request: CallRequest) -> GateOutcome {
        let in_flight = InFlight::enter(&self.in_flight);
        // Taken, not copied: every layer reads `arguments`, never `request.arguments`.
        let arguments = match std::mem::take(&mut request.arguments) {
            Value::Null => Value::Object(serde_json::Map::new()),
            arguments => arguments,
        };
        let mut trace = Trace {
            started: Instant::now(),
            time: SystemTime::now(),
            resolved: None,
            classes: CapabilitySet::EMPTY,
            kind: CallKind::Tool,
            effect: None,
            execution_duration: None,
            warnings: Vec::new(),
            entry: AuditEntry::NONE,
            intent_error: None,
            // Every call ends in a record, so this is never computed in vain.
            arguments_digest: arguments_digest(&arguments),
        };
        let result = self
            .run_layers(&request, &arguments, &mut trace, &in_flight)
            .await
            .unwrap_or_else(Step::from);
        self.finish(&request, &arguments, trace, result, in_flight.alone())
            .await
    }

    /// The layers in their order: the step of a call that ran, or where a layer stopped it.
    async fn run_layers(
        &self,
        request: &CallRequest,
        arguments: &Value,
        trace: &mut Trace,
        in_flight: &InFlight<'_>,
    ) -> Result<Step, Stop> {
        // 1. Resolve: a callable tool, a call not yet cancelled, a surface the tool answers.
        let mut descriptor = self.resolve(request, trace)?;
        // 2. Authorization: ceiling, rules, external command.
        let (classes, names) = self.authorize(request, &mut descriptor, arguments).await?;
        // 3. Argument validation.
        self.validate(&descriptor, arguments)?;
        // 3a. The embedding application's authorization handler, on the valid arguments.
        self.ask_application(request, &descriptor, classes, arguments)
            .await?;
        // 3b. The workspace: what the call reaches may refuse it, and may add classes.
        let reach = self.assess_reach(&descriptor, arguments, trace)?;
        let classes = classes.union(reach.added_classes);
        // 4. PreToolUse hooks.
        self.pre_tool_use(request, &descriptor, arguments, trace)
            .await?;
        // 5. Approval (no timeout: a person may take as long as they need).
        let approved_because = self
            .approve(request, &descriptor, arguments, classes, &names, &reach)
            .await?;
        // 6. The intent, committed before anything runs.
        self.record_intent(
            request,
            arguments,
            trace,
            &descriptor,
            &approved_because,
            in_flight,
        )
        .await?;
        // 7. Execution under a timeout and the caller's cancellation. The descriptor moves into
        // the call; PostToolUse hooks only need its names.
        let post_hook_tool = self.post_hook_tool(request, &descriptor);
        let output = self
            .execute_admitted(request, descriptor, arguments, trace)
            .await?;
        // 8. PostToolUse hooks (exit 2 adds feedback for the model; the call has already run).
        let hook_feedback = self
            .post_tool_use(request, arguments, post_hook_tool, &output, trace)
            .await;
        Ok(Step {
            decision: Decision::Allowed,
            layer: Layer::Approval,
            reason: Some(approved_because),
            output: Some(output),
            hook_feedback,
        })
    }

    /// Layer 1: the tool the call names, unless the call was cancelled before it began or the
    /// tool does not answer the calling surface. What is known of the tool goes on the trace.
    fn resolve(&self, request: &CallRequest, trace: &mut Trace) -> Result<ToolDescriptor, Stop> {
        let Some(descriptor) = self.catalog.resolve(&request.public_name) else {
            let reason = self
                .catalog
                .explain_unresolved(&request.public_name)
                .unwrap_or_else(|| format!("unknown tool \"{}\"", request.public_name));
            return Err(Stop::new(Decision::Denied, Layer::Resolve, reason));
        };
        trace.kind = descriptor.kind;
        // Cancelled before it began (the turn was stopped while the model's calls queued): on
        // record as cancelled, nothing weighed or run.
        if request.cancel.is_cancelled() {
            let reason = format!("{} was cancelled before it started", request.public_name);
            return Err(Stop::new(Decision::Cancelled, Layer::Cancellation, reason));
        }
        if !descriptor.surfaces.contains(request.surface) {
            // The tool exists but answers another surface (the sampling answer answers a
            // server's request, a prompt is the user's to choose): to this caller it is not
            // there, and nothing about it is weighed.
            return Err(Stop::new(
                Decision::Denied,
                Layer::Resolve,
                format!(
                    "{} cannot be called from the {} surface",
                    request.public_name, request.surface
                ),
            ));
        }
        trace.classes = descriptor.classes();
        trace.resolved = Some((descriptor.identity.clone(), descriptor.annotations));
        trace.effect = descriptor.effect;
        Ok(descriptor)
    }

    /// Layer 2: the mode's ceiling, the operator's `[tool_settings]` applied to `descriptor`,
    /// the rules, and the external authorizer if one is set. The classes the ceiling admitted,
    /// and the names the operator's patterns match.
    async fn authorize(
        &self,
        request: &CallRequest,
        descriptor: &mut ToolDescriptor,
        arguments: &Value,
    ) -> Result<(CapabilitySet, Vec<String>), Stop> {
        let classes = match check_ceiling(descriptor, self.policy.permissions.mode) {
            Ok(classes) => classes,
            Err(reason) => return Err(Stop::new(Decision::Denied, Layer::Authorization, reason)),
        };
        // The names patterns are matched against: the public name, and for a resource read or
        // prompt get the server's own (`mcp__srv__read_mcp_resource`), so a rule, a list entry or
        // a hook written for the server covers what is read from it.
        let names = warden_vocab::policy_names(
            &descriptor.public_name,
            request
                .subject_server
                .as_deref()
                .map(|server| (server, descriptor.identity.tool.as_str())),
        );
        // The operator's `[tool_settings]` for these names: what they set replaces the tool's
        // own, and `requires_approval` only ever adds asking.
        apply_tool_settings(descriptor, &self.policy.tool_settings, &names);
        for name in &names {
            if let Err(reason) = check_rules(&self.policy.rules, name) {
                return Err(Stop::new(Decision::Denied, Layer::Rule, reason));
            }
        }
        if let Some(authorizer) = &self.policy.external {
            let question = ExternalQuestion {
                session: &request.session_id,
                caller: request.caller.as_deref(),
                tenant: request.tenant.as_deref(),
                surface: request.surface,
                kind: descriptor.kind,
                server: request.server_of(&descriptor.identity),
                tool: &descriptor.identity.tool,
                public_name: &descriptor.public_name,
                classes,
                required_permission: descriptor.required_permission.as_deref(),
                arguments,
            };
            // Boxed, as are the hook runs: their futures are large (an HTTP request, child
            // processes), and unboxed every call's future carried them, 40 KB moved per call
            // where 5 KB is left.
            if let Err(reason) = Box::pin(ask_external(authorizer, &question)).await {
                return Err(Stop::new(Decision::Denied, Layer::External, reason));
            }
        }
        Ok((classes, names))
    }

    /// Layer 3: the arguments against the tool's input schema.
    fn validate(&self, descriptor: &ToolDescriptor, arguments: &Value) -> Result<(), Stop> {
        self.schemas
            .validate(&descriptor.identity, &descriptor.input_schema, arguments)
            .map_err(|problem| {
                Stop::new(
                    Decision::Denied,
                    Layer::Validation,
                    format!("{}: {problem}", descriptor.public_name),
                )
            })
    }

    /// Layer 3a: the embedding application's authorization handler, on the valid arguments (an
    /// error or a panic denies; the caller's cancellation stops the wait).
    async fn ask_application(
        &self,
        request: &CallRequest,
        descriptor: &ToolDescriptor,
        classes: CapabilitySet,
        arguments: &Value,
    ) -> Result<(), Stop> {
        let question = AuthorizationQuestion {
            session_id: &request.session_id,
            tenant: request.tenant.as_deref(),
            surface: request.surface,
            caller: request.caller.as_deref(),
            kind: descriptor.kind,
            server: request.server_of(&descriptor.identity),
            tool: &descriptor.identity.tool,
            public_name: &descriptor.public_name,
            classes,
            effect: descriptor.effect,
            required_permission: descriptor.required_permission.as_deref(),
            arguments,
        };
        let decided = tokio::select! {
            decided = ask_handler(self.authorization.as_ref(), &question) => decided,
            () = request.cancel.cancelled() => {
                let reason = "cancelled while the application decided on it".to_owned();
                return Err(Stop::new(Decision::Cancelled, Layer::Cancellation, reason));
            }
        };
        decided.map_err(|reason| Stop::new(Decision::Denied, Layer::Application, reason))
    }

    /// Layer 3b: the workspace. A protected path is refused, a path outside the roots asks, and
    /// a call may add classes to its tool's (a write that replaces a file is destructive); the
    /// added classes go on the trace.
    fn assess_reach(
        &self,
        descriptor: &ToolDescriptor,
        arguments: &Value,
        trace: &mut Trace,
    ) -> Result<CallReach, Stop> {
        let mut reach = self.catalog.assess(descriptor, arguments);
        if let Some((layer, reason)) = reach.refused.take() {
            return Err(Stop::new(Decision::Denied, layer, reason));
        }
        trace.classes = trace.classes.union(reach.added_classes);
        Ok(reach)
    }

    /// Layer 4: the PreToolUse hooks for the tool, if any (exit 2 blocks the call; a hook that
    /// could not run is a warning on the trace).
    async fn pre_tool_use(
        &self,
        request: &CallRequest,
        descriptor: &ToolDescriptor,
        arguments: &Value,
        trace: &mut Trace,
    ) -> Result<(), Stop> {
        if !self
            .hooks
            .has_hooks_for_tool(HookEvent::PreToolUse, &hook_tool(request, descriptor))
        {
            return Ok(());
        }
        let input = HookInput {
            event: HookEvent::PreToolUse,
            session_id: request.session_id.clone(),
            cwd: self.cwd.clone(),
            tool: Some(hook_tool(request, descriptor)),
            arguments: Some(arguments.clone()),
            result: None,
            prompt: None,
            tenant: request.tenant.clone(),
            caller: request.caller.clone(),
        };
        let verdict = Box::pin(self.hooks.run(&input)).await;
        trace.warnings.extend(verdict.failures());
        if let HookVerdict::Block { reason, .. } = verdict {
            return Err(Stop::new(Decision::Denied, Layer::Hook, reason));
        }
        Ok(())
    }

    /// Layer 5: whether the call runs, is refused, or waits for a person's answer. Why it may
    /// run, for the audit trail.
    async fn approve(
        &self,
        request: &CallRequest,
        descriptor: &ToolDescriptor,
        arguments: &Value,
        classes: CapabilitySet,
        names: &[String],
        reach: &CallReach,
    ) -> Result<String, Stop> {
        let remembered = match &reach.guarded {
            Some(guarded) => self.remembered_guarded.lock().is_ok_and(|map| {
                map.get(request.scope()).is_some_and(|paths| {
                    paths.iter().any(|(identity, allowed)| {
                        identity == &descriptor.identity && allowed.covers(guarded)
                    })
                })
            }),
            None => self.session_has(&self.remembered, request.scope(), &descriptor.identity),
        };
        let need = approval_need(ApprovalFacts {
            permissions: &self.policy.permissions,
            classes,
            public_name: &descriptor.public_name,
            names,
            surface: request.surface,
            remembered,
            granted: self.session_has(&self.granted, request.scope(), &descriptor.identity),
            requires_approval: descriptor.requires_approval,
            guarded: reach.guarded.as_ref(),
            unconfined: reach.unconfined.as_deref(),
        });
        match need {
            ApprovalNeed::Run(why) => Ok(why),
            ApprovalNeed::Deny(why) => Err(Stop::new(Decision::Denied, Layer::Approval, why)),
            ApprovalNeed::Ask(why) => {
                self.ask_approval(request, descriptor, arguments, classes, reach, why)
                    .await
            }
        }
    }

    /// Asks the approver about the call (the caller's cancellation stops the wait) and takes
    /// its answer: an answer for the session is remembered, a refusal stops the call.
    async fn ask_approval(
        &self,
        request: &CallRequest,
        descriptor: &ToolDescriptor,
        arguments: &Value,
        classes: CapabilitySet,
        reach: &CallReach,
        why: String,
    ) -> Result<String, Stop> {
        let approval = ApprovalRequest {
            session_id: request.session_id.clone(),
            surface: request.surface,
            kind: descriptor.kind,
            caller: request.caller.clone(),
            identity: descriptor.identity.clone(),
            public_name: descriptor.public_name.clone(),
            annotations: descriptor.annotations,
            classes,
            effect: descriptor.effect,
            arguments: arguments.clone(),
            reason: why,
            guarded: reach.guarded.clone(),
            requires_approval: descriptor.requires_approval,
            offers_always: false,
            once_only: reach.unconfined.is_some(),
        };
        let watch = request.approval_watch.as_ref();
        if let Some(watch) = watch {
            watch.0.asked(&approval);
        }
        let (verdict, answered_by) = tokio::select! {
            (answer, answered_by) = self.approver.approve_naming(&approval) => {
                let who = answered_by.unwrap_or_else(|| "the user".to_owned());
                let named = !matches!(answer, ApprovalAnswer::NobodyToAsk { .. });
                let verdict = self.take_answer(request, descriptor, reach, answer, &who);
                (verdict, named.then_some(who))
            }
            () = request.cancel.cancelled() => {
                let reason = "cancelled while waiting for approval".to_owned();
                (Err(Stop::new(Decision::Cancelled, Layer::Cancellation, reason)), None)
            }
        };
        if let Some(watch) = watch {
            let (allowed, reason) = match &verdict {
                Ok(because) => (true, because.clone()),
                Err(stop) => (false, stop.reason.clone()),
            };
            let verdict = ApprovalVerdict {
                allowed,
                answered_by,
                reason,
            };
            watch.0.decided(&approval, &verdict);
        }
        verdict
    }

    /// What `who`'s answer means for the call: the reason it runs (an answer for the session
    /// is remembered), or why it stops.
    fn take_answer(
        &self,
        request: &CallRequest,
        descriptor: &ToolDescriptor,
        reach: &CallReach,
        answer: ApprovalAnswer,
        who: &str,
    ) -> Result<String, Stop> {
        match answer {
            ApprovalAnswer::AllowOnce => Ok(format!("approved by {who}")),
            // An unconfined call is allowed once, whatever the answer offered more: nothing is
            // remembered, the next one asks again.
            ApprovalAnswer::AllowForSession | ApprovalAnswer::AllowAlways
                if reach.unconfined.is_some() =>
            {
                Ok(format!(
                    "approved by {who} for this call only (it runs unconfined)"
                ))
            }
            ApprovalAnswer::AllowForSession | ApprovalAnswer::AllowAlways => {
                Ok(self.remember_for_scope(request, descriptor, reach, who))
            }
            ApprovalAnswer::Deny { reason } => {
                let reason = reason.map_or_else(
                    || format!("{who} declined this call"),
                    |why| format!("{who} declined this call: {why}"),
                );
                Err(Stop::new(Decision::Denied, Layer::Approval, reason))
            }
            ApprovalAnswer::NobodyToAsk { reason } => {
                Err(Stop::new(Decision::Denied, Layer::Approval, reason))
            }
        }
    }

    /// Remembers `who`'s "allow for this session" in the call's scope (for a call that reaches
    /// a guarded path: on that path only), and says so.
    fn remember_for_scope(
        &self,
        request: &CallRequest,
        descriptor: &ToolDescriptor,
        reach: &CallReach,
        who: &str,
    ) -> String {
        match &reach.guarded {
            Some(guarded) => {
                let because = format!(
                    "approved by {who} for this session on {}",
                    guarded.path.display()
                );
                if let Ok(mut remembered) = self.remembered_guarded.lock() {
                    remembered
                        .entry(request.scope().to_owned())
                        .or_default()
                        .push((descriptor.identity.clone(), guarded.clone()));
                }
                because
            }
            None => {
                if let Ok(mut remembered) = self.remembered.lock() {
                    remembered
                        .entry(request.scope().to_owned())
                        .or_default()
                        .insert(descriptor.identity.clone());
                }
                format!("approved by {who} for this session")
            }
        }
    }

    /// Layer 6: the intent, committed before anything runs: a process that dies mid-call leaves
    /// "started" on record, never nothing. With `[audit] required` (or a tool that requires it)
    /// a call that could not be recorded does not run.
    async fn record_intent(
        &self,
        request: &CallRequest,
        arguments: &Value,
        trace: &mut Trace,
        descriptor: &ToolDescriptor,
        approved_because: &str,
        in_flight: &InFlight<'_>,
    ) -> Result<(), Stop> {
        let intent = self.audit_record(
            request,
            arguments,
            trace,
            &Step {
                decision: Decision::Started,
                layer: Layer::Approval,
                reason: Some(approved_because.to_owned()),
                output: None,
                hook_feedback: None,
            },
        );
        match self.audit.begin_async(intent, in_flight.alone()).await {
            Ok(entry) => trace.entry = entry,
            Err(error) if descriptor.audit_required => {
                let reason = format!(
                    "{} runs only once its start is on record, and the audit trail cannot \
                     record it ({error})",
                    descriptor.public_name
                );
                return Err(Stop::new(Decision::Denied, Layer::Audit, reason));
            }
            Err(error) if self.policy.audit_required => {
                let reason = format!(
                    "the audit trail cannot record this call ({error}), and [audit] required = \
                     true refuses what would go unrecorded"
                );
                return Err(Stop::new(Decision::Denied, Layer::Audit, reason));
            }
            Err(error) => {
                tracing::warn!(%error, public_name = %request.public_name, "audit: the call's intent could not be written; the call goes on");
                trace.intent_error = Some(error.to_string());
            }
        }
        Ok(())
    }

    /// The tool as the PostToolUse hooks see it, when any apply to it.
    fn post_hook_tool(
        &self,
        request: &CallRequest,
        descriptor: &ToolDescriptor,
    ) -> Option<HookTool> {
        self.hooks
            .has_hooks_for_tool(HookEvent::PostToolUse, &hook_tool(request, descriptor))
            .then(|| hook_tool(request, descriptor))
    }

    /// Layer 7: the admitted call dispatched under its timeout (the tool's, else the policy's
    /// default) and the caller's cancellation; how long it ran goes on the trace.
    async fn execute_admitted(
        &self,
        request: &CallRequest,
        descriptor: ToolDescriptor,
        arguments: &Value,
        trace: &mut Trace,
    ) -> Result<ToolOutput, Stop> {
        let timeout = descriptor.timeout.unwrap_or(self.policy.default_timeout);
        let cancel = request.cancel.child_token();
        let call = DispatchCall {
            admission: Admission(()),
            session_id: request.session_id.clone(),
            surface: request.surface,
            caller: request.caller.clone(),
            tenant: request.tenant.clone(),
            scope: request.scope().to_owned(),
            descriptor,
            arguments: arguments.clone(),
            progress: request.progress.clone(),
        };
        let executing = Instant::now();
        let executed = self
            .execute(call, &request.cancel, cancel.clone(), timeout)
            .await;
        cancel.cancel();
        trace.execution_duration = Some(executing.elapsed());
        executed
    }

    /// Layer 8: the PostToolUse hooks. The call has already run:
    /// exit 2 gives the model feedback, the hook's reason (`tool`: the tool as the hooks see it, when
    /// any apply).
    async fn post_tool_use(
        &self,
        request: &CallRequest,
        arguments: &Value,
        tool: Option<HookTool>,
        output: &ToolOutput,
        trace: &mut Trace,
    ) -> Option<String> {
        let tool = tool?;
        let input = HookInput {
            event: HookEvent::PostToolUse,
            session_id: request.session_id.clone(),
            cwd: self.cwd.clone(),
            tool: Some(tool),
            arguments: Some(arguments.clone()),
            result: Some(
                output
                    .content
                    .clone()
                    .unwrap_or_else(|| result_value(&output.text, output.is_error)),
            ),
            prompt: None,
            tenant: request.tenant.clone(),
            caller: request.caller.clone(),
        };
        let verdict = Box::pin(self.hooks.run(&input)).await;
        trace.warnings.extend(verdict.failures());
        match verdict {
            HookVerdict::Block { reason, .. } => Some(reason),
            HookVerdict::Proceed { .. } => None,
        }
    }

    /// Runs the dispatch until it returns, the timeout passes or the caller cancels. A panicking
    /// dispatcher becomes a failed call, not a dead run.
    async fn execute(
        &self,
        call: DispatchCall,
        caller_cancel: &CancellationToken,
        cancel: CancellationToken,
        timeout: Duration,
    ) -> Result<ToolOutput, Stop> {
        let name = call.descriptor.public_name.clone();
        let dispatch = CALL_DEADLINE.scope(
            std::time::Instant::now() + timeout,
            AssertUnwindSafe(self.dispatcher.dispatch(call, cancel.clone())).catch_unwind(),
        );
        let mut dispatch = std::pin::pin!(dispatch);
        // Biased: when the caller cancelled, a dispatcher that noticed it first does not turn the
        // cancellation into a dispatch failure.
        let stopped = tokio::select! {
            biased;
            () = caller_cancel.cancelled() => {
                let reason = format!("{name} was cancelled by the caller");
                Stop::new(Decision::Cancelled, Layer::Cancellation, reason)
            }
            result = &mut dispatch => return match result {
                Ok(Ok(output)) => Ok(output),
                // A dispatcher that could only notice the cancellation by failing (it held the
                // task, as code mode's sandbox does) ends the call as cancelled, not failed.
                Ok(Err(_)) if caller_cancel.is_cancelled() => Err(Stop::new(
                    Decision::Cancelled,
                    Layer::Cancellation,
                    format!("{name} was cancelled by the caller"),
                )),
                Ok(Err(error @ DispatchError::TimedOut(_))) => {
                    Err(Stop::new(error.decision(), Layer::Timeout, error.to_string()))
                }
                Ok(Err(error)) => Err(Stop::new(error.decision(), Layer::Dispatch, error.to_string())),
                Err(_panic) => {
                    tracing::error!(public_name = %name, "the dispatcher panicked");
                    let reason = format!("{name} failed inside warden (the dispatcher panicked)");
                    Err(Stop::new(Decision::Failed, Layer::Dispatch, reason))
                }
            },
            () = tokio::time::sleep(timeout) => {
                let reason = format!("{name} did not finish within {timeout:?} and was cancelled");
                Stop::new(Decision::TimedOut, Layer::Timeout, reason)
            }
        };
        // Tell the dispatcher, and give it a moment to pass the cancellation on (an MCP
        // `notifications/cancelled`) before its future is dropped.
        cancel.cancel();
        let _ = tokio::time::timeout(CANCEL_GRACE, &mut dispatch).await;
        Err(stopped)
    }

    /// Writes the call's one audit record (waiting until it is stored, off the async workers)
    /// and builds the outcome.
    async fn finish(
        &self,
        request: &CallRequest,
        arguments: &Value,
        trace: Trace,
        step: Step,
        alone: bool,
    ) -> GateOutcome {
        let gate_duration = trace.started.elapsed();
        let record = self.audit_record(request, arguments, &trace, &step);
        let identity = trace.resolved.map(|(identity, _)| identity);
        let audit_error = match self.audit.complete_async(trace.entry, record, alone).await {
            Ok(()) => trace.intent_error,
            Err(error) => {
                tracing::warn!(%error, public_name = %request.public_name, "audit record could not be written; the call goes on");
                Some(error.to_string())
            }
        };
        GateOutcome {
            public_name: request.public_name.clone(),
            identity,
            classes: trace.classes,
            decision: step.decision,
            layer: step.layer,
            reason: step.reason,
            output: step.output,
            hook_feedback: step.hook_feedback,
            gate_duration,
            execution_duration: trace.execution_duration,
            audit_error,
            warnings: trace.warnings,
        }
    }
    /// The call's audit record as it stands: `step` says how it ended (or, for the intent, that
    /// it is starting).
    fn audit_record(
        &self,
        request: &CallRequest,
        arguments: &Value,
        trace: &Trace,
        step: &Step,
    ) -> AuditRecord {
        let (identity, annotations) = match &trace.resolved {
            Some((identity, annotations)) => (Some(identity), Some(*annotations)),
            None => (None, None),
        };
        let error = match step.decision {
            Decision::Failed | Decision::TimedOut => step.reason.clone(),
            Decision::Allowed | Decision::Denied | Decision::Cancelled | Decision::Started => None,
        };
        AuditRecord {
            time: trace.time,
            session_id: request.session_id.clone(),
            surface: request.surface,
            kind: trace.kind,
            effect: trace.effect,
            tenant: request.tenant.clone(),
            caller: request.caller.clone(),
            server: identity.map(|identity| request.server_of(identity).to_owned()),
            tool: identity.map(|identity| identity.tool.clone()),
            public_name: request.public_name.clone(),
            annotations,
            classes: trace.classes,
            decision: step.decision,
            layer: step.layer,
            reason: with_warnings(step.reason.clone(), &trace.warnings),
            gate_duration: trace.started.elapsed(),
            execution_duration: trace.execution_duration,
            result_bytes: step.output.as_ref().map(|output| output.size_bytes),
            result_is_error: step.output.as_ref().map(|output| output.is_error),
            error,
            arguments_digest: trace.arguments_digest.clone(),
            arguments: self.policy.audit_full_arguments.then(|| arguments.clone()),
            confinement: step
                .output
                .as_ref()
                .and_then(|output| output.confinement.clone()),
        }
    }
}

/// The audit reason with the warnings of the call appended (`…; note: …`).
fn with_warnings(reason: Option<String>, warnings: &[String]) -> Option<String> {
    if warnings.is_empty() {
        return reason;
    }
    let notes = warnings.join("; ");
    Some(match reason {
        Some(reason) => format!("{reason}; note: {notes}"),
        None => format!("note: {notes}"),
    })
}

/// Where the layers stopped.
struct Step {
    decision: Decision,
    layer: Layer,
    reason: Option<String>,
    output: Option<ToolOutput>,
    hook_feedback: Option<String>,
}

/// Where a layer stopped a call, and why: the call ends there, with no output.
struct Stop {
    decision: Decision,
    layer: Layer,
    reason: String,
}

impl Stop {
    fn new(decision: Decision, layer: Layer, reason: String) -> Self {
        Self {
            decision,
            layer,
            reason,
        }
    }
}

impl From<Stop> for Step {
    fn from(stop: Stop) -> Self {
        Self {
            decision: stop.decision,
            layer: stop.layer,
            reason: Some(stop.reason),
            output: None,
            hook_feedback: None,
        }
    }
}

/// Applies the `[tool_settings]` entries matching `names` to `descriptor`.
fn apply_tool_settings(
    descriptor: &mut ToolDescriptor,
    rules: &[crate::tool_settings::ToolSettingsRule],
    names: &[String],
) {
    let settings = settings_for(rules, names);
    if let Some(permission) = settings.required_permission {
        descriptor.required_permission = Some(permission);
    }
    if let Some(timeout) = settings.timeout {
        descriptor.timeout = Some(timeout);
    }
    if settings.requires_approval == Some(true) {
        descriptor.requires_approval = true;
    }
}

/// The tool of a call as hooks see it and match it: its public name, its server and its own
/// name.
fn hook_tool(request: &CallRequest, descriptor: &ToolDescriptor) -> HookTool {
    HookTool {
        public_name: descriptor.public_name.clone(),
        server: request.server_of(&descriptor.identity).to_owned(),
        tool: descriptor.identity.tool.clone(),
    }
}
