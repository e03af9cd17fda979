//! The gate caches compiled input schemas; a new catalogue generation that changes a tool's
//! schema must be honoured on the very next call (no stale validator), through the real gate.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use warden_hooks::HookRunner;
use warden_policy::{
    CallSurface, Catalog, Decision, Gate, GateParts, GatePolicy, Layer, NoApprover, ToolDescriptor,
};

use crate::support::{FileDispatcher, MemoryAudit, fs_read_file, request};

/// One tool whose schema a test can replace, as a refreshed catalogue would.
struct ChangingCatalog {
    tool: Mutex<ToolDescriptor>,
}

impl Catalog for ChangingCatalog {
    fn assess(
        &self,
        _descriptor: &ToolDescriptor,
        _arguments: &serde_json::Value,
    ) -> warden_policy::CallReach {
        warden_policy::CallReach::default()
    }

    fn resolve(&self, public_name: &str) -> Option<ToolDescriptor> {
        let tool = self.tool.lock().unwrap();
        (tool.public_name == public_name).then(|| tool.clone())
    }
}

fn schema_with_path(kind: &str) -> Arc<Value> {
    Arc::new(json!({
        "type": "object",
        "properties": {"path": {"type": kind}},
        "required": ["path"],
        "additionalProperties": false
    }))
}

#[tokio::test]
async fn a_changed_schema_is_honoured_on_the_next_call() {
    let mut tool = fs_read_file();
    tool.input_schema = schema_with_path("string");
    let catalog = Arc::new(ChangingCatalog {
        tool: Mutex::new(tool),
    });
    let dispatcher = Arc::new(FileDispatcher::default());
    let audit = Arc::new(MemoryAudit::default());
    let gate = Gate::new(GateParts {
        catalog: catalog.clone(),
        dispatcher: dispatcher.clone(),
        approver: Arc::new(NoApprover),
        audit: audit.clone(),
        hooks: HookRunner::default(),
        policy: GatePolicy::default(),
        cwd: std::env::temp_dir(),
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("note.txt");
    std::fs::write(&file, "hello").unwrap();
    let text_path = json!({"path": file.display().to_string()});
    let number_path = json!({"path": 7});
    let call = |arguments: &Value| {
        gate.call(request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            arguments.clone(),
        ))
    };

    // Generation 1: `path` is a string. Called twice so the second call uses the cache.
    for _ in 0..2 {
        let outcome = call(&text_path).await;
        assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
        assert_eq!(outcome.output.unwrap().text, "hello");
    }
    let refused = call(&number_path).await;
    assert_eq!(refused.layer, Layer::Validation, "{refused:?}");

    // Generation 2: the server now wants an integer.
    catalog.tool.lock().unwrap().input_schema = schema_with_path("integer");
    let refused = call(&text_path).await;
    assert_eq!(refused.decision, Decision::Denied, "{refused:?}");
    assert_eq!(refused.layer, Layer::Validation, "{refused:?}");
    assert!(
        refused.reason.as_deref().unwrap().contains("integer"),
        "{refused:?}"
    );
    let admitted = call(&number_path).await;
    // Past validation: it reaches the dispatcher (which cannot read a file named 7).
    assert_eq!(admitted.layer, Layer::Dispatch, "{admitted:?}");
    assert_eq!(admitted.decision, Decision::Failed, "{admitted:?}");

    // Generation 3: back to the first schema.
    catalog.tool.lock().unwrap().input_schema = schema_with_path("string");
    let outcome = call(&text_path).await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    let refused = call(&number_path).await;
    assert_eq!(refused.layer, Layer::Validation, "{refused:?}");

    assert_eq!(dispatcher.count(), 4, "validation refusals never dispatch");
    assert_eq!(audit.len(), 7, "one audit record per call");
}
