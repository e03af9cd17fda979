//! A call as it enters the gate, and the outcome it leaves with.

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use warden_vocab::{CapabilitySet, Decision};

use crate::tool::ToolIdentity;

/// Which surface made a call: who is asking, whatever they ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallSurface {
    /// The agent loop: a model's tool call in `warden run` or `warden chat`.
    Agent,
    /// A script in the code-mode sandbox: read-only tools only, never asks.
    CodeMode,
    /// `warden tool …` over the loopback bridge.
    ToolCli,
    /// An MCP client of `warden serve`.
    Gateway,
    /// An A2A client of `warden serve --a2a`: the model's tool calls in a task it sent.
    A2a,
    /// The person at the terminal: a slash command, `warden mcp prompt`.
    User,
    /// An MCP server's own request (sampling) answered by the session.
    Server,
    /// warden itself: skill discovery and the skills extension when a server connects.
    Host,
}

impl CallSurface {
    /// Every surface.
    pub const ALL: [Self; 8] = [
        Self::Agent,
        Self::CodeMode,
        Self::ToolCli,
        Self::Gateway,
        Self::A2a,
        Self::User,
        Self::Server,
        Self::Host,
    ];

    /// The name stored in the audit trail's `source` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::CodeMode => "code-mode",
            Self::ToolCli => "tool-cli",
            Self::Gateway => "gateway",
            Self::A2a => "a2a",
            Self::User => "user",
            Self::Server => "server",
            Self::Host => "host",
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for CallSurface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CallSurface {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The surfaces a tool may be called from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SurfaceSet(u8);

impl SurfaceSet {
    /// The surfaces that act for a model or a person — what a tool admits unless it says
    /// otherwise. An MCP server's request reaches only the tool that answers it (sampling),
    /// never the session's other tools, and warden's own records call nothing.
    pub const CALLERS: Self = Self::of(&[
        CallSurface::Agent,
        CallSurface::CodeMode,
        CallSurface::ToolCli,
        CallSurface::Gateway,
        CallSurface::A2a,
        CallSurface::User,
    ]);

    /// Exactly these surfaces.
    pub const fn of(surfaces: &[CallSurface]) -> Self {
        let mut bits = 0;
        let mut index = 0;
        while index < surfaces.len() {
            bits |= surfaces[index].bit();
            index += 1;
        }
        Self(bits)
    }

    /// Whether `surface` may call.
    pub const fn contains(self, surface: CallSurface) -> bool {
        self.0 & surface.bit() != 0
    }
}

impl Default for SurfaceSet {
    fn default() -> Self {
        Self::CALLERS
    }
}

/// What a call does, whichever surface made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CallKind {
    /// A tool call.
    #[default]
    Tool,
    /// Reading an MCP resource.
    ResourceRead,
    /// Getting an MCP prompt.
    PromptGet,
    /// Answering an MCP server's sampling request with the session's model.
    Sampling,
    /// Loading a skill's body.
    SkillLoad,
    /// Listing a server's skills.
    SkillDiscovery,
    /// Negotiating the SEP-2640 skills extension.
    SkillsExtension,
    /// A request the service refused over a quota (no call was made).
    QuotaRefusal,
}

impl CallKind {
    /// Every kind.
    pub const ALL: [Self; 8] = [
        Self::Tool,
        Self::ResourceRead,
        Self::PromptGet,
        Self::Sampling,
        Self::SkillLoad,
        Self::SkillDiscovery,
        Self::SkillsExtension,
        Self::QuotaRefusal,
    ];

    /// The name stored in the audit trail's `kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::ResourceRead => "resource-read",
            Self::PromptGet => "prompt-get",
            Self::Sampling => "sampling",
            Self::SkillLoad => "skill-load",
            Self::SkillDiscovery => "skill-discovery",
            Self::SkillsExtension => "skills-extension",
            Self::QuotaRefusal => "quota-refusal",
        }
    }
}

impl fmt::Display for CallKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CallKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One call entering the gate.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The session it belongs to.
    pub session_id: String,
    /// The surface that made it (what it does comes from the tool it resolves to).
    pub surface: CallSurface,
    /// Where "allow for this session" answers and skill grants are remembered for this call:
    /// one client connection of `warden serve`, so one client's approvals never carry over to
    /// another. `None`: the session.
    pub approval_scope: Option<String>,
    /// Who, within the surface (a gateway client's name, a script id…), if known.
    pub caller: Option<String>,
    /// The tenant the call belongs to, when the surface knows one: the authorization handler
    /// sees it.
    pub tenant: Option<String>,
    /// The model-visible tool name.
    pub public_name: String,
    /// The arguments (`null` counts as `{}`).
    pub arguments: Value,
    /// Cancels a pending approval or the execution.
    pub cancel: CancellationToken,
    /// Where the call's progress notifications go, if the caller wants them.
    pub progress: Option<crate::gate::ProgressSender>,
    /// For a built-in tool that reaches one MCP server on the caller's behalf (a resource read,
    /// a prompt get): that server. The audit record, hooks and the external authorizer name it
    /// as the call's server instead of `builtin`.
    pub subject_server: Option<String>,
    /// Told when the gate asks a person about this call and when the answer comes (the
    /// session's event stream), if the caller wants to know.
    pub approval_watch: Option<crate::approval::ApprovalWatcher>,
}

impl CallRequest {
    /// The scope this call's remembered approvals and grants live in: its
    /// [`approval_scope`](Self::approval_scope), else its session.
    pub fn scope(&self) -> &str {
        self.approval_scope.as_deref().unwrap_or(&self.session_id)
    }

    /// The server this call is recorded and judged under: the MCP server a built-in tool reaches
    /// for the caller, else the tool's own (`builtin` for a built-in).
    pub fn server_of<'a>(&'a self, identity: &'a crate::tool::ToolIdentity) -> &'a str {
        self.subject_server
            .as_deref()
            .unwrap_or_else(|| identity.server())
    }
}

/// The gate layer that made the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Layer {
    /// The tool name did not resolve.
    Resolve,
    /// The capability ceiling.
    Authorization,
    /// An operator rule.
    Rule,
    /// The external authorization command.
    External,
    /// The embedding application's authorization handler.
    Application,
    /// Argument validation.
    Validation,
    /// The workspace check: a protected path the call may not reach (see [`crate::CallReach`]).
    Workspace,
    /// One of the gates a skill script passes before it may start.
    SkillScript,
    /// A PreToolUse hook.
    Hook,
    /// Approval (for allowed calls: the layer that finally let it through).
    Approval,
    /// The execution timeout.
    Timeout,
    /// The caller's cancellation.
    Cancellation,
    /// The dispatcher (execution failed).
    Dispatch,
    /// The audit trail: `[audit] required` and the call's intent could not be recorded.
    Audit,
    /// The service's quotas: the request was refused before anything was made.
    Quota,
}

impl Layer {
    /// The name stored in the audit trail.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Resolve => "resolve",
            Self::Authorization => "authorization",
            Self::Rule => "rule",
            Self::External => "external",
            Self::Application => "application",
            Self::Validation => "validation",
            Self::Workspace => "workspace",
            Self::SkillScript => "skill-script",
            Self::Hook => "hook",
            Self::Approval => "approval",
            Self::Timeout => "timeout",
            Self::Cancellation => "cancellation",
            Self::Dispatch => "dispatch",
            Self::Audit => "audit",
            Self::Quota => "quota",
        }
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a dispatcher returns: the converted result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The text the model reads.
    pub text: String,
    /// Whether the tool reported an error (`isError`).
    pub is_error: bool,
    /// The full converted result for the surface (content blocks, artifacts…), if any.
    pub content: Option<Value>,
    /// Size of the result as received, in bytes (for the audit trail).
    pub size_bytes: u64,
    /// What the kernel enforced around the process the call ran (a sandboxed command), in one
    /// line, for the audit trail.
    pub confinement: Option<String>,
}

impl ToolOutput {
    /// A successful plain-text output; its size is the text's.
    pub fn text(text: String) -> Self {
        Self {
            size_bytes: text.len() as u64,
            text,
            is_error: false,
            content: None,
            confinement: None,
        }
    }
}

/// The result of one call through the gate. Never an `Err`: denials, timeouts and dead servers
/// are ordinary outcomes with a reason the model can read.
#[derive(Debug, Clone)]
pub struct GateOutcome {
    /// The name that was called.
    pub public_name: String,
    /// The resolved identity (None when the name did not resolve).
    pub identity: Option<ToolIdentity>,
    /// The tool's capability classes (empty when unresolved).
    pub classes: CapabilitySet,
    /// How it ended.
    pub decision: Decision,
    /// Which layer decided.
    pub layer: Layer,
    /// Why (shown to the model for anything but an allowed call).
    pub reason: Option<String>,
    /// The tool's output, when it ran.
    pub output: Option<ToolOutput>,
    /// Feedback from a PostToolUse hook that exited 2.
    pub hook_feedback: Option<String>,
    /// What went wrong without deciding the call (a hook that could not run), for the surface
    /// to show; also in the audit record's reason.
    pub warnings: Vec<String>,
    /// Time spent in the gate, execution included.
    pub gate_duration: Duration,
    /// Time spent executing, when it ran.
    pub execution_duration: Option<Duration>,
    /// Set when the audit record could not be written (the call itself is unaffected).
    pub audit_error: Option<String>,
}

impl GateOutcome {
    /// Whether the model should see this as an error result.
    pub fn is_error(&self) -> bool {
        match (&self.decision, &self.output) {
            (Decision::Allowed, Some(output)) => output.is_error,
            _ => true,
        }
    }

    /// The text for the model: the tool's output, or the reason it did not run.
    pub fn model_text(&self) -> String {
        let mut text = match (self.decision, &self.output) {
            (Decision::Allowed, Some(output)) => output.text.clone(),
            (decision, _) => {
                let reason = self.reason.as_deref().unwrap_or("no reason given");
                match decision {
                    Decision::Denied => format!("Tool call denied ({}): {reason}", self.layer),
                    Decision::TimedOut => format!("Tool call timed out: {reason}"),
                    Decision::Cancelled => format!("Tool call cancelled: {reason}"),
                    Decision::Failed | Decision::Allowed | Decision::Started => {
                        format!("Tool call failed: {reason}")
                    }
                }
            }
        };
        if let Some(feedback) = &self.hook_feedback {
            text.push_str("\n\n[PostToolUse hook] ");
            text.push_str(feedback);
        }
        text
    }
}
