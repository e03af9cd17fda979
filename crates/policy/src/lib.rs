//! warden's one gate: every call from every surface crosses [`Gate::call`] exactly once.
//!
//! # Order of a call
//! 1. **resolve** — [`Catalog::resolve`] over the discovered, filtered, un-gated, non-hidden set;
//!    otherwise "unknown tool" and the dispatcher is never called; the operator's
//!    `[tool_settings]` matching the call's names then set its required permission, timeout and
//!    `requires_approval` ([`settings_for`]);
//! 2. **authorization** — the tool's classes (see below) against the ceiling, then operator rules
//!    (first match wins), then the optional external command (any failure denies);
//! 3. **validation** — arguments against the input schema (JSON Schema 2020-12 unless `$schema`
//!    says otherwise; an unusable schema denies); the error names the failing JSON pointer;
//!    then **the application** — the embedding application's [`AuthorizationHandler`] sees the
//!    tool, its required permission, the valid arguments, the surface, the caller and the tenant
//!    (the default allows; an error or a panic denies, layer `application`);
//!    then **the workspace** — [`Catalog::assess`] says what the arguments reach ([`CallReach`]):
//!    a protected path is denied (layer `workspace`), a guarded path (outside the session's roots,
//!    a credential file read, a write to a file that runs later) always asks, and a call may add
//!    classes to its tool's (a write that replaces a file is destructive);
//! 4. **PreToolUse hooks** — exit 2 blocks with stderr as the reason; anything else is no opinion;
//! 5. **approval** — see [`approval_need`] for the exact order (an `external` tool asks a person
//!    in every mode unless an allow rule names it); a person is asked through the
//!    [`Approver`] with no timeout; [`NoApprover`] (headless) denies with that reason;
//! 6. **execution** — under the tool's timeout (`[tool_settings]`, else its own, else
//!    [`GatePolicy::default_timeout`]) and the caller's cancellation token; the dispatcher's token
//!    is cancelled on timeout. The clock starts after approval: a person's time never counts;
//! 7. **PostToolUse hooks** (exit 2 attaches feedback for the model), then exactly one
//!    [`AuditRecord`]. An audit failure is returned in [`GateOutcome::audit_error`] and logged.
//!
//! Nothing is an `Err`: denials, timeouts, cancellations, dispatch failures and dispatcher panics
//! are [`GateOutcome`]s whose [`GateOutcome::model_text`] tells the model why.
//!
//! # Capability classes
//! Each tool has one effect class — `read_only`, `write` or `destructive` — plus `external` when
//! it is open-world. Built-ins declare theirs ([`ToolDescriptor::declared_classes`]; an empty
//! declaration fails closed to `destructive` + `external`). MCP tools derive them from the
//! annotations with the spec's defaults (readOnlyHint false, destructiveHint true, openWorldHint
//! true). Without `trust_annotations`, a hint counts only when it is as strict as the default, so
//! an untrusted server's tools are always `destructive` + `external`.
//!
//! # The ceiling, and partial admission
//! The admitted set is the permission mode's ceiling (`ask`/`auto`: all classes; `read-only`:
//! `read_only` + `external`) ∩ the server's `policy.capabilities` (None = all) ∩ the tool's
//! `policy.tools` entry (None = all). Intersected, never unioned: a wider level widens nothing.
//! **A tool is admitted only when every one of its classes is in the admitted set.** If any class
//! is missing — even when the others are admitted — the call is denied at the authorization layer
//! and [`Gate::visible`] hides the tool from the model. Neither an allow list, a rule, a remembered
//! answer nor a skill grant can widen the ceiling.
//!
//! # Rules
//! `[[authorization.rules]]` are tried in order; the first whose glob matches the public name
//! decides: `deny` denies with its reason; `allow` ends rule evaluation without denying (so an
//! earlier narrow `allow` can exempt a tool from a later broad `deny`) and skips nothing else.
//!
//! # Hooks
//! Hooks see live arguments and results that the audit trail stores only as a digest; a logging
//! hook is as sensitive as what it logs.

mod approval;
mod audit;
mod authorize;
mod call;
mod capability;
mod external;
mod gate;
mod handler;
pub mod journal;
mod permissions;
mod reach;
mod schema_cache;
mod time;
mod tool;
mod tool_settings;
mod validate;
mod verify;

pub use approval::{
    ApprovalAnswer, ApprovalFacts, ApprovalNeed, ApprovalRequest, ApprovalVerdict, ApprovalWatch,
    ApprovalWatcher, Approver, BoxFuture, NoApprover, approval_need,
};
pub use audit::{
    AuditColumns, AuditEntry, AuditError, AuditLog, AuditOptions, AuditQuery, AuditRecord,
    AuditRow, AuditSink, AuditStore, arguments_digest, split_classes,
};
pub use authorize::{admitted_classes, check_ceiling, check_rules, first_matching_rule};
pub use call::{CallKind, CallRequest, CallSurface, GateOutcome, Layer, SurfaceSet, ToolOutput};
pub use capability::{ToolAnnotations, classes_from_annotations, normalise_declared};
pub use external::{ExternalQuestion, ask_external};
pub use gate::{
    Admission, Catalog, DispatchCall, DispatchError, Dispatcher, Gate, GateParts, ProgressSender,
    ProgressUpdate, call_deadline,
};
pub use handler::{
    AllowEveryCall, AuthorizationError, AuthorizationHandler, AuthorizationQuestion,
    AuthorizationVerdict, ask_handler,
};
pub use journal::JournalSync;
pub use permissions::{ExternalAuthorizer, GatePolicy, Permissions};
pub use reach::{CallReach, GuardedPath, PathConcern};
pub use schema_cache::{DEFAULT_SCHEMA_CACHE_CAPACITY, SchemaCache};
pub use time::{SinceError, parse_since, rfc3339_millis, unix_millis};
pub use tool::{ServerPolicy, ToolDescriptor, ToolIdentity, ToolSource};
pub use tool_settings::{ToolSettings, ToolSettingsRule, settings_for};
pub use validate::validate_arguments;
pub use verify::{BreakKind, ChainBreak, Verification, verify_trail};
/// The shared vocabulary the gate's inputs are written in (defined in `warden-vocab`).
pub use warden_vocab::{
    AuthorizationRule, CapabilityClass, CapabilitySet, DEFAULT_HOST_TOOL_TIMEOUT, Decision,
    PermissionMode, RuleDecision, ToolGlob, ToolGlobError,
};
