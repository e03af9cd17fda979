//! The SQLite audit trail behind the gate: one record per call, digests, WAL, failures, queries.

use std::sync::Arc;

use serde_json::json;
use warden_hooks::HookRunner;
use warden_policy::{
    AuditQuery, AuditSink, AuditStore, CallSurface, Decision, Gate, GateParts, GatePolicy, Layer,
    NoApprover, arguments_digest, parse_since,
};

use crate::support::{FileDispatcher, StaticCatalog, fs_read_file, fs_write_file, request};

fn gate_with_store(store: Arc<AuditStore>, policy: GatePolicy) -> (Gate, Arc<FileDispatcher>) {
    let dispatcher = Arc::new(FileDispatcher::default());
    let gate = Gate::new(GateParts {
        catalog: Arc::new(StaticCatalog::of(vec![fs_read_file(), fs_write_file()])),
        dispatcher: dispatcher.clone(),
        approver: Arc::new(NoApprover),
        audit: store,
        hooks: HookRunner::default(),
        policy,
        cwd: std::env::temp_dir(),
    });
    (gate, dispatcher)
}

#[tokio::test]
async fn one_record_per_call_with_the_right_source() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state").join("audit.db");
    let store = Arc::new(AuditStore::open(&db).unwrap());
    let (gate, _) = gate_with_store(store.clone(), GatePolicy::default());
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "hi").unwrap();
    let read = json!({"path": file.display().to_string()});
    let write = json!({"path": file.display().to_string(), "content": "overwritten"});

    let calls = [
        (
            CallSurface::Agent,
            "mcp__fs__read_file",
            read.clone(),
            "allowed",
        ),
        (
            CallSurface::Agent,
            "mcp__fs__write_file",
            write.clone(),
            "denied",
        ),
        (
            CallSurface::ToolCli,
            "mcp__fs__read_file",
            read.clone(),
            "allowed",
        ),
        (
            CallSurface::ToolCli,
            "mcp__fs__nope",
            read.clone(),
            "denied",
        ),
        (
            CallSurface::CodeMode,
            "mcp__fs__read_file",
            read.clone(),
            "allowed",
        ),
        (
            CallSurface::CodeMode,
            "mcp__fs__write_file",
            write,
            "denied",
        ),
    ];
    for (source, tool, args, _) in &calls {
        let outcome = gate.call(request(*source, tool, args.clone())).await;
        assert!(outcome.audit_error.is_none(), "{:?}", outcome.audit_error);
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "hi",
        "no denied write ran"
    );

    let rows = store.query(&AuditQuery::default()).unwrap();
    assert_eq!(rows.len(), calls.len());
    for (row, (source, tool, _, decision)) in rows.iter().zip(&calls) {
        assert_eq!(
            (
                row.source.as_str(),
                row.public_name.as_str(),
                row.decision.as_str()
            ),
            (source.as_str(), *tool, *decision)
        );
    }
    let unknown = &rows[3];
    assert_eq!(
        (
            unknown.layer.as_str(),
            unknown.server.as_deref(),
            unknown.tool.as_deref()
        ),
        ("resolve", None, None)
    );
    let denied_write = &rows[1];
    assert_eq!(denied_write.server.as_deref(), Some("fs"));
    assert_eq!(denied_write.tool.as_deref(), Some("write_file"));
    assert_eq!(denied_write.classes, ["destructive"]);
    assert_eq!(denied_write.layer, "approval");
    assert_eq!(
        denied_write.annotations,
        Some(json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false}))
    );
    assert!(
        denied_write
            .reason
            .as_deref()
            .unwrap()
            .contains("nobody to ask")
    );
    assert_eq!(denied_write.execution_ms, None);
    let allowed_read = &rows[0];
    assert_eq!(allowed_read.result_bytes, Some(2));
    assert_eq!(allowed_read.result_is_error, Some(false));
    assert!(allowed_read.execution_ms.is_some());
    assert_eq!(
        rows[5].reason.as_deref().map(|r| r.contains("code mode")),
        Some(true)
    );

    let denied = store
        .query(&AuditQuery {
            denied_only: true,
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(denied.len(), 3);
    let json_row = serde_json::to_value(&rows[0]).unwrap();
    for key in [
        "id",
        "time",
        "session_id",
        "source",
        "kind",
        "caller",
        "server",
        "tool",
        "public_name",
        "classes",
        "decision",
        "layer",
        "reason",
        "gate_ms",
        "execution_ms",
        "result_bytes",
        "error",
        "arguments_digest",
    ] {
        assert!(
            json_row.get(key).is_some(),
            "row JSON lacks {key}: {json_row}"
        );
    }
}

#[tokio::test]
async fn arguments_are_a_digest_unless_the_operator_opts_in() {
    let dir = tempfile::tempdir().unwrap();
    let args = json!({"path": "/etc/hostname"});
    let digest_store = Arc::new(AuditStore::open(&dir.path().join("digest.db")).unwrap());
    let (gate, _) = gate_with_store(digest_store.clone(), GatePolicy::default());
    gate.call(request(
        CallSurface::Agent,
        "mcp__fs__read_file",
        args.clone(),
    ))
    .await;
    let row = &digest_store.query(&AuditQuery::default()).unwrap()[0];
    assert_eq!(row.arguments, None);
    assert_eq!(row.arguments_digest, arguments_digest(&args));
    assert_eq!(row.arguments_digest.len(), 64);
    let raw = std::fs::read(dir.path().join("digest.db")).unwrap();
    let wal = std::fs::read(dir.path().join("digest.db-wal")).unwrap_or_default();
    let needle = b"/etc/hostname";
    assert!(
        !raw.windows(needle.len())
            .chain(wal.windows(needle.len()))
            .any(|w| w == needle),
        "arguments leaked into the db"
    );

    let full_store = Arc::new(AuditStore::open(&dir.path().join("full.db")).unwrap());
    let (gate, _) = gate_with_store(
        full_store.clone(),
        GatePolicy {
            audit_full_arguments: true,
            ..GatePolicy::default()
        },
    );
    gate.call(request(
        CallSurface::Agent,
        "mcp__fs__read_file",
        args.clone(),
    ))
    .await;
    let row = &full_store.query(&AuditQuery::default()).unwrap()[0];
    assert_eq!(row.arguments, Some(args.clone()));
    assert_eq!(row.arguments_digest, arguments_digest(&args));
}

#[test]
fn the_store_uses_wal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let store = AuditStore::open(&db).unwrap();
    assert_eq!(store.journal_mode().unwrap(), "wal");
    assert!(dir.path().join("audit.db-wal").exists());
}

#[tokio::test]
async fn an_unwritable_audit_is_reported_and_the_call_still_runs() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-folder");
    std::fs::write(&blocker, "a file where the state folder should be").unwrap();
    let db = blocker.join("audit.db");
    assert!(AuditStore::open(&db).is_err());
    let store = Arc::new(AuditStore::open_lazily(&db));
    let (gate, dispatcher) = gate_with_store(store, GatePolicy::default());
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "still works").unwrap();
    let outcome = gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            json!({"path": file.display().to_string()}),
        ))
        .await;
    assert_eq!(outcome.decision, Decision::Allowed);
    assert_eq!(outcome.model_text(), "still works");
    assert_eq!(dispatcher.count(), 1);
    let error = outcome.audit_error.expect("the failure is reported");
    assert!(error.contains("cannot create the audit folder"), "{error}");
    // A denied call is reported the same way.
    let outcome = gate
        .call(request(CallSurface::Agent, "mcp__fs__nope", json!({})))
        .await;
    assert_eq!(outcome.decision, Decision::Denied);
    assert!(outcome.audit_error.is_some());
}

/// With `[audit] required`, a call whose intent cannot be recorded does not run: denied at the
/// audit layer, nothing dispatched.
#[tokio::test]
async fn a_required_audit_that_cannot_record_refuses_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-folder");
    std::fs::write(&blocker, "a file where the state folder should be").unwrap();
    let store = Arc::new(AuditStore::open_lazily(&blocker.join("audit.db")));
    let policy = GatePolicy {
        audit_required: true,
        ..GatePolicy::default()
    };
    let (gate, dispatcher) = gate_with_store(store, policy);
    let file = dir.path().join("data.txt");
    std::fs::write(&file, "secret plans").unwrap();
    let outcome = gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            json!({"path": file.display().to_string()}),
        ))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Audit),
        "{outcome:?}"
    );
    assert!(
        outcome.model_text().contains("[audit] required"),
        "{}",
        outcome.model_text()
    );
    assert_eq!(dispatcher.count(), 0);
    assert!(!outcome.model_text().contains("secret plans"));
}

/// A dispatched call's record exists before the tool runs — decision `started` — and its
/// outcome, a record of its own, is folded onto it when read: a call is one line with one id,
/// and a process that dies mid-call leaves "started" behind.
#[tokio::test]
async fn a_calls_intent_is_recorded_before_it_runs_and_completed_in_place() {
    struct Peeking {
        store: Arc<AuditStore>,
        seen: std::sync::Mutex<Vec<warden_policy::AuditRow>>,
    }
    impl warden_policy::Dispatcher for Peeking {
        fn dispatch<'a>(
            &'a self,
            _call: warden_policy::DispatchCall,
            _cancel: tokio_util::sync::CancellationToken,
        ) -> warden_policy::BoxFuture<
            'a,
            Result<warden_policy::ToolOutput, warden_policy::DispatchError>,
        > {
            let rows = self.store.query(&AuditQuery::default()).unwrap();
            self.seen.lock().unwrap().extend(rows);
            Box::pin(async { Ok(warden_policy::ToolOutput::text("done".to_owned())) })
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(AuditStore::open(&dir.path().join("audit.db")).unwrap());
    let dispatcher = Arc::new(Peeking {
        store: store.clone(),
        seen: std::sync::Mutex::new(Vec::new()),
    });
    let gate = Gate::new(GateParts {
        catalog: Arc::new(StaticCatalog::of(vec![fs_read_file()])),
        dispatcher: dispatcher.clone(),
        approver: Arc::new(NoApprover),
        audit: store.clone(),
        hooks: HookRunner::default(),
        policy: GatePolicy::default(),
        cwd: std::env::temp_dir(),
    });
    let outcome = gate
        .call(request(
            CallSurface::Agent,
            "mcp__fs__read_file",
            json!({"path": "/x"}),
        ))
        .await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    assert!(outcome.audit_error.is_none());
    let seen = dispatcher.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].decision, "started");
    assert_eq!(seen[0].public_name, "mcp__fs__read_file");
    assert_eq!(seen[0].execution_ms, None);
    let rows = store.query(&AuditQuery::default()).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].id, seen[0].id);
    assert_eq!(rows[0].decision, "allowed");
    assert!(rows[0].execution_ms.is_some());
    // A call refused before dispatch has no intent: one record, written once.
    gate.call(request(CallSurface::Agent, "mcp__fs__nope", json!({})))
        .await;
    let rows = store.query(&AuditQuery::default()).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1].decision, "denied");
}

#[tokio::test]
async fn queries_filter_by_session_time_denial_and_follow_position() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(AuditStore::open(&dir.path().join("audit.db")).unwrap());
    let (gate, _) = gate_with_store(store.clone(), GatePolicy::default());
    for session in ["a", "b", "a"] {
        let mut call = request(
            CallSurface::Gateway,
            "mcp__fs__read_file",
            json!({"path": "/nonexistent"}),
        );
        call.session_id = session.into();
        call.caller = Some("claude-code".into());
        gate.call(call).await;
    }
    let mut denied = request(
        CallSurface::Agent,
        "mcp__fs__write_file",
        json!({"path": "/x"}),
    );
    denied.session_id = "a".into();
    gate.call(denied).await;

    let in_a = store
        .query(&AuditQuery {
            session: Some("a".into()),
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(in_a.len(), 3);
    assert!(
        in_a.windows(2).all(|pair| pair[0].id < pair[1].id),
        "oldest first"
    );
    assert_eq!(in_a[0].caller.as_deref(), Some("claude-code"));
    assert_eq!(in_a[0].decision, "failed");
    assert!(in_a[0].error.is_some());

    let last_two = store
        .query(&AuditQuery {
            limit: Some(2),
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(
        last_two
            .iter()
            .map(|row| row.session_id.as_str())
            .collect::<Vec<_>>(),
        ["a", "a"]
    );
    assert_eq!(last_two[1].decision, "denied");
    // A page after a cursor takes the oldest matching rows instead.
    let all = store.query(&AuditQuery::default()).unwrap();
    let first_two = store
        .query(&AuditQuery {
            limit: Some(2),
            oldest_first: true,
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(
        first_two.iter().map(|row| row.id).collect::<Vec<_>>(),
        all.iter().take(2).map(|row| row.id).collect::<Vec<_>>()
    );
    let next = store
        .query(&AuditQuery {
            after_id: Some(first_two[1].id),
            limit: Some(1),
            oldest_first: true,
            ..AuditQuery::default()
        })
        .unwrap();
    assert_eq!(next[0].id, all[2].id);

    let last_id = store.last_id().unwrap().unwrap();
    assert!(
        store
            .query(&AuditQuery {
                after_id: Some(last_id),
                ..AuditQuery::default()
            })
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .query(&AuditQuery {
                after_id: Some(last_id - 1),
                ..AuditQuery::default()
            })
            .unwrap()
            .len(),
        1
    );

    let future = parse_since("2999-01-01", std::time::SystemTime::now()).unwrap();
    assert!(
        store
            .query(&AuditQuery {
                since_unix_ms: Some(future),
                ..AuditQuery::default()
            })
            .unwrap()
            .is_empty()
    );
    let hour_ago = parse_since("1h", std::time::SystemTime::now()).unwrap();
    assert_eq!(
        store
            .query(&AuditQuery {
                since_unix_ms: Some(hour_ago),
                ..AuditQuery::default()
            })
            .unwrap()
            .len(),
        4
    );
    let denied_in_a = AuditQuery {
        session: Some("a".into()),
        denied_only: true,
        ..AuditQuery::default()
    };
    assert_eq!(store.query(&denied_in_a).unwrap().len(), 1);
}

#[test]
fn two_stores_on_one_file_both_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("audit.db");
    let first = AuditStore::open(&db).unwrap();
    let second = AuditStore::open(&db).unwrap();
    let record = skill_load_record;
    use warden_policy::AuditSink;
    first.record(&record("one")).unwrap();
    second.record(&record("two")).unwrap();
    let rows = first.query(&AuditQuery::default()).unwrap();
    assert_eq!(
        rows.iter()
            .map(|row| row.session_id.as_str())
            .collect::<Vec<_>>(),
        ["one", "two"]
    );
    assert_eq!(rows[0].source, "agent");
    assert_eq!(rows[0].kind.as_deref(), Some("skill-load"));
    assert_eq!(rows[0].gate_ms, 3);
}

/// A skill load's record in `session`.
fn skill_load_record(session: &str) -> warden_policy::AuditRecord {
    warden_policy::AuditRecord {
        time: std::time::SystemTime::now(),
        session_id: session.into(),
        surface: CallSurface::Agent,
        kind: warden_policy::CallKind::SkillLoad,
        effect: None,
        tenant: None,
        caller: None,
        server: Some("weather".into()),
        tool: None,
        public_name: "skill://weather/forecast".into(),
        annotations: None,
        classes: warden_policy::CapabilitySet::of(&[warden_policy::CapabilityClass::ReadOnly]),
        decision: Decision::Allowed,
        layer: warden_policy::Layer::Approval,
        reason: None,
        gate_duration: std::time::Duration::from_millis(3),
        execution_duration: None,
        result_bytes: None,
        result_is_error: None,
        error: None,
        arguments_digest: arguments_digest(&json!({})),
        arguments: None,
        confinement: None,
    }
}

/// A new database gets small pages and a plain rowid (a commit writes fewer pages); one made
/// with the earlier layout (4 KiB pages, `AUTOINCREMENT`) keeps working as it is, ids growing.
#[test]
fn new_and_earlier_database_layouts_both_record() {
    use warden_policy::AuditSink;
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.db");
    let store = AuditStore::open(&fresh).unwrap();
    store.record(&skill_load_record("one")).unwrap();
    let sqlite = rusqlite::Connection::open(&fresh).unwrap();
    let page_size: i64 = sqlite
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .unwrap();
    assert_eq!(page_size, 1024);
    let sequence_tables: i64 = sqlite
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(sequence_tables, 0);

    let earlier = dir.path().join("earlier.db");
    let sqlite = rusqlite::Connection::open(&earlier).unwrap();
    sqlite
        .execute_batch(
            "PRAGMA page_size = 4096; PRAGMA journal_mode = WAL;
             CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, time_unix_ms INTEGER NOT NULL,
                 session_id TEXT NOT NULL, source TEXT NOT NULL, caller TEXT, server TEXT, tool TEXT,
                 public_name TEXT NOT NULL, annotations TEXT, classes TEXT NOT NULL,
                 decision TEXT NOT NULL, layer TEXT NOT NULL, reason TEXT, gate_ms INTEGER NOT NULL,
                 execution_ms INTEGER, result_bytes INTEGER, result_is_error INTEGER, error TEXT,
                 arguments_digest TEXT NOT NULL, arguments TEXT);
             CREATE INDEX audit_session ON audit (session_id, id);
             CREATE INDEX audit_time ON audit (time_unix_ms);
             INSERT INTO audit (id, time_unix_ms, session_id, source, public_name, classes,
                 decision, layer, gate_ms, arguments_digest)
             VALUES (41, 1, 'old', 'agent', 'mcp__fs__read_file', 'read_only', 'allowed',
                 'approval', 0, 'sha256:0');",
        )
        .unwrap();
    drop(sqlite);
    let store = AuditStore::open(&earlier).unwrap();
    store.record(&skill_load_record("new")).unwrap();
    let mut declared = skill_load_record("code");
    declared.effect = Some(warden_policy::CapabilityClass::Destructive);
    store.record(&declared).unwrap();
    let rows = store.query(&AuditQuery::default()).unwrap();
    assert_eq!(
        rows.iter()
            .map(|row| (row.id, row.session_id.as_str()))
            .collect::<Vec<_>>(),
        [(41, "old"), (42, "new"), (43, "code")]
    );
    // The journal started beside the older records numbers its records after them (a row's id
    // is its journal number) and verifies from there.
    let verification = warden_policy::verify_trail(&earlier).unwrap();
    assert_eq!(verification.broken, None);
    assert_eq!(verification.records, 2);
    // The columns added since (`confinement`, `kind`, `effect`) are there: empty for the old
    // record, filled for the new ones.
    assert_eq!(rows[0].kind, None);
    assert_eq!(rows[0].effect, None);
    assert_eq!(rows[1].kind.as_deref(), Some("skill-load"));
    assert_eq!(rows[1].effect, None);
    assert_eq!(rows[2].effect.as_deref(), Some("destructive"));
    let page_size: i64 = rusqlite::Connection::open(&earlier)
        .unwrap()
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .unwrap();
    assert_eq!(page_size, 4096, "an existing database keeps its pages");
}

#[test]
fn a_new_audit_database_and_its_wal_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state/audit.db");
    let store = AuditStore::open(&db).unwrap();
    store.record(&skill_load_record("s")).unwrap();
    for file in ["audit.db", "audit.db-wal"] {
        let path = dir.path().join("state").join(file);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file}");
    }
}
