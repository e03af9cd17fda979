//! The order service behind warden's service API, served in-process over HTTP with a mock model:
//! a caller holding `orders.cancel` has a cancellation wait in the tenant's approvals queue until
//! someone allows it, and the model reads the cancelled order; a caller without the permission is
//! refused by the application's handler with its reason and nobody is asked; the audit, read
//! through the API, names server `code`, the tenant and each caller.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use warden_config::Paths;
use warden_example_order_service::{
    OrderBook, OrderServiceOpener, OrderStatus, service_database, staff_permissions,
};
use warden_mock_model::{MockModel, Turn};
use warden_policy::{
    AuthorizationError, AuthorizationHandler, AuthorizationQuestion, AuthorizationVerdict,
    BoxFuture,
};
use warden_service::{Role, ServiceStorage, SqliteStorage};

/// The order service's API on a free loopback port, stopped when dropped.
struct OrderService {
    base: String,
    shutdown: CancellationToken,
    store: Arc<dyn ServiceStorage>,
}

impl Drop for OrderService {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl OrderService {
    fn url(&self, path: &str) -> String {
        format!("{}/v1{path}", self.base)
    }

    async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        send(client().get(self.url(path)).bearer_auth(key)).await
    }

    async fn post(&self, key: &str, path: &str, body: Value) -> (u16, Value) {
        send(client().post(self.url(path)).bearer_auth(key).json(&body)).await
    }

    /// Posts the user's `text` to `session` (a run starts).
    async fn say(&self, key: &str, session: &str, text: &str) {
        let (status, accepted) = self
            .post(
                key,
                &format!("/sessions/{session}/messages"),
                json!({"text": text}),
            )
            .await;
        assert_eq!(status, 202, "{accepted}");
    }

    /// A new session of the default agent; its id.
    async fn new_session(&self, key: &str) -> String {
        let (status, session) = self.post(key, "/sessions", json!({})).await;
        assert_eq!(status, 201, "{session}");
        session["id"].as_str().unwrap().to_owned()
    }

    /// The session's events so far.
    async fn events(&self, key: &str, session: &str) -> Vec<Value> {
        let (status, page) = self
            .get(key, &format!("/sessions/{session}/events?limit=500"))
            .await;
        assert_eq!(status, 200, "{page}");
        page["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|event| event["event"].clone())
            .collect()
    }

    /// Polls the session's events until one of `kind` arrives; returns it.
    async fn wait_for_event(&self, key: &str, session: &str, kind: &str) -> Value {
        for _ in 0..1200 {
            if let Some(found) = self
                .events(key, session)
                .await
                .into_iter()
                .find(|event| event["type"] == kind)
            {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no {kind} event arrived in session {session}");
    }
}

fn client() -> reqwest::Client {
    warden_net::http_client().loopback().build().unwrap()
}

async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Serves the order service over `book` with warden's folders under `root`: the mock model as
/// the default model, the operator's policy left at its defaults.
async fn start(root: &std::path::Path, mock: &MockModel, book: Arc<OrderBook>) -> OrderService {
    start_with(root, mock, book, staff_permissions()).await
}

/// The service with `handler` as its authorization handler.
async fn start_with(
    root: &std::path::Path,
    mock: &MockModel,
    book: Arc<OrderBook>,
    handler: impl AuthorizationHandler + 'static,
) -> OrderService {
    let paths = Paths::under_root(root);
    let workspace = root.join("work");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(paths.user_config_file().parent().unwrap()).unwrap();
    std::fs::write(
        paths.user_config_file(),
        format!(
            "schema_version = 1\nmodel = \"mock\"\n[models.mock]\nprovider = \"openai\"\n\
             id = \"mock-1\"\nbase_url = {:?}\n",
            mock.base_url()
        ),
    )
    .unwrap();
    let store: Arc<dyn ServiceStorage> =
        Arc::new(SqliteStorage::open(&service_database(&paths)).unwrap());
    serve_on(store, paths, workspace, book, handler).await
}

/// One more instance of the service over `store` (its own runs, the same state).
async fn serve_on(
    store: Arc<dyn ServiceStorage>,
    paths: Paths,
    workspace: std::path::PathBuf,
    book: Arc<OrderBook>,
    handler: impl AuthorizationHandler + 'static,
) -> OrderService {
    let opener = OrderServiceOpener::new(paths, workspace, book, handler).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    tokio::spawn(warden_service::serve(
        listener,
        store.clone(),
        Arc::new(opener),
        shutdown.clone(),
    ));
    OrderService {
        base,
        shutdown,
        store,
    }
}

/// A key of `caller` in `tenant`, made in the service's own database (as `order-service key`).
async fn key(root: &std::path::Path, tenant: &str, caller: &str) -> String {
    key_of(root, tenant, caller, Role::Caller).await
}

/// A key that decides the tenant's approvals (as `order-service key --approver`).
async fn approver_key(root: &std::path::Path, tenant: &str, caller: &str) -> String {
    key_of(root, tenant, caller, Role::Approver).await
}

async fn key_of(root: &std::path::Path, tenant: &str, caller: &str, role: Role) -> String {
    SqliteStorage::open(&service_database(&Paths::under_root(root)))
        .unwrap()
        .issue_key(tenant, caller, role)
        .await
        .unwrap()
        .secret
}

fn status_of(book: &OrderBook, id: &str) -> OrderStatus {
    book.list(None)
        .unwrap()
        .into_iter()
        .find(|order| order.id == id)
        .unwrap()
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_waits_for_approval_and_a_caller_without_the_permission_is_refused() {
    let mock = MockModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let book = OrderBook::with_open_orders(&[("A-100", "ada"), ("A-101", "grace")]);
    let support = key(dir.path(), "acme", "support").await;
    let viewer = key(dir.path(), "acme", "viewer").await;
    let ops = approver_key(dir.path(), "acme", "ops@acme").await;
    let service = start(dir.path(), &mock, book.clone()).await;

    // support holds orders.cancel: the cancellation waits in the tenant's queue.
    mock.push_turn(Turn::tool_call(
        "call_1",
        "cancel_order",
        json!({"order_id": "A-100"}),
    ));
    mock.push_turn(Turn::text("Order A-100 is cancelled."));
    let session = service.new_session(&support).await;
    service
        .say(&support, &session, "Please cancel order A-100.")
        .await;
    let needed = service
        .wait_for_event(&support, &session, "approval_needed")
        .await;
    let approval = needed["approval"]["id"].as_str().unwrap().to_owned();
    assert_eq!(needed["approval"]["tool"], "cancel_order");
    assert_eq!(needed["approval"]["arguments"]["order_id"], "A-100");
    assert_eq!(needed["approval"]["caller"], "support");
    let (status, queue) = service.get(&ops, "/approvals").await;
    assert_eq!(status, 200, "{queue}");
    assert_eq!(queue["approvals"][0]["id"], approval.as_str(), "{queue}");
    assert_eq!(queue["approvals"][0]["state"], "pending", "{queue}");
    // Nothing is cancelled while the call waits.
    assert_eq!(status_of(&book, "A-100"), OrderStatus::Open);
    let (status, decided) = service
        .post(
            &ops,
            &format!("/approvals/{approval}"),
            json!({"decision": "allow_once"}),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    let finished = service
        .wait_for_event(&support, &session, "run_finished")
        .await;
    assert_eq!(finished["final_text"], "Order A-100 is cancelled.");
    assert_eq!(status_of(&book, "A-100"), OrderStatus::Cancelled);
    let after_cancel = mock.requests()[1].body.to_string();
    assert!(
        after_cancel.contains("A-100") && after_cancel.contains("cancelled"),
        "the model read the cancelled order: {after_cancel}"
    );

    // viewer does not hold orders.cancel: the handler refuses it, and nobody is asked.
    mock.push_turn(Turn::tool_call(
        "call_2",
        "cancel_order",
        json!({"order_id": "A-101"}),
    ));
    mock.push_turn(Turn::text("I cannot cancel A-101."));
    let session = service.new_session(&viewer).await;
    service
        .say(&viewer, &session, "Please cancel order A-101.")
        .await;
    let finished = service
        .wait_for_event(&viewer, &session, "run_finished")
        .await;
    assert_eq!(finished["final_text"], "I cannot cancel A-101.");
    let kinds: Vec<Value> = service
        .events(&viewer, &session)
        .await
        .into_iter()
        .map(|event| event["type"].clone())
        .collect();
    assert!(!kinds.contains(&json!("approval_needed")), "{kinds:?}");
    let (_, queue) = service.get(&ops, "/approvals").await;
    assert!(
        queue["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .all(|approval| approval["state"] != "pending"),
        "{queue}"
    );
    assert_eq!(status_of(&book, "A-101"), OrderStatus::Open);
    let after_refusal = mock.requests()[3].body.to_string();
    assert!(
        after_refusal.contains("viewer does not hold orders.cancel"),
        "the model read the handler's reason: {after_refusal}"
    );

    // The audit through the API: server code, the tenant and each caller.
    let (status, audit) = service.get(&ops, "/audit?tool=cancel_order&limit=10").await;
    assert_eq!(status, 200, "{audit}");
    let records = audit["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "{audit}");
    assert!(records.iter().all(|record| record["server"] == "code"));
    assert!(records.iter().all(|record| record["tenant"] == "acme"));
    assert!(
        records
            .iter()
            .all(|record| record["effect"] == "destructive")
    );
    assert_eq!(records[0]["caller"], "support");
    assert_eq!(records[0]["decision"], "allowed");
    assert!(
        records[0]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("approved by ops@acme"),
        "{audit}"
    );
    assert_eq!(records[1]["caller"], "viewer");
    assert_eq!(records[1]["decision"], "denied");
    assert_eq!(records[1]["layer"], "application");
    assert!(
        records[1]["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("viewer does not hold orders.cancel"),
        "{audit}"
    );
}

/// A handler with a bug: it panics on every question.
struct PanickingHandler;

impl AuthorizationHandler for PanickingHandler {
    fn authorize<'a>(
        &'a self,
        _question: &'a AuthorizationQuestion<'a>,
    ) -> BoxFuture<'a, Result<AuthorizationVerdict, AuthorizationError>> {
        Box::pin(async move { panic!("the permission table is not loaded") })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_panics_denies_the_call_and_the_run_goes_on() {
    let mock = MockModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let book = OrderBook::with_open_orders(&[("A-100", "ada")]);
    let support = key(dir.path(), "acme", "support").await;
    let service = start_with(dir.path(), &mock, book.clone(), PanickingHandler).await;
    mock.push_turn(Turn::tool_call(
        "call_1",
        "cancel_order",
        json!({"order_id": "A-100"}),
    ));
    mock.push_turn(Turn::text("I could not cancel A-100."));
    let session = service.new_session(&support).await;
    service
        .say(&support, &session, "Please cancel order A-100.")
        .await;
    let finished = service
        .wait_for_event(&support, &session, "run_finished")
        .await;
    assert_eq!(finished["final_text"], "I could not cancel A-100.");
    // Fail-closed: nothing was cancelled, nobody was asked, the model read a denial.
    assert_eq!(status_of(&book, "A-100"), OrderStatus::Open);
    let (_, queue) = service.get(&support, "/approvals").await;
    assert_eq!(queue["approvals"], json!([]));
    let result = mock.requests()[1].body.to_string();
    assert!(result.contains("denied"), "{result}");
    let (_, audit) = service.get(&support, "/audit?tool=cancel_order").await;
    assert_eq!(audit["records"][0]["decision"], "denied", "{audit}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_one_store_hand_a_decision_an_event_stream_and_a_cancel_to_each_other() {
    let mock = MockModel::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let book = OrderBook::with_open_orders(&[("A-100", "ada"), ("A-101", "grace")]);
    let support = key(dir.path(), "acme", "support").await;
    let ops = approver_key(dir.path(), "acme", "ops@acme").await;
    let first = start(dir.path(), &mock, book.clone()).await;
    let paths = Paths::under_root(dir.path());
    let second = serve_on(
        first.store.clone(),
        paths,
        dir.path().join("work"),
        book.clone(),
        staff_permissions(),
    )
    .await;

    // The run goes on the first instance; its approval is decided on the second.
    mock.push_turn(Turn::tool_call(
        "call_1",
        "cancel_order",
        json!({"order_id": "A-100"}),
    ));
    mock.push_turn(Turn::text("Order A-100 is cancelled."));
    let session = first.new_session(&support).await;
    first
        .say(&support, &session, "Please cancel order A-100.")
        .await;
    let needed = second
        .wait_for_event(&support, &session, "approval_needed")
        .await;
    // The second instance streams the first one's events as they come.
    let stream = client()
        .get(second.url(&format!("/sessions/{session}/events/stream")))
        .bearer_auth(&support)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    let approval = needed["approval"]["id"].as_str().unwrap().to_owned();
    let (status, decided) = second
        .post(
            &ops,
            &format!("/approvals/{approval}"),
            json!({"decision": "allow_once"}),
        )
        .await;
    assert_eq!(status, 200, "{decided}");
    let streamed = tokio::time::timeout(Duration::from_secs(60), stream.text())
        .await
        .expect("the stream ends with the run")
        .unwrap();
    assert!(streamed.contains("approval_decided"), "{streamed}");
    assert!(streamed.contains("run_finished"), "{streamed}");
    assert_eq!(status_of(&book, "A-100"), OrderStatus::Cancelled);

    // A run waiting on the first instance is cancelled through the second.
    mock.push_turn(Turn::tool_call(
        "call_2",
        "cancel_order",
        json!({"order_id": "A-101"}),
    ));
    first.say(&support, &session, "And A-101.").await;
    let pending = loop {
        let (_, queue) = second.get(&ops, "/approvals").await;
        if let Some(pending) = queue["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|approval| approval["arguments"]["order_id"] == "A-101")
        {
            break pending.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(pending["state"], "pending");
    let (status, cancelled) = second
        .post(&support, &format!("/sessions/{session}/cancel"), json!({}))
        .await;
    assert_eq!(status, 202, "{cancelled}");
    let ended = loop {
        let finished: Vec<Value> = second
            .events(&support, &session)
            .await
            .into_iter()
            .filter(|event| event["type"] == "run_finished")
            .collect();
        if finished.len() == 2 {
            break finished[1].clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(ended["stop"], "cancelled", "{ended}");
    assert_eq!(status_of(&book, "A-101"), OrderStatus::Open);
}
