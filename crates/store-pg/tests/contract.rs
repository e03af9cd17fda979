//! The storage contract, run against both backends: every case below runs once on SQLite (a
//! temporary file) and once on PostgreSQL (a throwaway server; skipped when PostgreSQL is not
//! installed, failed in CI).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use warden_policy::{
    AuditEntry, AuditLog, AuditQuery, AuditRecord, AuditSink, AuditStore, CallKind, CallSurface,
    CapabilitySet, Decision, Layer,
};
use warden_store::{
    ApprovalRow, ClientCallRow, PromptMessage, PromptRow, Role, RunHold, SCHEMA_VERSION, ServerRow,
    ServiceStorage, SessionState, SqliteStorage, StoreError, now, secret_hash,
};
use warden_store_pg::PgStorage;
use warden_testkit::{Missing, PgServer};

/// A database of one backend that the cases open (again) and look into directly.
trait Backend: Sync {
    fn open(&self) -> BoxFuture<'_, Result<Arc<dyn ServiceStorage>, StoreError>>;
    /// The `secret_sha256` column of every stored key and widget token.
    fn stored_secrets(&self) -> BoxFuture<'_, Vec<String>>;
    fn version(&self) -> BoxFuture<'_, i64>;
    fn stamp_version(&self, version: i64) -> BoxFuture<'_, ()>;
    /// A new handle on the backend's audit trail, as another instance (or a restart) opens it.
    fn audit(&self) -> BoxFuture<'_, Arc<dyn AuditLog>>;
}

struct Sqlite {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Sqlite {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("service.db");
        Self { _dir: dir, path }
    }

    fn raw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(&self.path).unwrap()
    }
}

impl Backend for Sqlite {
    fn open(&self) -> BoxFuture<'_, Result<Arc<dyn ServiceStorage>, StoreError>> {
        let opened = SqliteStorage::open(&self.path)
            .map(|storage| Arc::new(storage) as Arc<dyn ServiceStorage>);
        Box::pin(async move { opened })
    }

    fn stored_secrets(&self) -> BoxFuture<'_, Vec<String>> {
        let connection = self.raw();
        let mut statement = connection
            .prepare(
                "SELECT secret_sha256 FROM api_keys
                 UNION ALL SELECT secret_sha256 FROM widget_tokens",
            )
            .unwrap();
        let secrets = statement
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        Box::pin(async move { secrets })
    }

    fn version(&self) -> BoxFuture<'_, i64> {
        let version = self
            .raw()
            .query_row("SELECT version FROM schema_version", [], |row| row.get(0))
            .unwrap();
        Box::pin(async move { version })
    }

    fn stamp_version(&self, version: i64) -> BoxFuture<'_, ()> {
        self.raw()
            .execute("UPDATE schema_version SET version = ?1", [version])
            .unwrap();
        Box::pin(async {})
    }

    fn audit(&self) -> BoxFuture<'_, Arc<dyn AuditLog>> {
        let log: Arc<dyn AuditLog> =
            Arc::new(AuditStore::open(&self.path.with_file_name("audit.db")).unwrap());
        Box::pin(async move { log })
    }
}

struct Postgres {
    server: PgServer,
}

impl Postgres {
    fn new() -> Result<Self, Missing> {
        Ok(Self {
            server: warden_testkit::postgres()?,
        })
    }

    /// Runs one statement on a connection of its own; its rows' first column as text.
    async fn query(&self, sql: &str) -> Vec<String> {
        let (client, connection) =
            tokio_postgres::connect(&self.server.url(), tokio_postgres::NoTls)
                .await
                .unwrap();
        tokio::spawn(connection);
        client
            .simple_query(sql)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|message| match message {
                tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                _ => None,
            })
            .collect()
    }
}

impl Backend for Postgres {
    fn open(&self) -> BoxFuture<'_, Result<Arc<dyn ServiceStorage>, StoreError>> {
        Box::pin(async move {
            let storage = PgStorage::connect(&self.server.url()).await?;
            Ok(Arc::new(storage) as Arc<dyn ServiceStorage>)
        })
    }

    fn stored_secrets(&self) -> BoxFuture<'_, Vec<String>> {
        Box::pin(self.query(
            "SELECT secret_sha256 FROM api_keys
             UNION ALL SELECT secret_sha256 FROM widget_tokens",
        ))
    }

    fn version(&self) -> BoxFuture<'_, i64> {
        Box::pin(async move {
            self.query("SELECT version FROM schema_version").await[0]
                .parse()
                .unwrap()
        })
    }

    fn stamp_version(&self, version: i64) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.query(&format!("UPDATE schema_version SET version = {version}"))
                .await;
        })
    }

    fn audit(&self) -> BoxFuture<'_, Arc<dyn AuditLog>> {
        Box::pin(async move {
            let storage = PgStorage::connect(&self.server.url()).await.unwrap();
            Arc::new(storage.audit().unwrap()) as Arc<dyn AuditLog>
        })
    }
}

/// Every case runs on a runtime of two workers, as the service's handlers do.
macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(&super::Sqlite::new()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let backend = warden_testkit::require_or_skip!(super::Postgres::new());
                    super::$case(&backend).await;
                }
            )*
        }
    };
}

contract!(
    a_key_resolves_until_revoked_and_only_its_hash_is_stored,
    a_tenant_never_reaches_another_tenant_s_rows,
    a_widget_token_resolves_to_its_agent_and_caller_until_it_expires,
    events_come_in_order_and_page_after_a_cursor,
    concurrent_appends_number_events_without_gaps_or_repeats,
    a_running_session_is_interrupted_at_start_and_its_approvals_expire,
    a_session_moves_only_from_the_states_it_is_asked_from,
    a_run_whose_lease_lapsed_is_interrupted_and_a_renewed_one_is_not,
    a_run_that_lost_its_lease_can_write_nothing_more,
    an_approval_is_decided_once,
    a_client_call_is_answered_once,
    skills_are_put_listed_read_and_deleted,
    servers_are_registered_replaced_and_removed,
    prompt_snapshots_round_trip,
    tenants_and_keys_are_listed_for_the_operator,
    a_new_database_gets_the_current_schema_version_and_reopening_keeps_its_rows,
    audit_records_of_two_instances_are_stored_once_and_read_from_either,
    a_call_s_outcome_completes_its_intent_in_place,
    concurrent_audit_records_are_each_stored_once_and_a_cursor_skips_none,
    an_audit_query_filters_and_never_reaches_another_tenant_s_records,
    an_audit_record_handed_over_is_stored_though_its_waiter_left,
    a_database_of_a_newer_schema_is_refused_with_both_versions,
    sessions_are_counted_per_tenant_and_per_creator,
    a_tenant_s_secrets_are_set_replaced_listed_by_name_and_removed,
);

/// The quotas' count: a tenant's sessions, or those one key or widget token created; a
/// deleted session no longer counts.
async fn sessions_are_counted_per_tenant_and_per_creator(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("acme").await.unwrap();
    store.ensure_tenant("globex").await.unwrap();
    let first = store.create_session("acme", None).await.unwrap();
    store
        .add_widget_session("acme", "key_1", &first.id)
        .await
        .unwrap();
    let second = store.create_session("acme", None).await.unwrap();
    store
        .add_widget_session("acme", "key_1", &second.id)
        .await
        .unwrap();
    let theirs = store.create_session("acme", Some("support")).await.unwrap();
    store
        .add_widget_session("acme", "wid_1", &theirs.id)
        .await
        .unwrap();
    store.create_session("acme", None).await.unwrap();
    store.create_session("globex", None).await.unwrap();
    assert_eq!(store.count_sessions("acme", None).await.unwrap(), 4);
    assert_eq!(
        store.count_sessions("acme", Some("key_1")).await.unwrap(),
        2
    );
    assert_eq!(
        store.count_sessions("acme", Some("wid_1")).await.unwrap(),
        1
    );
    assert_eq!(store.count_sessions("globex", None).await.unwrap(), 1);
    assert_eq!(
        store.count_sessions("globex", Some("key_1")).await.unwrap(),
        0
    );
    assert!(store.delete_session("acme", &first.id).await.unwrap());
    assert_eq!(store.count_sessions("acme", None).await.unwrap(), 3);
    assert_eq!(
        store.count_sessions("acme", Some("key_1")).await.unwrap(),
        1
    );
}

async fn a_key_resolves_until_revoked_and_only_its_hash_is_stored(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    let key = store
        .issue_key("acme", "web-app", Role::Caller)
        .await
        .unwrap();
    let principal = store
        .resolve_key(&key.secret)
        .await
        .unwrap()
        .expect("resolves");
    assert_eq!(principal.tenant, "acme");
    assert_eq!(principal.caller, "web-app");
    assert_eq!(principal.role, Role::Caller);
    assert!(store.resolve_key("wsk_wrong").await.unwrap().is_none());
    assert_eq!(backend.stored_secrets().await, [secret_hash(&key.secret)]);
    assert!(!backend.stored_secrets().await[0].contains(&key.secret));
    assert!(!format!("{key:?}").contains(&key.secret), "Debug redacts");
    assert!(store.revoke_key(&key.id).await.unwrap());
    assert!(!store.revoke_key(&key.id).await.unwrap(), "revoked once");
    assert!(store.resolve_key(&key.secret).await.unwrap().is_none());
    assert!(!store.revoke_key("key_unknown").await.unwrap());
}

async fn a_widget_token_resolves_to_its_agent_and_caller_until_it_expires(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("acme").await.unwrap();
    let token = store
        .issue_widget_token("acme", "support", "customer-7", 900)
        .await
        .unwrap();
    assert!(token.secret.starts_with("wwt_"));
    assert!(token.expires_at >= now() + 899);
    assert!(
        !format!("{token:?}").contains(&token.secret),
        "Debug redacts"
    );
    assert_eq!(backend.stored_secrets().await, [secret_hash(&token.secret)]);
    let principal = store
        .resolve_key(&token.secret)
        .await
        .unwrap()
        .expect("resolves");
    assert_eq!(principal.role, Role::Widget);
    assert_eq!(principal.tenant, "acme");
    assert_eq!(principal.caller, "customer-7");
    let scope = principal.widget.expect("scoped");
    assert_eq!(scope.agent, "support");
    assert_eq!(scope.token, token.id);
    let session = store.create_session("acme", Some("support")).await.unwrap();
    assert!(
        !store
            .widget_owns_session("acme", &scope.token, &session.id)
            .await
            .unwrap()
    );
    store
        .add_widget_session("acme", &scope.token, &session.id)
        .await
        .unwrap();
    store
        .add_widget_session("acme", &scope.token, &session.id)
        .await
        .unwrap();
    assert!(
        store
            .widget_owns_session("acme", &scope.token, &session.id)
            .await
            .unwrap()
    );
    assert!(
        !store
            .widget_owns_session("globex", &scope.token, &session.id)
            .await
            .unwrap()
    );
    // An expired token resolves to nobody; an API key still resolves without a widget scope.
    let expired = store
        .issue_widget_token("acme", "support", "customer-7", 0)
        .await
        .unwrap();
    assert!(store.resolve_key(&expired.secret).await.unwrap().is_none());
    let key = store.issue_key("acme", "app", Role::Caller).await.unwrap();
    assert!(
        store
            .resolve_key(&key.secret)
            .await
            .unwrap()
            .unwrap()
            .widget
            .is_none()
    );
    // A deleted session is no longer the widget's.
    assert!(store.delete_session("acme", &session.id).await.unwrap());
    assert!(
        !store
            .widget_owns_session("acme", &scope.token, &session.id)
            .await
            .unwrap()
    );
}

async fn a_tenant_never_reaches_another_tenant_s_rows(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("a").await.unwrap();
    store.ensure_tenant("b").await.unwrap();
    let session = store.create_session("a", None).await.unwrap();
    let id = session.id.as_str();
    store
        .append_event("a", id, &json!({"type": "x"}))
        .await
        .unwrap();
    keep_messages(store.as_ref(), "a", id, &json!([{"role": "user"}])).await;
    store.put_skill("a", "s", "d", "text").await.unwrap();
    store
        .put_server("a", &server("srv", "https://a.example"))
        .await
        .unwrap();
    store.put_prompt("a", &prompt("p", "one")).await.unwrap();
    store
        .add_client_call("a", &client_call("call_1", id))
        .await
        .unwrap();
    store
        .add_approval("a", &approval("apr_1", id, 1))
        .await
        .unwrap();
    let key = store.issue_key("a", "app", Role::Caller).await.unwrap();

    assert!(store.session("b", id).await.unwrap().is_none());
    assert!(store.list_sessions("b").await.unwrap().is_empty());
    assert!(store.events_after("b", id, 0, 10).await.unwrap().is_empty());
    assert!(store.append_event("b", id, &json!({})).await.is_err());
    assert_eq!(store.messages("b", id).await.unwrap(), json!([]));
    store
        .save_run_messages("b", id, "inst_b/run_1", &json!(["overwritten"]))
        .await
        .unwrap();
    assert_eq!(
        store.messages("a", id).await.unwrap(),
        json!([{"role": "user"}])
    );
    assert!(!store.delete_session("b", id).await.unwrap());
    let moved = store
        .transition("b", id, &[SessionState::Idle], SessionState::Running)
        .await
        .unwrap();
    assert!(!moved);
    assert!(store.list_skills("b").await.unwrap().is_empty());
    assert!(store.skill_text("b", "s").await.unwrap().is_none());
    assert!(!store.delete_skill("b", "s").await.unwrap());
    assert!(store.list_servers("b").await.unwrap().is_empty());
    assert!(!store.delete_server("b", "srv").await.unwrap());
    assert!(store.list_prompts("b").await.unwrap().is_empty());
    assert!(store.prompt("b", "p").await.unwrap().is_none());
    assert!(!store.delete_prompt("b", "p").await.unwrap());
    assert!(store.client_calls("b", id).await.unwrap().is_empty());
    assert!(
        store
            .pending_client_calls("b", id)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .client_call("b", id, "call_1")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !store
            .answer_client_call("b", id, "call_1", &json!({"result": 1}))
            .await
            .unwrap()
    );
    assert!(
        store
            .add_client_call("b", &client_call("call_2", id))
            .await
            .is_err(),
        "a call is added only under the tenant's own session"
    );
    assert!(
        store
            .add_approval("b", &approval("apr_2", id, 2))
            .await
            .is_err(),
        "an approval is added only under the tenant's own session"
    );
    assert!(store.pending_approvals("b").await.unwrap().is_empty());
    assert!(store.approval("b", "apr_1").await.unwrap().is_none());
    assert!(
        !store
            .decide_approval("b", "apr_1", "allowed_for_session", "mallory")
            .await
            .unwrap()
    );
    assert!(store.allowed_for_session("b", id).await.unwrap().is_empty());
    assert!(store.list_keys("b").await.unwrap().is_empty());
    assert_eq!(
        store
            .resolve_key(&key.secret)
            .await
            .unwrap()
            .unwrap()
            .tenant,
        "a"
    );

    // What `a` has is untouched.
    assert_eq!(store.events_after("a", id, 0, 10).await.unwrap().len(), 1);
    assert_eq!(store.list_skills("a").await.unwrap().len(), 1);
    assert_eq!(store.list_servers("a").await.unwrap().len(), 1);
    assert_eq!(store.list_prompts("a").await.unwrap().len(), 1);
    assert_eq!(store.pending_client_calls("a", id).await.unwrap().len(), 1);
    assert_eq!(store.pending_approvals("a").await.unwrap().len(), 1);
    assert_eq!(store.list_keys("a").await.unwrap().len(), 1);
}

async fn events_come_in_order_and_page_after_a_cursor(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("a").await.unwrap();
    let session = store.create_session("a", Some("support")).await.unwrap();
    assert_eq!(session.agent.as_deref(), Some("support"));
    assert_eq!(session.state, SessionState::Idle);
    assert_eq!(
        store.session("a", &session.id).await.unwrap().unwrap(),
        session
    );
    for n in 1..=5 {
        let seq = store
            .append_event("a", &session.id, &json!({"n": n, "z": 0, "a": [1]}))
            .await
            .unwrap();
        assert_eq!(seq, n);
    }
    let after_two = store.events_after("a", &session.id, 2, 10).await.unwrap();
    assert_eq!(
        after_two.iter().map(|row| row.seq).collect::<Vec<_>>(),
        [3, 4, 5]
    );
    assert_eq!(after_two[0].event, json!({"n": 3, "z": 0, "a": [1]}));
    assert_eq!(
        after_two[0].event.to_string(),
        r#"{"n":3,"z":0,"a":[1]}"#,
        "an event keeps its keys' order"
    );
    let mut cursor = 0;
    let mut pages = Vec::new();
    loop {
        let page = store
            .events_after("a", &session.id, cursor, 2)
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        cursor = last.seq;
        pages.push(page.iter().map(|row| row.seq).collect::<Vec<_>>());
    }
    assert_eq!(pages, [vec![1, 2], vec![3, 4], vec![5]]);

    assert_eq!(store.messages("a", &session.id).await.unwrap(), json!([]));
    let messages = json!([{"role": "user", "content": "hi"}, {"role": "assistant"}]);
    keep_messages(store.as_ref(), "a", &session.id, &messages).await;
    assert_eq!(store.messages("a", &session.id).await.unwrap(), messages);

    let other = store.create_session("a", None).await.unwrap();
    assert_eq!(
        store
            .append_event("a", &other.id, &json!({}))
            .await
            .unwrap(),
        1
    );
    let listed: Vec<String> = store
        .list_sessions("a")
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.id)
        .collect();
    assert_eq!(listed.len(), 2);
    assert!(listed.contains(&session.id) && listed.contains(&other.id));

    assert!(store.delete_session("a", &session.id).await.unwrap());
    assert!(!store.delete_session("a", &session.id).await.unwrap());
    assert!(store.session("a", &session.id).await.unwrap().is_none());
    assert!(
        store
            .events_after("a", &session.id, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.list_sessions("a").await.unwrap().len(), 1);
}

async fn concurrent_appends_number_events_without_gaps_or_repeats(backend: &dyn Backend) {
    const THREADS: u64 = 4;
    const EACH: u64 = 25;
    let store = backend.open().await.unwrap();
    store.ensure_tenant("a").await.unwrap();
    let session = store.create_session("a", None).await.unwrap();
    let handles: Vec<_> = (0..THREADS)
        .map(|thread| {
            let store = Arc::clone(&store);
            let id = session.id.clone();
            tokio::spawn(async move {
                let mut seqs = Vec::new();
                for n in 0..EACH {
                    let event = json!({"thread": thread, "n": n});
                    seqs.push(store.append_event("a", &id, &event).await.unwrap());
                }
                seqs
            })
        })
        .collect();
    let mut seqs: Vec<u64> = futures::future::join_all(handles)
        .await
        .into_iter()
        .flat_map(|seqs| seqs.unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=THREADS * EACH).collect::<Vec<_>>());
    let stored = store
        .events_after("a", &session.id, 0, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.seq)
        .collect::<Vec<_>>();
    assert_eq!(stored, (1..=THREADS * EACH).collect::<Vec<_>>());
}

async fn a_running_session_is_interrupted_at_start_and_its_approvals_expire(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("a").await.unwrap();
    let running = store.create_session("a", None).await.unwrap();
    let idle = store.create_session("a", None).await.unwrap();
    store
        .append_event("a", &running.id, &json!({"n": 1}))
        .await
        .unwrap();
    assert!(
        store
            .transition(
                "a",
                &running.id,
                &[SessionState::Idle],
                SessionState::Running
            )
            .await
            .unwrap()
    );
    store
        .add_approval("a", &approval("apr_1", &running.id, 1))
        .await
        .unwrap();
    drop(store);

    // The next start of the service.
    let store = backend.open().await.unwrap();
    assert_eq!(store.interrupt_running().await.unwrap(), 1);
    let row = store.session("a", &running.id).await.unwrap().unwrap();
    assert_eq!(row.state, SessionState::Interrupted);
    assert_eq!(
        store.session("a", &idle.id).await.unwrap().unwrap().state,
        SessionState::Idle
    );
    let last = store.events_after("a", &running.id, 1, 10).await.unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].seq, 2);
    assert_eq!(last[0].event["type"], "run_interrupted");
    assert!(
        store
            .events_after("a", &idle.id, 0, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.approval("a", "apr_1").await.unwrap().unwrap().state,
        "expired"
    );
    assert!(store.pending_approvals("a").await.unwrap().is_empty());
    assert_eq!(
        store.interrupt_running().await.unwrap(),
        0,
        "nothing runs any more"
    );
    assert!(
        store
            .transition(
                "a",
                &running.id,
                &[
                    SessionState::Idle,
                    SessionState::Interrupted,
                    SessionState::Failed
                ],
                SessionState::Running
            )
            .await
            .unwrap(),
        "an interrupted session takes a new message"
    );
}

/// Stores `messages` as an idle session's run does: the run begins, keeps them, and ends.
async fn keep_messages(store: &dyn ServiceStorage, tenant: &str, id: &str, messages: &Value) {
    let holder = "inst_a/run_keep";
    assert!(
        store
            .begin_run(tenant, id, &[SessionState::Idle], holder, now() + 60)
            .await
            .unwrap()
    );
    assert!(
        store
            .save_run_messages(tenant, id, holder, messages)
            .await
            .unwrap()
    );
    assert!(
        store
            .end_run(tenant, id, holder, SessionState::Idle)
            .await
            .unwrap()
    );
}

fn hold(session: &str, holder: &str) -> RunHold {
    RunHold {
        session: session.to_owned(),
        holder: holder.to_owned(),
    }
}

async fn a_run_whose_lease_lapsed_is_interrupted_and_a_renewed_one_is_not(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("acme").await.unwrap();
    let at = now();
    let mut ids = Vec::new();
    // The first is leased far ahead, the second's lease lapsed already.
    for (run, until) in [("inst_a/run_1", at + 60), ("inst_b/run_1", at - 1)] {
        let session = store.create_session("acme", None).await.unwrap();
        assert!(
            store
                .begin_run("acme", &session.id, &[SessionState::Idle], run, until)
                .await
                .unwrap()
        );
        ids.push(session.id);
    }
    // The third is running with no lease at all (a run started before leases were kept).
    let third = store.create_session("acme", None).await.unwrap();
    assert!(
        store
            .transition(
                "acme",
                &third.id,
                &[SessionState::Idle],
                SessionState::Running
            )
            .await
            .unwrap()
    );
    ids.push(third.id);
    store
        .add_approval("acme", &approval("apr_1", &ids[1], 1))
        .await
        .unwrap();
    // Only the lapsed one is interrupted; the one without a lease is within its grace.
    assert_eq!(store.interrupt_lapsed(at, 30).await.unwrap(), 1);
    let state = async |id: &str| store.session("acme", id).await.unwrap().unwrap().state;
    assert_eq!(state(&ids[0]).await, SessionState::Running);
    assert_eq!(state(&ids[1]).await, SessionState::Interrupted);
    assert_eq!(state(&ids[2]).await, SessionState::Running);
    let events = store.events_after("acme", &ids[1], 0, 10).await.unwrap();
    assert_eq!(events[0].event["type"], "run_interrupted");
    assert_eq!(
        store
            .approval("acme", "apr_1")
            .await
            .unwrap()
            .unwrap()
            .state,
        "expired"
    );
    // Renewed, the first outlives a sweep that would have found it lapsed.
    assert_eq!(
        store
            .renew_runs(&[hold(&ids[0], "inst_a/run_1")], at + 120)
            .await
            .unwrap(),
        [ids[0].clone()]
    );
    assert_eq!(store.interrupt_lapsed(at + 61, 30).await.unwrap(), 1);
    assert_eq!(state(&ids[0]).await, SessionState::Running);
    // Past the grace, the run that never leased counted as lapsed.
    assert_eq!(state(&ids[2]).await, SessionState::Interrupted);
    // A run that ended gave its lease back: a new run of it leases afresh.
    assert!(
        store
            .end_run("acme", &ids[0], "inst_a/run_1", SessionState::Idle)
            .await
            .unwrap()
    );
    assert!(
        store
            .begin_run(
                "acme",
                &ids[0],
                &[SessionState::Idle],
                "inst_a/run_2",
                at + 60
            )
            .await
            .unwrap()
    );
    assert_eq!(store.interrupt_lapsed(at, 30).await.unwrap(), 0);
}

async fn a_run_that_lost_its_lease_can_write_nothing_more(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("acme").await.unwrap();
    let at = now();
    let id = store.create_session("acme", None).await.unwrap().id;
    let (first, second) = ("inst_a/run_1", "inst_b/run_1");
    assert!(
        store
            .begin_run("acme", &id, &[SessionState::Idle], first, at + 5)
            .await
            .unwrap()
    );
    // A second start while it runs is refused.
    assert!(
        !store
            .begin_run("acme", &id, &[SessionState::Idle], second, at + 5)
            .await
            .unwrap()
    );
    // While it holds the lease, its writes land; a stranger's do not.
    assert_eq!(
        store
            .append_run_event("acme", &id, first, &json!({"type": "a"}))
            .await
            .unwrap(),
        Some(1)
    );
    assert!(
        store
            .save_run_messages("acme", &id, first, &json!(["first's"]))
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .append_run_event("acme", &id, second, &json!({"type": "x"}))
            .await
            .unwrap(),
        None
    );
    assert!(
        store
            .renew_runs(&[hold(&id, first), hold(&id, second)], at + 10)
            .await
            .unwrap()
            == [id.clone()]
    );
    // Its instance stops renewing: another instance interrupts the session.
    assert_eq!(store.interrupt_lapsed(at + 11, 30).await.unwrap(), 1);
    assert_eq!(
        store
            .renew_runs(&[hold(&id, first)], at + 20)
            .await
            .unwrap(),
        Vec::<String>::new(),
        "a lost lease is not renewed"
    );
    assert_eq!(
        store
            .append_run_event("acme", &id, first, &json!({"type": "late"}))
            .await
            .unwrap(),
        None
    );
    assert!(
        !store
            .save_run_messages("acme", &id, first, &json!(["late"]))
            .await
            .unwrap()
    );
    assert!(
        !store
            .end_run("acme", &id, first, SessionState::Idle)
            .await
            .unwrap()
    );
    // Resumed by another run: the first run's writes stay refused, the second's land.
    assert!(
        store
            .begin_run("acme", &id, &[SessionState::Interrupted], second, at + 60)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .append_run_event("acme", &id, first, &json!({"type": "late"}))
            .await
            .unwrap(),
        None
    );
    assert!(
        !store
            .end_run("acme", &id, first, SessionState::Idle)
            .await
            .unwrap()
    );
    assert_eq!(
        store
            .append_run_event("acme", &id, second, &json!({"type": "b"}))
            .await
            .unwrap(),
        Some(3)
    );
    assert_eq!(
        store.messages("acme", &id).await.unwrap(),
        json!(["first's"])
    );
    assert!(
        store
            .end_run("acme", &id, second, SessionState::Idle)
            .await
            .unwrap()
    );
    assert_eq!(
        store.session("acme", &id).await.unwrap().unwrap().state,
        SessionState::Idle
    );
    let kinds: Vec<_> = store
        .events_after("acme", &id, 0, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.event["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kinds, ["a", "run_interrupted", "b"]);
    // An ended run holds nothing.
    assert_eq!(
        store
            .append_run_event("acme", &id, second, &json!({"type": "after"}))
            .await
            .unwrap(),
        None
    );
}

async fn a_session_moves_only_from_the_states_it_is_asked_from(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("a").await.unwrap();
    let session = store.create_session("a", None).await.unwrap();
    let id = session.id.as_str();
    assert!(
        store
            .transition("a", id, &[SessionState::Idle], SessionState::Running)
            .await
            .unwrap()
    );
    assert!(
        !store
            .transition("a", id, &[SessionState::Idle], SessionState::Running)
            .await
            .unwrap(),
        "a second run cannot start while one runs"
    );
    assert!(
        store
            .transition("a", id, &[SessionState::Running], SessionState::Failed)
            .await
            .unwrap()
    );
    assert!(
        !store
            .transition("a", id, &[], SessionState::Idle)
            .await
            .unwrap()
    );
    assert!(
        store
            .transition(
                "a",
                id,
                &[SessionState::Idle, SessionState::Failed],
                SessionState::Idle
            )
            .await
            .unwrap()
    );
    assert_eq!(
        store.session("a", id).await.unwrap().unwrap().state,
        SessionState::Idle
    );
    assert!(
        !store
            .transition(
                "a",
                "ses_unknown",
                &[SessionState::Idle],
                SessionState::Running
            )
            .await
            .unwrap()
    );
    // Of racing starts, one wins.
    let winners = (0..4)
        .map(|_| {
            let store = Arc::clone(&store);
            let id = id.to_owned();
            tokio::spawn(async move {
                store
                    .transition("a", &id, &[SessionState::Idle], SessionState::Running)
                    .await
                    .unwrap()
            })
        })
        .collect::<Vec<_>>();
    let winners: usize = futures::future::join_all(winners)
        .await
        .into_iter()
        .map(|won| usize::from(won.unwrap()))
        .sum();
    assert_eq!(winners, 1);
}

async fn an_approval_is_decided_once(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("a").await.unwrap();
    let session = store.create_session("a", None).await.unwrap();
    let first = approval("apr_1", &session.id, 1);
    let second = approval("apr_2", &session.id, 2);
    store.add_approval("a", &second).await.unwrap();
    store.add_approval("a", &first).await.unwrap();
    assert!(
        store
            .add_approval("a", &approval("apr_3", "ses_unknown", 3))
            .await
            .is_err(),
        "an approval belongs to a stored session"
    );
    assert_eq!(
        store.pending_approvals("a").await.unwrap(),
        [first.clone(), second.clone()],
        "oldest first"
    );
    assert_eq!(store.approval("a", "apr_1").await.unwrap().unwrap(), first);
    assert!(
        store
            .decide_approval("a", "apr_1", "allowed_for_session", "alice")
            .await
            .unwrap()
    );
    assert!(
        !store
            .decide_approval("a", "apr_1", "denied", "bob")
            .await
            .unwrap(),
        "decided once"
    );
    let decided = store.approval("a", "apr_1").await.unwrap().unwrap();
    assert_eq!(decided.state, "allowed_for_session");
    assert_eq!(decided.decided_by.as_deref(), Some("alice"));
    assert!(
        store
            .decide_approval("a", "apr_2", "denied", "bob")
            .await
            .unwrap()
    );
    assert_eq!(
        store.allowed_for_session("a", &session.id).await.unwrap(),
        ["srv__write"]
    );
    assert!(store.pending_approvals("a").await.unwrap().is_empty());
    assert!(
        !store
            .decide_approval("a", "apr_x", "denied", "bob")
            .await
            .unwrap()
    );
}

async fn a_client_call_is_answered_once(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("a").await.unwrap();
    let session = store.create_session("a", None).await.unwrap();
    let id = session.id.as_str();
    let mut first = client_call("call_1", id);
    first.created_at = 10;
    let mut second = client_call("call_2", id);
    second.created_at = 20;
    store.add_client_call("a", &second).await.unwrap();
    store.add_client_call("a", &first).await.unwrap();
    assert_eq!(
        store.pending_client_calls("a", id).await.unwrap(),
        [first.clone(), second.clone()]
    );
    assert_eq!(
        store.client_call("a", id, "call_1").await.unwrap().unwrap(),
        first
    );
    let answer = json!({"result": {"rows": [1, 2]}});
    assert!(
        store
            .answer_client_call("a", id, "call_1", &answer)
            .await
            .unwrap()
    );
    assert!(
        !store
            .answer_client_call("a", id, "call_1", &json!({"error": "late"}))
            .await
            .unwrap(),
        "answered once"
    );
    let answered = store.client_call("a", id, "call_1").await.unwrap().unwrap();
    assert_eq!(answered.state, "answered");
    assert_eq!(answered.answer, Some(answer));
    assert_eq!(store.pending_client_calls("a", id).await.unwrap(), [second]);
    assert_eq!(store.client_calls("a", id).await.unwrap().len(), 2);
    assert!(
        store
            .client_call("a", id, "call_x")
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.delete_session("a", id).await.unwrap());
    assert!(store.client_calls("a", id).await.unwrap().is_empty());
}

async fn skills_are_put_listed_read_and_deleted(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("a").await.unwrap();
    assert!(
        store
            .put_skill("a", "zeta", "last", "z text")
            .await
            .unwrap()
    );
    assert!(
        store
            .put_skill("a", "alpha", "first", "a text")
            .await
            .unwrap()
    );
    assert!(
        !store
            .put_skill("a", "alpha", "first, again", "a2")
            .await
            .unwrap(),
        "a replacement is not new"
    );
    let listed = store.list_skills("a").await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|row| (row.name.as_str(), row.description.as_str()))
            .collect::<Vec<_>>(),
        [("alpha", "first, again"), ("zeta", "last")]
    );
    assert_eq!(
        store.skill_text("a", "alpha").await.unwrap().as_deref(),
        Some("a2")
    );
    assert!(store.skill_text("a", "beta").await.unwrap().is_none());
    assert!(store.delete_skill("a", "alpha").await.unwrap());
    assert!(!store.delete_skill("a", "alpha").await.unwrap());
    assert_eq!(store.list_skills("a").await.unwrap().len(), 1);
}

async fn servers_are_registered_replaced_and_removed(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("a").await.unwrap();
    let first = server("crm", "https://crm.example/mcp");
    assert!(store.put_server("a", &first).await.unwrap());
    assert!(
        store
            .put_server("a", &server("billing", "https://b.example"))
            .await
            .unwrap()
    );
    let mut replaced = server("crm", "https://crm2.example/mcp");
    replaced
        .headers
        .insert("X-Team".to_owned(), "${env:TEAM}".to_owned());
    assert!(!store.put_server("a", &replaced).await.unwrap());
    let listed = store.list_servers("a").await.unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|row| row.name.as_str())
            .collect::<Vec<_>>(),
        ["billing", "crm"]
    );
    assert_eq!(listed[1].url, "https://crm2.example/mcp");
    assert_eq!(listed[1].headers, replaced.headers);
    assert_eq!(
        listed[1].created_at, first.created_at,
        "registered when first put"
    );
    assert!(store.delete_server("a", "crm").await.unwrap());
    assert!(!store.delete_server("a", "crm").await.unwrap());
    assert_eq!(store.list_servers("a").await.unwrap().len(), 1);
}

async fn a_tenant_s_secrets_are_set_replaced_listed_by_name_and_removed(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    assert!(
        store
            .put_tenant_secret("a", "ORDERS", "first")
            .await
            .unwrap()
    );
    assert!(
        !store
            .put_tenant_secret("a", "ORDERS", "second")
            .await
            .unwrap()
    );
    assert!(store.put_tenant_secret("a", "CRM", "crm").await.unwrap());
    assert_eq!(
        store.tenant_secret("a", "ORDERS").await.unwrap().as_deref(),
        Some("second")
    );
    let names: Vec<String> = store
        .tenant_secret_names("a")
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.name)
        .collect();
    assert_eq!(names, ["CRM", "ORDERS"]);
    // Another tenant's are its own.
    assert_eq!(store.tenant_secret("b", "ORDERS").await.unwrap(), None);
    assert!(store.tenant_secret_names("b").await.unwrap().is_empty());
    assert!(!store.delete_tenant_secret("b", "ORDERS").await.unwrap());
    assert!(store.delete_tenant_secret("a", "ORDERS").await.unwrap());
    assert!(!store.delete_tenant_secret("a", "ORDERS").await.unwrap());
    assert_eq!(store.tenant_secret("a", "ORDERS").await.unwrap(), None);
}

async fn prompt_snapshots_round_trip(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("a").await.unwrap();
    let first = prompt("triage", "look at this");
    assert!(store.put_prompt("a", &first).await.unwrap());
    assert!(store.put_prompt("a", &prompt("alpha", "x")).await.unwrap());
    let replaced = prompt("triage", "look again");
    assert!(!store.put_prompt("a", &replaced).await.unwrap());
    assert_eq!(
        store.prompt("a", "triage").await.unwrap().unwrap(),
        replaced
    );
    assert_eq!(
        store
            .list_prompts("a")
            .await
            .unwrap()
            .iter()
            .map(|row| row.name.as_str())
            .collect::<Vec<_>>(),
        ["alpha", "triage"]
    );
    assert!(store.delete_prompt("a", "triage").await.unwrap());
    assert!(!store.delete_prompt("a", "triage").await.unwrap());
    assert!(store.prompt("a", "triage").await.unwrap().is_none());
}

async fn tenants_and_keys_are_listed_for_the_operator(backend: &dyn Backend) {
    let store = backend.open().await.unwrap();
    store.ensure_tenant("beta").await.unwrap();
    store.ensure_tenant("beta").await.unwrap();
    let operator = store
        .issue_key("ops", "root", Role::Operator)
        .await
        .unwrap();
    let admin = store.issue_key("acme", "alice", Role::Admin).await.unwrap();
    let app = store.issue_key("acme", "app", Role::Caller).await.unwrap();
    store.create_session("acme", None).await.unwrap();
    assert_eq!(
        store
            .resolve_key(&operator.secret)
            .await
            .unwrap()
            .unwrap()
            .role,
        Role::Operator
    );
    assert_eq!(
        store
            .resolve_key(&admin.secret)
            .await
            .unwrap()
            .unwrap()
            .role,
        Role::Admin
    );
    assert!(store.revoke_key(&app.id).await.unwrap());
    let tenants = store.list_tenants().await.unwrap();
    assert_eq!(
        tenants
            .iter()
            .map(|row| (row.name.as_str(), row.keys, row.sessions))
            .collect::<Vec<_>>(),
        [("acme", 1, 1), ("beta", 0, 0), ("ops", 1, 0)],
        "live keys and sessions counted"
    );
    let keys = store.list_keys("acme").await.unwrap();
    assert_eq!(keys.len(), 2);
    let by_id: BTreeMap<&str, _> = keys.iter().map(|row| (row.id.as_str(), row)).collect();
    assert_eq!(by_id[admin.id.as_str()].role, Role::Admin);
    assert_eq!(by_id[admin.id.as_str()].caller, "alice");
    assert!(by_id[admin.id.as_str()].revoked_at.is_none());
    assert!(by_id[app.id.as_str()].revoked_at.is_some());
    assert!(
        keys.windows(2)
            .all(|pair| pair[0].created_at >= pair[1].created_at),
        "newest first"
    );
}

async fn a_new_database_gets_the_current_schema_version_and_reopening_keeps_its_rows(
    backend: &dyn Backend,
) {
    let store = backend.open().await.unwrap();
    assert_eq!(backend.version().await, SCHEMA_VERSION);
    let key = store.issue_key("acme", "app", Role::Caller).await.unwrap();
    drop(store);
    let again = backend.open().await.unwrap();
    assert_eq!(backend.version().await, SCHEMA_VERSION);
    assert_eq!(
        again
            .resolve_key(&key.secret)
            .await
            .unwrap()
            .unwrap()
            .tenant,
        "acme"
    );
}

async fn a_database_of_a_newer_schema_is_refused_with_both_versions(backend: &dyn Backend) {
    drop(backend.open().await.unwrap());
    backend.stamp_version(SCHEMA_VERSION + 41).await;
    let Err(error) = backend.open().await else {
        panic!("a newer schema must be refused");
    };
    assert!(
        matches!(error, StoreError::NewerSchema { found, known }
            if found == SCHEMA_VERSION + 41 && known == SCHEMA_VERSION),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!("version {}", SCHEMA_VERSION + 41)),
        "{message}"
    );
    assert!(
        message.contains(&format!("version {SCHEMA_VERSION}")),
        "{message}"
    );
    assert!(!message.contains('\n'));
    assert_eq!(
        backend.version().await,
        SCHEMA_VERSION + 41,
        "left as it was"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_database_made_before_schema_versions_is_brought_to_the_current_one() {
    let backend = Sqlite::new();
    {
        let raw = backend.raw();
        raw.execute_batch(
            "CREATE TABLE tenants (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL);
             INSERT INTO tenants VALUES ('old', 1);",
        )
        .unwrap();
    }
    let store = backend.open().await.unwrap();
    assert_eq!(backend.version().await, SCHEMA_VERSION);
    assert_eq!(store.list_tenants().await.unwrap()[0].name, "old");
}

#[test]
fn postgres_storage_answers_inside_another_runtime_and_is_dropped_there() {
    let backend = warden_testkit::require_or_skip!(Postgres::new());
    let url = backend.server.url();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let store = PgStorage::connect(&url).await.unwrap();
        store.ensure_tenant("a").await.unwrap();
        let session = store.create_session("a", None).await.unwrap();
        assert_eq!(
            store
                .append_event("a", &session.id, &json!({}))
                .await
                .unwrap(),
            1
        );
        let spawned = tokio::spawn(async move {
            let listed = store.list_sessions("a").await.unwrap();
            drop(store);
            listed.len()
        });
        assert_eq!(spawned.await.unwrap(), 1);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_or_unreachable_postgres_url_is_an_error_that_never_shows_the_password() {
    let Err(error) = PgStorage::connect("postgres://warden:hunter2@127.0.0.1:1/db").await else {
        panic!("nothing listens on port 1");
    };
    let message = error.to_string();
    assert!(!message.contains("hunter2"), "{message}");
    assert!(message.contains("[redacted]"), "{message}");
    let Err(error) = PgStorage::connect("postgres://warden:hunter2@127.0.0.1:notaport/db").await
    else {
        panic!("a bad port");
    };
    assert!(!error.to_string().contains("hunter2"), "{error}");
}

fn server(name: &str, url: &str) -> ServerRow {
    ServerRow {
        name: name.to_owned(),
        url: url.to_owned(),
        headers: BTreeMap::from([("Authorization".to_owned(), "${env:TOKEN}".to_owned())]),
        created_at: 1_700_000_000,
    }
}

fn prompt(name: &str, text: &str) -> PromptRow {
    PromptRow {
        name: name.to_owned(),
        server: "crm".to_owned(),
        prompt: "triage".to_owned(),
        arguments: BTreeMap::from([("ticket".to_owned(), "42".to_owned())]),
        description: Some("a prompt".to_owned()),
        messages: vec![
            PromptMessage {
                role: "user".to_owned(),
                text: text.to_owned(),
            },
            PromptMessage {
                role: "assistant".to_owned(),
                text: "ok".to_owned(),
            },
        ],
        copied_by: "alice".to_owned(),
        created_at: 1_700_000_000,
    }
}

fn client_call(id: &str, session: &str) -> ClientCallRow {
    ClientCallRow {
        id: id.to_owned(),
        session: session.to_owned(),
        tool: "lookup".to_owned(),
        arguments: json!({"q": "x"}),
        state: "pending".to_owned(),
        answer: None,
        created_at: 1_700_000_000,
    }
}

fn approval(id: &str, session: &str, created_at: u64) -> ApprovalRow {
    ApprovalRow {
        id: id.to_owned(),
        session: session.to_owned(),
        tool: "srv__write".to_owned(),
        arguments: json!({"path": "/x"}),
        classes: vec!["write".to_owned()],
        caller: Some("web".to_owned()),
        reason: "writes need a person".to_owned(),
        state: "pending".to_owned(),
        decided_by: None,
        created_at,
        requested_by: Some("key_web".to_owned()),
    }
}

fn audit_record(tenant: &str, session: &str, name: &str) -> AuditRecord {
    AuditRecord {
        time: std::time::SystemTime::now(),
        session_id: session.to_owned(),
        surface: CallSurface::Agent,
        kind: CallKind::Tool,
        effect: None,
        tenant: Some(tenant.to_owned()),
        caller: Some("app".to_owned()),
        server: Some("fx".to_owned()),
        tool: Some(name.to_owned()),
        public_name: name.to_owned(),
        annotations: None,
        classes: CapabilitySet::EMPTY,
        decision: Decision::Allowed,
        layer: Layer::Dispatch,
        reason: None,
        gate_duration: std::time::Duration::from_millis(3),
        execution_duration: Some(std::time::Duration::from_millis(7)),
        result_bytes: Some(12),
        result_is_error: Some(false),
        error: None,
        arguments_digest: warden_policy::arguments_digest(&json!({"q": name})),
        arguments: Some(json!({"q": name})),
        confinement: None,
    }
}

fn names(rows: &[warden_policy::AuditRow]) -> Vec<String> {
    rows.iter().map(|row| row.public_name.clone()).collect()
}

async fn audit_records_of_two_instances_are_stored_once_and_read_from_either(
    backend: &dyn Backend,
) {
    drop(backend.open().await.unwrap());
    let (first, second) = (backend.audit().await, backend.audit().await);
    let mut from_first = audit_record("acme", "s1", "first");
    from_first.annotations = Some(warden_policy::ToolAnnotations {
        read_only_hint: Some(true),
        ..Default::default()
    });
    from_first.classes = CapabilitySet::EMPTY.with(warden_vocab::CapabilityClass::ReadOnly);
    from_first.effect = Some(warden_vocab::CapabilityClass::ReadOnly);
    let mut from_second = audit_record("acme", "s2", "second");
    from_second.decision = Decision::Denied;
    from_second.layer = Layer::Rule;
    from_second.reason = Some("a rule denies it".to_owned());
    from_second.result_is_error = Some(true);
    {
        first.record_async(from_first.clone(), true).await.unwrap();
    }
    second.record(&from_second).unwrap();
    // Each record is committed before its writer heard back: a handle opened now sees both.
    let third = backend.audit().await;
    for log in [&first, &second, &third] {
        let rows = log.query(&AuditQuery::default()).unwrap();
        assert_eq!(names(&rows), ["first", "second"]);
        assert!(rows[0].id < rows[1].id);
        let expected = warden_policy::AuditColumns::from(&from_first).to_row(rows[0].id);
        assert_eq!(rows[0], expected);
        let expected = warden_policy::AuditColumns::from(&from_second).to_row(rows[1].id);
        assert_eq!(rows[1], expected);
        assert_eq!(log.last_id().unwrap(), Some(rows[1].id));
    }
}

async fn a_call_s_outcome_completes_its_intent_in_place(backend: &dyn Backend) {
    drop(backend.open().await.unwrap());
    let log = backend.audit().await;
    let mut intent = audit_record("acme", "s1", "slow");
    intent.decision = Decision::Started;
    intent.execution_duration = None;
    intent.result_bytes = None;
    intent.result_is_error = None;
    let entry = log.begin_async(intent.clone(), true).await.unwrap();
    assert_ne!(entry, AuditEntry::NONE);
    // Before the outcome (as after a crash mid-call): the intent says the call started.
    let rows = log.query(&AuditQuery::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].decision, "started");
    assert_eq!(Some(rows[0].id), entry.id());
    let outcome = audit_record("acme", "s1", "slow");
    log.complete_async(entry, outcome, true).await.unwrap();
    let rows = log.query(&AuditQuery::default()).unwrap();
    assert_eq!(rows.len(), 1, "one record per call");
    assert_eq!(Some(rows[0].id), entry.id());
    assert_eq!(rows[0].decision, "allowed");
    assert_eq!(rows[0].execution_ms, Some(7));
    // No intent, or one that is not there: the outcome is a record of its own.
    log.complete_async(AuditEntry::NONE, audit_record("acme", "s1", "b"), true)
        .await
        .unwrap();
    let missing = AuditEntry::stored(entry.id().unwrap() + 1_000_000);
    log.complete_async(missing, audit_record("acme", "s1", "c"), true)
        .await
        .unwrap();
    let rows = log.query(&AuditQuery::default()).unwrap();
    assert_eq!(names(&rows), ["slow", "b", "c"]);
}

async fn concurrent_audit_records_are_each_stored_once_and_a_cursor_skips_none(
    backend: &dyn Backend,
) {
    const WRITERS: usize = 4;
    const EACH: usize = 60;
    drop(backend.open().await.unwrap());
    let instances = [backend.audit().await, backend.audit().await];
    let reader = backend.audit().await;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // A client paging after its cursor while the instances write.
    let pager = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut cursor = 0;
            loop {
                let finished = done.load(std::sync::atomic::Ordering::Acquire);
                let page = reader
                    .query(&AuditQuery {
                        after_id: Some(cursor),
                        limit: Some(50),
                        oldest_first: true,
                        ..AuditQuery::default()
                    })
                    .unwrap();
                if let Some(last) = page.last() {
                    cursor = last.id;
                }
                let empty = page.is_empty();
                seen.extend(page.into_iter().map(|row| row.public_name));
                if finished && empty {
                    return seen;
                }
            }
        })
    };
    {
        let mut writes = Vec::new();
        for (instance, log) in instances.iter().enumerate() {
            for writer in 0..WRITERS {
                for index in 0..EACH {
                    let record =
                        audit_record("acme", "s", &format!("i{instance}-w{writer}-{index}"));
                    writes.push(log.record_async(record, false));
                }
            }
        }
        for written in futures::future::join_all(writes).await {
            written.unwrap();
        }
    };
    done.store(true, std::sync::atomic::Ordering::Release);
    let paged = pager.join().unwrap();
    let rows = instances[0].query(&AuditQuery::default()).unwrap();
    let total = 2 * WRITERS * EACH;
    assert_eq!(rows.len(), total);
    let unique: std::collections::BTreeSet<&String> =
        rows.iter().map(|row| &row.public_name).collect();
    assert_eq!(unique.len(), total, "each record exactly once");
    let ids: std::collections::BTreeSet<i64> = rows.iter().map(|row| row.id).collect();
    assert_eq!(ids.len(), total);
    assert_eq!(
        paged.len(),
        total,
        "the cursor neither skipped nor repeated a record"
    );
    let paged: std::collections::BTreeSet<&String> = paged.iter().collect();
    assert_eq!(paged, unique);
}

async fn an_audit_query_filters_and_never_reaches_another_tenant_s_records(backend: &dyn Backend) {
    drop(backend.open().await.unwrap());
    let log = backend.audit().await;
    let hostile = "acme' OR 'x'='x";
    let mut denied = audit_record("acme", "s1", "rm");
    denied.decision = Decision::Denied;
    denied.surface = CallSurface::CodeMode;
    let records = [
        audit_record("acme", "s1", "read"),
        denied,
        audit_record("acme", "s2", "read"),
        audit_record("other", "s3", "read"),
        audit_record(hostile, "s4", "'; DROP TABLE audit; --"),
    ];
    for record in &records {
        log.record(record).unwrap();
    }
    let query = |query: AuditQuery| log.query(&query).unwrap();
    let acme = query(AuditQuery {
        tenant: Some("acme".to_owned()),
        ..AuditQuery::default()
    });
    assert_eq!(acme.len(), 3);
    assert!(acme.iter().all(|row| row.tenant.as_deref() == Some("acme")));
    let other = query(AuditQuery {
        tenant: Some("other".to_owned()),
        ..AuditQuery::default()
    });
    assert_eq!(other.len(), 1);
    assert_eq!(other[0].session_id, "s3");
    // A tenant named like an injection matches itself only; its text is stored as written.
    let injected = query(AuditQuery {
        tenant: Some(hostile.to_owned()),
        ..AuditQuery::default()
    });
    assert_eq!(names(&injected), ["'; DROP TABLE audit; --"]);
    let by = |tenant: &str, edit: &dyn Fn(&mut AuditQuery)| {
        let mut filter = AuditQuery {
            tenant: Some(tenant.to_owned()),
            ..AuditQuery::default()
        };
        edit(&mut filter);
        query(filter)
    };
    assert_eq!(by("acme", &|q| q.session = Some("s1".into())).len(), 2);
    assert_eq!(
        by("acme", &|q| q.session = Some("s3".into())).len(),
        0,
        "another tenant's session"
    );
    assert_eq!(names(&by("acme", &|q| q.denied_only = true)), ["rm"]);
    assert_eq!(
        names(&by("acme", &|q| q.decision = Some("denied".into()))),
        ["rm"]
    );
    assert_eq!(
        names(&by("acme", &|q| q.source = Some("code-mode".into()))),
        ["rm"]
    );
    assert_eq!(by("acme", &|q| q.tool = Some("read".into())).len(), 2);
    let future = (now() + 3600) as i64 * 1000;
    assert_eq!(by("acme", &|q| q.since_unix_ms = Some(future)).len(), 0);
    assert_eq!(by("acme", &|q| q.until_unix_ms = Some(future)).len(), 3);
    assert_eq!(by("acme", &|q| q.until_unix_ms = Some(0)).len(), 0);
    // A limit takes the newest rows, or with oldest_first the oldest after the cursor.
    let newest = by("acme", &|q| q.limit = Some(2));
    assert_eq!(
        newest.iter().map(|row| row.id).collect::<Vec<_>>(),
        [acme[1].id, acme[2].id]
    );
    let first = acme[0].id;
    let page = by("acme", &|q| {
        q.limit = Some(1);
        q.oldest_first = true;
        q.after_id = Some(first);
    });
    assert_eq!(
        page.iter().map(|row| row.id).collect::<Vec<_>>(),
        [acme[1].id]
    );
}

async fn an_audit_record_handed_over_is_stored_though_its_waiter_left(backend: &dyn Backend) {
    drop(backend.open().await.unwrap());
    let log = backend.audit().await;
    {
        let abandoned = log.record_async(audit_record("acme", "s1", "left"), false);
        drop(abandoned);
        // A later record of the same writer commits after it.
        log.record_async(audit_record("acme", "s1", "after"), false)
            .await
            .unwrap();
    };
    let rows = backend.audit().await.query(&AuditQuery::default()).unwrap();
    assert_eq!(names(&rows), ["left", "after"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_audit_commits_records_arriving_together_in_one_transaction() {
    let backend = warden_testkit::require_or_skip!(Postgres::new());
    let storage = PgStorage::connect(&backend.server.url()).await.unwrap();
    let audit = storage.audit().unwrap();
    const RECORDS: usize = 200;
    {
        // Handed over together, before any is awaited.
        let writes: Vec<_> = (0..RECORDS)
            .map(|index| audit.record_async(audit_record("acme", "s", &format!("r{index}")), false))
            .collect();
        for written in futures::future::join_all(writes).await {
            written.unwrap();
        }
    }
    let commits = audit.commits();
    assert!(commits >= 1);
    assert!(
        commits < RECORDS as u64,
        "{commits} transactions for {RECORDS} records arriving together"
    );
    assert_eq!(audit.query(&AuditQuery::default()).unwrap().len(), RECORDS);
}

/// The next signal `receiver` gets, or a failure after a generous bound.
async fn next_signal(
    receiver: &mut tokio::sync::broadcast::Receiver<warden_store::Signal>,
) -> warden_store::Signal {
    tokio::time::timeout(std::time::Duration::from_secs(30), receiver.recv())
        .await
        .expect("a signal within 30 s")
        .expect("the channel is open")
}

/// Publishes markers from `from` until `receiver`, another instance's, hears one (its listener
/// is then LISTENing).
async fn until_listening(
    from: &PgStorage,
    receiver: &mut tokio::sync::broadcast::Receiver<warden_store::Signal>,
) {
    for attempt in 0..300 {
        from.signals()
            .publish(warden_store::Signal::EventsAppended {
                session: format!("ready-{attempt}"),
            });
        if let Ok(Ok(_)) =
            tokio::time::timeout(std::time::Duration::from_millis(100), receiver.recv()).await
        {
            return;
        }
    }
    panic!("the listener never heard a signal");
}

/// Takes whatever is still arriving, until nothing has come for a while.
async fn drain(receiver: &mut tokio::sync::broadcast::Receiver<warden_store::Signal>) {
    while let Ok(Ok(_)) =
        tokio::time::timeout(std::time::Duration::from_millis(500), receiver.recv()).await
    {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_signals_reach_the_other_instance_once_and_its_own_subscribers_once() {
    use warden_store::Signal;
    let backend = warden_testkit::require_or_skip!(Postgres::new());
    let (a, b) = (
        PgStorage::connect(&backend.server.url()).await.unwrap(),
        PgStorage::connect(&backend.server.url()).await.unwrap(),
    );
    assert!(a.signals_reach_every_instance());
    {
        let mut on_a = a.signals().subscribe();
        let mut on_b = b.signals().subscribe();
        until_listening(&a, &mut on_b).await;
        until_listening(&b, &mut on_a).await;
        drain(&mut on_a).await;
        drain(&mut on_b).await;
        let cancel = Signal::CancelRun {
            session: "ses_1".to_owned(),
        };
        a.signals().publish(cancel.clone());
        assert_eq!(
            next_signal(&mut on_b).await,
            cancel,
            "the other instance hears it"
        );
        assert_eq!(
            next_signal(&mut on_a).await,
            cancel,
            "its own subscribers at once"
        );
        // A marker from B comes next on A: A did not hear its own signal a second time.
        let marker = Signal::EventsAppended {
            session: "marker".to_owned(),
        };
        b.signals().publish(marker.clone());
        assert_eq!(next_signal(&mut on_a).await, marker);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_notification_cannot_decide_an_approval() {
    use warden_store::Signal;
    let backend = warden_testkit::require_or_skip!(Postgres::new());
    let (a, b) = (
        PgStorage::connect(&backend.server.url()).await.unwrap(),
        PgStorage::connect(&backend.server.url()).await.unwrap(),
    );
    a.ensure_tenant("acme").await.unwrap();
    let session = a.create_session("acme", None).await.unwrap();
    a.add_approval("acme", &approval("apr_1", &session.id, 1))
        .await
        .unwrap();
    {
        let mut on_b = b.signals().subscribe();
        until_listening(&a, &mut on_b).await;
        drain(&mut on_b).await;
        // Someone with the database's password claims the pending approval was allowed, and
        // sends text that is not a signal at all.
        let forged = json!({"from": "elsewhere", "signals": [{
            "signal": "approval_decided", "tenant": "acme", "id": "apr_1",
            "state": "allowed_once", "reason": null, "decided_by": "mallory"
        }]});
        let channel = warden_store_pg::SIGNAL_CHANNEL;
        backend
            .query(&format!("SELECT pg_notify('{channel}', '{forged}')"))
            .await;
        backend
            .query(&format!("SELECT pg_notify('{channel}', 'not json')"))
            .await;
        let marker = Signal::EventsAppended {
            session: "after".to_owned(),
        };
        a.signals().publish(marker.clone());
        assert_eq!(
            next_signal(&mut on_b).await,
            marker,
            "the forged decision was not handed on"
        );
        // A decision the store holds is handed on.
        assert!(
            a.decide_approval("acme", "apr_1", "denied", "ops")
                .await
                .unwrap()
        );
        let decided = Signal::ApprovalDecided {
            tenant: "acme".to_owned(),
            id: "apr_1".to_owned(),
            state: "denied".to_owned(),
            reason: Some("not on a Friday".to_owned()),
            decided_by: "ops".to_owned(),
        };
        a.signals().publish(decided.clone());
        assert_eq!(next_signal(&mut on_b).await, decided);
    }
    assert_eq!(
        b.approval("acme", "apr_1").await.unwrap().unwrap().state,
        "denied"
    );
}
