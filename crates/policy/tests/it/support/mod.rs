//! Shared pieces for the gate tests: a static catalog, a dispatcher that really writes files and
//! counts its calls, approvers, an in-memory audit sink and script helpers.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_hooks::HookRunner;
use warden_policy::{
    ApprovalAnswer, ApprovalRequest, Approver, AuditError, AuditRecord, AuditSink, BoxFuture,
    CallReach, CallRequest, CallSurface, CapabilityClass, CapabilitySet, Catalog, DispatchCall,
    DispatchError, Dispatcher, Gate, GateParts, GatePolicy, GuardedPath, ServerPolicy,
    ToolAnnotations, ToolDescriptor, ToolIdentity, ToolOutput,
};

/// A fixed set of tools keyed by public name. With `workspace` set, calls are assessed by
/// [`workspace_reach`]; without, they reach nothing beyond their classes.
#[derive(Default)]
pub(crate) struct StaticCatalog {
    pub tools: BTreeMap<String, ToolDescriptor>,
    pub workspace: bool,
}

impl StaticCatalog {
    pub(crate) fn of(tools: Vec<ToolDescriptor>) -> Self {
        Self {
            tools: tools
                .into_iter()
                .map(|tool| (tool.public_name.clone(), tool))
                .collect(),
            workspace: false,
        }
    }
}

/// The reach of a `path` argument in a workspace at `/work`: outside it is outside, under
/// `/work/.secret` is refused, writing `/work/existing` replaces a file, and a call on a path
/// under `/work/unconfined` runs outside warden's confinement (as an editor's terminal runs
/// `bash`).
pub(crate) fn workspace_reach(descriptor: &ToolDescriptor, arguments: &Value) -> CallReach {
    let Some(path) = arguments.get("path").and_then(Value::as_str) else {
        return CallReach::default();
    };
    if path.starts_with("/work/.secret") {
        return CallReach::refused(format!("{path} is protected"));
    }
    let writes = descriptor.identity.tool.contains("write");
    let mut reach = CallReach::default();
    if path.starts_with("/work/unconfined") {
        reach.unconfined = Some("runs in the editor's terminal".to_owned());
    }
    if path == "/work/existing" && writes {
        reach.added_classes = CapabilitySet::of(&[CapabilityClass::Destructive]);
    }
    if !path.starts_with("/work/") {
        reach.guarded = Some(GuardedPath::outside(path, writes));
    }
    reach
}

impl Catalog for StaticCatalog {
    fn assess(&self, descriptor: &ToolDescriptor, arguments: &Value) -> CallReach {
        if self.workspace {
            workspace_reach(descriptor, arguments)
        } else {
            CallReach::default()
        }
    }

    fn resolve(&self, public_name: &str) -> Option<ToolDescriptor> {
        self.tools.get(public_name).cloned()
    }
}

/// Executes `write_file` (really writes `path` with `content`), `read_file` (really reads),
/// `slow` (waits for cancellation or 30 s), `crash` (dispatch error), `panic` (panics); anything
/// else echoes.
/// Counts every dispatch.
#[derive(Default)]
pub(crate) struct FileDispatcher {
    pub calls: AtomicUsize,
    pub cancelled: AtomicUsize,
    /// The cancellation token of the latest dispatch.
    pub last_token: Mutex<Option<CancellationToken>>,
}

impl FileDispatcher {
    pub(crate) fn count(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Dispatcher for FileDispatcher {
    fn dispatch<'a>(
        &'a self,
        call: DispatchCall,
        cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            *self.last_token.lock().unwrap() = Some(cancel.clone());
            let text = match call.descriptor.identity.tool.as_str() {
                "write_file" => {
                    let path = call.arguments["path"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    let content = call.arguments["content"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    std::fs::write(&path, &content)
                        .map_err(|error| DispatchError::new(error.to_string()))?;
                    format!("wrote {} bytes to {path}", content.len())
                }
                "read_file" => {
                    let path = call.arguments["path"].as_str().unwrap_or_default();
                    std::fs::read_to_string(path)
                        .map_err(|error| DispatchError::new(error.to_string()))?
                }
                "slow" => {
                    tokio::select! {
                        () = cancel.cancelled() => {
                            self.cancelled.fetch_add(1, Ordering::SeqCst);
                            return Err(DispatchError::new("cancelled"));
                        }
                        () = tokio::time::sleep(Duration::from_secs(30)) => "finished slowly".to_owned(),
                    }
                }
                "panic" => panic!("a bug in a built-in tool"),
                "crash" => {
                    return Err(DispatchError::new(
                        "server \"fs\" exited unexpectedly (exit code 1)",
                    ));
                }
                other => format!("ran {other} with {}", call.arguments),
            };
            let size_bytes = text.len() as u64;
            Ok(ToolOutput {
                text,
                is_error: false,
                content: None,
                size_bytes,
                confinement: None,
            })
        })
    }
}

/// Answers every request with a fixed answer and keeps the requests.
pub(crate) struct ScriptedApprover {
    pub answer: ApprovalAnswer,
    pub requests: Mutex<Vec<ApprovalRequest>>,
}

impl ScriptedApprover {
    pub(crate) fn new(answer: ApprovalAnswer) -> Self {
        Self {
            answer,
            requests: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn asked(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

impl Approver for ScriptedApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        self.requests.lock().unwrap().push(request.clone());
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

/// Never answers (a person who walked away).
pub(crate) struct SilentApprover;

impl Approver for SilentApprover {
    fn approve<'a>(&'a self, _request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        Box::pin(std::future::pending())
    }
}

/// Keeps records in memory.
#[derive(Default)]
pub(crate) struct MemoryAudit {
    pub records: Mutex<Vec<AuditRecord>>,
}

impl MemoryAudit {
    pub(crate) fn len(&self) -> usize {
        self.records.lock().unwrap().len()
    }
}

impl AuditSink for MemoryAudit {
    fn record(&self, record: &AuditRecord) -> Result<(), AuditError> {
        self.records.lock().unwrap().push(record.clone());
        Ok(())
    }
}

pub(crate) fn path_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": false
    })
}

/// An MCP tool on `server` with the given annotations (trusted) and no server policy.
pub(crate) fn mcp_tool(server: &str, tool: &str, annotations: ToolAnnotations) -> ToolDescriptor {
    ToolDescriptor {
        identity: ToolIdentity::mcp(server, tool),
        public_name: format!("mcp__{server}__{tool}"),
        input_schema: std::sync::Arc::new(path_schema()),
        annotations,
        declared_classes: None,
        server_policy: ServerPolicy::default(),
        trust_annotations: true,
        required_permission: None,
        effect: None,
        requires_approval: false,
        timeout: None,
        kind: warden_policy::CallKind::Tool,
        surfaces: warden_policy::SurfaceSet::CALLERS,
        audit_required: false,
    }
}

pub(crate) fn annotations(
    read_only: Option<bool>,
    destructive: Option<bool>,
    open_world: Option<bool>,
) -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: read_only,
        destructive_hint: destructive,
        idempotent_hint: None,
        open_world_hint: open_world,
    }
}

/// server-filesystem's annotations for its tools.
pub(crate) fn fs_read_file() -> ToolDescriptor {
    mcp_tool(
        "fs",
        "read_file",
        annotations(Some(true), None, Some(false)),
    )
}

pub(crate) fn fs_write_file() -> ToolDescriptor {
    mcp_tool(
        "fs",
        "write_file",
        annotations(Some(false), Some(true), Some(false)),
    )
}

pub(crate) struct Harness {
    pub gate: Gate,
    pub dispatcher: Arc<FileDispatcher>,
    pub audit: Arc<MemoryAudit>,
}

pub(crate) fn harness(
    tools: Vec<ToolDescriptor>,
    policy: GatePolicy,
    approver: Arc<dyn Approver>,
    hooks: HookRunner,
) -> Harness {
    harness_of(StaticCatalog::of(tools), policy, approver, hooks)
}

/// A harness whose catalogue assesses paths against a workspace at `/work` ([`workspace_reach`]).
pub(crate) fn harness_in_workspace(
    tools: Vec<ToolDescriptor>,
    policy: GatePolicy,
    approver: Arc<dyn Approver>,
) -> Harness {
    let catalog = StaticCatalog {
        workspace: true,
        ..StaticCatalog::of(tools)
    };
    harness_of(catalog, policy, approver, HookRunner::default())
}

fn harness_of(
    catalog: StaticCatalog,
    policy: GatePolicy,
    approver: Arc<dyn Approver>,
    hooks: HookRunner,
) -> Harness {
    let dispatcher = Arc::new(FileDispatcher::default());
    let audit = Arc::new(MemoryAudit::default());
    let gate = Gate::new(GateParts {
        catalog: Arc::new(catalog),
        dispatcher: dispatcher.clone(),
        approver,
        audit: audit.clone(),
        hooks,
        policy,
        cwd: std::env::temp_dir(),
    });
    Harness {
        gate,
        dispatcher,
        audit,
    }
}

pub(crate) fn request(surface: CallSurface, public_name: &str, arguments: Value) -> CallRequest {
    CallRequest {
        session_id: "session-1".into(),
        surface,
        approval_scope: None,
        caller: None,
        public_name: public_name.into(),
        arguments,
        cancel: CancellationToken::new(),
        progress: None,
        subject_server: None,
        tenant: None,
        approval_watch: None,
    }
}

/// Writes an executable `#!/bin/sh` script.
pub(crate) fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}
