//! The audit store's writes: concurrent calls each leave exactly one record (one line per call),
//! on record and visible to another handle by the time the call returns; a record handed over is
//! stored even if its caller stops waiting; blocking and async writers share one order.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use warden_hooks::HookRunner;
use warden_policy::{
    AuditQuery, AuditRecord, AuditSink, AuditStore, CallSurface, CapabilitySet, Decision, Gate,
    GateParts, GatePolicy, Layer, NoApprover, arguments_digest,
};

use crate::support::{FileDispatcher, StaticCatalog, fs_read_file, request};

fn record(session: &str, public_name: &str) -> AuditRecord {
    AuditRecord {
        time: SystemTime::now(),
        session_id: session.into(),
        surface: CallSurface::Agent,
        kind: warden_policy::CallKind::Tool,
        effect: None,
        tenant: None,
        caller: None,
        server: Some("fs".into()),
        tool: Some("read_file".into()),
        public_name: public_name.into(),
        annotations: None,
        classes: CapabilitySet::EMPTY,
        decision: Decision::Allowed,
        layer: Layer::Approval,
        reason: None,
        gate_duration: Duration::from_millis(1),
        execution_duration: None,
        result_bytes: None,
        result_is_error: None,
        error: None,
        arguments_digest: arguments_digest(&json!({})),
        arguments: None,
        confinement: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_each_leave_one_record_visible_when_the_call_returns() {
    const CALLERS: usize = 16;
    const CALLS_EACH: usize = 25;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let store = Arc::new(AuditStore::open_lazily(&db));
    let gate = Arc::new(Gate::new(GateParts {
        catalog: Arc::new(StaticCatalog::of(vec![fs_read_file()])),
        dispatcher: Arc::new(FileDispatcher::default()),
        approver: Arc::new(NoApprover),
        audit: store.clone(),
        hooks: HookRunner::default(),
        policy: GatePolicy::default(),
        cwd: std::env::temp_dir(),
    }));
    // Another connection to the same file, as `warden audit` in another process would have.
    let observer = Arc::new(AuditStore::open(&db).unwrap());
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "data").unwrap();

    let mut callers = Vec::new();
    for caller in 0..CALLERS {
        let gate = gate.clone();
        let observer = observer.clone();
        let path = file.display().to_string();
        callers.push(tokio::spawn(async move {
            let session = format!("session-{caller}");
            let mine = AuditQuery {
                session: Some(session.clone()),
                ..AuditQuery::default()
            };
            for call in 0..CALLS_EACH {
                let mut call_request = request(
                    CallSurface::Agent,
                    "mcp__fs__read_file",
                    json!({"path": path}),
                );
                call_request.session_id = session.clone();
                let outcome = gate.call(call_request).await;
                assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
                assert!(outcome.audit_error.is_none(), "{:?}", outcome.audit_error);
                let rows = observer.query(&mine).unwrap();
                assert_eq!(
                    rows.len(),
                    call + 1,
                    "{session}: the call's record is stored once it returned"
                );
            }
        }));
    }
    for caller in callers {
        caller.await.unwrap();
    }

    let rows = observer.query(&AuditQuery::default()).unwrap();
    assert_eq!(rows.len(), CALLERS * CALLS_EACH);
    let mut ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
    ids.dedup();
    assert_eq!(ids.len(), rows.len(), "ids are distinct and increasing");
    for caller in 0..CALLERS {
        let session = format!("session-{caller}");
        let count = rows.iter().filter(|row| row.session_id == session).count();
        assert_eq!(count, CALLS_EACH, "{session}");
    }
    assert!(
        rows.iter()
            .all(|row| row.decision == "allowed" && row.public_name == "mcp__fs__read_file")
    );
}

#[tokio::test]
async fn a_record_handed_over_is_stored_even_if_nobody_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = AuditStore::open(&dir.path().join("audit.db")).unwrap();
    drop(store.record_async(record("dropped", "first"), false));
    store
        .record_async(record("awaited", "second"), false)
        .await
        .unwrap();
    let rows = store.query(&AuditQuery::default()).unwrap();
    let names: Vec<&str> = rows.iter().map(|row| row.public_name.as_str()).collect();
    assert_eq!(names, ["first", "second"], "one writer, in order");
}

#[test]
fn blocking_records_from_many_threads_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(AuditStore::open(&dir.path().join("audit.db")).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|thread| {
            let store = store.clone();
            std::thread::spawn(move || {
                for call in 0..40 {
                    store
                        .record(&record(
                            &format!("thread-{thread}"),
                            &format!("call-{call}"),
                        ))
                        .unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let rows = store.query(&AuditQuery::default()).unwrap();
    assert_eq!(rows.len(), 8 * 40);
    for thread in 0..8 {
        let session = format!("thread-{thread}");
        let names: Vec<&str> = rows
            .iter()
            .filter(|row| row.session_id == session)
            .map(|row| row.public_name.as_str())
            .collect();
        let expected: Vec<String> = (0..40).map(|call| format!("call-{call}")).collect();
        assert_eq!(names, expected, "{session}: its records in its own order");
    }
}

#[test]
fn records_survive_the_store_being_dropped_and_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    {
        let store = AuditStore::open_lazily(&db);
        for call in 0..600 {
            store.record(&record("s", &format!("call-{call}"))).unwrap();
        }
    }
    let reopened = AuditStore::open(&db).unwrap();
    let rows = reopened.query(&AuditQuery::default()).unwrap();
    assert_eq!(rows.len(), 600);
    assert_eq!(rows[599].public_name, "call-599");
}
