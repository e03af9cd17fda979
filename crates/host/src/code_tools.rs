//! The one shape of a tool defined in code. An embedding Rust application defines its tools
//! with [`CodeTool::new`] — name, description, an argument type whose JSON Schema is derived with
//! `schemars`, its effect class, the permission it requires, its timeout and whether it always
//! asks — and registers them on the host it opens ([`crate::HostOptions::tools`]). warden's own
//! host tools (resources, prompts, skills, code mode, search, knowledge, scripts, the agent's
//! built-ins) are built the same way with [`CodeTool::builtin`], which adds what only they
//! declare: their call kind, surfaces, subject server, assessment, audit requirement, when they
//! are offered, and a body that reaches the session's [`crate::Host`] through its
//! [`Invocation`]. Either way the arguments are parsed once, by `warden_vocab::parse_arguments`,
//! and the body runs only when the gate dispatches an admitted call: after authorization, after
//! approval, under the tool's timeout.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_policy::{
    BoxFuture, CallKind, CallReach, CallSurface, CapabilityClass, CapabilitySet, DispatchError,
    SurfaceSet, ToolOutput, ToolSource, normalise_declared,
};
use warden_vocab::{arguments_schema, parse_arguments};

use crate::tools::{HostTool, Invocation};

/// The longest name a tool may have (what the model providers accept).
const MAX_NAME_BYTES: usize = 64;

/// Why a tool definition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeToolDefinitionError {
    /// The name is empty, too long, or has a character outside `[A-Za-z0-9_-]`.
    #[error("tool name \"{0}\" is not usable: use 1 to 64 characters from A-Z, a-z, 0-9, _ and -")]
    InvalidName(String),
    /// The name would read as an MCP server's tool.
    #[error("tool name \"{0}\" starts with mcp__, which names MCP servers' tools; choose another")]
    ReservedPrefix(String),
    /// A zero timeout.
    #[error("tool \"{0}\" has a zero timeout; give it a positive duration")]
    ZeroTimeout(String),
}

/// A tool body's own failure (an order that does not exist…): the model reads it as the tool's
/// error result, and the call is on record as having run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CodeToolError(pub String);

impl CodeToolError {
    /// A failure with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// What an embedding application's tool body is told about the call it serves (never the
/// session's host).
#[derive(Debug, Clone)]
pub struct CodeToolCall {
    /// The session.
    pub session_id: String,
    /// The surface that made the call.
    pub surface: CallSurface,
    /// Who within the surface, if known.
    pub caller: Option<String>,
    /// The tenant the call belongs to, if the surface knows one.
    pub tenant: Option<String>,
    /// Fires when the call is cancelled or its timeout passes: a body that waits on something
    /// slow should stop then.
    pub cancel: CancellationToken,
}

impl CodeToolCall {
    fn of(invocation: Invocation) -> Self {
        Self {
            session_id: invocation.host.session_id().to_owned(),
            surface: invocation.surface,
            caller: invocation.caller,
            tenant: invocation.tenant,
            cancel: invocation.cancel,
        }
    }
}

type Body =
    dyn Fn(Invocation) -> BoxFuture<'static, Result<ToolOutput, DispatchError>> + Send + Sync;
type Assessment = dyn Fn(&Value) -> CallReach + Send + Sync;
type Offer = dyn Fn() -> bool + Send + Sync;

/// A tool defined in code. Build it with [`CodeTool::new`] (an embedding application's) or
/// [`CodeTool::builtin`] (warden's own), adjust it with the setters, and register it
/// (`Arc::new(tool)`).
pub struct CodeTool {
    name: String,
    description: String,
    /// A description settled after the tool was registered (the deferred servers'), which
    /// replaces `description` once set.
    settled_description: Option<Arc<OnceLock<String>>>,
    input_schema: Value,
    source: ToolSource,
    classes: CapabilitySet,
    effect: Option<CapabilityClass>,
    kind: CallKind,
    surfaces: SurfaceSet,
    subject_server: Option<fn(&Value) -> Option<String>>,
    assess: Option<Arc<Assessment>>,
    offered: Option<Arc<Offer>>,
    requires_audit: bool,
    required_permission: Option<String>,
    timeout: Option<Duration>,
    requires_approval: bool,
    body: Arc<Body>,
}

impl std::fmt::Debug for CodeTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeTool")
            .field("name", &self.name)
            .field("source", &self.source)
            .field("classes", &self.classes)
            .field("effect", &self.effect)
            .field("kind", &self.kind)
            .field("required_permission", &self.required_permission)
            .field("timeout", &self.timeout)
            .field("requires_approval", &self.requires_approval)
            .finish_non_exhaustive()
    }
}

impl CodeTool {
    /// An embedding application's tool named `name` whose arguments are an `A` (its JSON Schema
    /// derived from the type) and whose body answers with a `T` — a string is the model's text
    /// as it is, anything else is shown as JSON and kept as the result's structured content.
    ///
    /// `effect` is what the tool does (`ReadOnly`, `Write`, `Destructive`, `External`): the audit
    /// records it and approvers see it. It adds no check of its own; the gate derives the tool's
    /// capability classes from it as it does from an MCP tool's annotations (`External` alone
    /// fails closed to `destructive` + `external`), so the permission mode and code mode treat
    /// the tool like any other.
    pub fn new<A, T, F, Fut>(
        name: &str,
        description: &str,
        effect: CapabilityClass,
        body: F,
    ) -> Result<Self, CodeToolDefinitionError>
    where
        A: JsonSchema + DeserializeOwned + 'static,
        T: Serialize + Send + 'static,
        F: Fn(A, CodeToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, CodeToolError>> + Send + 'static,
    {
        check_name(name)?;
        let classes = normalise_declared(CapabilitySet::of(&[effect]));
        let mut tool = Self::builtin(
            name,
            description,
            classes,
            move |arguments: A, invocation| {
                let answer = body(arguments, CodeToolCall::of(invocation));
                async move {
                    match answer.await {
                        Ok(answer) => answer_output(&answer),
                        Err(CodeToolError(message)) => Ok(ToolOutput {
                            is_error: true,
                            ..ToolOutput::text(message)
                        }),
                    }
                }
            },
        );
        tool.source = ToolSource::Code;
        tool.effect = Some(effect);
        Ok(tool)
    }

    /// One of warden's own tools (source `builtin`): its arguments an `A` with a derived
    /// schema, its capability classes as declared, and a body given the gate's whole
    /// [`Invocation`] (the session's host, the approval scope, progress). Names are warden's
    /// constants, so they are not checked.
    pub fn builtin<A, F, Fut>(
        name: &str,
        description: &str,
        classes: CapabilitySet,
        body: F,
    ) -> Self
    where
        A: JsonSchema + DeserializeOwned + 'static,
        F: Fn(A, Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, DispatchError>> + Send + 'static,
    {
        Self::builtin_with_schema(name, description, arguments_schema::<A>(), classes, body)
    }

    /// [`CodeTool::builtin`] with the schema given, for arguments whose schema is not derived
    /// from their type (an enum of the collections a session searches, a built-in's own).
    pub fn builtin_with_schema<A, F, Fut>(
        name: &str,
        description: &str,
        input_schema: Value,
        classes: CapabilitySet,
        body: F,
    ) -> Self
    where
        A: DeserializeOwned + 'static,
        F: Fn(A, Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, DispatchError>> + Send + 'static,
    {
        let tool_name = name.to_owned();
        let body: Arc<Body> = Arc::new(move |invocation: Invocation| {
            match parse_arguments::<A>(&tool_name, &invocation.arguments) {
                Ok(arguments) => Box::pin(body(arguments, invocation)),
                Err(message) => Box::pin(std::future::ready(Err(DispatchError::new(message)))),
            }
        });
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            settled_description: None,
            input_schema,
            source: ToolSource::Builtin,
            classes,
            effect: None,
            kind: CallKind::Tool,
            surfaces: SurfaceSet::CALLERS,
            subject_server: None,
            assess: None,
            offered: None,
            requires_audit: false,
            required_permission: None,
            timeout: None,
            requires_approval: false,
            body,
        }
    }

    /// The permission a call requires, handed to the application's authorization handler (which
    /// grants or refuses it by caller).
    pub fn required_permission(mut self, permission: &str) -> Self {
        self.required_permission = Some(permission.to_owned());
        self
    }

    /// How long the body may run once admitted (default: the gate's host-tool timeout). The
    /// clock starts after approval: a person's time never counts against it.
    pub fn timeout(mut self, timeout: Duration) -> Result<Self, CodeToolDefinitionError> {
        if timeout.is_zero() {
            return Err(CodeToolDefinitionError::ZeroTimeout(self.name));
        }
        self.timeout = Some(timeout);
        Ok(self)
    }

    /// Ask a person before every call, whatever the permission mode, the allow list or a skill
    /// grant say (an "allow for this session" answer still counts).
    pub fn requires_approval(mut self) -> Self {
        self.requires_approval = true;
        self
    }

    /// What a call does for the audit and the external authorizer (a resource read, a prompt
    /// get, a skill load); a plain tool call otherwise.
    pub fn call_kind(mut self, kind: CallKind) -> Self {
        self.kind = kind;
        self
    }

    /// The only surfaces that may call it (all callers otherwise).
    pub fn only_for(mut self, surfaces: SurfaceSet) -> Self {
        self.surfaces = surfaces;
        self
    }

    /// How to read, from a call's arguments, the one MCP server it reaches on the caller's
    /// behalf (the audit, hooks and the external authorizer name it as the call's server).
    pub fn subject_server_from(mut self, subject: fn(&Value) -> Option<String>) -> Self {
        self.subject_server = Some(subject);
        self
    }

    /// What a call with these (validated) arguments reaches, for the gate to weigh before
    /// approval.
    pub fn assessed_by(
        mut self,
        assess: impl Fn(&Value) -> CallReach + Send + Sync + 'static,
    ) -> Self {
        self.assess = Some(Arc::new(assess));
        self
    }

    /// A call runs only once its intent is on record in the audit trail, whatever `[audit]
    /// required` says.
    pub fn audit_required(mut self) -> Self {
        self.requires_audit = true;
        self
    }

    /// Whether the model's tool list offers it now (asked at each listing; it stays callable
    /// through the gate either way).
    pub fn offered_when(mut self, offered: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.offered = Some(Arc::new(offered));
        self
    }

    /// The description becomes `settled`'s value once it is set.
    pub fn settled_description(mut self, settled: Arc<OnceLock<String>>) -> Self {
        self.settled_description = Some(settled);
        self
    }
}

fn check_name(name: &str) -> Result<(), CodeToolDefinitionError> {
    let usable = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !usable {
        return Err(CodeToolDefinitionError::InvalidName(name.to_owned()));
    }
    if name.starts_with(warden_vocab::PUBLIC_NAME_PREFIX) {
        return Err(CodeToolDefinitionError::ReservedPrefix(name.to_owned()));
    }
    Ok(())
}

/// A body's answer as the gate's output.
fn answer_output<T: Serialize>(answer: &T) -> Result<ToolOutput, DispatchError> {
    let value = serde_json::to_value(answer)
        .map_err(|error| DispatchError::new(format!("the tool's answer is not JSON: {error}")))?;
    let text = match &value {
        Value::String(text) => text.clone(),
        other => serde_json::to_string_pretty(other).map_err(|error| {
            DispatchError::new(format!("the tool's answer is not JSON: {error}"))
        })?,
    };
    let mut output = ToolOutput::text(text);
    if !value.is_string() {
        output.content = Some(value);
    }
    Ok(output)
}

impl HostTool for CodeTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn source(&self) -> ToolSource {
        self.source.clone()
    }

    fn description(&self) -> &str {
        self.settled_description
            .as_ref()
            .and_then(|settled| settled.get())
            .unwrap_or(&self.description)
    }

    fn input_schema(&self) -> Value {
        self.input_schema.clone()
    }

    fn classes(&self) -> CapabilitySet {
        self.classes
    }

    fn kind(&self) -> CallKind {
        self.kind
    }

    fn surfaces(&self) -> SurfaceSet {
        self.surfaces
    }

    fn subject_server(&self, arguments: &Value) -> Option<String> {
        self.subject_server.and_then(|subject| subject(arguments))
    }

    fn assess(&self, arguments: &Value) -> CallReach {
        self.assess
            .as_ref()
            .map_or_else(CallReach::default, |assess| assess(arguments))
    }

    fn requires_audit(&self) -> bool {
        self.requires_audit
    }

    fn effect(&self) -> Option<CapabilityClass> {
        self.effect
    }

    fn required_permission(&self) -> Option<&str> {
        self.required_permission.as_deref()
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    fn requires_approval(&self) -> bool {
        self.requires_approval
    }

    fn offered(&self) -> bool {
        self.offered.as_ref().is_none_or(|offered| offered())
    }

    fn execute<'a>(
        &'a self,
        invocation: Invocation,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        (self.body)(invocation)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(serde::Deserialize, JsonSchema)]
    struct NoArguments {}

    fn named(name: &str) -> Result<CodeTool, CodeToolDefinitionError> {
        CodeTool::new(
            name,
            "d",
            CapabilityClass::ReadOnly,
            |_: NoArguments, _| async { Ok("ok") },
        )
    }

    #[test]
    fn names_are_checked_when_the_tool_is_defined() {
        assert!(named("list_orders").is_ok());
        assert!(matches!(
            named("list orders"),
            Err(CodeToolDefinitionError::InvalidName(_))
        ));
        assert!(matches!(
            named(""),
            Err(CodeToolDefinitionError::InvalidName(_))
        ));
        assert!(matches!(
            named(&"x".repeat(65)),
            Err(CodeToolDefinitionError::InvalidName(_))
        ));
        assert!(matches!(
            named("mcp__orders__cancel"),
            Err(CodeToolDefinitionError::ReservedPrefix(_))
        ));
        assert!(matches!(
            named("t").unwrap().timeout(Duration::ZERO),
            Err(CodeToolDefinitionError::ZeroTimeout(_))
        ));
    }

    #[test]
    fn an_external_effect_alone_fails_closed_for_the_gate() {
        let tool = CodeTool::new(
            "notify",
            "d",
            CapabilityClass::External,
            |_: NoArguments, _| async { Ok("sent") },
        )
        .unwrap();
        assert_eq!(
            tool.classes(),
            CapabilitySet::of(&[CapabilityClass::Destructive, CapabilityClass::External])
        );
        assert_eq!(tool.effect(), Some(CapabilityClass::External));
    }

    /// What only warden's own tools declare is what the gate reads of them; an embedding
    /// application's tool keeps its source and effect.
    #[test]
    fn a_builtin_declares_what_the_gate_reads() {
        let offered = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let settled = Arc::new(OnceLock::new());
        let shown = offered.clone();
        let tool = CodeTool::builtin(
            "read_thing",
            "Reads a thing.",
            CapabilitySet::of(&[CapabilityClass::Write, CapabilityClass::External]),
            |_: NoArguments, _| async { Ok(ToolOutput::text("ok".to_owned())) },
        )
        .call_kind(CallKind::ResourceRead)
        .only_for(SurfaceSet::of(&[CallSurface::User]))
        .subject_server_from(|arguments| arguments["server"].as_str().map(str::to_owned))
        .assessed_by(|arguments| {
            CallReach::refused(format!("no {}", arguments["server"].as_str().unwrap()))
        })
        .audit_required()
        .offered_when(move || shown.load(std::sync::atomic::Ordering::SeqCst))
        .settled_description(settled.clone());
        let arguments = serde_json::json!({"server": "fx"});
        assert_eq!(tool.source(), ToolSource::Builtin);
        assert_eq!(tool.effect(), None);
        assert_eq!(
            tool.classes(),
            CapabilitySet::of(&[CapabilityClass::Write, CapabilityClass::External])
        );
        assert_eq!(tool.kind(), CallKind::ResourceRead);
        assert_eq!(tool.surfaces(), SurfaceSet::of(&[CallSurface::User]));
        assert_eq!(tool.subject_server(&arguments).as_deref(), Some("fx"));
        assert_eq!(tool.assess(&arguments), CallReach::refused("no fx"));
        assert!(tool.requires_audit());
        assert!(!tool.offered());
        offered.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(tool.offered());
        assert_eq!(tool.description(), "Reads a thing.");
        settled.set("Reads the settled things.".to_owned()).unwrap();
        assert_eq!(tool.description(), "Reads the settled things.");

        let embedded = named("lookup").unwrap();
        assert_eq!(embedded.source(), ToolSource::Code);
        assert_eq!(embedded.effect(), Some(CapabilityClass::ReadOnly));
        assert_eq!(
            (embedded.kind(), embedded.surfaces()),
            (CallKind::Tool, SurfaceSet::CALLERS)
        );
        assert!(embedded.offered() && !embedded.requires_audit());
    }
}
