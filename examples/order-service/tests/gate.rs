//! The order service's calls through warden's gate: a permitted call runs, the handler's denial
//! is a readable result, a cancellation is approved by a person who sees its effect class, and
//! the audit trail records the effect of each call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_config::{LoadedConfig, Paths};
use warden_example_order_service::{
    CANCEL_ORDERS, CallerPermissions, OrderBook, READ_ORDERS, order_tools,
};
use warden_host::{CallContext, CapabilityClass, Host, HostOptions};
use warden_policy::{
    ApprovalAnswer, ApprovalRequest, Approver, AuditQuery, AuditStore, BoxFuture, CallSurface,
    Decision, GateOutcome, Layer, PermissionMode,
};

/// Answers every question with `answer` and keeps the questions.
struct Person {
    answer: ApprovalAnswer,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for Person {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        self.asked.lock().unwrap().push(request.clone());
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

struct Service {
    _dir: tempfile::TempDir,
    paths: Paths,
    host: Arc<Host>,
    person: Arc<Person>,
    book: Arc<OrderBook>,
}

/// The service in `auto` mode (the operator lets policy decide): only the application's handler
/// and `requires_approval` stand between a caller and a cancellation.
fn service(answer: ApprovalAnswer) -> Service {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(dir.path());
    let book = OrderBook::with_open_orders(&[("A-100", "ada"), ("A-101", "grace")]);
    let person = Arc::new(Person {
        answer,
        asked: Mutex::new(Vec::new()),
    });
    let mut options = HostOptions::new(paths.clone(), dir.path().to_path_buf());
    options.policy.permissions.mode = PermissionMode::Auto;
    options.approver = Some(person.clone());
    options.authorization = Some(Arc::new(
        CallerPermissions::default()
            .grant("support", &[READ_ORDERS, CANCEL_ORDERS])
            .grant("viewer", &[READ_ORDERS]),
    ));
    options.tools = order_tools(&book).unwrap();
    let host = Host::open(&LoadedConfig::default(), options).unwrap();
    Service {
        _dir: dir,
        paths,
        host,
        person,
        book,
    }
}

impl Service {
    async fn call(&self, caller: &str, tool: &str, arguments: serde_json::Value) -> GateOutcome {
        let mut context = CallContext::new(CallSurface::User, CancellationToken::new());
        context.caller = Some(caller.to_owned());
        self.host.call_with(context, tool, arguments).await
    }

    fn status_of(&self, id: &str) -> String {
        let orders = self.book.list(None).unwrap();
        let order = orders.iter().find(|order| order.id == id).unwrap();
        serde_json::to_value(order.status).unwrap().to_string()
    }
}

#[tokio::test]
async fn a_caller_with_the_permission_lists_orders() {
    let service = service(ApprovalAnswer::AllowOnce);
    let outcome = service
        .call("viewer", "list_orders", json!({"customer": "ada"}))
        .await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    assert_eq!(
        outcome.output.unwrap().content,
        Some(json!([{"id": "A-100", "customer": "ada", "status": "open"}]))
    );
    assert!(
        service.person.asked.lock().unwrap().is_empty(),
        "a read never asks"
    );
    service.host.shutdown().await;
}

#[tokio::test]
async fn the_handler_refuses_a_caller_without_the_permission_before_anyone_is_asked() {
    let service = service(ApprovalAnswer::AllowOnce);
    let outcome = service
        .call("viewer", "cancel_order", json!({"order_id": "A-100"}))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Application)
    );
    assert_eq!(
        outcome.model_text(),
        "Tool call denied (application): cancel_order is denied by the application: viewer \
         does not hold orders.cancel"
    );
    assert!(service.person.asked.lock().unwrap().is_empty());
    assert_eq!(service.status_of("A-100"), "\"open\"");
    service.host.shutdown().await;
}

#[tokio::test]
async fn a_cancellation_is_approved_by_a_person_who_sees_its_effect() {
    let service = service(ApprovalAnswer::AllowOnce);
    let outcome = service
        .call("support", "cancel_order", json!({"order_id": "A-100"}))
        .await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    assert_eq!(service.status_of("A-100"), "\"cancelled\"");
    let asked = service.person.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].public_name, "cancel_order");
    assert_eq!(asked[0].effect, Some(CapabilityClass::Destructive));
    assert_eq!(asked[0].caller.as_deref(), Some("support"));
    assert_eq!(asked[0].arguments, json!({"order_id": "A-100"}));
    service.host.shutdown().await;
}

#[tokio::test]
async fn a_declined_cancellation_changes_nothing() {
    let service = service(ApprovalAnswer::Deny {
        reason: Some("the customer called back".into()),
    });
    let outcome = service
        .call("support", "cancel_order", json!({"order_id": "A-101"}))
        .await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Approval)
    );
    assert!(
        outcome.model_text().contains("the customer called back"),
        "{}",
        outcome.model_text()
    );
    assert_eq!(service.status_of("A-101"), "\"open\"");
    service.host.shutdown().await;
}

#[tokio::test]
async fn every_call_is_on_record_with_its_effect_and_caller() {
    let service = service(ApprovalAnswer::AllowOnce);
    service.call("viewer", "list_orders", json!({})).await;
    service
        .call("viewer", "cancel_order", json!({"order_id": "A-100"}))
        .await;
    service
        .call("support", "cancel_order", json!({"order_id": "A-100"}))
        .await;
    let rows = AuditStore::open(&service.paths.state_dir().join("audit.db"))
        .unwrap()
        .query(&AuditQuery::default())
        .unwrap();
    let summary: Vec<_> = rows
        .iter()
        .map(|row| {
            (
                row.public_name.as_str(),
                row.caller.as_deref(),
                row.effect.as_deref(),
                row.decision.as_str(),
                row.layer.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "list_orders",
                Some("viewer"),
                Some("read_only"),
                "allowed",
                "approval"
            ),
            (
                "cancel_order",
                Some("viewer"),
                Some("destructive"),
                "denied",
                "application"
            ),
            (
                "cancel_order",
                Some("support"),
                Some("destructive"),
                "allowed",
                "approval"
            ),
        ]
    );
    service.host.shutdown().await;
}
