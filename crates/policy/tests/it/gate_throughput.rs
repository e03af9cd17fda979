//! Gate throughput harness (run by hand: `cargo test -p warden-policy --release --test it --
//! gate_throughput --ignored --nocapture`): 10,000 calls through the real gate with a trivial
//! dispatcher, into an in-memory audit sink and into the SQLite audit store; prints calls/s.
//! Nothing here asserts on time; it asserts that every call ran and left exactly one record.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_hooks::HookRunner;
use warden_policy::{
    AuditQuery, AuditSink, AuditStore, BoxFuture, CallSurface, Decision, DispatchCall,
    DispatchError, Dispatcher, Gate, GateParts, GatePolicy, NoApprover, ServerPolicy,
    ToolDescriptor, ToolIdentity, ToolOutput,
};

use crate::support::{MemoryAudit, StaticCatalog, annotations, request};

const CALLS: usize = 10_000;

/// Answers "ok" at once.
struct TrivialDispatcher;

impl Dispatcher for TrivialDispatcher {
    fn dispatch<'a>(
        &'a self,
        _call: DispatchCall,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, Result<ToolOutput, DispatchError>> {
        Box::pin(async { Ok(ToolOutput::text("ok".to_owned())) })
    }
}

/// A read-only tool with a schema the size of a typical GitHub MCP tool's.
fn list_issues() -> ToolDescriptor {
    ToolDescriptor {
        identity: ToolIdentity::mcp("github", "list_issues"),
        public_name: "mcp__github__list_issues".to_owned(),
        input_schema: Arc::new(json!({
            "type": "object",
            "properties": {
                "owner": {"type": "string", "description": "Repository owner"},
                "repo": {"type": "string", "description": "Repository name"},
                "state": {"type": "string", "enum": ["OPEN", "CLOSED"], "description": "Filter by state"},
                "labels": {"type": "array", "items": {"type": "string"}, "description": "Filter by labels"},
                "orderBy": {"type": "string", "enum": ["CREATED_AT", "UPDATED_AT", "COMMENTS"]},
                "direction": {"type": "string", "enum": ["ASC", "DESC"]},
                "since": {"type": "string", "description": "ISO 8601 timestamp"},
                "perPage": {"type": "number", "minimum": 1, "maximum": 100},
                "after": {"type": "string", "description": "Cursor for pagination"}
            },
            "required": ["owner", "repo"],
            "additionalProperties": false
        })),
        annotations: annotations(Some(true), None, Some(false)),
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

fn gate(audit: Arc<dyn AuditSink>) -> Gate {
    Gate::new(GateParts {
        catalog: Arc::new(StaticCatalog::of(vec![list_issues()])),
        dispatcher: Arc::new(TrivialDispatcher),
        approver: Arc::new(NoApprover),
        audit,
        hooks: HookRunner::default(),
        policy: GatePolicy::default(),
        cwd: std::env::temp_dir(),
    })
}

fn arguments(index: usize) -> Value {
    json!({"owner": "octo", "repo": "hello", "state": "OPEN", "labels": ["bug"], "perPage": (index % 100) + 1})
}

/// Runs `CALLS` sequential calls and returns calls per second.
async fn run(gate: &Gate) -> f64 {
    // Warm up (first compile, first statement).
    let warm = gate
        .call(request(
            CallSurface::Agent,
            "mcp__github__list_issues",
            arguments(0),
        ))
        .await;
    assert_eq!(warm.decision, Decision::Allowed, "{warm:?}");
    let started = Instant::now();
    for index in 0..CALLS {
        let outcome = gate
            .call(request(
                CallSurface::Agent,
                "mcp__github__list_issues",
                arguments(index),
            ))
            .await;
        assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
        assert!(outcome.audit_error.is_none(), "{outcome:?}");
    }
    CALLS as f64 / started.elapsed().as_secs_f64()
}

#[tokio::test]
#[ignore = "throughput harness; run by hand in release with --nocapture"]
async fn gate_calls_per_second() {
    let memory = Arc::new(MemoryAudit::default());
    let rate = run(&gate(memory.clone())).await;
    assert_eq!(memory.len(), CALLS + 1);
    println!("gate, in-memory audit: {rate:.0} calls/s");

    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(AuditStore::open(&dir.path().join("audit.db")).unwrap());
    let rate = run(&gate(store.clone())).await;
    let rows = store.query(&AuditQuery::default()).unwrap();
    assert_eq!(rows.len(), CALLS + 1);
    println!("gate, SQLite audit (WAL): {rate:.0} calls/s");
}
