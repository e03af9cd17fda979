//! The embedding API's tools: a Rust application defines a tool in code — name, description, an
//! argument type whose JSON Schema is derived with `schemars`, its effect class, the permission it
//! requires, its timeout and whether it always asks — and registers it on the host it opens
//! ([`crate::HostOptions::tools`]). The body is private to the tool and runs only when the gate
//! dispatches an admitted call: after the application's authorization handler, after approval,
//! under the tool's timeout.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_policy::{
    BoxFuture, CallSurface, CapabilityClass, CapabilitySet, DispatchError, ToolOutput,
    normalise_declared,
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

/// What a tool body is told about the call it serves.
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

type Body = dyn Fn(Value, CodeToolCall) -> BoxFuture<'static, Result<ToolOutput, DispatchError>>
    + Send
    + Sync;

/// A tool defined in code. Build it with [`CodeTool::new`], adjust it with the setters, and put
/// it in [`crate::HostOptions::tools`] (`Arc::new(tool)`).
pub struct CodeTool {
    name: String,
    description: String,
    input_schema: Value,
    effect: CapabilityClass,
    required_permission: Option<String>,
    timeout: Option<Duration>,
    requires_approval: bool,
    body: Arc<Body>,
}

impl std::fmt::Debug for CodeTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeTool")
            .field("name", &self.name)
            .field("effect", &self.effect)
            .field("required_permission", &self.required_permission)
            .field("timeout", &self.timeout)
            .field("requires_approval", &self.requires_approval)
            .finish_non_exhaustive()
    }
}

impl CodeTool {
    /// A tool named `name` whose arguments are an `A` (its JSON Schema derived from the type)
    /// and whose body answers with a `T` — a string is the model's text as it is, anything else
    /// is shown as JSON and kept as the result's structured content.
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
        A: JsonSchema + DeserializeOwned + Send + 'static,
        T: Serialize + Send + 'static,
        F: Fn(A, CodeToolCall) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, CodeToolError>> + Send + 'static,
    {
        check_name(name)?;
        let tool_name = name.to_owned();
        let body = Arc::new(body);
        let erased: Arc<Body> = Arc::new(move |arguments: Value, call: CodeToolCall| {
            let parsed = parse_arguments::<A>(&tool_name, &arguments);
            let body = body.clone();
            Box::pin(async move {
                let arguments = parsed.map_err(DispatchError::new)?;
                match body(arguments, call).await {
                    Ok(answer) => answer_output(&answer),
                    Err(CodeToolError(message)) => Ok(ToolOutput {
                        is_error: true,
                        ..ToolOutput::text(message)
                    }),
                }
            })
        });
        Ok(Self {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema: arguments_schema::<A>(),
            effect,
            required_permission: None,
            timeout: None,
            requires_approval: false,
            body: erased,
        })
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

    fn source(&self) -> warden_policy::ToolSource {
        warden_policy::ToolSource::Code
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.input_schema.clone()
    }

    fn classes(&self) -> CapabilitySet {
        normalise_declared(CapabilitySet::of(&[self.effect]))
    }

    fn effect(&self) -> Option<CapabilityClass> {
        Some(self.effect)
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

    fn execute<'a>(
        &'a self,
        invocation: Invocation,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        let call = CodeToolCall {
            session_id: invocation.host.session_id().to_owned(),
            surface: invocation.surface,
            caller: invocation.caller,
            tenant: invocation.tenant,
            cancel: invocation.cancel,
        };
        (self.body)(invocation.arguments, call)
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
}
