//! Approval: who must say yes before an admitted call runs, and asking a person.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;
use warden_vocab::{CapabilityClass, CapabilitySet, PermissionMode, ToolGlob};

use crate::call::{CallKind, CallSurface};
use crate::capability::ToolAnnotations;
use crate::permissions::Permissions;
use crate::reach::{GuardedPath, PathConcern};
use crate::tool::ToolIdentity;

/// A boxed, sendable future (the traits here are used as `dyn`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the approval layer concludes before anyone is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalNeed {
    /// Runs without asking; the reason is recorded.
    Run(String),
    /// A person must approve; the reason says why.
    Ask(String),
    /// Refused without asking.
    Deny(String),
}

/// The facts approval decides on.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalFacts<'a> {
    /// Mode, lists and always-ask classes.
    pub permissions: &'a Permissions,
    /// The tool's classes.
    pub classes: CapabilitySet,
    /// Its public name (for the reasons given).
    pub public_name: &'a str,
    /// The names the lists match: the public name, and the server's own for a resource read or
    /// prompt get (see [`warden_vocab::policy_names`]).
    pub names: &'a [String],
    /// The calling surface.
    pub surface: CallSurface,
    /// The user said "allow for this session" earlier (for a call that reaches a guarded path:
    /// about this tool and that path).
    pub remembered: bool,
    /// An approved skill grant unlocked it for this session.
    pub granted: bool,
    /// The tool asks before every call (declared in code or by `[tool_settings]`).
    pub requires_approval: bool,
    /// The guarded path this call reaches (outside the roots, a credential file, a file that
    /// runs later), if any.
    pub guarded: Option<&'a GuardedPath>,
    /// Why the call runs outside warden's confinement, if it does (see
    /// [`crate::CallReach::unconfined`]).
    pub unconfined: Option<&'a str>,
}

/// Decides, in this order:
/// 1. a deny-list match (`[permissions] deny`, `--disallowed-tools`) denies — deny always wins;
/// 2. code mode refuses any tool that is not read-only;
/// 3. `read-only` mode refuses any tool that is not read-only;
/// 4. a call that runs outside warden's confinement (in an editor's terminal) asks — in every
///    mode, whatever the allow list, grants and earlier answers say;
/// 5. a call that reaches a guarded path — outside the workspace roots, a credential file it
///    reads, a file that runs later it writes — asks, in every mode, whatever the allow list and
///    grants say (they name tools, not paths), unless the user allowed this tool on this path
///    (or, for a folder it read, beneath it) for this session;
/// 6. a tool that requires approval asks — whatever the allow list, grants and mode say —
///    unless the person allowed it for this session;
/// 7. an allow-list match (`[permissions] allow`, `--allowed-tools`) runs — explicit names beat
///    the always-ask classes and the `external` rule;
/// 8. a skill grant or a remembered "allow for session" answer runs (a person said yes);
/// 9. an `external` tool (one that reaches another party: an MCP tool's `openWorldHint`, an
///    `external` effect, a client-side tool) asks — in every mode, read-only or not: private
///    data, untrusted input and a way out must not meet without a person;
/// 10. the mode: `ask` runs read-only tools and asks for the rest; `auto` asks when the tool has
///     an always-ask class and runs otherwise; `read-only` runs (what is left is read-only);
/// 11. code mode never escalates: where a person would be asked, it is denied instead.
pub fn approval_need(facts: ApprovalFacts<'_>) -> ApprovalNeed {
    let ApprovalFacts {
        permissions,
        classes,
        public_name,
        names,
        surface,
        remembered,
        granted,
        requires_approval,
        guarded,
        unconfined,
    } = facts;
    if let Some(pattern) = first_match(&permissions.deny, names) {
        return ApprovalNeed::Deny(format!(
            "{public_name} is on the operator's deny list (pattern \"{pattern}\")"
        ));
    }
    if surface == CallSurface::CodeMode && !classes.is_read_only() {
        return ApprovalNeed::Deny(format!(
            "code mode may call read-only tools only; {public_name} is {classes}"
        ));
    }
    if permissions.mode == PermissionMode::ReadOnly && !classes.is_read_only() {
        return ApprovalNeed::Deny(format!(
            "{public_name} is {classes}, and the permission mode is read-only"
        ));
    }
    let need = if let Some(why) = unconfined {
        ApprovalNeed::Ask(format!(
            "{public_name} {why}; warden asks before every such call"
        ))
    } else if let Some(guarded) = guarded {
        if remembered {
            ApprovalNeed::Run(format!(
                "approved earlier for this session on {}",
                guarded.path.display()
            ))
        } else {
            let always = match guarded.concern {
                PathConcern::Outside => "calls outside it always ask",
                PathConcern::Secret { .. } => "reading a credential file always asks",
                PathConcern::RunsLater { .. } => "writing a file that runs later always asks",
            };
            ApprovalNeed::Ask(format!("{public_name} {}; {always}", guarded.describe()))
        }
    } else if requires_approval {
        if remembered {
            ApprovalNeed::Run("approved earlier for this session".to_owned())
        } else {
            ApprovalNeed::Ask(format!("{public_name} requires approval before every call"))
        }
    } else if let Some(pattern) = first_match(&permissions.allow, names) {
        ApprovalNeed::Run(format!(
            "allowed by the operator's allow list (pattern \"{pattern}\")"
        ))
    } else if granted {
        ApprovalNeed::Run("unlocked for this session by an approved skill grant".to_owned())
    } else if remembered {
        ApprovalNeed::Run("approved earlier for this session".to_owned())
    } else if classes.contains(CapabilityClass::External) {
        ApprovalNeed::Ask(format!(
            "{public_name} is {classes}: an external tool reaches another party, so it asks a \
             person in every mode unless an allow rule names it"
        ))
    } else {
        match permissions.mode {
            PermissionMode::Ask if classes.is_read_only() => {
                ApprovalNeed::Run("read-only tool in ask mode".to_owned())
            }
            PermissionMode::Ask => ApprovalNeed::Ask(format!(
                "{public_name} is {classes}; ask mode asks before it runs"
            )),
            PermissionMode::Auto => {
                let asked = classes.intersection(permissions.always_ask);
                if asked.is_empty() {
                    ApprovalNeed::Run("admitted by policy in auto mode".to_owned())
                } else {
                    ApprovalNeed::Ask(format!(
                        "{public_name} is {asked}, which auto mode always asks about"
                    ))
                }
            }
            PermissionMode::ReadOnly => {
                ApprovalNeed::Run("read-only tool in read-only mode".to_owned())
            }
        }
    };
    match need {
        ApprovalNeed::Ask(why) if surface == CallSurface::CodeMode => {
            ApprovalNeed::Deny(format!("code mode never asks for approval ({why})"))
        }
        other => other,
    }
}

fn first_match<'p>(patterns: &'p [ToolGlob], names: &[String]) -> Option<&'p ToolGlob> {
    patterns
        .iter()
        .find(|pattern| names.iter().any(|name| pattern.matches(name)))
}

/// What a person is asked about: the server, the original tool name, the public name, the
/// annotations and classes, and the arguments.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    /// The session.
    pub session_id: String,
    /// The calling surface.
    pub surface: CallSurface,
    /// What the call does.
    pub kind: CallKind,
    /// Who within the surface, if known.
    pub caller: Option<String>,
    /// Server and original tool name.
    pub identity: ToolIdentity,
    /// The model-visible name.
    pub public_name: String,
    /// The server's annotations, as sent.
    pub annotations: ToolAnnotations,
    /// The classes the gate derived.
    pub classes: CapabilitySet,
    /// The effect class the tool's author declared (a tool defined in code), if any.
    pub effect: Option<CapabilityClass>,
    /// The call's arguments (validated).
    pub arguments: Value,
    /// Why approval is needed.
    pub reason: String,
    /// The guarded path the call reaches (outside the workspace, a credential file, a file that
    /// runs later), if that is why it asks.
    pub guarded: Option<GuardedPath>,
    /// The tool asks before every call (declared in code or by `[tool_settings]`): no allow
    /// list entry would let it run unasked.
    pub requires_approval: bool,
    /// Whether the question may be answered "always" (remembered beyond this session): only a
    /// skill's tool grant offers it. Everywhere else the longest answer is "for this session".
    pub offers_always: bool,
    /// Only this call may be allowed (it runs outside warden's confinement): an answer for the
    /// session or beyond counts as "allow once", so a frontend offers only once and reject.
    pub once_only: bool,
}

/// A person's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalAnswer {
    /// Run this call.
    AllowOnce,
    /// Run this call and do not ask about this tool again in this session.
    AllowForSession,
    /// Allow it and remember the answer beyond this session; only where the question
    /// [offers it](ApprovalRequest::offers_always) — elsewhere it counts as
    /// [`ApprovalAnswer::AllowForSession`].
    AllowAlways,
    /// Do not run it.
    Deny {
        /// Shown to the model, if the person gave one.
        reason: Option<String>,
    },
    /// There is nobody to ask (headless, CI); the call is denied with this reason.
    NobodyToAsk {
        /// Why nobody can answer.
        reason: String,
    },
}

/// The gate's word on a question it asked: whether the call runs, who answered, and the reason
/// the audit records ("approved by the user for this session", "cancelled while waiting…").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalVerdict {
    /// Whether the call goes on.
    pub allowed: bool,
    /// Who answered, as the audit names them (`None`: nobody answered: cancelled, or there was
    /// nobody to ask).
    pub answered_by: Option<String>,
    /// The reason as recorded.
    pub reason: String,
}

/// Told about a call's approval as it happens, for the surface's event stream: the question
/// when the gate asks it, the verdict when it is answered. Called on the call's task, in order.
pub trait ApprovalWatch: Send + Sync {
    /// The gate is about to ask.
    fn asked(&self, request: &ApprovalRequest);
    /// The question was answered, or the wait ended without an answer.
    fn decided(&self, request: &ApprovalRequest, verdict: &ApprovalVerdict);
}

/// A shared [`ApprovalWatch`], as a call carries it.
#[derive(Clone)]
pub struct ApprovalWatcher(pub std::sync::Arc<dyn ApprovalWatch>);

impl std::fmt::Debug for ApprovalWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApprovalWatcher")
    }
}

/// Asks a person. The gate waits for the answer without a timeout.
pub trait Approver: Send + Sync {
    /// Asks about one call.
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer>;

    /// Asks about one call, and says who answered (`None`: the user at the terminal or
    /// client the approver asks). The audit names whoever it returns.
    fn approve_naming<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, (ApprovalAnswer, Option<String>)> {
        Box::pin(async move { (self.approve(request).await, None) })
    }
}

/// The approver of a headless run: there is nobody to ask, so every call that needs approval is
/// denied (never approved by default).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoApprover;

impl Approver for NoApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        let fix = match &request.guarded {
            Some(GuardedPath {
                path,
                concern: PathConcern::Outside,
                ..
            }) => format!(
                "make the folder part of the workspace with --add-dir {} or [permissions] \
                 additional_directories",
                path.parent().unwrap_or(path).display()
            ),
            Some(GuardedPath { path, .. }) => format!(
                "run it where a person can answer (warden chat), or add \"{}\" to \
                 [permissions] allow_protected in your user config",
                path.display()
            ),
            None if request.requires_approval => "run it where a person can answer (warden \
                chat), or drop requires_approval from its definition or [tool_settings] entry"
                .to_owned(),
            None => format!(
                "allow it with --allowed-tools {} or [permissions] allow",
                request.public_name
            ),
        };
        let reason = format!(
            "{} needs approval ({}), but this run has nobody to ask (headless); {fix}",
            request.public_name, request.reason
        );
        Box::pin(async move { ApprovalAnswer::NobodyToAsk { reason } })
    }
}
