//! Tools an embedding application defines in code, through the host's one gate: the derived
//! schema and typed arguments, the order authorization → approval → body under its timeout, a
//! timeout that never counts a pending approval, and the effect class in the audit trail; and
//! warden's own tools built in the same shape.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use warden_config::{LoadedConfig, Paths};
use warden_host::{
    AuthorizationError, AuthorizationHandler, AuthorizationQuestion, AuthorizationVerdict,
    CallContext, CapabilityClass, CodeTool, CodeToolError, Host, HostOptions,
};
use warden_policy::{
    ApprovalAnswer, ApprovalRequest, Approver, AuditQuery, AuditStore, BoxFuture, CallSurface,
    Decision, Layer, PermissionMode,
};

/// `lookup`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct LookupArguments {
    /// The order to look up
    order_id: String,
    /// Include the line items
    #[serde(default)]
    with_items: bool,
}

#[derive(Debug, Serialize)]
struct Order {
    id: String,
    items: Option<Vec<String>>,
}

/// What happened, in order: the handler's question, the approver's, the body's run.
#[derive(Default)]
struct Steps(Mutex<Vec<String>>);

impl Steps {
    fn push(&self, step: &str) {
        self.0.lock().unwrap().push(step.to_owned());
    }

    fn taken(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

struct RecordingHandler {
    steps: Arc<Steps>,
    allow: bool,
}

impl AuthorizationHandler for RecordingHandler {
    fn authorize<'a>(
        &'a self,
        question: &'a AuthorizationQuestion<'a>,
    ) -> BoxFuture<'a, Result<AuthorizationVerdict, AuthorizationError>> {
        self.steps.push(&format!(
            "authorize {} needing {:?}",
            question.public_name, question.required_permission
        ));
        let allow = self.allow;
        Box::pin(async move {
            Ok(if allow {
                AuthorizationVerdict::Allow
            } else {
                AuthorizationVerdict::deny("the caller may not do this")
            })
        })
    }
}

/// Approves after `delay`, recording the question.
struct SlowApprover {
    steps: Arc<Steps>,
    delay: Duration,
    requests: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for SlowApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, ApprovalAnswer> {
        self.steps.push(&format!("approve {}", request.public_name));
        self.requests.lock().unwrap().push(request.clone());
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            ApprovalAnswer::AllowOnce
        })
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    paths: Paths,
    host: Arc<Host>,
    steps: Arc<Steps>,
    approver: Arc<SlowApprover>,
    body_runs: Arc<AtomicUsize>,
    body_cancelled: Arc<AtomicUsize>,
}

/// A host in auto mode with `lookup` (read-only), `cancel` (destructive, requires approval,
/// `timeout`, permission `orders.cancel`) and `stall` (waits until cancelled, same timeout).
fn fixture(allow: bool, approval_delay: Duration, timeout: Duration) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(dir.path());
    let steps = Arc::new(Steps::default());
    let body_runs = Arc::new(AtomicUsize::new(0));
    let body_cancelled = Arc::new(AtomicUsize::new(0));
    let approver = Arc::new(SlowApprover {
        steps: steps.clone(),
        delay: approval_delay,
        requests: Mutex::new(Vec::new()),
    });
    let lookup = CodeTool::new(
        "lookup",
        "Looks up one order.",
        CapabilityClass::ReadOnly,
        |arguments: LookupArguments, _call| async move {
            Ok(Order {
                items: arguments.with_items.then(|| vec!["tea".to_owned()]),
                id: arguments.order_id,
            })
        },
    )
    .unwrap()
    .required_permission("orders.read");
    let (cancel_steps, cancel_runs) = (steps.clone(), body_runs.clone());
    let cancel = CodeTool::new(
        "cancel",
        "Cancels one order.",
        CapabilityClass::Destructive,
        move |arguments: LookupArguments, call| {
            let (steps, runs) = (cancel_steps.clone(), cancel_runs.clone());
            async move {
                steps.push("run cancel");
                runs.fetch_add(1, Ordering::SeqCst);
                if arguments.order_id == "missing" {
                    return Err(CodeToolError::new("no order named missing"));
                }
                Ok(format!(
                    "cancelled {} for {}",
                    arguments.order_id,
                    call.caller.unwrap_or_default()
                ))
            }
        },
    )
    .unwrap()
    .required_permission("orders.cancel")
    .requires_approval()
    .timeout(timeout)
    .unwrap();
    let stall_cancelled = body_cancelled.clone();
    let stall = CodeTool::new(
        "stall",
        "Waits for a reply that never comes.",
        CapabilityClass::ReadOnly,
        move |_: LookupArguments, call| {
            let cancelled = stall_cancelled.clone();
            async move {
                call.cancel.cancelled().await;
                cancelled.fetch_add(1, Ordering::SeqCst);
                Ok("stopped")
            }
        },
    )
    .unwrap()
    .timeout(timeout)
    .unwrap();
    let mut options = HostOptions::new(paths.clone(), dir.path().to_path_buf());
    options.policy.permissions.mode = PermissionMode::Auto;
    options.approver = Some(approver.clone());
    options.authorization = Some(Arc::new(RecordingHandler {
        steps: steps.clone(),
        allow,
    }));
    options.tools = vec![Arc::new(lookup), Arc::new(cancel), Arc::new(stall)];
    let host = Host::open(&LoadedConfig::default(), options).unwrap();
    Fixture {
        _dir: dir,
        paths,
        host,
        steps,
        approver,
        body_runs,
        body_cancelled,
    }
}

impl Fixture {
    async fn call(&self, name: &str, arguments: serde_json::Value) -> warden_policy::GateOutcome {
        let mut context = CallContext::new(CallSurface::Agent, CancellationToken::new());
        context.caller = Some("alice".into());
        self.host.call_with(context, name, arguments).await
    }

    fn audit(&self) -> Vec<warden_policy::AuditRow> {
        AuditStore::open(&self.paths.state_dir().join("audit.db"))
            .unwrap()
            .query(&AuditQuery::default())
            .unwrap()
    }
}

const SHORT: Duration = Duration::from_millis(10);

#[tokio::test]
async fn the_schema_is_derived_from_the_argument_type_and_the_body_gets_it_typed() {
    let f = fixture(true, SHORT, Duration::from_secs(30));
    let lookup = f
        .host
        .host_tools()
        .into_iter()
        .find(|descriptor| descriptor.public_name == "lookup")
        .unwrap();
    assert_eq!(
        *lookup.input_schema,
        warden_vocab::arguments_schema::<LookupArguments>()
    );
    assert_eq!(lookup.input_schema["required"], json!(["order_id"]));
    assert_eq!(
        f.host.host_tool_description("lookup").as_deref(),
        Some("Looks up one order.")
    );

    let outcome = f
        .call("lookup", json!({"order_id": "A-1", "with_items": true}))
        .await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    let output = outcome.output.unwrap();
    assert_eq!(output.content, Some(json!({"id": "A-1", "items": ["tea"]})));
    assert!(output.text.contains("\"A-1\""), "{}", output.text);

    // Arguments that do not fit the derived schema never reach the body.
    let invalid = f.call("lookup", json!({"order": "A-1"})).await;
    assert_eq!(
        (invalid.decision, invalid.layer),
        (Decision::Denied, Layer::Validation)
    );
    f.host.shutdown().await;
}

#[tokio::test]
async fn authorization_comes_first_then_approval_then_the_body() {
    let f = fixture(true, SHORT, Duration::from_secs(30));
    let outcome = f.call("cancel", json!({"order_id": "A-1"})).await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    assert_eq!(outcome.model_text(), "cancelled A-1 for alice");
    assert_eq!(
        f.steps.taken(),
        [
            "authorize cancel needing Some(\"orders.cancel\")",
            "approve cancel",
            "run cancel"
        ]
    );
    // The approver saw the declared effect.
    let asked = f.approver.requests.lock().unwrap()[0].clone();
    assert_eq!(asked.effect, Some(CapabilityClass::Destructive));
    assert_eq!(asked.reason, "cancel requires approval before every call");

    // A body's own failure is the tool's error result, on record as having run.
    let missing = f.call("cancel", json!({"order_id": "missing"})).await;
    assert_eq!(missing.decision, Decision::Allowed);
    assert!(missing.is_error());
    assert_eq!(missing.model_text(), "no order named missing");

    let rows = f.audit();
    let effects: Vec<_> = rows
        .iter()
        .map(|row| (row.public_name.as_str(), row.effect.as_deref()))
        .collect();
    assert_eq!(
        effects,
        [
            ("cancel", Some("destructive")),
            ("cancel", Some("destructive"))
        ]
    );
    assert_eq!(rows[0].caller.as_deref(), Some("alice"));
    f.host.shutdown().await;
}

#[tokio::test]
async fn a_denial_by_the_application_is_a_result_and_nothing_else_happens() {
    let f = fixture(false, SHORT, Duration::from_secs(30));
    let outcome = f.call("cancel", json!({"order_id": "A-1"})).await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::Denied, Layer::Application)
    );
    assert_eq!(
        outcome.model_text(),
        "Tool call denied (application): cancel is denied by the application: the caller may \
         not do this"
    );
    assert_eq!(
        f.steps.taken(),
        ["authorize cancel needing Some(\"orders.cancel\")"],
        "neither asked nor run"
    );
    assert_eq!(f.body_runs.load(Ordering::SeqCst), 0);
    let rows = f.audit();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].decision.as_str(), rows[0].layer.as_str()),
        ("denied", "application")
    );
    assert_eq!(rows[0].effect.as_deref(), Some("destructive"));
    f.host.shutdown().await;
}

#[tokio::test]
async fn an_approval_slower_than_the_timeout_does_not_count_against_it() {
    // The person takes six times the tool's timeout to answer; the body is quick.
    let f = fixture(
        true,
        Duration::from_millis(1200),
        Duration::from_millis(200),
    );
    let outcome = f.call("cancel", json!({"order_id": "A-1"})).await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    assert_eq!(f.body_runs.load(Ordering::SeqCst), 1);
    f.host.shutdown().await;
}

#[tokio::test]
async fn a_body_past_its_timeout_is_cancelled_and_the_session_goes_on() {
    let f = fixture(true, SHORT, Duration::from_millis(200));
    let outcome = f.call("stall", json!({"order_id": "A-1"})).await;
    assert_eq!(
        (outcome.decision, outcome.layer),
        (Decision::TimedOut, Layer::Timeout)
    );
    assert!(
        outcome
            .model_text()
            .starts_with("Tool call timed out: stall did not finish within"),
        "{}",
        outcome.model_text()
    );
    assert_eq!(
        f.body_cancelled.load(Ordering::SeqCst),
        1,
        "the body heard it"
    );
    let next = f.call("lookup", json!({"order_id": "A-2"})).await;
    assert_eq!(next.decision, Decision::Allowed);
    f.host.shutdown().await;
}

/// warden's own tools are built in the same shape: on record as warden's (`builtin`), with
/// their declared classes and kind and no effect, a body that reaches the session's host, and
/// arguments parsed once, worded as every tool words them.
#[tokio::test]
async fn warden_s_own_tools_share_the_shape_and_reach_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let paths = Paths::under_root(dir.path());
    let own = CodeTool::builtin_with_schema(
        "whose_session",
        "Names the session.",
        json!({"type": "object"}),
        warden_policy::CapabilitySet::READ_ONLY,
        |arguments: LookupArguments, invocation: warden_host::Invocation| async move {
            let session = invocation.host.session_id().to_owned();
            Ok(warden_policy::ToolOutput::text(format!(
                "{} in {session}",
                arguments.order_id
            )))
        },
    )
    .call_kind(warden_policy::CallKind::SkillLoad);
    let mut options = HostOptions::new(paths.clone(), dir.path().to_path_buf());
    options.policy.permissions.mode = PermissionMode::Auto;
    options.tools = vec![Arc::new(own)];
    let host = Host::open(&LoadedConfig::default(), options).unwrap();
    let call = |arguments: serde_json::Value| {
        let context = CallContext::new(CallSurface::Agent, CancellationToken::new());
        host.call_with(context, "whose_session", arguments)
    };
    let outcome = call(json!({"order_id": "A-1"})).await;
    assert_eq!(outcome.decision, Decision::Allowed, "{outcome:?}");
    assert_eq!(
        outcome.model_text(),
        format!("A-1 in {}", host.session_id())
    );
    // The schema lets it through; the typed arguments do not fit.
    let unfit = call(json!({"order": "A-1"})).await;
    assert_eq!(unfit.decision, Decision::Failed, "{unfit:?}");
    assert_eq!(
        unfit.reason.as_deref(),
        Some("whose_session: unknown field `order`, expected `order_id` or `with_items`")
    );
    let rows = AuditStore::open(&paths.state_dir().join("audit.db"))
        .unwrap()
        .query(&AuditQuery::default())
        .unwrap();
    let recorded: Vec<_> = rows
        .iter()
        .map(|row| {
            (
                row.server.as_deref(),
                row.kind.as_deref(),
                row.effect.as_deref(),
                row.classes.clone(),
            )
        })
        .collect();
    let expected = (
        Some("builtin"),
        Some("skill-load"),
        None,
        vec!["read_only".to_owned()],
    );
    assert_eq!(recorded, [expected.clone(), expected]);
    host.shutdown().await;
}
